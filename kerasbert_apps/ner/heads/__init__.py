"""The NER heads, one folder each; importing a folder registers its head(s)
(:mod:`kerasbert_apps.base.heads`). A new head is a new folder here.

:class:`SpanThresholdSettings` is the option the span heads share (each
head's settings dataclass subclasses it): the decision threshold, fitted on
dev at the end of training unless given."""

import dataclasses
import math

from kerasbert.errors import KerasbertError
from kerasbert.training.settings import auto_or
from kerasbert.training.settings import setting

#: The ``--head`` choices' order of the kit's NER head folders (the first
#: folder's first head, ``crf``, is the default); other folders follow by name.
ORDER = ("bio", "global_pointer", "biaffine")


#: A settings ``type``: ``"auto"`` or any finite number.
auto_or_number = auto_or(float, "a number", math.isfinite)


@dataclasses.dataclass
class SpanThresholdSettings:
    span_threshold: float | str = setting(
        "auto", "span heads: a span is an entity where its margin is above this (global-pointer: the span's "
        "logit; biaffine: its best type's logit minus the no-entity logit); auto: fitted on dev at the end of "
        "training for the best entity F1 (lower finds more entities, higher fewer)", type=auto_or_number)


def check_span_threshold(settings):
    """``--span-threshold`` is an option of the heads whose settings
    subclass :class:`SpanThresholdSettings` only (each such head's
    ``check`` calls this)."""
    from kerasbert_apps.base import heads

    takers = [h.name for h in heads.heads("ner") if h.settings and issubclass(h.settings, SpanThresholdSettings)]
    if settings.span_threshold != "auto" and settings.head not in takers:
        raise KerasbertError(f"--span-threshold is an option of the span heads ({', '.join(takers)}); the "
                             f"{settings.head} head does not take it")
