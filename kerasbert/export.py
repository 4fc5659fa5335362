"""Writing SavedModels for TensorFlow Serving: versioned, atomic, warmed up.

What every kerasbert export shares (the apps' pipelines add the serving
function itself: :meth:`kerasbert_apps.base.pipeline.Pipeline.export`):

* **layout** -- TF Serving's: ``EXPORT_BASE/N/saved_model.pb``,
  ``variables/``, ``assets.extra/``. ``N`` defaults to the next free integer
  (1 for an empty base); an existing version is never overwritten.
* **atomic** -- the SavedModel is written into a hidden temporary folder in
  ``EXPORT_BASE`` (TF Serving ignores names that are not integers) and renamed
  to ``N`` only when complete, so a server polling the base never loads a
  half-written version, and an interrupted export leaves no version behind.
* **warmup** -- ``assets.extra/tf_serving_warmup_requests``: a TFRecord file of
  ``PredictionLog`` records (tensorflow-serving-api protos), which TF Serving
  replays at load so the first real request does not pay for graph
  initialisation.
* **description** -- ``assets.extra/kerasbert.json``: what the model is
  (task, labels, tokenizer settings, signature inputs/outputs, the kerasbert
  and TensorFlow versions that wrote it) and ``assets.extra/vocab.txt``, so a
  client of an ``ids`` export can tokenize on its side.
* **ops** -- the text signature may use core TensorFlow ops and the TF-Text
  ops TF Serving links (:data:`kerasbert.graph_tokenizer.ALLOWED_TF_TEXT_OPS`);
  :func:`check_ops` refuses anything else before the version is published.

Exports need the TensorFlow backend (the SavedModel is a TensorFlow graph).
"""

import json
import re
from pathlib import Path

from kerasbert.errors import KerasbertError

WARMUP_FILE = "tf_serving_warmup_requests"
DESCRIPTION_FILE = "kerasbert.json"
SIGNATURE = "serving_default"
INPUT_MODES = ("text", "ids")

#: The oldest TensorFlow Serving release whose op set covers a text export
#: (FastWordpieceTokenizeWithOffsets, from TF-Text >= 2.7, linked since the
#: Serving builds that pin TF-Text 2.7+). See docs/serving.md.
MIN_TF_SERVING = "2.8.0"


def require_tensorflow_backend():
    import keras

    if keras.backend.backend() != "tensorflow":
        raise KerasbertError(
            f"exporting a SavedModel needs the TensorFlow backend (KERAS_BACKEND={keras.backend.backend()}); "
            "run the export with KERAS_BACKEND=tensorflow"
        )


def versions(base):
    """The integer version folders in ``base``, sorted."""
    base = Path(base)
    if not base.is_dir():
        return []
    return sorted(int(p.name) for p in base.iterdir() if p.is_dir() and re.fullmatch(r"\d+", p.name))


def next_version(base):
    """The next free version number in ``base`` (1 when there is none)."""
    found = versions(base)
    return (found[-1] + 1) if found else 1


def write_version(base, version, write):
    """Publish ``base/version`` atomically (:func:`kerasbert.files.atomic_write_dir`
    with ``exists="refuse"``): ``write(tmp_dir)`` fills a hidden staging
    folder in ``base``, which is then renamed. Refuses an existing version.
    Returns the version's path."""
    from kerasbert.files import atomic_write_dir

    base = Path(base)
    if base.exists() and not base.is_dir():
        raise KerasbertError(f"{base}: export base exists and is not a folder")
    version = next_version(base) if version is None else int(version)
    if version < 0:
        raise KerasbertError(f"version must be a non-negative integer, got {version}")
    target = base / str(version)
    if target.exists():
        raise KerasbertError(f"{target} already exists; TF Serving versions are never overwritten (pick another --version)")
    return atomic_write_dir(target, write, exists="refuse")


# -------------------------------------------------------------- graph parts
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


def signature_and_warmup(tokenizer, max_length, input_mode, warmup_texts):
    """``(input_signature, warmup input dicts)`` for a ``text`` or ``ids`` export."""
    import tensorflow as tf

    if input_mode == "ids":
        ids = tokenizer(warmup_texts, max_length=max_length)
        spec = tf.TensorSpec([None, None], tf.int32)
        return [spec, spec, spec], [{k: v[i : i + 1] for k, v in ids.inputs.items()} for i in range(len(warmup_texts))]
    return [tf.TensorSpec([None], tf.string, name="text")], [{"text": [t]} for t in warmup_texts] + [{"text": warmup_texts}]


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

    from kerasbert.graph_ops import argsort

    lengths = tf.reduce_sum(tf.cast(inputs["padding_mask"] > 0, tf.int32), axis=1)
    n_rows = tf.shape(lengths)[0]
    full = tf.shape(inputs["padding_mask"])[1]
    order = argsort(lengths)
    n_calls = (n_rows + rows_per_call - 1) // rows_per_call
    # ``fn`` traced once, as a function of its own that both paths below call:
    # the graph holds the model once (its weights too, when they are
    # constants: kerasbert.fused_encoder.constant_weights), and its output
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


# ----------------------------------------------------------------- requests
def _tensor_proto(values, dtype):
    import tensorflow as tf

    return tf.make_tensor_proto(values, dtype=dtype)


def predict_request(inputs, model_name="model", signature_name=SIGNATURE):
    """A TF Serving ``PredictRequest`` (gRPC) for a dict of input arrays,
    e.g. ``{"text": ["Alice lives in Paris."]}``."""
    import numpy as np
    import tensorflow as tf
    from tensorflow_serving.apis import predict_pb2

    request = predict_pb2.PredictRequest()
    request.model_spec.name = model_name
    request.model_spec.signature_name = signature_name
    for name, value in inputs.items():
        array = np.asarray(value)
        dtype = tf.string if array.dtype.kind in "USO" else tf.as_dtype(array.dtype)
        if dtype == tf.string:
            array = np.asarray([str(v).encode("utf-8") for v in array.reshape(-1)], dtype=object).reshape(array.shape)
        request.inputs[name].CopyFrom(_tensor_proto(array, dtype))
    return request


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


def rest_body(texts, signature_name=SIGNATURE):
    """The TF Serving REST body (row format) for a text export:
    ``{"signature_name": ..., "instances": [{"text": ...}, ...]}``."""
    return {"signature_name": signature_name, "instances": [{"text": t} for t in texts]}


def write_warmup(directory, inputs_list, model_name="model", signature_name=SIGNATURE):
    """Write ``assets.extra/tf_serving_warmup_requests`` in a SavedModel folder:
    one ``PredictionLog`` record per dict of inputs. Returns the file path."""
    import tensorflow as tf
    from tensorflow_serving.apis import prediction_log_pb2

    path = Path(directory) / "assets.extra" / WARMUP_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    with tf.io.TFRecordWriter(str(path)) as writer:
        for inputs in inputs_list:
            log = prediction_log_pb2.PredictionLog(
                predict_log=prediction_log_pb2.PredictLog(request=predict_request(inputs, model_name, signature_name))
            )
            writer.write(log.SerializeToString())
    return path


def read_warmup(directory):
    """The ``PredictRequest`` of each warmup record of a SavedModel folder."""
    import tensorflow as tf
    from tensorflow_serving.apis import prediction_log_pb2

    requests = []
    for record in tf.data.TFRecordDataset(str(Path(directory) / "assets.extra" / WARMUP_FILE)):
        log = prediction_log_pb2.PredictionLog()
        log.ParseFromString(record.numpy())
        requests.append(log.predict_log.request)
    return requests


# -------------------------------------------------------------------- write
def check_ops(directory, input_mode):
    """Refuse a SavedModel with ops TF Serving may not have: for ``text``
    exports, anything but core TensorFlow and the allowed TF-Text ops; for
    ``ids`` exports, anything but core TensorFlow. Returns the op list."""
    from kerasbert.graph_tokenizer import disallowed_ops
    from kerasbert.graph_tokenizer import list_ops
    from kerasbert.graph_tokenizer import non_core_ops

    ops = list_ops(directory)
    bad = disallowed_ops(ops) if input_mode == "text" else non_core_ops(ops)
    if bad:
        raise KerasbertError(f"the exported graph uses ops TF Serving may not have: {', '.join(bad)}")
    return sorted(ops)


def export_saved_model(base, version, endpoint, input_signature, trackables, description, warmup_inputs,
                       vocab, input_mode, model_name=None):
    """Trace ``endpoint`` (a function of the signature's tensors returning a
    dict of output tensors) into ``base/version`` with everything above.

    Args:
        trackables: Keras models / ``tf.Module`` objects the endpoint uses.
        description: dict for ``assets.extra/kerasbert.json`` (signature
            details are added).
        warmup_inputs: list of input dicts for the warmup records.
        vocab: the tokenizer's vocabulary (written to ``assets.extra``).
        model_name: the model name in the warmup requests (default: the
            export base's folder name, which is what TF Serving's
            ``--model_base_path`` usually ends with).
    """
    require_tensorflow_backend()
    import tensorflow as tf

    if input_mode not in INPUT_MODES:
        raise KerasbertError(f"--input must be one of {', '.join(INPUT_MODES)}, got {input_mode!r}")

    def write(directory):
        save_signature(directory, endpoint, input_signature, trackables)
        ops = check_ops(directory, input_mode)
        inputs, outputs = signature_specs(directory)
        details = dict(description)
        details.update(
            signature=SIGNATURE,
            input_mode=input_mode,
            inputs=inputs,
            outputs=outputs,
            ops=ops,
            tensorflow=tf.__version__,
            min_tf_serving=MIN_TF_SERVING if input_mode == "text" else "any with TensorFlow's core ops",
        )
        extra = Path(directory) / "assets.extra"
        extra.mkdir(exist_ok=True)
        (extra / DESCRIPTION_FILE).write_text(json.dumps(details, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
        (extra / "vocab.txt").write_text("".join(t + "\n" for t in vocab), encoding="utf-8")
        write_warmup(directory, warmup_inputs, model_name=model_name or Path(base).resolve().name or "model")

    return write_version(base, version, write)


def save_signature(directory, endpoint, input_signature, trackables):
    """Trace ``endpoint`` once and write it to ``directory`` as the
    SavedModel's :data:`SIGNATURE`, with the variables it uses and the
    resources (lookup tables) of ``trackables``.

    What ``keras.export.ExportArchive`` writes for one endpoint, from one
    trace instead of two: the archive traces the endpoint to find its
    variables, then hands the ``tf.function`` to ``tf.saved_model.save``,
    whose save context is part of the function's cache key, so the whole
    serving graph was traced a second time. Here the concrete function itself
    is the signature, and no ``tf.function`` is attached to the saved object.
    """
    import tensorflow as tf
    from tensorflow.saved_model.experimental import TrackableResource

    function = tf.function(endpoint, input_signature=input_signature, autograph=False).get_concrete_function()
    root = tf.__internal__.tracking.AutoTrackable()
    root.variables = list(function.variables)
    resources = []
    for trackable in trackables:
        for child in tf.train.TrackableView(trackable).descendants():
            if isinstance(child, TrackableResource) and not any(child is r for r in resources):
                resources.append(child)
    root.resources = resources
    tf.saved_model.save(root, str(directory), signatures={SIGNATURE: function})


def signature_specs(directory):
    """The inputs and outputs of the SavedModel's :data:`SIGNATURE`, as
    ``{name: {"dtype": ..., "shape": [...]}}`` dicts, read from
    ``saved_model.pb`` (``None`` for an unknown dimension or rank)."""
    import tensorflow as tf
    from tensorflow.core.protobuf import saved_model_pb2

    saved = saved_model_pb2.SavedModel()
    saved.ParseFromString((Path(directory) / "saved_model.pb").read_bytes())
    signature = saved.meta_graphs[0].signature_def[SIGNATURE]

    def spec(info):
        shape = None if info.tensor_shape.unknown_rank else [
            None if d.size < 0 else int(d.size) for d in info.tensor_shape.dim]
        return {"dtype": tf.dtypes.as_dtype(info.dtype).name, "shape": shape}

    return ({k: spec(v) for k, v in sorted(signature.inputs.items())},
            {k: spec(v) for k, v in sorted(signature.outputs.items())})


def describe(directory):
    """The ``assets.extra/kerasbert.json`` of an export."""
    path = Path(directory) / "assets.extra" / DESCRIPTION_FILE
    if not path.exists():
        raise KerasbertError(f"{directory}: not a kerasbert export (no assets.extra/{DESCRIPTION_FILE})")
    return json.loads(path.read_text(encoding="utf-8"))


# ------------------------------------------------------------- graph size
def graph_node_count(graph_def):
    """The nodes of a ``GraphDef``: its own and those of every function in its
    library (branches, loop bodies, nested functions). What tracing, loading
    and a first call pay for, and what the executor runs per request."""
    return len(graph_def.node) + sum(len(function.node_def) for function in graph_def.library.function)


def function_node_count(function):
    """:func:`graph_node_count` of a ``tf.function`` with an input signature
    (its concrete function, traced if it was not) or of a concrete function."""
    concrete = function.get_concrete_function() if hasattr(function, "get_concrete_function") else function
    return graph_node_count(concrete.graph.as_graph_def())


def saved_model_node_count(directory, signature=SIGNATURE):
    """The nodes of a SavedModel's ``saved_model.pb`` (:func:`graph_node_count`):
    ``{"serving": ..., "all": ...}``. ``serving`` counts the top-level graph
    and the functions that ``signature`` calls, directly or not; ``all``
    also the functions that only write and read the variables' checkpoint
    (``tf.saved_model.save`` adds them, a few nodes per variable; no request
    runs them)."""
    from tensorflow.core.protobuf import saved_model_pb2

    saved = saved_model_pb2.SavedModel()
    saved.ParseFromString((Path(directory) / "saved_model.pb").read_bytes())
    graph = saved.meta_graphs[0].graph_def
    functions = {f.signature.name: f for f in graph.library.function}
    top = {node.name: node for node in graph.node}

    def called(nodes):  # the library functions that these nodes call
        for node in nodes:
            if node.op in functions:
                yield node.op
            for value in node.attr.values():
                if value.HasField("func"):
                    yield value.func.name
                yield from (f.name for f in value.list.func)

    outputs = saved.meta_graphs[0].signature_def[signature].outputs.values()
    seen, todo = set(), [name for name in called(top[o.name.split(":")[0]] for o in outputs)]
    while todo:
        name = todo.pop()
        if name in functions and name not in seen:
            seen.add(name)
            todo.extend(called(functions[name].node_def))
    return {"serving": len(graph.node) + sum(len(functions[name].node_def) for name in seen),
            "all": graph_node_count(graph)}
