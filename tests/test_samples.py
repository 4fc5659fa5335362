"""The sample corpora in kerasbert_apps/samples: read cleanly by the project's readers,
counts as in kerasbert_apps/samples/README.md, dev/test not a copy of train.

Fast: no model, no TensorFlow; only the readers.
"""

import json
import re
from collections import Counter
from pathlib import Path

import pytest

from kerasbert_apps.ner.readers import read_ner_file
from kerasbert_apps.triples.data import read_triples_file

SAMPLES = Path(__file__).resolve().parents[1] / "kerasbert_apps" / "samples"
README = SAMPLES / "README.md"
NER_SPLITS = ("train", "dev", "test")
TRIPLE_SPLITS = ("train", "dev")
TYPES = ("PER", "ORG", "LOC", "MISC")
PREDICATES = ("born_in", "capital_of", "ceo_of", "founded_by", "located_in", "member_of", "spouse_of", "works_for")

# The exact counts, also in the README tables (checked below).
NER_COUNTS = {
    "train": {"sentences": 400, "PER": 148, "ORG": 159, "LOC": 303, "MISC": 152, "entities": 762, "empty": 40},
    "dev": {"sentences": 80, "PER": 29, "ORG": 28, "LOC": 64, "MISC": 26, "entities": 147, "empty": 8},
    "test": {"sentences": 80, "PER": 31, "ORG": 27, "LOC": 61, "MISC": 28, "entities": 147, "empty": 8},
}
TRIPLE_COUNTS = {
    "train": {"sentences": 250, "triples": 381, "born_in": 52, "capital_of": 27, "ceo_of": 49, "founded_by": 45,
              "located_in": 54, "member_of": 56, "spouse_of": 27, "works_for": 71},
    "dev": {"sentences": 60, "triples": 92, "born_in": 15, "capital_of": 8, "ceo_of": 9, "founded_by": 8,
            "located_in": 13, "member_of": 14, "spouse_of": 9, "works_for": 16},
}


def ner_path(split):
    return SAMPLES / "ner" / f"{split}.jsonl"


def triples_path(split):
    return SAMPLES / "triples" / f"{split}.json"


@pytest.fixture(scope="module")
def ner():
    return {split: read_ner_file(ner_path(split)) for split in NER_SPLITS}


@pytest.fixture(scope="module")
def triples():
    return {split: read_triples_file(triples_path(split)) for split in TRIPLE_SPLITS}


def readme_row(name):
    """The integer cells of the README table row whose first cell is `name`."""
    for line in README.read_text(encoding="utf-8").splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if cells and cells[0] == f"`{name}`":
            return [int(c.replace(",", "")) for c in cells[1:]]
    raise AssertionError(f"no README row for {name}")


# ---------------------------------------------------------------------------
# NER


@pytest.mark.parametrize("split", NER_SPLITS)
def test_ner_file_reads_without_any_repair(ner, split):
    report = ner[split].report
    assert report.format == "kerasbert", report.summary()
    assert report.entities == report.entities_read, report.summary()
    assert report.skipped == {}, report.summary()
    assert report.overlaps == 0 and report.trimmed == 0, report.summary()
    assert report.tag_violations == {} and report.ignored == {}, report.summary()
    assert report.unannotated == 0 and report.notes == [], report.summary()
    assert set(report.types) == set(TYPES), report.summary()


@pytest.mark.parametrize("split", NER_SPLITS)
def test_ner_file_is_plain_kerasbert_json_lines(split):
    lines = ner_path(split).read_bytes().decode("utf-8").split("\n")
    assert lines[-1] == "" and all(lines[:-1]), "one object per line, LF, final newline"
    for line in lines[:-1]:
        record = json.loads(line)
        assert set(record) == {"text", "entities"}
        for entity in record["entities"]:
            assert set(entity) == {"start", "end", "type"}


@pytest.mark.parametrize("split", NER_SPLITS)
def test_ner_counts_match_the_readme(ner, split):
    examples, report = ner[split].examples, ner[split].report
    counts = {
        "sentences": len(examples),
        **{t: report.types.get(t, 0) for t in TYPES},
        "entities": report.entities,
        "empty": sum(1 for ex in examples if not ex.entities),
    }
    assert counts == NER_COUNTS[split]
    assert readme_row(f"ner/{split}.jsonl") == list(NER_COUNTS[split].values())


def test_ner_sizes_are_enough_to_learn_and_to_score(ner):
    assert len(ner["train"].examples) >= 300
    for split in ("dev", "test"):
        assert len(ner[split].examples) >= 60
    for t in TYPES:
        assert ner["train"].report.types[t] >= 40, t
        for split in ("dev", "test"):
            assert ner[split].report.types[t] >= 8, (split, t)
    for split in NER_SPLITS:
        examples = ner[split].examples
        empty = sum(1 for ex in examples if not ex.entities) / len(examples)
        assert 0.05 <= empty <= 0.2, (split, empty)


@pytest.mark.parametrize("split", NER_SPLITS)
def test_ner_mentions_are_whole_words_in_sentences_of_5_to_40_words(ner, split):
    for ex in ner[split].examples:
        assert 5 <= len(ex.text.split()) <= 40, ex.text
        for e in ex.entities:
            mention = ex.text[e.start:e.end]
            assert mention == mention.strip() and mention, (mention, ex.text)
            before = ex.text[e.start - 1] if e.start else " "
            after = ex.text[e.end] if e.end < len(ex.text) else " "
            assert not before.isalnum() and not after.isalnum(), (mention, ex.text)


def test_ner_dev_and_test_have_mentions_unseen_in_train(ner):
    seen = {ex.text[e.start:e.end] for ex in ner["train"].examples for e in ex.entities}
    for split in ("dev", "test"):
        mentions = [ex.text[e.start:e.end] for ex in ner[split].examples for e in ex.entities]
        unseen = sum(1 for m in mentions if m not in seen) / len(mentions)
        assert unseen >= 0.3, (split, unseen)


def test_ner_has_multiword_and_ambiguous_names(ner):
    train = ner["train"].examples
    multiword = [ex.text[e.start:e.end] for ex in train for e in ex.entities if " " in ex.text[e.start:e.end]]
    assert len(multiword) >= 100
    types_of = {}
    for ex in train:
        for e in ex.entities:
            types_of.setdefault(ex.text[e.start:e.end], set()).add(e.type)
    ambiguous = {m for m, ts in types_of.items() if len(ts) > 1}
    assert {"Jordan", "Washington", "Chelsea"} <= ambiguous, ambiguous


def test_no_ner_sentence_is_repeated_within_or_across_splits(ner):
    texts = [ex.text for split in NER_SPLITS for ex in ner[split].examples]
    assert len(texts) == len(set(texts)), [t for t, n in Counter(texts).items() if n > 1]


# ---------------------------------------------------------------------------
# Triples


@pytest.mark.parametrize("split", TRIPLE_SPLITS)
def test_triples_file_reads_without_any_repair(triples, split):
    report = triples[split].report
    assert report.format == "casrel", report.summary()
    assert report.triples == report.triples_read, report.summary()
    assert report.unfound == {} and report.duplicates == 0, report.summary()
    assert report.ambiguous == 0 and report.folded == 0 and report.inside_word == 0, report.summary()
    assert report.unannotated == 0 and report.empty == 0, report.summary()
    assert report.ignored == {} and report.notes == [], report.summary()
    assert all(not ex.unlocated for ex in triples[split].examples)


@pytest.mark.parametrize("split", TRIPLE_SPLITS)
def test_triples_file_is_a_casrel_json_array(split):
    records = json.loads(triples_path(split).read_text(encoding="utf-8"))
    assert isinstance(records, list)
    for record in records:
        assert set(record) == {"text", "triple_list"}
        for subject, predicate, obj in record["triple_list"]:
            assert predicate in PREDICATES
            for entity in (subject, obj):
                # verbatim, exactly once, at word boundaries
                hits = re.findall(r"(?<!\w)" + re.escape(entity) + r"(?!\w)", record["text"])
                assert len(hits) == 1 and record["text"].count(entity) == 1, (entity, record["text"])


@pytest.mark.parametrize("split", TRIPLE_SPLITS)
def test_triple_counts_match_the_readme(triples, split):
    examples, report = triples[split].examples, triples[split].report
    counts = {"sentences": len(examples), "triples": report.triples, **{p: report.predicates.get(p, 0) for p in PREDICATES}}
    assert counts == TRIPLE_COUNTS[split]
    assert readme_row(f"triples/{split}.json") == list(TRIPLE_COUNTS[split].values())


def test_triples_cover_every_predicate_and_the_overlap_cases(triples):
    assert len(triples["train"].examples) >= 200 and len(triples["dev"].examples) >= 50
    for p in PREDICATES:
        assert triples["train"].report.predicates[p] >= 20, p
        assert triples["dev"].report.predicates[p] >= 5, p
    for split, minimum in (("train", 5), ("dev", 1)):
        examples = triples[split].examples
        shared = 0  # triples of a sentence sharing an entity (single entity overlap)
        pair = 0  # one entity pair, two predicates (entity pair overlap)
        for ex in examples:
            entities = [span.text for t in ex.triples for span in (t.subject, t.object)]
            if len(ex.triples) > 1 and len(set(entities)) < len(entities):
                shared += 1
            pairs = [frozenset((t.subject.text, t.object.text)) for t in ex.triples]
            if len(set(pairs)) < len(pairs):
                pair += 1
        assert shared >= 10 * minimum, (split, shared)
        assert pair >= minimum, (split, pair)


def test_triples_dev_has_entities_unseen_in_train_and_no_repeated_sentence(triples):
    seen = {span.text for ex in triples["train"].examples for t in ex.triples for span in (t.subject, t.object)}
    dev = [span.text for ex in triples["dev"].examples for t in ex.triples for span in (t.subject, t.object)]
    assert sum(1 for e in dev if e not in seen) / len(dev) >= 0.3
    texts = [ex.text for split in TRIPLE_SPLITS for ex in triples[split].examples]
    assert len(texts) == len(set(texts))
