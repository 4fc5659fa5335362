"""The units an NER example is scored on: its words when the source was
tokenized (CoNLL columns, character-per-line files), else its non-space
characters.

Both scorers use them: :mod:`kerasbert_apps.ner.evaluate` (entities as
IOB2 tags over the units, for seqeval) and
:mod:`kerasbert_apps.ner.calibration` (is a predicted entity exactly right).
A span that starts or ends inside a unit is widened to whole units.
"""


def units_of(example):
    """Character spans of the units an example is scored on."""
    if example.words:
        return [tuple(w) for w in example.words]
    return [(i, i + 1) for i, c in enumerate(example.text) if not c.isspace()]


def unit_span(units, span):
    """``(first unit, last unit, type)`` of a span (dict or object), or None
    when it overlaps no unit."""
    get = (lambda k: span[k]) if isinstance(span, dict) else (lambda k: getattr(span, k))
    start, end = get("start"), get("end")
    hit = [k for k, (s, e) in enumerate(units) if e > start and s < end]
    return (hit[0], hit[-1], get("type")) if hit else None
