"""GPLinker decoding, written once as TensorFlow ops: span and link logits -> triples.

What ``predict``, ``evaluate``, the dev evaluation and the SavedModel all run
for the GPLinker head (:meth:`kerasbert_apps.triples.heads.gplinker.pipeline.GPLinkerExtractor.decode`
composes it with the model). Per window row (bert4keras's GPLinker rule):

1. **entities**: every span ``(i, j)`` of real tokens (``[CLS]``, ``[SEP]``
   and padding excluded), ``i <= j``, whose subject logit is above the
   entity threshold is a subject; whose object logit is above it, an object
   (one span may be both; spans may nest and overlap);
2. **links**: a subject ``(i, j)`` and an object ``(k, l)`` of the same row
   make the triple ``(subject, p, object)`` when BOTH the head link
   ``heads[i, k, p]`` and the tail link ``tails[j, l, p]`` are above the link
   threshold. One subject may get several objects (SEO), one pair several
   predicates (EPO); a head link without its tail link (or the reverse)
   gives nothing;
3. **score**: the sigmoid of the LOWEST of the four logits (subject span,
   object span, head link, tail link), i.e. the smallest of the four
   probabilities: the probability of the weakest decision the triple rests
   on. At the default thresholds (logit 0, bert4keras's rule) every logit of
   a triple is above 0, so its score is above 0.5; in general it is above the
   lower of the two thresholds' probabilities;
4. **windows**: token spans become character spans through the offsets
   (``start`` of the first token, ``end`` of the last, end exclusive); a
   triple found in several windows of a text is kept once, with its highest
   score, as for the CasRel head (:func:`kerasbert_apps.triples.decode.unique_triples`);
   a triple whose subject and object share no window cannot be found.

The thresholds are LOGITS here (the extractor keeps them as probabilities,
``--threshold-entity`` / ``--threshold-link``, and passes their logits). The
links are read for every (subject, object) pair of a row, ``P`` logits each:
the work grows with the number of pairs, small for a trained model, large for
an untrained one (or a very low entity threshold) that finds spans everywhere.
"""

from kerasbert_apps.triples.decode import triple_fields
from kerasbert_apps.triples.decode import unique_triples


def linked_triples(logits, row_text, offsets, allowed, entity_threshold=0.0, link_threshold=0.0):
    """Steps 1-4 of the module docstring for a batch of window rows.

    Args:
        logits: ``{"entities": [rows, len, len, 2], "heads": [rows, len, len,
            P], "tails": [rows, len, len, P]}`` float32 (row positions,
            ``[CLS]`` at 0).
        row_text: int32 [rows], the text of each row.
        offsets: int32 [rows, len, 2], the start/end reported for each position.
        allowed: bool [rows, len], the positions a span may start or end at.
        entity_threshold: a span holds where its logit is above this.
        link_threshold: a head or tail link holds where its logit is above this.

    Returns the flat fields of :func:`kerasbert_apps.triples.decode.unique_triples`
    (for :func:`kerasbert_apps.triples.decode.per_text`).
    """
    import tensorflow as tf

    allowed = tf.cast(allowed, tf.bool)
    length = tf.shape(allowed)[1]
    n_rows = tf.shape(allowed)[0]
    entities = tf.cast(logits["entities"], tf.float32)[:, :length, :length]
    heads = tf.cast(logits["heads"], tf.float32)[:, :length, :length]
    tails = tf.cast(logits["tails"], tf.float32)[:, :length, :length]

    # --- 1. subjects and objects: (row, first, last) cells, row-major
    positions = tf.range(length)
    upper = positions[:, None] <= positions[None, :]
    cell_ok = allowed[:, :, None] & allowed[:, None, :] & upper[None]

    def spans(channel):
        cells = tf.cast(tf.where((entities[..., channel] > entity_threshold) & cell_ok), tf.int32)
        return cells[:, 0], cells[:, 1], cells[:, 2], tf.gather_nd(entities[..., channel], cells)

    s_row, s_first, s_last, s_logit = spans(0)
    o_row, o_first, o_last, o_logit = spans(1)

    # --- 2. every (subject, object) pair of a row, then its links
    o_count = tf.math.bincount(o_row, minlength=n_rows, maxlength=n_rows, dtype=tf.int32)
    o_begin = tf.cumsum(o_count, exclusive=True)
    per_subject = tf.gather(o_count, s_row)
    pair_s = tf.repeat(tf.range(tf.size(s_row)), per_subject)
    pair_begin = tf.cumsum(per_subject, exclusive=True)
    pair_o = (tf.gather(o_begin, tf.gather(s_row, pair_s)) + tf.range(tf.size(pair_s))
              - tf.gather(pair_begin, pair_s))
    row = tf.gather(s_row, pair_s)
    head = tf.gather_nd(heads, tf.stack([row, tf.gather(s_first, pair_s), tf.gather(o_first, pair_o)], 1))
    tail = tf.gather_nd(tails, tf.stack([row, tf.gather(s_last, pair_s), tf.gather(o_last, pair_o)], 1))
    hits = tf.cast(tf.where((head > link_threshold) & (tail > link_threshold)), tf.int32)  # [T, 2]: pair, predicate
    pair, predicate = hits[:, 0], hits[:, 1]
    subject, obj = tf.gather(pair_s, pair), tf.gather(pair_o, pair)
    window = tf.gather(row, pair)

    # --- 3. score: the weakest of the four logits
    lowest = tf.reduce_min(tf.stack([tf.gather(s_logit, subject), tf.gather(o_logit, obj),
                                     tf.gather_nd(head, hits), tf.gather_nd(tail, hits)], 1), axis=1)

    # --- 4. character spans, one triple per text
    fields = triple_fields(row_text, offsets, window, predicate, tf.gather(s_first, subject),
                           tf.gather(s_last, subject), tf.gather(o_first, obj), tf.gather(o_last, obj))
    return unique_triples(fields, tf.sigmoid(lowest))
