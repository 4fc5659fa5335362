"""Run settings, spaCy style: one dataclass declares every setting once.

A setting is a dataclass field made with :func:`setting`: its default, its
help text and its choices live together in the field (its metadata), and
everything else is generated from them:

* :func:`load_settings` reads a JSON or TOML file of the same keys (an unknown
  key is an error that lists the known ones);
* :func:`add_settings_options` adds one ``--option`` per field to an argparse
  parser (``--flag/--no-flag`` for booleans; choices checked), plus
  ``--settings FILE``;
* :func:`settings_from_args` fills the dataclass: defaults, then the file, then
  the options actually given.

A training run writes its filled-in settings to ``OUTPUT/settings.json``, so
every run records exactly what it did (and the file can be passed back with
``--settings``). Apps subclass :class:`TrainSettings`; a subclass that needs
another help text or default for a field declares the field again.

``EncoderConfig`` is something else: the checkpoint's own configuration.
"""

import argparse
import dataclasses
import json
from pathlib import Path

from kerasbert.errors import KerasbertError

PRECISIONS = ("float32", "mixed_bfloat16", "mixed_float16")
STRATEGIES = ("default", "mirrored")


def setting(default, help, choices=None):
    """A settings field: its ``default``, ``help`` text and allowed ``choices``."""
    return dataclasses.field(default=default, metadata={"help": help, "choices": tuple(choices) if choices else None})


def load_settings(cls, path):
    """An instance of dataclass ``cls`` from a JSON or TOML (``.toml``) file."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as e:
        raise KerasbertError(f"{path}: cannot read the settings ({e.strerror})")
    try:
        if path.suffix == ".toml":
            import tomllib

            raw = tomllib.loads(text)
        else:
            raw = json.loads(text)
    except ValueError as e:
        raise KerasbertError(f"{path}: cannot parse the settings: {e}")
    if not isinstance(raw, dict):
        raise KerasbertError(f"{path}: the settings file must hold an object of settings")
    known = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(raw) - known)
    if unknown:
        raise KerasbertError(
            f"{path}: unknown setting(s): {', '.join(unknown)} (known: {', '.join(sorted(known))})"
        )
    return cls(**raw)


def add_settings_options(parser, cls, settings_file=True):
    """Add one option per field of dataclass ``cls`` (and ``--settings FILE``)."""
    if settings_file:
        parser.add_argument("--settings", "--config", dest="settings_file", metavar="FILE",
                            help="JSON or TOML file of settings, same keys as the options (e.g. a run's "
                            "OUTPUT/settings.json); options given here override it")
    for field in dataclasses.fields(cls):
        flag = "--" + field.name.replace("_", "-")
        text = f"{field.metadata['help']} (default: {field.default!r})"
        if isinstance(field.default, bool):
            parser.add_argument(flag, dest=field.name, action=argparse.BooleanOptionalAction, default=None, help=text)
        else:
            parser.add_argument(flag, dest=field.name, type=type(field.default), default=None, help=text,
                                choices=field.metadata["choices"])


def settings_from_args(cls, args):
    """Defaults, then ``args.settings_file``, then the options given on the command line."""
    path = getattr(args, "settings_file", None)
    settings = load_settings(cls, path) if path else cls()
    for field in dataclasses.fields(cls):
        value = getattr(args, field.name, None)
        if value is not None:
            setattr(settings, field.name, value)
    return settings


def check_settings(settings, required=()):
    """Raise a clear error for each ``required`` setting left empty and for
    each value outside its field's choices."""
    missing = [key for key in required if not getattr(settings, key)]
    if missing:
        raise KerasbertError(
            "missing setting(s): " + ", ".join(f"{key} (--{key.replace('_', '-')})" for key in missing)
        )
    for field in dataclasses.fields(settings):
        choices = field.metadata.get("choices")
        value = getattr(settings, field.name)
        if choices and value not in choices:
            raise KerasbertError(f"{field.name} must be one of {', '.join(map(str, choices))}, got {value!r}")


@dataclasses.dataclass
class TrainSettings:
    """The settings every app's training shares; apps subclass it and add
    their own fields (with :func:`setting`)."""

    checkpoint: str = setting("", "encoder checkpoint folder (official or Hugging Face layout), or 'starter'")
    train: str = setting("", "training data")
    dev: str = setting("", "dev data, for early stopping and model selection")
    output: str = setting("", "output folder")
    epochs: int = setting(3, "training epochs")
    batch_size: int = setting(32, "sequences per batch")
    max_length: int = setting(128, "tokens per sequence window, [CLS]/[SEP] included")
    learning_rate: float = setting(5e-5, "peak learning rate of the encoder")
    head_learning_rate: float = setting(1e-3, "peak learning rate of the task head")
    warmup_ratio: float = setting(0.1, "fraction of steps with linear warm-up")
    weight_decay: float = setting(0.01, "AdamW weight decay (not on biases and LayerNorm)")
    dropout: float = setting(0.1, "dropout on the encoder output")
    precision: str = setting("float32", "float32, mixed_bfloat16 or mixed_float16 (with loss scaling)", PRECISIONS)
    strategy: str = setting("default", "default (one device) or mirrored (tf.distribute.MirroredStrategy)", STRATEGIES)
    patience: int = setting(0, "stop after this many epochs without a better dev F1 (0: never)")
    seed: int = setting(42, "random seed")
    max_train_examples: int = setting(0, "use only the first N training examples (0: all)")
    max_dev_examples: int = setting(0, "use only the first N dev examples (0: all)")
    backup_every_steps: int = setting(0, "also back up for --resume every N steps (0: each epoch)")
    jit_compile: bool = setting(False, "compile training steps with XLA")
    resume: bool = setting(False, "continue an interrupted run in OUTPUT")

    def check(self):
        check_settings(self, required=("checkpoint", "train", "dev", "output"))
        if self.max_length < 8:
            raise KerasbertError(f"max_length must be at least 8, got {self.max_length}")
