"""GroupedAdamW (:mod:`kerasbert.training.optimizer`): the fused TensorFlow update
gives Keras's AdamW update (the learning-rate groups are tested in
``test_layer_mix.py``)."""

import keras
import numpy as np
import tensorflow as tf

from kerasbert.training.optimizer import make_optimizer

SHAPES = {"embeddings": (300, 16), "kernel": (16, 32), "bias": (32,), "head/kernel": (32, 5)}


def _train(fused, steps=12):
    """``steps`` updates of :data:`SHAPES` with gradients of very different
    sizes (some clipped), the head at 30x the learning rate, weight decay
    and the warm-up schedule on, inside a ``tf.function`` as in a train step.
    Returns the variables and the op types of the traced update."""
    rng = np.random.default_rng(0)
    variables = [keras.Variable(rng.normal(0, 0.2, shape).astype("float32"), name=name.replace("/", "_"))
                 for name, shape in SHAPES.items()]
    optimizer = make_optimizer(40, 1e-3, 3e-2, "head", weight_decay=0.05)
    optimizer.build(variables)
    optimizer._lr_factors = [30.0 if name.startswith("head") else 1.0 for name in SHAPES]
    if not fused:  # Keras's own AdamW update with the same factors
        def update_step(gradient, variable, learning_rate):
            factor = optimizer._lr_factors[optimizer._get_variable_index(variable)]
            return keras.optimizers.AdamW.update_step(optimizer, gradient, variable, learning_rate * factor)

        optimizer.update_step = update_step
    apply = tf.function(lambda grads: optimizer.apply(grads, variables), autograph=False)
    grads_rng = np.random.default_rng(1)
    for step in range(steps):
        scale = 5.0 if step % 3 == 0 else 0.01
        apply([tf.constant(grads_rng.normal(0, scale, shape).astype("float32")) for shape in SHAPES.values()])
    graph = apply.get_concrete_function([tf.TensorSpec(shape, tf.float32) for shape in SHAPES.values()]).graph
    return [v.numpy() for v in variables], {op.type for op in graph.get_operations()}


def test_fused_update_is_keras_adamw_with_group_learning_rates():
    ours, ours_ops = _train(fused=True)
    keras_, keras_ops = _train(fused=False)
    assert "ResourceApplyAdam" in ours_ops and "ResourceApplyAdam" not in keras_ops
    for name, a, b in zip(SHAPES, ours, keras_):
        np.testing.assert_allclose(a, b, atol=2e-6, err_msg=name)
    start = np.random.default_rng(0)
    moved = [np.abs(v - start.normal(0, 0.2, shape)).max() for v, shape in zip(ours, SHAPES.values())]
    assert moved[-1] > 10 * moved[1]  # the head's 30x learning rate shows

