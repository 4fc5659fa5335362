"""What the triple heads' decoders share, as TensorFlow ops: a triple found
in several windows kept once with its highest score and the triples sorted
per text by (subject start, subject end, predicate, object start, object
end) (:func:`unique_triples`, on the character spans of :func:`triple_fields`);
the padded outputs of the signatures, numeric (:func:`triple_numbers`: what
the ONNX export's graph returns) or named (:func:`per_text`: the predicate
names looked up and the subjects and objects cut from the texts, last); the
rows of an ``ids`` endpoint (:func:`id_rows`). Each head's own rule is in
its folder (``heads/casrel/decode.py``, ``heads/gplinker/decode.py``).
"""


def triple_fields(row_text, offsets, window, predicate, subject_first, subject_last, object_first, object_last):
    """Flat triples as character spans: each triple's window row ``window``,
    its ``predicate`` index and its subject's and object's first and last
    token positions in that row -> the fields :func:`unique_triples` takes
    (``start`` of the first token, ``end`` of the last, through ``offsets``
    int32 [rows, len, 2]; ``text`` from ``row_text``)."""
    import tensorflow as tf

    def at(position, side):
        return tf.gather_nd(offsets[..., side], tf.stack([window, position], 1))

    return {
        "text": tf.gather(row_text, window),
        "subject_start": at(subject_first, 0),
        "subject_end": at(subject_last, 1),
        "predicate": predicate,
        "object_start": at(object_first, 0),
        "object_end": at(object_last, 1),
    }


#: The order triples are sorted in (and what makes two triples one).
TRIPLE_KEY = ("text", "subject_start", "subject_end", "predicate", "object_start", "object_end")
#: The strings the string step cuts from the texts: output -> (start, end) outputs.
TRIPLE_SPANS = {"subject": ("subject_start", "subject_end"), "object": ("object_start", "object_end")}


def triple_names(predicates):
    """The names the string step gives the predicate indices: ``{"predicate": ("predicate", predicates)}``."""
    return {"predicate": ("predicate", list(predicates))}


def unique_triples(fields, score):
    """Flat triples (``fields``: 1-D int32 ``text``, ``subject_start``,
    ``subject_end``, ``predicate``, ``object_start``, ``object_end``; ``score``)
    with a triple found in several windows kept once, with its highest score,
    sorted by (text, subject start, subject end, predicate, object start,
    object end); ``score`` joins the returned fields. On numbers only: the
    triples sorted by those fields (stable sorts, the last field first), a
    triple kept where it differs from the one before it."""
    import tensorflow as tf

    from kerasbert.serving.graph_ops import argsort
    from kerasbert.serving.graph_ops import nonzero

    order = tf.range(tf.size(score))
    for name in reversed(TRIPLE_KEY):
        order = tf.gather(order, argsort(tf.gather(fields[name], order)))
    rows = tf.gather(tf.stack([fields[name] for name in TRIPLE_KEY], 1), order)  # [n, 6], sorted
    # The same triple from several windows: keep one, with the highest score.
    first = tf.concat([tf.fill([tf.minimum(tf.size(score), 1)], True),
                       tf.reduce_any(rows[1:] != rows[:-1], axis=1)], 0)
    kept = nonzero(first)
    unique = {name: tf.gather(rows[:, i], kept) for i, name in enumerate(TRIPLE_KEY)}
    which = tf.cumsum(tf.cast(first, tf.int32)) - 1
    unique["score"] = tf.math.unsorted_segment_max(tf.gather(score, order), which, tf.size(kept))
    return unique


def triple_numbers(fields, n_texts):
    """Flat triples (:func:`unique_triples`' fields, sorted by text) -> the
    numeric outputs, padded per batch::

        subject_start, subject_end, object_start, object_end  int32  -1 pads
        predicate                                             int32  index; -1 pads
        score                                                 float32 0 pads
        count                                                 int32 [batch]
    """
    from kerasbert.serving.graph_ops import row_columns
    from kerasbert.serving.graph_ops import scatter_rows

    where = row_columns(fields["text"], n_texts)
    out = {name: scatter_rows(fields[name], where, -1) for name in TRIPLE_KEY[1:]}
    out["score"] = scatter_rows(fields["score"], where, 0.0)
    out["count"] = where[2]
    return out


def per_text(fields, n_texts, predicates, texts=None):
    """Flat triples -> the signature's outputs, padded per batch: the
    numeric outputs (:func:`triple_numbers`) named by the string step
    (:func:`kerasbert.serving.graph_ops.named_outputs`)::

        subject_start, subject_end, object_start, object_end  int32  -1 pads
        predicate                                             string "" pads
        subject, object (when ``texts`` is given)             string "" pads
        score                                                 float32
        count                                                 int32 [batch]
    """
    from kerasbert.serving.graph_ops import named_outputs

    return named_outputs(texts, triple_numbers(fields, n_texts), triple_names(predicates), TRIPLE_SPANS)


def id_rows(token_ids, segment_ids, padding_mask, cls_id, sep_id):
    """What an ``ids`` endpoint decodes from (one window per row, ``[CLS] ...
    [SEP]``): ``(inputs, allowed, offsets)`` -- the encoder inputs (empty rows
    made valid), the positions a span may start or end at (the tokens between
    ``[CLS]`` and ``[SEP]``), and TOKEN positions as offsets (position, + 1)."""
    import tensorflow as tf

    from kerasbert.serving.rows import nonempty_encoder_inputs

    rows = {"token_ids": token_ids, "segment_ids": segment_ids, "padding_mask": padding_mask}
    inputs = nonempty_encoder_inputs(rows, cls_id, sep_id)
    positions = tf.range(tf.shape(token_ids)[1])
    n = tf.reduce_sum(tf.cast(padding_mask > 0, tf.int32), axis=1)  # [CLS] + tokens + [SEP]
    allowed = (positions[None, :] >= 1) & (positions[None, :] < n[:, None] - 1)
    offsets = tf.tile(tf.stack([positions, positions + 1], 1)[None], [tf.shape(token_ids)[0], 1, 1])
    return inputs, allowed, offsets
