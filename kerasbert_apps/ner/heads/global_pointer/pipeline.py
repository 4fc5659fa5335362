"""The GlobalPointer NER head (``--head global-pointer``): raw text -> possibly nested entities.

A :class:`SpanTagger` is a :class:`~kerasbert_apps.ner.span_pipeline.SpanPipeline`
(the span heads' windows, training rows and score temperature) around a
trained :class:`~kerasbert_apps.ner.heads.global_pointer.model.GlobalPointerNerModel`,
decoded by :func:`kerasbert_apps.ner.heads.global_pointer.decode.span_entities`
(a (span, type) with a logit above the decision threshold, 0 unless
fitted on dev, is a candidate, scored by ``sigmoid(logit / temperature)``;
:attr:`SpanTagger.decoding` says which candidates are entities). Unlike
the BIO heads, entities may lie inside one another where the model learned
from data where they do.
"""

from kerasbert_apps.ner.span_pipeline import SpanPipeline

#: The model folder's settings file (a BIO tagger's is ``tagger.json``).
SETTINGS_FILE = "span_tagger.json"


class SpanTagger(SpanPipeline):
    """A trained GlobalPointer NER model (:class:`~kerasbert_apps.ner.span_pipeline.SpanPipeline`'s
    arguments; ``model`` a :class:`~kerasbert_apps.ner.heads.global_pointer.model.GlobalPointerNerModel`
    or any Keras model with the encoder's inputs and an output ``logits``
    ``[batch, len, len, types]``)."""

    settings_file = SETTINGS_FILE
    head_name = "global-pointer"
    model_module = "kerasbert_apps.ner.heads.global_pointer.model"

    def __init__(self, model, tokenizer, types, *args, decoding="all", **kwargs):
        from kerasbert_apps.ner.heads.global_pointer.decode import DECODINGS

        super().__init__(model, tokenizer, types, *args, **kwargs)
        if decoding not in DECODINGS:  # a settings file edited by hand: load says it is damaged, naming it
            raise ValueError(f"decoding must be one of {', '.join(DECODINGS)}, got {decoding!r}")
        #: Which candidates are entities (:func:`~kerasbert_apps.ner.heads.global_pointer.decode.span_entities`):
        #: ``"nested"``, ``"flat"`` (``--global-pointer-decoding``; ``auto`` sets one of them from the
        #: training data) or ``"all"`` (every candidate: the rule of folders saved before the setting existed).
        self.decoding = decoding

    def settings(self):
        return {**super().settings(), "decoding": self.decoding}

    def decode(self, texts, windows, logits):
        from kerasbert_apps.ner.heads.global_pointer.decode import span_entities

        return span_entities(texts, windows, logits, self.types, self.temperature, self.decision_threshold,
                             decoding=self.decoding)

    @classmethod
    def for_training(cls, model, tokenizer, labels, settings):
        """:meth:`SpanPipeline.for_training`, decoded as ``--global-pointer-decoding``
        says (``auto``: nested until :meth:`after_features` decides)."""
        pipeline = super().for_training(model, tokenizer, labels, settings)
        decoding = getattr(settings, "global_pointer_decoding", "auto")
        pipeline.decoding = "nested" if decoding == "auto" else decoding
        return pipeline

    def after_features(self, report, settings):
        """With ``--global-pointer-decoding auto``: ``nested`` where the
        training data has an entity inside another, else ``flat``
        (:meth:`~kerasbert_apps.ner.span_pipeline.SpanPipeline.nested_from_data`)."""
        if getattr(settings, "global_pointer_decoding", "auto") == "auto":
            self.decoding = "nested" if self.nested_from_data(report) else "flat"

    def selection_logits(self, head_input, padding_mask):
        from keras import ops

        x = self.model.head_dropout(head_input, training=False)
        return self.model.pointer(ops.cast(x, "float32"), mask=padding_mask)

    def selection_log_best(self, out, lengths):
        """log P(best labelling) per window row (numpy), the measure the
        head's registration declares: each (span, type) a yes/no at
        ``sigmoid((logit - threshold) / T)``
        (:func:`kerasbert_apps.ner.heads.global_pointer.selection.span_log_best`)."""
        from kerasbert_apps.ner.heads.global_pointer.selection import span_log_best

        return span_log_best(out["logits"] - self.threshold, lengths, self.temperature)

    @classmethod
    def build_model(cls, encoder, types, settings):
        from kerasbert_apps.ner.heads.global_pointer.model import GlobalPointerNerModel

        return GlobalPointerNerModel(encoder, len(types), head_size=settings.pointer_size, dropout=settings.dropout,
                                     layer_mix=settings.freeze_encoder,
                                     entity_weight=settings.global_pointer_entity_weight)
