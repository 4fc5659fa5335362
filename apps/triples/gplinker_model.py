"""Moved to :mod:`kerasbert_apps.triples.heads.gplinker.model`
(one folder per head); this name is kept so that imports written before keep working."""

from kerasbert_apps.triples.heads.gplinker.model import *  # noqa: F401,F403
