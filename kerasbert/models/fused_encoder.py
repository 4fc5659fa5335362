"""The encoder as TensorFlow ops that oneDNN fuses: what serving graphs run.

A kerasbert encoder (:mod:`kerasbert.models.encoder`) is built from keras-hub layers,
which is what training (on any backend) and checkpoints need. Traced into a
TensorFlow graph on a CPU, those layers give TensorFlow's graph optimizer
(grappler's oneDNN "remapper") almost nothing to fuse: Keras's ``Dense`` and
``EinsumDense`` add their bias with ``AddV2`` rather than ``BiasAdd``, and its
exact GELU and LayerNorm are written in forms the remapper does not match. So
every matmul runs alone, and every bias, residual add, GELU and LayerNorm is
one or more separate passes over memory -- cheap enough in float32 but, in
bfloat16, slower than the matmuls themselves: TensorFlow's elementwise
kernels (Eigen) have no bfloat16 vector path, so under a ``bfloat16`` policy
the time AMX / AVX512-BF16 saves in the matmuls is lost again in ``Mul``,
``AddV2``, ``Erfc``, ``Tanh`` and ``Cast`` (``bench/serving_profile.py
--ops`` shows it op by op).

:func:`fused_encoder` computes the same function with the same variables,
written for the remapper: each projection is ``MatMul`` + ``BiasAdd`` (one
``_FusedMatMul``), the residual add follows the ``BiasAdd`` directly (fused
too), the feed-forward's GELU is written in the form the remapper folds into
its matmul (erf and tanh forms), and attention is two batched matmuls around
a softmax. It runs in the encoder's own variable dtype: float32, or bfloat16
for an encoder rebuilt under the ``bfloat16`` policy
(:meth:`kerasbert_apps.base.pipeline.Pipeline.with_precision`), where everything but the
LayerNorm statistics and the softmax stays in bfloat16 inside oneDNN.

Training, eager ``model(...)`` calls and the JAX backend keep using the
Keras layers. Inside :func:`serving_graph` (the serving graphs of
:meth:`kerasbert_apps.base.pipeline.Pipeline.serve`, hence ``predict`` on TensorFlow and
every SavedModel, and the ``ids`` exports), an encoder called in inference
mode while a TensorFlow function is traced runs this instead -- whatever head
model it sits in. Tests hold the two to the same numbers
(``tests/test_fused_encoder.py``). Core TensorFlow ops only.

**Weights as constants** (:func:`constant_weights`, what bfloat16 exports
trace under): the projection kernels are written into the graph as
constants rather than read from variables. oneDNN then knows a kernel cannot
change between calls: it repacks it once into the blocked layout of its
fastest kernel (AMX / AVX512 ``brgemm``) and keeps it, where a kernel read
from a variable is used in its plain layout by a slower GEMM that repacks it
on every call -- which, for one short sentence, costs more than the
arithmetic (``bench/encoder_floor.py``: ``tf-fused-bf16-const``). Only for graphs
that outlive no weight update: a SavedModel, never ``predict`` in a process
that may train on.
"""

import contextlib
import math
import threading


def _gelu_erf(h):
    # 0.5 * h * (1 + erf(h / sqrt(2))), in the operand order of the remapper's
    # "MatMul + BiasAdd + GeluExact" pattern (it then runs inside the matmul).
    return ((_tf().math.erf(h * 0.7071067811865476) + 1.0) * 0.5) * h


def _tf():
    import tensorflow as tf

    return tf


ACTIVATIONS = {
    "gelu_erf": _gelu_erf,
    "gelu_tanh": lambda h: _tf().nn.gelu(h, approximate=True),  # TensorFlow's own form: fused as GeluApproximate
    "relu": lambda h: _tf().nn.relu(h),
    "tanh": lambda h: _tf().math.tanh(h),
    "linear": lambda h: h,
}


_state = threading.local()


@contextlib.contextmanager
def _raised(flag):
    """``flag`` of this thread's state set while the block runs, then as it was."""
    before = getattr(_state, flag, False)
    setattr(_state, flag, True)
    try:
        yield
    finally:
        setattr(_state, flag, before)


def constant_weights():
    """While active, :func:`fused_encoder` traces the projection kernels as
    constants (module docstring). For exports only: a graph traced under it
    keeps the values the kernels had when it was traced."""
    return _raised("constant")


def serving_graph():
    """While active, kerasbert encoders traced into a TensorFlow graph in
    inference mode compute through :func:`fused_encoder` (see
    :func:`graph_call`)."""
    return _raised("active")


def graph_call(encoder, inputs, training):
    """The encoder's outputs from :func:`fused_encoder` when that applies
    (inside :func:`serving_graph`, TensorFlow tracing a function, not
    training, an encoder it covers); ``None`` otherwise (the encoder then runs
    its Keras layers)."""
    if training or not getattr(_state, "active", False):
        return None
    import keras

    if keras.backend.backend() != "tensorflow":
        return None
    import tensorflow as tf

    if not tf.inside_function():
        return None
    fused = fused_encoder(encoder)
    return None if fused is None else fused(inputs)


def _supported(encoder):
    """Whether :func:`fused_encoder` covers ``encoder``: an encoder of
    kerasbert's three families (what :mod:`kerasbert.models.encoder` gives
    each of them: ``embeddings``, ``schedule``, ``hidden_act``), post-norm
    keras-hub transformer layers, plain (not quantized) kernels, float32 or
    bfloat16 variables. (Read by the encoder's interface, not its class: the
    encoder module imports this one.)"""
    from keras_hub.layers import TransformerEncoder

    if not all(hasattr(encoder, name) for name in ("embeddings", "schedule", "hidden_act", "output_hidden_states")):
        return False
    if encoder.hidden_act not in ACTIVATIONS or encoder.dtype_policy.variable_dtype not in ("float32", "bfloat16"):
        return False
    for layer in encoder.schedule:
        if not isinstance(layer, TransformerEncoder) or layer.normalize_first:
            return False
        attention = layer._self_attention_layer
        dense = (attention._query_dense, attention._key_dense, attention._value_dense, attention._output_dense,
                 layer._feedforward_intermediate_dense, layer._feedforward_output_dense)
        if any(getattr(d, "quantization_mode", None) or d.bias is None for d in dense):
            return False
    return True


class _Constants:
    """The small constants of one traced encoder call (shapes, permutations,
    axes), each made once and read by every layer: a graph node fewer per
    use. (The GELU's constants stay each its own: the remapper's pattern
    matches them.)"""

    def __init__(self):
        self._made = {}

    def __call__(self, value, dtype=None):
        key = (repr(value), str(dtype))
        if key not in self._made:
            self._made[key] = _tf().constant(value, dtype)
        return self._made[key]


def _layer_norm(x, layer, const):
    """Keras's LayerNormalization of ``x`` [tokens, hidden] (statistics in float32, as Keras does for bfloat16)."""
    tf = _tf()
    dtype = x.dtype
    x = tf.cast(x, tf.float32)
    axis = const(-1)
    mean = tf.reduce_mean(x, axis=axis, keepdims=True)
    centred = x - mean
    variance = tf.reduce_mean(tf.square(centred), axis=axis, keepdims=True)
    scale = tf.math.rsqrt(variance + const(layer.epsilon, tf.float32)) * tf.cast(layer.gamma, tf.float32)
    return tf.cast(centred * scale + tf.cast(layer.beta, tf.float32), dtype)


def _projection(x, dense, width, const):
    """``x`` [tokens, in] through an ``EinsumDense``/``Dense`` ``dense`` as one ``MatMul`` + ``BiasAdd``."""
    tf = _tf()
    kernel = dense.kernel
    if getattr(_state, "constant", False) and tf.inside_function():
        with tf.init_scope():  # the value now, outside the function being traced
            value = tf.reshape(tf.convert_to_tensor(kernel.value), [-1, width]).numpy()
        matrix = tf.constant(value)
    elif len(kernel.shape) == 2:  # a Dense kernel: already [in, width]
        matrix = kernel
    else:
        matrix = tf.reshape(kernel, const([-1, width]))
    bias = dense.bias if len(dense.bias.shape) == 1 else tf.reshape(dense.bias, const([width]))
    return tf.nn.bias_add(tf.matmul(x, matrix), bias)


def _transformer_layer(x, layer, bias, shapes, activation, const):
    """One keras-hub ``TransformerEncoder`` (post-norm) on ``x`` [batch * length, hidden];
    ``shapes(heads, size)`` gives ``[batch, length, heads, size]``."""
    tf = _tf()
    attention = layer._self_attention_layer
    heads, size = attention._num_heads, attention._key_dim
    hidden = heads * size
    split_shape, swap = shapes(heads, size), const([0, 2, 1, 3])

    def split(t):  # [batch * length, hidden] -> [batch, heads, length, size]
        return tf.transpose(tf.reshape(t, split_shape), swap)

    query = split(_projection(x, attention._query_dense, hidden, const))
    key = split(_projection(x, attention._key_dense, hidden, const))
    value = split(_projection(x, attention._value_dense, hidden, const))
    scores = tf.matmul(query, key, transpose_b=True) * const(1.0 / math.sqrt(size), query.dtype)
    probabilities = tf.cast(tf.nn.softmax(tf.cast(scores, tf.float32) + bias), x.dtype)
    context = tf.reshape(tf.transpose(tf.matmul(probabilities, value), swap), const([-1, hidden]))
    width = x.shape[-1]
    x = _layer_norm(_projection(context, attention._output_dense, width, const) + x,
                    layer._self_attention_layer_norm, const)
    inner = layer._feedforward_intermediate_dense
    h = activation(_projection(x, inner, inner.units, const))
    return _layer_norm(_projection(h, layer._feedforward_output_dense, width, const) + x,
                       layer._feedforward_layer_norm, const)


def fused_encoder(encoder):
    """A function ``inputs -> outputs`` that computes ``encoder(inputs,
    training=False)`` in a TensorFlow graph with fusable ops (see the module
    docstring): ``inputs`` is the encoder's dict (``token_ids``,
    ``segment_ids``, ``padding_mask``, int32 [batch, len]); the outputs are
    ``"sequence_output"`` and, when the encoder has ``output_hidden_states``,
    ``"hidden_states"``, and ``"pooled_output"`` (which a graph prunes away
    when nothing reads it). ``None`` when the encoder is not one this covers:
    call the encoder."""
    if not _supported(encoder):
        return None
    activation = ACTIVATIONS[encoder.hidden_act]

    def call(inputs):
        tf = _tf()
        with tf.name_scope("fused_encoder"):
            return _call(inputs)

    def _call(inputs):
        tf = _tf()
        const = _Constants()
        x = encoder.embeddings(inputs)  # the Keras embedding layers: gathers, one LayerNorm
        width = x.shape[-1]
        batch_length = tf.shape(inputs["padding_mask"])  # [batch, length]
        split_shapes = {}

        def shapes(heads, size):  # [batch, length, heads, size], made once
            if (heads, size) not in split_shapes:
                split_shapes[heads, size] = tf.concat([batch_length, const([heads, size])], 0)
            return split_shapes[heads, size]

        mask = tf.cast(inputs["padding_mask"], tf.float32)[:, None, None, :]
        bias = (1.0 - mask) * -1e9  # Keras's masked softmax: -1e9 where the key is padding
        x = tf.reshape(x, const([-1, width]))
        hidden_states = [x]
        for layer in encoder.schedule:
            x = _transformer_layer(x, layer, bias, shapes, activation, const)
            hidden_states.append(x)
        sequence_shape = tf.concat([batch_length, const([width])], 0)
        sequence = tf.reshape(x, sequence_shape)
        pooler = getattr(encoder, "pooled_dense", None)
        out = {"sequence_output": sequence,
               "pooled_output": pooler(sequence[:, 0, :]) if pooler is not None else sequence[:, 0, :]}
        if encoder.output_hidden_states:
            out["hidden_states"] = [tf.reshape(h, sequence_shape) for h in hidden_states]
        return out

    return call
