"""Moved to :mod:`kerasbert_apps.ner.heads.bio.pipeline`
(one folder per head); this name is kept so that imports written before keep working."""

from kerasbert_apps.ner.heads.bio.pipeline import *  # noqa: F401,F403
