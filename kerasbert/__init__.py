"""kerasbert: NER and relation-triple extraction on BERT-family encoders, in Keras 3.

The public API. Importing ``kerasbert`` is light; Keras and TensorFlow load
when a model is first built.

* :func:`load_encoder`, :func:`load_tokenizer`, :func:`load_masked_lm`,
  :func:`save_encoder`, :func:`inspect_checkpoint` -- :mod:`kerasbert.checkpoints.loader`
* :class:`BertEncoder`, :class:`AlbertEncoder`, :class:`ElectraEncoder` -- :mod:`kerasbert.models.encoder`
* :class:`BertTokenizer` -- :mod:`kerasbert.tokenizers.tokenizer`
* :class:`EncoderConfig` -- :mod:`kerasbert.checkpoints.config`
* CRF: :func:`crf_log_likelihood`, :func:`crf_decode`, :class:`CRF` -- :mod:`kerasbert.layers.crf`
"""

import importlib

from kerasbert.checkpoints.config import EncoderConfig
from kerasbert.errors import CheckpointError
from kerasbert.errors import InputDataError
from kerasbert.errors import KerasbertError
from kerasbert.checkpoints.loader import inspect_checkpoint
from kerasbert.checkpoints.loader import load_encoder
from kerasbert.checkpoints.loader import load_masked_lm
from kerasbert.checkpoints.loader import load_tokenizer
from kerasbert.checkpoints.loader import open_checkpoint
from kerasbert.checkpoints.loader import save_encoder
from kerasbert.tokenizers.tokenizer import BertTokenizer
from kerasbert.tokenizers.tokenizer import TokenizedBatch

__version__ = "0.1.0"

# Names whose modules import Keras: loaded on first use.
_LAZY = {
    "BertEncoder": "kerasbert.models.encoder",
    "AlbertEncoder": "kerasbert.models.encoder",
    "ElectraEncoder": "kerasbert.models.encoder",
    "BertMaskedLM": "kerasbert.models.masked_lm",
    "fill_mask": "kerasbert.models.masked_lm",
    "CRF": "kerasbert.layers.crf",
    "crf_log_likelihood": "kerasbert.layers.crf",
    "crf_decode": "kerasbert.layers.crf",
    "crf_sequence_score": "kerasbert.layers.crf",
    "crf_log_norm": "kerasbert.layers.crf",
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
