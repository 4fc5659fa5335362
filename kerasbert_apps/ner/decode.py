"""The outputs every NER head's decoding gives, as TensorFlow ops.

A head's decoding (in its folder, ``kerasbert_apps/ner/heads/<name>/decode.py``,
or in the head's own package) turns its model's outputs on a batch's windows
into entities -- each with its text's index, character offsets into the
original text (code points, ``end`` exclusive, so ``text[start:end]`` is the
entity as written), a type and a score -- and hands them to
:func:`entity_outputs` (span heads through
:func:`kerasbert_apps.ner.window_merge.span_outputs`), which pads them per
text: what ``predict``, ``evaluate``, the dev evaluation and the SavedModel's
``text`` signature return::

    start, end  int32  [batch, max_entities]   -1 pads
    type        string [batch, max_entities]   "" pads
    mention     string [batch, max_entities]   text[start:end]; "" pads
    score       float32[batch, max_entities]   0 pads
    count       int32  [batch]
"""


def entity_outputs(texts, n_texts, e_text, e_start, e_end, kind, score, types):
    """The entities of a batch (flat, each with its text's index ``e_text``,
    character ``e_start``/``e_end``, type index ``kind`` into ``types`` and
    ``score``) as the padded per-text outputs of the module docstring (with
    the mentions cut from ``texts``; ``n_texts`` the batch's texts)."""
    import tensorflow as tf

    from kerasbert.serving.graph_ops import row_columns
    from kerasbert.serving.graph_ops import scatter_rows

    e_type = tf.gather(tf.constant(types if types else [""], tf.string), kind)
    e_mention = tf.strings.substr(tf.gather(texts, e_text), e_start, e_end - e_start, unit="UTF8_CHAR")
    where = row_columns(e_text, n_texts)
    return {
        "start": scatter_rows(e_start, where, -1),
        "end": scatter_rows(e_end, where, -1),
        "type": scatter_rows(e_type, where, ""),
        "mention": scatter_rows(e_mention, where, ""),
        "score": scatter_rows(score, where, 0.0),
        "count": where[2],
    }
