"""Looking at NER output in a notebook: highlighted entities, error analysis.

Dependency-free (no pandas, no spaCy, no IPython import): every function
returns an :class:`HTML` string, a ``str`` with a ``_repr_html_`` method, so
Jupyter displays it as HTML and plain Python can write it to a file.

* :func:`entities_html` -- one text with its entities highlighted
  (displaCy-like ``<mark>`` elements with the type as a label);
* :func:`render` -- many texts (``Tagger.predict`` results or gold
  examples), one block each;
* :func:`errors` -- error-analysis rows (missed, spurious, wrong type) of
  predictions against gold examples; :func:`errors_html` -- those rows as a
  table.

Entities can be the tagger's dicts (``{"start", "end", "type", ...}``) or
:class:`kerasbert_apps.ner.examples.Entity` objects; offsets are Python ``str`` indices
(code points, not bytes or UTF-16 units), ``end`` exclusive, as everywhere in
kerasbert.
"""

import html as _html
import numbers
import operator
import zlib

from kerasbert_apps.base.display import HTML  # noqa: F401  (re-exported)
from kerasbert_apps.base.display import field as _get

__all__ = [
    "HTML",
    "DEFAULT_COLORS",
    "ERROR_KINDS",
    "color_of",
    "entities_html",
    "render",
    "errors",
    "errors_html",
]

#: displaCy's colours for the usual types (CoNLL and OntoNotes names); other
#: types get a colour from :data:`PALETTE`, chosen by a hash of the name.
DEFAULT_COLORS = {
    "PER": "#aa9cfc",
    "PERSON": "#aa9cfc",
    "ORG": "#7aecec",
    "LOC": "#ff9561",
    "GPE": "#feca74",
    "MISC": "#bfeeb7",
    "NORP": "#c887fb",
    "FAC": "#9cc9cc",
    "PRODUCT": "#bfeeb7",
    "EVENT": "#ffeb80",
    "WORK_OF_ART": "#f0d0ff",
    "LAW": "#ff8197",
    "LANGUAGE": "#ff8197",
    "DATE": "#bfe1d9",
    "TIME": "#bfe1d9",
    "MONEY": "#e4e7d2",
    "QUANTITY": "#e4e7d2",
    "ORDINAL": "#e4e7d2",
    "CARDINAL": "#e4e7d2",
    "PERCENT": "#e4e7d2",
}
PALETTE = ["#7aecec", "#bfeeb7", "#feca74", "#ff9561", "#aa9cfc", "#c887fb", "#9cc9cc", "#ffeb80",
           "#ff8197", "#f0d0ff", "#bfe1d9", "#e4e7d2", "#d9fe74", "#fccde5", "#b3de69", "#80b1d3"]

#: The ``kind`` of an error row (:func:`errors`).
MISSED, SPURIOUS, WRONG_TYPE = "missed", "spurious", "wrong type"
ERROR_KINDS = (MISSED, SPURIOUS, WRONG_TYPE)

_MARK_STYLE = ("background: {color}; padding: 0.25em 0.4em; margin: 0 0.15em; line-height: 1; "
               "border-radius: 0.35em; box-decoration-break: clone; -webkit-box-decoration-break: clone")
_LABEL_STYLE = ("font-size: 0.7em; font-weight: bold; line-height: 1; border-radius: 0.35em; "
                "text-transform: uppercase; vertical-align: middle; margin-left: 0.4em")


def color_of(kind, colors=None):
    """The background colour of entity type ``kind``: ``colors``, then
    :data:`DEFAULT_COLORS`, then a stable pick from :data:`PALETTE`."""
    if colors and kind in colors:
        return colors[kind]
    if kind in DEFAULT_COLORS:
        return DEFAULT_COLORS[kind]
    return PALETTE[zlib.crc32(str(kind).encode("utf-8")) % len(PALETTE)]


def _is_number(value):
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def _escape(text):
    """HTML-escape plain text; line breaks become ``<br>``."""
    return _html.escape(text, quote=True).replace("\r\n", "\n").replace("\n", "<br>")


def _checked_spans(text, entities):
    """``[(start, end, type, score)]`` sorted by position; ValueError on a
    span that is not a valid, non-overlapping range of ``text``."""
    spans = []
    for entity in entities:
        start, end, kind = _get(entity, "start"), _get(entity, "end"), _get(entity, "type")
        try:
            if isinstance(start, bool) or isinstance(end, bool):
                raise TypeError
            start, end = operator.index(start), operator.index(end)  # ints, numpy integers; not floats
        except TypeError:
            raise ValueError(f"entity {entity!r}: start and end must be integers") from None
        if kind is None or str(kind) == "":
            raise ValueError(f"entity {entity!r}: no type")
        if not 0 <= start < end <= len(text):
            what = "empty" if start == end and 0 <= start <= len(text) else "out of range"
            raise ValueError(f"entity {kind} [{start}, {end}) is {what} for a text of {len(text)} characters")
        spans.append((start, end, str(kind), _get(entity, "score")))
    spans.sort(key=lambda s: (s[0], s[1]))
    for a, b in zip(spans, spans[1:]):
        if b[0] < a[1]:
            raise ValueError(
                f"overlapping entities: {a[2]} [{a[0]}, {a[1]}) {text[a[0]:a[1]]!r} and "
                f"{b[2]} [{b[0]}, {b[1]}) {text[b[0]:b[1]]!r}"
            )
    return spans


def _mark(text, kind, color, title=None):
    title_attr = f' title="{_html.escape(title, quote=True)}"' if title else ""
    return (f'<mark class="entity" data-type="{_html.escape(kind, quote=True)}"{title_attr} '
            f'style="{_MARK_STYLE.format(color=_html.escape(color, quote=True))}">{_escape(text)}'
            f'<span style="{_LABEL_STYLE}">{_html.escape(kind)}</span></mark>')


def entities_html(text, entities, colors=None):
    """``text`` with its ``entities`` highlighted, displaCy style.

    Args:
        text: the original string.
        entities: dicts or objects with ``start``, ``end`` (Python ``str``
            indices, end exclusive) and ``type``; an optional ``score`` goes
            into the mark's tooltip. Any order.
        colors: optional ``{type: CSS colour}`` overriding the defaults.

    Returns:
        an :class:`HTML` string: a ``<div>`` where each entity is a
        ``<mark>`` with a coloured background and its type as a label. The
        text is HTML-escaped; line breaks become ``<br>``.

    Raises:
        ValueError: an entity is empty, out of the text's range, has no type,
            or overlaps another (the message names them).
    """
    if not isinstance(text, str):
        raise TypeError(f"text must be a str, got {type(text).__name__}")
    parts, at = [], 0
    for start, end, kind, score in _checked_spans(text, entities):
        parts.append(_escape(text[at:start]))
        title = f"{kind} {float(score):.2f}" if _is_number(score) else kind
        parts.append(_mark(text[start:end], kind, color_of(kind, colors), title))
        at = end
    parts.append(_escape(text[at:]))
    return HTML('<div class="kerasbert-entities" style="line-height: 2.2; margin-bottom: 0.6em">'
                + "".join(parts) + "</div>")


def render(predictions, colors=None):
    """One :func:`entities_html` block per item, as one :class:`HTML` value.

    ``predictions`` is a list of ``Tagger.predict`` results (``{"text",
    "entities"}``) or of gold :class:`kerasbert_apps.ner.examples.Example` objects (or a
    single one of either). In a notebook, ``render(tagger.predict(texts))``
    as the last line of a cell shows the texts with their entities."""
    if isinstance(predictions, dict) or hasattr(predictions, "entities"):
        predictions = [predictions]
    blocks = [entities_html(_get(p, "text"), _get(p, "entities") or [], colors) for p in predictions]
    return HTML('<div class="kerasbert-render">' + "".join(blocks) + "</div>")


# =============================================================================
# Error analysis
# =============================================================================


def errors(examples, predictions):
    """Error-analysis rows of ``predictions`` against gold ``examples``.

    Spans are compared exactly (same ``start`` and ``end``). For each
    example, in text order:

    * ``"wrong type"`` -- a predicted span equal to a gold span, with another
      type;
    * ``"missed"`` (false negative) -- a gold entity whose span was not
      predicted;
    * ``"spurious"`` (false positive) -- a predicted entity whose span is not
      gold.

    A boundary error (predicted *Bank of* for gold *Bank of Japan*) is one
    missed and one spurious row. Note that :func:`kerasbert_apps.ner.evaluate.score`
    scores whole words, so a prediction that ends inside a word may be an
    error here and a hit there.

    Args:
        examples: gold examples (objects or dicts with ``text`` and
            ``entities``), e.g. ``read_ner_file(path).examples``.
        predictions: ``Tagger.predict`` results for the same texts, same order.

    Returns:
        a list of dicts ``{"text", "kind", "span": (start, end),
        "gold_type", "predicted_type", "mention"}`` (``gold_type`` is None
        for spurious rows, ``predicted_type`` None for missed ones;
        ``mention`` is ``text[start:end]``).

    Raises:
        ValueError: different numbers of examples and predictions, or a
            prediction for another text.
    """
    examples, predictions = list(examples), list(predictions)
    if len(examples) != len(predictions):
        raise ValueError(f"{len(examples)} examples but {len(predictions)} predictions")
    rows = []
    for index, (example, prediction) in enumerate(zip(examples, predictions)):
        text = _get(example, "text")
        predicted_text = _get(prediction, "text", text)
        if predicted_text != text:
            raise ValueError(f"prediction {index} is for another text: {predicted_text[:60]!r} vs gold {text[:60]!r}")
        gold = {(s, e): k for s, e, k, _ in _checked_spans(text, _get(example, "entities") or [])}
        pred = {(s, e): k for s, e, k, _ in _checked_spans(text, _get(prediction, "entities") or [])}
        found = []
        for span, kind in gold.items():
            if span not in pred:
                found.append((span, MISSED, kind, None))
            elif pred[span] != kind:
                found.append((span, WRONG_TYPE, kind, pred[span]))
        for span, kind in pred.items():
            if span not in gold:
                found.append((span, SPURIOUS, None, kind))
        for span, kind, gold_type, predicted_type in sorted(found, key=lambda f: (f[0], ERROR_KINDS.index(f[1]))):
            rows.append({"text": text, "kind": kind, "span": span, "gold_type": gold_type,
                         "predicted_type": predicted_type, "mention": text[span[0]:span[1]]})
    return rows


_KIND_COLORS = {MISSED: "#ffd6d6", SPURIOUS: "#fff1c2", WRONG_TYPE: "#dbe8ff"}


def _context(text, span, kind, width=60):
    """The mention highlighted in up to ``width`` characters of context each side."""
    start, end = span
    left = max(0, start - width)
    right = min(len(text), end + width)
    before = ("…" if left > 0 else "") + text[left:start]
    after = text[end:right] + ("…" if right < len(text) else "")
    mark = (f'<mark style="background: {_KIND_COLORS.get(kind, "#eee")}; padding: 0.1em 0.2em; '
            f'border-radius: 0.25em">{_escape(text[start:end])}</mark>')
    return _escape(before) + mark + _escape(after)


def errors_html(rows, limit=20):
    """The first ``limit`` rows of :func:`errors` as an HTML table (kind,
    mention in context, gold type, predicted type), with counts by kind
    above it. ``limit=None`` shows every row."""
    rows = list(rows)
    counts = {kind: sum(r["kind"] == kind for r in rows) for kind in ERROR_KINDS}
    extra = sorted({r["kind"] for r in rows} - set(ERROR_KINDS))
    counts.update({kind: sum(r["kind"] == kind for r in rows) for kind in extra})
    summary = ", ".join(f"{n} {kind}" for kind, n in counts.items())
    shown = rows if limit is None else rows[: max(0, int(limit))]
    cell = 'style="text-align: left; padding: 0.25em 0.6em; border-bottom: 1px solid #ddd; vertical-align: top"'
    head = "".join(f"<th {cell}>{h}</th>" for h in ("#", "kind", "mention in context", "span", "gold", "predicted"))
    body = []
    for n, row in enumerate(shown, 1):
        start, end = row["span"]
        values = [
            str(n),
            f'<span style="background: {_KIND_COLORS.get(row["kind"], "#eee")}; padding: 0 0.3em">{_html.escape(row["kind"])}</span>',
            _context(row["text"], (start, end), row["kind"]),
            f"{start}–{end}",
            _html.escape(row["gold_type"] or "—"),
            _html.escape(row["predicted_type"] or "—"),
        ]
        body.append("<tr>" + "".join(f"<td {cell}>{v}</td>" for v in values) + "</tr>")
    more = len(rows) - len(shown)
    footer = f"<p><i>… {more} more row{'s' if more != 1 else ''} (pass limit=None to see all)</i></p>" if more > 0 else ""
    table = (f'<table class="kerasbert-errors" style="border-collapse: collapse"><thead><tr>{head}</tr></thead>'
             f"<tbody>{''.join(body)}</tbody></table>") if shown else "<p><i>no errors</i></p>"
    return HTML(f'<div class="kerasbert-errors"><p>{len(rows)} error rows: {_html.escape(summary)}</p>'
                f"{table}{footer}</div>")
