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
:meth:`GraphTokenizer.windows` is THE place where long texts are cut into
overlapping windows: training features, ``predict`` and the serving graphs
all take their rows from it. It returns one row per window plus
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
:func:`list_ops` and :func:`disallowed_ops` check an exported SavedModel.
"""

import functools
import hashlib
import json
import os
import subprocess
import sys
import unicodedata
from pathlib import Path

import numpy as np
import tensorflow as tf

from kerasbert.errors import WriteError
from kerasbert.files.atomic import cache_base
from kerasbert.serving.graph_ops import argsort
from kerasbert.serving.graph_ops import lower_bound
from kerasbert.serving.graph_ops import nonzero
from kerasbert.serving.graph_ops import repeat_index
from kerasbert.serving.graph_ops import row_of
from kerasbert.serving.graph_ops import shifted
from kerasbert.serving.graph_ops import upper_bound

MAX_CODE_POINT = 0x10FFFF
_N_CODE_POINTS = MAX_CODE_POINT + 1
_SURROGATES = range(0xD800, 0xE000)

# Stage table kinds.
_KEEP = 0  # one output character: code point + delta
_DROP = 1  # no output
_MULTI = 2  # several output characters (see the multi table)

# Pre-tokenizer classes.
_WORD = 0
_SPACE = 1
_PUNCT = 2

#: TF-Text ops a graph built by :class:`GraphTokenizer` may contain, with the
#: TF-Text release that introduced each (see the module docstring).
ALLOWED_TF_TEXT_OPS = {
    "FastWordpieceTokenizeWithOffsets": "tensorflow_text.FastWordpieceTokenizer; TF-Text >= 2.7 (ops_lib)",
}


# --------------------------------------------------------------------------- tables
class _Ranges:
    """A piecewise-constant function over code points: ``values[i]`` holds on
    ``[bounds[i], bounds[i + 1])``; ``bounds[0] == 0``."""

    def __init__(self, per_code_point):
        per_code_point = np.asarray(per_code_point)
        change = np.ones(len(per_code_point), dtype=bool)
        change[1:] = per_code_point[1:] != per_code_point[:-1]
        self.bounds = np.nonzero(change)[0].astype(np.int32)
        self.values = per_code_point[change].astype(np.int32)

    def arrays(self, prefix=""):
        """The table as named arrays (what the disk cache stores)."""
        return {prefix + "bounds": self.bounds, prefix + "values": self.values}

    @classmethod
    def from_arrays(cls, arrays, prefix=""):
        table = cls.__new__(cls)
        table.bounds, table.values = arrays[prefix + "bounds"], arrays[prefix + "values"]
        return table

    def lookup(self, cps):
        """``values`` at each code point of the int32 tensor ``cps``."""
        return tf.gather(tf.constant(self.values), upper_bound(self.bounds, cps) - 1)


class _CharMap:
    """A per-code-point map to 0, 1 or more code points, from the outputs of a
    ``tokenizers`` normalizer on each code point alone."""

    def __init__(self, outputs):
        lengths = np.fromiter(map(len, outputs), dtype=np.int64, count=len(outputs))
        flat = np.frombuffer("".join(outputs).encode("utf-32-le", "surrogatepass"), dtype=np.uint32).astype(np.int64)
        splits = np.zeros(len(outputs) + 1, dtype=np.int64)
        np.cumsum(lengths, out=splits[1:])
        cps = np.arange(len(outputs), dtype=np.int64)
        first = np.zeros(len(outputs), dtype=np.int64)
        nonempty = lengths > 0
        first[nonempty] = flat[splits[:-1][nonempty]]
        kind = np.where(lengths == 1, _KEEP, np.where(lengths == 0, _DROP, _MULTI))
        delta = np.where(kind == _KEEP, first - cps, 0)
        # One code per (kind, delta): ranges of equal code are merged.
        code = (delta + _N_CODE_POINTS) * 4 + kind
        self.ranges = _Ranges(code.astype(np.int64))
        codes = code[self.ranges.bounds]
        self.kind = (codes % 4).astype(np.int32)
        self.delta = (codes // 4 - _N_CODE_POINTS).astype(np.int32)
        multi = np.nonzero(kind == _MULTI)[0]
        self.multi_keys = multi.astype(np.int32)
        m_lengths = lengths[multi]
        self.multi_splits = np.zeros(len(multi) + 1, dtype=np.int32)
        np.cumsum(m_lengths, out=self.multi_splits[1:])
        if len(multi):
            index = np.concatenate([np.arange(splits[k], splits[k + 1]) for k in multi])
            self.multi_values = flat[index].astype(np.int32)
        else:
            self.multi_values = np.zeros(0, dtype=np.int32)
        self.identity = bool((kind == _KEEP).all() and (delta == 0).all())

    _ARRAYS = ("kind", "delta", "multi_keys", "multi_splits", "multi_values")

    def arrays(self, prefix=""):
        """The table as named arrays (what the disk cache stores)."""
        out = self.ranges.arrays(prefix + "ranges.")
        out.update({prefix + name: getattr(self, name) for name in self._ARRAYS})
        out[prefix + "identity"] = np.array(self.identity)
        return out

    @classmethod
    def from_arrays(cls, arrays, prefix=""):
        table = cls.__new__(cls)
        table.ranges = _Ranges.from_arrays(arrays, prefix + "ranges.")
        for name in cls._ARRAYS:
            setattr(table, name, arrays[prefix + name])
        table.identity = bool(arrays[prefix + "identity"])
        return table

    def apply(self, cps):
        """Map the int32 code points ``cps`` [n]; returns ``(values, source)``:
        the output code points [m] and, for each, the index in ``cps`` it came
        from (non-decreasing)."""
        index = upper_bound(self.ranges.bounds, cps) - 1
        kind = tf.gather(tf.constant(self.kind), index)
        delta = tf.gather(tf.constant(self.delta), index)
        counts = tf.cast(kind == _KEEP, tf.int32)
        if len(self.multi_keys):
            # Per multi-character code point: where its outputs start in multi_values, and how many.
            k = tf.minimum(lower_bound(self.multi_keys, cps), len(self.multi_keys) - 1)
            starts_counts = np.stack([self.multi_splits[:-1], np.diff(self.multi_splits)], 1).astype(np.int32)
            m_start, m_count = tf.unstack(tf.gather(tf.constant(starts_counts), k), axis=1)
            is_multi = kind == _MULTI
            counts = tf.where(is_multi, m_count, counts)
        source = repeat_index(counts)
        values = tf.gather(cps + delta, source)
        if len(self.multi_keys):
            j = tf.range(tf.size(source)) - tf.gather(tf.cumsum(counts, exclusive=True), source)
            # For non-multi characters j == 0 and m_start is a valid index.
            multi_values = tf.gather(tf.constant(self.multi_values), tf.gather(m_start, source) + j)
            values = tf.where(tf.gather(is_multi, source), multi_values, values)
        return values, source


def _all_chars():
    return [chr(c) for c in range(_N_CODE_POINTS)]


def _probe(normalizer, items, sep="0"):
    """``normalizer.normalize_str`` of each string of ``items``, in one call:
    the items are joined with ``sep``, a character no stage changes or
    produces; falls back to one call per item if that assumption fails."""
    usable = [i for i, s in enumerate(items) if sep not in s and not (0xD800 <= ord(s[0]) < 0xE000)]
    outputs = [None] * len(items)
    parts = normalizer.normalize_str(sep + sep.join(items[i] for i in usable) + sep).split(sep)
    if len(parts) == len(usable) + 2 and parts[0] == "" and parts[-1] == "":
        for i, out in zip(usable, parts[1:-1]):
            outputs[i] = out
    for i, s in enumerate(items):
        if outputs[i] is None:
            if 0xD800 <= ord(s[0]) < 0xE000:
                outputs[i] = s  # never reaches the tokenizer (not encodable as UTF-8)
            else:
                outputs[i] = normalizer.normalize_str(s)
    return outputs


# ------------------------------------------------------------ the table cache
#: Format of the cached tables; bump it when what a builder returns changes.
_CACHE_FORMAT = 2
#: The array of a cache file that names its entry (builder and arguments).
_CACHE_ENTRY = "__kerasbert_cache_entry__"


def cache_folder():
    """Where the Unicode tables are cached: ``$KERASBERT_CACHE``, else
    ``$XDG_CACHE_HOME/kerasbert``, else ``~/.cache/kerasbert``; one subfolder
    per ``tokenizers`` version, Python Unicode version and cache format."""
    import tokenizers

    version = f"tokenizers-{tokenizers.__version__}-unicode-{unicodedata.unidata_version}-v{_CACHE_FORMAT}"
    return cache_base() / "graph-tokenizer-tables" / version


def _disk_cached(build):
    """``build(*args)`` -> dict of numpy arrays, cached in memory and in
    :func:`cache_folder` (``.npz``, no pickle; written atomically, with an
    entry naming what it holds). The tables depend only on the installed
    ``tokenizers`` and on Python's Unicode data, which name the folder. A
    cache entry that cannot be read (cut short, empty, not an ``.npz``, the
    arrays of something else) is built again and rewritten, with one note on
    standard error; a cache that cannot be written is skipped: the tables are
    computed (a few seconds) as without it."""

    @functools.lru_cache(maxsize=None)
    def cached(*args):
        name = "-".join([build.__name__.strip("_"), *map(str, args)])
        path = cache_folder() / (name + ".npz")
        if path.exists():
            try:
                with np.load(path, allow_pickle=False) as stored:
                    arrays = {key: stored[key] for key in stored.files}
                if str(arrays.pop(_CACHE_ENTRY, "")) == name:
                    return arrays
                problem = "not this cache's entry"
            except Exception as e:  # noqa: BLE001 -- what a damaged file raises: BadZipFile, EOFError, zlib.error...
                problem = f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else 'unreadable'}"
            print(f"note: {path}: damaged cache entry ({problem}); rebuilt", file=sys.stderr)
        arrays = build(*args)
        try:
            import io

            from kerasbert.files.atomic import atomic_write_bytes

            buffer = io.BytesIO()
            np.savez(buffer, **arrays, **{_CACHE_ENTRY: np.array(name)})
            atomic_write_bytes(path, buffer.getvalue())
        except (OSError, WriteError):  # a cache that cannot be written is skipped
            pass
        return arrays

    cached.build = build  # the uncached builder (tests compare against it)
    return cached


@_disk_cached
def _cjk_arrays():
    from tokenizers import normalizers

    chars = _all_chars()
    padder = normalizers.BertNormalizer(clean_text=False, handle_chinese_chars=True, strip_accents=False, lowercase=False)
    outputs = _probe(padder, chars)
    flags = np.fromiter((o != c for o, c in zip(outputs, chars)), dtype=np.int32, count=len(chars))
    return _Ranges(flags).arrays()


@_disk_cached
def _class_arrays():
    """Pre-tokenizer class of every code point, read off ``BertPreTokenizer``."""
    from tokenizers import pre_tokenizers

    chars = [c for c in _all_chars() if not 0xD800 <= ord(c) < 0xE000]
    text = "a" + "a".join(chars) + "a"  # character i sits at 1 + 2 i
    cover = np.zeros(len(text), dtype=np.int8)
    for _, (start, end) in pre_tokenizers.BertPreTokenizer().pre_tokenize_str(text):
        cover[start:end] = 1 if end - start > 1 else 2
    found = cover[1 + 2 * np.arange(len(chars))]
    classes = np.where(found == 0, _SPACE, np.where(found == 2, _PUNCT, _WORD))
    per_cp = np.full(_N_CODE_POINTS, _WORD, dtype=np.int32)
    cps = np.array([ord(c) for c in chars])
    per_cp[cps] = classes
    return _Ranges(per_cp).arrays()


@_disk_cached
def _combining_arrays():
    """Canonical combining class of every code point AS ``tokenizers``' NFD
    SEES IT. Classes never change once assigned, but ``tokenizers`` may know
    an older Unicode than Python: a mark it does not know has class 0 there
    (e.g. U+0EBA LAO SIGN PALI VIRAMA, Unicode 12, with tokenizers 0.23).
    Each mark of class 1..239 in ``unicodedata`` is checked: ``tokenizers``
    knows it iff NFD moves it before U+0345 (class 240)."""
    from tokenizers import normalizers

    ccc = np.fromiter(
        (unicodedata.combining(chr(c)) for c in range(_N_CODE_POINTS)), dtype=np.int32, count=_N_CODE_POINTS
    )
    marks = np.nonzero((ccc > 0) & (ccc < 240))[0]
    outputs = _probe(normalizers.NFD(), ["\u0345" + chr(c) for c in marks])
    unknown = np.array([out.startswith("\u0345") for out in outputs], dtype=bool)
    ccc[marks[unknown]] = 0
    return _Ranges(ccc).arrays()


@_disk_cached
def _stage_arrays(lowercase, strip_accents):
    """Stage A and (when it does anything) stage B maps for these settings."""
    from tokenizers import normalizers

    chars = _all_chars()
    clean = normalizers.BertNormalizer(clean_text=True, handle_chinese_chars=False, strip_accents=False, lowercase=False)
    stage_a = normalizers.Sequence([clean, normalizers.NFD()]) if strip_accents else clean
    arrays = _CharMap(_probe(stage_a, chars)).arrays("a.")
    # Stage B sees NFD output only, on which BertNormalizer's own NFD is a no-op:
    # what is left is its non-spacing-mark filter (an older Unicode table than
    # normalizers.StripAccents uses) and its lower-casing.
    if strip_accents or lowercase:
        rest = normalizers.BertNormalizer(
            clean_text=False, handle_chinese_chars=False, strip_accents=strip_accents, lowercase=lowercase
        )
        arrays.update(_CharMap(_probe(rest, chars)).arrays("b."))
    return arrays


def _cjk_table():
    return _Ranges.from_arrays(_cjk_arrays())


def _class_table():
    return _Ranges.from_arrays(_class_arrays())


def _combining_table():
    return _Ranges.from_arrays(_combining_arrays())


def _stage_tables(lowercase, strip_accents):
    """(stage A, stage B or None) maps for these settings."""
    arrays = _stage_arrays(bool(lowercase), bool(strip_accents))
    b = _CharMap.from_arrays(arrays, "b.") if "b.kind" in arrays else None
    return _CharMap.from_arrays(arrays, "a."), b


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
        self._stage_a, self._stage_b = _stage_tables(self.lowercase, self.strip_accents)
        self._cjk = _cjk_table()
        self._classes = _class_table()
        self._combining = _combining_table() if self.strip_accents else None
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
        previous = shifted(tf.stack([classes, cjk, text_of, origin], 1), [_SPACE, 0, -1, -1])
        prev_class, prev_cjk, prev_text, prev_origin = tf.unstack(previous, axis=1)
        boundary = (
            (text_of != prev_text)
            | (prev_class == _SPACE)
            | (classes == _PUNCT)
            | (prev_class == _PUNCT)
            | (((cjk > 0) | (prev_cjk > 0)) & (origin != prev_origin))
        )
        kept = nonzero(classes != _SPACE)
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
    def _rows(self, pieces, counts, text_index, token_start, token_end, max_length, pad_to_max_length):
        """One row ``[CLS] tokens [SEP]`` per window (the text ``text_index``'s
        tokens ``token_start .. token_end - 1``, flat in ``pieces`` from
        :meth:`tokens`, ``counts`` per text), padded: the encoder inputs and offsets."""
        length = token_end - token_start
        width = max_length if pad_to_max_length else tf.reduce_max(tf.concat([length + 2, [0]], 0))
        column = tf.expand_dims(tf.range(width), 0)
        last = tf.expand_dims(length, 1) + 1
        inside = (column > 0) & (column < last)
        # Rows `tokens`, `tokens + 1`, `tokens + 2` of the table: [PAD], [CLS], [SEP] (offsets (0, 0)).
        n = tf.shape(pieces)[0]
        table = tf.concat([pieces, [[self.pad_id, 0, 0], [self.cls_id, 0, 0], [self.sep_id, 0, 0]]], 0)
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
        out = self._rows(pieces, n, tf.range(tf.size(n)), tf.zeros_like(n), tf.minimum(n, inner), max_length,
                         pad_to_max_length)
        out["truncated"] = n > inner
        return out

    def windows(self, texts, max_length=128, overlap=None, pad_to_max_length=False):
        """Overlapping windows over long texts (the one implementation).

        Each text's tokens (no truncation) are cut into windows of
        ``size = max_length - 2`` tokens moving by ``stride = size - overlap``
        (``overlap`` defaults to ``size // 4``); a text of at most ``size``
        tokens (including none) is one window; the last window ends at the
        text's last token. Every window becomes one row ``[CLS] tokens
        [SEP]``; rows are ordered by text, then by position in the text.

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
        pieces, n = self.tokens(texts)
        n_windows = 1 + (tf.maximum(n - size, 0) + stride - 1) // stride
        window_ends = tf.cumsum(n_windows)
        text_index = row_of(window_ends, tf.reduce_sum(n_windows))
        k = tf.range(tf.size(text_index)) - tf.gather(window_ends - n_windows, text_index)
        token_start = k * stride
        token_end = tf.minimum(token_start + size, tf.gather(n, text_index))
        out = self._rows(pieces, n, text_index, token_start, token_end, max_length, pad_to_max_length)
        out.update(text_index=text_index, token_start=token_start, token_end=token_end, num_tokens=n)
        return out


# ---------------------------------------------------------------- op inspection
def list_ops(saved_model_dir):
    """Every op type in a SavedModel: the graphs' nodes and the nodes of every
    function in their libraries. Calls of library functions by name are not
    ops and are left out."""
    from tensorflow.core.protobuf import saved_model_pb2

    saved = saved_model_pb2.SavedModel()
    saved.ParseFromString((Path(saved_model_dir) / "saved_model.pb").read_bytes())
    ops, functions = set(), set()
    for meta_graph in saved.meta_graphs:
        graph = meta_graph.graph_def
        ops.update(node.op for node in graph.node)
        for function in graph.library.function:
            functions.add(function.signature.name)
            ops.update(node.op for node in function.node_def)
    return ops - functions


_CORE_OPS_SCRIPT = """
import json, sys
import tensorflow as tf
from tensorflow.core.framework import op_def_pb2
assert "tensorflow_text" not in sys.modules
names = {n for n in dir(tf.raw_ops) if not n.startswith("_")}
try:
    from tensorflow.python.client import pywrap_tf_session
    buf = pywrap_tf_session.TF_GetAllOpList()
    data = pywrap_tf_session.TF_GetBuffer(buf)
    op_list = op_def_pb2.OpList()
    op_list.ParseFromString(data)
    names.update(op.name for op in op_list.op)
except Exception:
    pass
assert "tensorflow_text" not in sys.modules
print(json.dumps(sorted(names)))
"""


@functools.lru_cache(maxsize=None)
def core_ops():
    """Names of the ops plain TensorFlow registers (``tf.raw_ops`` and the C++
    op registry), read in a fresh Python that never imports TF-Text (seconds:
    it imports TensorFlow), then cached on disk beside the Unicode tables
    (:func:`cache_folder`), one file per TensorFlow installation (its version,
    folder and install time). A cache that cannot be read or written is
    skipped."""
    init = Path(tf.__file__).resolve()
    key = hashlib.sha256(f"{init}:{init.stat().st_mtime_ns}".encode()).hexdigest()[:16]
    path = cache_base() / "core-ops" / f"tensorflow-{tf.__version__}-{key}.json"
    try:
        names = json.loads(path.read_text(encoding="utf-8"))
        if isinstance(names, list) and "MatMul" in names:
            return frozenset(names)
    except (OSError, ValueError):
        pass
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    result = subprocess.run(
        [sys.executable, "-c", _CORE_OPS_SCRIPT], capture_output=True, text=True, env=env, check=True
    )
    names = json.loads(result.stdout.strip().splitlines()[-1])
    try:
        from kerasbert.files.atomic import atomic_write_bytes

        atomic_write_bytes(path, json.dumps(names).encode("utf-8"))
    except (OSError, WriteError):
        pass
    return frozenset(names)


def non_core_ops(ops):
    """The ops of ``ops`` that plain TensorFlow does not register."""
    return sorted(set(ops) - core_ops())


def disallowed_ops(ops):
    """The ops of ``ops`` that are neither core TensorFlow nor in
    :data:`ALLOWED_TF_TEXT_OPS` (empty when a graph is fit for TF Serving)."""
    return sorted(op for op in non_core_ops(ops) if op not in ALLOWED_TF_TEXT_OPS)
