"""Tagger: labels <-> WordPieces through offsets, windows, decoding, scoring.

Uses an "oracle" Keras model (tags computed from the token ids with
``keras.ops``) so that windowing, merging and decoding -- the one TensorFlow
path that ``predict`` and the SavedModel share -- are checked exactly,
without training anything.
"""

import keras
import numpy as np
import pytest
import tensorflow as tf
from keras import ops

import kerasbert
from kerasbert_apps.base.model import encoder_inputs
from kerasbert_apps.ner.evaluate import score
from kerasbert_apps.ner.examples import Entity
from kerasbert_apps.ner.examples import Example
from kerasbert_apps.ner.heads.bio.decode import entities
from kerasbert_apps.ner.heads.bio.decode import tag_tables
from kerasbert_apps.ner.heads.bio.pipeline import Tagger
from kerasbert_apps.ner.tags import bio_tags
from kerasbert_apps.ner.tags import spans_to_unit_tags

TAGS = bio_tags(["LOC", "PER"])  # O, B-LOC, I-LOC, B-PER, I-PER


@pytest.fixture(scope="module")
def tokenizer(minilm_dir):
    return kerasbert.load_tokenizer(minilm_dir)


class Oracle(keras.layers.Layer):
    """Tags 'paris' as B-LOC and 'peter' as B-PER, by token id."""

    def __init__(self, loc, per, **kwargs):
        super().__init__(**kwargs)
        self.loc, self.per = loc, per

    def call(self, ids):
        tags = ops.where(ids == self.loc, TAGS.index("B-LOC"), ops.where(ids == self.per, TAGS.index("B-PER"), 0))
        potentials = ops.one_hot(ops.zeros_like(ids), len(TAGS))
        return {"tags": ops.cast(tags, "int32"), "potentials": potentials}


def oracle_model(tokenizer):
    inputs = encoder_inputs()
    oracle = Oracle(tokenizer.token_to_id("paris"), tokenizer.token_to_id("peter"))
    return keras.Model(inputs, oracle(inputs["token_ids"]))


def test_features_align_labels_through_offsets_english_and_chinese(tokenizer):
    tagger = Tagger(oracle_model(tokenizer), tokenizer, TAGS, max_length=32)
    english = Example("Peter Blackburn visited Parisville", [Entity(0, 15, "PER"), Entity(24, 34, "LOC")], "t:1", None)
    chinese = Example("李白在北京", [Entity(0, 2, "PER"), Entity(3, 5, "LOC")], "t:2", None)
    feats, report = tagger.features([english, chinese])
    tokens = [tokenizer.id_to_token(i) for i in feats["token_ids"][0]]
    tags = [TAGS[t] for t in feats["tags"][0]]
    pairs = list(zip(tokens, tags))
    assert pairs[0] == ("[CLS]", "O") and pairs[-1] == ("[SEP]", "O")
    assert pairs[1] == ("peter", "B-PER") and all(t == "I-PER" for _, t in pairs[2:pairs.index(("visited", "O"))])
    loc = [t for t in tags if t.endswith("LOC")]
    assert loc[0] == "B-LOC" and set(loc[1:]) <= {"I-LOC"} and len(loc) >= 2  # paris ##ville
    zh = [TAGS[t] for t in feats["tags"][1]]
    assert zh == ["O", "B-PER", "I-PER", "O", "B-LOC", "I-LOC", "O"]  # one token per character
    assert report.entities == 4 and report.misaligned_entities == 0
    assert [len(r) for r in feats["token_ids"]] == [len(r) for r in feats["tags"]] == [len(r) for r in feats["padding_mask"]]


def test_misaligned_and_unknown_entities_are_counted(tokenizer):
    tagger = Tagger(oracle_model(tokenizer), tokenizer, TAGS, max_length=32)
    example = Example("Parisville is nice", [Entity(0, 4, "LOC"), Entity(11, 13, "ORG")], "t:1", None)
    _, report = tagger.features([example])
    assert report.misaligned_entities == 1  # "Pari" ends inside the token "paris"
    assert report.unknown_types == {"ORG": 1}
    assert "not in the training labels" in report.summary()


def test_windowed_features_restart_an_entity_cut_by_a_window(tokenizer):
    tagger = Tagger(oracle_model(tokenizer), tokenizer, TAGS, max_length=8, overlap=2)  # 6 tokens, stride 4
    text = "a b c d e Peter Blackburn Smith Jones went home"  # 11 tokens: windows [0, 6), [4, 10), [8, 11)
    example = Example(text, [Entity(10, 37, "PER")], "t:1", None)  # "Peter ... Jones": tokens 5-8
    feats, report = tagger.features([example])
    rows = [[TAGS[t] for t in tags] for tags in feats["tags"]]
    assert rows == [
        ["O", "O", "O", "O", "O", "O", "B-PER", "O"],
        ["O", "O", "B-PER", "I-PER", "I-PER", "I-PER", "O", "O"],
        ["O", "B-PER", "O", "O", "O"],  # the window starting inside the entity starts it again
    ]
    assert report.windows == 3 and report.entities == 1 and report.entities_split_by_windows == 1


def test_long_text_is_windowed_not_truncated(tokenizer):
    tagger = Tagger(oracle_model(tokenizer), tokenizer, TAGS, max_length=16, overlap=4)
    sentence = "Peter went to Paris again . "
    text = sentence * 30  # ~210 tokens, 16-token windows
    assert tagger.windows_numpy([text])["token_ids"].shape[1] <= 16
    [result] = tagger.predict([text])
    expected = []
    for k in range(30):
        base = k * len(sentence)
        expected += [(base, base + 5, "PER"), (base + 14, base + 19, "LOC")]
    got = [(e["start"], e["end"], e["type"]) for e in result["entities"]]
    assert got == expected
    assert all(text[e["start"]:e["end"]] == e["text"] for e in result["entities"])


def test_predict_edge_cases(tokenizer):
    tagger = Tagger(oracle_model(tokenizer), tokenizer, TAGS, max_length=16)
    results = tagger.predict(["", "   ", "😀😀", "Paris"])
    assert [r["entities"] for r in results[:3]] == [[], [], []]
    assert results[3]["entities"][0]["text"] == "Paris"
    assert tagger.predict([]) == []
    with pytest.raises(TypeError):
        tagger.predict("Paris")


def decode(text, offsets, tag_names, probs=None):
    """One text of one window through the TensorFlow decoding (softmax head);
    ``probs``: each token's tag distribution (default: sure of its tag)."""
    n = len(tag_names)
    windows = {
        "token_ids": tf.zeros([1, n + 2], tf.int32),
        "offsets": tf.constant([[(0, 0)] + offsets + [(0, 0)]], tf.int32),
        "text_index": tf.constant([0]), "token_start": tf.constant([0]), "token_end": tf.constant([n]),
        "num_tokens": tf.constant([n]),
    }
    tags = tf.constant([[0] + [TAGS.index(t) for t in tag_names] + [0]], tf.int32)
    if probs is None:
        probs = np.eye(len(TAGS))[[TAGS.index(t) for t in tag_names]] * 0.999 + 0.001 / len(TAGS)
    sure_o = np.eye(len(TAGS))[[0]] * (1 - 1e-9 * len(TAGS)) + 1e-9  # [CLS] and [SEP]
    potentials = tf.constant(np.log(np.concatenate([sure_o, probs, sure_o]))[None], tf.float32)
    out = entities(tf.constant([text]), windows, tags, potentials, tag_tables(TAGS))
    count = int(out["count"][0])
    return [(int(out["start"][0, k]), int(out["end"][0, k]), out["type"][0, k].numpy().decode(),
             out["mention"][0, k].numpy().decode(), float(out["score"][0, k])) for k in range(count)]


def test_decode_repairs_dangling_inside_tags():
    offsets = [(0, 1), (2, 3), (4, 5), (6, 7)]
    got = decode("a b c d", offsets, ["I-LOC", "I-LOC", "B-PER", "I-LOC"])
    assert [(s, e, t, m) for s, e, t, m, _ in got] == [(0, 3, "LOC", "a b"), (4, 5, "PER", "c"), (6, 7, "LOC", "d")]


def test_decode_scores_are_entity_probabilities_under_token_softmaxes_and_b_splits():
    """Softmax head: P(first token begins the entity: B-X, or I-X after
    neither B-X nor I-X) x P(I-X) per following token x P(next is not I-X)."""
    offsets = [(0, 5), (6, 11), (12, 17), (18, 23)]
    rng = np.random.default_rng(0)
    probs = rng.dirichlet(np.ones(len(TAGS)), size=4)
    got = decode("aaaaa bbbbb ccccc ddddd", offsets, ["B-PER", "I-PER", "B-PER", "O"], probs=probs)
    assert [(s, e) for s, e, *_ in got] == [(0, 11), (12, 17)]
    b, i = TAGS.index("B-PER"), TAGS.index("I-PER")
    first = (probs[0, b] + probs[0, i]) * probs[1, i] * (1 - probs[2, i])  # [CLS] before it is surely O
    second = (probs[2, b] + probs[2, i] * (1 - probs[1, b] - probs[1, i])) * (1 - probs[3, i])
    np.testing.assert_allclose([p for *_, p in got], [first, second], atol=1e-6)


def test_windows_merge_takes_each_token_from_its_most_central_window(tokenizer):
    """Tokens in the overlap of two windows take the tag of the window where
    they are further from a cut edge: an oracle that only tags in the first
    two positions of a row shows which window each token came from."""

    class FirstPositions(keras.layers.Layer):
        def call(self, ids):
            positions = ops.arange(ops.shape(ids)[1])[None, :] + ops.zeros_like(ids)
            tags = ops.where(positions == 1, TAGS.index("B-LOC"), ops.where(positions == 2, TAGS.index("I-LOC"), 0))
            return {"tags": ops.cast(tags, "int32"), "potentials": ops.one_hot(ops.zeros_like(ids), len(TAGS))}

    inputs = encoder_inputs()
    tagger = Tagger(keras.Model(inputs, FirstPositions()(inputs["token_ids"])), tokenizer, TAGS, max_length=10,
                    overlap=4)  # windows of 8 tokens at 0, 4, 8, ...
    text = " ".join(["the"] * 24)  # 24 tokens: windows [0, 8), [4, 12), ..., [16, 24)
    assert tagger.windows_numpy([text])["token_start"].tolist() == [0, 4, 8, 12, 16]
    [result] = tagger.predict([text])
    # Window 0 tags its tokens 0-1; each later window tags its first two, but those sit on
    # its cut edge (margin 0 or 1), where the previous window is more central (margin 3, 2).
    assert [(e["start"], e["end"], e["text"]) for e in result["entities"]] == [(0, 7, "the the")]


def test_unit_tags_and_perfect_score():
    words = [(0, 5), (6, 15), (16, 23)]
    assert spans_to_unit_tags(words, [{"start": 0, "end": 15, "type": "PER"}]) == ["B-PER", "I-PER", "O"]
    # a span that ends inside a word covers the word
    assert spans_to_unit_tags(words, [{"start": 8, "end": 10, "type": "X"}]) == ["O", "B-X", "O"]
    example = Example("Peter Blackburn visited", [Entity(0, 15, "PER")], "t:1", words)
    perfect = score([example], [{"entities": [{"start": 0, "end": 15, "type": "PER"}]}])
    assert perfect["f1"] == 1.0 and perfect["strict"]["f1"] == 1.0
    wrong = score([example], [{"entities": [{"start": 0, "end": 5, "type": "PER"}]}])
    assert wrong["f1"] == 0.0 and wrong["predicted_entities"] == 1


def test_saved_tagger_loads_from_the_model_folder_or_the_run_folder(tokenizer, tmp_path, capsys):
    from kerasbert_apps.ner.heads.bio.model import NerModel
    from kerasbert.models.encoder import BertEncoder
    from kerasbert.errors import KerasbertError

    encoder = BertEncoder(vocabulary_size=len(tokenizer.vocab), num_layers=1, num_heads=2, hidden_dim=16,
                          intermediate_dim=32, max_sequence_length=64)
    tagger = Tagger(NerModel(encoder, len(TAGS), lstm_units=4), tokenizer, TAGS, max_length=16)
    tagger.save(tmp_path / "run" / "model")
    # What it predicts after a round trip is the head contract's check
    # (kerasbert_apps.testing); here: both folders load the same weights.
    want = [np.asarray(w) for w in tagger.model.weights]
    for folder in (tmp_path / "run" / "model", tmp_path / "run"):
        loaded = Tagger.load(folder, verbose=True)
        assert capsys.readouterr().err.strip() == f"model: {tmp_path / 'run' / 'model'}"
        assert (loaded.tags, loaded.max_length, loaded.overlap) == (TAGS, 16, tagger.overlap)
        assert len(loaded.model.weights) == len(want)
        for a, b in zip(loaded.model.weights, want):
            np.testing.assert_array_equal(np.asarray(a), b, err_msg=a.path)
    with pytest.raises(KerasbertError, match="nor a training output folder"):
        Tagger.load(tmp_path)


# --- entity scores: probabilities from the window's potentials -----------------


def _forward_log_norm(potentials, transitions, start):
    """log Z of one row by the plain forward recursion (numpy, float64)."""
    alpha = potentials[0] + start
    for unary in potentials[1:]:
        alpha = np.logaddexp.reduce(alpha[:, None] + transitions, axis=0) + unary
    return np.logaddexp.reduce(alpha)


def entity_probability_by_clamping(potentials, transitions, start, s, e, b, c):
    """P(positions s..e read as one entity B-X/I-X) as a ratio of partition
    functions over clamped lattices: {y_s = B} + {y_{s-1} not B/I, y_s = I},
    then y_{s+1..e} = I and y_{e+1} != I."""
    never = -1e9

    def clamped(first, before=None):
        p = potentials.astype(np.float64).copy()
        keep = np.full(p.shape, False)
        keep[s, first] = True
        keep[s + 1:e + 1, c] = True
        p[s:e + 1][~keep[s:e + 1]] = never
        if e + 1 < len(p):
            p[e + 1, c] = never
        if before is not None:
            p[s - 1, before] = never
        return _forward_log_norm(p, transitions, start)

    log_z = _forward_log_norm(potentials.astype(np.float64), transitions, start)
    return np.exp(np.logaddexp(clamped(b), clamped(c, before=[b, c])) - log_z)


# "softmax" (no CRF) works too; its arithmetic is checked by
# test_decode_scores_are_entity_probabilities_under_token_softmaxes_and_b_splits.
@pytest.fixture(scope="module", params=["crf"])
def small_tagger(request, tokenizer):
    """A small random NER model that predicts many entities (emission biases
    pushed towards entity tags), with the BIO-constrained CRF or without CRF."""
    from kerasbert_apps.ner.heads.bio.model import NerModel
    from kerasbert.layers.crf import allowed_transitions
    from kerasbert.models.encoder import BertEncoder

    keras.utils.set_random_seed(11)
    encoder = BertEncoder(vocabulary_size=len(tokenizer.vocab), num_layers=1, num_heads=2, hidden_dim=16,
                          intermediate_dim=32, max_sequence_length=64)
    use_crf = request.param == "crf"
    allowed, allowed_start = (a.tolist() for a in allowed_transitions(TAGS, "BIO"))
    model = NerModel(encoder, len(TAGS), lstm_units=8, use_crf=use_crf,
                     allowed=allowed if use_crf else None, allowed_start=allowed_start if use_crf else None)
    kernel, bias = model.emissions.get_weights()
    rng = np.random.default_rng(0)
    model.emissions.set_weights([rng.normal(0, 1.0, kernel.shape), bias + np.array([0.5, 0.8, 0.8, 0.8, 0.8])])
    if use_crf:
        model.crf.transitions.assign(rng.normal(0, 1.0, (len(TAGS), len(TAGS))).astype("float32"))
    return Tagger(model, tokenizer, TAGS, max_length=32)


def _numpy_lattice(model):
    """(transitions, first-tag scores) as numpy, constraints as -1e9 (hard zeros)."""
    num_tags = len(TAGS)
    if model.crf is None:
        return np.zeros((num_tags, num_tags)), np.zeros(num_tags)
    return (np.where(np.array(model.crf.allowed), np.asarray(model.crf.transitions), -1e9),
            np.where(np.array(model.crf.allowed_start), 0.0, -1e9))


@pytest.mark.parametrize("temperature", [1.0, 1.7])
def test_entity_scores_are_the_windows_entity_probabilities(small_tagger, temperature):
    """Each entity's float32 score equals (1e-5) the probability of its
    labelling computed in numpy from its window's potentials by clamping (the
    CRF's transitions with the BIO constraints as hard zeros, or independent
    softmaxes), with potentials and transitions divided by the score
    temperature; ``predict`` gives them rounded (in a batch of another
    shape); scores of a long, windowed
    text lie in [0, 1]. A temperature changes no entity, and
    ``score_outcomes`` (what ``calibrate`` fits on) gives the same scores at
    any temperature without running the model again."""
    tagger = Tagger.from_settings(small_tagger.model, small_tagger.tokenizer,
                                  {**small_tagger.settings(), "temperature": temperature})
    texts = ["Peter Blackburn met Acme Corp in Paris on Monday.", "Alice and Bob flew to New York City.",
             "The European Commission said on Thursday it disagreed with German advice."]
    long_text = " ".join(f"Peter{i} met Acme in Paris, day {i}." for i in range(30))
    out = tagger.serving_function(tf.constant(texts + [long_text]))
    count, scores = out["count"].numpy(), out["score"].numpy()
    assert count[3] > 10 and ((scores[3, :count[3]] >= 0) & (scores[3, :count[3]] <= 1)).all()
    assert (scores[3, :count[3]] > 0.01).any()
    plain = small_tagger.serving_function(tf.constant(texts + [long_text]))
    for name in ("count", "start", "end", "type"):
        np.testing.assert_array_equal(out[name].numpy(), plain[name].numpy())

    windows = tagger.windows_numpy(texts)
    assert (np.bincount(windows["text_index"]) == 1).all()  # one window each: positions are exact
    rows = {k: windows[k] for k in ("token_ids", "segment_ids", "padding_mask")}
    potentials = np.asarray(tagger.model.predict_on_batch(rows)["potentials"], np.float64) / temperature
    transitions, start = _numpy_lattice(tagger.model)
    for r in range(len(texts)):
        n = int(windows["num_tokens"][r])
        offsets = windows["offsets"][r, 1:n + 1]
        for k in range(count[r]):
            s = 1 + int(np.nonzero(offsets[:, 0] == out["start"][r, k].numpy())[0][0])
            e = 1 + int(np.nonzero(offsets[:, 1] == out["end"][r, k].numpy())[0][-1])
            kind = out["type"][r, k].numpy().decode()
            want = entity_probability_by_clamping(potentials[r, :n + 2], transitions / temperature, start, s, e,
                                                  TAGS.index("B-" + kind), TAGS.index("I-" + kind))
            assert scores[r, k] == pytest.approx(want, abs=1e-5)
    assert count[:3].sum() >= 5
    predicted = tagger.predict(texts)
    # predict runs the texts as another batch (another padded shape): the same scores to float32's
    # batch-to-batch noise, rounded to 4 places.
    got = [[e["score"] for e in p["entities"]] for p in predicted]
    assert [len(g) for g in got] == list(count[:3])
    for r, row in enumerate(got):
        assert all(round(x, 4) == x for x in row)
        assert row == pytest.approx([float(x) for x in scores[r, :count[r]]], abs=1e-4)

    all_texts = texts + [long_text]
    scores_at, correct = small_tagger.score_outcomes([Example(t, [], "test") for t in all_texts], batch_size=2)
    assert correct.size == count.sum() and not correct.any()  # no gold entities: every prediction is wrong
    by_length = sorted(range(len(all_texts)), key=lambda i: len(all_texts[i]))  # the order score_outcomes keeps
    np.testing.assert_allclose(scores_at(temperature), [x for i in by_length for x in scores[i, :count[i]]],
                               atol=2e-5)


def test_calibrate_cli_fits_a_bio_taggers_temperature_and_changes_no_entity(small_tagger, tmp_path, capsys):
    """``ner calibrate`` on a CRF tagger, with every other predicted entity
    gold (so some are right, some wrong): a temperature is fitted and written
    into tagger.json; the entities stay; the scores' log-loss on the file
    does not grow."""
    import json

    from kerasbert_apps.ner.calibration import entity_outcomes
    from kerasbert_apps.ner.calibration import log_loss
    from kerasbert_apps.ner.train import NER
    from kerasbert_apps.ner.train import NerTrainSettings
    from kerasbert.cli import main

    texts = ["Peter Blackburn met Acme Corp in Paris on Monday.", "Alice and Bob flew to New York City.",
             "The European Commission said on Thursday it disagreed with German advice.",
             "Rain fell over Lyon and Marseille while Jean Dupont slept."]
    model = tmp_path / "model"
    small_tagger.save(model)  # temperature 1
    before = small_tagger.predict(texts)
    data = tmp_path / "dev.jsonl"
    data.write_text("".join(json.dumps({"text": t, "entities": [
        {k: e[k] for k in ("start", "end", "type")} for e in p["entities"][::2]]}) + "\n"
        for t, p in zip(texts, before)), encoding="utf-8")
    capsys.readouterr()
    assert main(["ner", "calibrate", "--model", str(model), "--data", str(data)]) == 0
    out = capsys.readouterr().out
    assert "score temperature" in out and "entities unchanged" in out and f"written: {model / 'tagger.json'}" in out
    calibrated = Tagger.load(model)
    assert calibrated.temperature != 1.0
    assert json.loads((model / "tagger.json").read_text())["temperature"] == calibrated.temperature
    after = calibrated.predict(texts)
    spans = lambda results: [[(e["start"], e["end"], e["type"]) for e in r["entities"]] for r in results]  # noqa: E731
    assert spans(after) == spans(before)
    examples = NER.read(data, NerTrainSettings())
    scores_before, correct, _ = entity_outcomes(examples, before)
    scores_after, _, _ = entity_outcomes(examples, after)
    assert 0 < correct.sum() < correct.size and np.abs(scores_after - scores_before).max() > 0.01
    assert log_loss(scores_after, correct) <= log_loss(scores_before, correct) + 1e-3


def test_tensorflow_entity_probabilities_equal_the_keras_ops_crf():
    """kerasbert_apps.ner.heads.bio.decode.entity_log_probabilities (TensorFlow, inference) is the
    twin of kerasbert.layers.crf.crf_segment_log_probability (keras.ops)."""
    import tensorflow as tf

    from kerasbert.layers import crf
    from kerasbert_apps.ner.heads.bio.decode import entity_log_probabilities

    rng = np.random.default_rng(3)
    potentials = rng.normal(size=(3, 7, 5)).astype(np.float32) * 2
    lengths = np.array([7, 4, 6], np.int32)
    transitions = rng.normal(size=(5, 5)).astype(np.float32)
    allowed, allowed_start = crf.allowed_transitions(TAGS, "BIO")
    segments = [(0, 1, 3, 1, 2, True), (0, 6, 6, 3, 4, True), (1, 0, 3, 3, 4, False), (1, 2, 2, 1, 2, True),
                (2, 1, 1, 1, 2, True), (2, 3, 5, 3, 4, True), (2, 2, 4, 1, 2, False)]
    rows, starts, ends, b, c, closed = (np.array(x) for x in zip(*segments))
    for constraints in ((None, None), (allowed, allowed_start)):
        want = ops.convert_to_numpy(crf.crf_segment_log_probability(
            potentials, lengths, transitions, rows, starts, ends, b, c, closed, *constraints))
        params = (tf.constant(transitions), *(None if x is None else tf.constant(x) for x in constraints))
        got = entity_log_probabilities(tf.constant(potentials), tf.constant(lengths), *(
            tf.constant(x.astype(np.int32)) for x in (rows, starts, ends, b, c)), tf.constant(closed), params).numpy()
        np.testing.assert_allclose(got, want, atol=1e-5)
        np.testing.assert_allclose(entity_log_probabilities(
            tf.constant(potentials), tf.constant(lengths), *(tf.constant(x.astype(np.int32)) for x in (
                rows, starts, ends, b, c)), tf.constant(closed), None).numpy(),
            ops.convert_to_numpy(crf.crf_segment_log_probability(
                potentials, lengths, np.zeros((5, 5), np.float32), rows, starts, ends, b, c, closed)), atol=1e-5)


def test_a_vocabulary_that_does_not_cover_the_text_is_said_in_the_report(tokenizer):
    """The starter's English vocabulary reads most characters of Chinese text as [UNK]: the
    training report counts them and says what to use instead; English text gets no such line."""
    tagger = Tagger(oracle_model(tokenizer), tokenizer, TAGS, max_length=32)
    _, english = tagger.features([Example("Peter Blackburn visited Parisville", [], "t:1", None)])
    assert english.unknown_tokens == 0 and english.tokens > 0 and "[UNK]" not in english.summary()
    _, chinese = tagger.features([Example("鑫淼犇骉在鄱阳湖畔", [], "t:1", None)])
    assert chinese.tokens == 9 and chinese.unknown_tokens >= 4, (chinese.tokens, chinese.unknown_tokens)
    last = chinese.summary().splitlines()[-1]
    assert last.startswith(f"  {chinese.unknown_tokens} of 9 tokens (") and "kerasbert pretrain --from-scratch" in last
