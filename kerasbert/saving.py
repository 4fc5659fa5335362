"""Saving a trained pipeline (model + tokenizer + settings) to a folder.

A pipeline folder holds everything needed to predict, nothing to train:

* ``model.keras`` -- the Keras model WITHOUT optimizer state (the Adam slots
  would triple the file), loadable with ``safe_mode`` on;
* ``vocab.txt`` -- the tokenizer's vocabulary;
* ``<name>.json`` -- the app's settings (labels, max length, thresholds...)
  and the tokenizer's settings under ``"tokenizer"``.

Write it through :func:`kerasbert.files.atomic_write_dir` to replace a
previous version atomically. A training run keeps its best pipeline in
``OUTPUT/model`` (:data:`MODEL_DIR`); :func:`resolve_model_dir` accepts
either folder.
"""

import json
from pathlib import Path

from kerasbert.errors import KerasbertError

MODEL_FILE = "model.keras"
VOCAB_FILE = "vocab.txt"
#: Where a training run (``OUTPUT``) keeps its best pipeline.
MODEL_DIR = "model"


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
    inference = type(model).from_config(model.get_config())
    inference.set_weights(model.get_weights())
    inference.save(directory / MODEL_FILE)
    (directory / VOCAB_FILE).write_text("".join(t + "\n" for t in tokenizer.vocab), encoding="utf-8")
    settings = dict(settings, tokenizer=tokenizer.get_config())
    (directory / settings_name).write_text(json.dumps(settings, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


def load_pipeline(directory, settings_name, what):
    """``(model, tokenizer, settings)`` from a folder written by
    :func:`save_pipeline`. ``what`` names the kind of folder in errors."""
    import keras

    from kerasbert.tokenizer import BertTokenizer

    directory = Path(directory)
    settings_path = directory / settings_name
    if not settings_path.exists():
        raise KerasbertError(f"{directory}: not a kerasbert {what} folder (no {settings_name})")
    settings = json.loads(settings_path.read_text(encoding="utf-8"))
    tokenizer = BertTokenizer(directory / VOCAB_FILE, **settings.pop("tokenizer"))
    model = keras.saving.load_model(directory / MODEL_FILE)
    return model, tokenizer, settings
