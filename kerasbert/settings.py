"""Run settings, spaCy style: one dataclass of defaults, a file, the command line.

An app declares its settings as a dataclass (every field has a default) plus a
``{field: help}`` dict. Then:

* :func:`load_settings` reads a JSON or TOML file of the same keys (an unknown
  key is an error that lists the known ones);
* :func:`add_settings_options` adds one ``--option`` per field to an argparse
  parser (``--flag/--no-flag`` for booleans), plus ``--config FILE``;
* :func:`settings_from_args` fills the dataclass: defaults, then the file, then
  the options actually given.

The filled settings are what a run writes to ``OUTPUT/config.json``, so every
run records exactly what it did.
"""

import argparse
import dataclasses
import json
from pathlib import Path

from kerasbert.errors import KerasbertError

PRECISIONS = ("float32", "mixed_bfloat16", "mixed_float16")
STRATEGIES = ("default", "mirrored")


def load_settings(cls, path):
    """An instance of dataclass ``cls`` from a JSON or TOML (``.toml``) file."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as e:
        raise KerasbertError(f"{path}: cannot read the config ({e.strerror})")
    try:
        if path.suffix == ".toml":
            import tomllib

            raw = tomllib.loads(text)
        else:
            raw = json.loads(text)
    except ValueError as e:
        raise KerasbertError(f"{path}: cannot parse the config: {e}")
    if not isinstance(raw, dict):
        raise KerasbertError(f"{path}: the config must be an object of settings")
    known = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(raw) - known)
    if unknown:
        raise KerasbertError(
            f"{path}: unknown config key(s): {', '.join(unknown)} (known: {', '.join(sorted(known))})"
        )
    return cls(**raw)


def add_settings_options(parser, cls, help_texts, choices=None):
    """Add ``--config`` and one option per field of dataclass ``cls``."""
    choices = {"precision": PRECISIONS, "strategy": STRATEGIES, **(choices or {})}
    parser.add_argument("--config", help="JSON or TOML file of settings (same keys as the options)")
    defaults = cls()
    for field in dataclasses.fields(cls):
        flag = "--" + field.name.replace("_", "-")
        default = getattr(defaults, field.name)
        text = f"{help_texts[field.name]} (default: {default!r})"
        if isinstance(default, bool):
            parser.add_argument(flag, dest=field.name, action=argparse.BooleanOptionalAction, default=None, help=text)
        else:
            parser.add_argument(flag, dest=field.name, type=type(default), default=None, help=text,
                                choices=choices.get(field.name))


def settings_from_args(cls, args):
    """Defaults, then ``args.config``, then the options given on the command line."""
    settings = load_settings(cls, args.config) if getattr(args, "config", None) else cls()
    for field in dataclasses.fields(cls):
        value = getattr(args, field.name, None)
        if value is not None:
            setattr(settings, field.name, value)
    return settings


def require(settings, *keys):
    """Raise a clear error for each required setting left empty."""
    missing = [key for key in keys if not getattr(settings, key)]
    if missing:
        raise KerasbertError(
            "missing setting(s): " + ", ".join(f"{key} (--{key.replace('_', '-')})" for key in missing)
        )


def check_choice(settings, key, allowed):
    value = getattr(settings, key)
    if value not in allowed:
        raise KerasbertError(f"{key} must be one of {', '.join(allowed)}, got {value!r}")


TRAIN_HELP = {
    "checkpoint": "encoder checkpoint folder (official or Hugging Face layout), or 'starter'",
    "train": "training data",
    "dev": "dev data, for early stopping and model selection",
    "output": "output folder",
    "epochs": "training epochs",
    "batch_size": "sequences per batch",
    "max_length": "tokens per sequence window, [CLS]/[SEP] included",
    "learning_rate": "peak learning rate of the encoder",
    "head_learning_rate": "peak learning rate of the task head",
    "warmup_ratio": "fraction of steps with linear warm-up",
    "weight_decay": "AdamW weight decay (not on biases and LayerNorm)",
    "dropout": "dropout on the encoder output",
    "precision": "float32, mixed_bfloat16 or mixed_float16 (with loss scaling)",
    "strategy": "default (one device) or mirrored (tf.distribute.MirroredStrategy)",
    "patience": "stop after this many epochs without a better dev F1 (0: never)",
    "seed": "random seed",
    "format": "data format (auto: detected)",
    "max_train_examples": "use only the first N training examples (0: all)",
    "max_dev_examples": "use only the first N dev examples (0: all)",
    "backup_every_steps": "also back up for --resume every N steps (0: each epoch)",
    "jit_compile": "compile training steps with XLA",
    "resume": "continue an interrupted run in OUTPUT",
}


@dataclasses.dataclass
class TrainSettings:
    """The settings every app's training shares; apps subclass it, add their
    own fields and extend :data:`TRAIN_HELP`."""

    checkpoint: str = ""
    train: str = ""
    dev: str = ""
    output: str = ""
    epochs: int = 3
    batch_size: int = 32
    max_length: int = 128
    learning_rate: float = 5e-5
    head_learning_rate: float = 1e-3
    warmup_ratio: float = 0.1
    weight_decay: float = 0.01
    dropout: float = 0.1
    precision: str = "float32"
    strategy: str = "default"
    patience: int = 0
    seed: int = 42
    format: str = "auto"
    max_train_examples: int = 0
    max_dev_examples: int = 0
    backup_every_steps: int = 0
    jit_compile: bool = False
    resume: bool = False

    def check(self):
        require(self, "checkpoint", "train", "dev", "output")
        check_choice(self, "precision", PRECISIONS)
        check_choice(self, "strategy", STRATEGIES)
        if self.max_length < 8:
            raise KerasbertError(f"max_length must be at least 8, got {self.max_length}")
