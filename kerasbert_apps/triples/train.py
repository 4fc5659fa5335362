"""Training a triple extractor: its settings, declared once, and ``train()``.

:class:`TriplesTrainSettings` holds every setting with its default and help
text; a run is ``train(TriplesTrainSettings(checkpoint=..., train=...,
dev=..., output=...))`` or ``kerasbert triples train ...`` (the CLI only
fills the settings). ``--settings FILE`` reads a JSON or TOML file of the
same keys; command-line options override it. The filled-in settings are
written to ``OUTPUT/settings.json``. :class:`TriplesReadSettings` (format,
match mode) is shared with ``kerasbert triples evaluate``.

The machinery is every app's (:meth:`kerasbert_apps.base.task.Task.train`,
:mod:`kerasbert.training.optimizer`): GroupedAdamW with a head learning rate for
``triples_head_*``, warm-up + linear decay, length-bucketed batches (here
with one random gold subject per row, redrawn every epoch:
:class:`kerasbert_apps.triples.heads.casrel.batches.SubjectSampledBatches`, for the CasRel head;
every subject at once for the GPLinker head, :mod:`kerasbert_apps.triples.heads.gplinker.pipeline`), dev evaluation after
each epoch with early stopping and atomic best-model saves, ``--resume``
through ``BackupAndRestore``, TensorBoard, precision policies and
MirroredStrategy.

What ends up in ``OUTPUT``:

* ``model/`` -- the best model on dev triple F1 (``model.keras``,
  ``vocab.txt``, ``extractor.json`` -- ``gplinker.json`` with ``--head
  gplinker`` -- and ``dev_scores.json``), replaced atomically when a later
  epoch is better;
* ``history.jsonl`` (+ ``history.png`` with matplotlib) -- loss and dev scores
  per epoch; ``metrics.json`` -- the best dev scores;
* ``logs/`` -- TensorBoard; ``backup/`` -- only while training.
"""

import argparse
import dataclasses
from typing import ClassVar

from kerasbert_apps.base import heads
from kerasbert_apps.base.task import Task
from kerasbert_apps.triples.data import FORMATS as DATA_FORMATS
from kerasbert.errors import KerasbertError
from kerasbert.training.settings import HEAD_LEARNING_RATE_HELP
from kerasbert.training.settings import TrainSettings
from kerasbert.training.settings import auto_or_float
from kerasbert.training.settings import setting

EVAL_MODES = ("exact", "partial")
FORMATS = ("auto",) + DATA_FORMATS


@dataclasses.dataclass
class TriplesReadSettings:
    """How triple files are read and matched (``train`` and ``evaluate``)."""

    format: str = setting("auto", "data format: auto, casrel, duie", FORMATS)
    eval_mode: str = setting("exact", "match mode of the headline F1 (and of model selection in train): exact "
                             "(full entity strings) or partial (last words); both are always reported", EVAL_MODES)


@dataclasses.dataclass
class TriplesTrainSettings(TriplesReadSettings, TrainSettings):
    auto_batch_size: ClassVar[int] = 16
    auto_min_epochs: ClassVar[int] = 10

    train: str = setting("", "training data (CasRel triple_list or DuIE/CMeIE spo_list; JSON array or JSON lines; .gz)")
    head_learning_rate: float | str = setting("auto", HEAD_LEARNING_RATE_HELP, type=auto_or_float)
    seed: int = setting(42, "random seed (shuffling, subject sampling, initialisation)")
    schema: str = setting("", "predicate list: all_50_schemas / 53_schemas.json lines or a rel2id.json "
                          "(default: the training data's predicates)")


#: The settings of ``triples train``: the fields above, ``head`` (the
#: registered heads) and the options the heads add
#: (:func:`kerasbert_apps.base.heads.train_settings_class`).
TriplesTrainSettings = heads.train_settings_class("triples", TriplesTrainSettings, "triple head")


class TriplesTask(Task):
    name = "triples"
    help = "relation-triple extraction: train, evaluate, predict, export"
    description = "(subject, predicate, object) extraction on a BERT encoder; --head picks the triple head."
    trains = "a triple extractor"
    train_settings = TriplesTrainSettings
    read_settings = TriplesReadSettings

    def pipeline_class(self, settings=None):
        name = getattr(settings, "head", None)
        return (heads.get("triples", name) if name else heads.heads("triples")[0]).pipeline_class()

    def load(self, model_dir, verbose=False, with_model=True):
        return heads.head_of("triples", model_dir).pipeline_class().load(model_dir, verbose=verbose, with_model=with_model)

    def read(self, path, settings, what="data"):
        from kerasbert_apps.triples.data import read_triples_file

        result = read_triples_file(path, format=settings.format)
        print(f"{what}: {path}\n  " + result.report.summary().replace("\n", "\n  "))
        return result.examples

    def score(self, examples, predictions, settings):
        from kerasbert_apps.triples.evaluate import score

        return score(examples, predictions, mode=settings.eval_mode)

    def format_scores(self, scores):
        from kerasbert_apps.triples.evaluate import format_scores

        return format_scores(scores, max_predicates=20)

    def add_options(self, parser, command):
        if command == "evaluate":  # the pre-settings name of --eval-mode, kept working
            parser.add_argument("--mode", dest="eval_mode", choices=EVAL_MODES, help=argparse.SUPPRESS)
        baked = "; baked into the graph" if command == "export" else ""
        for head in heads.heads("triples"):
            for option, what in head.options:
                parser.add_argument(f"--threshold-{option}", type=float,
                                    help=f"{what} ({head.name} head) (default: the model's){baked}")

    def configure(self, extractor, args):
        owner = {o: head.name for head in heads.heads("triples") for o, _ in head.options}
        given = {o: getattr(args, f"threshold_{o}") for o in owner if getattr(args, f"threshold_{o}") is not None}
        own = extractor.threshold_options
        foreign = [o for o in given if o not in own]
        if foreign:
            raise KerasbertError(f"--threshold-{'/--threshold-'.join(foreign)} belong to the {owner[foreign[0]]} head; "
                                 f"this model has the {extractor.head_name} head, whose thresholds are "
                                 f"--threshold-{own[0]}/--threshold-{own[1]}")
        return extractor.with_threshold_options(given) if given else extractor


TRIPLES = TriplesTask()


def train(settings, callbacks=()):
    """Train, select on dev triple F1, save the best model; returns the
    metrics written to ``OUTPUT/metrics.json``. ``callbacks`` are extra Keras
    callbacks (e.g. for a notebook)."""
    return TRIPLES.train(settings, callbacks=callbacks)
