"""The biaffine NER head (``--head biaffine``): raw text -> possibly nested entities.

A :class:`BiaffineTagger` is the GlobalPointer head's
:class:`~kerasbert_apps.ner.heads.global_pointer.pipeline.SpanTagger` (the same windows, the
same training rows: nested entities kept, and the same exact-span scores and
score temperature) around a
:class:`~kerasbert_apps.ner.heads.biaffine.model.BiaffineNerModel`, decoded
by :func:`~kerasbert_apps.ner.heads.biaffine.decode.biaffine_entities`: one
type per span (softmax over the types and "no entity"), nested entities
kept, crossing ones dropped in favour of the more probable.
"""

import dataclasses

from kerasbert_apps.ner.heads.global_pointer.pipeline import SpanFeatureReport
from kerasbert_apps.ner.heads.global_pointer.pipeline import SpanTagger
from kerasbert.errors import KerasbertError

#: The model folder's settings file.
SETTINGS_FILE = "biaffine_tagger.json"
NAME = "biaffine"


@dataclasses.dataclass
class BiaffineFeatureReport(SpanFeatureReport):
    LINES = tuple(
        (key, "  {n} entities lie inside another entity (kept: the biaffine head represents them)")
        if key == "nested_entities" else (key, line) for key, line in SpanFeatureReport.LINES)


class BiaffineTagger(SpanTagger):
    """A trained biaffine NER model: predict (possibly nested) entities with
    character offsets.

    Args:
        model: a :class:`~kerasbert_apps.ner.heads.biaffine.model.BiaffineNerModel`
            (or any Keras model with the encoder's inputs and an output
            ``logits`` ``[batch, len, len, types + 1]``, "no entity" last).
        tokenizer: the :class:`kerasbert.BertTokenizer` it was trained with.
        types: entity type names, index = the model's class axis.
        max_length: tokens per window, ``[CLS]`` and ``[SEP]`` included.
        overlap: tokens shared by consecutive windows of a long text.
        temperature: the score temperature (> 0; see
            :mod:`kerasbert_apps.ner.heads.biaffine.decode`).
    """

    #: What ``kerasbert ner select`` measures on this head's outputs
    #: (:data:`kerasbert_apps.ner.select.HEAD_MEASURES`): one softmax per span.
    selection_measure = "span-classes"

    settings_file = SETTINGS_FILE
    head_name = NAME
    model_module = "kerasbert_apps.ner.heads.biaffine.model"
    FeatureReport = BiaffineFeatureReport

    def infer(self, texts, windows, run):
        from kerasbert_apps.ner.heads.biaffine.decode import biaffine_entities

        return self.span_logits_then(texts, windows, run, biaffine_entities)

    def selection_logits(self, head_input, padding_mask):
        """``kerasbert ner select``: the span logits of the head on the encoder's output."""
        from keras import ops

        model = self.model
        x = ops.cast(model.head_dropout(head_input, training=False), "float32")
        if model.lstm is not None:
            x = model.lstm_dropout(model.lstm(x, mask=ops.cast(padding_mask, "bool")), training=False)
        return model.scorer(x, mask=padding_mask)

    def selection_entities(self, texts, windows, logits):
        """``kerasbert ner select``: the entities of ``logits`` (as :meth:`infer` decodes them)."""
        from kerasbert_apps.ner.heads.biaffine.decode import biaffine_entities

        return biaffine_entities(texts, windows, logits, self.types, self.temperature)

    def span_logits_then(self, texts, windows, run, decode):
        """The model's span logits of ``windows`` (``[rows, len, len, classes]``),
        decoded by ``decode(texts, windows, logits, types, temperature)``."""
        import tensorflow as tf

        from kerasbert_apps.base.runners import EndsPadded
        from kerasbert.export import nonempty_encoder_inputs

        n_rows = tf.shape(windows["token_ids"])[0]
        width = tf.shape(windows["token_ids"])[1]
        inputs = nonempty_encoder_inputs(windows, self.tokenizer.cls_id, self.tokenizer.sep_id)
        out = run.rows(EndsPadded(self.model, self.max_length), inputs)
        logits = tf.cast(out["logits"], tf.float32)[:n_rows, :width, :width]
        return decode(texts, windows, logits, self.types, self.temperature)

    def ids_endpoint(self):
        """``token_ids``, ``segment_ids``, ``padding_mask`` -> ``logits``
        float32 [batch, len, len, types + 1] (start, end inclusive, class: the
        types of ``assets.extra/kerasbert.json``, then "no entity"); core
        TensorFlow ops."""
        return super().ids_endpoint()

    @classmethod
    def build_model(cls, encoder, types, settings):
        from kerasbert_apps.ner.heads.biaffine.model import BiaffineNerModel

        return BiaffineNerModel(encoder, len(types), size=settings.biaffine_size, use_lstm=settings.biaffine_lstm > 0,
                                lstm_units=max(settings.biaffine_lstm, 1), max_span_length=settings.biaffine_max_span,
                                dropout=settings.dropout, layer_mix=settings.freeze_encoder)

    def batches(self, rows, settings, targets=()):
        if targets:
            raise KerasbertError("the biaffine head cannot be distilled")
        return super().batches(rows, settings)

    def student(self, layers):
        raise KerasbertError("a biaffine model cannot be distilled (ner distill takes a BIO tagger as teacher)")
