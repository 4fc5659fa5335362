"""GELU, and its compiled form for TensorFlow training steps.

The encoders' feed-forward activation (:func:`kerasbert.models.encoder.gelu_erf`,
:func:`kerasbert.models.encoder.gelu_tanh`) calls :func:`gelu`. Outside
:func:`compiled_activations` that is ``keras.activations.gelu``: plain
``keras.ops``, any backend.

Inside :func:`compiled_activations` on the TensorFlow backend, in bfloat16 (what
:meth:`kerasbert_apps.base.model.TaskModel.train_step` and the masked-LM
pre-training step trace under), GELU is one XLA-compiled kernel for the
forward pass and one for its gradient (``tf.custom_gradient``), each a single
pass over memory computed in float32, instead of the dozen TensorFlow
elementwise ops (``Erfc``/``Tanh``, ``Mul``, ``Exp``, ``Square``, ``Cast`` and
their gradients) that autodiff of ``keras.activations.gelu`` runs: in a
training step those are one of the largest shares of the time, and under
``mixed_bfloat16`` larger than the matmuls they follow, since TensorFlow's
elementwise kernels have no bfloat16 vector path (``docs/training-speed.md``,
``bench/training_profile.py``). Only the activation is compiled: the matmuls
stay oneDNN's (XLA's CPU backend has no AMX path).

Training steps only: a graph traced under this context holds XLA launches, so
the serving graphs and exports, traced outside it, never do. JAX jits the
whole step already and ignores the context.
"""

import contextlib
import math
import threading

import keras

_state = threading.local()


@contextlib.contextmanager
def compiled_activations():
    """Within: :func:`gelu` traced on TensorFlow is the XLA-compiled kernel
    pair (see the module docstring)."""
    previous = getattr(_state, "on", False)
    _state.on = True
    try:
        yield
    finally:
        _state.on = previous


def gelu(x, approximate):
    """GELU (``approximate``: the tanh form), compiled inside
    :func:`compiled_activations` on TensorFlow for a :data:`COMPILED_DTYPES`
    input whose last axis is at least :data:`COMPILE_FROM_WIDTH`,
    ``keras.activations.gelu`` otherwise. Same values either way (float32 arithmetic; the compiled form
    rounds a bfloat16 input once, at the end)."""
    if (getattr(_state, "on", False) and keras.backend.backend() == "tensorflow"
            and x.dtype in COMPILED_DTYPES and (x.shape[-1] or 0) >= COMPILE_FROM_WIDTH):
        return _compiled()[bool(approximate)](x)
    return keras.activations.gelu(x, approximate=approximate)


#: The compute dtypes compiled: bfloat16 (``mixed_bfloat16``), where
#: TensorFlow's elementwise kernels are slowest. In float32 they are vectorized
#: and the compiled pair measured no faster within a whole training step;
#: float16 was not measured.
COMPILED_DTYPES = ("bfloat16",)

#: Narrower layers keep ``keras.activations.gelu``: compiling for each new
#: batch shape costs more than a small layer's GELU saves.
COMPILE_FROM_WIDTH = 256

_SQRT_HALF = 1 / math.sqrt(2)
_INV_SQRT_2PI = 1 / math.sqrt(2 * math.pi)
_TANH_SCALE = math.sqrt(2 / math.pi)


def _erf_parts(tf, x):
    cdf = 0.5 * tf.math.erfc(-x * _SQRT_HALF)
    return x * cdf, lambda: cdf + x * tf.exp(-0.5 * x * x) * _INV_SQRT_2PI


def _tanh_parts(tf, x):
    t = tf.math.tanh(_TANH_SCALE * (x + 0.044715 * x * x * x))
    y = 0.5 * x * (1 + t)
    return y, lambda: 0.5 * (1 + t) + 0.5 * x * (1 - t * t) * _TANH_SCALE * (1 + 3 * 0.044715 * x * x)


_functions = {}


def _compiled_pair(tf, parts):
    """GELU from ``parts`` as a ``tf.custom_gradient`` over two ``jit_compile``
    functions (the value; the gradient from the input), float32 inside."""

    @tf.function(jit_compile=True, autograph=False)
    def forward(x):
        return tf.cast(parts(tf, tf.cast(x, tf.float32))[0], x.dtype)

    @tf.function(jit_compile=True, autograph=False)
    def backward(x, dy):
        derivative = parts(tf, tf.cast(x, tf.float32))[1]()
        return tf.cast(tf.cast(dy, tf.float32) * derivative, dy.dtype)

    @tf.custom_gradient
    def compiled_gelu(x):
        return forward(x), lambda dy: backward(x, dy)

    return compiled_gelu


def _compiled():
    """``{approximate: gelu}`` (:func:`_compiled_pair`), built once."""
    if not _functions:
        import tensorflow as tf

        _functions.update({False: _compiled_pair(tf, _erf_parts), True: _compiled_pair(tf, _tanh_parts)})
    return _functions


class CompiledActivationsTraining:
    """Mixin for a ``keras.Model``: its training step is traced under
    :func:`compiled_activations` (prediction and evaluation steps are not)."""

    def train_step(self, *args, **kwargs):
        with compiled_activations():
            return super().train_step(*args, **kwargs)
