"""What the triple heads' decoders share, as TensorFlow ops: a triple found
in several windows kept once with its highest score and the triples sorted
per text by (subject start, subject end, predicate, object start, object
end) (:func:`unique_triples`, on the character spans of :func:`triple_fields`); the padded outputs of the signatures
(:func:`per_text`); the rows of an ``ids`` endpoint (:func:`id_rows`). Each
head's own rule is in its folder (``heads/casrel/decode.py``,
``heads/gplinker/decode.py``).
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


def unique_triples(fields, score):
    """Flat triples (``fields``: 1-D ``text``, ``subject_start``,
    ``subject_end``, ``predicate``, ``object_start``, ``object_end``; ``score``)
    with a triple found in several windows kept once, with its highest score,
    sorted by (text, subject start, subject end, predicate, object start,
    object end); ``score`` joins the returned fields."""
    import tensorflow as tf

    from kerasbert.serving.graph_ops import argsort

    # The same triple from several windows: keep one, with the highest score.
    key = tf.strings.reduce_join(tf.strings.as_string(tf.stack(list(fields.values()), 1)), axis=1, separator=",")
    unique, which = tf.unique(key)
    n_unique = tf.size(unique)
    first = tf.math.unsorted_segment_min(tf.range(tf.size(which)), which, n_unique)
    fields = {k: tf.gather(v, first) for k, v in fields.items()}
    fields["score"] = tf.math.unsorted_segment_max(score, which, n_unique)
    order = tf.range(n_unique)
    for name in ("object_end", "object_start", "predicate", "subject_end", "subject_start", "text"):
        order = tf.gather(order, argsort(tf.gather(fields[name], order)))
    return {k: tf.gather(v, order) for k, v in fields.items()}


def per_text(fields, n_texts, predicates, texts=None):
    """Flat triples -> the signature's outputs, padded per batch::

        subject_start, subject_end, object_start, object_end  int32  -1 pads
        predicate                                             string "" pads
        subject, object (when ``texts`` is given)             string "" pads
        score                                                 float32
        count                                                 int32 [batch]
    """
    import tensorflow as tf

    def padded(values, pad):
        ragged = tf.RaggedTensor.from_value_rowids(
            values, tf.cast(fields["text"], tf.int64), nrows=tf.cast(n_texts, tf.int64), validate=False
        )
        return ragged.to_tensor(default_value=pad)

    outputs = {
        "subject_start": padded(fields["subject_start"], -1),
        "subject_end": padded(fields["subject_end"], -1),
        "predicate": padded(tf.gather(tf.constant(predicates, tf.string), fields["predicate"]), ""),
        "object_start": padded(fields["object_start"], -1),
        "object_end": padded(fields["object_end"], -1),
        "score": padded(fields["score"], 0.0),
        "count": tf.math.bincount(fields["text"], minlength=n_texts, maxlength=n_texts, dtype=tf.int32),
    }
    if texts is not None:
        source = tf.gather(texts, fields["text"])
        for side in ("subject", "object"):
            start, end = fields[f"{side}_start"], fields[f"{side}_end"]
            outputs[side] = padded(tf.strings.substr(source, start, end - start, unit="UTF8_CHAR"), "")
    return outputs


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
