"""Triple scoring: exact / partial match, per predicate, CasRel's normal / SEO / EPO classes."""

import pytest

from kerasbert_apps.triples.data import Span
from kerasbert_apps.triples.data import Triple
from kerasbert_apps.triples.data import TripleExample
from kerasbert_apps.triples.evaluate import format_scores
from kerasbert_apps.triples.evaluate import overlap_classes
from kerasbert_apps.triples.evaluate import score


def gold(text, *triples, unlocated=()):
    out = []
    for s, p, o in triples:
        si, oi = text.index(s), text.index(o)
        out.append(Triple(Span(si, si + len(s), s), p, Span(oi, oi + len(o), o)))
    return TripleExample(text, out, "t:1", list(unlocated))


def pred(text, *triples):
    items = []
    for s, p, o in triples:
        si, oi = text.index(s), text.index(o)
        items.append({"subject": {"start": si, "end": si + len(s), "text": s}, "predicate": p,
                      "object": {"start": oi, "end": oi + len(o), "text": o}, "score": 0.9})
    return {"text": text, "triples": items}


def test_overlap_classes():
    assert overlap_classes({("A", "r", "B"), ("C", "r", "D")}) == {"normal"}
    assert overlap_classes({("A", "r", "B"), ("A", "q", "B")}) == {"EPO"}
    assert overlap_classes({("A", "r", "B"), ("B", "q", "A")}) == {"EPO"}  # same (unordered) pair
    assert overlap_classes({("A", "r", "B"), ("A", "r", "C")}) == {"SEO"}
    assert overlap_classes({("A", "r", "B"), ("A", "q", "B"), ("B", "s", "C")}) == {"SEO", "EPO"}


def test_exact_partial_per_predicate_and_classes():
    t1 = "Steve Bright created Bananaman in London ."
    t2 = "Iceland has the capital Reykjavik ."
    examples = [
        gold(t1, ("Bananaman", "creator", "Steve Bright"), ("Bananaman", "location", "London")),  # SEO
        gold(t2, ("Iceland", "capital", "Reykjavik"), ("Iceland", "contains", "Reykjavik"),  # EPO
             unlocated=[("Iceland", "anthem", "Lofsöngur")]),
    ]
    predictions = [
        pred(t1, ("Bananaman", "creator", "Bright"), ("Bananaman", "location", "London")),
        pred(t2, ("Iceland", "capital", "Reykjavik"), ("Reykjavik", "capital", "Iceland")),
    ]
    s = score(examples, predictions)
    assert s["mode"] == "exact"
    assert (s["exact"]["correct"], s["exact"]["predicted"], s["exact"]["gold"]) == (2, 4, 5)
    assert s["f1"] == pytest.approx(2 * 0.5 * 0.4 / 0.9)
    # partial: "Bright" is the last word of "Steve Bright"
    assert (s["partial"]["correct"], s["partial"]["gold"]) == (3, 5)
    assert s["unlocated_gold"] == 1
    assert s["per_predicate"]["creator"] == {"precision": 0.0, "recall": 0.0, "f1": 0.0, "correct": 0, "predicted": 1, "gold": 1}
    assert s["per_predicate"]["capital"]["correct"] == 1 and s["per_predicate"]["capital"]["predicted"] == 2
    assert s["per_predicate"]["anthem"]["gold"] == 1
    assert s["by_overlap"]["SEO"]["sentences"] == 2  # Iceland has several partners in sentence 2 too
    assert s["by_overlap"]["EPO"]["sentences"] == 1 and s["by_overlap"]["EPO"]["gold"] == 3
    assert s["by_overlap"]["normal"]["sentences"] == 0
    assert s["by_triple_count"]["2"]["sentences"] == 1 and s["by_triple_count"]["3"]["sentences"] == 1
    assert score(examples, predictions, mode="partial")["f1"] == pytest.approx(s["partial"]["f1"])
    table = format_scores(s)
    assert "exact" in table and "partial" in table and "SEO" in table and "creator" in table


def test_duplicates_count_once_and_empty_is_zero():
    t = "A r B ."
    examples = [gold(t, ("A", "r", "B"))]
    s = score(examples, [pred(t, ("A", "r", "B"), ("A", "r", "B"))])
    assert s["precision"] == s["recall"] == s["f1"] == 1.0
    s = score(examples, [{"text": t, "triples": []}])
    assert s["precision"] == s["recall"] == s["f1"] == 0.0


def test_arguments_are_checked():
    with pytest.raises(ValueError, match="mode"):
        score([], [], mode="loose")
    with pytest.raises(ValueError, match="predictions"):
        score([gold("a b", ("a", "r", "b"))], [])
