"""The NER network: encoder -> dropout -> BiLSTM -> Dense -> CRF.

``NerModel`` is a Keras functional model (``keras.ops`` only, so it trains on
TensorFlow and JAX). Inputs are the encoder's three; outputs are
``{"potentials": [batch, len, num_tags] float32, "tags": [batch, len] int32}``
where ``tags`` is the CRF's Viterbi path (or the argmax with ``use_crf=False``).

The loss lives in :meth:`NerModel.task_loss` (:class:`kerasbert_apps.base.model.TaskModel`
adds regularization and distribution scaling), so plain ``model.fit(x, tags)``
trains it on any backend: the CRF negative log-likelihood over each sequence's
real tokens (``[CLS]`` and ``[SEP]`` carry the tag ``O``; padding is outside
the sequence length), or a padding-masked softmax cross-entropy without CRF.

All head layers are named ``ner_head_*`` so the optimizer can give them their
own learning rate (:class:`kerasbert.training.optimizer.GroupedAdamW`).
"""

import keras
from keras import ops

from kerasbert_apps.base.model import TaskModel
from kerasbert_apps.base.model import encoder_inputs
from kerasbert.layers.bilstm import bilstm
from kerasbert.layers.crf import CRF

HEAD_PREFIX = "ner_head_"


@keras.saving.register_keras_serializable(package="kerasbert_ner")
class NerModel(TaskModel):
    """BERT(-BiLSTM)-CRF tagger.

    Args:
        encoder: an encoder from :mod:`kerasbert.models.encoder` (BERT, ALBERT or
            ELECTRA; or any model with the same inputs and a ``"sequence_output"``).
        num_tags: number of tags (``O`` first).
        use_lstm: put a BiLSTM between the encoder and the tag scores.
        lstm_units: units per direction.
        use_crf: CRF loss and Viterbi decoding; else softmax per token.
        dropout: dropout on the encoder output.
        allowed, allowed_start: CRF decode-time constraints (see
            :func:`kerasbert.layers.crf.allowed_transitions`).
        layer_mix: feed the head a learned mix of all the encoder's hidden
            states (the encoder built with ``output_hidden_states=True``;
            ``--freeze-encoder``) instead of its last layer.
    """

    def __init__(self, encoder, num_tags, use_lstm=True, lstm_units=128, use_crf=True, dropout=0.1,
                 allowed=None, allowed_start=None, layer_mix=False, **kwargs):
        # === Layers ===
        self.encoder = encoder
        self.freeze_pooler(encoder)
        self.make_layer_mix(encoder, layer_mix, HEAD_PREFIX)
        self.head_dropout = keras.layers.Dropout(dropout, name=HEAD_PREFIX + "dropout")
        self.lstm = None
        if use_lstm:
            self.lstm = bilstm(lstm_units, name=HEAD_PREFIX + "bilstm")
        self.emissions = keras.layers.Dense(num_tags, dtype="float32", name=HEAD_PREFIX + "emissions")
        self.crf = CRF(num_tags, allowed=allowed, allowed_start=allowed_start, name=HEAD_PREFIX + "crf") if use_crf else None

        # === Functional Model ===
        inputs = encoder_inputs()
        potentials, tags = self.head(self.encoded(encoder(inputs)), inputs["padding_mask"])
        super().__init__(inputs=inputs, outputs={"potentials": potentials, "tags": tags}, **kwargs)

        # === Config ===
        self.num_tags = num_tags
        self.use_lstm = use_lstm
        self.lstm_units = lstm_units
        self.use_crf = use_crf
        self.dropout = dropout
        self.allowed = allowed
        self.allowed_start = allowed_start

    def head(self, sequence_output, padding_mask, bilstm=None, training=None):
        """The encoder's output -> ``(potentials, tags)``: dropout, BiLSTM,
        emission scores, CRF Viterbi (or argmax). The functional model is
        built from it; the serving graph (:mod:`kerasbert_apps.ner.heads.bio.fused_bilstm`) calls
        it with ``bilstm``, a function ``(x, mask) -> x`` that replaces the
        BiLSTM layer's call (a fused TensorFlow kernel with the same weights)."""
        x = self.head_dropout(sequence_output, training=training)
        mask = ops.cast(padding_mask, "bool")
        if self.lstm is not None:
            x = bilstm(x, mask) if bilstm is not None else self.lstm(x, mask=mask, training=training)
        potentials = self.emissions(x)
        if self.crf is not None:
            tags = self.crf(potentials, mask=mask)
        else:
            tags = ops.cast(ops.argmax(potentials, axis=-1), "int32")
        return potentials, tags

    def task_loss(self, x, y, y_pred):
        return self.gold_loss(x, y, y_pred)

    def gold_loss(self, x, tags, y_pred, gold=None):
        """The CRF's mean negative log-likelihood per sequence (or the mean
        softmax cross-entropy per token), over the rows where ``gold``
        (float32 [batch], default all 1) is 1."""
        potentials = ops.cast(y_pred["potentials"], "float32")
        mask = ops.cast(x["padding_mask"], "int32")
        tags = ops.cast(tags, "int32")
        if self.crf is not None:
            if gold is None:
                return self.crf.loss(potentials, tags, ops.sum(mask, axis=1))
            nll = -self.crf.log_likelihood(potentials, tags, ops.sum(mask, axis=1))
            return ops.sum(nll * gold) / ops.maximum(ops.sum(gold), 1.0)
        per_token = keras.losses.sparse_categorical_crossentropy(tags, potentials, from_logits=True)
        weights = ops.cast(mask, "float32")
        if gold is not None:
            weights = weights * gold[:, None]
        return ops.sum(per_token * weights) / ops.maximum(ops.sum(weights), 1.0)

    def distillation_loss(self, x, y, y_pred):
        """``soft_weight`` x the squared distance between the student's and
        the teacher's emission scores (summed over tags, mean over real
        tokens: matching them makes the same CRF decode the same) +
        ``1 - soft_weight`` x :meth:`gold_loss` on the rows with gold tags."""
        potentials = ops.cast(y_pred["potentials"], "float32")
        mask = ops.cast(x["padding_mask"], "float32")
        squared = ops.sum(ops.square(potentials - ops.cast(y["teacher"], "float32")), axis=-1)
        soft = ops.sum(squared * mask) / ops.maximum(ops.sum(mask), 1.0)
        gold = self.gold_loss(x, y["tags"], y_pred, gold=ops.cast(y["gold"][:, 0], "float32"))
        return self.soft_weight * soft + (1.0 - self.soft_weight) * gold

    def head_config(self):
        return {
            "num_tags": self.num_tags,
            "use_lstm": self.use_lstm,
            "lstm_units": self.lstm_units,
            "use_crf": self.use_crf,
            "dropout": self.dropout,
            "allowed": self.allowed,
            "allowed_start": self.allowed_start,
            "layer_mix": self.layer_mix,
        }
