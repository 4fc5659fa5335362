"""Exact-span entity scores, for the heads whose scorer is ``"exact spans"`` (nested entities).

seqeval (:mod:`kerasbert_apps.ner.evaluate`) scores BIO tag sequences, which cannot
hold an entity inside another. A span head predicts sets of
``(start, end, type)`` character spans that may nest, so it is scored on
those sets directly: a predicted entity is correct when the gold entities
of its example hold exactly the same ``(start, end, type)``.

Reported (:func:`span_scores`): micro precision/recall/F1 over all entities,
macro F1 (mean of the per-type F1), per-type figures, and the same micro
figures restricted to *nested* entities -- gold entities that lie inside
another gold entity (for recall) and predicted entities that lie inside
another predicted entity (for precision); "inside" means within its span and
not the same span. Also the calibration of the entity scores
(:mod:`kerasbert_apps.ner.calibration`), an entity being right when it is an exact
match, as above.
"""

from collections import Counter

from kerasbert_apps.base.scores import field
from kerasbert_apps.base.scores import prf


def _prf(correct, predicted, gold):
    return prf(correct, predicted, gold, counts=False)


def _key(span):
    return field(span, "start"), field(span, "end"), field(span, "type")


def nested_keys(keys):
    """The ``(start, end, type)`` of ``keys`` that lie inside another of them
    (within its span, not the same span)."""
    return {k for k in keys
            if any(o[0] <= k[0] and k[1] <= o[1] and (o[0], o[1]) != (k[0], k[1]) for o in keys)}


def span_scores(examples, predictions):
    """Exact ``(start, end, type)`` scores of ``predictions`` (the tagger's
    output dicts) against the gold ``examples`` (same order); see the module
    docstring. Returns ``precision``, ``recall``, ``f1`` (micro), ``macro_f1``,
    ``per_type`` (each with ``precision``, ``recall``, ``f1-score``,
    ``support`` as seqeval's report), ``nested`` (micro figures with
    ``gold`` and ``predicted`` counts), the counts and ``calibration``
    (:func:`kerasbert_apps.ner.calibration.calibration_of` of the exact matches)."""
    from kerasbert_apps.ner.calibration import calibration_of
    from kerasbert_apps.ner.calibration import entity_score

    correct, gold_n, pred_n = Counter(), Counter(), Counter()
    nested = Counter()
    outcomes, unscored = [], 0
    for example, prediction in zip(examples, predictions):
        gold = {_key(e) for e in example.entities}
        pred = {_key(e) for e in prediction["entities"]}
        for k in gold:
            gold_n[k[2]] += 1
        for k in pred:
            pred_n[k[2]] += 1
        for k in gold & pred:
            correct[k[2]] += 1
        for entity in prediction["entities"]:
            value = entity_score(entity)
            if value is None:
                unscored += 1
            else:
                outcomes.append((float(value), _key(entity) in gold))
        gold_nested, pred_nested = nested_keys(gold), nested_keys(pred)
        nested["gold"] += len(gold_nested)
        nested["predicted"] += len(pred_nested)
        nested["found"] += len(gold_nested & pred)
        nested["right"] += len(pred_nested & gold)
    types = sorted(set(gold_n) | set(pred_n))
    per_type = {}
    for kind in types:
        figures = _prf(correct[kind], pred_n[kind], gold_n[kind])
        per_type[kind] = {"precision": figures["precision"], "recall": figures["recall"],
                          "f1-score": figures["f1"], "support": float(gold_n[kind])}
    micro = _prf(sum(correct.values()), sum(pred_n.values()), sum(gold_n.values()))
    precision = nested["right"] / nested["predicted"] if nested["predicted"] else 0.0
    recall = nested["found"] / nested["gold"] if nested["gold"] else 0.0
    return {
        **micro,
        "macro_f1": sum(v["f1-score"] for v in per_type.values()) / len(per_type) if per_type else 0.0,
        "per_type": per_type,
        "nested": {"precision": precision, "recall": recall,
                   "f1": 2 * precision * recall / (precision + recall) if precision + recall else 0.0,
                   "gold": nested["gold"], "predicted": nested["predicted"]},
        "examples": len(examples),
        "gold_entities": sum(gold_n.values()),
        "predicted_entities": sum(pred_n.values()),
        "calibration": calibration_of([o[0] for o in outcomes], [o[1] for o in outcomes], unscored),
    }


def format_span_scores(scores):
    nested = scores["nested"]
    lines = [
        f"scorer: {scores.get('scorer', 'exact spans')} (start, end, type must all match; entities may nest)",
        f"entities: {scores['gold_entities']} gold, {scores['predicted_entities']} predicted, {scores['examples']} examples",
        f"micro   P {scores['precision']:.4f}  R {scores['recall']:.4f}  F1 {scores['f1']:.4f}",
        f"macro F1 {scores['macro_f1']:.4f}",
        f"nested  P {nested['precision']:.4f}  R {nested['recall']:.4f}  F1 {nested['f1']:.4f}   "
        f"(entities inside another: {nested['gold']} gold, {nested['predicted']} predicted)",
        f"{'type':<12} {'precision':>9} {'recall':>9} {'f1':>9} {'support':>8}",
    ]
    for kind, values in sorted(scores["per_type"].items()):
        lines.append(f"{kind:<12} {values['precision']:>9.4f} {values['recall']:>9.4f} {values['f1-score']:>9.4f} "
                     f"{int(values['support']):>8}")
    if "calibration" in scores:
        from kerasbert_apps.ner.calibration import format_calibration

        lines.append(format_calibration(scores["calibration"]))
    return "\n".join(lines)
