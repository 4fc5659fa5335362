"""Moved to :mod:`kerasbert_apps.triples.heads.casrel.pipeline`
(one folder per head); this name is kept so that imports written before keep working."""

from kerasbert_apps.triples.heads.casrel.pipeline import *  # noqa: F401,F403
from kerasbert_apps.triples.pipeline import WARMUP_TEXTS  # noqa: F401
from kerasbert_apps.triples.pipeline import TriplesFeatureReport  # noqa: F401
