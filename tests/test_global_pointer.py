"""kerasbert.layers.global_pointer: the Efficient GlobalPointer layer and its loss. The layer's
config round trip, saving, dtype policies and JAX rebuild: the layer harness (tests/test_layers.py)."""

import keras
import numpy as np
import pytest

from kerasbert.layers.global_pointer import MASKED_LOGIT
from kerasbert.layers.global_pointer import EfficientGlobalPointer
from kerasbert.layers.global_pointer import global_pointer_crossentropy
from kerasbert.layers.global_pointer import multilabel_categorical_crossentropy
from kerasbert.layers.global_pointer import rotary


@pytest.fixture(scope="module")
def layer():
    keras.utils.set_random_seed(3)
    layer = EfficientGlobalPointer(3, head_size=8)
    layer.build((None, None, 12))
    return layer


def test_shapes_and_masks(layer):
    x = np.random.default_rng(0).normal(size=(2, 5, 12)).astype("float32")
    mask = np.array([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0]], np.int32)
    logits = np.asarray(layer(x, mask=mask))
    assert logits.shape == (2, 5, 5, 3)
    start, end = np.meshgrid(np.arange(5), np.arange(5), indexing="ij")
    below = end < start
    assert (logits[:, below] == MASKED_LOGIT).all()
    assert (logits[0, ~below] > MASKED_LOGIT / 2).all()  # every real cell of the full row is a score
    padded = (start >= 3) | (end >= 3)
    assert (logits[1, padded] == MASKED_LOGIT).all()
    assert (logits[1, ~padded & ~below] > MASKED_LOGIT / 2).all()
    # padding does not change the real cells
    np.testing.assert_allclose(logits[1, :3, :3], np.asarray(layer(x[1:, :3]))[0], atol=1e-5)


def test_logits_follow_the_formula(layer):
    """Efficient GlobalPointer by hand: RoPE on the even/odd halves of the
    projection, q.k / sqrt(d), plus half of the end (even) and start (odd) biases."""
    x = np.random.default_rng(1).normal(size=(1, 4, 12)).astype("float32")
    kernel, bias = (np.asarray(v) for v in layer.p_dense.weights)
    p = x[0] @ kernel + bias
    q, k = p[:, 0::2], p[:, 1::2]

    def rope(v):
        out = np.empty_like(v)
        for pos in range(len(v)):
            for i in range(v.shape[1] // 2):
                angle = pos * 10000 ** (-2 * i / v.shape[1])
                c, s = np.cos(angle), np.sin(angle)
                a, b = v[pos, 2 * i], v[pos, 2 * i + 1]
                out[pos, 2 * i], out[pos, 2 * i + 1] = a * c - b * s, b * c + a * s
        return out

    q, k = rope(q), rope(k)
    q_kernel, q_bias = (np.asarray(v) for v in layer.q_dense.weights)
    biases = (p @ q_kernel + q_bias) / 2
    expected = (q @ k.T)[:, :, None] / np.sqrt(8) + biases[None, :, 0::2] + biases[:, None, 1::2]
    got = np.asarray(layer(x))[0]
    upper = np.triu(np.ones((4, 4), bool))
    np.testing.assert_allclose(got[upper], expected[upper], rtol=1e-4, atol=1e-4)


def test_rotary_is_the_interleaved_rotation():
    """keras-hub's RotaryEmbedding turns halves; ``rotary`` turns
    bert4keras's interleaved pairs: the same numbers as the formula."""
    x = np.random.default_rng(3).normal(size=(2, 9, 10)).astype("float32")
    positions = np.arange(9)[:, None] * 10000.0 ** (-2 * np.arange(5) / 10)[None, :]
    even, odd = x[..., 0::2], x[..., 1::2]
    expected = np.empty_like(x)
    expected[..., 0::2] = even * np.cos(positions) - odd * np.sin(positions)
    expected[..., 1::2] = odd * np.cos(positions) + even * np.sin(positions)
    np.testing.assert_allclose(np.asarray(rotary(x)), expected, atol=1e-5)


def test_rope_scores_depend_on_relative_positions_only():
    rng = np.random.default_rng(2)
    q, k = rng.normal(size=(1, 1, 16)).astype("float32"), rng.normal(size=(1, 1, 16)).astype("float32")
    length = 40
    qs = np.asarray(rotary(np.repeat(q, length, axis=1)))[0]
    ks = np.asarray(rotary(np.repeat(k, length, axis=1)))[0]
    scores = qs @ ks.T
    for shift in (1, 7, 20):
        np.testing.assert_allclose(scores[:-shift, :-shift], scores[shift:, shift:], rtol=1e-4, atol=1e-4)
    assert np.ptp(np.diag(scores, 3)) < 1e-4 and np.ptp(scores[0]) > 0.1  # constant per offset, not constant


@pytest.mark.parametrize("weight", [1.0, 3.0])
def test_loss_against_numpy(weight):
    """The loss, dense and sparse, against the formula, with the positives' term weighted."""
    rng = np.random.default_rng(4)
    y_pred = rng.normal(0, 3, size=(2, 6, 6, 2)).astype("float32")
    y_true = (rng.random((2, 6, 6, 2)) < 0.1).astype("float32")
    y_true[1, :, :, 1] = 0  # a (sequence, type) with no positive
    y_pred[0, 5, 0, :] = MASKED_LOGIT  # a masked cell adds nothing

    expected = []
    for b in range(2):
        for t in range(2):
            s, y = y_pred[b, :, :, t].ravel().astype("float64"), y_true[b, :, :, t].ravel().astype(bool)
            expected.append(np.log1p(np.exp(s[~y]).sum()) + weight * np.log1p(np.exp(-s[y]).sum()))
    got = float(global_pointer_crossentropy(y_true, y_pred, positive_weight=weight))
    np.testing.assert_allclose(got, np.mean(expected), rtol=1e-5)
    # the sparse form: codes n * C + t + 1 per row position m
    codes = np.zeros((2, 6, 12), np.int32)
    for b, m, n, t in zip(*np.nonzero(y_true)):
        codes[b, m, np.count_nonzero(codes[b, m])] = n * 2 + t + 1
    got = float(global_pointer_crossentropy(codes, y_pred, sparse=True, positive_weight=weight))
    np.testing.assert_allclose(got, np.mean(expected), rtol=1e-4)
    # the elementwise form, one row
    row = float(multilabel_categorical_crossentropy(y_true[0, :, :, 0].ravel(), y_pred[0, :, :, 0].ravel(), weight))
    np.testing.assert_allclose(row, expected[0], rtol=1e-5)


def test_gradient_pushes_positives_up():
    import tensorflow as tf

    y_true = np.zeros((1, 3, 3, 1), np.float32)
    y_true[0, 0, 2, 0] = 1
    y_pred = tf.Variable(np.zeros((1, 3, 3, 1), np.float32))
    with tf.GradientTape() as tape:
        loss = global_pointer_crossentropy(y_true, y_pred)
    grad = tape.gradient(loss, y_pred).numpy()[0, :, :, 0]
    assert grad[0, 2] < 0 and (np.delete(grad.ravel(), 2) > 0).all()


def test_head_size_must_be_even():
    with pytest.raises(ValueError, match="even"):
        EfficientGlobalPointer(2, head_size=7)
