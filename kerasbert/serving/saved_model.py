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
  ops TF Serving links (:data:`kerasbert.serving.op_check.ALLOWED_TF_TEXT_OPS`);
  :func:`check_ops` refuses anything else before the version is published.

Exports need the TensorFlow backend (the SavedModel is a TensorFlow graph).
"""

import json
import re
from pathlib import Path

from kerasbert.errors import KerasbertError
from kerasbert.serving.requests import SIGNATURE
from kerasbert.serving.requests import predict_request

WARMUP_FILE = "tf_serving_warmup_requests"
DESCRIPTION_FILE = "kerasbert.json"
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
    """Publish ``base/version`` atomically (:func:`kerasbert.files.atomic.atomic_write_dir`
    with ``exists="refuse"``): ``write(tmp_dir)`` fills a hidden staging
    folder in ``base``, which is then renamed. Refuses an existing version.
    Returns the version's path."""
    from kerasbert.files.atomic import atomic_write_dir

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


# ------------------------------------------------------------------ warmup
def signature_and_warmup(tokenizer, max_length, input_mode, warmup_texts):
    """``(input_signature, warmup input dicts)`` for a ``text`` or ``ids`` export."""
    import tensorflow as tf

    if input_mode == "ids":
        ids = tokenizer(warmup_texts, max_length=max_length)
        spec = tf.TensorSpec([None, None], tf.int32)
        return [spec, spec, spec], [{k: v[i : i + 1] for k, v in ids.inputs.items()} for i in range(len(warmup_texts))]
    return [tf.TensorSpec([None], tf.string, name="text")], [{"text": [t]} for t in warmup_texts] + [{"text": warmup_texts}]


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
    from kerasbert.serving.op_check import disallowed_ops
    from kerasbert.serving.op_check import list_ops
    from kerasbert.serving.op_check import non_core_ops

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
