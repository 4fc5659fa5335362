"""The biaffine NER head (``--head biaffine``): every span classified by a
softmax over the entity types and "no entity" (Yu, Bohnet and Poesio 2020,
"Named Entity Recognition as Dependency Parsing"); nested entities kept in
the data and predicted, crossing ones resolved in favour of the more probable.

The folder: :mod:`.layer` (the biaffine scorer and its loss, ``keras.ops``),
:mod:`.model` (the Keras model), :mod:`.decode` (TensorFlow decoding, the
serving graph's), :mod:`.pipeline` (the
:class:`~kerasbert_apps.base.pipeline.Pipeline`), :mod:`.selection` (``ner
select``'s measure). Registering it here is all the rest of kerasbert needs
(:mod:`kerasbert_apps.base.heads`).
"""

import dataclasses

from kerasbert_apps.base.heads import Head
from kerasbert_apps.base.heads import register
from kerasbert_apps.ner.heads import SpanThresholdSettings
from kerasbert_apps.ner.heads import check_span_threshold
from kerasbert.errors import KerasbertError
from kerasbert.training.settings import setting

NAME = "biaffine"


@dataclasses.dataclass
class BiaffineSettings(SpanThresholdSettings):
    biaffine_size: int = setting(150, "units of the biaffine head's start and end feed-forward networks")
    biaffine_lstm: int = setting(128, "units per direction of a BiLSTM between the encoder and the biaffine head's "
                                 "feed-forward networks, as the paper (0: none)")
    biaffine_max_span: int = setting(0, "the biaffine head never predicts spans of more tokens (0: no limit)")
    biaffine_entity_weight: float = setting(10.0, "the weight in the biaffine head's loss of a span that is an entity "
                                            "(a span that is none weighs 1; most spans are none)")
    biaffine_decoding: str = setting("auto", "nested: an entity may lie inside another; flat: of overlapping "
                                     "candidates the more probable is kept; auto: nested where the training data has "
                                     "an entity inside another, else flat", ("auto", "nested", "flat"))


def check(settings):
    check_span_threshold(settings)
    if settings.head != NAME:
        return
    if settings.biaffine_size < 1:
        raise KerasbertError(f"biaffine_size must be at least 1, got {settings.biaffine_size}")
    if not settings.biaffine_entity_weight > 0:
        raise KerasbertError(f"biaffine_entity_weight must be above 0, got {settings.biaffine_entity_weight}")
    if settings.biaffine_lstm < 0 or settings.biaffine_max_span < 0:
        raise KerasbertError(f"biaffine_lstm and biaffine_max_span must be 0 or more, got "
                             f"{settings.biaffine_lstm} and {settings.biaffine_max_span}")


register(Head(
    name=NAME, task="ner", pipeline="kerasbert_apps.ner.heads.biaffine.pipeline:BiaffineTagger",
    settings_file="biaffine_tagger.json",
    help="classifies every span by a softmax over the types and no entity (biaffine, Yu et al. 2020: nested "
    "entities kept in the data and predicted, crossing ones resolved by probability; --lstm and "
    "--constrained-decoding do not apply)",
    settings=BiaffineSettings, check=check, keep_overlaps=True, scorer="exact spans",
    # ``ner select``'s measure: :mod:`kerasbert_apps.ner.heads.biaffine.selection`
    selection_measure="the product over the spans of each span's largest class probability (types and no entity)",
    # What its training needs (the study: bench/head_study.py): its span classifier starts at "no entity" (the
    # prior) and learns faster at a higher rate than the BIO heads' (the encoder keeps --learning-rate); on large
    # data it learns over more epochs than the BIO heads' three (bench/ner_heads.py: its dev F1 by epoch on CoNLL-2003)
    head_learning_rate=3e-3, auto_steps=600, auto_min_epochs=6))
