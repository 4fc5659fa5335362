"""GlobalPointer decoding, written once as TensorFlow ops: per-window span logits -> entities.

:func:`span_entities` is step 3 of :class:`kerasbert_apps.base.pipeline.Pipeline` for
the GlobalPointer head (:class:`kerasbert_apps.ner.heads.global_pointer.pipeline.SpanTagger`) -- what
``predict``, ``evaluate``, the dev evaluation and the SavedModel all run.
Following a batch:

1. **spans per window**: every span of a window's tokens (``[CLS]``,
   ``[SEP]`` and padding excluded) with its logit per type;
2. **merge windows**: a span seen by several overlapping windows takes its
   logits from the window where it sits furthest from a cut edge, the rule
   of every head (:func:`kerasbert_apps.ner.window_merge.merged_spans`);
3. **entities**: every (span, type) whose chosen logit is above the
   decision threshold (0 unless fitted on dev:
   :meth:`~kerasbert_apps.ner.span_pipeline.SpanPipeline.fit_threshold`); with
   ``decoding="all"`` that is all: spans may nest and cross, and one span
   may carry several types. With ``"nested"`` a span is at most its best
   type and, of entities that cross (one starts inside the other and ends
   after it), the more probable is kept; an entity inside another is kept.
   With ``"flat"`` (a model trained on data where no entity lies inside
   another) an entity that overlaps a more probable one in any way is
   dropped (:func:`kerasbert_apps.ner.overlaps.without_clashes`,
   the span heads' shared rule). ``start`` is the
   first token's start offset, ``end`` the last token's end (exclusive), code
   points into the original text; ``score`` is ``sigmoid(logit / T)``, ``T``
   the model's score temperature (1 unless fitted on dev:
   :func:`kerasbert_apps.ner.calibration.fit_temperature`; it changes no entity).
   Entities of a text are sorted by start, then end, then type.

Outputs, padded per batch: every NER head's (:mod:`kerasbert_apps.ner.decode`),
the rules above on numbers, the type names and mentions looked up last.
"""

from kerasbert_apps.ner.decode import named_entities
from kerasbert_apps.ner.overlaps import without_clashes
from kerasbert_apps.ner.window_merge import merged_spans
from kerasbert_apps.ner.window_merge import span_outputs


#: The ``decoding`` rules of :func:`span_entities` (``--global-pointer-decoding`` without ``auto``).
DECODINGS = ("nested", "flat", "all")


def span_entities(texts, windows, row_logits, types, temperature=1.0, threshold=0.0, decoding="all"):
    """Steps 1-3 of the module docstring: ``row_logits`` float32 ``[rows,
    len, len, types]`` (start, end inclusive; one row per window of
    ``windows``, :meth:`kerasbert.tokenizers.graph_tokenizer.GraphTokenizer.windows`,
    ``len`` its width with ``[CLS]``) -> the padded outputs: the (span,
    type) pairs whose logit is above ``threshold`` (a float or a scalar
    tensor), as ``decoding`` (one of :data:`DECODINGS`) keeps them; scores
    are ``sigmoid(logit / temperature)`` (a Python float > 0). Numeric
    outputs when ``texts`` is None (:mod:`kerasbert_apps.ner.decode`)."""
    import tensorflow as tf

    if decoding not in DECODINGS:
        raise ValueError(f"decoding must be one of {', '.join(DECODINGS)}, got {decoding!r}")
    spans = merged_spans(windows)
    logits = tf.gather_nd(row_logits, spans["cells"] + tf.constant([0, 1, 1], tf.int64))  # [spans, types]; +1: [CLS]
    above = logits > threshold
    if decoding != "all":  # a span's best type only
        above &= tf.one_hot(tf.argmax(logits, axis=-1), tf.shape(logits)[-1], on_value=True, off_value=False)
    hits = tf.where(above)  # [E, 2]: span, type
    score = tf.sigmoid(tf.gather_nd(logits, hits) / float(temperature))
    entities = span_outputs(None, spans, hits[:, 0], tf.cast(hits[:, 1], tf.int32), score, types)
    if decoding != "all":
        entities = without_clashes(entities, nested=decoding == "nested")
    return entities if texts is None else named_entities(texts, entities, types)
