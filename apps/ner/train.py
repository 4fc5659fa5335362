"""Training an NER tagger: one config, one function.

:class:`NerTrainConfig` holds every setting with its default; a run is
``train(NerTrainConfig(checkpoint=..., train=..., dev=..., output=...))`` or
``kerasbert ner train ...`` (the CLI only fills the config). ``--config FILE``
reads a JSON or TOML file of the same keys; command-line options override it.
The filled-in config is written to ``OUTPUT/config.json``.

What ends up in ``OUTPUT``:

* ``model/`` -- the best model on dev entity F1 (``model.keras``, ``vocab.txt``,
  ``tagger.json``), replaced atomically when a later epoch is better;
* ``history.jsonl`` (+ ``history.png`` with matplotlib) -- loss and dev scores
  per epoch; ``metrics.json`` -- the best dev scores;
* ``logs/`` -- TensorBoard; ``backup/`` -- only while training: what
  ``--resume`` continues from after an interruption.
"""

import dataclasses

from kerasbert.errors import KerasbertError
from kerasbert.settings import PRECISIONS
from kerasbert.settings import STRATEGIES
from kerasbert.settings import check_choice
from kerasbert.settings import require

FIELDS_HELP = {
    "checkpoint": "encoder checkpoint folder (official or Hugging Face layout)",
    "train": "training data (CoNLL, JSONL/JSON, CLUENER, char-per-line, .gz)",
    "dev": "dev data, for early stopping and model selection",
    "output": "output folder",
    "epochs": "training epochs",
    "batch_size": "sequences per batch",
    "max_length": "tokens per sequence window, [CLS]/[SEP] included",
    "learning_rate": "peak learning rate of the encoder",
    "head_learning_rate": "peak learning rate of the BiLSTM/Dense/CRF head",
    "warmup_ratio": "fraction of steps with linear warm-up",
    "weight_decay": "AdamW weight decay (not on biases, LayerNorm, CRF)",
    "dropout": "dropout on the encoder output",
    "lstm": "use a BiLSTM between encoder and tag scores",
    "lstm_units": "BiLSTM units per direction",
    "crf": "use a CRF (else softmax per token)",
    "constrained_decoding": "forbid invalid BIO transitions when decoding",
    "precision": "float32, mixed_bfloat16 or mixed_float16 (with loss scaling)",
    "strategy": "default (one device) or mirrored (tf.distribute.MirroredStrategy)",
    "patience": "stop after this many epochs without a better dev F1 (0: never)",
    "seed": "random seed",
    "format": "data format: auto, conll, jsonl, parallel",
    "tag_column": "CoNLL tag column (default: last)",
    "scheme": "tag scheme of CoNLL files: auto, iob1, bio, bioes",
    "max_train_examples": "use only the first N training examples (0: all)",
    "max_dev_examples": "use only the first N dev examples (0: all)",
    "backup_every_steps": "also back up for --resume every N steps (0: each epoch)",
    "jit_compile": "compile training steps with XLA",
    "resume": "continue an interrupted run in OUTPUT",
}


@dataclasses.dataclass
class NerTrainConfig:
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
    lstm: bool = True
    lstm_units: int = 128
    crf: bool = True
    constrained_decoding: bool = True
    precision: str = "float32"
    strategy: str = "default"
    patience: int = 0
    seed: int = 42
    format: str = "auto"
    tag_column: int = -1
    scheme: str = "auto"
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


def _read(path, config, what):
    from apps.ner.data import detect_format
    from apps.ner.data import read_ner_file

    fmt = detect_format(path) if config.format == "auto" else config.format
    options = {}
    if fmt == "conll":
        options = {"tag_column": config.tag_column, "scheme": config.scheme}
    elif fmt == "parallel":
        options = {"scheme": config.scheme}
    result = read_ner_file(path, format=fmt, **options)
    print(f"{what}: {path}\n  " + result.report.summary().replace("\n", "\n  "))
    return result.examples


def train(config, callbacks=()):
    """Train, select on dev entity F1, save the best model; returns the
    metrics written to ``OUTPUT/metrics.json``. ``callbacks`` are extra Keras
    callbacks (e.g. for a notebook)."""
    from apps.ner.evaluate import format_scores
    from apps.ner.evaluate import score
    from apps.ner.model import HEAD_PREFIX
    from apps.ner.model import NerModel
    from apps.ner.tagger import Tagger
    from apps.ner.tagger import bio_tags
    from kerasbert import training
    from kerasbert.crf import allowed_transitions
    from kerasbert.loader import load_encoder

    config.check()
    # Read (and fail on) the data before creating anything in OUTPUT.
    train_examples = _read(config.train, config, "train")
    dev_examples = _read(config.dev, config, "dev")
    if config.max_train_examples:
        train_examples = train_examples[: config.max_train_examples]
    if config.max_dev_examples:
        dev_examples = dev_examples[: config.max_dev_examples]
    types = sorted({e.type for ex in train_examples for e in ex.entities})
    if not types:
        raise KerasbertError(f"{config.train}: no entities in the training data; nothing to learn")
    dev_only = sorted({e.type for ex in dev_examples for e in ex.entities} - set(types))
    if dev_only:
        print(f"note: entity type(s) {', '.join(dev_only)} occur in dev but not in train; "
              f"they cannot be predicted and count as misses in dev scores")
    tags = bio_tags(types)

    training.start_run(config)
    checkpoint, tokenizer = training.checkpoint_and_tokenizer(config)
    with training.distribution_scope(config.strategy):
        allowed, allowed_start = (None, None)
        if config.crf and config.constrained_decoding:
            allowed, allowed_start = (a.tolist() for a in allowed_transitions(tags, "BIO"))
        model = NerModel(
            load_encoder(checkpoint), len(tags), use_lstm=config.lstm, lstm_units=config.lstm_units,
            use_crf=config.crf, dropout=config.dropout, allowed=allowed, allowed_start=allowed_start,
        )
        tagger = Tagger(model, tokenizer, tags, max_length=config.max_length)
        features, report = tagger.features(train_examples)
        print("train features: " + report.summary().replace("\n", "\n  "))
        batches = training.BucketedBatches(
            features, config.batch_size, targets=("tags",), seed=config.seed, max_width=config.max_length
        )
        training.compile_for_training(model, len(batches), config, HEAD_PREFIX)

    dev_texts = [e.text for e in dev_examples]
    return training.fit_and_select(
        model, batches, config,
        dev_scores=lambda: score(dev_examples, tagger.predict(dev_texts, batch_size=config.batch_size)),
        save_pipeline=tagger.save,
        format_scores=format_scores,
        callbacks=callbacks,
    )
