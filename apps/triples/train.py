"""Training a triple extractor: one config, one function.

:class:`TriplesTrainConfig` holds every setting with its default; a run is
``train(TriplesTrainConfig(checkpoint=..., train=..., dev=..., output=...))``
or ``kerasbert triples train ...`` (the CLI only fills the config).
``--config FILE`` reads a JSON or TOML file of the same keys; command-line
options override it. The filled-in config is written to
``OUTPUT/config.json`` (:mod:`kerasbert.settings`).

The machinery is the NER app's (:mod:`kerasbert.training`): GroupedAdamW with
a head learning rate for ``triples_head_*``, warm-up + linear decay,
length-bucketed batches (here with one random gold subject per row, redrawn
every epoch: :class:`apps.triples.batches.SubjectSampledBatches`), dev
evaluation after each epoch with early stopping and atomic best-model saves
(:class:`kerasbert.training.EpochEvaluator`), ``--resume`` through
``BackupAndRestore``, TensorBoard, precision policies and MirroredStrategy.

What ends up in ``OUTPUT``:

* ``model/`` -- the best model on dev triple F1 (``model.keras``,
  ``vocab.txt``, ``extractor.json``, ``dev_scores.json``), replaced atomically
  when a later epoch is better;
* ``history.jsonl`` (+ ``history.png`` with matplotlib) -- loss and dev scores
  per epoch; ``metrics.json`` -- the best dev scores;
* ``logs/`` -- TensorBoard; ``backup/`` -- only while training.
"""

import dataclasses

from kerasbert.errors import KerasbertError
from kerasbert.settings import TRAIN_HELP
from kerasbert.settings import TrainSettings
from kerasbert.settings import check_choice

EVAL_MODES = ("exact", "partial")
FORMATS = ("auto", "casrel", "duie")

FIELDS_HELP = {
    **TRAIN_HELP,
    "train": "training data (CasRel triple_list or DuIE/CMeIE spo_list; JSON array or JSON lines; .gz)",
    "schema": "predicate list: all_50_schemas / 53_schemas.json lines or a rel2id.json (default: the training data's predicates)",
    "head_learning_rate": "peak learning rate of the pointer heads and subject conditioning",
    "threshold_start": "a start pointer fires when its probability is above this",
    "threshold_end": "an end pointer fires when its probability is above this",
    "eval_mode": "dev F1 used for model selection: exact (full entity strings) or partial (last words)",
    "seed": "random seed (shuffling, subject sampling, initialisation)",
    "format": "data format: auto, casrel, duie",
}


@dataclasses.dataclass
class TriplesTrainConfig(TrainSettings):
    epochs: int = 10
    batch_size: int = 16
    schema: str = ""
    threshold_start: float = 0.5
    threshold_end: float = 0.5
    eval_mode: str = "exact"

    def check(self):
        super().check()
        check_choice(self, "eval_mode", EVAL_MODES)
        check_choice(self, "format", FORMATS)
        for key in ("threshold_start", "threshold_end"):
            if not 0.0 <= getattr(self, key) < 1.0:
                raise KerasbertError(f"{key} must be in [0, 1), got {getattr(self, key)}")


def read_data(path, fmt="auto", what="data"):
    """Read a triple file and print its report; returns the examples."""
    from apps.triples.data import read_triples_file

    result = read_triples_file(path, format=fmt)
    print(f"{what}: {path}\n  " + result.report.summary().replace("\n", "\n  "))
    return result.examples


def train(config, callbacks=()):
    """Train, select on dev triple F1, save the best model; returns the
    metrics written to ``OUTPUT/metrics.json``. ``callbacks`` are extra Keras
    callbacks (e.g. for a notebook)."""
    from apps.triples.batches import SubjectSampledBatches
    from apps.triples.data import predicates_of
    from apps.triples.data import read_schema
    from apps.triples.evaluate import format_scores
    from apps.triples.evaluate import score
    from apps.triples.extractor import Extractor
    from apps.triples.model import HEAD_PREFIX
    from apps.triples.model import TripleModel
    from kerasbert import training
    from kerasbert.loader import load_encoder

    config.check()
    # Read (and fail on) the data before creating anything in OUTPUT.
    train_examples = read_data(config.train, config.format, "train")
    dev_examples = read_data(config.dev, config.format, "dev")
    if config.max_train_examples:
        train_examples = train_examples[: config.max_train_examples]
    if config.max_dev_examples:
        dev_examples = dev_examples[: config.max_dev_examples]
    if config.schema:
        schema = read_schema(config.schema)
        print("schema: " + schema.summary())
        predicates = schema.predicates
    else:
        predicates = predicates_of(train_examples)
    if not any(ex.triples for ex in train_examples):
        raise KerasbertError(f"{config.train}: no located triples in the training data; nothing to learn")
    unseen = sorted(set(predicates_of(dev_examples)) - set(predicates))
    if unseen:
        shown = ", ".join(unseen[:10]) + (f", ... ({len(unseen) - 10} more)" if len(unseen) > 10 else "")
        print(f"note: {len(unseen)} predicate(s) occur in dev but not in the predicate list; "
              f"they cannot be predicted and count as misses in dev scores: {shown}")

    training.start_run(config)
    checkpoint, tokenizer = training.checkpoint_and_tokenizer(config)
    thresholds = (config.threshold_start, config.threshold_end)
    with training.distribution_scope(config.strategy):
        model = TripleModel(load_encoder(checkpoint), len(predicates), dropout=config.dropout)
        extractor = Extractor(model, tokenizer, predicates, max_length=config.max_length, thresholds=thresholds)
        features, report = extractor.features(train_examples)
        print("train features: " + report.summary().replace("\n", "\n  "))
        batches = SubjectSampledBatches(features, len(predicates), config.batch_size, seed=config.seed,
                                        max_width=config.max_length)
        training.compile_for_training(model, len(batches), config, HEAD_PREFIX)

    dev_texts = [e.text for e in dev_examples]
    return training.fit_and_select(
        model, batches, config,
        dev_scores=lambda: score(dev_examples, extractor.predict(dev_texts, batch_size=config.batch_size),
                                 mode=config.eval_mode),
        save_pipeline=extractor.save,
        format_scores=lambda scores: format_scores(scores, max_predicates=20),
        callbacks=callbacks,
    )
