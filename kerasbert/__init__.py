"""kerasbert: NER and relation-triple extraction on BERT-family encoders, in Keras 3.

The public API. Importing ``kerasbert`` is light; Keras and TensorFlow load
when a model is first built.

* :func:`load_encoder`, :func:`load_tokenizer`, :func:`load_masked_lm`,
  :func:`save_encoder`, :func:`inspect_checkpoint` -- :mod:`kerasbert.loader`
* :class:`BertEncoder`, :class:`AlbertEncoder`, :class:`ElectraEncoder` -- :mod:`kerasbert.encoder`
* :class:`BertTokenizer` -- :mod:`kerasbert.tokenizer`
* :class:`EncoderConfig` -- :mod:`kerasbert.config`
* CRF: :func:`crf_log_likelihood`, :func:`crf_decode`, :class:`CRF` -- :mod:`kerasbert.crf`
"""

import importlib

from kerasbert.config import EncoderConfig
from kerasbert.errors import CheckpointError
from kerasbert.errors import InputDataError
from kerasbert.errors import KerasbertError
from kerasbert.loader import inspect_checkpoint
from kerasbert.loader import load_encoder
from kerasbert.loader import load_masked_lm
from kerasbert.loader import load_tokenizer
from kerasbert.loader import open_checkpoint
from kerasbert.loader import save_encoder
from kerasbert.tokenizer import BertTokenizer
from kerasbert.tokenizer import TokenizedBatch

__version__ = "0.1.0"

# Names whose modules import Keras: loaded on first use.
_LAZY = {
    "BertEncoder": "kerasbert.encoder",
    "AlbertEncoder": "kerasbert.encoder",
    "ElectraEncoder": "kerasbert.encoder",
    "BertMaskedLM": "kerasbert.masked_lm",
    "fill_mask": "kerasbert.masked_lm",
    "CRF": "kerasbert.crf",
    "crf_log_likelihood": "kerasbert.crf",
    "crf_decode": "kerasbert.crf",
    "crf_sequence_score": "kerasbert.crf",
    "crf_log_norm": "kerasbert.crf",
}


def __getattr__(name):
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'kerasbert' has no attribute {name!r}")


__all__ = [
    "AlbertEncoder",
    "BertEncoder",
    "BertMaskedLM",
    "BertTokenizer",
    "CRF",
    "CheckpointError",
    "ElectraEncoder",
    "EncoderConfig",
    "InputDataError",
    "KerasbertError",
    "TokenizedBatch",
    "crf_decode",
    "crf_log_likelihood",
    "crf_log_norm",
    "crf_sequence_score",
    "fill_mask",
    "inspect_checkpoint",
    "load_encoder",
    "load_masked_lm",
    "load_tokenizer",
    "open_checkpoint",
    "save_encoder",
]
