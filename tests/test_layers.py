"""Every custom Keras layer of the kit through the layer harness (:mod:`kerasbert.testing`): build
and call, the config round trip, a ``.keras`` file loaded with ``safe_mode``, the float32,
mixed_bfloat16 and mixed_float16 policies against float32, and the JAX backend.

One test per layer and check. A check a layer does not pass is listed in its case's ``excluded``
with the reason, and runs as a strict ``xfail`` whose reason pytest prints (``-ra``): it must keep
failing, so a fixed layer shows up. What each layer computes (the CRF against tensorflow-addons'
numbers, GlobalPointer's formula, ...) is tested in the layer's own test file. The example head
plugin's ``SpanLogits`` runs the harness in the plugin's own tests.
"""

import keras
import numpy as np
import pytest

from kerasbert.testing import CHECKS
from kerasbert.testing import check_layer


def _rng():
    return np.random.default_rng(0)


def _mask(batch=2, length=6, lengths=(6, 4), dtype="int32"):
    return (np.arange(length)[None, :] < np.array(lengths)[:, None]).astype(dtype)


def crf():
    from kerasbert.layers.crf import CRF
    from kerasbert.layers.crf import allowed_transitions

    allowed, allowed_start = allowed_transitions(["O", "B-PER", "I-PER", "B-LOC", "I-LOC"], "BIO")
    data = {"potentials": 3 * _rng().normal(size=(2, 6, 5)).astype("float32"),
            "sequence_lengths": np.array([6, 4], "int32")}
    return CRF, {"num_tags": 5, "allowed": allowed.tolist(), "allowed_start": allowed_start.tolist()}, data


def global_pointer():
    from kerasbert.layers.global_pointer import EfficientGlobalPointer

    data = {"inputs": _rng().normal(size=(2, 6, 12)).astype("float32"), "mask": _mask()}
    return EfficientGlobalPointer, {"heads": 3, "head_size": 8}, data


def layer_mix():
    from kerasbert.layers.layer_mix import LayerMix

    return LayerMix, {"num_inputs": 3}, {"hidden_states": list(_rng().normal(size=(3, 2, 6, 4)).astype("float32"))}


def bilstm():
    from kerasbert.layers.bilstm import Bidirectional

    data = {"sequences": _rng().normal(size=(2, 6, 5)).astype("float32"), "mask": _mask(dtype="bool")}
    return Bidirectional, {"layer": keras.layers.LSTM(4, return_sequences=True)}, data


def biaffine():
    from kerasbert_apps.ner.heads.biaffine.layer import BiaffineSpanScorer

    data = {"inputs": _rng().normal(size=(2, 6, 12)).astype("float32"), "mask": _mask()}
    return BiaffineSpanScorer, {"types": 3, "size": 6, "max_span_length": 4, "none_prior": 1.0}, data


def subject_condition():
    from kerasbert_apps.triples.heads.casrel.model import SubjectConditionalLayerNorm

    data = {"sequence": _rng().normal(size=(2, 6, 8)).astype("float32"),
            "subject_span": np.array([[1, 2], [3, 3]], "int32")}
    return SubjectConditionalLayerNorm, {}, data


#: ``(id, the case's function -> (class, init kwargs, input data), options, {check: reason})``.
#: (The NER heads' fused BiLSTM, ``kerasbert_apps.ner.heads.bio.fused_bilstm``, is a function of
#: the BiLSTM layer's weights for serving graphs, not a layer: the head contract compares it.)
CASES = [
    ("CRF", crf, {}, {}),
    ("EfficientGlobalPointer", global_pointer, {}, {}),
    ("LayerMix", layer_mix, {}, {}),
    ("Bidirectional", bilstm, {}, {}),
    ("BiaffineSpanScorer", biaffine, {}, {}),
    ("SubjectConditionalLayerNorm", subject_condition, {}, {}),
]


def _params():
    for name, case, options, excluded in CASES:
        for check in CHECKS:
            marks = [pytest.mark.xfail(strict=True, raises=AssertionError, reason=excluded[check])] \
                if check in excluded else []
            yield pytest.param(case, options, check, id=f"{name}-{check}", marks=marks)


@pytest.mark.parametrize("case,options,check", list(_params()))
def test_layer(case, options, check):
    cls, init_kwargs, input_data = case()
    check_layer(check, cls, init_kwargs, input_data, **options)


# --------------------------------------------------------------- the harness itself: broken layers


def _register(cls):
    return keras.saving.register_keras_serializable(package="kerasbert_tests")(cls)


@_register
class WrongSpec(keras.layers.Layer):
    """Says it returns int32 and returns floats."""

    def call(self, inputs):
        return inputs * 2.0

    def compute_output_spec(self, inputs):
        return keras.KerasTensor(inputs.shape, dtype="int32")


@_register
class Forgetful(keras.layers.Layer):
    """Its config loses ``scale``."""

    def __init__(self, scale=1.0, **kwargs):
        super().__init__(**kwargs)
        self.scale = scale

    def call(self, inputs):
        return inputs * self.scale

    def get_config(self):
        return {key: value for key, value in super().get_config().items() if key != "scale"}


@_register
class Unsaved(keras.layers.Layer):
    """Holds a random offset that is no weight: a saved file does not keep it."""

    def build(self, input_shape):
        self.offset = np.random.default_rng().normal(size=input_shape[-1:]).astype("float32")

    def call(self, inputs):
        return inputs + self.offset

    def compute_output_shape(self, input_shape):
        return input_shape


@_register
class Stubborn(keras.layers.Layer):
    """Its sub-layer keeps float32 under any policy."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.dense = keras.layers.Dense(3, dtype="float32")

    def call(self, inputs):
        return self.dense(inputs)


@_register
class AlwaysFloat32(keras.layers.Layer):
    """Returns float32 under any policy (documented or not)."""

    def call(self, inputs):
        return keras.ops.cast(inputs, "float32") * 2.0


@_register
class Cancelling(keras.layers.Layer):
    """A variance as E[x^2] - E[x]^2 of values near 100: in a low precision the difference of
    two large numbers loses it."""

    def call(self, inputs):
        x = inputs + 100.0
        n = keras.ops.cast(keras.ops.shape(x)[-1], x.dtype)
        mean = keras.ops.sum(x, axis=-1) / n
        return keras.ops.sum(x * x, axis=-1) / n - mean * mean


@_register
class OnJaxOtherwise(keras.layers.Layer):
    """Adds 1 on JAX."""

    def call(self, inputs):
        return inputs + (1.0 if keras.backend.backend() == "jax" else 0.0)


@pytest.mark.parametrize("cls,init_kwargs,check,message", [
    (WrongSpec, {}, "call", "the symbolic call gives"),
    (Forgetful, {"scale": 3.0}, "config", "from_config: output 0"),
    (Unsaved, {}, "saving", "before and after"),
    (Stubborn, {}, "mixed_bfloat16", "sub-layer"),
    (AlwaysFloat32, {}, "mixed_float16", "is float32, not float16"),
    (Cancelling, {}, "mixed_bfloat16", "against float32"),
    (OnJaxOtherwise, {}, "jax", "JAX against TensorFlow"),
], ids=lambda x: x.__name__ if isinstance(x, type) else None)
def test_the_harness_fails_a_layer_broken_for_a_check(cls, init_kwargs, check, message):
    """Each check fails on a layer broken in the way it checks (which builds and calls)."""
    data = {"inputs": _rng().normal(size=(2, 5, 4)).astype("float32")}
    if check != "call":
        check_layer("call", cls, init_kwargs, data)
    with pytest.raises(AssertionError, match=message):
        check_layer(check, cls, init_kwargs, data)


def test_a_documented_output_dtype_passes_and_exclusions_are_printed(capsys):
    from kerasbert.testing import run_layer_test

    data = {"inputs": _rng().normal(size=(2, 5, 4)).astype("float32")}
    run_layer_test(AlwaysFloat32, {}, data, output_dtype="float32", excluded={"jax": "shown here", "saving": "too"})
    printed = capsys.readouterr().out
    assert "AlwaysFloat32: the jax check is excluded: shown here" in printed and "saving check is excluded" in printed
    with pytest.raises(ValueError, match="unknown checks"):
        run_layer_test(AlwaysFloat32, {}, data, excluded={"bfloat16": "no such check"})
