"""Efficient GlobalPointer: span scores for (nested) entities, in `keras.ops`.

Su Jianlin's GlobalPointer scores every span ``(start m, end n)`` of a
sequence for every entity type at once; an entity is a span whose score is
above 0. The *efficient* variant (bert4keras ``EfficientGlobalPointer``) shares
one query/key projection between the types and adds a per-type bias for the
start token and one for the end token:

``logits[b, m, n, t] = (q_m . k_n) / sqrt(head_size) + (w_t^start . p_m + w_t^end . p_n) / 2``

with ``p`` a dense projection of the hidden states (size ``2 * head_size``),
``q, k`` its even and odd components (as in bert4keras), and ``q, k`` rotated
by the rotary position embedding (RoPE), so that ``q_m . k_n`` depends on the
positions only through ``n - m``. Layout: ``[batch, start, end, type]``
(bert4keras returns ``[batch, type, start, end]``).

Masked cells -- padding at the start or the end, and ``end < start`` -- get
:data:`MASKED_LOGIT` (a large negative number, so their sigmoid is 0 and they
add nothing to the loss).

The loss is the multilabel categorical cross-entropy (Su Jianlin, 2020):
for each (sequence, type), over all cells,
``log(1 + sum_{neg} exp(s)) + log(1 + sum_{pos} exp(-s))`` -- it pushes every
positive above 0 and every negative below 0 without a class-balance weight.
:func:`global_pointer_crossentropy` averages it over sequences and types
(or sums it over the types), from dense targets or from sparse codes.
"""

import keras
from keras import ops

#: The logit of a masked cell (padding, end < start).
MASKED_LOGIT = -1e12


# =============================================================================
# Rotary position embedding
# =============================================================================


def rotary(x):
    """``x`` ``[batch, length, dim]`` (``dim`` even) rotated by RoPE: each
    pair ``(x_2i, x_2i+1)`` at position ``p`` turned by the angle
    ``p * 10000^(-2i/dim)`` (bert4keras's interleaved pairs). Then
    ``rotary(q)[m] . rotary(k)[n]`` depends on ``m`` and ``n`` only through
    ``n - m``.

    Computed by keras-hub's ``RotaryEmbedding``, which turns the pairs
    ``(x_i, x_i+dim/2)`` (halves, not interleaved pairs): the pairs are
    gathered into halves, turned, and put back, so that the result is the
    interleaved rotation (tests/test_global_pointer.py checks it against
    the formula)."""
    from keras_hub.layers import RotaryEmbedding

    half = ops.shape(x)[-1] // 2
    turned = RotaryEmbedding(max_wavelength=10000, dtype="float32")(
        ops.concatenate([x[..., 0::2], x[..., 1::2]], axis=-1))
    turned = ops.cast(turned, x.dtype)
    return ops.reshape(ops.stack([turned[..., :half], turned[..., half:]], axis=-1), ops.shape(x))


# =============================================================================
# The layer
# =============================================================================


@keras.saving.register_keras_serializable(package="kerasbert")
class EfficientGlobalPointer(keras.layers.Layer):
    """Span logits ``[batch, len, len, heads]`` (start, end, type) of hidden
    states ``[batch, len, hidden]`` (see the module docstring).

    Args:
        heads: number of entity types.
        head_size: size of the shared query and key.
        rope: rotate queries and keys by the rotary position embedding.
        use_bias: biases in the two dense projections.
        tril_mask: mask the cells with ``end < start``.
        kernel_initializer: of both projections.

    Call with ``mask`` (``[batch, len]``, 1/True on real tokens) to mask
    padding; without it every position is real.
    """

    def __init__(self, heads, head_size=64, rope=True, use_bias=True, tril_mask=True,
                 kernel_initializer="lecun_normal", **kwargs):
        super().__init__(**kwargs)
        # === Config ===
        self.heads = int(heads)
        self.head_size = int(head_size)
        self.rope = bool(rope)
        self.use_bias = bool(use_bias)
        self.tril_mask = bool(tril_mask)
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        if self.head_size % 2:
            raise ValueError(f"head_size must be even (RoPE turns pairs), got {self.head_size}")

        # === Layers ===
        self.p_dense = keras.layers.Dense(2 * self.head_size, use_bias=self.use_bias,
                                          kernel_initializer=self.kernel_initializer, dtype=self.dtype_policy,
                                          name="p_dense")
        self.q_dense = keras.layers.Dense(2 * self.heads, use_bias=self.use_bias,
                                          kernel_initializer=self.kernel_initializer, dtype=self.dtype_policy,
                                          name="q_dense")

    def build(self, input_shape):
        self.p_dense.build(input_shape)
        self.q_dense.build(tuple(input_shape[:-1]) + (2 * self.head_size,))
        self.built = True

    def call(self, inputs, mask=None):
        projected = self.p_dense(inputs)  # [b, n, 2 * head_size]
        qw, kw = projected[..., 0::2], projected[..., 1::2]
        if self.rope:
            qw, kw = rotary(qw), rotary(kw)
        logits = ops.einsum("bmd,bnd->bmn", qw, kw) / (self.head_size ** 0.5)
        bias = self.q_dense(projected) / 2  # [b, n, 2 * heads]: end (even) and start (odd) biases, as bert4keras
        logits = logits[:, :, :, None] + bias[:, :, None, 1::2] + bias[:, None, :, 0::2]
        return self.masked(logits, mask)

    def masked(self, logits, mask=None):
        """``logits`` ``[b, m, n, heads]`` with padding (``mask`` 0 at ``m``
        or ``n``) and, with ``tril_mask``, ``n < m`` set to :data:`MASKED_LOGIT`."""
        length = ops.shape(logits)[1]
        keep = None
        if mask is not None:
            real = ops.cast(mask, "bool")
            keep = ops.logical_and(real[:, :, None], real[:, None, :])
        if self.tril_mask:
            index = ops.arange(length)
            upper = (index[None, :] >= index[:, None])[None]
            keep = upper if keep is None else ops.logical_and(keep, upper)
        if keep is None:
            return logits
        return ops.where(keep[..., None], logits, ops.cast(MASKED_LOGIT, logits.dtype))

    def compute_output_shape(self, input_shape):
        return (input_shape[0], input_shape[1], input_shape[1], self.heads)

    def compute_mask(self, inputs, mask=None):
        return None

    def get_config(self):
        config = super().get_config()
        config.update({
            "heads": self.heads,
            "head_size": self.head_size,
            "rope": self.rope,
            "use_bias": self.use_bias,
            "tril_mask": self.tril_mask,
            "kernel_initializer": keras.initializers.serialize(self.kernel_initializer),
        })
        return config


# =============================================================================
# Loss
# =============================================================================


def multilabel_categorical_crossentropy(y_true, y_pred, positive_weight=1.0):
    """Su Jianlin's multilabel categorical cross-entropy over the last axis:
    ``log(1 + sum_{y=0} exp(s)) + w * log(1 + sum_{y=1} exp(-s))``, ``w``
    the ``positive_weight`` (1: the original; above 1 the positives' term
    weighs more, which trades precision for recall). ``y_true`` 0/1,
    ``y_pred`` logits (any shape, same); returns the leading shape."""
    y_true = ops.cast(y_true, "float32")
    y_pred = ops.cast(y_pred, "float32")
    y_pred = (1.0 - 2.0 * y_true) * y_pred  # positives negated
    y_neg = y_pred - y_true * 1e12  # positives out of the negatives' sum
    y_pos = y_pred - (1.0 - y_true) * 1e12
    zeros = ops.zeros_like(y_pred[..., :1])
    neg_loss = ops.logsumexp(ops.concatenate([y_neg, zeros], axis=-1), axis=-1)
    pos_loss = ops.logsumexp(ops.concatenate([y_pos, zeros], axis=-1), axis=-1)
    return neg_loss + float(positive_weight) * pos_loss


def global_pointer_crossentropy(y_true, y_pred, sparse=False, channels="mean", positive_weight=1.0):
    """:func:`multilabel_categorical_crossentropy` of the span logits
    ``y_pred`` ``[batch, len, len, C]`` per (sequence, channel) over all
    ``(start, end)`` cells, reduced to one number: the mean over sequences
    and channels (``channels="mean"``), or the mean over sequences of the
    sum over channels (``channels="sum"``).

    ``y_true``: the dense 0/1 targets ``[batch, len, len, C]``, or with
    ``sparse`` the positives as codes int ``[batch, len, K]``: at row
    position ``m``, ``n * C + channel + 1`` for each positive cell ``(m, n,
    channel)``, 0 pads, each code once. The sparse form never builds the
    dense target: the negatives' sum is all cells' minus the positives'
    (bert4keras's ``sparse_multilabel_categorical_crossentropy``),
    ``log(1 + sum_neg) = A + log(1 - exp(P - A))`` with ``A = log(1 +
    sum_all exp(s))`` and ``P = log sum_pos exp(s)``, the last factor
    clipped at 1e-7 from below. ``positive_weight``: the weight of the
    positives' term (:func:`multilabel_categorical_crossentropy`)."""
    if sparse:
        losses = _sparse_losses(y_true, y_pred, positive_weight)
    else:
        losses = _dense_losses(y_true, y_pred, positive_weight)  # [batch, C]
    if channels == "sum":
        return ops.mean(ops.sum(losses, axis=1))
    return ops.mean(losses)


def _dense_losses(y_true, y_pred, positive_weight=1.0):
    y_true = ops.transpose(ops.cast(y_true, "float32"), (0, 3, 1, 2))
    y_pred = ops.transpose(ops.cast(y_pred, "float32"), (0, 3, 1, 2))
    shape = ops.shape(y_pred)
    y_true = ops.reshape(y_true, (shape[0], shape[1], -1))
    y_pred = ops.reshape(y_pred, (shape[0], shape[1], -1))
    return multilabel_categorical_crossentropy(y_true, y_pred, positive_weight)


def _masked_logsumexp(values, mask, axis):
    """log-sum-exp of ``values`` over ``axis`` where ``mask`` (else -1e12)."""
    return ops.logsumexp(ops.where(mask, values, MASKED_LOGIT), axis=axis)


def _sparse_losses(codes, logits, positive_weight=1.0):
    logits = ops.cast(logits, "float32")
    shape = ops.shape(logits)
    batch, width, channels = shape[0], shape[2], shape[3]
    codes = ops.cast(codes, "int32")
    real = codes > 0
    index = ops.maximum(codes - 1, 0)
    picked = ops.take_along_axis(ops.reshape(logits, (batch, shape[1], width * channels)), index, axis=2)  # [b, m, K]
    mask = ops.logical_and(real[..., None], ops.one_hot(index % channels, channels, dtype="bool"))  # [b, m, K, C]
    flat_mask = ops.reshape(mask, (batch, -1, channels))
    flat_picked = ops.reshape(picked, (batch, -1, 1))
    zeros = ops.zeros((batch, channels), "float32")
    pos_loss = ops.logaddexp(_masked_logsumexp(-flat_picked, flat_mask, axis=1), zeros)  # [b, C]
    pos_sum = _masked_logsumexp(flat_picked, flat_mask, axis=1)
    all_sum = ops.logaddexp(ops.logsumexp(logits, axis=(1, 2)), zeros)
    return float(positive_weight) * pos_loss + all_sum + ops.log(ops.clip(1.0 - ops.exp(pos_sum - all_sum), 1e-7, 1.0))


__all__ = ["EfficientGlobalPointer", "global_pointer_crossentropy", "multilabel_categorical_crossentropy", "rotary"]
