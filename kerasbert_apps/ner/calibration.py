"""Calibration of NER entity scores: is a score of 0.8 right 80% of the time?

Each predicted entity is an *outcome*: its ``score`` and whether it is
correct -- it matches a gold entity exactly: the same type and the same
units (words, or non-space characters for untokenized sources:
:mod:`kerasbert_apps.ner.units`, the units :mod:`kerasbert_apps.ner.evaluate`
scores on too; a predicted span is widened to whole units). Outcomes are grouped into ``BINS`` equal-width score bins,
``[0, 0.1), [0.1, 0.2), ..., [0.9, 1.0]`` (the last one closed); the
*expected calibration error* is the mean over bins, weighted by their share
of the outcomes, of ``|accuracy - mean score|`` (empty bins count 0).

Scores are recalibrated by *temperature scaling* (Guo et al., 2017): the
head's scores are taken with its logits divided by ``T`` (a span head's
score becomes ``sigmoid(logit / T)``; a BIO tagger's, its entity's
probability with the emission scores and any transitions divided by ``T``).
:func:`fit_temperature` finds the ``T`` whose scores best predict (least
log-loss) whether each predicted entity is right, on dev. ``T > 0`` changes
no entity, only the scores: a logit keeps its sign, and Viterbi's best path
is the same for scores divided by ``T``. :class:`ScoreTemperature` gives a
pipeline the setting, ``calibrate`` and the fit at the end of training.

This module imports neither seqeval nor matplotlib (a pipeline loaded for
serving imports it): :func:`reliability_figure` imports matplotlib when it
draws.
"""

import numpy as np

from kerasbert_apps.ner.units import unit_span
from kerasbert_apps.ner.units import units_of
from kerasbert.errors import KerasbertError

BINS = 10


def entity_score(entity):
    """The ``score`` of a predicted entity (dict or object); None without one."""
    return entity.get("score") if isinstance(entity, dict) else getattr(entity, "score", None)


def entity_outcomes(examples, predictions):
    """``(scores, correct, unscored)``: float and bool numpy arrays with one
    item per predicted entity of ``predictions`` (the tagger's output dicts,
    in the order of ``examples``, which carry the gold entities) that has a
    ``score``, and the number of predicted entities without one (left out).
    A predicted entity that covers no unit is an outcome too (incorrect)."""
    scored = [[entity for entity in prediction["entities"] if entity_score(entity) is not None]
              for prediction in predictions]
    unscored = sum(len(p["entities"]) for p in predictions) - sum(map(len, scored))
    scores = [float(entity_score(entity)) for entities in scored for entity in entities]
    return np.array(scores, np.float64), entities_right(examples, scored), unscored


def entities_right(examples, entity_lists):
    """One bool per entity of ``entity_lists`` (a list of predicted entities
    per example, dicts or objects with ``start``, ``end``, ``type``), in
    order: whether it matches a gold entity of its example exactly (the same
    type and units)."""
    right = []
    for example, entities in zip(examples, entity_lists):
        units = units_of(example)
        gold = {unit_span(units, e) for e in example.entities} - {None}
        right.extend(unit_span(units, entity) in gold for entity in entities)
    return np.array(right, bool)


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
    """The ``calibration`` entry of :func:`kerasbert_apps.ner.evaluate.score`: ``ece``,
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


def log_loss(scores, correct):
    """Mean log-loss of probabilities ``scores`` against ``correct`` (scores
    clipped to ``[1e-7, 1 - 1e-7]``, as :func:`score_logits` clips)."""
    p = np.clip(np.asarray(scores, np.float64), 1e-7, 1 - 1e-7)
    return float(-np.mean(np.where(correct, np.log(p), np.log1p(-p))))


#: The range :func:`fit_temperature` searches.
TEMPERATURES = (0.05, 20.0)


def fit_temperature(scores_at, correct):
    """The temperature ``T`` (in :data:`TEMPERATURES`) that minimises the
    :func:`log_loss` of ``scores_at(T)`` (a function: ``T`` -> one
    probability per predicted entity) against ``correct`` (one bool per
    predicted entity): a log-spaced grid, then golden-section search around
    its best point (the loss is smooth in ``log T``). Needs at least one
    right and one wrong entity; returns 1.0 otherwise (nothing to fit)."""
    correct = np.asarray(correct, bool)
    if correct.all() or not correct.any():
        return 1.0

    def loss(log_t):
        scores = np.asarray(scores_at(float(np.exp(log_t))), np.float64)
        if scores.shape != correct.shape:
            raise ValueError(f"{scores.size} scores but {correct.size} outcomes")
        return log_loss(scores, correct)

    low, high = np.log(TEMPERATURES[0]), np.log(TEMPERATURES[1])
    grid = np.linspace(low, high, 31)
    best = int(np.argmin([loss(g) for g in grid]))
    a, b = grid[max(best - 1, 0)], grid[min(best + 1, len(grid) - 1)]
    ratio = (np.sqrt(5) - 1) / 2
    c, d = b - ratio * (b - a), a + ratio * (b - a)
    loss_c, loss_d = loss(c), loss(d)
    for _ in range(30):  # one new evaluation per step
        if loss_c <= loss_d:
            b, d, loss_d = d, c, loss_c
            c = b - ratio * (b - a)
            loss_c = loss(c)
        else:
            a, c, loss_c = c, d, loss_d
            d = a + ratio * (b - a)
            loss_d = loss(d)
    return float(np.exp((a + b) / 2))


def sigmoid_scores(logits):
    """``T`` -> ``sigmoid(logits / T)`` (float64), for :func:`fit_temperature`."""
    logits = np.asarray(logits, np.float64)
    return lambda temperature: 1 / (1 + np.exp(-logits / temperature))


class ScoreTemperature:
    """Mixin for an NER :class:`~kerasbert_apps.base.pipeline.Pipeline` whose entity
    scores take a temperature ``T`` (module docstring): the ``temperature``
    setting (stored in the settings file, 1 by default and in folders saved
    before it existed), :meth:`calibrate`, and its run at the end of training
    and distillation (``--calibrate``). The pipeline implements
    :meth:`score_outcomes`; its inference reads :attr:`temperature`."""

    temperature = 1.0

    def set_temperature(self, temperature):
        temperature = float(temperature)
        if not temperature > 0:
            raise KerasbertError(f"the score temperature must be above 0, got {temperature}")
        self.temperature = temperature
        self._functions = {}  # traced serving functions hold the old temperature

    def settings(self):
        return {**super().settings(), "temperature": self.temperature}

    def score_outcomes(self, examples, batch_size=32):
        """``(scores_at, correct)`` on labelled ``examples``: a function
        ``T`` -> the score of every entity predicted for them (float64) at
        temperature ``T``, and whether each is right. The model runs once."""
        raise NotImplementedError

    def calibrate(self, examples, batch_size=32, progress=False):
        """Fit the score temperature on labelled ``examples`` (dev) and set it
        (:func:`fit_temperature`). Returns ``temperature``, ``entities``
        (predicted), ``correct``, ``ece_before`` and ``ece_after`` (on these
        examples). The entities predicted do not change. ``progress``: the
        examples done, their rate and the time left while the model runs
        (True, False, or ``"auto"``: on a terminal only;
        :func:`kerasbert.progress.progress`)."""
        from kerasbert.progress import progress as progress_bar

        with progress_bar(len(examples), "calibrate", show=progress):
            scores_at, correct = self.score_outcomes(examples, batch_size)
        temperature = fit_temperature(scores_at, correct)
        before, after = (expected_calibration_error(scores_at(t), correct) for t in (self.temperature, temperature))
        self.set_temperature(temperature)
        return {"temperature": temperature, "entities": int(correct.size), "correct": int(correct.sum()),
                "ece_before": before, "ece_after": after}

    def student(self, layers):
        """A distillation student's scores are its own: its temperature starts at 1."""
        student = super().student(layers)
        student.set_temperature(1.0)
        return student

    @classmethod
    def after_training(cls, model_dir, dev_examples, settings):
        """With ``settings.calibrate``: :meth:`calibrate` the best model on
        dev and rewrite its settings file; ``{"score_temperature": ...}``
        for ``metrics.json``."""
        if not getattr(settings, "calibrate", False) or not dev_examples:
            return {}
        best = cls.load(model_dir)
        result = best.calibrate(dev_examples, batch_size=settings.batch_size)
        best.save_settings(model_dir)
        print(format_temperature(result, "dev"))
        return {"score_temperature": result}


def format_temperature(result, data):
    """One line on a fitted score temperature (:meth:`ScoreTemperature.calibrate`)."""
    before, after = result["ece_before"], result["ece_after"]
    figures = (f"ECE {before:.4f} -> {after:.4f}" if before is not None else "no predicted entities")
    return (f"score temperature {result['temperature']:.3f}, fitted on {data} ({result['entities']} predicted "
            f"entities, {result['correct']} exactly right): {figures} on {data}; entities unchanged")


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
