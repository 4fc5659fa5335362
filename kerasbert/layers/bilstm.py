"""The heads' BiLSTM: Keras's ``Bidirectional(LSTM)``, fast on JAX.

On the JAX backend Keras runs a masked LSTM as a ``lax.scan`` of the whole
cell per token, each direction on its own, with the input projection inside
the loop; on a GPU that is a few small kernels per token and direction, and
the per-step weight gradients in the backward pass (most of a BERT-BiLSTM-CRF
training step at sequence length 128). :class:`Bidirectional` keeps Keras's
layer -- its class, sub-layers and variables, so model folders written before
load unchanged -- and, on JAX, computes the same function another way
(``implementation``):

* ``"cudnn"``: cuDNN's bidirectional LSTM (``jax.experimental.rnn.lstm``, the
  kernel PyTorch's ``nn.LSTM`` runs), one call for both directions with each
  row's length; it computes in float32 (its only dtype), also under mixed
  precision;
* ``"scan"``: the input projections of every step and both directions as one
  matrix product before the loop, both directions in one ``lax.scan`` (the
  recurrent products as one batched product per step), unrolled
  :data:`UNROLL` steps;
* ``"keras"``: Keras's own (the reference);
* ``"auto"`` (the default): ``"scan"`` on JAX -- on a GPU too, where it
  measured faster than cuDNN's kernel as ``jax.experimental.rnn`` runs it
  (the ``gpu_training`` benchmark record has both); Keras's own on
  TensorFlow, which already runs it with cuDNN on a GPU (and the serving
  graphs with TensorFlow's fused kernel:
  :mod:`kerasbert_apps.ner.heads.bio.fused_bilstm`). ``"cudnn"`` is used
  only where asked for, and only where a first call of it matches ``"scan"``
  on a tiny input (checked once per process; otherwise a warning and
  ``"scan"``).

The mask must be right-padded (each row's real tokens first), as every padding
mask of the kit is: cuDNN takes lengths, not a mask. ``"scan"`` computes
Keras's masked recurrence for any mask (a masked step keeps the state and
outputs zeros; the backward direction runs over the time-reversed sequence).
Other configurations (dropout, ``return_state``, another merge mode or cell)
always run Keras's own.

The class is named ``Bidirectional`` on purpose: Keras names a model's layers
in its weights file after their class, and old folders hold their BiLSTM under
``layers/bidirectional``.
"""

import functools
import warnings

import keras
from keras import ops

#: Time steps per iteration of the ``"scan"`` implementation's loop.
UNROLL = 4
IMPLEMENTATIONS = ("auto", "cudnn", "scan", "keras")


@keras.saving.register_keras_serializable(package="kerasbert")
class Bidirectional(keras.layers.Bidirectional):
    """``keras.layers.Bidirectional`` with a fast JAX path for a plain LSTM.

    Args:
        layer, merge_mode, backward_layer: as Keras's.
        implementation: ``"auto"``, ``"cudnn"``, ``"scan"`` or ``"keras"``
            (see the module docstring); read at each trace, so it can be
            changed on a built model before training.
    """

    def __init__(self, layer, merge_mode="concat", implementation="auto", **kwargs):
        if implementation not in IMPLEMENTATIONS:
            raise ValueError(f"implementation must be one of {', '.join(IMPLEMENTATIONS)}; got {implementation!r}")
        super().__init__(layer, merge_mode=merge_mode, **kwargs)
        self.implementation = implementation

    def get_config(self):
        return {**super().get_config(), "implementation": self.implementation}

    def call(self, sequences, initial_state=None, mask=None, training=None):
        chosen = self.chosen_implementation(initial_state, training)
        if chosen == "keras":
            return super().call(sequences, initial_state=initial_state, mask=mask, training=training)
        lstm = cudnn_bilstm if chosen == "cudnn" else scan_bilstm
        cells = (self.forward_layer.cell, self.backward_layer.cell)
        return ops.cast(lstm(sequences, mask, *cells), self.compute_dtype)

    def chosen_implementation(self, initial_state=None, training=None):
        """What :meth:`call` runs now: ``"cudnn"``, ``"scan"`` or ``"keras"``."""
        if keras.backend.backend() != "jax" or self.implementation == "keras" or not self.fast_path_applies(
                initial_state, training):
            return "keras"
        if self.implementation == "cudnn":
            return "cudnn" if cudnn_works() else "scan"
        return "scan"  # "auto" and "scan"

    def fast_path_applies(self, initial_state=None, training=None):
        """Whether the configuration is the one the fast paths compute: two
        LSTMs (forward, then backward), tanh / sigmoid, biases, no dropout
        (in training), full sequences concatenated, no state in or out."""
        cells = []
        for lstm, backwards in ((self.forward_layer, False), (self.backward_layer, True)):
            if not isinstance(lstm, keras.layers.LSTM) or lstm.go_backwards != backwards:
                return False
            cell = lstm.cell
            if not (cell.use_bias and cell.activation is keras.activations.tanh
                    and cell.recurrent_activation is keras.activations.sigmoid):
                return False
            if training and (cell.dropout or cell.recurrent_dropout):
                return False
            cells.append(cell)
        return (self.merge_mode == "concat" and self.return_sequences and not self.return_state
                and not self.stateful and initial_state is None and cells[0].units == cells[1].units)


def _lengths(mask, x):
    import jax.numpy as jnp

    if mask is None:
        return jnp.full((x.shape[0],), x.shape[1], jnp.int32)
    return jnp.sum(mask.astype(jnp.int32), axis=1)


def scan_bilstm(x, mask, forward_cell, backward_cell, unroll=UNROLL):
    """Both directions of a Keras BiLSTM (``[batch, time, 2 * units]``) as one
    ``lax.scan`` (JAX), in ``x``'s dtype: the input projections of all steps and
    both directions as one product, the recurrent products of both directions
    as one batched product per step; a masked step keeps the state and
    outputs zeros (Keras's masked recurrence, for any mask)."""
    import jax
    import jax.numpy as jnp

    dtype = x.dtype
    units = forward_cell.units
    kernel = jnp.concatenate([ops.convert_to_tensor(forward_cell.kernel), ops.convert_to_tensor(backward_cell.kernel)], 1).astype(dtype)
    bias = jnp.concatenate([ops.convert_to_tensor(forward_cell.bias), ops.convert_to_tensor(backward_cell.bias)]).astype(dtype)
    recurrent = jnp.stack([ops.convert_to_tensor(forward_cell.recurrent_kernel),
                           ops.convert_to_tensor(backward_cell.recurrent_kernel)]).astype(dtype)  # [2, units, 4 units]
    z = jnp.einsum("btf,fk->tbk", x, kernel) + bias  # [time, batch, 8 units]
    z = jnp.stack([z[..., : 4 * units], z[::-1, :, 4 * units :]], 1)  # [time, 2, batch, 4 units]; backward reversed
    if mask is None:
        mask = jnp.ones(x.shape[:2], bool)
    mask = jnp.asarray(mask).astype(bool).T  # [time, batch]
    steps = jnp.stack([mask, mask[::-1]], 1)[..., None]  # [time, 2, batch, 1]

    def step(carry, inputs):
        h, c = carry
        z_t, m_t = inputs
        gates = z_t + jnp.einsum("dbu,duk->dbk", h, recurrent)
        i, f, g, o = jnp.split(gates, 4, axis=-1)
        c_new = jax.nn.sigmoid(f) * c + jax.nn.sigmoid(i) * jnp.tanh(g)
        h_new = jax.nn.sigmoid(o) * jnp.tanh(c_new)
        h_new, c_new = jnp.where(m_t, h_new, h), jnp.where(m_t, c_new, c)
        return (h_new, c_new), jnp.where(m_t, h_new, jnp.zeros_like(h_new))

    zeros = jnp.zeros((2, x.shape[0], units), dtype)
    _, out = jax.lax.scan(step, (zeros, zeros), (z, steps), unroll=unroll)  # [time, 2, batch, units]
    return jnp.concatenate([out[:, 0], out[::-1, 1]], -1).transpose(1, 0, 2)


def cudnn_weights(forward_cell, backward_cell):
    """The flat float32 weight vector of ``jax.experimental.rnn.lstm``
    (bidirectional, one layer) holding the two Keras cells' weights: every
    matrix first (input then recurrent, transposed, forward then backward),
    then the biases (Keras's one bias as the input bias, zeros as the
    recurrent one). Keras's gate order i, f, c, o is cuDNN's i, f, g, o."""
    import jax.numpy as jnp

    matrices, biases = [], []
    for cell in (forward_cell, backward_cell):
        for matrix in (cell.kernel, cell.recurrent_kernel):
            matrices.append(ops.convert_to_tensor(matrix).astype(jnp.float32).T.reshape(-1))
        bias = ops.convert_to_tensor(cell.bias).astype(jnp.float32)
        biases += [bias, jnp.zeros_like(bias)]
    return jnp.concatenate(matrices + biases)


def cudnn_bilstm(x, mask, forward_cell, backward_cell, lstm=None):
    """The BiLSTM by cuDNN (``lstm``: ``jax.experimental.rnn.lstm`` unless
    given, e.g. its reference in a test), in float32, with each row's length
    (the sum of its right-padded mask); padded positions are zeros."""
    import jax.numpy as jnp

    if lstm is None:
        from jax.experimental.rnn import lstm
    units = forward_cell.units
    x32 = jnp.asarray(x).astype(jnp.float32)
    lengths = _lengths(mask, x32)
    zeros = jnp.zeros((2, x32.shape[0], units), jnp.float32)
    y, _, _ = lstm(x32, zeros, zeros, cudnn_weights(forward_cell, backward_cell), lengths,
                   input_size=x32.shape[-1], hidden_size=units, num_layers=1, dropout=0.0, bidirectional=True)
    if mask is not None:
        y = y * jnp.asarray(mask).astype(jnp.float32)[:, :, None]
    return y


@functools.lru_cache(maxsize=None)
def cudnn_works():
    """Whether ``"cudnn"`` runs cuDNN: JAX on a CUDA GPU with
    ``jax.experimental.rnn``'s cuDNN kernels, whose output and gradients on a
    tiny ragged batch match :func:`scan_bilstm`'s (computed once per process;
    a failure is a warning, and the scan is used)."""
    import jax

    try:
        device = jax.devices()[0]
        if device.platform != "gpu" or "rocm" in str(getattr(device.client, "platform_version", "")).lower():
            return False
        from jax.experimental import rnn

        if getattr(rnn, "gpu_rnn", None) is None:
            return False
    except Exception:  # no jax, no device, no rnn module: nothing to probe
        return False
    try:
        with jax.ensure_compile_time_eval():
            return _probe_cudnn()
    except Exception as error:  # noqa: BLE001 - any failure means: do not use it
        warnings.warn(f"cuDNN's LSTM failed a first call ({type(error).__name__}: {error}); the BiLSTM runs as a scan",
                      stacklevel=2)
        return False


def _probe_cudnn():
    import types

    import jax
    import jax.numpy as jnp
    import numpy as np

    rng = np.random.default_rng(0)
    units, features = 3, 5

    def cell():
        return types.SimpleNamespace(units=units, kernel=rng.normal(size=(features, 4 * units)).astype(np.float32),
                                     recurrent_kernel=rng.normal(size=(units, 4 * units)).astype(np.float32),
                                     bias=rng.normal(size=(4 * units,)).astype(np.float32))

    cells = (cell(), cell())
    x = jnp.asarray(rng.normal(size=(2, 4, features)).astype(np.float32))
    mask = jnp.asarray(np.arange(4)[None] < np.array([[4], [2]]))

    def loss(fn, x):
        return jnp.sum(fn(x, mask, *cells) * jnp.arange(2 * units, dtype=jnp.float32))

    got = jax.value_and_grad(functools.partial(loss, cudnn_bilstm))(x)
    with jax.default_matmul_precision("float32"):
        want = jax.value_and_grad(functools.partial(loss, scan_bilstm))(x)
    for a, b in zip(got, want):
        if not np.allclose(np.asarray(a), np.asarray(b), rtol=2e-2, atol=2e-2):
            warnings.warn("cuDNN's LSTM differs from the scan on a tiny input; the BiLSTM runs as a scan", stacklevel=3)
            return False
    return True


def bilstm(units, name=None, implementation="auto"):
    """The heads' BiLSTM: ``units`` per direction, outputs concatenated, full
    sequences, in the global dtype policy (mixed precision included)."""
    return Bidirectional(keras.layers.LSTM(units, return_sequences=True), name=name, implementation=implementation)
