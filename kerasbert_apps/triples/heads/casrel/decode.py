"""CasRel decoding, written once as TensorFlow ops: pointer probabilities -> triples.

What ``predict``, ``evaluate``, the dev evaluation and the SavedModel all run
(:meth:`kerasbert_apps.triples.heads.casrel.pipeline.Extractor.infer` composes these with the model).

Span rule (:func:`spans`): a pointer *fires* when its probability is strictly
greater than its threshold (CasRel's ``> h_bar``; a probability exactly at
the threshold does not fire) on an allowed position (a real token: not
``[CLS]``, ``[SEP]`` or padding). Every firing start is paired with the
nearest firing end at or after it (in the same row; for objects, each
predicate has rows of its own). So nested and overlapping spans are possible
(two starts may share an end); a span can not reach past a closer firing
end. ``score`` of a span is the geometric mean of its start and end
probabilities.

Triples (:func:`triples`): subjects from the subject pointers of each window
row; one object row per subject (its window's sequence vectors and its span,
all subjects of a batch in one call of the ``objects`` model); objects per
predicate by the same rule. One subject may get several objects and
predicates (SEO), one (subject, object) pair several predicates (EPO). Token
spans become character spans through the offsets (``start`` of the first
token, ``end`` of the last, end exclusive). A triple's ``score`` is the
geometric mean of its subject's and its object's scores; then
:func:`kerasbert_apps.triples.decode.unique_triples` (one triple of several
windows, sorted per text).
"""

from kerasbert_apps.triples.decode import triple_fields
from kerasbert_apps.triples.decode import unique_triples


def spans(start_probs, end_probs, threshold_start, threshold_end, allowed):
    """Pointer spans of every row of ``[rows, len]`` probabilities (rule in
    the module docstring).

    Returns ``(row, start, end, score)`` 1-D tensors: ``end`` inclusive (a
    position), ``score = sqrt(p_start * p_end)``, ordered by (row, start).
    """
    import tensorflow as tf

    start_probs = tf.cast(start_probs, tf.float32)
    end_probs = tf.cast(end_probs, tf.float32)
    allowed = tf.cast(allowed, tf.bool)
    starts = (start_probs > threshold_start) & allowed
    ends = (end_probs > threshold_end) & allowed
    ends_before = tf.cumsum(tf.cast(ends, tf.int32), axis=1, exclusive=True)  # firing ends before i
    ends_in_row = tf.reduce_sum(tf.cast(ends, tf.int32), axis=1)
    row_first_end = tf.cumsum(ends_in_row, exclusive=True)
    end_positions = tf.cast(tf.where(ends)[:, 1], tf.int32)  # row-major: rows in order, positions ascending
    cells = tf.where(starts)
    row = tf.cast(cells[:, 0], tf.int32)
    start = tf.cast(cells[:, 1], tf.int32)
    before = tf.gather_nd(ends_before, cells)
    has_end = before < tf.gather(ends_in_row, row)
    row, start = tf.boolean_mask(row, has_end), tf.boolean_mask(start, has_end)
    end = tf.gather(end_positions, tf.gather(row_first_end, row) + tf.boolean_mask(before, has_end))
    p_start = tf.gather_nd(start_probs, tf.stack([row, start], 1))
    p_end = tf.gather_nd(end_probs, tf.stack([row, end], 1))
    return row, start, end, tf.sqrt(p_start * p_end)


def triples(model, thresholds, n_predicates, inputs, n_rows, row_text, offsets, allowed, run):
    """Triples of a batch of window rows as flat tensors, deduplicated and sorted.

    Args:
        model: the :class:`~kerasbert_apps.triples.heads.casrel.model.TripleModel` (its ``decoders()``).
        thresholds: dict with ``subject_start``, ``subject_end``,
            ``object_start``, ``object_end``.
        inputs: the encoder inputs: the ``n_rows`` rows, or one ``[CLS]
            [SEP]`` row when there is none (so no model ever sees an empty
            batch); row 0 always exists.
        row_text: int32 [n_rows], the text of each row.
        offsets: int32 [n_rows, len, 2], the start/end reported for each position.
        allowed: bool [n_rows, len], the positions that may start or end a span.
        run: the runner of :mod:`kerasbert_apps.base.pipeline`.

    Returns a dict of 1-D tensors ``text``, ``subject_start``, ``subject_end``,
    ``predicate`` (int32 index), ``object_start``, ``object_end``, ``score``.
    """
    import tensorflow as tf

    encode, objects = model.decoders()
    encoded = run.rows(encode, inputs)
    sequence = encoded["sequence"]
    length = tf.shape(allowed)[1]  # the inputs may be wider (they are at least 2 wide)
    s_row, s_start, s_end, s_score = spans(
        encoded["subject_start"][:n_rows, :length], encoded["subject_end"][:n_rows, :length],
        thresholds["subject_start"], thresholds["subject_end"], allowed,
    )
    n_subjects = tf.size(s_row)
    # Object pointers for every subject at once (+ one dummy row: row 0, span (0, 0)).
    rows = tf.concat([s_row, [0]], 0)
    subject_spans = tf.concat([tf.stack([s_start, s_end], 1), [[0, 0]]], 0)
    out = run.call(objects, {"sequence": tf.gather(sequence, rows), "subject_span": subject_spans})

    def by_predicate(x):  # [n, len, P] -> [n * P, len]
        x = tf.transpose(tf.cast(x[:n_subjects, :length], tf.float32), [0, 2, 1])
        return tf.reshape(x, [n_subjects * n_predicates, length])

    object_allowed = tf.repeat(tf.gather(allowed, s_row), n_predicates, axis=0)
    o_row, o_start, o_end, o_score = spans(
        by_predicate(out["object_start"]), by_predicate(out["object_end"]),
        thresholds["object_start"], thresholds["object_end"], object_allowed,
    )
    subject = o_row // n_predicates
    predicate = o_row % n_predicates
    window = tf.gather(s_row, subject)

    fields = triple_fields(row_text, offsets, window, predicate, tf.gather(s_start, subject), tf.gather(s_end, subject),
                           o_start, o_end)
    score = tf.sqrt(tf.gather(s_score, subject) * o_score)
    return unique_triples(fields, score)
