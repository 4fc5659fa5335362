"""Pointer decoding (the TensorFlow rule of :mod:`kerasbert_apps.triples.decode`, on
hand-made probabilities), training features through offsets, subject
sampling, and the extractor's batched / windowed prediction with an oracle
Keras model (no training): the one path ``predict`` and the SavedModel share."""

import re

import keras
import numpy as np
import pytest
from keras import ops

from kerasbert_apps.triples.heads.casrel.batches import SubjectSampledBatches
from kerasbert_apps.triples.data import Span
from kerasbert_apps.triples.data import Triple
from kerasbert_apps.triples.data import TripleExample
from kerasbert_apps.base.model import encoder_inputs
from kerasbert_apps.triples.heads.casrel.decode import spans
from kerasbert_apps.triples.heads.casrel.pipeline import Extractor
from kerasbert_apps.triples.heads.casrel.pipeline import pointer_thresholds
from kerasbert.errors import KerasbertError
from kerasbert.tokenizers.tokenizer import BertTokenizer

# -------------------------------------------------------------------- spans


def decode_spans(start, end, threshold_start=0.5, threshold_end=0.5, mask=None):
    """:func:`kerasbert_apps.triples.heads.casrel.decode.spans` on one ``[len]`` row -> ``[(start, end,
    score)]``, or on ``[len, P]`` columns (one row per predicate) -> ``[(start,
    end, predicate, score)]``."""
    start, end = np.asarray(start, np.float32), np.asarray(end, np.float32)
    columns = start.ndim == 2
    rows_start, rows_end = (start.T, end.T) if columns else (start[None], end[None])
    allowed = np.ones(rows_start.shape, bool) if mask is None else np.broadcast_to(np.asarray(mask, bool), rows_start.shape)
    row, s, e, score = (t.numpy().tolist() for t in spans(rows_start, rows_end, threshold_start, threshold_end, allowed))
    if columns:
        return sorted(zip(s, e, row, score))
    return list(zip(s, e, score))


def probs(length, ones, value=0.9):
    out = np.zeros(length, np.float32)
    out[list(ones)] = value
    return out


def test_single_and_multi_token_spans():
    assert decode_spans(probs(6, [1, 3]), probs(6, [1, 4])) == [(1, 1, pytest.approx(0.9)), (3, 4, pytest.approx(0.9))]


def test_start_takes_the_nearest_end_at_or_after_it():
    # ends at 2 and 5: the start at 1 takes 2, not 5; the start at 3 takes 5.
    spans = decode_spans(probs(7, [1, 3]), probs(7, [2, 5]))
    assert [(s, e) for s, e, _ in spans] == [(1, 2), (3, 5)]


def test_nested_spans_share_an_end():
    # "New York City" and "York City": starts at 1 and 2, one end at 3.
    spans = decode_spans(probs(5, [1, 2]), probs(5, [3]))
    assert [(s, e) for s, e, _ in spans] == [(1, 3), (2, 3)]


def test_unmatched_starts_and_ends_give_nothing():
    assert decode_spans(probs(5, [3]), probs(5, [1])) == []  # end before start
    assert decode_spans(probs(5, []), probs(5, [1])) == []
    assert decode_spans(probs(5, [1]), probs(5, [])) == []


def test_threshold_edges_fire_only_strictly_above():
    start = np.array([0.0, 0.5, 0.5000001, 0.0], np.float32)
    end = np.array([0.0, 0.0, 0.0, 0.7], np.float32)
    assert [(s, e) for s, e, _ in decode_spans(start, end, 0.5, 0.5)] == [(2, 3)]
    # the end exactly at its threshold does not fire either
    assert decode_spans(start, end, 0.4, 0.7) == []
    assert [(s, e) for s, e, _ in decode_spans(start, end, 0.4, 0.69)] == [(1, 3), (2, 3)]
    # separate thresholds for start and end
    assert decode_spans(np.array([0.3, 0.0]), np.array([0.0, 0.3]), 0.2, 0.5) == []
    assert decode_spans(np.array([0.3, 0.0]), np.array([0.0, 0.3]), 0.2, 0.25) == [(0, 1, pytest.approx(0.3))]


def test_score_is_the_geometric_mean():
    ((_, _, score),) = decode_spans(np.array([0.0, 0.64, 0.0]), np.array([0.0, 0.0, 1.0]))
    assert score == pytest.approx(0.8)


def test_mask_excludes_special_tokens_and_padding():
    start = probs(6, [0, 2])
    end = probs(6, [0, 5])
    mask = np.array([0, 1, 1, 1, 0, 0])  # [CLS] at 0, [SEP] at 4, padding at 5
    assert decode_spans(start, end, mask=mask) == []  # 2 can only end at 5: masked
    mask[5] = 1
    assert [(s, e) for s, e, _ in decode_spans(start, end, mask=mask)] == [(2, 5)]


def test_columns_are_decoded_independently_epo():
    # Same object span (2..3) for predicates 0 and 2 (EPO); predicate 1 has a start only.
    start = np.zeros((5, 3), np.float32)
    end = np.zeros((5, 3), np.float32)
    start[2, [0, 1, 2]] = 0.9
    end[3, [0, 2]] = 0.8
    end[1, 1] = 0.9  # an end BEFORE the start in column 1: no span
    assert [(s, e, p) for s, e, p, _ in decode_spans(start, end)] == [(2, 3, 0), (2, 3, 2)]


def test_thresholds_normalisation():
    assert pointer_thresholds((0.3, 0.6)) == {"subject_start": 0.3, "subject_end": 0.6,
                                                "object_start": 0.3, "object_end": 0.6}
    assert pointer_thresholds({"object_end": 0.2})["object_end"] == 0.2
    with pytest.raises(KerasbertError):
        pointer_thresholds({"object": 0.2})
    with pytest.raises(KerasbertError):
        pointer_thresholds((1.0, 0.5))


# --------------------------------------------------------- features, batches

VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "jack", "makes", "a", "dull", "boy", "all", "work",
         "and", "no", "play", "##s", ",", "."]


@pytest.fixture(scope="module")
def tokenizer():
    return BertTokenizer(VOCAB, lowercase=True)


def example(text, *triples):
    """Triples as (subject, predicate, object) strings located at their first whole-word occurrence."""
    out = []
    for s, p, o in triples:
        si, oi = (re.search(r"\b" + re.escape(w) + r"\b", text).start() for w in (s, o))
        out.append(Triple(Span(si, si + len(s), s), p, Span(oi, oi + len(o), o)))
    return TripleExample(text, out, "t:1")


PREDICATES = ["likes", "is", "does"]


def test_features_labels_through_offsets(tokenizer):
    ex = example("Jack makes a dull boy", ("Jack", "is", "dull boy"), ("dull boy", "does", "makes"),
                 ("Jack", "likes", "a"), ("Jack", "unknown", "a"))
    extractor = Extractor(None, tokenizer, PREDICATES, max_length=16)
    feats, report = extractor.features([ex])
    assert report.unknown_predicates == {"unknown": 1} and report.triples == 3 and report.triples_used == 3
    assert report.misaligned_entities == 0
    # [CLS] jack makes a dull boy [SEP]
    assert list(feats["token_ids"][0]) == [2, 5, 6, 7, 8, 9, 3]
    assert list(feats["subject_start"][0]) == [0, 1, 0, 0, 1, 0, 0]
    assert list(feats["subject_end"][0]) == [0, 1, 0, 0, 0, 1, 0]
    subjects = {span: (starts.tolist(), ends.tolist()) for span, starts, ends in feats["subjects"][0]}
    # Jack (1,1): "dull boy" for "is" (4..5), "a" for "likes" (3..3) -- SEO
    assert subjects[(1, 1)] == ([[3, 0], [4, 1]], [[3, 0], [5, 1]])
    assert subjects[(4, 5)] == ([[2, 2]], [[2, 2]])


def test_misaligned_and_tokenless_entities_are_counted(tokenizer):
    # "ake" starts inside the WordPiece "makes"; "  " covers no token.
    ex = TripleExample("jack makes", [
        Triple(Span(0, 4, "jack"), "is", Span(6, 9, "ake")),
        Triple(Span(0, 4, "jack"), "is", Span(4, 5, " ")),
    ])
    feats, report = Extractor(None, tokenizer, PREDICATES, max_length=16).features([ex])
    assert report.misaligned_entities == 1 and report.triples_without_tokens == 1 and report.triples_used == 1
    (span, starts, ends), = feats["subjects"][0]
    assert starts.tolist() == [[2, 1]] and ends.tolist() == [[2, 1]]  # on the token "makes"


def test_windows_keep_triples_inside_and_count_the_cut(tokenizer):
    text = "jack makes a dull boy all work and no play"  # 10 tokens
    ex = example(text, ("jack", "likes", "makes"), ("jack", "is", "play"), ("work", "does", "play"))
    extractor = Extractor(None, tokenizer, PREDICATES, max_length=8, overlap=2)  # windows [0, 6), [4, 10)
    feats, report = extractor.features([ex])
    assert report.windows == 2 and report.triples_used == 2 and report.triples_cut_by_windows == 1
    assert [[span for span, _, _ in s] for s in feats["subjects"]] == [[(1, 1)], [(3, 3)]]  # jack; work at 6 - 4 + 1
    assert list(feats["subject_start"][1]) == [0, 0, 0, 1, 0, 0, 0, 0]


def test_rows_without_triples_are_kept(tokenizer):
    feats, report = Extractor(None, tokenizer, PREDICATES, max_length=16).features(
        [TripleExample("all work and no play", [])])
    assert report.rows_without_triples == 1 and feats["subjects"] == [[]]
    assert feats["subject_start"][0].sum() == 0


def test_subject_sampling_is_redrawn_each_epoch(tokenizer):
    ex = example("jack makes a dull boy", ("jack", "likes", "a"), ("dull boy", "does", "makes"), ("boy", "is", "jack"))
    feats, _ = Extractor(None, tokenizer, PREDICATES, max_length=16).features([ex] * 4)
    batches = SubjectSampledBatches(feats, len(PREDICATES), batch_size=4, seed=3)
    seen = set()
    for _ in range(8):
        x, y = batches[0]
        assert x["subject_span"].shape == (4, 2) and y["object_start"].shape == (4, 8, 3)
        for r in range(4):
            s, e = x["subject_span"][r]
            seen.add((int(s), int(e)))
            # the object labels belong to the sampled subject
            expected = {(1, 1): (3, 0), (4, 5): (2, 2), (5, 5): (1, 1)}[(int(s), int(e))]
            assert y["object_start"][r].sum() == 1 and y["object_start"][r][expected] == 1
        assert y["subject_start"][0].tolist()[:7] == [0, 1, 0, 0, 1, 1, 0]
        batches.on_epoch_end()
    assert seen == {(1, 1), (4, 5), (5, 5)}


def test_first_two_batches_expose_every_varying_dimension(tokenizer):
    """Keras takes the tf.data signature from batches 0 and 1 (shared
    BucketedBatches fix): a short batch and a batch of another width first."""
    texts = ["jack"] * 18 + ["jack makes a dull boy all work and no play"] * 7  # 25 rows: one short batch
    feats, _ = Extractor(None, tokenizer, PREDICATES, max_length=16).features([TripleExample(t, []) for t in texts])
    for seed in range(5):
        batches = SubjectSampledBatches(feats, len(PREDICATES), batch_size=4, seed=seed, pad_to_multiple=4)
        shapes = [batches[i][0]["token_ids"].shape for i in range(len(batches))]
        assert shapes[0][0] == 1  # the short batch
        assert shapes[0][1] != shapes[1][1]  # then one of the other width


# ------------------------------------------------------- oracle prediction


class _Encode(keras.layers.Layer):
    """Sequence = the token ids (as a 1-feature vector); subjects: 'jack' and 'dull boy'."""

    def __init__(self, tokenizer, **kwargs):
        super().__init__(**kwargs)
        self.jack, self.dull, self.boy = (tokenizer.token_to_id(w) for w in ("jack", "dull", "boy"))

    def call(self, ids):
        start = ops.where((ids == self.jack) | (ids == self.dull), 0.9, 0.01)
        end = ops.where((ids == self.jack) | (ids == self.boy), 0.8, 0.01)
        return {"sequence": ops.cast(ids, "float32")[..., None], "subject_start": start, "subject_end": end}


class _Objects(keras.layers.Layer):
    """For subject 'jack': 'play' by 'likes' AND 'is' (EPO), 'work' by 'does';
    for subject 'dull boy': 'jack' by 'is' (SEO: jack in several triples)."""

    def __init__(self, tokenizer, **kwargs):
        super().__init__(**kwargs)
        self.jack, self.dull, self.play, self.work = (tokenizer.token_to_id(w) for w in ("jack", "dull", "play", "work"))

    def call(self, sequence, subject_span):
        ids = ops.cast(sequence[..., 0], "int32")
        subject = ops.take_along_axis(ids, subject_span[:, :1], axis=1)  # [n, 1]
        jack, dull = subject == self.jack, subject == self.dull
        likes = jack & (ids == self.play)
        is_ = likes | (dull & (ids == self.jack))
        does = jack & (ids == self.work)
        out = ops.where(ops.stack([likes, is_, does], axis=-1), 0.95, 0.01)
        return {"object_start": out, "object_end": out}


class OracleModel:
    """The two Keras models a :class:`~kerasbert_apps.triples.heads.casrel.model.TripleModel` gives
    through ``decoders()``, computed from the token ids."""

    def __init__(self, tokenizer):
        inputs = encoder_inputs()
        encode = keras.Model(inputs, _Encode(tokenizer)(inputs["token_ids"]))
        sequence = keras.Input(shape=(None, 1), name="sequence")
        span = keras.Input(shape=(2,), dtype="int32", name="subject_span")
        objects = keras.Model({"sequence": sequence, "subject_span": span}, _Objects(tokenizer)(sequence, span))
        self._decoders = (encode, objects)

    def decoders(self):
        return self._decoders


def triples_of(result):
    return sorted((t["subject"]["text"], t["predicate"], t["object"]["text"]) for t in result["triples"])


def test_predict_seo_epo_offsets(tokenizer):
    model = OracleModel(tokenizer)
    extractor = Extractor(model, tokenizer, PREDICATES, max_length=32)
    texts = ["Jack  makes all work and no play, a dull boy.", "no play", "", "Dull boy, Jack!"]
    results = extractor.predict(texts, batch_size=8)
    assert [r["text"] for r in results] == texts
    assert triples_of(results[0]) == [
        ("Jack", "does", "work"), ("Jack", "is", "play"), ("Jack", "likes", "play"), ("dull boy", "is", "Jack"),
    ]
    assert results[1]["triples"] == [] and results[2]["triples"] == []
    assert triples_of(results[3]) == [("Dull boy", "is", "Jack")]
    for result in results:
        for t in result["triples"]:
            for part in ("subject", "object"):
                assert result["text"][t[part]["start"] : t[part]["end"]] == t[part]["text"]
            assert 0 < t["score"] <= 1


def test_long_text_windows_merge_and_dedupe(tokenizer):
    # 20 tokens; max_length 10 -> windows of 8 tokens moving by 5: [0, 8), [5, 13), [10, 18), [15, 20).
    words = ["a"] * 20
    words[5:7] = ["jack", "play"]  # in the overlap of windows 1 and 2: found twice, reported once
    words[16:19] = ["dull", "boy", "jack"]  # only in the last window
    text = " ".join(words)
    model = OracleModel(tokenizer)
    extractor = Extractor(model, tokenizer, PREDICATES, max_length=10, overlap=3)
    (result,) = extractor.predict([text], batch_size=2)
    assert extractor.windows_numpy([text])["token_ids"].shape[0] == 4
    assert triples_of(result) == [("dull boy", "is", "jack"), ("jack", "is", "play"), ("jack", "likes", "play")]
    jack = text.index("jack")
    assert [t["subject"]["start"] for t in result["triples"] if t["subject"]["text"] == "jack"] == [jack, jack]
    for t in result["triples"]:
        for part in ("subject", "object"):
            assert text[t[part]["start"] : t[part]["end"]] == t[part]["text"]


def test_predict_rejects_a_single_string(tokenizer):
    with pytest.raises(TypeError):
        Extractor(OracleModel(tokenizer), tokenizer, PREDICATES).predict("jack")
