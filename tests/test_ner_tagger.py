"""Tagger: labels <-> WordPieces through offsets, windows, decoding, scoring.

Uses an "oracle" model (tags computed from the token ids) so that windowing
and merging are checked exactly, without training anything.
"""

import numpy as np
import pytest

import kerasbert
from apps.ner.data import Entity
from apps.ner.data import Example
from apps.ner.evaluate import score
from apps.ner.evaluate import spans_to_unit_tags
from apps.ner.tagger import Tagger
from apps.ner.tagger import bio_tags
from apps.ner.tagger import windows

TAGS = bio_tags(["LOC", "PER"])  # O, B-LOC, I-LOC, B-PER, I-PER


@pytest.fixture(scope="module")
def tokenizer(minilm_dir):
    return kerasbert.load_tokenizer(minilm_dir)


class OracleModel:
    """Tags 'paris' as LOC and 'jean' '##ne'... as PER, by token id."""

    def __init__(self, tokenizer):
        self.loc = tokenizer.token_to_id("paris")
        self.per = tokenizer.token_to_id("peter")
        self.calls = []

    def predict_on_batch(self, x):
        ids = x["token_ids"]
        self.calls.append(ids.shape)
        tags = np.zeros(ids.shape, np.int32)
        tags[ids == self.loc] = TAGS.index("B-LOC")
        tags[ids == self.per] = TAGS.index("B-PER")
        potentials = np.zeros(ids.shape + (len(TAGS),), np.float32)
        potentials[..., 0] = 1.0
        return {"tags": tags, "potentials": potentials}


def test_windows_cover_everything_with_overlap():
    assert windows(5, 10, 8) == [(0, 5)]
    spans = windows(25, 10, 8)
    assert spans[0] == (0, 10) and spans[-1][1] == 25
    assert all(b[0] - a[0] == 8 for a, b in zip(spans, spans[1:]))


def test_features_align_labels_through_offsets_english_and_chinese(tokenizer):
    tagger = Tagger(OracleModel(tokenizer), tokenizer, TAGS, max_length=32)
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


def test_misaligned_and_unknown_entities_are_counted(tokenizer):
    tagger = Tagger(OracleModel(tokenizer), tokenizer, TAGS, max_length=32)
    example = Example("Parisville is nice", [Entity(0, 4, "LOC"), Entity(11, 13, "ORG")], "t:1", None)
    _, report = tagger.features([example])
    assert report.misaligned_entities == 1  # "Pari" ends inside the token "paris"
    assert report.unknown_types == {"ORG": 1}
    assert "not in the training labels" in report.summary()


def test_long_text_is_windowed_not_truncated(tokenizer):
    model = OracleModel(tokenizer)
    tagger = Tagger(model, tokenizer, TAGS, max_length=16, overlap=4)
    sentence = "Peter went to Paris again . "
    text = sentence * 30  # ~210 tokens, 16-token windows
    [result] = tagger.predict([text])
    assert max(shape[1] for shape in model.calls) <= 16
    expected = []
    for k in range(30):
        base = k * len(sentence)
        expected += [(base, base + 5, "PER"), (base + 14, base + 19, "LOC")]
    got = [(e["start"], e["end"], e["type"]) for e in result["entities"]]
    assert got == expected
    assert all(text[e["start"]:e["end"]] == e["text"] for e in result["entities"])


def test_predict_edge_cases(tokenizer):
    tagger = Tagger(OracleModel(tokenizer), tokenizer, TAGS, max_length=16)
    results = tagger.predict(["", "   ", "😀😀", "Paris"])
    assert [r["entities"] for r in results[:3]] == [[], [], []]
    assert results[3]["entities"][0]["text"] == "Paris"
    assert tagger.predict([]) == []


def test_decode_repairs_dangling_inside_tags(tokenizer):
    tagger = Tagger(OracleModel(tokenizer), tokenizer, TAGS)
    offsets = np.array([[0, 1], [2, 3], [4, 5], [6, 7]])
    tags = [TAGS.index(t) for t in ("I-LOC", "I-LOC", "B-PER", "I-LOC")]
    entities = tagger.decode("a b c d", offsets, tags)
    assert [(e["start"], e["end"], e["type"]) for e in entities] == [(0, 3, "LOC"), (4, 5, "PER"), (6, 7, "LOC")]


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
