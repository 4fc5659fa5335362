"""Decoding, as TensorFlow ops: the span logits of each window -> the entities of each text.

What ``predict``, ``evaluate`` and the exported SavedModel run, through the
kit's window merge (:mod:`kerasbert_apps.ner.window_merge`): a span of a text
seen by several overlapping windows takes its logits from the window where it
sits furthest from a cut; every (span, type) whose logit is above 0 is an
entity (:func:`kerasbert_pointers.model.span_logits`: a start and the
nearest end of its type), scored ``sigmoid(logit / T)`` with the model's
score temperature ``T``.
"""

from kerasbert_apps.ner.window_merge import merged_spans
from kerasbert_apps.ner.window_merge import span_outputs


def pointer_entities(texts, windows, row_logits, types, temperature=1.0):
    """``row_logits`` float32 ``[rows, len, len, types]`` (one row per window
    of ``windows``, ``[CLS]`` at position 0) -> the padded outputs of the
    ``text`` signature (``start``, ``end``, ``type``, ``mention``,
    ``score``, ``count``)."""
    import tensorflow as tf

    spans = merged_spans(windows)
    logits = tf.gather_nd(row_logits, spans["cells"] + tf.constant([0, 1, 1], tf.int64))  # [spans, types]
    hits = tf.where(logits > 0)  # [entities, 2]: span, type
    score = tf.sigmoid(tf.gather_nd(logits, hits) / float(temperature))
    return span_outputs(texts, spans, hits[:, 0], tf.cast(hits[:, 1], tf.int32), score, types)
