"""Training an NER tagger: its settings, declared once, and ``train()``.

:class:`NerTrainSettings` holds every setting with its default and help text;
a run is ``train(NerTrainSettings(checkpoint=..., train=..., dev=...,
output=...))`` or ``kerasbert ner train ...`` (the CLI only fills the
settings). ``--settings FILE`` reads a JSON or TOML file of the same keys;
command-line options override it. The filled-in settings are written to
``OUTPUT/settings.json``. The reader options (:class:`NerReadSettings`) are
shared with ``kerasbert ner evaluate``.

What ends up in ``OUTPUT`` (:meth:`kerasbert_apps.base.task.Task.train`):

* ``model/`` -- the best model on dev entity F1 (``model.keras``, ``vocab.txt``,
  ``tagger.json``, ``dev_scores.json``), replaced atomically when a later
  epoch is better;
* ``history.jsonl`` (+ ``history.png`` with matplotlib) -- loss and dev scores
  per epoch; ``metrics.json`` -- the best dev scores;
* ``logs/`` -- TensorBoard; ``backup/`` -- only until the command ends:
  what ``--resume`` continues from after an interruption;
* ``run.json`` -- the run's marker, written first: a run writes only into a
  new or empty folder or its own (:mod:`kerasbert.training.runs`).
"""

import dataclasses

from kerasbert_apps.base import heads
from kerasbert_apps.base.task import Task
from kerasbert_apps.ner.readers import FORMATS
from kerasbert_apps.ner.readers import OUTPUT_FORMATS
from kerasbert_apps.ner.tags import SCHEMES
from kerasbert.training.settings import DistillSettings
from kerasbert.training.settings import HEAD_LEARNING_RATE_HELP
from kerasbert.training.settings import TrainSettings
from kerasbert.training.settings import auto_or_float
from kerasbert.training.settings import setting

#: The scorers a head may name (:attr:`kerasbert_apps.base.heads.Head.scorer`),
#: printed with the scores: name -> ``(score module, score function, format function)``.
SCORERS = {
    "seqeval BIO": ("kerasbert_apps.ner.evaluate", "score", "format_scores"),
    "exact spans": ("kerasbert_apps.ner.span_scores", "span_scores", "format_span_scores"),
}


@dataclasses.dataclass
class NerReadSettings:
    """How NER data files are read (``train`` and ``evaluate``)."""

    format: str = setting("auto", "data format (auto: detected)", FORMATS)
    tag_column: int = setting(-1, "CoNLL tag column, from 0 (the token); negative counts from the end, -1 is the last")
    scheme: str = setting("auto", "tag scheme of CoNLL and parallel files (auto: detected)", SCHEMES)
    use_predictions: bool = setting(False, "Label Studio tasks with no annotation take their first prediction "
                                    "(pre-annotations); else they are read as unannotated")


@dataclasses.dataclass
class NerCalibrateSettings:
    """The score temperature, fitted at the end of ``train`` and ``distill``."""

    calibrate: bool = setting(True, "after training, fit the temperature T of the entity scores on dev, so that they "
                              "are better probabilities of being exactly right (the head's logits divided by T); no "
                              "entity changes")


@dataclasses.dataclass
class NerTrainSettings(NerCalibrateSettings, NerReadSettings, TrainSettings):
    train: str = setting("", "training data (CoNLL, JSONL/JSON, CLUENER, GENIA, char-per-line, .gz)")
    head_learning_rate: float | str = setting("auto", HEAD_LEARNING_RATE_HELP, type=auto_or_float)
    weight_decay: float = setting(0.01, "AdamW weight decay (not on biases, LayerNorm, CRF)")


#: The settings of ``ner train``: the fields above, ``head`` (the registered
#: heads) and the options the heads add (:func:`kerasbert_apps.base.heads.train_settings_class`).
NerTrainSettings = heads.train_settings_class("ner", NerTrainSettings, "tagging head")


@dataclasses.dataclass
class NerDistillSettings(NerCalibrateSettings, NerReadSettings, DistillSettings):
    train: str = setting("", "training data (CoNLL, JSONL/JSON, CLUENER, char-per-line, .gz): the gold labels, "
                         "and texts the teacher scores")
    head_learning_rate: float | str = setting("auto", HEAD_LEARNING_RATE_HELP, type=auto_or_float)


class NerTask(Task):
    name = "ner"
    help = "named-entity recognition: train, evaluate, predict, export, demo"
    description = "Named-entity recognition on a BERT encoder; --head picks the tagging head (kerasbert heads lists them)."
    trains = "an NER tagger"
    train_settings = NerTrainSettings
    read_settings = NerReadSettings
    distill_settings = NerDistillSettings
    output_formats = OUTPUT_FORMATS
    output_formats_help = (
        "jsonl (default): one JSON object per input line; label-studio: one JSON array of Label Studio tasks with "
        "the entities as predictions (import them as pre-annotations, correct, export, train with "
        "--use-predictions for tasks left unannotated); doccano: JSON lines of doccano's sequence-labelling import")

    def pipeline_class(self, settings=None):
        return self.head(settings).pipeline_class()

    @staticmethod
    def head(settings=None):
        """The registered head ``settings`` name (the default head without one)."""
        name = getattr(settings, "head", None)
        return heads.get("ner", name) if name else heads.heads("ner")[0]

    def load(self, model_dir, verbose=False, with_model=True):
        return heads.head_of("ner", model_dir).pipeline_class().load(model_dir, verbose=verbose, with_model=with_model)

    @staticmethod
    def data_format(path, settings):
        from kerasbert_apps.ner.readers import detect_format

        return detect_format(path) if settings.format == "auto" else settings.format

    def read(self, path, settings, what="data", keep_overlaps=None):
        """The examples of ``path``; nested and overlapping entities are kept
        for a head that keeps them (``keep_overlaps``, default: whether the
        head ``settings`` name does), else resolved (counted either way)."""
        from kerasbert_apps.ner.readers import read_ner_file

        fmt = self.data_format(path, settings)
        if fmt == "conll":
            options = {"tag_column": settings.tag_column, "scheme": settings.scheme}
        elif fmt == "parallel":
            options = {"scheme": settings.scheme}
        else:
            options = {"use_predictions": settings.use_predictions}
            if self.head(settings).keep_overlaps if keep_overlaps is None else keep_overlaps:
                options["keep_overlaps"] = True
        result = read_ner_file(path, format=fmt, **options)
        print(f"{what}: {path}\n  " + result.report.summary().replace("\n", "\n  "))
        return result.examples

    def read_for(self, head, path, settings, what="data"):
        """The examples of ``path`` as ``head`` reads them (nested and
        overlapping entities kept for a head that keeps them; BIO files
        cannot nest)."""
        keep = head.keep_overlaps and self.data_format(path, settings) not in ("conll", "parallel")
        return self.read(path, settings, f"{what} (nested and overlapping entities kept)" if keep else what,
                         keep_overlaps=keep)

    def evaluate(self, load_pipeline, path, settings, batch_size=32, progress=False):
        """:meth:`Task.evaluate`; for a head that keeps nested entities the
        file is read again with them kept, and each head is scored by its
        scorer (``settings`` of ``evaluate`` do not name the head)."""
        from kerasbert.progress import progress as progress_bar

        examples = self.read(path, settings, "data")
        pipeline = load_pipeline()
        head = heads.get("ner", pipeline.head_name)
        if head.keep_overlaps and self.data_format(path, settings) not in ("conll", "parallel"):
            examples = self.read_for(head, path, settings)
        with progress_bar(len(examples), "evaluate", show=progress):
            predictions = pipeline.predict([e.text for e in examples], batch_size=batch_size)
        return self.score(examples, predictions, settings, head=head)

    def unlabeled_example(self, text):
        from kerasbert_apps.ner.examples import Example

        return Example(text, [], source="unlabeled")

    def output_record(self, result, format):
        from kerasbert_apps.ner.readers import prediction_record

        return prediction_record(result, format)

    def score(self, examples, predictions, settings=None, spans=None, head=None):
        """Scores by the scorer of ``head`` (default: the head ``settings``
        name): seqeval's BIO scores, or exact (start, end, type) span scores
        (``spans`` True picks these whatever the head); ``"scorer"`` says which."""
        import importlib

        scorer = "exact spans" if spans else (head or self.head(settings)).scorer
        module, function, _ = SCORERS[scorer]
        return {"scorer": scorer, **getattr(importlib.import_module(module), function)(examples, predictions)}

    def format_scores(self, scores):
        import importlib

        scorer = scores.get("scorer") if scores.get("scorer") in SCORERS else "seqeval BIO"
        module, _, function = SCORERS[scorer]
        text = getattr(importlib.import_module(module), function)(scores)
        return text if scorer == "exact spans" else f"scorer: {scorer}\n" + text


NER = NerTask()


def train(settings, callbacks=()):
    """Train, select on dev entity F1, save the best model; returns the
    metrics written to ``OUTPUT/metrics.json``. ``callbacks`` are extra Keras
    callbacks (e.g. for a notebook)."""
    return NER.train(settings, callbacks=callbacks)


def distill(settings, callbacks=()):
    """Train a smaller student from a trained tagger (``kerasbert ner distill``;
    :meth:`kerasbert_apps.base.task.Task.distill`); returns the metrics."""
    return NER.distill(settings, callbacks=callbacks)
