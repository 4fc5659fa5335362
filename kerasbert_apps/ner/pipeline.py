"""What the NER heads' pipelines share: :class:`NerPipeline` (the task's
names, warmup texts and result format) and :class:`NerFeatureReport` (the
counts of labelling entities on training rows). A head's pipeline
(:mod:`kerasbert_apps.ner.heads`) subclasses both."""

import dataclasses

import numpy as np

from kerasbert_apps.base.pipeline import Pipeline
from kerasbert_apps.base.report import FeatureReport

WARMUP_TEXTS = (
    "Alice Martin flew from Paris to New York for the United Nations summit.",
    "李白是唐朝诗人。",
    "",
)


@dataclasses.dataclass
class NerFeatureReport(FeatureReport):
    entities: int = 0
    misaligned_entities: int = 0
    entities_split_by_windows: int = 0
    entities_without_tokens: int = 0
    unknown_types: dict = dataclasses.field(default_factory=dict)

    LINES = (
        ("misaligned_entities", "  {n} entities start or end inside a WordPiece token (tagged on the tokens they overlap)"),
        ("entities_split_by_windows", "  {n} entities cross a window boundary (long texts; tagged in part)"),
        ("entities_without_tokens", "  {n} entities cover no token (only characters the tokenizer drops); skipped"),
        ("unknown_types", "  {n} entities of type {key!r}, not in the training labels; skipped"),
    )

    def headline(self):
        return f"{self.examples} examples -> {self.windows} sequences, {self.entities} entities"


def entity_tokens(entity, starts, ends, report):
    """The indices of the tokens (character ``starts`` / ``ends``) that
    ``entity`` covers, or None when it covers none; counted in ``report``
    (``entities_without_tokens``, ``misaligned_entities`` when its edges fall
    inside a token). What every NER head's training labels start from."""
    inside = np.nonzero((ends > entity.start) & (starts < entity.end))[0]
    if len(inside) == 0:
        report.entities_without_tokens += 1
        return None
    if starts[inside[0]] != entity.start or ends[inside[-1]] != entity.end:
        report.misaligned_entities += 1
    return inside


class NerPipeline(Pipeline):
    """A trained NER model of any head: the results are ``{"text",
    "entities": [{"start", "end", "type", "text", "score"}, ...]}``, from the
    outputs ``start``, ``end``, ``type`` and ``score`` of the serving
    signature."""

    kind = "NER model"
    task = "ner"
    head_prefix = "ner_head_"
    warmup_texts = WARMUP_TEXTS
    FeatureReport = NerFeatureReport

    @property
    def selection_measure(self):
        """What ``kerasbert ner select``'s P(best labelling) is for this
        model's head: the ``selection_measure`` its registration declares
        (:class:`kerasbert_apps.base.heads.Head`); "" when it declares none
        or is not registered. The head's ``selection_outputs``,
        ``selection_decode`` and ``selection_log_best`` compute it
        (:mod:`kerasbert_apps.ner.select`). A pipeline class that sets
        ``selection_measure`` itself (as heads did before their
        registrations declared it) keeps its own."""
        from kerasbert.errors import KerasbertError
        from kerasbert_apps.base.heads import get

        try:
            return get(self.task, self.head_name).selection_measure if self.head_name else ""
        except KerasbertError:
            return ""

    def string_outputs(self):
        """The type names of ``kind`` and the mentions (:mod:`kerasbert_apps.ner.decode`)."""
        from kerasbert_apps.ner.decode import ENTITY_SPANS
        from kerasbert_apps.ner.decode import entity_names

        return entity_names(self.types), ENTITY_SPANS

    def result(self, text, row):
        return {
            "text": text,
            "entities": [
                {"start": s, "end": e, "type": t, "text": text[s:e], "score": round(float(p), 4)}
                for s, e, t, p in zip(row["start"], row["end"], row["type"], row["score"])
            ],
        }

    @classmethod
    def training_labels(cls, train_examples, dev_examples, settings):
        """The entity types of the run (:func:`kerasbert_apps.ner.examples.entity_types`);
        a BIO head makes its tags of them."""
        from kerasbert_apps.ner.examples import entity_types

        return entity_types(train_examples, dev_examples, settings.train)
