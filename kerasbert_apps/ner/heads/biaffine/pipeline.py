"""The biaffine NER head (``--head biaffine``): raw text -> possibly nested entities.

A :class:`BiaffineTagger` is a
:class:`~kerasbert_apps.ner.span_pipeline.SpanPipeline` (the span heads' windows,
training rows: nested entities kept, exact-span scores and score
temperature) around a
:class:`~kerasbert_apps.ner.heads.biaffine.model.BiaffineNerModel`, decoded
by :func:`~kerasbert_apps.ner.heads.biaffine.decode.biaffine_entities`: one
type per span (softmax over the types and "no entity"), nested entities
kept (unless the model learned from data where no entity nests:
:attr:`BiaffineTagger.nested`), crossing ones dropped in favour of the
more probable.
"""

from kerasbert_apps.ner.span_pipeline import SpanPipeline

#: The model folder's settings file.
SETTINGS_FILE = "biaffine_tagger.json"
NAME = "biaffine"


class BiaffineTagger(SpanPipeline):
    """A trained biaffine NER model: predict (possibly nested) entities with
    character offsets (:class:`~kerasbert_apps.ner.span_pipeline.SpanPipeline`'s
    arguments; ``model`` a :class:`~kerasbert_apps.ner.heads.biaffine.model.BiaffineNerModel`,
    or any Keras model with the encoder's inputs and an output ``logits``
    ``[batch, len, len, types + 1]``, "no entity" last; the score temperature
    as in :mod:`kerasbert_apps.ner.heads.biaffine.decode`)."""

    settings_file = SETTINGS_FILE
    head_name = NAME
    model_module = "kerasbert_apps.ner.heads.biaffine.model"

    def __init__(self, model, tokenizer, types, *args, nested=True, **kwargs):
        super().__init__(model, tokenizer, types, *args, **kwargs)
        #: Whether an entity inside another is kept (True, and in folders
        #: saved before the setting existed) or dropped like any overlap
        #: (``--biaffine-decoding``: ``auto`` sets it from the training data).
        self.nested = bool(nested)

    def settings(self):
        return {**super().settings(), "nested": self.nested}

    def decode(self, texts, windows, logits):
        from kerasbert_apps.ner.heads.biaffine.decode import biaffine_entities

        return biaffine_entities(texts, windows, logits, self.types, self.temperature, self.decision_threshold,
                                 nested=self.nested)

    @classmethod
    def for_training(cls, model, tokenizer, labels, settings):
        """:meth:`SpanPipeline.for_training`, nested entities kept unless
        ``--biaffine-decoding flat`` (``auto``: :meth:`after_features`
        decides)."""
        pipeline = super().for_training(model, tokenizer, labels, settings)
        pipeline.nested = getattr(settings, "biaffine_decoding", "auto") != "flat"
        return pipeline

    def after_features(self, report, settings):
        """With ``--biaffine-decoding auto``: keep nested entities in the
        predictions where the training data has any (an entity inside
        another), else decode flat entities (the paper's rule for flat
        data: a candidate overlapping a more probable entity is dropped)."""
        if getattr(settings, "biaffine_decoding", "auto") == "auto":
            self.nested = self.nested_from_data(report)

    def selection_logits(self, head_input, padding_mask):
        from keras import ops

        model = self.model
        x = ops.cast(model.head_dropout(head_input, training=False), "float32")
        if model.lstm is not None:
            x = model.lstm_dropout(model.lstm(x, mask=ops.cast(padding_mask, "bool")), training=False)
        return model.scorer(x, mask=padding_mask)

    def selection_log_best(self, out, lengths):
        """log P(best labelling) per window row (numpy), the measure the
        head's registration declares: one softmax per span
        (:func:`kerasbert_apps.ner.heads.biaffine.selection.span_class_log_best`)."""
        import numpy as np

        from kerasbert_apps.ner.heads.biaffine.selection import span_class_log_best

        logits = np.array(out["logits"], np.float64)
        logits[..., -1] += self.threshold  # the decision: best type against no entity + threshold
        return span_class_log_best(logits, lengths, self.temperature)

    @classmethod
    def build_model(cls, encoder, types, settings):
        from kerasbert_apps.ner.heads.biaffine.model import BiaffineNerModel

        return BiaffineNerModel(encoder, len(types), size=settings.biaffine_size, use_lstm=settings.biaffine_lstm > 0,
                                lstm_units=max(settings.biaffine_lstm, 1), max_span_length=settings.biaffine_max_span,
                                dropout=settings.dropout, layer_mix=settings.freeze_encoder,
                                entity_weight=settings.biaffine_entity_weight)
