"""The rows a predict call runs: grouped by length, in compiled shapes, padding trimmed.

Used inside the serving graphs that :meth:`kerasbert_apps.base.pipeline.Pipeline.export`
writes and by the host-side predict path alike, so both run a batch the same way:

* :func:`nonempty_encoder_inputs` -- the encoder never sees an empty batch;
* :func:`by_length` -- rows sorted by length and run in groups, each trimmed
  to its own longest row;
* :func:`jit_buckets` / :func:`jit_warmup_texts` -- an XLA-compiled model
  called on a few padded shapes only, and the warmup requests that compile them;
* :func:`unpad` -- a text signature's padded outputs back to one dict per text.
"""

from kerasbert.errors import KerasbertError


def nonempty_encoder_inputs(inputs, cls_id, sep_id):
    """The encoder inputs (dict of ``[rows, len]``) padded to at least two
    columns and, only when they have no rows, given one ``[CLS] [SEP]`` row:
    a serving graph's model calls never see an empty batch, and a non-empty
    batch is not made any bigger. Row ``i < rows`` is input row ``i``, and
    row 0 always exists."""
    import tensorflow as tf

    names = ("token_ids", "segment_ids", "padding_mask")
    stacked = tf.stack([inputs[k] for k in names], -1)  # [rows, len, 3]
    shape = tf.shape(stacked)
    empty = tf.cast(tf.equal(shape[0], 0), tf.int32)
    stacked = tf.pad(stacked, tf.stack([[0, empty], [0, tf.maximum(2 - shape[1], 0)], [0, 0]]))
    row = tf.constant([[0, 0], [0, 1]])[: 2 * empty]
    stacked = tf.tensor_scatter_nd_update(stacked, row, tf.constant([[cls_id, 0, 1], [sep_id, 0, 1]], stacked.dtype)[: 2 * empty])
    return dict(zip(names, tf.unstack(stacked, axis=-1)))


#: Row counts an XLA-compiled model is called with (:func:`jit_buckets`): a
#: group of rows is padded up to the next one (groups hold at most 8 rows).
JIT_ROW_BUCKETS = (1, 2, 4, 8)
#: Widths an XLA-compiled model is called with are multiples of this.
JIT_WIDTH_STEP = 16


def jit_buckets(fn, row_buckets=JIT_ROW_BUCKETS, width_step=JIT_WIDTH_STEP):
    """``fn`` compiled with XLA (``tf.function(jit_compile=True)``) and called
    on inputs padded to a few shapes only.

    XLA compiles once per input shape (seconds for a BERT encoder on a
    CPU; bench/serving_throughput.py measures it), so the rows (a dict of ``[rows, len]`` or
    ``[rows, len, ...]`` tensors with a ``padding_mask``, as :func:`by_length` passes them) are padded to the
    next of ``row_buckets`` rows (copies of the last row; beyond the largest,
    to a multiple of it) and to a multiple of ``width_step`` columns
    (padding masked), and the outputs (``[rows, len, ...]``) are cut back.
    A model of width ``max_length`` then has ``len(row_buckets) *
    ceil(max_length / width_step)`` shapes; :func:`jit_warmup_texts` makes
    requests that compile every one of them when the server loads the model.
    The compiled function is saved in a SavedModel as a function with
    ``_XlaMustCompile``; TensorFlow Serving's CPU server links XLA's CPU JIT
    (docs/serving-speed.md)."""
    import tensorflow as tf

    jitted = tf.function(fn, jit_compile=True, autograph=False)
    largest = max(row_buckets)
    table = [min(b for b in row_buckets if b >= n) for n in range(largest + 1)]

    def call(inputs):
        mask = inputs["padding_mask"]
        n, width = tf.shape(mask)[0], tf.shape(mask)[1]
        rows_to = tf.where(n <= largest, tf.gather(table, tf.minimum(n, largest)),
                           (n + largest - 1) // largest * largest)
        width_to = (width + width_step - 1) // width_step * width_step
        index = tf.minimum(tf.range(rows_to), n - 1)
        out = jitted({k: tf.pad(tf.gather(v, index), [[0, 0], [0, width_to - width]] + [[0, 0]] * (v.shape.rank - 2))
                      for k, v in inputs.items()})
        return {k: v[:n, :width] for k, v in out.items()}

    return call


def jit_warmup_texts(tokenizer, max_length, row_buckets=JIT_ROW_BUCKETS, width_step=JIT_WIDTH_STEP):
    """Warmup requests (lists of texts) that reach every shape :func:`jit_buckets`
    compiles for a model of ``max_length``: for each width bucket one text of
    that many tokens (a word the tokenizer keeps as one token, repeated),
    sent alone and in batches of each row bucket."""
    word = next((w for w in ("a", "the", "x", "1", "\u7684") if len(tokenizer.tokenize(w)) == 1), None)
    if word is None:
        raise KerasbertError("no one-token word found for the jit warmup requests")
    requests = []
    for width in range(width_step, max_length + width_step, width_step):
        text = " ".join([word] * (min(width, max_length) - 2))
        requests.extend([text] * rows for rows in row_buckets)
    return requests


def by_length(fn, inputs, rows_per_call=8, one_group_fn=None):
    """Call ``fn`` on rows of similar length: inside a serving graph, the rows
    of ``inputs`` (a dict of ``[rows, len]`` tensors with a ``padding_mask``)
    are sorted by length and cut into groups of ``rows_per_call``, each trimmed
    to its own longest row, so one long text in a batch does not make every
    short one pay for its padding. ``fn`` maps such a dict to a dict of
    ``[n, width]`` or ``[n, width, k]`` tensors; the results are padded back to
    ``len`` and returned in the original row order. Core TensorFlow ops only
    (a ``While`` loop); a batch of at most ``rows_per_call`` rows (a single
    short text, say) is one group, one turn of the loop.

    Groups of 8 measured best for the MiniLM NER export on 2 CPU cores, with
    the Keras encoder and with the fused one (``bench/serving_throughput.py``
    with the length groups changed); smaller groups pad less, below 8 the
    per-group overhead wins. With one intra-op thread the groups of a batch
    run side by side on the inter-op threads.

    ``one_group_fn``, when given, replaces ``fn`` for a batch that is one
    group (same outputs), called directly, without the sorting, gathering
    and loop: e.g. a form of the model that is faster for one short text
    and slower for the groups of a big batch. Without it there is no such
    branch (the graph holds the model's call once)."""
    import tensorflow as tf

    from kerasbert.serving.graph_ops import argsort

    lengths = tf.reduce_sum(tf.cast(inputs["padding_mask"] > 0, tf.int32), axis=1)
    n_rows = tf.shape(lengths)[0]
    full = tf.shape(inputs["padding_mask"])[1]
    order = argsort(lengths)
    n_calls = (n_rows + rows_per_call - 1) // rows_per_call
    # ``fn`` traced once, as a function of its own that both paths below call:
    # the graph holds the model once (its weights too, when they are
    # constants: kerasbert.models.fused_encoder.constant_weights), and its output
    # structure is known without running the model once more on every request.
    input_specs = {k: tf.TensorSpec([None, None], v.dtype) for k, v in inputs.items()}
    fn = tf.function(fn, input_signature=[input_specs], autograph=False)
    single = fn if one_group_fn is None else tf.function(one_group_fn, input_signature=[input_specs], autograph=False)
    traced = fn.get_concrete_function().structured_outputs
    specs = {k: (v.dtype, v.shape) for k, v in traced.items()}
    arrays = {k: tf.TensorArray(dtype, size=n_calls, infer_shape=False) for k, (dtype, _) in specs.items()}

    def body(i, arrays):
        rows = order[i * rows_per_call : tf.minimum((i + 1) * rows_per_call, n_rows)]
        width = tf.reduce_max(tf.gather(lengths, rows))
        out = fn({k: tf.gather(v, rows)[:, :width] for k, v in inputs.items()})
        written = {}
        for k, (_, shape) in specs.items():
            pad = [[0, 0], [0, full - tf.shape(out[k])[1]]] + [[0, 0]] * (shape.rank - 2)
            written[k] = arrays[k].write(i, tf.pad(out[k], pad))
        return i + 1, written

    def grouped():
        _, done = tf.while_loop(lambda i, _: i < n_calls, body, (0, arrays))
        inverse = tf.math.invert_permutation(order)
        return {k: tf.gather(array.concat(), inverse) for k, array in done.items()}

    def one_group():  # e.g. one short text: no sorting, gathering or loop
        out = single(inputs)
        return {k: out[k] for k in specs}

    results = grouped() if one_group_fn is None else tf.cond(n_rows <= rows_per_call, one_group, grouped)
    for k, value in results.items():
        value.set_shape([None, None] + specs[k][1].as_list()[2:])  # concat forgets the rank
    return results


def unpad(outputs):
    """The padded outputs of a text signature (a dict of tensors or arrays with
    a ``count`` per text) -> one dict per text of plain Python lists, padding
    dropped and strings decoded: ``[{"start": [...], "type": [...], ...}]``."""
    import numpy as np

    arrays = {k: np.asarray(v.numpy() if hasattr(v, "numpy") else v) for k, v in outputs.items()}
    rows = []
    for i, n in enumerate(arrays["count"].tolist()):
        row = {}
        for name, values in arrays.items():
            if name == "count":
                continue
            items = values[i, :n].tolist()
            row[name] = [v.decode("utf-8") if isinstance(v, bytes) else v for v in items]
        rows.append(row)
    return rows
