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
from typing import ClassVar

from kerasbert.errors import KerasbertError

PRECISIONS = ("auto", "float32", "mixed_bfloat16", "mixed_float16")
PRECISION_HELP = ("auto (mixed_bfloat16 on a CPU with AMX, amx_bf16, and on a GPU of compute capability 8 or "
                  "more; float32 elsewhere, where a bfloat16 training step is slower), "
                  "float32, mixed_bfloat16 or mixed_float16 (with loss scaling)")
STRATEGIES = ("default", "mirrored", "multiworker")

# The "auto" rule of batch_size / epochs / patience / head_learning_rate (RunSettings.resolve_auto).
# A head may declare its own steps, minimum epochs and head learning rate (kerasbert_apps.base.heads.Head);
# these are the values of a head that declares none.
#: The optimizer steps a run aims for (at least) ...
AUTO_STEPS = 300
#: ... in batches of at least this many sequences ...
AUTO_MIN_BATCH_SIZE = 8
#: ... and in no more epochs than this.
AUTO_MAX_EPOCHS = 20
#: With --epochs auto, stop after this many epochs without a better dev F1.
AUTO_PATIENCE = 2
#: The head's peak learning rate with --head-learning-rate auto.
AUTO_HEAD_LEARNING_RATE = 1e-3


def setting(default, help, choices=None, type=None):
    """A settings field: its ``default``, ``help`` text, allowed ``choices``
    and ``type`` (a function str or file value -> value, raising ValueError
    on a bad one; default: the type of ``default``)."""
    return dataclasses.field(default=default, metadata={
        "help": help, "choices": tuple(choices) if choices else None, "type": type})


def auto_or(kind, what, ok=None):
    """A settings ``type``: ``"auto"`` or a ``kind`` (``int`` or ``float``)
    for which ``ok(number)`` holds; ``what`` names the numbers accepted (in
    the error, and as the name argparse prints for a bad value)."""

    def parse(value):
        if value == "auto":
            return value
        try:
            number = kind(value)
        except (TypeError, ValueError):
            number = None
        if (number is None or isinstance(value, bool) or (kind is int and isinstance(value, float))
                or (ok is not None and not ok(number))):
            raise ValueError(f"expected auto or {what}, got {value!r}")
        return number

    parse.__name__ = f"auto or {what}"
    return parse


def auto_or_int(minimum):
    """A settings ``type``: ``"auto"`` or an integer >= ``minimum``."""
    return auto_or(int, f"an integer >= {minimum}", lambda n: n >= minimum)


#: A settings ``type``: ``"auto"`` or a number above 0.
auto_or_float = auto_or(float, "a number above 0", lambda n: n > 0)


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
    fields = {f.name: f for f in dataclasses.fields(cls)}
    unknown = sorted(set(raw) - set(fields))
    if unknown:
        raise KerasbertError(
            f"{path}: unknown setting(s): {', '.join(unknown)} (known: {', '.join(sorted(fields))})"
        )
    for key, value in raw.items():
        if isinstance(fields[key].default, tuple):
            if isinstance(value, str):
                value = [value]
            raw[key] = value = tuple(value)
        parse = fields[key].metadata.get("type")
        if parse is not None:
            try:
                raw[key] = parse(value)
            except ValueError as e:
                raise KerasbertError(f"{path}: setting {key}: {e}")
    return cls(**raw)


#: How ``--help`` says that a settings option must be given.
REQUIRED_NOTE = " (required, here or in --settings FILE)"


def add_settings_options(parser, cls, settings_file=True):
    """Add one option per field of dataclass ``cls`` (and ``--settings FILE``)."""
    if settings_file:
        parser.add_argument("--settings", "--config", dest="settings_file", metavar="FILE",
                            help="JSON or TOML file of settings, same keys as the options (e.g. a run's "
                            "OUTPUT/settings.json); options given here override it")
    required = getattr(cls, "required", ())
    for field in dataclasses.fields(cls):
        flag = "--" + field.name.replace("_", "-")
        needed = field.name in required
        text = help_text(cls, field) + (REQUIRED_NOTE if needed else f" (default: {field.default!r})")
        if isinstance(field.default, bool):
            action = parser.add_argument(flag, dest=field.name, action=argparse.BooleanOptionalAction, default=None,
                                         help=text)
        elif isinstance(field.default, tuple):  # a list of values: --text A B C
            action = parser.add_argument(flag, dest=field.name, nargs="+", default=None, help=text)
        else:
            action = parser.add_argument(flag, dest=field.name, type=field.metadata.get("type") or type(field.default),
                                         default=None, help=text, choices=field.metadata["choices"])
        action.settings_required = needed  # the CLI reference marks it (argparse cannot: --settings may give it)


def help_text(cls, field):
    """A field's help, its ``{placeholders}`` filled from ``cls``'s class
    attributes and this module's ``AUTO_*`` constants (the numbers of the
    auto rule are declared once)."""
    values = {k: v for k, v in globals().items() if k.startswith("AUTO_")}
    values.update({k: getattr(cls, k) for k in dir(cls) if k.startswith("auto_")})
    return field.metadata["help"].format(**values)


def settings_from_args(cls, args):
    """Defaults, then ``args.settings_file``, then the options given on the command line."""
    path = getattr(args, "settings_file", None)
    settings = load_settings(cls, path) if path else cls()
    for field in dataclasses.fields(cls):
        value = getattr(args, field.name, None)
        if value is not None:
            setattr(settings, field.name, tuple(value) if isinstance(field.default, tuple) else value)
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
        parse = field.metadata.get("type")
        if parse is not None:
            try:
                parse(value)
            except ValueError as e:
                raise KerasbertError(f"{field.name}: {e}")


EPOCHS_HELP = ("training epochs; auto: the fewest (at least {auto_min_epochs} or the head's own minimum, at most "
               "{AUTO_MAX_EPOCHS}) in which batches of {AUTO_MIN_BATCH_SIZE} or more give the optimizer steps the head "
               "aims for ({AUTO_STEPS} unless the head says), stopping early when dev F1 stops improving")
HEAD_LEARNING_RATE_HELP = ("peak learning rate of the task head (the layers the head adds to the encoder); auto: "
                           "the rate the head declares ({AUTO_HEAD_LEARNING_RATE:g} unless it says)")
BATCH_SIZE_HELP = ("sequences per batch; auto: the largest (from {AUTO_MIN_BATCH_SIZE} to {auto_batch_size}) with which "
                   "the epochs still give the optimizer steps the head aims for")

OVERWRITE_HELP = ("replace the earlier run of this command in OUTPUT (a folder with its run.json), deleting what it "
                  "holds; never a folder that is not a kerasbert run")


@dataclasses.dataclass
class RunSettings:
    """The settings every training run shares, whatever starts it
    (:class:`TrainSettings`: an encoder checkpoint; :class:`DistillSettings`:
    a trained teacher); apps subclass those and add their own fields (with
    :func:`setting`).

    ``batch_size``, ``epochs``, ``patience`` and ``head_learning_rate``
    default to ``"auto"``: the numbers follow from the size of the training
    data and from what the run's head declares it needs
    (:meth:`resolve_auto`, :func:`kerasbert.training.fit.resolve_auto`), within the
    app's :attr:`auto_batch_size` and :attr:`auto_min_epochs`.
    """

    #: ``--batch-size auto`` is at most this.
    auto_batch_size: ClassVar[int] = 32
    #: ``--epochs auto`` trains at least this many epochs (unless the head says).
    auto_min_epochs: ClassVar[int] = 3
    #: The settings a run cannot do without (:meth:`check` says which are missing).
    required: ClassVar[tuple] = ("train", "dev", "output")

    train: str = setting("", "training data")
    dev: str = setting("", "dev data, for early stopping and model selection")
    output: str = setting("", "output folder")
    epochs: int | str = setting("auto", EPOCHS_HELP, type=auto_or_int(1))
    batch_size: int | str = setting("auto", BATCH_SIZE_HELP, type=auto_or_int(1))
    learning_rate: float = setting(5e-5, "peak learning rate of the encoder")
    head_learning_rate: float | str = setting("auto", HEAD_LEARNING_RATE_HELP, type=auto_or_float)
    warmup_ratio: float = setting(0.1, "fraction of steps with linear warm-up")
    weight_decay: float = setting(0.01, "AdamW weight decay (not on biases and LayerNorm)")
    precision: str = setting("auto", PRECISION_HELP, PRECISIONS)
    strategy: str = setting("default", "default (one device), mirrored (tf.distribute.MirroredStrategy: the devices of "
                            "this machine) or multiworker (MultiWorkerMirroredStrategy: several machines, set up by "
                            "the TF_CONFIG environment variable; the chief writes OUTPUT)", STRATEGIES)
    patience: int | str = setting("auto", "stop after this many epochs without a better dev F1, once it is above 0 "
                                  "(0: never; auto: {AUTO_PATIENCE} with --epochs auto, else never)", type=auto_or_int(0))
    seed: int = setting(42, "random seed")
    max_train_examples: int = setting(0, "use only the first N training examples (0: all)")
    max_dev_examples: int = setting(0, "use only the first N dev examples (0: all)")
    backup_every_steps: int = setting(0, "also back up for --resume every N steps (0: each epoch)")
    jit_compile: bool = setting(False, "compile training steps with XLA (TensorFlow backend; on JAX they always are)")
    resume: bool = setting(False, "continue an interrupted run in OUTPUT")
    overwrite: bool = setting(False, OVERWRITE_HELP)

    def check(self):
        check_settings(self, required=self.required)

    def resolve_auto(self, rows, steps=None, min_epochs=None, head_learning_rate=None):
        """These settings with numbers for ``rows`` training rows (sequences)
        where ``batch_size``, ``epochs``, ``patience`` and
        ``head_learning_rate`` are ``"auto"``. ``steps``, ``min_epochs`` and
        ``head_learning_rate`` are what the run's head declares it needs
        (:class:`kerasbert_apps.base.heads.Head`; None: ``AUTO_STEPS``,
        :attr:`auto_min_epochs`, ``AUTO_HEAD_LEARNING_RATE``). The rule aims
        for ``steps`` optimizer steps on small data and leaves large datasets
        at the minimum epochs and the app's batch size:

        * epochs: the fewest, from ``min_epochs`` to ``AUTO_MAX_EPOCHS``, in
          which batches of ``AUTO_MIN_BATCH_SIZE`` or more still give
          ``steps`` steps;
        * batch size: the largest, from ``AUTO_MIN_BATCH_SIZE`` to
          :attr:`auto_batch_size`, with which those epochs give ``steps``
          steps (on 2 CPU cores a token costs about the same in a batch of 8
          as in one of 32, so a small dataset is not passed over more often
          than the steps need);
        * patience: ``AUTO_PATIENCE`` epochs without a better dev F1 stop a
          run whose epochs are auto; otherwise never (0);
        * head learning rate: the head's.

        The steps are continuous in the number of rows: ``steps`` (or more,
        by less than one batch per epoch) up to the point where
        :attr:`auto_batch_size` and ``min_epochs`` give more, then
        ``min_epochs`` epochs at :attr:`auto_batch_size`; fewer only where
        ``AUTO_MAX_EPOCHS`` caps a tiny dataset. A batch size or epochs given
        as numbers are used as they are, and the other one follows the same
        aim. E.g. with 300 steps and at least 3 epochs of at most 32: 400
        rows -> batch 8, 6 epochs; 1000 -> batch 9, 3 epochs; CoNLL-2003's
        14041 -> batch 32, 3 epochs.
        """
        import math

        steps = int(steps or AUTO_STEPS)
        min_epochs = int(min_epochs or self.auto_min_epochs)
        rows = max(int(rows), 1)
        epochs = self.epochs
        if epochs == "auto":
            if self.batch_size == "auto":
                epochs = math.ceil(steps * AUTO_MIN_BATCH_SIZE / rows)
            else:
                epochs = math.ceil(steps / math.ceil(rows / self.batch_size))
            epochs = min(max(epochs, min_epochs), AUTO_MAX_EPOCHS)
        batch_size = self.batch_size
        if batch_size == "auto":
            batch_size = min(max(rows * epochs // steps, AUTO_MIN_BATCH_SIZE), self.auto_batch_size)
        patience = self.patience
        if patience == "auto":
            patience = AUTO_PATIENCE if self.epochs == "auto" else 0
        rate = self.head_learning_rate
        if rate == "auto":
            rate = float(head_learning_rate or AUTO_HEAD_LEARNING_RATE)
        return dataclasses.replace(self, batch_size=batch_size, epochs=epochs, patience=patience,
                                   head_learning_rate=rate)


@dataclasses.dataclass
class TrainSettings(RunSettings):
    """A run that fine-tunes a pretrained encoder checkpoint."""

    required: ClassVar[tuple] = ("checkpoint", "train", "dev", "output")

    checkpoint: str = setting("", "encoder checkpoint folder (official or Hugging Face layout), or 'starter' (the "
                              "English MiniLM the kit installs; for Chinese, a Chinese checkpoint, or one made by "
                              "kerasbert pretrain --from-scratch)")
    max_length: int = setting(128, "tokens per sequence window, [CLS]/[SEP] included")
    dropout: float = setting(0.1, "dropout on the encoder output")
    lora_rank: int = setting(0, "train Keras LoRA adapters of this rank on the encoder's attention and feed-forward "
                             "kernels, the checkpoint's weights frozen (the head trains fully); the model folder then "
                             "holds only the adapters and the head, and needs the checkpoint to load (0: fine-tune "
                             "the whole encoder)")
    freeze_encoder: bool = setting(False, "freeze the encoder's weights and feed the head a learned softmax-weighted "
                                   "mix of all its layers' outputs (embeddings and every transformer layer; ELMo's "
                                   "scalar mix); only the head and the mix train")
    layer_lr_decay: float = setting(1.0, "layer-wise learning-rate decay: each encoder layer learns at the rate of "
                                    "the one above times this (top layer: --learning-rate, embeddings: times this "
                                    "to the number of layers); the head keeps --head-learning-rate (1.0: off)")

    def check(self):
        check_settings(self, required=self.required)
        if self.max_length < 8:
            raise KerasbertError(f"max_length must be at least 8, got {self.max_length}")
        if self.lora_rank < 0:
            raise KerasbertError(f"lora_rank must be 0 (no LoRA) or more, got {self.lora_rank}")
        if not 0.0 < self.layer_lr_decay <= 1.0:
            raise KerasbertError(f"layer_lr_decay must be in (0, 1] (1.0: off), got {self.layer_lr_decay}")
        if self.freeze_encoder and self.lora_rank:
            raise KerasbertError("freeze_encoder and lora_rank exclude each other (LoRA trains adapters inside the "
                                 "encoder; freeze_encoder trains nothing in it)")
        if self.freeze_encoder and self.layer_lr_decay != 1.0:
            raise KerasbertError("layer_lr_decay has nothing to decay with freeze_encoder (no encoder layer trains)")


def layer_list(value):
    """A settings ``type``: ``"auto"`` or comma-separated layer numbers from 0 (``"0,2,4"``)."""
    if value == "auto":
        return value
    try:
        layers = [int(part) for part in str(value).split(",")]
    except ValueError:
        layers = None
    if not layers or min(layers) < 0:
        raise ValueError(f"expected auto or layer numbers from 0 separated by commas (e.g. 0,2,4), got {value!r}")
    return value


layer_list.__name__ = "auto or comma-separated layer numbers"


@dataclasses.dataclass
class DistillSettings(RunSettings):
    """A run that trains a smaller student from a trained teacher
    (DistilBERT-style initialisation, the teacher's scores as soft targets);
    the tokenizer, labels, windows and head come from the teacher."""

    required: ClassVar[tuple] = ("teacher", "train", "dev", "output")

    teacher: str = setting("", "the trained teacher: a model folder (OUTPUT/model) or a training output folder")
    unlabeled: str = setting("", "more texts without labels, one per line (or JSON lines with a \"text\"): the "
                             "student learns the teacher's scores on them too")
    student_layers: int = setting(3, "transformer layers of the student's encoder")
    teacher_layers: str = setting("auto", "the teacher layers that initialise the student's, e.g. 0,2,4 (auto: "
                                  "every other layer, as DistilBERT, spread over the teacher's depth)", type=layer_list)
    soft_weight: float = setting(0.5, "weight of the soft loss (the student's scores against the teacher's); the "
                                 "gold labels' loss gets 1 - this (unlabeled texts: soft loss only)")
    save_encoder: bool = setting(False, "also write the student's encoder in Google's official checkpoint layout "
                                 "to OUTPUT/encoder (to fine-tune other heads from it)")

    def check(self):
        check_settings(self, required=self.required)
        if self.student_layers < 1:
            raise KerasbertError(f"student_layers must be at least 1, got {self.student_layers}")
        if not 0.0 <= self.soft_weight <= 1.0:
            raise KerasbertError(f"soft_weight must be between 0 and 1, got {self.soft_weight}")
        if self.teacher_layers != "auto" and len(self.teacher_layers.split(",")) != self.student_layers:
            raise KerasbertError(f"teacher_layers names {len(self.teacher_layers.split(','))} layers but "
                                 f"student_layers is {self.student_layers}")


@dataclasses.dataclass
class PretrainSettings:
    """``kerasbert pretrain``: masked-LM training of a BERT encoder, continued
    from a checkpoint (``checkpoint``) or from scratch (``from_scratch``: a
    vocabulary learnt from the text and a randomly initialised encoder of the
    size the ``size`` preset or ``layers``/``hidden``/``heads``/``intermediate``
    give)."""

    required: ClassVar[tuple] = ("text", "output")
    #: BERT's published small sizes (Turc et al. 2019): layers and hidden size;
    #: the heads are hidden / 64 and the feed-forward 4 x hidden.
    sizes: ClassVar[dict] = {"tiny": (2, 128), "mini": (4, 256), "small": (4, 512)}
    #: The peak learning rate of ``learning_rate auto``: continuing a checkpoint, from scratch.
    auto_learning_rates: ClassVar[tuple] = (5e-5, 5e-4)

    checkpoint: str = setting("", "BERT checkpoint folder (official or Hugging Face layout), or 'starter'; its "
                              "masked-LM head (cls/predictions/*) is trained further, or a new one is started "
                              "(this or --from-scratch)")
    from_scratch: bool = setting(False, "pretrain a new encoder instead of a checkpoint: a WordPiece vocabulary "
                                 "learnt from the text (every CJK character a token of its own, as in Chinese BERT; "
                                 "OUTPUT/vocab.txt) and a randomly initialised BERT of --size (this or --checkpoint)")
    text: tuple = setting((), "plain-text or .gz files, one document or paragraph a line (streamed, never read "
                          "whole)")
    output: str = setting("", "output folder; the trained encoder and its masked-LM head go to OUTPUT/encoder")
    size: str = setting("mini", "with --from-scratch: BERT's published sizes, tiny (2 layers, hidden 128), mini "
                        "(4, 256) or small (4, 512), heads hidden/64, feed-forward 4 x hidden; --layers, --hidden, "
                        "--heads and --intermediate override a part", tuple(sizes))
    layers: int = setting(0, "with --from-scratch: transformer layers (0: those of --size)")
    hidden: int = setting(0, "with --from-scratch: hidden size (0: that of --size)")
    heads: int = setting(0, "with --from-scratch: attention heads (0: hidden / 64, at least 1)")
    intermediate: int = setting(0, "with --from-scratch: feed-forward size (0: 4 x hidden)")
    max_positions: int = setting(512, "with --from-scratch: position embeddings, the longest input the encoder "
                                 "takes in any later use (BERT: 512)")
    vocab_size: int = setting(21128, "with --from-scratch: tokens of the vocabulary at most (Chinese BERT: 21128), "
                              "special and unused ones included; more when the text has more distinct characters, "
                              "each of which is kept")
    lowercase: bool = setting(True, "with --from-scratch: lower-case the text and strip accents (an uncased "
                              "vocabulary, as Chinese BERT's)")
    max_length: int = setting(128, "tokens per packed sequence, [CLS]/[SEP] included")
    batch_size: int = setting(32, "sequences per batch")
    steps_per_epoch: int = setting(0, "at most N batches per epoch; 0: an epoch is one pass over the text files "
                                   "(counted before training, reading them line by line); the held-out accuracy is "
                                   "measured after each epoch")
    epochs: int = setting(1, "epochs: passes over the text, or --steps-per-epoch batches when that is less")
    held_out: int = setting(256, "the first N sequences of the text are held out (never trained on) for the "
                            "masked-token accuracy after each epoch")
    whole_word_masking: bool = setting(True, "mask all pieces of a word together (English: WordPiece ## pieces; "
                                       "Chinese: words from the jieba segmenter, pip install jieba)")
    learning_rate: float | str = setting("auto", "peak learning rate; auto: {auto_learning_rates[0]:g} continuing "
                                         "a checkpoint, {auto_learning_rates[1]:g} from scratch", type=auto_or_float)
    warmup_ratio: float = setting(0.1, "fraction of steps with linear warm-up")
    weight_decay: float = setting(0.01, "AdamW weight decay (not on biases and LayerNorm)")
    precision: str = setting("auto", PRECISION_HELP, PRECISIONS)
    seed: int = setting(42, "random seed (initialisation of a new head or encoder, masking of the training "
                        "batches)")
    backup_every_steps: int = setting(0, "also back up for --resume every N steps (0: each epoch)")
    keep_encoders_every: int = setting(0, "also keep the encoder after every N epochs, in OUTPUT/encoders/step-S "
                                       "(S: the training steps done), to fine-tune and compare the checkpoints of one "
                                       "run; 0: only the final OUTPUT/encoder")
    jit_compile: bool = setting(False, "compile training steps with XLA (TensorFlow backend; on JAX they always are)")
    resume: bool = setting(False, "continue an interrupted run in OUTPUT")
    overwrite: bool = setting(False, OVERWRITE_HELP)

    def check(self):
        from kerasbert.tokenizers.vocab import BERT_SPECIAL_TOKENS

        if self.checkpoint and self.from_scratch:
            raise KerasbertError("give --checkpoint (continue its pre-training) or --from-scratch (a new vocabulary "
                                 "and encoder), not both")
        if not self.checkpoint and not self.from_scratch:
            raise KerasbertError("pretrain needs --checkpoint CHECKPOINT (continue its pre-training) or "
                                 "--from-scratch (a new vocabulary and encoder learnt from the text)")
        check_settings(self, required=self.required)
        for key in ("batch_size", "epochs"):
            if getattr(self, key) < 1:
                raise KerasbertError(f"{key} must be at least 1, got {getattr(self, key)}")
        new = ("layers", "hidden", "heads", "intermediate")
        for key in new:
            if getattr(self, key) < 0:
                raise KerasbertError(f"{key} must be 0 (from --size) or more, got {getattr(self, key)}")
        if self.checkpoint and any(getattr(self, key) for key in new):
            given = ", ".join(f"--{key}" for key in new if getattr(self, key))
            raise KerasbertError(f"{given}: the size of a new encoder (--from-scratch); --checkpoint "
                                 f"{self.checkpoint} has its own")
        if self.from_scratch:
            config = self.encoder_size()
            if config["hidden"] % config["heads"]:
                raise KerasbertError(f"hidden size {config['hidden']} is not divisible by {config['heads']} heads: "
                                     "give --heads a divisor of --hidden")
            if self.vocab_size <= len(BERT_SPECIAL_TOKENS):
                raise KerasbertError(f"vocab_size must be more than the {len(BERT_SPECIAL_TOKENS)} special and unused "
                                     f"tokens ([PAD], [unused1] .. [unused99], [UNK], [CLS], [SEP], [MASK]), got "
                                     f"{self.vocab_size}")
            if self.max_length > self.max_positions:
                raise KerasbertError(f"max_length {self.max_length} is longer than --max-positions "
                                     f"{self.max_positions}")
        if self.steps_per_epoch < 0:
            raise KerasbertError(f"steps_per_epoch must be 0 (one pass over the text) or more, got {self.steps_per_epoch}")
        if self.max_length < 8:
            raise KerasbertError(f"max_length must be at least 8, got {self.max_length}")
        if self.held_out < 0:
            raise KerasbertError(f"held_out must be 0 or more, got {self.held_out}")
        if self.keep_encoders_every < 0:
            raise KerasbertError(f"keep_encoders_every must be 0 (the final encoder only) or more, got "
                                 f"{self.keep_encoders_every}")

    def encoder_size(self):
        """The new encoder's ``layers``, ``hidden``, ``heads`` and
        ``intermediate`` (``--from-scratch``): ``size``'s, each one given
        instead where it is not 0."""
        layers, hidden = self.sizes[self.size]
        hidden = self.hidden or hidden
        return {"layers": self.layers or layers, "hidden": hidden, "heads": self.heads or max(1, hidden // 64),
                "intermediate": self.intermediate or 4 * hidden}

    def peak_learning_rate(self):
        """``learning_rate``, or with ``auto`` the rate for a checkpoint or
        from scratch (:attr:`auto_learning_rates`)."""
        if self.learning_rate != "auto":
            return float(self.learning_rate)
        return self.auto_learning_rates[bool(self.from_scratch)]
