"""Calibration of NER entity scores: is a score of 0.8 right 80% of the time?

Each predicted entity is an *outcome*: its ``score`` and whether it is
correct -- it matches a gold entity exactly: the same type and the same
units (words, or non-space characters for untokenized sources: the units
:mod:`apps.ner.evaluate` scores on; a predicted span is widened to whole
units as there). Outcomes are grouped into ``BINS`` equal-width score bins,
``[0, 0.1), [0.1, 0.2), ..., [0.9, 1.0]`` (the last one closed); the
*expected calibration error* is the mean over bins, weighted by their share
of the outcomes, of ``|accuracy - mean score|`` (empty bins count 0).

A head whose scores are ``sigmoid(logit)`` (GlobalPointer) can be
recalibrated by *temperature scaling* (Guo et al., 2017):
:func:`fit_temperature` finds the ``T`` for which ``sigmoid(logit / T)``
best predicts (least log-loss) whether each predicted entity is right, on
dev; since ``T > 0`` leaves the sign of every logit alone, the entities
themselves do not change, only their scores.
"""

import numpy as np

from apps.ner.evaluate import units_of

BINS = 10


def _unit_span(units, span):
    """``(first unit, last unit, type)`` of a span (dict or object), or None
    when it overlaps no unit."""
    get = (lambda k: span[k]) if isinstance(span, dict) else (lambda k: getattr(span, k))
    start, end = get("start"), get("end")
    hit = [k for k, (s, e) in enumerate(units) if e > start and s < end]
    return (hit[0], hit[-1], get("type")) if hit else None


def entity_score(entity):
    """The ``score`` of a predicted entity (dict or object); None without one."""
    return entity.get("score") if isinstance(entity, dict) else getattr(entity, "score", None)


def entity_outcomes(examples, predictions):
    """``(scores, correct, unscored)``: float and bool numpy arrays with one
    item per predicted entity of ``predictions`` (the tagger's output dicts,
    in the order of ``examples``, which carry the gold entities) that has a
    ``score``, and the number of predicted entities without one (left out).
    A predicted entity that covers no unit is an outcome too (incorrect)."""
    scores, correct, unscored = [], [], 0
    for example, prediction in zip(examples, predictions):
        units = units_of(example)
        gold = {_unit_span(units, e) for e in example.entities} - {None}
        for entity in prediction["entities"]:
            value = entity_score(entity)
            if value is None:
                unscored += 1
                continue
            scores.append(float(value))
            correct.append(_unit_span(units, entity) in gold)
    return np.array(scores, np.float64), np.array(correct, bool), unscored


def reliability_table(scores, correct, bins=BINS):
    """One dict per equal-width bin of ``[0, 1]``: ``low``, ``high``,
    ``count``, ``mean_score`` and ``accuracy`` (None for an empty bin)."""
    scores, correct = np.asarray(scores, np.float64), np.asarray(correct, bool)
    bad = scores[~((scores >= 0) & (scores <= 1))]  # NaN included
    if bad.size:
        raise ValueError(f"entity scores must lie in [0, 1]; {bad.size} do not, e.g. {bad[0]}")
    index = np.minimum((scores * bins).astype(int), bins - 1)  # 1.0 goes into the last bin
    table = []
    for k in range(bins):
        inside = index == k
        count = int(inside.sum())
        table.append({
            "low": k / bins, "high": (k + 1) / bins, "count": count,
            "mean_score": float(scores[inside].mean()) if count else None,
            "accuracy": float(correct[inside].mean()) if count else None,
        })
    return table


def expected_calibration_error(scores, correct, bins=BINS):
    """ECE over ``bins`` equal-width bins (module docstring); None without outcomes."""
    table = reliability_table(scores, correct, bins)
    total = sum(row["count"] for row in table)
    if not total:
        return None
    return float(sum(row["count"] / total * abs(row["accuracy"] - row["mean_score"]) for row in table if row["count"]))


def calibration(examples, predictions, bins=BINS):
    """The ``calibration`` entry of :func:`apps.ner.evaluate.score`: ``ece``,
    ``bins``, ``entities`` (predicted, with a score), ``correct``,
    ``unscored`` (predicted entities without a score, left out) and the
    reliability ``table``."""
    return calibration_of(*entity_outcomes(examples, predictions), bins=bins)


def calibration_of(scores, correct, unscored=0, bins=BINS):
    """:func:`calibration` of given outcomes: ``scores`` (floats) and
    ``correct`` (bools), one per predicted entity with a score (a scorer
    with its own notion of "right" -- exact spans -- passes its own)."""
    scores, correct = np.asarray(scores, np.float64), np.asarray(correct, bool)
    return {
        "ece": expected_calibration_error(scores, correct, bins),
        "bins": bins,
        "entities": int(scores.size),
        "correct": int(correct.sum()),
        "unscored": unscored,
        "table": reliability_table(scores, correct, bins),
    }


def score_logits(scores, temperature=1.0):
    """The logits behind ``sigmoid(logit / temperature)`` scores (float64;
    scores of exactly 0 or 1, saturated in float32, are clipped to
    ``[1e-7, 1 - 1e-7]``, logits of about +-16)."""
    p = np.clip(np.asarray(scores, np.float64), 1e-7, 1 - 1e-7)
    return temperature * (np.log(p) - np.log1p(-p))


def _log_loss(logits, correct, temperature):
    z = np.asarray(logits, np.float64) / temperature
    # -log sigmoid(z) for the right ones, -log(1 - sigmoid(z)) = -log sigmoid(-z) for the wrong ones
    signed = np.where(correct, z, -z)
    return float(np.mean(np.logaddexp(0.0, -signed)))


#: The range :func:`fit_temperature` searches.
TEMPERATURES = (0.05, 20.0)


def fit_temperature(logits, correct):
    """The temperature ``T`` (in :data:`TEMPERATURES`) that minimises the
    mean log-loss of ``sigmoid(logit / T)`` against ``correct`` (one bool per
    predicted entity): a log-spaced grid, then golden-section search around
    its best point (the loss is smooth in ``log T``). Needs at least one
    right and one wrong entity; returns 1.0 otherwise (nothing to fit)."""
    logits, correct = np.asarray(logits, np.float64), np.asarray(correct, bool)
    if logits.shape != correct.shape:
        raise ValueError(f"{logits.size} logits but {correct.size} outcomes")
    if correct.all() or not correct.any():
        return 1.0
    low, high = np.log(TEMPERATURES[0]), np.log(TEMPERATURES[1])
    grid = np.linspace(low, high, 61)
    best = int(np.argmin([_log_loss(logits, correct, np.exp(g)) for g in grid]))
    a, b = grid[max(best - 1, 0)], grid[min(best + 1, len(grid) - 1)]
    ratio = (np.sqrt(5) - 1) / 2
    for _ in range(40):
        c, d = b - ratio * (b - a), a + ratio * (b - a)
        if _log_loss(logits, correct, np.exp(c)) <= _log_loss(logits, correct, np.exp(d)):
            b = d
        else:
            a = c
    return float(np.exp((a + b) / 2))


def format_calibration(result):
    """A few lines: the ECE (with which bins) and the reliability table."""
    bins = result["bins"]
    unscored = result.get("unscored", 0)
    left_out = f" ({unscored} predicted entities without a score left out)" if unscored else ""
    if result["ece"] is None:
        return "calibration: no predicted entities with a score" + left_out
    lines = [
        f"calibration: ECE {result['ece']:.4f} over {result['entities']} predicted entities "
        f"({result['correct']} exactly right), {bins} equal-width score bins [0, {1 / bins:g}) ... "
        f"[{1 - 1 / bins:g}, 1]{left_out}",
        f"{'score bin':<12} {'count':>7} {'mean score':>10} {'accuracy':>9}",
    ]
    for row in result["table"]:
        if row["count"]:
            lines.append(f"[{row['low']:.1f}, {row['high']:.1f}{']' if row['high'] >= 1 else ')'}  "
                         f"{row['count']:>7} {row['mean_score']:>10.4f} {row['accuracy']:>9.4f}")
    return "\n".join(lines)


def reliability_figure(result, title="entity scores"):
    """A matplotlib ``Figure`` (no pyplot, so a notebook's backend is left
    alone): accuracy per score bin against the diagonal, and the count per
    bin. Needs matplotlib."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    table = result["table"]
    width = 1 / result["bins"]
    centres = [row["low"] + width / 2 for row in table]
    fig = Figure(figsize=(8, 3.6))
    FigureCanvasAgg(fig)
    a, b = fig.subplots(1, 2)
    a.plot([0, 1], [0, 1], linestyle="--", color="grey", label="perfect calibration")
    filled = [(c, row) for c, row in zip(centres, table) if row["count"]]
    a.bar([c for c, _ in filled], [row["accuracy"] for _, row in filled], width=width * 0.9,
          edgecolor="black", label="accuracy")
    a.plot([row["mean_score"] for _, row in filled], [row["accuracy"] for _, row in filled], "o",
           color="tab:red", label="(mean score, accuracy)")
    a.set_xlim(0, 1)
    a.set_ylim(0, 1)
    a.set_xlabel("entity score")
    a.set_ylabel("fraction exactly right")
    ece = result["ece"]
    a.set_title(f"{title}: ECE {ece:.4f}" if ece is not None else title)
    a.legend(loc="upper left", fontsize=8)
    b.bar(centres, [row["count"] for row in table], width=width * 0.9, color="tab:gray", edgecolor="black")
    b.set_yscale("log")
    b.set_xlim(0, 1)
    b.set_xlabel("entity score")
    b.set_title(f"predicted entities per bin ({result['entities']})")
    fig.tight_layout()
    return fig
