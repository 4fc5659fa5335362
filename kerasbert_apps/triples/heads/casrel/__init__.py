"""The CasRel triple head (``--head casrel``, the default): subjects first,
then the objects of ONE subject at a time."""

import dataclasses

from kerasbert_apps.base.heads import Head
from kerasbert_apps.base.heads import register
from kerasbert_apps.triples.heads import auto_or_probability
from kerasbert_apps.triples.heads import check_thresholds
from kerasbert.training.settings import setting


@dataclasses.dataclass
class CasRelSettings:
    threshold_start: float | str = setting(0.5, "casrel head: a start pointer fires when its probability is above "
                                           "this; auto: tuned on dev at the end of training", type=auto_or_probability)
    threshold_end: float | str = setting(0.5, "casrel head: an end pointer fires when its probability is above this; "
                                         "auto: tuned on dev at the end of training", type=auto_or_probability)


HEAD = register(Head(
    name="casrel", task="triples", pipeline="kerasbert_apps.triples.heads.casrel.pipeline:Extractor",
    settings_file="extractor.json",
    help="finds subjects, then the objects of ONE subject at a time (one gold subject sampled per row and step in "
    "training)",
    settings=CasRelSettings, check=lambda settings: check_thresholds(settings, HEAD, low_open=False),
    options=(("start", "start pointer threshold"), ("end", "end pointer threshold")),
    # What its training needs (the study: bench/head_study.py, the triples_small_data records): its pointers
    # or links score far more non-triples than triples and recall keeps rising for about twice the default steps
    auto_steps=600))
