"""BERT tokenization inside the TensorFlow graph, for SavedModels that take raw text.

:class:`GraphTokenizer` does what :class:`kerasbert.tokenizers.tokenizer.BertTokenizer`
does -- same token ids, same offsets -- with TensorFlow ops only, so a
SavedModel exported for TF Serving can take ``tf.string [batch]`` and return
entities with character offsets into each input string.

Offsets are Python ``str`` indices (Unicode code points) into the ORIGINAL
string, end exclusive, exactly as :class:`~kerasbert.tokenizers.tokenizer.BertTokenizer`
returns them; they are never byte offsets and never offsets into a normalized
string.

How it works
------------
The host tokenizer is Hugging Face ``tokenizers``: ``BertNormalizer`` (clean
text, pad CJK characters, NFD + drop non-spacing marks, lower-case),
``BertPreTokenizer`` (split on whitespace, isolate punctuation), ``WordPiece``.
Its character classes do NOT follow current Unicode: ``tokenizers`` 0.23
strips as "non-spacing marks" only what Unicode ~8 knew (U+08D4 ARABIC SMALL
HIGH WORD AR-RUB, Unicode 9, is kept like a letter), its NFD reorders only the
combining marks of Unicode ~9 (U+0EBA LAO SIGN PALI VIRAMA, Unicode 12, is
never moved), and it lower-cases per character (no final sigma, ``"ß"``
stays ``"ß"``); ``normalizers.StripAccents`` even uses another table than
``BertNormalizer``. ICU (TF-Text's
``BertTokenizer``/``FastBertNormalizer``, ``case_fold_utf8``, which turns
``"ß"`` into ``"ss"``) or Python's ``unicodedata`` would disagree on such
characters. So the graph does not re-implement the rules: it uses tables READ
OFF the installed ``tokenizers`` when a :class:`GraphTokenizer` is built --
every code point U+0000..U+10FFFF goes through each normalization stage and
through the pre-tokenizer (a few seconds; then cached on disk, per
``tokenizers`` version and Python Unicode version: :func:`cache_folder`). The
tables are sorted range boundaries (a few thousand int32s, plus the
multi-character outputs: Hangul syllables, U+0130) read in the graph with
``tf.searchsorted``. Per batch the graph does:

1. ``tf.strings.unicode_decode`` -> code points; a code point's position in its
   row IS its Python ``str`` index;
2. stage A, per code point (``BertNormalizer`` clean text, then ``NFD`` when
   accents are stripped): drop NUL, U+FFFD, control and format characters,
   map whitespace to ``" "``, decompose -- 0, 1 or more characters, each
   remembering the index of the original character it came from;
3. when accents are stripped: canonical reordering of each run of combining
   marks (the one context-dependent step; see "Combining marks");
4. stage B, per character (``BertNormalizer`` with only ``strip_accents`` /
   ``lowercase``; its NFD is a no-op on NFD text): drop non-spacing marks,
   lower-case (U+0130 becomes two characters);
5. pre-tokenization (classes read off ``BertPreTokenizer``): whitespace splits
   and is dropped, punctuation is a word of its own, the characters of a CJK
   code point (``handle_chinese_chars``) form a word of their own;
6. WordPiece on each word with TF-Text's ``FastWordpieceTokenizer``
   (``no_pretokenization=True``); a word longer than ``max_chars_per_word``
   characters after normalization (as ``tokenizers`` counts) becomes one
   ``[UNK]`` over the whole word;
7. WordPiece byte offsets -> character in the word -> original character:
   a token's start is its first character's original index, its end the
   original index of its last character + 1.

Combining marks
---------------
``tokenizers`` NFD reorders a run of combining marks by canonical combining
class and keeps the ALIGNMENTS positional (the i-th character of the run keeps
the i-th alignment), before non-spacing marks are dropped: ``"x" + U+1D16D +
U+1D165`` gives ``x``, ``##U+1D165`` (1, 2), ``##U+1D16D`` (2, 3). The graph
does the same (a stable sort of each run by class, alignments left in place),
with the classes of Python's ``unicodedata`` minus the marks ``tokenizers``
does not know (found at build time: NFD does not move them before U+0345);
the tests check that ``tokenizers`` knows no mark Python does not.

Parity
------
Exact -- same ids, same offsets -- on everything tested: the 8 reference
sentences; every code point U+0000..U+10FFFF alone, inside a word and in runs
of three, for uncased, cased, lowercase-without-stripping and
stripping-without-lowercase settings; runs of reorderable marks with a
vocabulary that contains them; random Unicode text (hypothesis); words over
100 characters; empty, whitespace-only and 10,000-character texts. No class
of characters is known to differ. Limits, outside what a Python client sends:

* invalid UTF-8 bytes in a request (not producible from a Python ``str``)
  are read as U+FFFD (then dropped), one per bad sequence;
* the tables come from the ``tokenizers`` installed at build time; a
  SavedModel keeps that version's behaviour.

Windows
-------
:func:`windows_of_tokens` is THE place where long texts are cut into
overlapping windows: training features, ``predict`` and the serving graphs
all take their rows from it, through :meth:`GraphTokenizer.windows` (this
tokenizer's tokens), and the ONNX export's graph too (the host tokenizer's
same tokens, its inputs). It returns one row per window plus
``text_index``/``token_start``/``token_end`` so that predictions per row can
be merged back per text.

TF-Text ops
-----------
The only TF-Text op in the graph is ``FastWordpieceTokenizeWithOffsets``
(``tensorflow_text.FastWordpieceTokenizer``), in TF-Text's ``ops_lib`` target,
which TensorFlow Serving links (Serving builds and even patches
``fast_wordpiece_tokenizer.cc``; it pinned TF-Text 2.12.1, later 2.18.1). It
exists at least since TF-Text 2.8 (2.8.1's release notes list a change to it;
2.9 built ``FastBertTokenizer`` on it); its first release is believed to be
2.7.0 -- not verified. Everything else is core TensorFlow (``UnicodeDecode``,
``UnicodeEncode``, ``UpperBound``/``LowerBound`` from ``tf.searchsorted``,
``TopKV2`` (a sort), ragged, gather and arithmetic ops).
:func:`kerasbert.serving.op_check.list_ops` and :func:`~kerasbert.serving.op_check.disallowed_ops` check an exported SavedModel.
"""

import os

import numpy as np
import tensorflow as tf

from kerasbert.serving.graph_ops import argsort
from kerasbert.serving.graph_ops import nonzero
from kerasbert.serving.graph_ops import repeat_index
from kerasbert.serving.graph_ops import row_of
from kerasbert.serving.graph_ops import shifted
from kerasbert.tokenizers.unicode_tables import PUNCT
from kerasbert.tokenizers.unicode_tables import SPACE
from kerasbert.tokenizers.unicode_tables import cjk_table
from kerasbert.tokenizers.unicode_tables import class_table
from kerasbert.tokenizers.unicode_tables import combining_table
from kerasbert.tokenizers.unicode_tables import stage_tables


def _fast_wordpiece():
    """TF-Text's ``FastWordpieceTokenizeWithOffsets`` op module (what
    ``tensorflow_text.FastWordpieceTokenizer`` calls, without the ragged
    tensors it wraps the outputs in)."""
    from tensorflow_text.python.ops.fast_wordpiece_tokenizer import gen_fast_wordpiece_tokenizer

    return gen_fast_wordpiece_tokenizer


def register_tokenizer_op():
    """Register TF-Text's ``FastWordpieceTokenizeWithOffsets`` op, the one op
    of a text export that is not TensorFlow's own, so that
    ``tf.saved_model.load`` can load the export: from its library alone,
    without importing the ``tensorflow_text`` package (which imports much
    more, for a noticeable share of a one-sentence ``predict``). The package
    imported afterwards finds the library loaded. Falls back to importing the
    package where the library is not where TF-Text keeps it."""
    import importlib.util

    spec = importlib.util.find_spec("tensorflow_text")
    library = None
    if spec is not None and spec.submodule_search_locations:
        library = os.path.join(spec.submodule_search_locations[0], "python", "ops", "_fast_wordpiece_tokenizer.so")
    if library is not None and os.path.isfile(library):
        tf.load_op_library(library)
    else:
        import tensorflow_text  # noqa: F401


def _utf8_lengths(cps):
    """Bytes of each code point in UTF-8."""
    return 1 + tf.cast(cps >= 0x80, cps.dtype) + tf.cast(cps >= 0x800, cps.dtype) + tf.cast(cps >= 0x10000, cps.dtype)



# ------------------------------------------------------------------ the tokenizer
class GraphTokenizer(tf.Module):
    """In-graph twin of a :class:`kerasbert.tokenizers.tokenizer.BertTokenizer`.

    Build it from the host tokenizer (vocabulary, ``lowercase``,
    ``strip_accents``, ``max_chars_per_word`` are taken from it). Building
    reads the Unicode tables off ``tokenizers`` (a few seconds the first time
    in a process for each setting). The methods are made of TensorFlow ops:
    they run eagerly, inside any ``tf.function`` (e.g. one with
    ``input_signature=[tf.TensorSpec([None], tf.string)]``) and are saved with
    it in a SavedModel. Wrap them in a ``tf.function`` for speed.

    Args:
        tokenizer: the :class:`~kerasbert.tokenizers.tokenizer.BertTokenizer`.
    """

    def __init__(self, tokenizer, name=None):
        super().__init__(name=name)

        self.vocabulary_size = len(tokenizer.vocab)
        self.lowercase = bool(tokenizer.lowercase)
        strip = tokenizer.strip_accents
        self.strip_accents = bool(self.lowercase if strip is None else strip)
        self.max_chars_per_word = int(tokenizer.max_chars_per_word)
        self.unk_id = int(tokenizer.unk_id)
        self.cls_id = int(tokenizer.cls_id)
        self.sep_id = int(tokenizer.sep_id)
        self.pad_id = int(tokenizer.pad_id)
        self._stage_a, self._stage_b = stage_tables(self.lowercase, self.strip_accents)
        self._cjk = cjk_table()
        self._classes = class_table()
        self._combining = combining_table() if self.strip_accents else None
        from tensorflow_text.core.pybinds import pywrap_fast_wordpiece_tokenizer_model_builder as builder

        # Longer words are [UNK] before WordPiece sees them (max_chars_per_word
        # counts characters); this byte limit can never cut a shorter one.
        model = builder.build_fast_wordpiece_model(
            list(tokenizer.vocab), 4 * self.max_chars_per_word + 4, "##", tokenizer.vocab[self.unk_id], True, False
        )
        self._wordpiece_model = tf.constant(np.frombuffer(model, dtype=np.uint8))

    # ------------------------------------------------------------------ tokenize
    def tokens(self, texts):
        """WordPiece ids and offsets of each text, without special tokens, flat.

        Args:
            texts: ``tf.string`` [batch] (UTF-8).

        Returns:
            ``(pieces, counts)``: ``pieces`` int32 [tokens, 3], each token's
            id, start and end (code-point offsets into its original string,
            end exclusive), text after text; ``counts`` int32 [batch]: the
            tokens of each text.
        """
        texts = tf.convert_to_tensor(texts, dtype=tf.string)
        text_splits, cps = tf.raw_ops.UnicodeDecode(input=texts, input_encoding="UTF-8", errors="replace",
                                                    replacement_char=0xFFFD, Tsplits=tf.int32)
        char_text = row_of(text_splits[1:], tf.size(cps))  # the text of each character
        cjk = self._cjk.lookup(cps)

        # Stage A: clean (drop controls, whitespace -> " "), NFD if stripping.
        values, origin = self._stage_a.apply(cps)  # origin: index of the original character in cps
        if self._combining is not None:
            values = self._reorder_marks(values, tf.gather(char_text, origin))
        # Stage B: drop non-spacing marks, lower-case.
        if self._stage_b is not None:
            values, source = self._stage_b.apply(values)
            origin = tf.gather(origin, source)
        text_of, cjk = tf.unstack(tf.gather(tf.stack([char_text, cjk], 1), origin), axis=1)

        # Pre-tokenization: word boundaries on the normalized characters.
        classes = self._classes.lookup(values)
        previous = shifted(tf.stack([classes, cjk, text_of, origin], 1), [SPACE, 0, -1, -1])
        prev_class, prev_cjk, prev_text, prev_origin = tf.unstack(previous, axis=1)
        boundary = (
            (text_of != prev_text)
            | (prev_class == SPACE)
            | (classes == PUNCT)
            | (prev_class == PUNCT)
            | (((cjk > 0) | (prev_cjk > 0)) & (origin != prev_origin))
        )
        kept = nonzero(classes != SPACE)
        values = tf.gather(values, kept)
        origin = tf.gather(origin, kept)
        word_first = nonzero(tf.gather(boundary, kept))  # index among the kept characters
        word_splits = tf.concat([word_first, [tf.size(kept)]], 0)
        word_length = word_splits[1:] - word_first
        too_long = word_length > self.max_chars_per_word
        words = tf.raw_ops.UnicodeEncode(input_values=values, input_splits=word_splits, output_encoding="UTF-8",
                                         errors="replace", replacement_char=0xFFFD)
        words = tf.where(too_long, tf.constant(""), words)

        # WordPiece; a too-long word (given as "": no pieces) is one [UNK] over the whole word.
        _, piece_ids, piece_splits, byte_starts, byte_ends = _fast_wordpiece().fast_wordpiece_tokenize_with_offsets(
            input_values=words, wp_model=self._wordpiece_model)
        piece_splits = tf.cast(piece_splits, tf.int32)
        per_word = tf.where(too_long, 1, piece_splits[1:] - piece_splits[:-1])
        word = repeat_index(per_word)  # the word of each token
        long_token = tf.gather(too_long, word)
        k = tf.range(tf.size(word)) - tf.gather(tf.cumsum(per_word, exclusive=True), word)
        # Row `len` of `pieces` stands for the [UNK] (its byte offsets unused).
        pieces = tf.concat([tf.cast(tf.stack([piece_ids, byte_starts, byte_ends], 1), tf.int32),
                            [[self.unk_id, 0, 0]]], 0)
        piece = tf.where(long_token, tf.shape(piece_ids)[0], tf.gather(piece_splits, word) + k)
        ids, byte_start, byte_end = tf.unstack(tf.gather(pieces, piece), axis=1)
        # Byte offsets in the word -> index among the kept characters.
        char_bytes = tf.cumsum(_utf8_lengths(values), exclusive=True)
        base = tf.gather(tf.gather(char_bytes, word_first), word)
        first_char, end_char = tf.unstack(tf.raw_ops.LowerBound(
            sorted_inputs=tf.stack([char_bytes, char_bytes]), values=tf.stack([base + byte_start, base + byte_end]),
            out_type=tf.int32))
        first = tf.gather(word_first, word)
        first_char = tf.where(long_token, first, first_char)
        end_char = tf.where(long_token, first + tf.gather(word_length, word), end_char)
        start = tf.gather(origin, first_char)
        end = tf.gather(origin, end_char - 1) + 1
        text = tf.gather(char_text, start)
        at = tf.gather(text_splits, text)
        counts = tf.math.unsorted_segment_sum(tf.ones_like(text), text, tf.size(texts))
        return tf.stack([ids, start - at, end - at], 1), counts

    def tokenize(self, texts):
        """WordPiece ids and offsets of each text, without special tokens.

        Args:
            texts: ``tf.string`` [batch] (UTF-8).

        Returns:
            ``(token_ids, starts, ends)``: RaggedTensors [batch, (tokens)];
            ``token_ids`` int32, ``starts``/``ends`` int64 code-point offsets
            into the original strings (end exclusive) -- what
            ``BertTokenizer.pieces`` returns per text. (:meth:`tokens` gives
            the same, flat.)
        """
        pieces, counts = self.tokens(texts)
        counts = tf.cast(counts, tf.int64)
        ids, starts, ends = tf.unstack(pieces, axis=1)
        return tuple(tf.RaggedTensor.from_row_lengths(v, counts, validate=False)
                     for v in (ids, tf.cast(starts, tf.int64), tf.cast(ends, tf.int64)))

    def _reorder_marks(self, values, text_of):
        """Canonical reordering (stable sort by combining class) of each run of
        combining marks; only the characters move, alignments stay in place."""
        ccc = self._combining.lookup(values)
        previous, prev_text = tf.unstack(shifted(tf.stack([ccc, text_of], 1), [0, -1]), axis=1)
        run_start = (ccc == 0) | (previous == 0) | (text_of != prev_text)
        run_of = tf.cumsum(tf.cast(run_start, tf.int64))  # runs are numbered in order
        return tf.gather(values, argsort(run_of * 256 + tf.cast(ccc, tf.int64)))

    # -------------------------------------------------------------------- encode
    def encode(self, texts, max_length=512, pad_to_max_length=False):
        """Encoder inputs for single texts, as ``BertTokenizer.__call__``.

        ``[CLS]`` + the first ``max_length - 2`` tokens + ``[SEP]``, padded with
        ``[PAD]`` to the longest row (or to ``max_length``).

        Args:
            texts: ``tf.string`` [batch].
            max_length: Python int >= 3, special tokens included.
            pad_to_max_length: pad every row to ``max_length``.

        Returns:
            dict of int32 tensors: ``token_ids``, ``segment_ids`` (zeros),
            ``padding_mask`` [batch, L]; ``offsets`` [batch, L, 2] code-point
            start/end in the original string, ``(0, 0)`` for special tokens
            and padding; ``truncated`` [batch] bool.
        """
        max_length = int(max_length)
        if max_length < 3:
            raise ValueError(f"max_length must be at least 3, got {max_length}")
        pieces, n = self.tokens(texts)
        inner = max_length - 2
        out = _rows(pieces, n, tf.range(tf.size(n)), tf.zeros_like(n), tf.minimum(n, inner), max_length,
                    pad_to_max_length, self.special_ids)
        out["truncated"] = n > inner
        return out

    @property
    def special_ids(self):
        """``(pad_id, cls_id, sep_id)``: what :func:`windows_of_tokens` adds to the tokens."""
        return self.pad_id, self.cls_id, self.sep_id

    def windows(self, texts, max_length=128, overlap=None, pad_to_max_length=False):
        """Overlapping windows over long texts: :meth:`tokens`, then
        :func:`windows_of_tokens` (the one implementation of the windows,
        which a graph that takes the host tokenizer's pieces calls on them:
        the ONNX export, :mod:`kerasbert.serving.onnx`).

        Args:
            texts: ``tf.string`` [batch] (UTF-8).
            max_length, overlap, pad_to_max_length: see :func:`windows_of_tokens`.
        """
        pieces, counts = self.tokens(texts)
        return windows_of_tokens(pieces, counts, self.special_ids, max_length, overlap, pad_to_max_length)


def windows_of_tokens(pieces, counts, special_ids, max_length=128, overlap=None, pad_to_max_length=False):
    """Overlapping windows over long texts (the one implementation), from
    their tokens: what :meth:`GraphTokenizer.tokens` returns, or the same
    pieces from the host tokenizer (:meth:`kerasbert.tokenizers.tokenizer.BertTokenizer.pieces`).

    Each text's tokens (no truncation) are cut into windows of ``size =
    max_length - 2`` tokens moving by ``stride = size - overlap``
    (``overlap`` defaults to ``size // 4``); a text of at most ``size``
    tokens (including none) is one window; the last window ends at the
    text's last token. Every window becomes one row ``[CLS] tokens [SEP]``;
    rows are ordered by text, then by position in the text.

    Args:
        pieces: int32 [tokens, 3]: each token's id, start and end
            (code points in its text, end exclusive), text after text.
        counts: int32 [batch]: the tokens of each text.
        special_ids: ``(pad_id, cls_id, sep_id)`` (:attr:`GraphTokenizer.special_ids`).
        max_length: Python int >= 3, special tokens included.
        overlap: Python int, ``0 <= overlap < max_length - 2``.
        pad_to_max_length: pad every row to ``max_length``.

    Returns:
        dict of tensors, R = total number of windows:

        * ``token_ids``, ``segment_ids``, ``padding_mask`` int32 [R, L]
          and ``offsets`` int32 [R, L, 2] (code points in the window's
          text; ``(0, 0)`` for specials and padding), padded to the
          longest row (or ``max_length``);
        * ``text_index`` int32 [R]: the text the row comes from;
        * ``token_start``, ``token_end`` int32 [R]: the row's tokens are
          the text's tokens ``token_start .. token_end - 1``; row position
          ``1 + k`` is text token ``token_start + k``;
        * ``num_tokens`` int32 [batch]: tokens in each whole text.

        To merge per-row predictions back per text, scatter row positions
        ``1 .. token_end - token_start`` to text tokens
        ``token_start .. token_end - 1`` (the NER app keeps, for each
        token, the window where it is furthest from a cut edge).
    """
    max_length = int(max_length)
    size = max_length - 2
    if size < 1:
        raise ValueError(f"max_length must be at least 3, got {max_length}")
    overlap = size // 4 if overlap is None else int(overlap)
    if not 0 <= overlap < size:
        raise ValueError(f"overlap must be between 0 and max_length - 3, got {overlap}")
    stride = size - overlap
    n = counts
    n_windows = 1 + (tf.maximum(n - size, 0) + stride - 1) // stride
    window_ends = tf.cumsum(n_windows)
    text_index = row_of(window_ends, tf.reduce_sum(n_windows))
    k = tf.range(tf.size(text_index)) - tf.gather(window_ends - n_windows, text_index)
    token_start = k * stride
    token_end = tf.minimum(token_start + size, tf.gather(n, text_index))
    out = _rows(pieces, n, text_index, token_start, token_end, max_length, pad_to_max_length, special_ids)
    out.update(text_index=text_index, token_start=token_start, token_end=token_end, num_tokens=n)
    return out


def _rows(pieces, counts, text_index, token_start, token_end, max_length, pad_to_max_length, special_ids):
    """One row ``[CLS] tokens [SEP]`` per window (the text ``text_index``'s
    tokens ``token_start .. token_end - 1``, flat in ``pieces`` from
    :meth:`GraphTokenizer.tokens`, ``counts`` per text), padded: the encoder inputs and offsets
    (``special_ids``: pad, cls, sep)."""
    length = token_end - token_start
    width = max_length if pad_to_max_length else tf.reduce_max(tf.concat([length + 2, [0]], 0))
    column = tf.expand_dims(tf.range(width), 0)
    last = tf.expand_dims(length, 1) + 1
    inside = (column > 0) & (column < last)
    # Rows `tokens`, `tokens + 1`, `tokens + 2` of the table: [PAD], [CLS], [SEP] (offsets (0, 0)).
    n = tf.shape(pieces)[0]
    pad_id, cls_id, sep_id = special_ids
    table = tf.concat([pieces, [[pad_id, 0, 0], [cls_id, 0, 0], [sep_id, 0, 0]]], 0)
    first = tf.gather(tf.cumsum(counts, exclusive=True), text_index) + token_start - 1  # column 1: first token
    index = tf.where(inside, tf.expand_dims(first, 1) + column,
                     tf.where(column == 0, n + 1, tf.where(column == last, n + 2, n)))
    cells = tf.gather(table, index)  # [rows, width, 3]
    token_ids = cells[..., 0]
    return {
        "token_ids": token_ids,
        "segment_ids": tf.zeros_like(token_ids),
        "padding_mask": tf.cast(column <= last, tf.int32),
        "offsets": cells[..., 1:],
    }
