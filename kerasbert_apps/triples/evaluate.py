"""Triple-level evaluation: exact and partial match, per predicate, by overlap class.

Matching
--------
A triple is compared as the string triple ``(subject text, predicate, object
text)``, per sentence, as sets (duplicates count once), the way CasRel and
TPLinker score: a predicted triple is correct when the same string triple is
among the sentence's gold triples. Texts are the spans' texts (``text[start:
end]`` for predictions and for located gold triples; the annotated strings
for gold triples that could not be located, which are therefore always
missed). Comparing strings rather than offsets means a correct entity found at
another occurrence of the same string still counts, as in those papers.

* ``exact``: the full subject and object strings;
* ``partial``: only the LAST WORD of the subject and of the object (split on
  whitespace), CasRel/TPLinker's "partial match" (the WebNLG*/NYT* setting,
  whose gold entities are last words only). For text without spaces (Chinese)
  the last word is the whole string, so partial equals exact.

Precision = correct / predicted, recall = correct / gold, F1 their harmonic
mean (0 when undefined), micro-averaged over all sentences.

Breakdowns (both computed in the selected mode):

* ``per_predicate``: gold/predicted/correct and P/R/F1 per predicate;
* ``by_overlap``: sentences classified by their GOLD triples as in CasRel
  (Table 3 / Figure 3): ``normal`` (no two triples share an entity), ``EPO``
  (some unordered entity pair appears in two or more triples, e.g. several
  predicates for one pair), ``SEO`` (some entity appears in two or more
  triples with different partners). A sentence can be both SEO and EPO; each
  class is scored on its sentences (predictions included);
* ``by_triple_count``: sentences with 1, 2, 3, 4 and >= 5 gold triples.
"""

from collections import defaultdict

from kerasbert_apps.base.scores import prf

MODES = ("exact", "partial")


def _last_word(text):
    words = text.split()
    return words[-1] if words else text


def _gold_keys(example, mode):
    keys = {t.key() for t in example.triples} | {tuple(u) for u in example.unlocated}
    return {_project(k, mode) for k in keys}


def _pred_keys(prediction, mode):
    keys = {(t["subject"]["text"], t["predicate"], t["object"]["text"]) for t in prediction["triples"]}
    return {_project(k, mode) for k in keys}


def _project(key, mode):
    if mode == "partial":
        return (_last_word(key[0]), key[1], _last_word(key[2]))
    return key


def overlap_classes(gold_keys):
    """The CasRel classes of a sentence from its gold string triples: a set
    with ``"normal"``, or one or both of ``"SEO"``, ``"EPO"``."""
    pairs = defaultdict(int)
    partners = defaultdict(set)
    for s, _, o in gold_keys:
        pairs[frozenset((s, o))] += 1
        partners[s].add(o)
        partners[o].add(s)
    classes = set()
    if any(n >= 2 for n in pairs.values()):
        classes.add("EPO")
    if any(len(p) >= 2 for p in partners.values()):
        classes.add("SEO")
    return classes or {"normal"}


def score(examples, predictions, mode="exact"):
    """Scores of ``predictions`` (the extractor's output dicts, same order)
    against ``examples`` (:class:`~kerasbert_apps.triples.data.TripleExample`).

    Returns a dict: ``precision``, ``recall``, ``f1`` (in ``mode``),
    ``exact`` and ``partial`` (P/R/F1 and counts of both), ``per_predicate``,
    ``by_overlap``, ``by_triple_count`` (in ``mode``), ``examples``,
    ``unlocated_gold``.
    """
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
    if len(examples) != len(predictions):
        raise ValueError(f"{len(examples)} examples but {len(predictions)} predictions")
    totals = {m: [0, 0, 0] for m in MODES}  # correct, predicted, gold
    per_predicate = defaultdict(lambda: [0, 0, 0])
    by_overlap = {k: [0, 0, 0, 0] for k in ("normal", "SEO", "EPO")}  # + sentences
    by_count = {k: [0, 0, 0, 0] for k in ("1", "2", "3", "4", ">=5")}
    for example, prediction in zip(examples, predictions):
        for m in MODES:
            gold, pred = _gold_keys(example, m), _pred_keys(prediction, m)
            counts = (len(gold & pred), len(pred), len(gold))
            totals[m] = [a + b for a, b in zip(totals[m], counts)]
            if m != mode:
                continue
            for key in gold | pred:
                row = per_predicate[key[1]]
                row[0] += key in gold and key in pred
                row[1] += key in pred
                row[2] += key in gold
            classes = overlap_classes(_gold_keys(example, "exact")) if gold else set()
            for c in classes:
                by_overlap[c] = [a + b for a, b in zip(by_overlap[c], counts + (1,))]
            if gold:
                bucket = str(len(gold)) if len(gold) < 5 else ">=5"
                by_count[bucket] = [a + b for a, b in zip(by_count[bucket], counts + (1,))]
    result = {"mode": mode, **{k: v for k, v in prf(*totals[mode]).items() if k in ("precision", "recall", "f1")}}
    for m in MODES:
        result[m] = prf(*totals[m])
    result["per_predicate"] = {p: prf(*row) for p, row in sorted(per_predicate.items())}
    result["by_overlap"] = {k: {**prf(*v[:3]), "sentences": v[3]} for k, v in by_overlap.items()}
    result["by_triple_count"] = {k: {**prf(*v[:3]), "sentences": v[3]} for k, v in by_count.items()}
    result["examples"] = len(examples)
    result["unlocated_gold"] = sum(len(e.unlocated) for e in examples)
    return result


def format_scores(scores, max_predicates=None):
    """A text table of :func:`score`'s result."""
    lines = [
        f"{scores['examples']} sentences; gold {scores['exact']['gold']} triples "
        f"({scores['unlocated_gold']} not located in the text), predicted {scores['exact']['predicted']}",
    ]
    for m in MODES:
        s = scores[m]
        lines.append(f"{m:<8} P {s['precision']:.4f}  R {s['recall']:.4f}  F1 {s['f1']:.4f}   "
                     f"({s['correct']} correct)" + ("   <- selected" if m == scores["mode"] else ""))
    header = f"{'':<24} {'precision':>9} {'recall':>9} {'f1':>9} {'gold':>6} {'pred':>6} {'sents':>6}"
    lines.append(f"\nby overlap class ({scores['mode']}; classes from gold triples, SEO and EPO can overlap):")
    lines.append(header)
    for name, group in (("by_overlap", scores["by_overlap"]), ("by_triple_count", scores["by_triple_count"])):
        if name == "by_triple_count":
            lines.append(f"\nby number of gold triples per sentence ({scores['mode']}):")
            lines.append(header)
        for key, v in group.items():
            lines.append(f"{key:<24} {v['precision']:>9.4f} {v['recall']:>9.4f} {v['f1']:>9.4f} "
                         f"{v['gold']:>6} {v['predicted']:>6} {v['sentences']:>6}")
    lines.append(f"\nper predicate ({scores['mode']}):")
    lines.append(f"{'predicate':<40} {'precision':>9} {'recall':>9} {'f1':>9} {'gold':>6} {'pred':>6}")
    rows = sorted(scores["per_predicate"].items(), key=lambda kv: (-kv[1]["gold"], kv[0]))
    shown = rows if max_predicates is None else rows[:max_predicates]
    for p, v in shown:
        lines.append(f"{p[:40]:<40} {v['precision']:>9.4f} {v['recall']:>9.4f} {v['f1']:>9.4f} {v['gold']:>6} {v['predicted']:>6}")
    if len(shown) < len(rows):
        lines.append(f"... {len(rows) - len(shown)} more predicates (all in the JSON)")
    return "\n".join(lines)
