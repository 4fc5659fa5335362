"""kerasbert.layers.activations: the compiled GELU of TensorFlow training steps."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from kerasbert.layers import activations
from kerasbert.layers.activations import CompiledActivationsTraining
from kerasbert.layers.activations import compiled_activations
from kerasbert.layers.activations import gelu

WIDTH = activations.COMPILE_FROM_WIDTH


def _value_and_gradient(x, approximate):
    @tf.function
    def run(x):
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = gelu(x, approximate)
            loss = tf.reduce_sum(tf.cast(y, tf.float32) * tf.range(1.0, WIDTH + 1.0) / WIDTH)
        return y, tape.gradient(loss, x)

    return [t.numpy().astype(np.float32) for t in run(x)]


def _ops(fn, *args):
    graph = tf.function(fn).get_concrete_function(*args).graph
    return {op.type for op in graph.get_operations()}


@pytest.mark.parametrize("approximate", [False, True], ids=["erf", "tanh"])
def test_compiled_gelu_has_keras_values_and_gradients(approximate):
    x = tf.random.stateless_normal([3, 5, WIDTH], seed=[1, 2]) * 3.0
    exact = _value_and_gradient(x, approximate)  # float32: keras.activations.gelu
    plain = _value_and_gradient(tf.cast(x, "bfloat16"), approximate)
    with compiled_activations():
        compiled = _value_and_gradient(tf.cast(x, "bfloat16"), approximate)
        assert np.array_equal(_value_and_gradient(x, approximate)[0], exact[0])  # float32 is not compiled
    for e, a, b in zip(exact, plain, compiled):
        # bfloat16 rounding of the input (and the output) on both sides; the
        # compiled form computes in float32 in between, so it is no further
        # from the float32 values than keras's bfloat16 arithmetic
        np.testing.assert_allclose(b, a, atol=0.05, rtol=0.02)
        assert np.abs(b - e).max() <= np.abs(a - e).max() + 1e-6


def test_only_wide_layers_inside_the_context_are_compiled():
    wide, narrow = tf.TensorSpec([None, None, WIDTH], "bfloat16"), tf.TensorSpec([None, None, WIDTH - 1], "bfloat16")
    plain = _ops(lambda x: gelu(x, False), wide)
    with compiled_activations():
        compiled = _ops(lambda x: gelu(x, False), wide)
        small = _ops(lambda x: gelu(x, False), narrow)
    assert "Erfc" in plain or "Erf" in plain
    assert not {"Erf", "Erfc"} & compiled and compiled & {"StatefulPartitionedCall", "PartitionedCall"}
    assert {"Erf", "Erfc"} & small
    assert not getattr(activations._state, "on", False)  # the context restores the flag


def test_a_training_step_is_compiled_and_predict_is_not(monkeypatch):
    class Tiny(CompiledActivationsTraining, keras.Model):
        pass

    traced = []
    compiled = activations._compiled
    monkeypatch.setattr(activations, "_compiled", lambda: traced.append("compiled") or compiled())
    inputs = keras.Input((4, WIDTH))
    hidden = keras.layers.Dense(WIDTH, activation=lambda x: gelu(x, False), dtype="mixed_bfloat16")(inputs)
    model = Tiny(inputs, keras.layers.Dense(1)(hidden))
    model.compile(optimizer="sgd", loss="mse")
    x, y = np.ones((2, 4, WIDTH), "float32"), np.zeros((2, 4, 1), "float32")
    model.predict(x, verbose=0)
    model.evaluate(x, y, verbose=0)
    assert traced == []
    model.train_on_batch(x, y)
    assert traced == ["compiled"]
