"""Moved to :mod:`kerasbert_apps.ner.heads.global_pointer.pipeline`
(one folder per head); this name is kept so that imports written before keep working."""

from kerasbert_apps.ner.heads.global_pointer.pipeline import *  # noqa: F401,F403
