"""BERT WordPiece tokenization with character offsets into the original text.

Built on Hugging Face ``tokenizers`` (Rust, batched) configured to follow the
official BERT tokenizer (google-research/bert ``tokenization.py``):

* control characters dropped, whitespace normalised (``clean_text``);
* CJK characters split one per token;
* punctuation split off;
* lower-casing and accent stripping for uncased models;
* WordPiece with ``[UNK]`` for words longer than 100 characters;
* ``"[CLS]"``, ``"[SEP]"``, ``"[MASK]"`` typed in the text are plain text
  (``[``, ``cl``, ``##s``, ``]``): the special tokens are added by position,
  never matched in the input.

Calling the tokenizer on a list of strings returns a :class:`TokenizedBatch` of
int32 numpy arrays: ``token_ids``, ``segment_ids``, ``padding_mask`` and
``offsets`` ([batch, len, 2]: start/end of each token as Python ``str``
indices into the ORIGINAL string, end exclusive; ``(0, 0)`` for special tokens
and padding). Truncation is reported in ``truncated`` and logged, never silent.
"""

import dataclasses
import logging
from pathlib import Path

import numpy as np
from tokenizers import Tokenizer
from tokenizers import models
from tokenizers import normalizers
from tokenizers import pre_tokenizers
from tokenizers import processors

from kerasbert.errors import KerasbertError
from kerasbert.tokenizers.vocab import HF_MAX_CHARS_PER_WORD
from kerasbert.tokenizers.vocab import OFFICIAL_MAX_CHARS_PER_WORD
from kerasbert.tokenizers.vocab import read_vocab

logger = logging.getLogger("kerasbert")

SPECIAL_TOKENS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")


@dataclasses.dataclass
class TokenizedBatch:
    """The tokenizer's output; every array is numpy int32 or bool.

    Attributes:
        token_ids: [batch, len] WordPiece ids, ``[CLS]`` first and ``[SEP]``
            after each text, 0 for padding (an encoder input).
        segment_ids: [batch, len] 0 for the first text, 1 for the second of a
            pair (an encoder input).
        padding_mask: [batch, len] True for tokens, False for padding (an
            encoder input).
        offsets: [batch, len, 2] character start/end in the original string
            (of the first or second text of a pair, as ``segment_ids`` says;
            of the word, for pre-tokenized input).
        word_ids: [batch, len] index of the word each token came from for
            pre-tokenized input, -1 for special tokens and padding; None for
            raw text.
        truncated: [batch] bool, True where tokens were cut to ``max_length``.
    """

    token_ids: np.ndarray
    segment_ids: np.ndarray
    padding_mask: np.ndarray
    offsets: np.ndarray
    truncated: np.ndarray
    word_ids: np.ndarray = None

    @property
    def inputs(self):
        """The encoder's input dict."""
        return {
            "token_ids": self.token_ids,
            "segment_ids": self.segment_ids,
            "padding_mask": self.padding_mask,
        }

    def __getitem__(self, key):
        return getattr(self, key)

    def __len__(self):
        return len(self.token_ids)


class BertTokenizer:
    """Official-BERT WordPiece tokenizer with offsets.

    Args:
        vocab: list of tokens (id = position) or a path to ``vocab.txt``.
        lowercase: lower-case (and strip accents) as uncased models do.
        strip_accents: strip accents; None follows ``lowercase`` (as BERT does).
        max_length: default maximum number of tokens, special tokens included.
        max_chars_per_word: longer words become ``[UNK]``.
            :func:`~kerasbert.checkpoints.loader.load_tokenizer` follows the checkpoint's
            own tokenizer (:func:`max_chars_per_word_of`): 200 for Google's
            layout, the Hugging Face folder's setting (100 by default).
    """

    def __init__(self, vocab, lowercase=True, strip_accents=None, max_length=512, max_chars_per_word=100):
        if isinstance(vocab, (str, Path)):
            self.vocab_path = Path(vocab)
            vocab = read_vocab(vocab)
        else:
            self.vocab_path = None
        self.vocab = list(vocab)
        self.lowercase = bool(lowercase)
        self.strip_accents = strip_accents
        self.max_length = int(max_length)
        self.max_chars_per_word = int(max_chars_per_word)
        self._ids = {token: i for i, token in enumerate(self.vocab)}
        missing = [t for t in ("[UNK]", "[CLS]", "[SEP]", "[PAD]") if t not in self._ids]
        if missing:
            where = self.vocab_path or "the vocabulary"
            raise KerasbertError(f"{where}: no {', '.join(missing)} token(s); not a BERT vocabulary")
        self.unk_id = self._ids["[UNK]"]
        self.cls_id = self._ids["[CLS]"]
        self.sep_id = self._ids["[SEP]"]
        self.pad_id = self._ids["[PAD]"]
        self.mask_id = self._ids.get("[MASK]")

        tok = Tokenizer(
            models.WordPiece(self._ids, unk_token="[UNK]", max_input_chars_per_word=self.max_chars_per_word)
        )
        tok.normalizer = normalizers.BertNormalizer(
            clean_text=True,
            handle_chinese_chars=True,
            strip_accents=strip_accents,
            lowercase=self.lowercase,
        )
        tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
        tok.post_processor = processors.TemplateProcessing(
            single="[CLS] $A [SEP]",
            pair="[CLS] $A [SEP] $B:1 [SEP]:1",
            special_tokens=[("[CLS]", self.cls_id), ("[SEP]", self.sep_id)],
        )
        self._tokenizer = tok

    # --- construction ----------------------------------------------------------
    @classmethod
    def from_checkpoint(cls, folder, lowercase=None, **kwargs):
        """The tokenizer of a checkpoint folder (see :func:`load_tokenizer`)."""
        vocab = read_vocab(folder.vocab_path)
        if lowercase is None:
            lowercase = guess_lowercase(folder.directory, vocab)
        kwargs.setdefault("max_chars_per_word", max_chars_per_word_of(folder))
        return cls(vocab, lowercase=lowercase, **kwargs)

    def get_config(self):
        """Settings to rebuild this tokenizer with the same vocabulary."""
        return {
            "lowercase": self.lowercase,
            "strip_accents": self.strip_accents,
            "max_length": self.max_length,
            "max_chars_per_word": self.max_chars_per_word,
        }

    # --- vocabulary ------------------------------------------------------------
    @property
    def vocabulary_size(self):
        return len(self.vocab)

    def token_to_id(self, token):
        return self._ids.get(token, self.unk_id)

    def id_to_token(self, token_id):
        return self.vocab[token_id]

    # --- single texts ----------------------------------------------------------
    def normalize(self, text):
        """The text as the tokenizer sees it before splitting (lower-cased,
        accents stripped, control characters dropped, CJK spaced)."""
        return self._tokenizer.normalizer.normalize_str(text)

    def tokenize(self, text):
        """WordPiece tokens of ``text``, without special tokens."""
        return self._tokenizer.encode(text, add_special_tokens=False).tokens

    def encode_pieces(self, text):
        """(token ids, offsets) of one ``text`` without special tokens (see :meth:`pieces`)."""
        return self.pieces([text])[0]

    def pieces(self, texts):
        """Per text, whole (never cut) and without special tokens: ``(token_ids
        int32 [n], offsets int32 [n, 2])``. Unpadded, so one long document
        costs memory for itself only; the apps cut these into windows."""
        encodings = self._tokenizer.encode_batch(list(texts), add_special_tokens=False)
        return [(np.asarray(e.ids, np.int32), np.asarray(e.offsets, np.int32).reshape(-1, 2)) for e in encodings]

    # --- batches -------------------------------------------------------------------
    def __call__(self, texts, pairs=None, max_length=None, padding="longest", is_split_into_words=False):
        """Tokenize a batch.

        Args:
            texts: list of strings, or of word lists when ``is_split_into_words``.
            pairs: optional second texts (segment id 1), same length as ``texts``.
            max_length: cut longer inputs (longest text of a pair first);
                defaults to ``self.max_length``. Cut inputs are flagged in
                ``truncated`` and counted in a log warning.
            padding: ``"longest"`` (pad to the longest in the batch) or
                ``"max_length"``.
            is_split_into_words: ``texts`` are lists of words (CoNLL columns);
                ``word_ids`` then maps tokens to words and ``offsets`` are
                within each word.
        """
        if isinstance(texts, str) or (is_split_into_words and texts and isinstance(texts[0], str)):
            raise TypeError("pass a list of texts (a batch), not a single text")
        max_length = int(max_length or self.max_length)
        if max_length < 3:
            raise ValueError(f"max_length must be at least 3, got {max_length}")
        if pairs is not None and len(pairs) != len(texts):
            raise ValueError(f"{len(texts)} texts but {len(pairs)} pairs")
        batch = list(texts) if pairs is None else list(zip(texts, pairs))
        self._tokenizer.enable_truncation(max_length, strategy="longest_first")
        try:
            encodings = self._tokenizer.encode_batch(batch, is_pretokenized=is_split_into_words)
        finally:
            self._tokenizer.no_truncation()  # tokenize() and pieces() never cut
        lengths = [len(e.ids) for e in encodings]
        width = max_length if padding == "max_length" else max(lengths, default=0)
        n = len(encodings)
        token_ids = np.full((n, width), self.pad_id, dtype=np.int32)
        segment_ids = np.zeros((n, width), dtype=np.int32)
        padding_mask = np.zeros((n, width), dtype=np.int32)
        offsets = np.zeros((n, width, 2), dtype=np.int32)
        word_ids = np.full((n, width), -1, dtype=np.int32) if is_split_into_words else None
        truncated = np.zeros((n,), dtype=bool)
        # Special tokens added by the template already have offsets (0, 0), and a
        # single text has segment ids 0: neither needs reading back.
        for i, (e, length) in enumerate(zip(encodings, lengths)):
            token_ids[i, :length] = e.ids
            if pairs is not None:
                segment_ids[i, :length] = e.type_ids
            padding_mask[i, :length] = 1
            if length:
                offsets[i, :length] = e.offsets
            if word_ids is not None:
                word_ids[i, :length] = [-1 if w is None else w for w in e.word_ids]
            truncated[i] = bool(e.overflowing)
        if truncated.any():
            logger.warning(
                "kerasbert: %d of %d inputs were longer than %d tokens and were truncated",
                int(truncated.sum()), n, max_length,
            )
        return TokenizedBatch(token_ids, segment_ids, padding_mask, offsets, truncated, word_ids)


def max_chars_per_word_of(folder):
    """The longest word the checkpoint's own tokenizer splits into WordPieces
    (longer ones are ``[UNK]``): 200 for Google's official layout (the
    original ``tokenization.py``); for a Hugging Face folder, its
    ``tokenizer.json`` ``model.max_input_chars_per_word``, else 100 (the
    default of Hugging Face's BERT tokenizers)."""
    if folder.layout == "official":
        return OFFICIAL_MAX_CHARS_PER_WORD
    path = Path(folder.directory) / "tokenizer.json"
    if path.exists():
        import json

        try:
            value = json.loads(path.read_text(encoding="utf-8")).get("model", {}).get("max_input_chars_per_word")
        except (ValueError, AttributeError):
            value = None
        if isinstance(value, int) and value > 0:
            return value
    return HF_MAX_CHARS_PER_WORD


def guess_lowercase(directory, vocab):
    """Whether a checkpoint is uncased, when nothing says so explicitly.

    Order: a Hugging Face ``tokenizer_config.json`` ``do_lower_case``; the
    folder name (``uncased`` -> True, ``cased`` -> False, as Google names
    them); else the vocabulary: uncased vocabularies have (almost) no tokens
    with capital letters (bert-base-uncased: 2 of 30522; Chinese BERT: 2),
    cased ones have thousands.
    """
    directory = Path(directory)
    config = directory / "tokenizer_config.json"
    if config.exists():
        import json

        try:
            value = json.loads(config.read_text(encoding="utf-8")).get("do_lower_case")
        except ValueError:
            value = None
        if isinstance(value, bool):
            return value
    name = directory.name.lower()
    if "uncased" in name:
        return True
    if "cased" in name:
        return False
    words = [t for t in vocab if not (t.startswith("[") and t.endswith("]"))]
    upper = sum(1 for t in words if any(c.isupper() for c in t))
    return upper <= 0.01 * max(len(words), 1)
