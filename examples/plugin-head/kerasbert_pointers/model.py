"""The pointer network: encoder -> dropout -> (feed-forward) -> start and end logits per type.

``PointerNerModel`` is a Keras functional model in ``keras.ops`` (it trains
and predicts on TensorFlow and JAX). Its outputs:

* ``start``, ``end``: float32 ``[batch, len, types]``, the logit of each
  token starting / ending an entity of each type (sigmoid: independent
  yes/no decisions);
* ``logits``: float32 ``[batch, len, len, types]``, span logits read off the
  pointers (:func:`span_logits`), what the kit's span pipeline runs, exports
  and decodes: the span ``(i, j)`` (end inclusive) of type ``t`` is an
  entity when its logit is above 0, i.e. when ``i`` starts one, ``j`` ends
  one, and no token in ``i .. j - 1`` ends one (the nearest end). Its logit
  is the smaller of the two pointers' logits, so its score
  ``sigmoid(logit / T)`` is the less sure pointer's probability.

The loss (:meth:`PointerNerModel.task_loss`) is the binary cross-entropy of
every real token's start and end pointers against the gold entities, which
come as the kit's span rows (``spans`` int32 ``[batch, len, K]``: per start
token up to K codes ``end * types + type + 1``, 0 pads; what
:class:`kerasbert_apps.ner.span_pipeline.SpanPipeline` makes).

Its layers are named with the task's head prefix, ``ner_head_``: they train
at ``--head-learning-rate``, and the bfloat16 pipelines keep them float32.
"""

import keras
from keras import ops

from kerasbert_apps.base.model import TaskModel
from kerasbert_apps.base.model import encoder_inputs

HEAD_PREFIX = "ner_head_"
#: The logit of a span that is never an entity (end before start, padding).
NEVER = -1e4


def span_logits(start, end, padding_mask):
    """float32 ``[batch, len, len, types]`` span logits of the pointers'
    ``start`` / ``end`` logits ``[batch, len, types]``: ``min(start[i],
    end[j])`` where ``i <= j``, both real tokens, and no token of ``i .. j -
    1`` has an end logit above 0 (the nearest end); otherwise at most
    ``min(start[i], end[j], 0) - 1`` (below 0: never an entity), and
    :data:`NEVER` outside the real tokens' spans."""
    start, end = ops.cast(start, "float32"), ops.cast(end, "float32")
    ends = ops.cumsum(ops.cast(end > 0, "float32"), axis=1) - ops.cast(end > 0, "float32")  # ends before each token
    nearest = ops.equal(ends[:, :, None, :], ends[:, None, :, :])  # no end in i .. j - 1
    both = ops.minimum(start[:, :, None, :], end[:, None, :, :])
    logits = ops.where(nearest, both, ops.minimum(both, 0.0) - 1.0)
    length = ops.shape(start)[1]
    index = ops.arange(length)
    real = ops.cast(padding_mask, "bool")
    cells = (index[None, :, None] <= index[None, None, :]) & real[:, :, None] & real[:, None, :]
    return ops.where(cells[..., None], logits, NEVER)


def pointer_targets(spans, length, num_types):
    """``spans`` int32 ``[batch, len, K]`` (codes ``end * num_types + type +
    1`` at each start token, 0 pads) -> float32 0/1 ``(start, end)`` targets,
    each ``[batch, len, num_types]``."""
    codes = ops.cast(spans, "int32")
    kind = ops.mod(codes - 1, num_types)
    ends = ops.floor_divide(codes - 1, num_types)
    real = codes > 0
    types = ops.arange(num_types)
    starts = ops.any(real[..., None] & (kind[..., None] == types), axis=2)  # [batch, len, types]
    positions = ops.arange(length)
    at_end = (ends[..., None, None] == positions[:, None]) & (kind[..., None, None] == types)  # [b, len, K, len, T]
    ends = ops.any(real[..., None, None] & at_end, axis=(1, 2))
    return ops.cast(starts, "float32"), ops.cast(ends, "float32")


@keras.saving.register_keras_serializable(package="kerasbert_pointers")
class SpanLogits(keras.layers.Layer):
    """:func:`span_logits` as a layer (no weights) of ``start``, ``end`` and
    the padding mask: the functional model's graph sees real shapes."""

    def call(self, start, end, padding_mask):
        return span_logits(start, end, padding_mask)


@keras.saving.register_keras_serializable(package="kerasbert_pointers")
class PointerNerModel(TaskModel):
    """BERT -> (feed-forward) -> a start and an end pointer per type.

    Args:
        encoder: a kerasbert encoder (or any model with its inputs and a ``"sequence_output"``).
        num_types: number of entity types.
        size: units of a feed-forward layer before the pointers (0: none).
        prior: the pointers' starting bias (most tokens start and end nothing).
        dropout: dropout on the encoder output.
        layer_mix: feed the head a learned mix of all the encoder's hidden
            states (``--freeze-encoder``) instead of its last layer.
    """

    def __init__(self, encoder, num_types, size=0, prior=-3.0, dropout=0.1, layer_mix=False, **kwargs):
        # === Layers ===
        self.encoder = encoder
        self.freeze_pooler(encoder)
        self.make_layer_mix(encoder, layer_mix, HEAD_PREFIX)
        self.head_dropout = keras.layers.Dropout(dropout, name=HEAD_PREFIX + "dropout")
        self.hidden = keras.layers.Dense(size, activation="gelu", dtype="float32",
                                         name=HEAD_PREFIX + "hidden") if size else None
        self.pointers = keras.layers.Dense(2 * num_types, dtype="float32", name=HEAD_PREFIX + "pointers",
                                           bias_initializer=keras.initializers.Constant(prior))
        self.spans = SpanLogits(dtype="float32", name=HEAD_PREFIX + "spans")

        # === Functional Model ===
        inputs = encoder_inputs()
        start, end = self.pointer_logits(self.head_dropout(self.encoded(encoder(inputs))))
        logits = self.spans(start, end, inputs["padding_mask"])
        super().__init__(inputs=inputs, outputs={"logits": logits, "start": start, "end": end}, **kwargs)

        # === Config ===
        self.num_types = num_types
        self.size = size
        self.prior = prior
        self.dropout = dropout

    def pointer_logits(self, x):
        """``(start, end)`` float32 ``[batch, len, types]`` of the head's input ``x``."""
        x = ops.cast(x, "float32")
        if self.hidden is not None:
            x = self.hidden(x)
        both = self.pointers(x)
        n = ops.shape(both)[-1] // 2
        return both[..., :n], both[..., n:]

    def task_loss(self, x, y, y_pred):
        spans = y["spans"] if isinstance(y, dict) else y
        start, end = ops.cast(y_pred["start"], "float32"), ops.cast(y_pred["end"], "float32")
        start_true, end_true = pointer_targets(spans, ops.shape(start)[1], self.num_types)
        real = ops.cast(x["padding_mask"], "float32")[..., None]
        loss = (keras.losses.binary_crossentropy(start_true[..., None], start[..., None], from_logits=True)
                + keras.losses.binary_crossentropy(end_true[..., None], end[..., None], from_logits=True))
        return ops.sum(loss * real) / ops.maximum(ops.sum(real), 1.0)

    def head_config(self):
        return {"num_types": self.num_types, "size": self.size, "prior": self.prior, "dropout": self.dropout,
                "layer_mix": self.layer_mix}
