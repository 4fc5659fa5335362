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
from kerasbert.settings import TRAIN_HELP
from kerasbert.settings import TrainSettings

FIELDS_HELP = {
    **TRAIN_HELP,
    "train": "training data (CoNLL, JSONL/JSON, CLUENER, char-per-line, .gz)",
    "head_learning_rate": "peak learning rate of the BiLSTM/Dense/CRF head",
    "weight_decay": "AdamW weight decay (not on biases, LayerNorm, CRF)",
    "lstm": "use a BiLSTM between encoder and tag scores",
    "lstm_units": "BiLSTM units per direction",
    "crf": "use a CRF (else softmax per token)",
    "constrained_decoding": "forbid invalid BIO transitions when decoding",
    "format": "data format: auto, conll, jsonl, parallel",
    "tag_column": "CoNLL tag column (default: last)",
    "scheme": "tag scheme of CoNLL files: auto, iob1, bio, bioes",
}


@dataclasses.dataclass
class NerTrainConfig(TrainSettings):
    lstm: bool = True
    lstm_units: int = 128
    crf: bool = True
    constrained_decoding: bool = True
    tag_column: int = -1
    scheme: str = "auto"


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
