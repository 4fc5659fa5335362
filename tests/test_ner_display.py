"""kerasbert_apps.ner.display: highlighted entities and error-analysis rows (no model needed)."""

import re

import numpy as np
import pytest

from kerasbert_apps.ner.examples import Entity
from kerasbert_apps.ner.examples import Example
from kerasbert_apps.ner.display import HTML
from kerasbert_apps.ner.display import entities_html
from kerasbert_apps.ner.display import errors
from kerasbert_apps.ner.display import errors_html
from kerasbert_apps.ner.display import render


def marks(html):
    """``[(mention, label)]`` of each <mark> (tags stripped, entities unescaped)."""
    import html as html_module

    found = re.findall(r"<mark[^>]*>(.*?)<span[^>]*>(.*?)</span></mark>", html)
    return [(html_module.unescape(m), html_module.unescape(t)) for m, t in found]


def test_marks_each_entity_with_its_type_and_color():
    text = "Maria Sanchez joined Siemens in Munich."
    entities = [{"start": 21, "end": 28, "type": "ORG", "score": 0.91},
                {"start": 0, "end": 13, "type": "PER"},  # any order
                Entity(32, 38, "LOC")]                    # objects work too
    html = entities_html(text, entities, colors={"LOC": "#123456"})
    assert isinstance(html, str) and html._repr_html_() == html
    assert marks(html) == [("Maria Sanchez", "PER"), ("Siemens", "ORG"), ("Munich", "LOC")]
    assert "#123456" in html and "#aa9cfc" in html  # override, displaCy's PER colour
    assert 'title="ORG 0.91"' in html
    assert re.sub(r"<[^>]+>", "", html).replace("PER", "").replace("ORG", "").replace("LOC", "") == text


def test_text_and_labels_are_escaped():
    text = '<script>alert("x")</script> & Bob <b>'
    html = entities_html(text, [{"start": 30, "end": 33, "type": "<PER>"}])
    assert "<script>" not in html and "<b>" not in html and "<PER>" not in html
    assert "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt; &amp; " in html
    assert marks(html) == [("Bob", "<PER>")]


def test_offsets_are_python_string_indices_cjk_and_emoji():
    text = "😀 李白在北京见到了🎉 Zoë Martín"
    spans = [(2, 4, "PER"), (5, 7, "LOC"), (12, 22, "PER")]
    assert len(text) == 22  # code points: each emoji is one index
    html = entities_html(text, [{"start": s, "end": e, "type": t} for s, e, t in spans])
    assert marks(html) == [(text[s:e], t) for s, e, t in spans]
    assert [m for m, _ in marks(html)] == ["李白", "北京", "Zoë Martín"]
    assert "😀" in html and "🎉" in html  # not mangled; surrogate pairs would be a bug here
    # numpy integers (as from offsets arrays) are fine too
    assert marks(entities_html(text, [{"start": np.int32(2), "end": np.int64(4), "type": "PER"}])) == [("李白", "PER")]
    assert 'title="PER 0.50"' in entities_html("Ann", [{"start": 0, "end": 3, "type": "PER", "score": np.float32(0.5)}])


def test_newlines_become_line_breaks():
    assert "Paris<br>Rome" in entities_html("Paris\nRome", [])


@pytest.mark.parametrize("entities, message", [
    ([{"start": 0, "end": 5, "type": "PER"}, {"start": 3, "end": 8, "type": "ORG"}], "overlapping"),
    ([{"start": 0, "end": 5, "type": "PER"}, {"start": 0, "end": 5, "type": "ORG"}], "overlapping"),
    ([{"start": 2, "end": 40, "type": "PER"}], "out of range"),
    ([{"start": -1, "end": 2, "type": "PER"}], "out of range"),
    ([{"start": 3, "end": 3, "type": "PER"}], "empty"),
    ([{"start": 1.0, "end": 2, "type": "PER"}], "integers"),
    ([{"start": 1, "end": 2, "type": ""}], "no type"),
])
def test_bad_entities_raise_naming_the_problem(entities, message):
    with pytest.raises(ValueError, match=message):
        entities_html("Alice Bobson", entities)


def test_overlap_message_names_both_entities():
    with pytest.raises(ValueError) as info:
        entities_html("Bank of Japan", [{"start": 0, "end": 7, "type": "ORG"}, {"start": 5, "end": 13, "type": "LOC"}])
    assert "'Bank of'" in str(info.value) and "'of Japan'" in str(info.value)


def test_render_joins_predictions_and_gold_examples():
    predictions = [{"text": "Ann met Bob.", "entities": [{"start": 0, "end": 3, "type": "PER", "score": 1.0}]},
                   {"text": "Nothing here.", "entities": []}]
    shown = render(predictions)
    assert isinstance(shown, HTML) and "<mark" in shown._repr_html_()
    assert shown.count('class="kerasbert-entities"') == 2 and "Nothing here." in shown
    gold = Example("Ann met Bob.", [Entity(0, 3, "PER"), Entity(8, 11, "PER")], "x:1")
    assert marks(render([gold])) == [("Ann", "PER"), ("Bob", "PER")]
    assert marks(render(gold)) == marks(render([gold]))  # a single item


def _example(text, *entities):
    return Example(text, [Entity(*e) for e in entities], "test:1")


def _prediction(text, *entities):
    return {"text": text, "entities": [{"start": s, "end": e, "type": t, "text": text[s:e], "score": 0.9}
                                       for s, e, t in entities]}


def test_errors_finds_each_kind():
    text = "Jordan beat Ford at the Bank of Japan Cup in Paris."
    examples = [
        _example(text, (0, 6, "PER"), (12, 16, "PER"), (24, 41, "MISC"), (45, 50, "LOC")),
        _example("All good here in Rome.", (17, 21, "LOC")),
    ]
    predictions = [
        _prediction(text, (0, 6, "LOC"), (24, 37, "ORG"), (45, 50, "LOC"), (20, 23, "ORG")),
        _prediction("All good here in Rome.", (17, 21, "LOC")),
    ]
    rows = errors(examples, predictions)
    got = [(r["kind"], r["span"], r["gold_type"], r["predicted_type"], r["mention"]) for r in rows]
    assert got == [
        ("wrong type", (0, 6), "PER", "LOC", "Jordan"),
        ("missed", (12, 16), "PER", None, "Ford"),
        ("spurious", (20, 23), None, "ORG", "the"),
        ("spurious", (24, 37), None, "ORG", "Bank of Japan"),   # boundary error: spurious + missed
        ("missed", (24, 41), "MISC", None, "Bank of Japan Cup"),
    ]
    assert all(r["text"] == text for r in rows)
    assert set(rows[0]) == {"text", "kind", "span", "gold_type", "predicted_type", "mention"}


def test_errors_on_dict_examples_and_perfect_predictions():
    gold = [{"text": "Ann met Bob.", "entities": [{"start": 0, "end": 3, "type": "PER"}]}]
    assert errors(gold, [_prediction("Ann met Bob.", (0, 3, "PER"))]) == []


def test_errors_refuses_misaligned_inputs():
    with pytest.raises(ValueError, match="1 examples but 2 predictions"):
        errors([_example("a")], [_prediction("a"), _prediction("b")])
    with pytest.raises(ValueError, match="another text"):
        errors([_example("Ann")], [_prediction("Bob")])


def test_errors_html_table_limit_and_escaping():
    text = "<i>Ann</i> met Bob & Carl."
    rows = errors([_example(text, (3, 6, "PER"), (15, 18, "PER"), (21, 25, "PER"))],
                  [_prediction(text, (3, 6, "ORG"), (11, 14, "PER"))])
    assert [r["kind"] for r in rows] == ["wrong type", "spurious", "missed", "missed"]
    html = errors_html(rows, limit=2)
    assert isinstance(html, HTML) and "<table" in html
    assert html.count("<tr>") == 3  # header + 2 rows
    assert "2 more rows" in html and "4 error rows: 2 missed, 1 spurious, 1 wrong type" in html
    assert "<i>Ann" not in html and "&lt;i&gt;" in html and "&amp;" in html
    assert errors_html(rows, limit=None).count("<tr>") == 5
    assert "no errors" in errors_html([])
