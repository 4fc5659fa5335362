"""kerasbert_apps.triples.display: the triple table and the graph drawing (Agg backend, no model)."""

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402

from kerasbert_apps.triples.data import Span  # noqa: E402
from kerasbert_apps.triples.data import Triple  # noqa: E402
from kerasbert_apps.triples.data import TripleExample  # noqa: E402
from kerasbert_apps.triples.display import EDGE_GID  # noqa: E402
from kerasbert_apps.triples.display import EDGE_LABEL_GID  # noqa: E402
from kerasbert_apps.triples.display import NODE_GID  # noqa: E402
from kerasbert_apps.triples.display import as_triples  # noqa: E402
from kerasbert_apps.triples.display import draw_triples  # noqa: E402
from kerasbert_apps.triples.display import triples_html  # noqa: E402


def _triple(text, subject, predicate, obj, score=0.9):
    s, o = text.index(subject), text.index(obj)
    return {"subject": {"start": s, "end": s + len(subject), "text": subject}, "predicate": predicate,
            "object": {"start": o, "end": o + len(obj), "text": obj}, "score": score}


TEXT = "Akosua Boateng joined Andina Cement in 2012 and has been its chief executive since 2016."
PREDICTIONS = [
    {"text": TEXT, "triples": [_triple(TEXT, "Akosua Boateng", "works_for", "Andina Cement", 0.93),
                               _triple(TEXT, "Akosua Boateng", "ceo_of", "Andina Cement", 0.71)]},
    {"text": "Chennai is the capital of <Tamil Nadu>.",
     "triples": [_triple("Chennai is the capital of <Tamil Nadu>.", "Chennai", "capital_of", "<Tamil Nadu>", 0.88)]},
    {"text": "Nothing to see.", "triples": []},
]


@pytest.fixture(autouse=True)
def close_figures():
    yield
    plt.close("all")


def by_gid(ax, gid):
    return [t for t in ax.texts if t.get_gid() == gid]


def test_table_has_one_row_per_triple_and_escapes():
    html = triples_html(PREDICTIONS)
    assert html._repr_html_() == html and "<table" in html
    assert "3 sentences, 3 triples" in html
    assert html.count("<tr>") == 1 + 2 + 1 + 1  # header, 2 + 1 triples, one "no triples" row
    assert "<b>works_for</b>" in html and "0.930" in html and "0.710" in html and "no triples" in html
    assert "<Tamil Nadu>" not in html and "&lt;Tamil Nadu&gt;" in html
    assert 'rowspan="2"' in html  # the sentence spans its triples' rows
    assert "2 more sentences" in triples_html(PREDICTIONS, limit=1)


def test_table_of_gold_examples():
    text = "Chennai is the capital of Tamil Nadu."
    gold = TripleExample(text, [Triple(Span(0, 7, "Chennai"), "capital_of", Span(26, 36, "Tamil Nadu"))])
    html = triples_html([gold])
    assert "Chennai" in html and "capital_of" in html and "—" in html  # gold has no score


def test_as_triples_accepts_every_form():
    expected = [("Akosua Boateng", "works_for", "Andina Cement", 0.93), ("Akosua Boateng", "ceo_of", "Andina Cement", 0.71)]
    assert as_triples(PREDICTIONS[0]) == expected
    assert as_triples(PREDICTIONS[0]["triples"]) == expected
    assert as_triples([("a", "p", "b")]) == [("a", "p", "b", None)]
    with pytest.raises(ValueError, match="3 items"):
        as_triples([("a", "p")])


def test_draw_counts_nodes_edges_and_labels():
    fig = draw_triples(PREDICTIONS)
    assert isinstance(fig, matplotlib.figure.Figure)
    ax = fig.axes[0]
    nodes = by_gid(ax, NODE_GID)
    assert sorted(t.get_text() for t in nodes) == ["<Tamil Nadu>", "Akosua Boateng", "Andina Cement", "Chennai"]
    assert len(by_gid(ax, EDGE_GID)) == 3
    assert sorted(t.get_text() for t in by_gid(ax, EDGE_LABEL_GID)) == ["capital_of", "ceo_of", "works_for"]
    layout = ax.triple_layout
    assert len(layout["nodes"]) == 4 and len(layout["edges"]) == 3
    # on a circle of radius 1, first node at the top
    assert layout["nodes"]["Akosua Boateng"] == pytest.approx((0.0, 1.0))
    for x, y in layout["nodes"].values():
        assert x * x + y * y == pytest.approx(1.0)
    fig.canvas.draw()  # renders (arrows clipped to the node boxes) without error


def test_draw_into_given_axes_with_loops_duplicates_and_reverse_edges(tmp_path):
    fig, (left, right) = plt.subplots(1, 2)
    triples = [("A", "p", "B"), ("B", "q", "A"), ("A", "p", "B"), ("A", "r", "B"), ("C", "same_as", "C")]
    assert draw_triples(triples, ax=right, title="gold") is fig
    assert len(by_gid(right, NODE_GID)) == 3
    assert len(by_gid(right, EDGE_GID)) == 4  # the duplicate (A, p, B) is drawn once
    assert right.get_title() == "gold" and not by_gid(left, NODE_GID)
    fig.savefig(tmp_path / "graph.png")
    assert (tmp_path / "graph.png").stat().st_size > 1000


def test_draw_nothing():
    fig = draw_triples([{"text": "x", "triples": []}])
    ax = fig.axes[0]
    assert not by_gid(ax, NODE_GID) and not by_gid(ax, EDGE_GID)
    assert any(t.get_text() == "no triples" for t in ax.texts)
