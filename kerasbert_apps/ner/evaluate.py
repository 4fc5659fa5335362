"""Entity-level evaluation with seqeval.

Gold and predicted entities are character spans. To score them with seqeval
they are written as IOB2 tags over the example's *units*
(:mod:`kerasbert_apps.ner.units`): its words when the source was tokenized
(CoNLL columns, character-per-line files), else its non-space characters.
A unit gets ``B-X`` if it is the first unit overlapping an entity of type X,
``I-X`` for the following ones (a predicted span that starts or ends inside
a word is widened to whole words, as word-level scorers do).

Two modes, both reported:

* ``default``: seqeval's conlleval-compatible chunking (the CoNLL-2003 figure);
* ``strict``: seqeval ``mode="strict", scheme=IOB2`` (exact chunks only).

With IOB2 tags produced from spans the two agree; both are printed because
users compare against papers that use one or the other.

Also reported: the calibration of the entity scores (expected calibration
error over 10 equal-width score bins, :mod:`kerasbert_apps.ner.calibration`).

seqeval is imported by :func:`score` only, when it scores: importing this
module (or a pipeline, for serving) does not load it.
"""

import numpy as np

from kerasbert_apps.ner.calibration import calibration
from kerasbert_apps.ner.calibration import format_calibration
from kerasbert_apps.ner.tags import spans_to_unit_tags
from kerasbert_apps.ner.units import units_of


def score(examples, predictions):
    """seqeval scores for ``examples`` (with gold entities) against
    ``predictions`` (the tagger's output dicts, same order).

    Returns a dict: ``precision``, ``recall``, ``f1`` (micro, default mode),
    ``macro_f1``, ``strict`` (the same in strict mode), ``per_type``,
    the counts and ``calibration`` (:func:`kerasbert_apps.ner.calibration.calibration`).
    """
    from seqeval.metrics import classification_report
    from seqeval.metrics import f1_score
    from seqeval.metrics import precision_score
    from seqeval.metrics import recall_score
    from seqeval.scheme import IOB2

    gold, pred = [], []
    for example, prediction in zip(examples, predictions):
        units = units_of(example)
        gold.append(spans_to_unit_tags(units, example.entities))
        pred.append(spans_to_unit_tags(units, prediction["entities"]))
    result = {
        "precision": precision_score(gold, pred, zero_division=0),
        "recall": recall_score(gold, pred, zero_division=0),
        "f1": f1_score(gold, pred, zero_division=0),
        "macro_f1": f1_score(gold, pred, average="macro", zero_division=0),
        "strict": {
            "precision": precision_score(gold, pred, mode="strict", scheme=IOB2, zero_division=0),
            "recall": recall_score(gold, pred, mode="strict", scheme=IOB2, zero_division=0),
            "f1": f1_score(gold, pred, mode="strict", scheme=IOB2, zero_division=0),
            "macro_f1": f1_score(gold, pred, average="macro", mode="strict", scheme=IOB2, zero_division=0),
        },
        "examples": len(gold),
        "gold_entities": sum(len(e.entities) for e in examples),
        "predicted_entities": sum(len(p["entities"]) for p in predictions),
    }
    report = classification_report(gold, pred, output_dict=True, zero_division=0)
    result["per_type"] = {
        kind: {k: float(v) for k, v in values.items()}
        for kind, values in report.items()
        if not kind.endswith(" avg")
    }
    result["calibration"] = calibration(examples, predictions)
    return {k: (float(v) if isinstance(v, (np.floating, float)) else v) for k, v in result.items()}


def format_scores(scores):
    lines = [
        f"entities: {scores['gold_entities']} gold, {scores['predicted_entities']} predicted, {scores['examples']} examples",
        f"micro   P {scores['precision']:.4f}  R {scores['recall']:.4f}  F1 {scores['f1']:.4f}   (seqeval default / conlleval)",
        f"strict  P {scores['strict']['precision']:.4f}  R {scores['strict']['recall']:.4f}  F1 {scores['strict']['f1']:.4f}   (seqeval strict IOB2)",
        f"macro F1 {scores['macro_f1']:.4f} (default), {scores['strict']['macro_f1']:.4f} (strict)",
        f"{'type':<12} {'precision':>9} {'recall':>9} {'f1':>9} {'support':>8}",
    ]
    for kind, values in sorted(scores["per_type"].items()):
        lines.append(
            f"{kind:<12} {values['precision']:>9.4f} {values['recall']:>9.4f} {values['f1-score']:>9.4f} {int(values['support']):>8}"
        )
    if "calibration" in scores:
        lines.append(format_calibration(scores["calibration"]))
    return "\n".join(lines)
