"""The triples serving graph: raw text in, triples with character offsets out.

:func:`export_extractor` writes a trained :class:`~apps.triples.extractor.Extractor`
as a SavedModel for TF Serving (layout, atomicity, warmup:
:mod:`kerasbert.export`). The ``text`` signature does, inside the graph, what
:meth:`Extractor.predict` does on the host:

1. :meth:`kerasbert.graph_tokenizer.GraphTokenizer.windows` -- WordPiece ids
   with code-point offsets, long texts cut into the Extractor's windows;
2. the ``encode`` sub-model on the windows (length-sorted groups of 8,
   :func:`kerasbert.export.by_length`): sequence vectors and subject
   start/end probabilities;
3. subject spans by the Extractor's rule (:func:`apps.triples.extractor.decode_spans`:
   a pointer fires when its probability is > its threshold, on a real token;
   each firing start takes the nearest firing end at or after it);
4. the ``objects`` sub-model on one row per subject, then object spans per
   predicate by the same rule;
5. token spans -> character spans through the offsets; a triple found in
   several windows is kept once, with its highest score; triples sorted per
   text by (subject start, subject end, predicate, object start, object end).

Signature ``serving_default``::

    inputs:  text            string [batch]
    outputs: subject_start   int32  [batch, max_triples]  code-point offsets, end
             subject_end     int32  [batch, max_triples]  exclusive; -1 pads
             subject         string [batch, max_triples]  text[subject_start:subject_end]
             predicate       string [batch, max_triples]  "" pads
             object_start    int32  [batch, max_triples]
             object_end      int32  [batch, max_triples]
             object          string [batch, max_triples]
             score           float32[batch, max_triples]  sqrt(subject score x object score)
             count           int32  [batch]

``--input ids`` takes ``token_ids``, ``segment_ids``, ``padding_mask`` (int32
[batch, len], one window per row, ``[CLS] ... [SEP]``) and returns the same
outputs without the strings ``subject``/``object``, with TOKEN positions
(row position of the first token, last + 1) instead of character offsets --
core TensorFlow ops only.
"""

from kerasbert.export import by_length
from kerasbert.export import nonempty_encoder_inputs
from kerasbert.export import export_saved_model
from kerasbert.export import signature_and_warmup

WARMUP_TEXTS = [
    "Alice Martin, born in Lyon, works for the United Nations in New York.",
    "李白出生于碎叶城。",
    "",
]


def _spans(start_probs, end_probs, threshold_start, threshold_end, allowed):
    """Pointer spans of every row of ``[rows, len]`` probabilities.

    Returns ``(row, start, end, score)`` 1-D tensors (end inclusive,
    score = sqrt(p_start * p_end)), ordered by (row, start)."""
    import tensorflow as tf

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
    return row, start, end, tf.sqrt(tf.cast(p_start, tf.float32) * tf.cast(p_end, tf.float32))


def _triples(extractor, inputs, n_rows, row_text, offsets, allowed):
    """Triples of a batch of windows as flat tensors, deduplicated and sorted.

    Args:
        inputs: the encoder inputs: the ``n_rows`` windows, or one ``[CLS]
            [SEP]`` row when there is none (so no sub-model ever sees an
            empty batch); row 0 always exists.
        row_text: int32 [n_rows], the text of each row.
        offsets: int32 [n_rows, len, 2], start/end reported for each position.
        allowed: bool [n_rows, len], the real tokens.

    Returns a dict of 1-D tensors ``text``, ``subject_start``, ``subject_end``,
    ``predicate`` (int32 index), ``object_start``, ``object_end``, ``score``.
    """
    import tensorflow as tf

    encode, objects = extractor.model.decoders()
    th = extractor.thresholds
    n_predicates = len(extractor.predicates)
    encoded = by_length(lambda rows: encode(rows, training=False), inputs)  # length-sorted groups of 8
    sequence = encoded["sequence"]
    length = tf.shape(allowed)[1]  # the inputs may be wider (they are at least 2 wide)
    s_row, s_start, s_end, s_score = _spans(
        tf.cast(encoded["subject_start"][:n_rows, :length], tf.float32),
        tf.cast(encoded["subject_end"][:n_rows, :length], tf.float32),
        th["subject_start"], th["subject_end"], allowed,
    )
    n_subjects = tf.size(s_row)
    # Object pointers for every subject at once (+ one dummy row: row 0, span (0, 0)).
    rows = tf.concat([s_row, [0]], 0)
    spans = tf.concat([tf.stack([s_start, s_end], 1), [[0, 0]]], 0)
    out = objects({"sequence": tf.gather(sequence, rows), "subject_span": spans}, training=False)

    def by_predicate(x):  # [n, len, P] -> [n * P, len]
        x = tf.transpose(tf.cast(x[:n_subjects, :length], tf.float32), [0, 2, 1])
        return tf.reshape(x, [n_subjects * n_predicates, length])

    object_allowed = tf.repeat(tf.gather(allowed, s_row), n_predicates, axis=0)
    o_row, o_start, o_end, o_score = _spans(
        by_predicate(out["object_start"]), by_predicate(out["object_end"]),
        th["object_start"], th["object_end"], object_allowed,
    )
    subject = o_row // n_predicates
    predicate = o_row % n_predicates
    window = tf.gather(s_row, subject)

    def at(position, side):
        return tf.gather_nd(offsets[..., side], tf.stack([window, position], 1))

    fields = {
        "text": tf.gather(row_text, window),
        "subject_start": at(tf.gather(s_start, subject), 0),
        "subject_end": at(tf.gather(s_end, subject), 1),
        "predicate": predicate,
        "object_start": at(o_start, 0),
        "object_end": at(o_end, 1),
    }
    score = tf.sqrt(tf.gather(s_score, subject) * o_score)
    # The same triple from several windows: keep one, with the highest score.
    key = tf.strings.reduce_join(tf.strings.as_string(tf.stack(list(fields.values()), 1)), axis=1, separator=",")
    unique, which = tf.unique(key)
    n_unique = tf.size(unique)
    first = tf.math.unsorted_segment_min(tf.range(tf.size(which)), which, n_unique)
    fields = {k: tf.gather(v, first) for k, v in fields.items()}
    fields["score"] = tf.math.unsorted_segment_max(score, which, n_unique)
    order = tf.range(n_unique)
    for name in ("object_end", "object_start", "predicate", "subject_end", "subject_start", "text"):
        order = tf.gather(order, tf.argsort(tf.gather(fields[name], order), stable=True))
    fields = {k: tf.gather(v, order) for k, v in fields.items()}
    return fields


def _per_text(fields, n_texts, predicates, texts=None):
    """Flat triples -> the signature's padded outputs."""
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


def text_endpoint(extractor):
    """``(function, trackables)`` for the ``text`` signature."""
    import tensorflow as tf

    from kerasbert.graph_tokenizer import GraphTokenizer

    graph_tokenizer = GraphTokenizer(extractor.tokenizer)
    max_length, overlap = extractor.max_length, extractor.overlap

    def serve(text):
        texts = tf.reshape(text, [-1])
        w = graph_tokenizer.windows(texts, max_length=max_length, overlap=overlap)
        n_rows = tf.shape(w["token_ids"])[0]
        inputs = nonempty_encoder_inputs(w, graph_tokenizer.cls_id, graph_tokenizer.sep_id)
        length = tf.shape(w["token_ids"])[1]
        n = w["token_end"] - w["token_start"]
        positions = tf.range(length)[None, :]
        allowed = (positions >= 1) & (positions <= n[:, None])
        n_texts = tf.size(w["num_tokens"])
        fields = _triples(extractor, inputs, n_rows, w["text_index"], w["offsets"], allowed)
        return _per_text(fields, n_texts, extractor.predicates, texts)

    return serve, [extractor.model, graph_tokenizer]


def ids_endpoint(extractor):
    """``(function, trackables)`` for the ``ids`` signature (core ops only)."""
    import tensorflow as tf

    def serve(token_ids, segment_ids, padding_mask):
        n_rows = tf.shape(token_ids)[0]
        inputs = nonempty_encoder_inputs(
            {"token_ids": token_ids, "segment_ids": segment_ids, "padding_mask": padding_mask},
            extractor.tokenizer.cls_id, extractor.tokenizer.sep_id,
        )
        length = tf.shape(token_ids)[1]
        positions = tf.range(length)
        n = tf.reduce_sum(tf.cast(padding_mask > 0, tf.int32), axis=1)  # [CLS] + tokens + [SEP]
        allowed = (positions[None, :] >= 1) & (positions[None, :] < n[:, None] - 1)
        offsets = tf.tile(tf.stack([positions, positions + 1], 1)[None], [n_rows, 1, 1])
        fields = _triples(extractor, inputs, n_rows, tf.range(n_rows), offsets, allowed)
        return _per_text(fields, n_rows, extractor.predicates)

    return serve, [extractor.model]


def export_extractor(extractor, base, version=None, input="text", warmup_texts=None, model_name=None):
    """Write ``extractor`` as ``base/<version>`` for TF Serving (see the module
    docstring); returns the version folder. ``model_name`` goes into the
    warmup requests (default: the base folder's name)."""
    warmup_texts = list(WARMUP_TEXTS if warmup_texts is None else warmup_texts)
    endpoint, trackables = (ids_endpoint if input == "ids" else text_endpoint)(extractor)
    signature, warmup = signature_and_warmup(extractor.tokenizer, extractor.max_length, input, warmup_texts)
    description = {
        "task": "triples",
        "predicates": extractor.predicates,
        "thresholds": extractor.thresholds,
        "max_length": extractor.max_length,
        "overlap": extractor.overlap,
        "tokenizer": extractor.tokenizer.get_config(),
    }
    return export_saved_model(base, version, endpoint, signature, trackables, description, warmup,
                              extractor.tokenizer.vocab, input,
                              model_name)
