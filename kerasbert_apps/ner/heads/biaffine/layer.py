"""The biaffine span scorer and its loss, in ``keras.ops`` (TensorFlow and JAX).

Yu, Bohnet and Poesio (2020), "Named Entity Recognition as Dependency
Parsing": two feed-forward networks read every token as a span *start*
(``h_s``) and as a span *end* (``h_e``); a biaffine map scores every span
``(i, j)`` (start, end inclusive) for every class ``c``::

    r[b, i, j, c] = h_s[i]^T U_c h_e[j] + W_c (h_s[i] ; h_e[j]) + b_c

written as one tensor ``U`` of shape ``[size + 1, classes, size + 1]`` on
``h_s`` and ``h_e`` with a 1 appended (the extra row and column are ``W``
and the bias). The classes are the entity types, then "no entity" last.
Layout ``[batch, start, end, classes]``.

Masked cells -- padding at the start or the end, ``end < start``, and with
``max_span_length`` spans of more tokens -- get ``MASKED_LOGIT`` for every
type and 0 for "no entity": their softmax is "no entity" with probability 1,
so decoding never proposes them, and :func:`biaffine_crossentropy` leaves
them out of the loss.
"""

import keras
from keras import ops

#: The type logits of a masked cell ("no entity" gets 0).
MASKED_LOGIT = -1e9


def span_mask(mask, length, max_span_length=0):
    """bool ``[batch or 1, length, length]``: the cells ``(i, j)`` with
    ``i <= j``, both real tokens (``mask`` ``[batch, length]``, 1/True on
    real tokens; None: all real) and, with ``max_span_length > 0``, at most
    that many tokens."""
    index = ops.arange(length)
    keep = index[None, :] >= index[:, None]
    if max_span_length:
        keep = ops.logical_and(keep, index[None, :] - index[:, None] < max_span_length)
    keep = keep[None]
    if mask is not None:
        real = ops.cast(mask, "bool")
        keep = ops.logical_and(keep, ops.logical_and(real[:, :, None], real[:, None, :]))
    return keep


@keras.saving.register_keras_serializable(package="kerasbert_ner")
class BiaffineSpanScorer(keras.layers.Layer):
    """Span logits ``[batch, len, len, types + 1]`` (start, end, class; the
    last class is "no entity") of hidden states ``[batch, len, hidden]``
    (see the module docstring).

    Args:
        types: number of entity types.
        size: units of the start and end feed-forward networks.
        activation: of the feed-forward networks.
        max_span_length: mask spans of more tokens (0: no limit).
        none_prior: a constant added to the "no entity" logit: training
            starts from "most spans are no entity" (as a bias initialized to
            it: the learned bias in ``U`` starts at 0).
        kernel_initializer: of the feed-forward networks.
        biaffine_initializer: of ``U`` (zeros: every class starts equally likely).

    Call with ``mask`` (``[batch, len]``, 1/True on real tokens) to mask
    padding; without it every position is real.
    """

    def __init__(self, types, size=150, activation="relu", max_span_length=0, none_prior=0.0,
                 kernel_initializer="glorot_uniform", biaffine_initializer="zeros", **kwargs):
        super().__init__(**kwargs)
        # === Config ===
        self.types = int(types)
        self.size = int(size)
        self.activation = keras.activations.get(activation)
        self.max_span_length = int(max_span_length)
        self.none_prior = float(none_prior)
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.biaffine_initializer = keras.initializers.get(biaffine_initializer)
        if self.types < 1 or self.size < 1 or self.max_span_length < 0:
            raise ValueError(f"types and size must be at least 1 and max_span_length at least 0, got "
                             f"{self.types}, {self.size}, {self.max_span_length}")

        # === Layers ===
        self.start_ffnn = keras.layers.Dense(self.size, activation=self.activation,
                                             kernel_initializer=self.kernel_initializer, dtype=self.dtype_policy,
                                             name="start_ffnn")
        self.end_ffnn = keras.layers.Dense(self.size, activation=self.activation,
                                           kernel_initializer=self.kernel_initializer, dtype=self.dtype_policy,
                                           name="end_ffnn")

    def build(self, input_shape):
        self.start_ffnn.build(input_shape)
        self.end_ffnn.build(input_shape)
        self.biaffine = self.add_weight(name="biaffine", shape=(self.size + 1, self.types + 1, self.size + 1),
                                        initializer=self.biaffine_initializer)
        self.built = True

    def call(self, inputs, mask=None):
        start = self.start_ffnn(inputs)  # [b, n, size]
        end = self.end_ffnn(inputs)
        ones = ops.ones_like(start[..., :1])
        start = ops.concatenate([start, ones], axis=-1)
        end = ops.concatenate([end, ones], axis=-1)
        left = ops.einsum("bid,dce->bice", start, ops.cast(self.biaffine, start.dtype))
        logits = ops.einsum("bice,bje->bijc", left, end)
        if self.none_prior:
            prior = ops.concatenate([ops.zeros((self.types,)), ops.full((1,), self.none_prior)])
            logits = logits + ops.cast(prior, logits.dtype)
        return self.masked(logits, mask)

    def masked(self, logits, mask=None):
        """``logits`` with the masked cells of the module docstring set to
        ``MASKED_LOGIT`` for the types and 0 for "no entity"."""
        keep = span_mask(mask, ops.shape(logits)[1], self.max_span_length)
        fill = ops.concatenate([ops.full((self.types,), MASKED_LOGIT, dtype=logits.dtype),
                                ops.zeros((1,), dtype=logits.dtype)])
        return ops.where(keep[..., None], logits, fill)

    def compute_output_shape(self, input_shape):
        return (input_shape[0], input_shape[1], input_shape[1], self.types + 1)

    def compute_mask(self, inputs, mask=None):
        return None

    def get_config(self):
        config = super().get_config()
        config.update({
            "types": self.types,
            "size": self.size,
            "activation": keras.activations.serialize(self.activation),
            "max_span_length": self.max_span_length,
            "none_prior": self.none_prior,
            "kernel_initializer": keras.initializers.serialize(self.kernel_initializer),
            "biaffine_initializer": keras.initializers.serialize(self.biaffine_initializer),
        })
        return config


def span_classes(spans, width, types):
    """``spans`` int32 ``[batch, len, K]`` (for each start token, codes ``end
    * types + type + 1``, 0 pads: the GlobalPointer head's training rows,
    :meth:`kerasbert_apps.ner.heads.global_pointer.pipeline.SpanTagger.window_labels`) -> int32
    ``[batch, len, width]``: the class of every cell (the type; ``types``,
    "no entity", where none). A span labelled with several types takes the
    first (a softmax gives one class per span)."""
    spans = ops.cast(spans, "int32")
    code = spans - 1
    end, kind = code // types, code % types
    cells = ops.arange(width)
    # for every (start, end cell, slot): the slot's type if it ends at that cell, else `types`
    hit = ops.logical_and(spans[:, :, :, None] > 0, end[:, :, :, None] == cells[None, None, None, :])
    candidate = ops.where(hit, kind[:, :, :, None], types)
    return ops.min(candidate, axis=2)


def biaffine_crossentropy(classes, logits, keep, entity_weight=1.0):
    """The weighted mean softmax cross-entropy over the cells ``keep`` (bool
    ``[batch, len, len]``) of ``logits`` ``[batch, len, len, types + 1]``
    against the int ``classes`` ``[batch, len, len]`` ("no entity" last):
    a cell whose class is an entity type weighs ``entity_weight``, a "no
    entity" cell 1 (a sentence of ``n`` tokens has ``n (n + 1) / 2`` spans
    and a few entities: without a weight the entities' share of the loss is
    tiny)."""
    logits = ops.cast(logits, "float32")
    log_p = logits - ops.logsumexp(logits, axis=-1, keepdims=True)
    classes = ops.cast(classes, "int32")
    picked = ops.take_along_axis(log_p, classes[..., None], axis=-1)[..., 0]
    weights = ops.cast(keep, "float32")
    if entity_weight != 1.0:
        none = ops.shape(logits)[-1] - 1
        weights = weights * ops.where(classes < none, float(entity_weight), 1.0)
    return -ops.sum(picked * weights) / ops.maximum(ops.sum(weights), 1.0)


__all__ = ["BiaffineSpanScorer", "biaffine_crossentropy", "span_classes", "span_mask", "MASKED_LOGIT"]
