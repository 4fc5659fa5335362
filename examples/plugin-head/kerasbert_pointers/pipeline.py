"""The pointers head's pipeline: raw text -> entities, on the kit's span-head machinery.

:class:`PointerTagger` is a
:class:`~kerasbert_apps.ner.span_pipeline.SpanPipeline` (the kit's span
heads' training rows, windows, inference path, ``ids`` signature and score
temperature) that gives its model (:meth:`PointerTagger.build_model`), its
decoding (:meth:`PointerTagger.decode`) and how ``kerasbert ner select``
measures its outputs (the measure its registration declares:
:meth:`PointerTagger.selection_log_best`).
"""

import numpy as np

from kerasbert_apps.ner.span_pipeline import SpanPipeline


class PointerTagger(SpanPipeline):
    """A trained pointers NER model (``SpanPipeline``'s arguments; ``model``
    a :class:`~kerasbert_pointers.model.PointerNerModel`)."""

    #: The model folder's settings file, and the head recorded in it.
    settings_file = "pointer_tagger.json"
    head_name = "pointers"
    #: Imported before a folder is loaded: it registers the model's Keras class.
    model_module = "kerasbert_pointers.model"

    @classmethod
    def build_model(cls, encoder, types, settings):
        """The model ``kerasbert ner train --head pointers`` trains; ``settings``
        holds the task's options (``dropout``, ``freeze_encoder``) and this
        head's (``pointers_size``)."""
        from kerasbert_pointers.model import PointerNerModel

        return PointerNerModel(encoder, len(types), size=settings.pointers_size, dropout=settings.dropout,
                               layer_mix=settings.freeze_encoder)

    def decode(self, texts, windows, logits):
        from kerasbert_pointers.decode import pointer_entities

        return pointer_entities(texts, windows, logits, self.types, self.temperature)

    # ``kerasbert ner select``: the pointers on the encoder's output, their entities, and P(best) per row.
    def selection_outputs(self, head_input, padding_mask, fused=False):
        start, end = self.model.pointer_logits(self.model.head_dropout(head_input, training=False))
        return {"start_logits": start, "end_logits": end}  # not "start" / "end": the entities' outputs

    def selection_decode(self, texts, windows, out):
        import tensorflow as tf

        from kerasbert_pointers.model import span_logits

        n_rows = tf.shape(windows["token_ids"])[0]
        width = tf.shape(windows["token_ids"])[1]
        start, end = (tf.cast(out[k], tf.float32)[:n_rows, :width] for k in ("start_logits", "end_logits"))
        logits = span_logits(start, end, windows["padding_mask"])
        return self.decode(texts, windows, logits), {"start_logits": start, "end_logits": end}

    def selection_log_best(self, out, lengths):
        """log P(best labelling) per window row (numpy), the measure the
        registration declares (``selection_measure``): every pointer of the
        row's text tokens (``[CLS]`` and ``[SEP]`` left out) a yes/no with
        ``p = sigmoid(logit / T)``, the best labelling saying yes where ``p >
        1/2``: the sum of ``log max(p, 1 - p)``."""
        lengths = np.asarray(lengths, np.int64)
        total = np.zeros(len(lengths))
        for key in ("start_logits", "end_logits"):
            logits = np.asarray(out[key], np.float64) / self.temperature
            position = np.arange(logits.shape[1])[None, :]
            inside = (position >= 1) & (position <= lengths[:, None] - 2)
            total += np.where(inside[..., None], -np.logaddexp(0.0, -np.abs(logits)), 0.0).sum(axis=(1, 2))
        return total
