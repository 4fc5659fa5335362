"""The sample corpora written for kerasbert (see README.md here): what the
demo and the notebooks train on.

``path(app, split)`` gives a split's file, wherever the package is installed.
"""

from importlib import resources
from pathlib import Path

FILES = {"ner": "{split}.jsonl", "triples": "{split}.json"}


def path(app, split):
    """The file of ``split`` (``train``, ``dev``, ``test``) of ``app``'s
    sample corpus (``"ner"`` or ``"triples"``)."""
    return Path(str(resources.files(__name__) / app / FILES[app].format(split=split)))
