"""NER heads compared: the CRF, GlobalPointer and biaffine heads (MiniLM checkpoint).

Figures, not a test. Each head (``--heads``) trains as a ``kerasbert ner train`` subprocess in float32
with its defaults (``auto``), max length 128; a number for ``--epochs`` / ``--genia-epochs`` trains
that many epochs at batch 32 without early stopping. Parts: ``conll`` (eng.train, selected on
eng.testa, scored on eng.testb as ``ner evaluate`` scores the head, with the entity scores'
calibration) and ``genia`` (the first 80% of GENIA dev, selected on the rest, scored on GENIA test
with nested entities kept, by the exact-span scorer). A part trained with a number of epochs or
with ``--options`` is a variant: its record's part names them.

    python -m bench.ner_heads [--parts conll,genia] [--heads crf,global-pointer,biaffine] [--work DIR]
        [--epochs auto] [--genia-epochs auto] [--max-train N] [--options="..."] [--reuse]
"""

import argparse
import json
import os
import tempfile

from bench.common import CONLL
from bench.common import MINILM
from bench.common import kerasbert
from bench.common import run_parts
from bench.common import write_result
from bench.finetuning_strategies import genia_split
from bench.finetuning_strategies import result

HEADS = ("crf", "global-pointer", "biaffine")


def train(head, output, train_file, dev_file, epochs, log_dir, max_train=0, reuse=False, options=()):
    """One ``ner train`` run of ``head`` (:func:`budget` of ``epochs``); its wall seconds (with ``reuse``,
    those a finished run in ``output`` recorded)."""
    if reuse and (output / "metrics.json").exists():
        return float((output / "wall_seconds").read_text())
    limit = ["--max-train-examples", str(max_train)] if max_train else []
    seconds = kerasbert("ner", "train", "--checkpoint", MINILM, "--train", train_file, "--dev", dev_file,
                        "--output", output, "--max-length", 128, "--head", head, "--precision", "float32",
                        *budget(epochs), *limit, *options, log=log_dir / f"{output.name}.train.log")
    (output / "wall_seconds").write_text(f"{seconds:.1f}\n")
    return seconds


def trained_with(output):
    """What the run in ``output`` resolved (:data:`TRAINED`) and its dev F1 after each epoch."""
    metrics = json.loads((output / "metrics.json").read_text())
    fitted = metrics.get("span_threshold") or {}
    history = [json.loads(line) for line in (output / "history.jsonl").read_text().splitlines() if line.strip()]
    return {"batch": metrics["batch_size"], "epochs": metrics["epochs"], "best epoch": metrics["best_epoch"],
            "steps": metrics["steps_per_epoch"] * metrics["epochs"], "head lr": metrics["head_learning_rate"],
            "threshold": fitted.get("threshold"), "dev F1 by epoch": [h.get("val_f1", 0.0) for h in history]}


def scores_on(model, data, exact_spans=False):
    """The scores of ``model`` on the labelled file ``data``, predicted as ``kerasbert ner predict`` does:
    as ``kerasbert ner evaluate`` scores that head, or with ``exact_spans`` by the exact-span scorer,
    nested and overlapping gold entities kept."""
    from kerasbert_apps.base import heads
    from kerasbert_apps.ner.readers import read_ner_file
    from kerasbert_apps.ner.train import NER

    examples = read_ner_file(data, **({"keep_overlaps": True} if exact_spans else {})).examples
    pipeline = NER.load(model)
    predictions = pipeline.predict([e.text for e in examples], batch_size=32)
    return NER.score(examples, predictions, spans=exact_spans, head=heads.get("ner", pipeline.head_name))


def part_conll(args, work):
    from kerasbert_apps.ner.calibration import format_calibration
    from kerasbert_apps.ner.calibration import reliability_figure
    from kerasbert.files.atomic import atomic_write_text

    rows = []
    for head in args.heads.split(","):
        output = work / f"conll_{head}"
        seconds = train(head, output, CONLL / "eng.train.gz", CONLL / "eng.testa", args.epochs, work, args.max_train,
                        args.reuse, args.options.split())
        scores = scores_on(output, CONLL / "eng.testb")
        calib = scores["calibration"]
        print(f"{head}: " + format_calibration(calib), flush=True)
        atomic_write_text(output / "calibration.json", json.dumps(calib, indent=2) + "\n")
        reliability_figure(calib, title=f"eng.testb ({head} head)").savefig(output / "reliability.png", dpi=100)
        dev = json.loads((output / "metrics.json").read_text())["dev"]
        rows.append(result(part="conll", head=head, **trained_with(output), scorer=scores.get("scorer"),
                           dev_f1=dev["f1"], test_precision=scores["precision"], test_recall=scores["recall"],
                           test_f1=scores["f1"], ece=calib["ece"], entities=calib["entities"],
                           correct=calib["correct"], train_seconds=round(seconds),
                           reliability=str(output / "reliability.png")))
    return rows


def part_genia(args, work):
    data = work / "genia"
    train_count, dev_count, test_count = genia_split(data)
    rows = []
    for head in args.heads.split(","):
        output = work / f"genia_{head}"
        seconds = train(head, output, data / "train.jsonl", data / "dev.jsonl", args.genia_epochs, work,
                        args.max_train, args.reuse, args.options.split())
        scores = scores_on(output, data / "test.jsonl", exact_spans=True)
        dev = json.loads((output / "metrics.json").read_text())["dev"]
        nested = scores["nested"]
        rows.append(result(part="genia", head=head, train_sentences=train_count, dev_sentences=dev_count,
                           test_sentences=test_count, **trained_with(output), dev_f1=dev["f1"],
                           test_precision=scores["precision"], test_recall=scores["recall"], test_f1=scores["f1"],
                           nested_precision=nested["precision"], nested_recall=nested["recall"],
                           nested_f1=nested["f1"], nested_gold=nested["gold"], nested_predicted=nested["predicted"],
                           train_seconds=round(seconds)))
    return rows


def budget(epochs):
    """The ``ner train`` options that :func:`train` adds for ``epochs`` (none for ``auto``)."""
    return [] if epochs == "auto" else ["--epochs", str(epochs), "--batch-size", "32", "--patience", "0"]


def variant_options(args, epochs):
    """What a part's runs were given beyond the defaults: the budget of a given ``epochs`` and
    ``--options`` ("" for the defaults alone)."""
    return " ".join(budget(epochs) + args.options.split())


def variant(part, options):
    """A row's ``part`` (and ``options``): a variant's part names its options."""
    return {"part": f"{part} ({options})", "options": options} if options else {"part": part}


def write_results(args, rows):
    """One record per part this run measured, a row per head; a variant's part and rows name its options."""
    conll = [r for r in rows if r["part"] == "conll"]
    def how(epochs):
        return ("float32, each head's defaults (auto batch size, epochs, patience and head learning rate from its "
                "registration; span heads: decision threshold fitted on dev)" if epochs == "auto" else
                f"float32, {epochs} epochs, batch 32, no early stopping, the heads' default learning rates")

    if conll:
        options = variant_options(args, args.epochs)
        write_result("ner_heads", [{
            **variant("CoNLL-2003", options), "head": r["head"], "test F1": round(r["test_f1"] * 100, 2),
            "test P": round(r["test_precision"] * 100, 2), "test R": round(r["test_recall"] * 100, 2),
            "dev F1": round(r["dev_f1"] * 100, 2), **{k: r[k] for k in TRAINED},
            "dev F1 by epoch": [round(f * 100, 2) for f in r["dev F1 by epoch"]],
            "entity-score ECE": None if r["ece"] is None else round(r["ece"], 3),
            "predicted entities (right)": f"{r['entities']} ({r['correct']})", "scorer": r["scorer"],
            "train seconds": r["train_seconds"]} for r in conll], name="conll", setup={
                "data": "CoNLL-2003: MiniLM, eng.train" + (f" (first {args.max_train} sentences)" if args.max_train
                                                            else "") + ", max length 128, selected on eng.testa, "
                        "scored on eng.testb as kerasbert ner evaluate scores each head; ECE over 10 equal-width bins",
                "training": how(args.epochs) + (f"; with {args.options}" if args.options else ""),
                "note": "reliability diagrams: <work>/conll_<head>/reliability.png (not kept); train seconds: wall "
                        "time of the run on a shared machine (other jobs ran beside it), not a timing",
            })
    genia = [r for r in rows if r["part"] == "genia"]
    if genia:
        first = genia[0]
        options = variant_options(args, args.genia_epochs)
        write_result("ner_heads", [{
            **variant("GENIA (nested)", options), "head": r["head"], "P": round(r["test_precision"], 3),
            "R": round(r["test_recall"], 3), "F1": round(r["test_f1"], 3), "nested P": round(r["nested_precision"], 3),
            "nested R": round(r["nested_recall"], 3), "nested F1": round(r["nested_f1"], 3),
            "nested predicted": r["nested_predicted"], "dev F1": round(r["dev_f1"], 3),
            **{k: r[k] for k in TRAINED}, "dev F1 by epoch": [round(f, 3) for f in r["dev F1 by epoch"]],
            "train seconds": r["train_seconds"]} for r in genia], name="genia", setup={
                "data": f"GENIA (no train split): trained on the first 80% of GENIA dev ({first['train_sentences']} "
                        f"sentences{f', first {args.max_train} used' if args.max_train else ''}), selected on the rest "
                        f"({first['dev_sentences']}), scored on GENIA test ({first['test_sentences']} sentences, "
                        f"{first['nested_gold']} nested gold entities), nested entities kept in the gold, exact-span "
                        "scorer for every head",
                "training": f"MiniLM, max length 128, {how(args.genia_epochs)}"
                            + (f"; with {args.options}" if args.options else ""),
                "note": "train seconds: wall time of the run on a shared machine, not a timing",
            })


#: What each row says of how its head trained (trained_with).
TRAINED = ("batch", "epochs", "steps", "best epoch", "head lr", "threshold")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--parts", default="conll,genia")
    parser.add_argument("--heads", default=",".join(HEADS))
    parser.add_argument("--work", default=os.path.join(tempfile.gettempdir(), "kerasbert-heads"))
    parser.add_argument("--epochs", default="auto", help="CoNLL epochs per head (auto: each head's defaults)")
    parser.add_argument("--genia-epochs", default="auto", help="GENIA epochs per head (auto: each head's defaults)")
    parser.add_argument("--reuse", action="store_true", help="score a head's finished run in the work folder "
                        "instead of training it again")
    parser.add_argument("--max-train", type=int, default=0, help="first N training sentences (0: all; a smoke run)")
    parser.add_argument("--options", default="", help="ner train options added to every run (a variant: the "
                        "records' parts name them)")
    run_parts(parser.parse_args(), {"conll": part_conll, "genia": part_genia}, write_results)


if __name__ == "__main__":
    main()
