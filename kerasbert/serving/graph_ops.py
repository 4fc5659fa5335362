"""Small TensorFlow building blocks for serving graphs, each written with few graph nodes.

A serving graph (the in-graph tokenizer, the windows, the decoding of every
head) runs once per request, and at batch 1 its time is mostly the executor's
cost per node, not arithmetic; a graph's size is also what tracing, loading a
SavedModel and its first call pay for. TensorFlow's convenience functions are
generous with nodes: ``tf.repeat`` adds about 55, ``tf.boolean_mask`` 25, a
``RaggedTensor`` built from row ids 30 and its ``value_rowids()`` 70 (shape
checks, broadcasting, assertions). These do the same jobs with the few ops
the job needs, on flat int32 tensors with row splits.

:func:`kerasbert.serving.saved_model.graph_node_count` counts a graph's nodes.
"""

import numpy as np
import tensorflow as tf


def _row(x):
    """``x`` as one row: a numpy array becomes a ``[1, n]`` constant, a tensor is expanded."""
    if isinstance(x, np.ndarray):
        return tf.constant(x.reshape(1, -1))
    return tf.expand_dims(x, 0)


def upper_bound(sorted_values, values):
    """For each of ``values`` (1-D), how many of ``sorted_values`` (1-D,
    ascending; a tensor or a numpy array) are ``<=`` it
    (``tf.searchsorted(..., side="right")``), int32."""
    return tf.squeeze(tf.raw_ops.UpperBound(sorted_inputs=_row(sorted_values), values=_row(values),
                                            out_type=tf.int32), [0])


def lower_bound(sorted_values, values):
    """For each of ``values`` (1-D), how many of ``sorted_values`` (1-D,
    ascending; a tensor or a numpy array) are ``<`` it
    (``tf.searchsorted(..., side="left")``), int32."""
    return tf.squeeze(tf.raw_ops.LowerBound(sorted_inputs=_row(sorted_values), values=_row(values),
                                            out_type=tf.int32), [0])


def row_of(ends, size):
    """The row of each of ``size`` flat positions, for rows that end at
    ``ends`` (int32 [rows], ascending; row ``r`` holds the positions
    ``ends[r - 1] .. ends[r] - 1``): what ``tf.repeat(tf.range(rows),
    lengths)`` gives with ``ends = cumsum(lengths)``."""
    return upper_bound(ends, tf.range(size))


def repeat_index(counts):
    """``i`` repeated ``counts[i]`` times (int32 ``counts`` >= 0):
    ``tf.repeat(tf.range(n), counts)``."""
    ends = tf.cumsum(counts)
    return row_of(ends, tf.reduce_sum(counts))


def nonzero(mask):
    """The positions where the 1-D ``mask`` is True, int32 (``tf.where`` of a vector, flattened)."""
    return tf.cast(tf.reshape(tf.where(mask), [-1]), tf.int32)


def shifted(x, first):
    """``x`` (1-D, or [n, k]) moved one place along its first axis, ``first``
    (a value, or a row of k values) in front: ``out[0] = first``, ``out[i]
    = x[i - 1]``."""
    first = tf.cast(tf.reshape(first, [1, -1] if x.shape.rank == 2 else [1]), x.dtype)
    return tf.concat([first, x], 0)[:-1]


def row_columns(row, n_rows):
    """Where :func:`scatter_rows` puts values of the rows ``row`` (int32 [n],
    non-decreasing) in a ``[n_rows, longest row]`` tensor: ``(index [n, 2],
    shape [2], counts [n_rows])`` (``counts``: values per row)."""
    counts = tf.math.unsorted_segment_sum(tf.ones_like(row), row, n_rows)
    column = tf.range(tf.size(row)) - tf.gather(tf.cumsum(counts, exclusive=True), row)
    width = tf.reduce_max(tf.concat([counts, [0]], 0))
    return tf.stack([row, column], 1), tf.stack([n_rows, width]), counts


def scatter_rows(values, where, pad):
    """``values`` [n, ...] put at ``where`` (from :func:`row_columns`) of a
    tensor filled with ``pad``."""
    index, shape, _ = where
    if values.shape.rank != 1:
        shape = tf.concat([shape, tf.shape(values)[1:]], 0)
    return tf.tensor_scatter_nd_update(tf.fill(shape, tf.constant(pad, values.dtype)), index, values)


def argsort(values):
    """The stable ascending order of the 1-D ``values`` (int32 or int64, no
    value the type's minimum): ``tf.argsort(values, stable=True)`` in three
    nodes instead of eleven (``TopKV2`` of the negated values keeps the lower
    index first among equal ones), int32."""
    return tf.math.top_k(-values, k=tf.size(values), sorted=True).indices



def named_outputs(texts, outputs, names, spans):
    """The string step of a serving signature: padded per-text numeric
    ``outputs`` (index columns padded with -1) with each index column
    ``key`` of ``names`` (``{key: (name_key, labels)}``) replaced by the
    labels' names as ``name_key`` (``""`` pads), and, when ``texts``
    (``tf.string [batch]``) is given, each ``{string_key: (start_key,
    end_key)}`` of ``spans`` the text between those code-point offsets
    (``""`` pads). Lookups only: every rule that decides the numbers ran
    before. :func:`kerasbert.serving.onnx.named_row` does the same on the
    host, for one text."""
    out = dict(outputs)
    for key, (name_key, labels) in names.items():
        ids = out.pop(key)
        table = tf.constant(list(labels) if labels else [""], tf.string)
        out[name_key] = tf.where(ids >= 0, tf.gather(table, tf.maximum(ids, 0)), "")
    if texts is not None:
        for key, (start_key, end_key) in spans.items():
            start, end = out[start_key], out[end_key]
            row = tf.broadcast_to(tf.range(tf.shape(start)[0])[:, None], tf.shape(start))
            # pads (start = end = -1) cut nothing
            out[key] = tf.strings.substr(tf.gather(texts, row), tf.maximum(start, 0), end - start, unit="UTF8_CHAR")
    return out
