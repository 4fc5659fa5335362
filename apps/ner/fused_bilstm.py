"""Moved to :mod:`kerasbert_apps.ner.heads.bio.fused_bilstm`
(one folder per head); this name is kept so that imports written before keep working."""

from kerasbert_apps.ner.heads.bio.fused_bilstm import *  # noqa: F401,F403
