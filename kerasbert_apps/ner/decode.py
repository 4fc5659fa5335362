"""The outputs every NER head's decoding gives, as TensorFlow ops.

A head's decoding (in its folder, ``kerasbert_apps/ner/heads/<name>/decode.py``,
or in the head's own package) turns its model's outputs on a batch's windows
into entities -- each with its text's index, character offsets into the
original text (code points, ``end`` exclusive, so ``text[start:end]`` is the
entity as written), a type and a score -- and hands them to
:func:`entity_outputs` (span heads through
:func:`kerasbert_apps.ner.window_merge.span_outputs`), which pads them per
text. Every rule (which entity, its offsets and score, the window merge,
overlaps) works on numbers; the strings come last, in one step
(:func:`named_entities`) that only looks things up. Without texts
(``texts=None``) the decoding stops before it: the numeric outputs, what
the ONNX export's graph returns and its host names
(:func:`kerasbert.serving.onnx.named_row`, the same lookups)::

    start, end  int32  [batch, max_entities]   -1 pads
    kind        int32  [batch, max_entities]   index into the types; -1 pads
    score       float32[batch, max_entities]   0 pads
    count       int32  [batch]

With texts, what ``predict``, ``evaluate``, the dev evaluation and the
SavedModel's ``text`` signature return: ``kind`` made ``type``, and the
mentions cut from the texts::

    start, end  int32  [batch, max_entities]   -1 pads
    type        string [batch, max_entities]   "" pads
    mention     string [batch, max_entities]   text[start:end]; "" pads
    score       float32[batch, max_entities]   0 pads
    count       int32  [batch]
"""

#: The mentions the string step cuts from the texts: output -> (start, end) outputs.
ENTITY_SPANS = {"mention": ("start", "end")}


def entity_names(types):
    """The names the string step gives the type indices: ``{"kind": ("type", types)}``."""
    return {"kind": ("type", list(types))}


def entity_numbers(n_texts, e_text, e_start, e_end, kind, score):
    """The entities of a batch (flat, each with its text's index ``e_text``
    -- non-decreasing --, character ``e_start``/``e_end``, type index
    ``kind`` and ``score``) as the padded numeric outputs of the module
    docstring (``n_texts`` the batch's texts)."""
    from kerasbert.serving.graph_ops import row_columns
    from kerasbert.serving.graph_ops import scatter_rows

    where = row_columns(e_text, n_texts)
    return {
        "start": scatter_rows(e_start, where, -1),
        "end": scatter_rows(e_end, where, -1),
        "kind": scatter_rows(kind, where, -1),
        "score": scatter_rows(score, where, 0.0),
        "count": where[2],
    }


def named_entities(texts, numbers, types):
    """The string step: the numeric outputs ``numbers`` of the texts
    ``texts`` (``tf.string [batch]``) with ``kind`` made ``type`` (names
    from ``types``) and the ``mention`` of each entity cut from its text
    (:func:`kerasbert.serving.graph_ops.named_outputs`)."""
    from kerasbert.serving.graph_ops import named_outputs

    return named_outputs(texts, numbers, entity_names(types), ENTITY_SPANS)


def entity_outputs(texts, n_texts, e_text, e_start, e_end, kind, score, types):
    """The entities of a batch (flat, as :func:`entity_numbers` takes them,
    ``kind`` indexing ``types``) as the padded outputs of the module
    docstring: numeric when ``texts`` is None, else named
    (:func:`named_entities`)."""
    numbers = entity_numbers(n_texts, e_text, e_start, e_end, kind, score)
    return numbers if texts is None else named_entities(texts, numbers, types)
