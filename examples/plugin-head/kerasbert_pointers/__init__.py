"""An NER head with a start and an end pointer per entity type (``--head pointers``).

Importing this module registers the head with kerasbert's head registry (the
``kerasbert.heads`` entry point in ``pyproject.toml`` names it). kerasbert
imports it whenever it lists the NER heads (``--help`` too), so it imports
no TensorFlow and no model code: the pipeline is named as a string and
imported on first use.
"""

import dataclasses

from kerasbert.errors import KerasbertError
from kerasbert.training.settings import setting
from kerasbert_apps.base.heads import Head
from kerasbert_apps.base.heads import register

NAME = "pointers"


@dataclasses.dataclass
class PointersSettings:
    """The options ``kerasbert ner train`` gets for this head: ONE namespace
    with the task's options and the other heads' (a name already taken is
    refused at registration), so they are named after the head."""

    pointers_size: int = setting(0, "units of a feed-forward layer between the encoder and the start/end pointers "
                                 "(0: none)")


def check(settings):
    """Called for every ``ner train`` run, whatever its head: check this
    head's options (and only when it is the run's head)."""
    if settings.head == NAME and settings.pointers_size < 0:
        raise KerasbertError(f"pointers_size must be 0 or more, got {settings.pointers_size}")


register(Head(
    name=NAME, task="ner", pipeline="kerasbert_pointers.pipeline:PointerTagger", settings_file="pointer_tagger.json",
    help="a start and an end pointer per type; an entity runs from a start to the nearest end of its type (nested "
    "entities of different types kept)",
    settings=PointersSettings, check=check, keep_overlaps=True, scorer="exact spans",
    # What ``kerasbert ner select``'s P(best labelling) is for its outputs (the pipeline's selection_log_best)
    selection_measure="the product over the tokens and types of max(p, 1 - p) of the start and end pointers"))
