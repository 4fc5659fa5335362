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
* ``logs/`` -- TensorBoard; ``backup/`` -- only while training: what
  ``--resume`` continues from after an interruption.
"""

import dataclasses

from kerasbert_apps.base.task import Task
from kerasbert_apps.ner.readers import FORMATS
from kerasbert_apps.ner.readers import OUTPUT_FORMATS
from kerasbert_apps.ner.tags import SCHEMES
from kerasbert.errors import KerasbertError
from kerasbert.settings import DistillSettings
from kerasbert.settings import TrainSettings
from kerasbert.settings import setting

#: ``--head`` choices: two BIO token taggers and the span head (nested entities).
HEADS = ("crf", "softmax", "global-pointer")
#: What the scores of each head are computed with (printed with them).
SCORERS = {"bio": "seqeval BIO", "spans": "exact spans"}


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
                              "are better probabilities of being exactly right (CRF/softmax heads: emission scores "
                              "and transitions divided by T; GlobalPointer: sigmoid(logit / T)); no entity changes")


@dataclasses.dataclass
class NerTrainSettings(NerCalibrateSettings, NerReadSettings, TrainSettings):
    train: str = setting("", "training data (CoNLL, JSONL/JSON, CLUENER, GENIA, char-per-line, .gz)")
    head_learning_rate: float = setting(1e-3, "peak learning rate of the BiLSTM/Dense/CRF head")
    weight_decay: float = setting(0.01, "AdamW weight decay (not on biases, LayerNorm, CRF)")
    lstm: bool = setting(True, "use a BiLSTM between encoder and tag scores")
    lstm_units: int = setting(128, "BiLSTM units per direction")
    crf: bool = setting(True, "use a CRF (else softmax per token); --no-crf is --head softmax")
    constrained_decoding: bool = setting(True, "forbid invalid BIO transitions when decoding")
    head: str = setting("crf", "the tagging head: crf and softmax tag tokens BIO (an entity cannot lie inside "
                        "another; overlapping spans in the data are resolved and counted); global-pointer scores "
                        "every span per type (Efficient GlobalPointer: nested and overlapping entities kept in the "
                        "data and predicted; --lstm and --constrained-decoding do not apply)", HEADS)
    pointer_size: int = setting(64, "query/key size of the GlobalPointer head")
    def check(self):
        super().check()
        if self.head == "softmax":
            self.crf = False
        elif not self.crf:
            if self.head == "global-pointer":
                raise KerasbertError("--no-crf is the softmax head; it does not go with --head global-pointer")
            self.head = "softmax"
        if self.head == "global-pointer" and (self.pointer_size < 2 or self.pointer_size % 2):
            raise KerasbertError(f"pointer_size must be even and at least 2 (RoPE turns pairs), got {self.pointer_size}")


@dataclasses.dataclass
class NerDistillSettings(NerCalibrateSettings, NerReadSettings, DistillSettings):
    train: str = setting("", "training data (CoNLL, JSONL/JSON, CLUENER, char-per-line, .gz): the gold labels, "
                         "and texts the teacher scores")
    head_learning_rate: float = setting(1e-3, "peak learning rate of the BiLSTM/Dense/CRF head")


class NerTask(Task):
    name = "ner"
    help = "named-entity recognition: train, evaluate, predict, export, demo"
    description = "BERT -> BiLSTM -> CRF named-entity recognition."
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
        from kerasbert_apps.ner.span_tagger import SpanTagger
        from kerasbert_apps.ner.tagger import Tagger

        return SpanTagger if spans_head(settings) else Tagger

    def load(self, model_dir, verbose=False):
        from kerasbert_apps.ner.span_tagger import SpanTagger
        from kerasbert_apps.ner.span_tagger import is_span_model
        from kerasbert_apps.ner.tagger import Tagger

        return (SpanTagger if is_span_model(model_dir) else Tagger).load(model_dir, verbose=verbose)

    @staticmethod
    def data_format(path, settings):
        from kerasbert_apps.ner.readers import detect_format

        return detect_format(path) if settings.format == "auto" else settings.format

    def read(self, path, settings, what="data", keep_overlaps=None):
        """The examples of ``path``; nested and overlapping entities are kept
        for the GlobalPointer head (``keep_overlaps``, default: whether
        ``settings`` name that head), else resolved (counted either way)."""
        from kerasbert_apps.ner.readers import read_ner_file

        fmt = self.data_format(path, settings)
        if fmt == "conll":
            options = {"tag_column": settings.tag_column, "scheme": settings.scheme}
        elif fmt == "parallel":
            options = {"scheme": settings.scheme}
        else:
            options = {"use_predictions": settings.use_predictions}
            if spans_head(settings) if keep_overlaps is None else keep_overlaps:
                options["keep_overlaps"] = True
        result = read_ner_file(path, format=fmt, **options)
        print(f"{what}: {path}\n  " + result.report.summary().replace("\n", "\n  "))
        return result.examples

    def evaluate(self, load_pipeline, path, settings, batch_size=32):
        """:meth:`Task.evaluate`; for a GlobalPointer model the file is read
        again with nested and overlapping entities kept, and scored on exact
        spans (``settings`` of ``evaluate`` do not name the head)."""
        from kerasbert_apps.ner.span_tagger import SpanTagger

        examples = self.read(path, settings, "data")
        pipeline = load_pipeline()
        spans = isinstance(pipeline, SpanTagger)
        if spans and self.data_format(path, settings) not in ("conll", "parallel"):  # BIO files cannot nest
            examples = self.read(path, settings, "data (nested and overlapping entities kept)", keep_overlaps=True)
        predictions = pipeline.predict([e.text for e in examples], batch_size=batch_size)
        return self.score(examples, predictions, settings, spans=spans)

    def unlabeled_example(self, text):
        from kerasbert_apps.ner.examples import Example

        return Example(text, [], source="unlabeled")

    def output_record(self, result, format):
        from kerasbert_apps.ner.readers import prediction_record

        return prediction_record(result, format)

    def score(self, examples, predictions, settings=None, spans=None):
        """seqeval scores of the BIO heads, or exact (start, end, type)
        scores of the GlobalPointer head (``spans``, default: whether
        ``settings`` name it); ``"scorer"`` says which."""
        if spans_head(settings) if spans is None else spans:
            from kerasbert_apps.ner.span_scores import span_scores

            return {"scorer": SCORERS["spans"], **span_scores(examples, predictions)}
        from kerasbert_apps.ner.evaluate import score

        return {"scorer": SCORERS["bio"], **score(examples, predictions)}

    def format_scores(self, scores):
        from kerasbert_apps.ner.evaluate import format_scores
        from kerasbert_apps.ner.span_scores import format_span_scores

        if scores.get("scorer") == SCORERS["spans"]:
            return format_span_scores(scores)
        return f"scorer: {SCORERS['bio']}\n" + format_scores(scores)


def spans_head(settings):
    """Whether ``settings`` (train settings, or None) name the GlobalPointer head."""
    return getattr(settings, "head", None) == "global-pointer"


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
