"""The GlobalPointer NER head (``--head global-pointer``): raw text -> possibly nested entities.

A :class:`SpanTagger` is a :class:`~kerasbert_apps.ner.span_pipeline.SpanPipeline`
(the span heads' windows, training rows and score temperature) around a
trained :class:`~kerasbert_apps.ner.heads.global_pointer.model.GlobalPointerNerModel`,
decoded by :func:`kerasbert_apps.ner.heads.global_pointer.decode.span_entities`
(every (span, type) with a logit above the decision threshold, 0 unless
fitted on dev, an entity, scored by
``sigmoid(logit / temperature)``). Unlike the BIO heads, entities may lie
inside one another or overlap, and a span may carry several types.
"""

from kerasbert_apps.ner.span_pipeline import SpanPipeline

#: The model folder's settings file (a BIO tagger's is ``tagger.json``).
SETTINGS_FILE = "span_tagger.json"


class SpanTagger(SpanPipeline):
    """A trained GlobalPointer NER model (:class:`~kerasbert_apps.ner.span_pipeline.SpanPipeline`'s
    arguments; ``model`` a :class:`~kerasbert_apps.ner.heads.global_pointer.model.GlobalPointerNerModel`
    or any Keras model with the encoder's inputs and an output ``logits``
    ``[batch, len, len, types]``)."""

    #: What ``kerasbert ner select``'s P(best labelling) is for this head
    #: (:meth:`~kerasbert_apps.ner.span_pipeline.SpanPipeline.selection_log_best`).
    selection_measure = "the product over the spans and types of max(p, 1 - p), p = sigmoid(logit / T)"

    settings_file = SETTINGS_FILE
    head_name = "global-pointer"
    model_module = "kerasbert_apps.ner.heads.global_pointer.model"

    def decode(self, texts, windows, logits):
        from kerasbert_apps.ner.heads.global_pointer.decode import span_entities

        return span_entities(texts, windows, logits, self.types, self.temperature, self.decision_threshold)

    def selection_logits(self, head_input, padding_mask):
        from keras import ops

        x = self.model.head_dropout(head_input, training=False)
        return self.model.pointer(ops.cast(x, "float32"), mask=padding_mask)

    @classmethod
    def build_model(cls, encoder, types, settings):
        from kerasbert_apps.ner.heads.global_pointer.model import GlobalPointerNerModel

        return GlobalPointerNerModel(encoder, len(types), head_size=settings.pointer_size, dropout=settings.dropout,
                                     layer_mix=settings.freeze_encoder,
                                     entity_weight=settings.global_pointer_entity_weight)
