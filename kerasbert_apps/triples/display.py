"""Looking at extracted triples in a notebook: a table and a graph drawing.

* :func:`triples_html` -- an HTML table of subject / predicate / object /
  score per sentence (an :class:`HTML` string: Jupyter displays it);
* :func:`draw_triples` -- the triple graph drawn with matplotlib alone (no
  networkx): entities as labelled nodes on a circle, one arrow per triple
  from subject to object, labelled with the predicate.

Both accept the extractor's output (``Extractor.predict`` results, or their
``"triples"`` lists) and gold data (:class:`kerasbert_apps.triples.data.TripleExample`,
:class:`~kerasbert_apps.triples.data.Triple`) or plain ``(subject, predicate, object)``
tuples of strings.
"""

import html as _html
import math
import numbers
import textwrap

from kerasbert_apps.base.display import HTML  # noqa: F401  (re-exported)
from kerasbert_apps.base.display import field as _get

__all__ = ["HTML", "triples_html", "draw_triples", "as_triples", "circle_layout",
           "NODE_GID", "EDGE_GID", "EDGE_LABEL_GID"]

#: ``gid`` of the artists :func:`draw_triples` adds, for finding them again.
NODE_GID, EDGE_GID, EDGE_LABEL_GID = "triple-node", "triple-edge", "triple-edge-label"


def _entity_text(entity):
    if isinstance(entity, str):
        return entity
    text = _get(entity, "text")
    if text is None:
        raise ValueError(f"cannot read an entity from {entity!r} (expected a string or an item with 'text')")
    return str(text)


def _one_triple(triple):
    """``(subject, predicate, object, score or None)`` of one triple in any accepted form."""
    if isinstance(triple, (tuple, list)):
        if len(triple) not in (3, 4):
            raise ValueError(f"a triple tuple has 3 items (subject, predicate, object), got {triple!r}")
        subject, predicate, obj = triple[:3]
        score = triple[3] if len(triple) == 4 else None
    else:
        subject, predicate, obj = _get(triple, "subject"), _get(triple, "predicate"), _get(triple, "object")
        if subject is None or predicate is None or obj is None:
            raise ValueError(f"not a triple: {triple!r}")
        score = _get(triple, "score")
    return _entity_text(subject), str(predicate), _entity_text(obj), score


def _is_sentence(item):
    """An extractor result or a TripleExample: something with ``triples``."""
    return _get(item, "triples") is not None and not isinstance(item, (tuple, list, str))


def as_triples(items):
    """Flatten ``items`` -- extractor results, TripleExamples, triple dicts,
    Triple objects or tuples, or a single result -- into a list of
    ``(subject, predicate, object, score)`` (score None for gold)."""
    if isinstance(items, dict) or _is_sentence(items):
        items = [items]
    out = []
    for item in items:
        if _is_sentence(item):
            out.extend(_one_triple(t) for t in _get(item, "triples"))
        else:
            out.append(_one_triple(item))
    return out


# =============================================================================
# Table
# =============================================================================


def triples_html(predictions, limit=None):
    """An HTML table of the triples of each sentence.

    Args:
        predictions: ``Extractor.predict`` results (``{"text", "triples"}``),
            or gold :class:`~kerasbert_apps.triples.data.TripleExample` objects, or a
            single one of either.
        limit: show only the first ``limit`` sentences (None: all).

    Returns:
        an :class:`HTML` table with columns sentence, subject, predicate,
        object, score; a sentence without triples gets one row saying so.
    """
    if isinstance(predictions, dict) or _is_sentence(predictions):
        predictions = [predictions]
    predictions = list(predictions)
    shown = predictions if limit is None else predictions[: max(0, int(limit))]
    cell = 'style="text-align: left; padding: 0.25em 0.6em; border-bottom: 1px solid #ddd; vertical-align: top"'
    head = "".join(f"<th {cell}>{h}</th>" for h in ("#", "sentence", "subject", "predicate", "object", "score"))
    rows = []
    total = 0
    for n, item in enumerate(shown, 1):
        text = _get(item, "text", "")
        triples = as_triples(item)
        total += len(triples)
        sentence = f'<td {cell} rowspan="{max(1, len(triples))}">{_html.escape(text)}</td>'
        number = f'<td {cell} rowspan="{max(1, len(triples))}">{n}</td>'
        if not triples:
            rows.append(f"<tr>{number}{sentence}<td {cell} colspan=\"4\"><i>no triples</i></td></tr>")
            continue
        for k, (subject, predicate, obj, score) in enumerate(triples):
            values = [_html.escape(subject), f"<b>{_html.escape(predicate)}</b>", _html.escape(obj),
                      f"{float(score):.3f}" if isinstance(score, numbers.Real) and not isinstance(score, bool) else "—"]
            lead = number + sentence if k == 0 else ""
            rows.append("<tr>" + lead + "".join(f"<td {cell}>{v}</td>" for v in values) + "</tr>")
    more = len(predictions) - len(shown)
    footer = f"<p><i>… {more} more sentence{'s' if more != 1 else ''}</i></p>" if more > 0 else ""
    return HTML(f'<div class="kerasbert-triples"><p>{len(shown)} sentences, {total} triples</p>'
                f'<table style="border-collapse: collapse"><thead><tr>{head}</tr></thead>'
                f"<tbody>{''.join(rows)}</tbody></table>{footer}</div>")


# =============================================================================
# Graph drawing
# =============================================================================


def circle_layout(nodes, radius=1.0):
    """``{node: (x, y)}``: nodes evenly on a circle, the first at the top,
    clockwise; one node sits at the centre."""
    nodes = list(nodes)
    if len(nodes) == 1:
        return {nodes[0]: (0.0, 0.0)}
    layout = {}
    for k, node in enumerate(nodes):
        angle = math.pi / 2 - 2 * math.pi * k / len(nodes)
        layout[node] = (radius * math.cos(angle), radius * math.sin(angle))
    return layout


def draw_triples(triples, ax=None, title=None, wrap=18, node_color="#dbe8ff", edge_color="#555555"):
    """Draw the graph of ``triples`` with matplotlib; returns the Figure.

    Args:
        triples: anything :func:`as_triples` accepts: ``Extractor.predict``
            results (their triples are merged into one graph), a result's
            ``"triples"`` list, TripleExamples, or ``(subject, predicate,
            object)`` tuples.
        ax: a matplotlib Axes to draw into (None: a new figure).
        title: the Axes title.
        wrap: node labels are wrapped at this many characters.

    The same entity string is one node (in order of first appearance), on a
    circle; each distinct (subject, predicate, object) is one arrow from
    subject to object, labelled with the predicate. Several predicates
    between the same two entities are drawn as arcs of increasing curvature;
    a triple whose subject is its object is a loop. Artists carry ``gid``
    :data:`NODE_GID`, :data:`EDGE_GID` and :data:`EDGE_LABEL_GID`, and the
    Axes gets ``triple_layout`` = ``{"nodes": {entity: (x, y)}, "edges":
    [(subject, predicate, object)]}``.
    """
    import matplotlib.pyplot as plt

    edges = []
    for subject, predicate, obj, _ in as_triples(triples):
        if (subject, predicate, obj) not in edges:
            edges.append((subject, predicate, obj))
    nodes = []
    for subject, _, obj in edges:
        for entity in (subject, obj):
            if entity not in nodes:
                nodes.append(entity)

    if ax is None:
        size = 4.5 + 0.25 * min(len(nodes), 16)
        fig, ax = plt.subplots(figsize=(size, size))
    else:
        fig = ax.figure
    layout = circle_layout(nodes)
    ax.set_aspect("equal")
    ax.set_xlim(-1.6, 1.6)
    ax.set_ylim(-1.45, 1.45)
    ax.axis("off")
    if title:
        ax.set_title(title)
    if not nodes:
        ax.text(0, 0, "no triples", ha="center", va="center", color="gray")

    # Nodes are drawn first (lower zorder): a text lays out its box when drawn,
    # and the arrows are clipped to those boxes.
    boxes = {}
    for node in nodes:
        x, y = layout[node]
        label = "\n".join(textwrap.wrap(node, wrap)) or node
        artist = ax.text(x, y, label, ha="center", va="center", fontsize=9, zorder=2, gid=NODE_GID,
                         bbox=dict(boxstyle="round,pad=0.4", facecolor=node_color, edgecolor="#6b8fd6"))
        boxes[node] = artist

    seen = {}  # entity pair, first direction seen -> arrows drawn so far between the two
    for subject, predicate, obj in edges:
        pair = (obj, subject) if (obj, subject) in seen else (subject, obj)
        k = seen.get(pair, 0)
        seen[pair] = k + 1
        (x1, y1), (x2, y2) = layout[subject], layout[obj]
        if subject == obj:  # a loop above the node
            start, end, rad = (x1 - 0.12, y1 + 0.08), (x1 + 0.12, y1 + 0.08), -1.8 - 0.5 * k
            patch_a = patch_b = None
        else:
            # Arcs alternate sides of the chord, further out each time: 0.15, -0.15, 0.45, -0.45, ...
            # (an arrow against the pair's first direction flips the sign to stay on its side).
            rad = (0.15 + 0.3 * (k // 2)) * (1 if k % 2 == 0 else -1) * (1 if pair == (subject, obj) else -1)
            start, end = (x1, y1), (x2, y2)
            patch_a, patch_b = boxes[subject].get_bbox_patch(), boxes[obj].get_bbox_patch()
        ax.annotate(
            "", xy=end, xytext=start, zorder=3, gid=EDGE_GID,
            arrowprops=dict(arrowstyle="-|>", color=edge_color, lw=1.2, mutation_scale=14,
                            connectionstyle=f"arc3,rad={rad}", patchA=patch_a, patchB=patch_b,
                            shrinkA=2, shrinkB=2),
        )
        # arc3's control point is mid + rad * (dy, -dx); the curve's midpoint is halfway to it.
        dx, dy = end[0] - start[0], end[1] - start[1]
        mx, my = (start[0] + end[0]) / 2 + 0.5 * rad * dy, (start[1] + end[1]) / 2 - 0.5 * rad * dx
        # The label reads along the chord (never upside down), as networkx draws edge labels.
        angle = math.degrees(math.atan2(dy, dx)) if subject != obj else 0.0
        angle = angle - 180 if angle > 90 else (angle + 180 if angle <= -90 else angle)
        ax.text(mx, my, predicate, ha="center", va="center", fontsize=8, color="#333333", zorder=4,
                rotation=angle, rotation_mode="anchor", gid=EDGE_LABEL_GID,
                bbox=dict(boxstyle="round,pad=0.15", facecolor="white", edgecolor="none", alpha=0.85))
    ax.triple_layout = {"nodes": dict(layout), "edges": list(edges)}
    return fig
