"""Decision thresholds picked on labelled data (dev): ``kerasbert triples tune``.

A trained extractor decides with thresholds (probabilities): the CasRel head
fires a start / end pointer above ``--threshold-start`` / ``--threshold-end``,
the GPLinker head keeps a span above ``--threshold-entity`` and a link above
``--threshold-link``; all default to 0.5. Lower thresholds trade precision
for recall. :func:`tune_thresholds` scores every pair of the grid on the
examples (one pass of the extractor each) and returns the pair with the best
F1 (in the reader's match mode); the command writes it into the model folder,
so ``predict``, ``evaluate`` and exports made afterwards use it. Tune on dev,
report on test: F1 tuned on the data it is reported on is optimistic. The
extractor's graph is traced once for the whole grid (its thresholds are read
from variables while tuning:
:meth:`~kerasbert_apps.triples.pipeline.TriplePipeline.live_copy`).

The pairs are scored from the strictest down. A lower threshold only adds
triples (more pointers, spans or links fire), so a pair predicts at least as
many as any pair at or above it on both thresholds; once such a pair predicts
``P`` triples for ``G`` gold ones (``P >= G``), the pairs below it score an
F1 of at most ``2G / (G + P)``. They are skipped, and logged as skipped, when
that is below the best F1 already found, or when ``P`` is over
:data:`MAX_PREDICTED_PER_GOLD` times ``G`` (F1 below 0.04: a barely trained
model at low thresholds fires everywhere, and scoring that took minutes).
The default pair (0.5 / 0.5) is always scored.
"""

import itertools

#: The grid's values for each of the two thresholds (both heads).
DEFAULT_VALUES = (0.05, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6)
#: A pair whose stricter neighbour predicts more triples than this many per
#: gold triple is skipped (module docstring).
MAX_PREDICTED_PER_GOLD = 50


def tuned(extractor, result):
    """``extractor`` at the best pair of :func:`tune_thresholds`'s ``result``."""
    return extractor.with_threshold_options(dict(zip(result["names"], result["best"]["thresholds"])))


def tune_thresholds(extractor, examples, score, values=DEFAULT_VALUES, batch_size=32, log=print, progress=False):
    """Score ``extractor`` on ``examples`` at every pair of ``values``.

    Args:
        extractor: a trained CasRel or GPLinker extractor (its two
            ``threshold_options`` are tuned).
        examples: labelled :class:`~kerasbert_apps.triples.data.TripleExample` s (dev).
        score: ``score(examples, predictions)`` -> a dict with ``precision``,
            ``recall``, ``f1`` (:meth:`kerasbert_apps.triples.train.TriplesTask.score`
            with the reader's settings).
        values: the values each of the two thresholds takes (0.5 added),
            or a dict: option name -> its values (as they are).
        log: called with one line per pair as it is scored (``None``: quiet).
        progress: the texts scored (over all pairs; a skipped pair counts
            as done), their rate and the time left (True, False, or
            ``"auto"``: on a terminal only; :func:`kerasbert.progress.progress`).

    Returns ``{"head", "names", "grid": [{"thresholds": [a, b], "precision",
    "recall", "f1"}, ...] (in ascending order), "skipped": the pairs not
    scored (module docstring), "best": the best entry, "default": the 0.5 /
    0.5 entry (None when the grid has none)}``. Ties go to the pair nearest
    the defaults (then the first in grid order), so a flat grid keeps 0.5 / 0.5.
    """
    from kerasbert.progress import advance
    from kerasbert.progress import progress as progress_bar

    names = extractor.threshold_options
    if not isinstance(values, dict):
        values = {name: sorted({float(v) for v in values} | {0.5}) for name in names}
    texts = [e.text for e in examples]
    live = extractor.live_copy()
    grid, skipped, bounds = [], [], []  # bounds: (first, second, predicted, gold) of the pairs scored
    pairs = list(itertools.product(*(sorted((float(v) for v in values[name]), reverse=True) for name in names)))
    with progress_bar(len(pairs) * len(texts), "tune", show=progress):
        for first, second in pairs:  # the strictest first
            bound = _f1_bound(bounds, first, second)
            best_f1 = max((e["f1"] for e in grid), default=0.0)
            if bound is not None and [first, second] != [0.5, 0.5] and (bound[0] < best_f1 or bound[1]):
                skipped.append([first, second])
                advance(len(texts))
                if log:
                    log(f"  {names[0]} {first:.2f}  {names[1]} {second:.2f}:  skipped (a stricter pair predicts "
                        f"{bound[2]} triples for {bound[3]} gold: F1 at most {bound[0]:.4f})")
                continue
            pair = dict(zip(names, (first, second)))
            candidate = live.live_threshold_options(pair)
            scores = score(examples, candidate.predict(texts, batch_size=batch_size))
            entry = {"thresholds": [first, second], **{k: scores[k] for k in ("precision", "recall", "f1")}}
            grid.append(entry)
            counts = scores.get(scores.get("mode"), {})
            if "predicted" in counts and "gold" in counts:
                bounds.append((first, second, counts["predicted"], counts["gold"]))
            if log:
                log(f"  {names[0]} {first:.2f}  {names[1]} {second:.2f}:  P {entry['precision']:.4f}  "
                    f"R {entry['recall']:.4f}  F1 {entry['f1']:.4f}")
    grid.sort(key=lambda e: e["thresholds"])
    skipped.sort()
    best = max(grid, key=lambda e: (e["f1"], -abs(e["thresholds"][0] - 0.5) - abs(e["thresholds"][1] - 0.5)))
    default = next((e for e in grid if e["thresholds"] == [0.5, 0.5]), None)
    return {"head": extractor.head_name, "names": list(names), "grid": grid, "skipped": skipped, "best": best,
            "default": default}


def _f1_bound(scored, first, second):
    """``(bound, too_many, predicted, gold)`` from the scored pair at or above
    ``(first, second)`` on both thresholds that predicts the most triples
    (``bound``: the F1 no pair below it can pass; ``too_many``: over
    :data:`MAX_PREDICTED_PER_GOLD` per gold triple), or None when none
    predicts at least as many triples as there are gold ones."""
    above = [(p, g) for a, b, p, g in scored if a >= first and b >= second and g and p >= g]
    if not above:
        return None
    predicted, gold = max(above)
    return 2 * gold / (gold + predicted), predicted > MAX_PREDICTED_PER_GOLD * gold, predicted, gold


def format_tuning(result, data, tuned_here=False):
    """A summary of :func:`tune_thresholds`'s result on the file ``data``
    (``tuned_here``: at the end of training, written into the model)."""
    names, best, default = result["names"], result["best"], result["default"]
    pair = "  ".join(f"--threshold-{n} {v:g}" for n, v in zip(names, best["thresholds"]))
    if tuned_here:
        return (f"thresholds tuned on {data} ({_pairs(result, 'pairs')}): {pair}: P {best['precision']:.4f}  "
                f"R {best['recall']:.4f}  F1 {best['f1']:.4f}"
                + (f" (0.5 / 0.5: F1 {default['f1']:.4f})" if default else ""))
    return (f"{result['head']} head, {_pairs(result, 'threshold pairs')} scored on {data}\n"
            f"best: {pair}: P {best['precision']:.4f}  R {best['recall']:.4f}  F1 {best['f1']:.4f} "
            f"(0.5 / 0.5: F1 {default['f1']:.4f}); tuned on this file, so report F1 on another (test)")


def _pairs(result, noun):
    skipped = len(result.get("skipped", ()))
    return f"{len(result['grid'])} {noun}" + (f" ({skipped} more skipped)" if skipped else "")
