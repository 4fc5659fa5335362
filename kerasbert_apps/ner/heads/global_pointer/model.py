"""The GlobalPointer NER network: encoder -> dropout -> Efficient GlobalPointer.

``GlobalPointerNerModel`` is a Keras functional model (``keras.ops`` only, so
it trains on TensorFlow and JAX). Inputs are the encoder's three; the output
is ``{"logits": [batch, len, len, types] float32}``: the score of each span
``(start token, end token)`` (end inclusive) for each entity type
(:class:`kerasbert.layers.global_pointer.EfficientGlobalPointer`); a span is an
entity where its logit is above 0, so entities may nest and overlap. Padding
and ``end < start`` are masked.

The loss (:meth:`GlobalPointerNerModel.task_loss`) is the multilabel
categorical cross-entropy (:func:`kerasbert.layers.global_pointer.global_pointer_crossentropy`)
against the row's gold spans, which come as ``spans`` int32 ``[batch, len,
K]``: for each start token up to K codes ``end * types + type + 1`` (0 pads;
:meth:`kerasbert_apps.ner.heads.global_pointer.pipeline.SpanTagger.window_labels`), turned into the dense
``[batch, len, len, types]`` target inside the loss.

All head layers are named ``ner_head_*`` so the optimizer gives them their
own learning rate.
"""

import keras
from keras import ops

from kerasbert_apps.base.model import TaskModel
from kerasbert_apps.base.model import encoder_inputs
from kerasbert.layers.global_pointer import EfficientGlobalPointer
from kerasbert.layers.global_pointer import global_pointer_crossentropy

HEAD_PREFIX = "ner_head_"


def dense_span_targets(spans, width, num_types):
    """``spans`` int32 ``[batch, len, K]`` (codes ``end * num_types + type +
    1``, 0 pads) -> float32 ``[batch, len, width, num_types]`` 0/1 targets."""
    codes = ops.reshape(ops.arange(width * num_types), (width, num_types)) + 1
    hits = ops.cast(spans, "int32")[:, :, :, None, None] == codes[None, None, None]
    return ops.cast(ops.any(hits, axis=2), "float32")


@keras.saving.register_keras_serializable(package="kerasbert_ner")
class GlobalPointerNerModel(TaskModel):
    """BERT -> Efficient GlobalPointer span tagger (nested entities).

    Args:
        encoder: an encoder from :mod:`kerasbert.models.encoder` (BERT, ALBERT or
            ELECTRA; or any model with the same inputs and a ``"sequence_output"``).
        num_types: number of entity types.
        head_size: size of the GlobalPointer's query and key.
        dropout: dropout on the encoder output.
        layer_mix: feed the head a learned mix of all the encoder's hidden
            states (``--freeze-encoder``) instead of its last layer.
        entity_weight: the weight in the loss of the entity spans' term
            (the positives' in the multilabel cross-entropy; 1: the original).
    """

    def __init__(self, encoder, num_types, head_size=64, dropout=0.1, layer_mix=False, entity_weight=1.0, **kwargs):
        # === Layers ===
        self.encoder = encoder
        self.freeze_pooler(encoder)
        self.make_layer_mix(encoder, layer_mix, HEAD_PREFIX)
        self.head_dropout = keras.layers.Dropout(dropout, name=HEAD_PREFIX + "dropout")
        self.pointer = EfficientGlobalPointer(num_types, head_size=head_size, dtype="float32",
                                              name=HEAD_PREFIX + "global_pointer")

        # === Functional Model ===
        inputs = encoder_inputs()
        x = self.head_dropout(self.encoded(encoder(inputs)))
        logits = self.pointer(ops.cast(x, "float32"), mask=inputs["padding_mask"])
        super().__init__(inputs=inputs, outputs={"logits": logits}, **kwargs)

        # === Config ===
        self.num_types = num_types
        self.head_size = head_size
        self.dropout = dropout
        self.entity_weight = float(entity_weight)

    def task_loss(self, x, y, y_pred):
        logits = ops.cast(y_pred["logits"], "float32")
        spans = y["spans"] if isinstance(y, dict) else y
        targets = dense_span_targets(spans, ops.shape(logits)[2], self.num_types)
        return global_pointer_crossentropy(targets, logits, positive_weight=self.entity_weight)

    def head_config(self):
        return {
            "num_types": self.num_types,
            "head_size": self.head_size,
            "dropout": self.dropout,
            "layer_mix": self.layer_mix,
            "entity_weight": self.entity_weight,
        }
