"""The Unicode tables of :class:`kerasbert.tokenizers.graph_tokenizer.GraphTokenizer`, and their cache.

What Hugging Face ``tokenizers`` does to each code point (normalizer stages,
pre-tokenizer classes, CJK padding, combining marks), read off the installed
``tokenizers`` by probing every code point once, stored as compact range
tables, and cached on disk (:func:`cache_folder`). The graph tokenizer looks
characters up in them; the module docstring of
:mod:`kerasbert.tokenizers.graph_tokenizer` says why the tables are read off
``tokenizers`` rather than Python's ``unicodedata``.
"""

import functools
import sys
import unicodedata

import numpy as np
import tensorflow as tf

from kerasbert.errors import WriteError
from kerasbert.files.atomic import cache_base
from kerasbert.serving.graph_ops import lower_bound
from kerasbert.serving.graph_ops import repeat_index
from kerasbert.serving.graph_ops import upper_bound

MAX_CODE_POINT = 0x10FFFF
_N_CODE_POINTS = MAX_CODE_POINT + 1
_SURROGATES = range(0xD800, 0xE000)

# Stage table kinds.
_KEEP = 0  # one output character: code point + delta
_DROP = 1  # no output
_MULTI = 2  # several output characters (see the multi table)

# Pre-tokenizer classes.
WORD = 0
SPACE = 1
PUNCT = 2


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
    classes = np.where(found == 0, SPACE, np.where(found == 2, PUNCT, WORD))
    per_cp = np.full(_N_CODE_POINTS, WORD, dtype=np.int32)
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


def cjk_table():
    return _Ranges.from_arrays(_cjk_arrays())


def class_table():
    return _Ranges.from_arrays(_class_arrays())


def combining_table():
    return _Ranges.from_arrays(_combining_arrays())


def stage_tables(lowercase, strip_accents):
    """(stage A, stage B or None) maps for these settings."""
    arrays = _stage_arrays(bool(lowercase), bool(strip_accents))
    b = _CharMap.from_arrays(arrays, "b.") if "b.kind" in arrays else None
    return _CharMap.from_arrays(arrays, "a."), b
