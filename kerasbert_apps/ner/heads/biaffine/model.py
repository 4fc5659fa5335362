"""The biaffine NER network: encoder -> dropout -> (BiLSTM) -> biaffine span scorer.

``BiaffineNerModel`` is a Keras functional model (``keras.ops`` only, so it
trains on TensorFlow and JAX). Inputs are the encoder's three; the output is
``{"logits": [batch, len, len, types + 1] float32}``: for each span ``(start
token, end token)`` (end inclusive) a logit per entity type and, last, for
"no entity" (:class:`~kerasbert_apps.ner.heads.biaffine.layer.BiaffineSpanScorer`).

The loss (:meth:`BiaffineNerModel.task_loss`) is the softmax cross-entropy
of every real span (padding and ``end < start`` left out) against its class,
the entity spans weighted ``entity_weight`` (``--biaffine-entity-weight``),
from the rows' ``spans`` -- the GlobalPointer head's training rows
(:func:`~kerasbert_apps.ner.heads.biaffine.layer.span_classes`).

All head layers are named ``ner_head_*`` so the optimizer gives them their
own learning rate.
"""

import keras
from keras import ops

from kerasbert_apps.base.model import TaskModel
from kerasbert_apps.base.model import encoder_inputs
from kerasbert_apps.ner.heads.biaffine.layer import BiaffineSpanScorer
from kerasbert_apps.ner.heads.biaffine.layer import biaffine_crossentropy
from kerasbert_apps.ner.heads.biaffine.layer import span_classes
from kerasbert_apps.ner.heads.biaffine.layer import span_mask
from kerasbert.layers.bilstm import bilstm

HEAD_PREFIX = "ner_head_"


@keras.saving.register_keras_serializable(package="kerasbert_ner")
class BiaffineNerModel(TaskModel):
    """BERT -> (BiLSTM) -> biaffine span classifier (nested entities).

    Args:
        encoder: an encoder from :mod:`kerasbert.models.encoder` (or any model with
            the same inputs and a ``"sequence_output"``).
        num_types: number of entity types ("no entity" is added).
        size: units of the start and end feed-forward networks.
        use_lstm: a BiLSTM between the encoder and the feed-forward networks
            (as the paper).
        lstm_units: its units per direction.
        max_span_length: spans of more tokens are never entities (0: no limit).
        none_prior: the starting logit of "no entity" (the types' start at
            0): most spans are no entity.
        entity_weight: the weight in the loss of a span that is an entity
            (a span that is none weighs 1).
        dropout: dropout on the encoder output (and on the BiLSTM output).
        layer_mix: feed the head a learned mix of all the encoder's hidden
            states (``--freeze-encoder``) instead of its last layer.
    """

    def __init__(self, encoder, num_types, size=150, use_lstm=False, lstm_units=128, max_span_length=0, none_prior=6.0,
                 dropout=0.1, layer_mix=False, entity_weight=1.0, **kwargs):
        # === Layers ===
        self.encoder = encoder
        self.freeze_pooler(encoder)
        self.make_layer_mix(encoder, layer_mix, HEAD_PREFIX)
        self.head_dropout = keras.layers.Dropout(dropout, name=HEAD_PREFIX + "dropout")
        self.lstm = None
        if use_lstm:
            self.lstm = bilstm(lstm_units, name=HEAD_PREFIX + "bilstm")
            self.lstm_dropout = keras.layers.Dropout(dropout, name=HEAD_PREFIX + "lstm_dropout")
        self.scorer = BiaffineSpanScorer(num_types, size=size, max_span_length=max_span_length,
                                         none_prior=none_prior, dtype="float32",
                                         name=HEAD_PREFIX + "biaffine")

        # === Functional Model ===
        inputs = encoder_inputs()
        x = ops.cast(self.head_dropout(self.encoded(encoder(inputs))), "float32")
        if self.lstm is not None:
            x = self.lstm_dropout(self.lstm(x, mask=ops.cast(inputs["padding_mask"], "bool")))
        logits = self.scorer(x, mask=inputs["padding_mask"])
        super().__init__(inputs=inputs, outputs={"logits": logits}, **kwargs)

        # === Config ===
        self.num_types = num_types
        self.size = size
        self.use_lstm = use_lstm
        self.lstm_units = lstm_units
        self.max_span_length = max_span_length
        self.none_prior = none_prior
        self.dropout = dropout
        self.entity_weight = float(entity_weight)

    def task_loss(self, x, y, y_pred):
        logits = ops.cast(y_pred["logits"], "float32")
        spans = y["spans"] if isinstance(y, dict) else y
        width = ops.shape(logits)[2]
        classes = span_classes(spans, width, self.num_types)
        keep = span_mask(x["padding_mask"], width, self.max_span_length)
        return biaffine_crossentropy(classes, logits, keep, self.entity_weight)

    def head_config(self):
        return {
            "num_types": self.num_types,
            "size": self.size,
            "use_lstm": self.use_lstm,
            "lstm_units": self.lstm_units,
            "max_span_length": self.max_span_length,
            "none_prior": self.none_prior,
            "dropout": self.dropout,
            "layer_mix": self.layer_mix,
            "entity_weight": self.entity_weight,
        }
