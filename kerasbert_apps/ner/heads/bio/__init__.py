"""The BIO token taggers: ``--head crf`` (BERT -> BiLSTM -> CRF, the default)
and ``--head softmax`` (a softmax per token). One pipeline
(:class:`~kerasbert_apps.ner.heads.bio.pipeline.Tagger`) and one settings file
(``tagger.json``) for both; the model has a CRF layer or not. The folder:
:mod:`.model` (the Keras model), :mod:`.fused_bilstm` (its BiLSTM as one
kernel in serving graphs), :mod:`.decode` (BIO decoding, TensorFlow),
:mod:`.pipeline`, :mod:`.selection` (``ner select``'s measures)."""

import dataclasses

from kerasbert_apps.base.heads import Head
from kerasbert_apps.base.heads import register
from kerasbert.errors import KerasbertError
from kerasbert.training.settings import setting

CRF, SOFTMAX = "crf", "softmax"


@dataclasses.dataclass
class BioSettings:
    """The training options of the BIO heads."""

    lstm: bool = setting(True, "use a BiLSTM between encoder and tag scores")
    lstm_units: int = setting(128, "BiLSTM units per direction")
    crf: bool = setting(True, "use a CRF (else softmax per token); --no-crf is --head softmax")
    constrained_decoding: bool = setting(True, "forbid invalid BIO transitions when decoding")


def check(settings):
    """``--head softmax`` is ``--no-crf``, and ``--no-crf`` is ``--head softmax``."""
    if settings.head == SOFTMAX:
        settings.crf = False
    elif not settings.crf:
        if settings.head != CRF:
            raise KerasbertError(f"--no-crf is the softmax head; it does not go with --head {settings.head}")
        settings.head = SOFTMAX


_COMMON = dict(task="ner", pipeline="kerasbert_apps.ner.heads.bio.pipeline:Tagger", settings_file="tagger.json",
               scorer="seqeval BIO")
# ``ner select``'s measures: :mod:`kerasbert_apps.ner.heads.bio.selection`.
register(Head(name=CRF, help="tags tokens BIO with a CRF (an entity cannot lie inside another; overlapping spans "
              "in the data are resolved and counted)", settings=BioSettings, check=check,
              selection_measure="the CRF's probability of its Viterbi path", **_COMMON))
register(Head(name=SOFTMAX, help="tags tokens BIO with a softmax per token (same data rules as crf)",
              selection_measure="the product of each token's largest tag probability", **_COMMON))
