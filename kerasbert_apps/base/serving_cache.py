"""The serving cache: a model folder's serving function, traced once and kept for every later ``predict``.

Before its first answer, ``kerasbert APP predict`` spends more time building
the Keras model from the folder and tracing the pipeline's serving function
(:meth:`~kerasbert_apps.base.pipeline.Pipeline.serving_function`) than
running it. So the first ``predict`` of a model folder writes the pipeline's
text export -- the very SavedModel ``kerasbert APP export`` writes and TF
Serving runs -- into the cache, and every ``predict`` of the folder, the
first one included, loads that export with ``tf.saved_model.load`` and calls
its signature: the same graph, with no Keras model built and nothing traced.
The results are those of the export (the export's parity tests hold them to
the pipeline's own ``predict``).

Where: ``serving/`` in the kit's cache folder (:func:`kerasbert.files.atomic.cache_base`:
``$KERASBERT_CACHE``, else ``~/.cache/kerasbert``). One entry per model
folder and options, named by a hash of what it was made from: the folder's
absolute path, the name, size and modification time of each of its files
(and of the checkpoint's, for a LoRA folder, whose encoder weights live
there), the settings after the command's options (the triples'
``--threshold-*``), ``--precision``, and the versions of kerasbert and
TensorFlow. A folder retrained, edited or moved gets a new entry; writing it
removes the folder's older ones, and the entries of folders that no longer
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
backends than TensorFlow do not use it.
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


def made_from(pipeline, directory, precision):
    """What an entry depends on (module docstring), as a JSON-able dict."""
    import tensorflow as tf

    import kerasbert

    directory = Path(directory).resolve()
    made = {"model": str(directory), "files": _files(directory), "settings": pipeline.settings(),
            "head": type(pipeline).__module__ + "." + type(pipeline).__qualname__, "precision": precision,
            "kerasbert": kerasbert.__version__, "tensorflow": tf.__version__}
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
    """The text signature of ``entry``'s export."""
    import tensorflow as tf

    from kerasbert.tokenizers.graph_tokenizer import register_tokenizer_op

    register_tokenizer_op()

    return tf.saved_model.load(str(entry / str(VERSION))).signatures["serving_default"]


def _write(entry, made, pipeline):
    """Write ``entry``: the text export of ``pipeline`` (with its model) and
    :data:`ENTRY_FILE`; then remove the older entries of the same model
    folder, and those of folders that no longer exist. Returns False when
    the cache cannot be written."""
    from kerasbert.errors import KerasbertError
    from kerasbert.errors import WriteError
    from kerasbert.files.atomic import atomic_write_dir

    def write(staging):
        pipeline.export(staging, version=VERSION)
        (Path(staging) / ENTRY_FILE).write_text(json.dumps(made, indent=1, ensure_ascii=False) + "\n",
                                                encoding="utf-8")

    try:
        atomic_write_dir(entry, write, exists="refuse")
    except WriteError:
        return False
    except KerasbertError:  # another command wrote the same entry meanwhile: it is as good as ours
        if not (entry / ENTRY_FILE).exists():
            return False
    for other in cache_folder().iterdir():
        if other == entry or not (other / ENTRY_FILE).is_file():
            continue
        try:
            model = json.loads((other / ENTRY_FILE).read_text(encoding="utf-8")).get("model")
        except (OSError, ValueError, AttributeError):
            continue
        if model == made["model"] or not (isinstance(model, str) and Path(model).is_dir()):
            shutil.rmtree(other, ignore_errors=True)
    return True


def _size_mb(folder):
    return sum(f.stat().st_size for f in Path(folder).rglob("*") if f.is_file()) / 1e6


def cached_predict(task, model_dir, precision, configure, verbose=True):
    """A ``predict(texts, batch_size=...)`` function for the model folder
    ``model_dir`` of ``task``, through the cache (module docstring).
    ``configure(pipeline)`` applies the command's options to a pipeline (with
    or without its model); ``precision`` is ``--precision``."""
    import keras

    def build():
        return configure(task.load(model_dir, with_model=True)).with_precision(precision)

    if keras.backend.backend() != "tensorflow":
        return build().predict
    from kerasbert.checkpoints.saving import resolve_model_dir

    light = configure(task.load(model_dir, verbose=verbose, with_model=False))
    directory = resolve_model_dir(model_dir, light.settings_file, light.kind)
    made = made_from(light, directory, precision)
    entry = entry_of(made)
    if (entry / ENTRY_FILE).exists():
        try:
            return _predict_with(light, _load(entry))
        except Exception as e:  # noqa: BLE001 -- whatever a damaged SavedModel raises
            problem = " ".join(f"{type(e).__name__}: {e}".split())[:200]
            print(f"note: {entry}: damaged serving cache entry ({problem}); rebuilt", file=sys.stderr)
            shutil.rmtree(entry, ignore_errors=True)
    pipeline = build()
    if not _writable(cache_folder()) or not _write(entry, made, pipeline):
        return pipeline.predict
    print(f"note: the serving function of {directory} is kept in the serving cache, {cache_folder()} "
          f"({_size_mb(entry):.0f} MB), for the next predict (--no-cache: neither kept nor used)", file=sys.stderr)
    return _predict_with(light, _load(entry))


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
