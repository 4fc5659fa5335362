"""The GPLinker triple head (``--head gplinker``): every subject and object
span and every head-to-head / tail-to-tail link per predicate at once."""

import dataclasses

from kerasbert_apps.base.heads import Head
from kerasbert_apps.base.heads import register
from kerasbert_apps.triples.heads import auto_or_probability
from kerasbert_apps.triples.heads import check_thresholds
from kerasbert.errors import KerasbertError
from kerasbert.training.settings import setting


@dataclasses.dataclass
class GPLinkerSettings:
    threshold_entity: float | str = setting("auto", "gplinker head: a subject or object span holds when its "
                                            "probability is above this; auto: tuned on dev at the end of training",
                                            type=auto_or_probability)
    threshold_link: float | str = setting("auto", "gplinker head: a head-to-head or tail-to-tail link holds when its "
                                          "probability is above this; auto: tuned on dev at the end of training",
                                          type=auto_or_probability)
    pointer_size: int = setting(64, "query/key size of each GlobalPointer of the gplinker head")


def check(settings):
    check_thresholds(settings, HEAD, low_open=True)
    if settings.head == HEAD.name and (settings.pointer_size < 2 or settings.pointer_size % 2):
        raise KerasbertError(f"pointer_size must be even and at least 2 (RoPE turns pairs), got {settings.pointer_size}")


HEAD = register(Head(
    name="gplinker", task="triples", pipeline="kerasbert_apps.triples.heads.gplinker.pipeline:GPLinkerExtractor",
    settings_file="gplinker.json",
    help="scores every subject and object span and every head-to-head / tail-to-tail link per predicate at once "
    "(GlobalPointers: nested and overlapping entities)",
    settings=GPLinkerSettings, check=check,
    options=(("entity", "span threshold, a probability"), ("link", "head/tail link threshold, a probability")),
    # What its training needs (the study: bench/head_study.py, the triples_small_data records): its pointers
    # or links score far more non-triples than triples and recall keeps rising for about twice the default steps
    auto_steps=600))
