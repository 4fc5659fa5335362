"""Saving a trained pipeline (model + tokenizer + settings) to a folder.

A pipeline folder holds everything needed to predict, nothing to train:

* ``model.keras`` -- the Keras model WITHOUT optimizer state (the Adam slots
  would triple the file) nor compile settings, loadable with ``safe_mode`` on;
* ``vocab.txt`` -- the tokenizer's vocabulary;
* ``<name>.json`` -- the app's settings (labels, max length, thresholds...)
  and the tokenizer's settings under ``"tokenizer"``.

A LoRA pipeline (settings with ``"lora": {"rank", "checkpoint"}``, trained
with ``--lora-rank``) does not write ``model.keras``, which would hold the
whole encoder (Keras saves a LoRA layer's kernel with the adapters merged
in). Its folder holds instead:

* ``model.json`` -- the Keras model's config (encoder architecture and head),
  without the training run's compile settings;
* ``encoder.lora.h5`` -- the adapters, written by keras-hub's
  ``Backbone.save_lora_weights``;
* ``head.weights.npz`` -- every model weight outside the encoder, in the
  model's order (as ``get_weights``: nested layers such as the LSTM cells get
  automatic names, so variable paths differ from one build to the next);

and :func:`load_pipeline` loads the encoder checkpoint named by
``lora.checkpoint`` (the original, frozen weights), enables LoRA
(:func:`kerasbert.layers.lora.enable_lora`) and puts the adapters and the head on
top. The checkpoint must still be there, unchanged.

Nothing in a folder needs a class that only training imports: compile
settings (:data:`TRAINING_ONLY`) are not written, and loading ignores them
(the ``model.json`` of earlier versions carries the run's optimizer and its
schedule); a config naming a class that this process cannot locate is a one-line error
naming the class, its module and what to install or import
(:func:`_unknown_class`), not "damaged".

Write it through :func:`kerasbert.files.atomic.atomic_write_dir` to replace a
previous version atomically. A training run keeps its best pipeline in
``OUTPUT/model`` (:data:`MODEL_DIR`); :func:`resolve_model_dir` accepts
either folder.
"""

import json
import re
import weakref
from pathlib import Path

from kerasbert.errors import KerasbertError

MODEL_FILE = "model.keras"
#: A LoRA pipeline's model config and head weights (the adapters: kerasbert.layers.lora.ADAPTERS_FILE).
LORA_CONFIG_FILE = "model.json"
HEAD_WEIGHTS_FILE = "head.weights.npz"
VOCAB_FILE = "vocab.txt"
#: Where a training run (``OUTPUT``) keeps its best pipeline.
MODEL_DIR = "model"
#: Entries of a serialized Keras model that belong to training (the
#: optimizer, its learning-rate schedule, loss scaling: classes of
#: :mod:`kerasbert.training.optimizer` that an inference process does not import):
#: never written, ignored when found.
TRAINING_ONLY = ("compile_config",)


def resolve_model_dir(directory, settings_name, what):
    """The pipeline folder meant by ``directory``: the folder itself when it
    holds ``settings_name``, else its ``model/`` (a training run's output
    folder) when that does; otherwise a clear error."""
    directory = Path(directory)
    if (directory / settings_name).exists():
        return directory
    if (directory / MODEL_DIR / settings_name).exists():
        return directory / MODEL_DIR
    if not directory.exists():
        raise KerasbertError(f"{directory}: no such folder")
    raise KerasbertError(
        f"{directory}: not a kerasbert {what} folder (no {settings_name}), nor a training output folder "
        f"with {MODEL_DIR}/{settings_name}"
    )


def save_pipeline(directory, model, tokenizer, settings, settings_name):
    """Write ``model``, ``tokenizer`` and the ``settings`` dict into ``directory``."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    if settings.get("lora"):
        _save_lora_model(directory, model)
    else:
        inference = _inference_twin(model)
        inference.set_weights(model.get_weights())
        inference.save(directory / MODEL_FILE)
    (directory / VOCAB_FILE).write_text("".join(t + "\n" for t in tokenizer.vocab), encoding="utf-8")
    write_settings(directory, tokenizer, settings, settings_name)


#: model -> (its config, the uncompiled model built from it): :func:`_inference_twin`.
_TWINS = weakref.WeakKeyDictionary()


def _inference_twin(model):
    """An uncompiled model of ``model``'s class and config, which
    :func:`save_pipeline` fills with ``model``'s weights and saves (the
    training model's file would hold its optimizer state). Built once per
    model and config: a training run saves its best model after every
    better epoch, and building the twin (the whole encoder) is the larger
    part of a save."""
    config = model.get_config()
    kept = _TWINS.get(model)
    if kept is None or kept[0] != config:
        kept = _TWINS[model] = (config, type(model).from_config(config))
    return kept[1]


def write_settings(directory, tokenizer, settings, settings_name):
    """Write the settings file ``settings_name`` of a pipeline folder (the
    ``settings`` dict and the tokenizer's settings), atomically: alone, it
    updates a saved pipeline's settings (a fitted score temperature)."""
    from kerasbert.files.atomic import atomic_write_text

    settings = dict(settings, tokenizer=tokenizer.get_config())
    atomic_write_text(Path(directory) / settings_name, json.dumps(settings, indent=2, ensure_ascii=False) + "\n")


def load_pipeline(directory, settings_name, what):
    """``(model, tokenizer, settings)`` from a folder written by
    :func:`save_pipeline`. ``what`` names the kind of folder in errors.

    Every file is checked before it is read (:func:`kerasbert.files.atomic.check_file`):
    a missing or damaged one (a truncated ``model.keras``, a broken settings
    JSON, an empty vocabulary...) is a one-line
    :class:`~kerasbert.errors.KerasbertError` naming the file, never Keras's
    traceback (which says "File not found" for a truncated archive)."""
    tokenizer, settings = load_settings(directory, settings_name, what)
    if settings.get("lora"):
        model = _load_lora_model(Path(directory), settings["lora"])
    else:
        model = _load_keras_model(Path(directory) / MODEL_FILE)
    return model, tokenizer, settings


def load_settings(directory, settings_name, what):
    """``(tokenizer, settings)`` of a folder written by :func:`save_pipeline`,
    without its model (checked as :func:`load_pipeline` says)."""
    from kerasbert.files.atomic import check_file
    from kerasbert.files.atomic import read_json
    from kerasbert.tokenizers.tokenizer import BertTokenizer

    directory = Path(directory)
    settings_path = directory / settings_name
    if not settings_path.exists():
        raise KerasbertError(f"{directory}: not a kerasbert {what} folder (no {settings_name})")
    settings = read_json(settings_path)
    if not isinstance(settings, dict) or not isinstance(settings.get("tokenizer"), dict):
        raise KerasbertError(f"{settings_path}: damaged: not the settings of a kerasbert {what} "
                             "(a JSON object with \"tokenizer\" settings)")
    check_file(directory / VOCAB_FILE, "text", "the vocabulary")
    try:
        tokenizer = BertTokenizer(directory / VOCAB_FILE, **settings.pop("tokenizer"))
    except TypeError as e:
        raise KerasbertError(f"{settings_path}: damaged: its \"tokenizer\" settings do not fit ({e})")
    return tokenizer, settings


def _load_keras_model(path):
    """``keras.saving.load_model(path)`` (safe mode on) after
    :func:`~kerasbert.files.atomic.check_file`; an archive that passes the check but
    does not load (a damaged entry) is reported as damaged too."""
    import zipfile

    import keras

    from kerasbert.files.atomic import check_file
    from kerasbert.files.atomic import damaged

    check_file(path, "zip", "the Keras model")
    try:
        return keras.saving.load_model(path, compile=False)  # compile settings are training's (TRAINING_ONLY)
    except (ValueError, OSError, KeyError, TypeError, zipfile.BadZipFile) as e:
        unknown = _unknown_class(path, e, _archive_config(path))
        if unknown:
            raise unknown from e
        raise damaged(path, f"the archive does not load as a Keras model ({_first_line(e)})") from e


def _archive_config(path):
    """The model config (``config.json``) of a ``.keras`` archive; ``{}`` if it cannot be read."""
    import zipfile

    try:
        with zipfile.ZipFile(path) as archive:
            config = json.loads(archive.read("config.json"))
    except (OSError, KeyError, ValueError, zipfile.BadZipFile):
        return {}
    return config if isinstance(config, dict) else {}


#: Keras's errors for a class (or function) it cannot find: not registered in
#: this process, or a Keras module that this Keras does not have.
_NOT_LOCATED = re.compile(r"Could not (?:locate|deserialize) (?:class|function) '([^']+)'")


def _unknown_class(path, error, config):
    """The one-line error for a model config (``config``, read from
    ``path``) naming a class this process cannot locate -- its name, its
    module and what to install or import --, or None when ``error`` is
    another one. The file is not damaged: this process lacks the code.
    Nothing named by the file is imported here (a package already imported,
    such as kerasbert or Keras, is only searched for the module)."""
    import sys

    match = _NOT_LOCATED.search(str(error))
    if not match:
        return None
    name = match.group(1)
    module = _module_of(config, name)
    if not module:
        return KerasbertError(f"{path}: the model uses the Keras class {name}, which this process does not know: "
                              "install and import the package that defines it before loading the model")
    package = module.split(".")[0]
    where = f"{path}: the model uses the Keras class {name} of the module {module}"
    if package not in sys.modules and _spec(package) is None:
        return KerasbertError(f"{where}, which is not installed: install the package that provides {package} "
                              "(e.g. a head from another package), then load the model again")
    if module in sys.modules or (package in sys.modules and _spec(module) is None):
        version = "kerasbert" if package in ("kerasbert", "kerasbert_apps") else package  # the apps ship with the kit
        return KerasbertError(f"{where}, which this version of {version} does not have: the folder was written "
                              f"with another version of {version}; load it with that one")
    return KerasbertError(f"{where}, which is not imported: import {module} before loading the model")


def _spec(module):
    """``importlib.util.find_spec(module)``, None when it (or a package above it) is not there."""
    import importlib.util

    try:
        return importlib.util.find_spec(module)
    except (ImportError, ValueError):
        return None


def _module_of(config, name):
    """The ``"module"`` recorded beside ``"class_name": name`` anywhere in a
    serialized Keras config (None if absent)."""
    if isinstance(config, dict):
        if config.get("class_name") == name and isinstance(config.get("module"), str):
            return config["module"]
        items = config.values()
    elif isinstance(config, list):
        items = config
    else:
        return None
    for item in items:
        module = _module_of(item, name)
        if module:
            return module
    return None


def _first_line(error):
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    return lines[0][:300] if lines else type(error).__name__


def _head_weights(model):
    """The model's variables outside its encoder (the head), in the model's order."""
    inside = {id(v) for v in model.encoder.weights}
    return [v for v in model.weights if id(v) not in inside]


def _save_lora_model(directory, model):
    """The config, the encoder's adapters and the head of a LoRA ``model``."""
    import keras
    import numpy as np

    from kerasbert.layers.lora import ADAPTERS_FILE

    config = _without_training_state(keras.saving.serialize_keras_object(model))
    (directory / LORA_CONFIG_FILE).write_text(json.dumps(config, indent=1) + "\n", encoding="utf-8")
    model.encoder.save_lora_weights(str(directory / ADAPTERS_FILE))
    np.savez(directory / HEAD_WEIGHTS_FILE, *[np.asarray(v) for v in _head_weights(model)])


def _without_training_state(config):
    """A serialized model's ``config`` without its :data:`TRAINING_ONLY` entries."""
    if not isinstance(config, dict):
        return config  # not a model's config: deserializing it says so
    return {key: value for key, value in config.items() if key not in TRAINING_ONLY}


def _load_lora_model(directory, lora):
    """A model saved by :func:`_save_lora_model`: built from its config, the
    encoder's weights from the checkpoint ``lora["checkpoint"]``, then
    Keras's LoRA with the saved adapters, then the head."""
    import keras
    import numpy as np

    from kerasbert.layers.lora import ADAPTERS_FILE
    from kerasbert.layers.lora import enable_lora
    from kerasbert.checkpoints.loader import STARTER
    from kerasbert.checkpoints.loader import load_encoder

    from kerasbert.files.atomic import check_file
    from kerasbert.files.atomic import damaged
    from kerasbert.files.atomic import read_json

    config = read_json(directory / LORA_CONFIG_FILE, "the model's config")
    check_file(directory / ADAPTERS_FILE, "hdf5", "the LoRA adapters")
    check_file(directory / HEAD_WEIGHTS_FILE, "zip", "the head's weights")
    try:
        model = keras.saving.deserialize_keras_object(_without_training_state(config))
    except (ValueError, KeyError, TypeError) as e:
        unknown = _unknown_class(directory / LORA_CONFIG_FILE, e, config)
        if unknown:
            raise unknown from e
        raise damaged(directory / LORA_CONFIG_FILE, f"not a Keras model config ({_first_line(e)})") from e
    if not isinstance(model, keras.Model) or not hasattr(model, "encoder"):
        raise damaged(directory / LORA_CONFIG_FILE, "not the config of a kerasbert model")
    reference = str(lora["checkpoint"])
    if reference != STARTER and not (Path(reference).exists() or Path(reference + ".index").exists()):
        # said here: the checkpoint reader would take the path for a prefix and list the parent folder's files
        raise KerasbertError(f"{directory}: cannot load the encoder checkpoint {reference!r} that the LoRA adapters "
                             "go on: no such folder")
    try:
        original = load_encoder(lora["checkpoint"])
        model.encoder.set_weights(original.get_weights())
    except (KerasbertError, ValueError) as e:
        raise KerasbertError(f"{directory}: cannot load the encoder checkpoint {lora['checkpoint']!r} that the LoRA "
                             f"adapters go on: {e}")
    enable_lora(model.encoder, lora["rank"])
    try:
        model.encoder.load_lora_weights(str(directory / ADAPTERS_FILE))
    except (ValueError, OSError, KeyError, TypeError) as e:
        raise damaged(directory / ADAPTERS_FILE, f"the LoRA adapters do not load ({_first_line(e)})") from e
    head = _head_weights(model)
    try:
        with np.load(directory / HEAD_WEIGHTS_FILE, allow_pickle=False) as saved:
            values = [saved[f"arr_{i}"] for i in range(len(saved.files))]
    except (ValueError, OSError, KeyError, EOFError) as e:
        raise damaged(directory / HEAD_WEIGHTS_FILE, f"the head's weights do not load ({_first_line(e)})") from e
    if [tuple(v.shape) for v in values] != [tuple(v.shape) for v in head]:
        raise KerasbertError(f"{directory / HEAD_WEIGHTS_FILE}: the head's weights do not match the model's")
    for variable, value in zip(head, values):
        variable.assign(value)
    return model
