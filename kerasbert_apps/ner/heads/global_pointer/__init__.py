"""The GlobalPointer NER head (``--head global-pointer``): every span scored
per type (Efficient GlobalPointer), nested and overlapping entities kept in
the data; nested entities predicted where the training data has them
(``--global-pointer-decoding``)."""

import dataclasses

from kerasbert_apps.base.heads import Head
from kerasbert_apps.base.heads import register
from kerasbert_apps.ner.heads import SpanThresholdSettings
from kerasbert_apps.ner.heads import check_span_threshold
from kerasbert.errors import KerasbertError
from kerasbert.training.settings import setting

NAME = "global-pointer"


@dataclasses.dataclass
class GlobalPointerSettings(SpanThresholdSettings):
    pointer_size: int = setting(64, "query/key size of the GlobalPointer head")
    global_pointer_entity_weight: float = setting(1.0, "the weight in the GlobalPointer head's loss of the entity "
                                                  "spans' term (the other term pushes every other span below 0)")
    global_pointer_decoding: str = setting(
        "auto", "nested: one type per span (its best) and an entity may lie inside another, of crossing ones the "
        "more probable is kept; flat: of overlapping spans the more probable is kept; all: every (span, type) above "
        "the threshold, spans may cross and carry several types; auto: nested where the training data has an "
        "entity inside another, else flat", ("auto", "nested", "flat", "all"))


def check(settings):
    check_span_threshold(settings)
    if settings.head == NAME and (settings.pointer_size < 2 or settings.pointer_size % 2):
        raise KerasbertError(f"pointer_size must be even and at least 2 (RoPE turns pairs), got {settings.pointer_size}")
    if settings.head == NAME and not settings.global_pointer_entity_weight > 0:
        raise KerasbertError(f"global_pointer_entity_weight must be above 0, got {settings.global_pointer_entity_weight}")


register(Head(
    name=NAME, task="ner", pipeline="kerasbert_apps.ner.heads.global_pointer.pipeline:SpanTagger", settings_file="span_tagger.json",
    help="scores every span per type (Efficient GlobalPointer: nested and overlapping entities kept in the data, "
    "nested ones predicted; --lstm and --constrained-decoding do not apply)",
    settings=GlobalPointerSettings, check=check, keep_overlaps=True, scorer="exact spans",
    # ``ner select``'s measure: :mod:`kerasbert_apps.ner.heads.global_pointer.selection`
    selection_measure="the product over the spans and types of max(p, 1 - p), p = sigmoid(logit / T)",
    # What its training needs (the study: bench/head_study.py): its per-(span, type) scores start far from the
    # entities and learn faster at a higher rate than the BIO heads' (the encoder keeps --learning-rate)
    head_learning_rate=3e-3, auto_steps=600))
