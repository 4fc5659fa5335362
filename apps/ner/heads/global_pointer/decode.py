"""GlobalPointer decoding, written once as TensorFlow ops: per-window span logits -> entities.

:func:`span_entities` is step 3 of :class:`kerasbert_apps.base.pipeline.Pipeline` for
the GlobalPointer head (:class:`kerasbert_apps.ner.heads.global_pointer.pipeline.SpanTagger`) -- what
``predict``, ``evaluate``, the dev evaluation and the SavedModel all run.
Following a batch:

1. **spans per window**: every span of a window's tokens (``[CLS]``,
   ``[SEP]`` and padding excluded) with its logit per type;
2. **merge windows**: a span seen by several overlapping windows takes its
   logits from the window where it sits furthest from a cut edge (its margin
   is the smaller of its first token's distance from the window's left cut
   and its last token's distance from the right cut; the text's own first and
   last tokens are not cuts); on a tie the earlier window wins -- the rule of
   :func:`kerasbert_apps.ner.decode.merge_windows` for single tokens, applied to spans;
3. **entities**: every (span, type) whose chosen logit is above 0; spans may
   nest and overlap, and one span may carry several types. ``start`` is the
   first token's start offset, ``end`` the last token's end (exclusive), code
   points into the original text; ``score`` is ``sigmoid(logit / T)``, ``T``
   the model's score temperature (1 unless fitted on dev:
   :func:`kerasbert_apps.ner.calibration.fit_temperature`; it changes no entity).
   Entities of a text are sorted by start, then end, then type.

Outputs, padded per batch (the ``text`` signature's, as for the BIO heads)::

    start, end  int32  [batch, max_entities]   -1 pads
    type        string [batch, max_entities]   "" pads
    mention     string [batch, max_entities]   text[start:end]; "" pads
    score       float32[batch, max_entities]   0 pads
    count       int32  [batch]
"""

from kerasbert_apps.ner.decode import entity_outputs
from kerasbert_apps.ner.decode import merge_windows

_BIG = 1 << 20  # margin at a window edge that is the text's own edge (not a cut)
_WINDOW_SLOTS = 1 << 32  # key = margin * _WINDOW_SLOTS - window index (int64)


def span_entities(texts, windows, row_logits, types, temperature=1.0):
    """Steps 1-3 of the module docstring: ``row_logits`` float32 ``[rows,
    len, len, types]`` (start, end inclusive; one row per window of
    ``windows``, :meth:`kerasbert.graph_tokenizer.GraphTokenizer.windows`,
    ``len`` its width with ``[CLS]``) -> the padded outputs; scores are
    ``sigmoid(logit / temperature)`` (a Python float > 0)."""
    import tensorflow as tf

    text_index, token_start, token_end = windows["text_index"], windows["token_start"], windows["token_end"]
    num_tokens = windows["num_tokens"]
    n_texts = tf.size(num_tokens)
    n_types = len(types)
    merged = merge_windows(windows, {"starts": windows["offsets"][..., 0], "ends": windows["offsets"][..., 1]})
    starts, ends = merged["starts"], merged["ends"]

    # --- 1. every span (row, i, j) of token positions 0 <= i <= j < tokens of the row
    n_rows = tf.size(text_index)
    width = tf.maximum(tf.shape(windows["token_ids"])[1] - 2, 0)  # token positions per row
    positions = tf.range(width)
    n = token_end - token_start
    i = positions[None, :, None]
    j = positions[None, None, :]
    valid = (i <= j) & (j < n[:, None, None])

    # --- 2. the window each span is taken from
    cut_left = (token_start > 0)[:, None, None]
    cut_right = (token_end < tf.gather(num_tokens, text_index))[:, None, None]
    left = tf.where(cut_left, i, _BIG)
    right = tf.where(cut_right, n[:, None, None] - 1 - j, _BIG)
    margin = tf.cast(tf.minimum(left, right), tf.int64)
    first_row = tf.cumsum(tf.math.bincount(text_index, minlength=n_texts, dtype=tf.int32), exclusive=True)
    window_k = tf.range(n_rows) - tf.gather(first_row, text_index)
    key = margin * _WINDOW_SLOTS - tf.cast(window_k, tf.int64)[:, None, None]
    token_first = tf.cumsum(num_tokens, exclusive=True)
    flat_start = tf.gather(token_first, text_index)[:, None, None] + token_start[:, None, None] + i  # [rows, width, 1]
    span_id = tf.cast(flat_start, tf.int64) * tf.cast(width, tf.int64) + tf.cast(j - i, tf.int64)
    cells = tf.where(valid)  # [N, 3]: row, i, j
    key_valid = tf.gather_nd(key, cells)
    id_valid = tf.gather_nd(tf.broadcast_to(span_id, tf.shape(key)), cells)
    n_ids = tf.cast(tf.reduce_sum(num_tokens), tf.int64) * tf.cast(width, tf.int64)
    best = tf.math.unsorted_segment_max(key_valid, id_valid, n_ids)
    chosen = tf.boolean_mask(cells, key_valid == tf.gather(best, id_valid))

    # --- 3. (span, type) with a logit above 0
    logits = tf.gather_nd(row_logits, chosen + tf.constant([0, 1, 1], tf.int64))  # [chosen, types]; +1: [CLS]
    hits = tf.where(logits > 0)  # [E, 2]: chosen cell, type
    cell = tf.gather(chosen, hits[:, 0])
    kind = tf.cast(hits[:, 1], tf.int32)
    row, first, last = (tf.cast(cell[:, k], tf.int32) for k in range(3))
    e_text = tf.gather(text_index, row)
    flat_first = tf.gather(token_first, e_text) + tf.gather(token_start, row) + first
    flat_last = flat_first + (last - first)
    order = tf.argsort((tf.cast(flat_first, tf.int64) * tf.cast(width + 1, tf.int64) + tf.cast(last - first, tf.int64))
                       * max(n_types, 1) + tf.cast(kind, tf.int64), stable=True)
    e_text = tf.gather(e_text, order)
    flat_first, flat_last, kind = tf.gather(flat_first, order), tf.gather(flat_last, order), tf.gather(kind, order)
    score = tf.sigmoid(tf.gather(tf.gather_nd(logits, hits), order) / float(temperature))
    return entity_outputs(texts, n_texts, e_text, tf.gather(starts, flat_first), tf.gather(ends, flat_last), kind,
                          score, types)
