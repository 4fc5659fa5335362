"""The serving cache: a model folder's serving graph, exported once and kept for every later ``predict``.

Before its first answer, ``kerasbert APP predict`` spends more time building
the Keras model from the folder and tracing the pipeline's serving function
(:meth:`~kerasbert_apps.base.pipeline.Pipeline.serving_function`) than
running it. So the first ``predict`` of a model folder exports the pipeline
into the cache, and every ``predict`` of the folder, the first one included,
runs that export: the same graph, with no Keras model built and nothing
traced. An entry holds one of two exports:

* **ONNX** (:func:`kerasbert_apps.base.onnx_export.export_onnx`, float32),
  run by the ONNX engine (:class:`~kerasbert_apps.base.onnx_engine.OnnxEngine`):
  a later ``predict`` imports neither TensorFlow nor Keras. Taken where
  ``--engine`` is ``auto`` (the default), ``--precision`` comes out float32,
  ONNX Runtime and tf2onnx are installed (``kerasbert[onnx]``) and the head
  has an ONNX export (:func:`entry_engine`). A model whose conversion or check fails
  keeps that failure in its ONNX entry (one note, once) and gets a SavedModel entry;
* **SavedModel**, otherwise: the very text export ``kerasbert APP export``
  writes and TF Serving runs, loaded with ``tf.saved_model.load``.

Either gives the answers of the pipeline's own ``predict``: the exports'
parity tests hold them to it (the ONNX export is also checked against the
TensorFlow graph when the entry is written).

Where: ``serving/`` in the kit's cache folder (:func:`kerasbert.files.atomic.cache_base`:
``$KERASBERT_CACHE``, else ``~/.cache/kerasbert``). One entry per model
folder, options and engine, named by a hash of what it was made from: the folder's
absolute path, the name, size and modification time of each of its files
(and of the checkpoint's, for a LoRA folder, whose encoder weights live
there), the settings after the command's options (the triples'
``--threshold-*``), ``--precision``, the engine, and the versions of kerasbert and
of what makes and runs the export (TensorFlow; tf2onnx and ONNX Runtime). A folder retrained, edited or moved gets a new entry; writing it
removes the folder's older ones of the same engine, those made from other files, and the entries of folders that no longer
exist. An entry holds a copy of the weights (about
the size of the folder's model file); the cache may be deleted at any time.

Entries are written atomically (a hidden staging folder, then a rename) and
never changed afterwards; two commands writing the same entry at once both
end with it. An entry that cannot be loaded is rebuilt, with one note; a
cache that cannot be written is skipped, and the command predicts as
without it (build the model, trace, run). ``--no-cache`` neither reads nor
writes it, nor does any ``predict`` while the environment variable
``KERASBERT_SERVING_CACHE`` is ``0`` (for one-off processes, e.g. a container
that predicts once: writing an entry costs more than it saves there); other
backends than TensorFlow write no entries.
"""

import contextlib
import hashlib
import json
import os
import shutil
import sys
from pathlib import Path

#: The folder inside the kit's cache.
FOLDER = "serving"
#: Set to 0 (or off, false, no) to do without the cache in every ``predict``, as ``--no-cache`` does.
SWITCH_VARIABLE = "KERASBERT_SERVING_CACHE"
#: Written into each entry: what it was made from.
ENTRY_FILE = "entry.json"
#: The entry's SavedModel version folder.
VERSION = 1


def cache_folder():
    """Where the entries are: ``serving/`` in :func:`kerasbert.files.atomic.cache_base`."""
    from kerasbert.files.atomic import cache_base

    return cache_base() / FOLDER


def switched_off():
    """Whether :data:`SWITCH_VARIABLE` turns the cache off."""
    return os.environ.get(SWITCH_VARIABLE, "").strip().lower() in ("0", "off", "false", "no")


def _files(folder):
    """``[name, size, mtime_ns]`` of each file in ``folder`` (not recursive), sorted."""
    found = []
    for path in sorted(Path(folder).iterdir()):
        if path.is_file():
            stat = path.stat()
            found.append([path.name, stat.st_size, stat.st_mtime_ns])
    return found


def _installed(*names):
    """Whether every module of ``names`` can be imported (without importing it)."""
    import importlib.util

    return all(importlib.util.find_spec(name) is not None for name in names)


def _version(distribution):
    """The installed version of ``distribution``, without importing it (None: not installed)."""
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version

    try:
        return version(distribution)
    except PackageNotFoundError:
        return None


def entry_engine(light, precision, engine="auto"):
    """What the cache keeps for the pipeline ``light`` (loaded without its
    model): ``"onnx"`` where ``engine`` (``predict --engine``) is ``auto``,
    ``precision`` is float32 (an ONNX export's), ONNX Runtime and tf2onnx
    are installed and the head has an ONNX export (its pipeline's
    ``no_onnx_export`` is unset); else ``"savedmodel"``."""
    if engine != "auto" or precision != "float32" or light.no_onnx_export:
        return "savedmodel"
    return "onnx" if _installed("onnxruntime", "tf2onnx") else "savedmodel"


def made_from(pipeline, directory, precision, engine="savedmodel"):
    """What an entry depends on (module docstring), as a JSON-able dict;
    ``engine``: what the entry holds (:func:`entry_engine`). Imports
    neither TensorFlow nor Keras."""
    import kerasbert

    directory = Path(directory).resolve()
    made = {"model": str(directory), "files": _files(directory), "settings": pipeline.settings(),
            "head": type(pipeline).__module__ + "." + type(pipeline).__qualname__, "precision": precision,
            "engine": engine, "kerasbert": kerasbert.__version__,
            "tensorflow": _version("tensorflow") or _version("tensorflow-cpu")}
    if engine == "onnx":
        made.update(tf2onnx=_version("tf2onnx"), onnxruntime=_version("onnxruntime"))
    if pipeline.lora:
        from kerasbert.checkpoints.loader import resolve_checkpoint

        checkpoint = Path(resolve_checkpoint(pipeline.lora["checkpoint"]))
        made["checkpoint"] = {"path": str(checkpoint.resolve()),
                              "files": _files(checkpoint) if checkpoint.is_dir() else []}
    return made


def entry_of(made):
    """The entry folder for ``made`` (:func:`made_from`)."""
    key = hashlib.sha256(json.dumps(made, sort_keys=True).encode("utf-8")).hexdigest()[:32]
    return cache_folder() / key


def _load(entry):
    """The text signature of ``entry``'s SavedModel."""
    import tensorflow as tf

    from kerasbert.tokenizers.graph_tokenizer import register_tokenizer_op

    register_tokenizer_op()

    return tf.saved_model.load(str(entry / str(VERSION))).signatures["serving_default"]


def _write(entry, made, pipeline):
    """Write ``entry``: the export of ``pipeline`` (with its model) that
    ``made["engine"]`` names, and :data:`ENTRY_FILE`; then remove the older
    entries of the same model folder (module docstring), and those of
    folders that no longer exist. Returns False when the cache cannot be
    written. An ONNX export that fails (a conversion or its check) is a
    :class:`~kerasbert.errors.KerasbertError` of the export, raised with nothing written."""
    from kerasbert.errors import KerasbertError
    from kerasbert.errors import WriteError
    from kerasbert.files.atomic import atomic_write_dir

    def write(staging):
        if made["engine"] == "onnx":
            from kerasbert_apps.base.onnx_export import export_onnx

            export_onnx(pipeline, staging, version=VERSION)
        else:
            pipeline.export(staging, version=VERSION)
        _write_made(staging, made)

    try:
        atomic_write_dir(entry, write, exists="refuse")
    except WriteError:
        return False
    except KerasbertError:
        if not (entry / ENTRY_FILE).exists():
            if made["engine"] == "onnx":
                raise
            return False
        # another command wrote the same entry meanwhile: it is as good as ours
    _remove_older(entry, made)
    return True


def _write_made(folder, made):
    (Path(folder) / ENTRY_FILE).write_text(json.dumps(made, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")


def _remove_older(entry, made):
    """Remove the entries that ``entry`` makes old: the same model folder's of
    the same engine or made from other files, and those of folders that no longer exist."""
    for other in cache_folder().iterdir():
        if other == entry or not (other / ENTRY_FILE).is_file():
            continue
        try:
            theirs = json.loads((other / ENTRY_FILE).read_text(encoding="utf-8"))
            model = theirs.get("model")
        except (OSError, ValueError, AttributeError):
            continue
        same_model = model == made["model"]
        if (same_model and (theirs.get("engine", "savedmodel") == made["engine"] or theirs.get("files") != made["files"])
                or not (isinstance(model, str) and Path(model).is_dir())):
            shutil.rmtree(other, ignore_errors=True)


def _keep_failure(entry, made, problem):
    """Keep in ``entry`` (an ONNX entry) that its export failed, so that later
    ``predict``s go to the SavedModel entry without trying again."""
    from kerasbert.errors import KerasbertError
    from kerasbert.errors import WriteError
    from kerasbert.files.atomic import atomic_write_dir

    try:
        atomic_write_dir(entry, lambda staging: _write_made(staging, dict(made, failed=problem)), exists="refuse")
    except (WriteError, KerasbertError):
        return
    _remove_older(entry, made)


def _size_mb(folder):
    return sum(f.stat().st_size for f in Path(folder).rglob("*") if f.is_file()) / 1e6


def cached_predict(task, model_dir, precision, configure, verbose=True, engine="auto", stack=None):
    """A ``predict(texts, batch_size=...)`` function for the model folder
    ``model_dir`` of ``task``, through the cache (module docstring).
    ``configure(pipeline)`` applies the command's options to a pipeline (with
    or without its model); ``precision`` is ``--precision`` and ``engine``
    ``--engine``. ``stack``: the command's :class:`contextlib.ExitStack`; a
    SavedModel entry enters :func:`without_grappler` into it."""
    from kerasbert.checkpoints.saving import resolve_model_dir

    light = configure(task.load(model_dir, verbose=verbose, with_model=False))
    directory = resolve_model_dir(model_dir, light.settings_file, light.kind)
    pipeline = None
    for kind in ("onnx", "savedmodel") if entry_engine(light, precision, engine) == "onnx" else ("savedmodel",):
        if kind == "savedmodel" and stack is not None:
            stack.enter_context(without_grappler())
        made = made_from(light, directory, precision, kind)
        entry = entry_of(made)
        if (entry / ENTRY_FILE).exists():
            predict = _read(task, entry, light)
            if predict == "failed":
                continue
            if predict is not None:
                return predict
        if pipeline is None:
            import keras

            pipeline = configure(task.load(model_dir, with_model=True)).with_precision(precision)
            if keras.backend.backend() != "tensorflow":
                return pipeline.predict
        if not _writable(cache_folder()):
            return pipeline.predict
        try:
            written = _write(entry, made, pipeline)
        except Exception as e:  # noqa: BLE001 -- a model the ONNX export cannot convert or check
            if kind != "onnx":
                raise
            problem = _problem(e)
            print(f"note: {directory}: no ONNX entry in the serving cache ({problem}); a SavedModel entry instead",
                  file=sys.stderr)
            _keep_failure(entry, made, problem)
            continue
        if not written:
            return pipeline.predict
        print(f"note: the serving function of {directory} is kept in the serving cache, {cache_folder()} "
              f"({_size_mb(entry):.0f} MB{', ONNX' if kind == 'onnx' else ''}), for the next predict "
              f"(--no-cache: neither kept nor used)", file=sys.stderr)
        return _read(task, entry, light)
    raise AssertionError("unreachable: the SavedModel entry is read, written or skipped")


def _problem(e):
    return " ".join(f"{type(e).__name__}: {e}".split())[:200]


def _read(task, entry, light):
    """The ``predict`` of ``entry`` (its engine's), ``"failed"`` for an ONNX
    entry that keeps a failure, or None for a damaged entry (removed, with one note)."""
    try:
        made = json.loads((entry / ENTRY_FILE).read_text(encoding="utf-8"))
        if made.get("failed"):
            return "failed"
        if made.get("engine") == "onnx":
            from kerasbert_apps.base.onnx_engine import OnnxEngine

            return OnnxEngine.load(task, entry / str(VERSION)).predict
        return _predict_with(light, _load(entry))
    except Exception as e:  # noqa: BLE001 -- whatever a damaged export raises
        print(f"note: {entry}: damaged serving cache entry ({_problem(e)}); rebuilt", file=sys.stderr)
        shutil.rmtree(entry, ignore_errors=True)
        return None


def _predict_with(light, serving):
    """``light.predict`` running the loaded signature ``serving``."""
    return lambda texts, batch_size=32: light.predict(texts, batch_size, serving=serving)


#: Set to 1 to run TensorFlow's graph optimizer (Grappler) on the cached function, as TF Serving does.
GRAPPLER_VARIABLE = "KERASBERT_GRAPPLER"


@contextlib.contextmanager
def without_grappler():
    """TensorFlow's graph optimizer (Grappler) off inside the block, unless
    ``KERASBERT_GRAPPLER=1``; the previous setting back afterwards.

    Grappler rewrites a function's graph when the function is first called:
    for the serving graph, the largest share of a one-sentence ``predict``'s
    first call, and no faster calls afterwards on the CPUs measured
    (``bench/first_answer.py`` records both). The setting is the process's,
    and it is part of what TensorFlow instantiates a function with: it must
    hold for every call of the command, hence a block around the command."""
    import tensorflow as tf

    if os.environ.get(GRAPPLER_VARIABLE, "").strip().lower() not in ("", "0", "false", "no"):
        yield
        return
    before = tf.config.optimizer.get_experimental_options().get("disable_meta_optimizer", False)
    tf.config.optimizer.set_experimental_options({"disable_meta_optimizer": True})
    try:
        yield
    finally:
        tf.config.optimizer.set_experimental_options({"disable_meta_optimizer": before})


def _writable(folder):
    """Whether ``folder`` exists or can be made, and can be written."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError:
        return False
    return os.access(folder, os.W_OK)
