"""What each head's training needs on small data: the study behind the defaults the heads declare (MiniLM, dev figures).

Figures, not a test: the dev runs the defaults each head declares (:class:`kerasbert_apps.base.heads.Head`)
were chosen from. A study (``--study``, :data:`STUDIES`) is a list of variants, each a ``kerasbert
ner|triples train`` run (float32) on one small setting (:data:`SETTINGS`). A row: the best epoch's
dev P/R/F1, the dev F1 per epoch, the threshold fitted or tuned on dev and the F1 it gives
(optimistic), the nested entities' F1, the wall seconds. A finished run is not trained again:
``--only`` trains one variant, ``--record`` writes the study's record from the finished runs.

    python -m bench.head_study --study NAME [--only VARIANT] [--work DIR] [--record]
"""

import argparse
import json
import os
import tempfile
from pathlib import Path

from bench.common import MINILM
from bench.common import flags_line
from bench.common import kerasbert
from bench.common import write_result
from bench.finetuning_strategies import genia_split
from bench.triples_small_data import SETTING
from bench.triples_small_data import tune_on_dev

GENIA_TRAIN = 500
SETTINGS = {
    "genia": "GENIA: first 500 sentences of the ner_heads.py training split (first 80% of GENIA dev), selected and "
             "scored on the rest of that split (334 sentences), nested entities kept, exact spans; MiniLM, max "
             "length 128",
    "webnlg": "WebNLG* (CasRel form): first 400 training sentences, first 150 validation sentences as dev, max "
              "length 64; MiniLM",
}
#: Options that pin a run to the steps of a study row whatever the auto rule gives.
TRIPLE_STEPS = ["--batch-size", "8", "--epochs", "20", "--patience", "0"]
STEPS_315 = ["--batch-size", "8", "--epochs", "5", "--patience", "0"]
STEPS_630 = ["--batch-size", "8", "--epochs", "10", "--patience", "0"]
#: study -> (setting, description, [(variant, head, options)]).
STUDIES = {
    "span-heads": ("genia", "span heads against the flat CRF on 500 GENIA sentences: the head's learning rate, "
                   "the optimizer steps, the decision threshold, the heads' entity weights and the biaffine head's BiLSTM", [
        ("crf: its defaults (315 steps)", "crf", []),
        ("global-pointer: the earlier defaults (head lr 1e-3, 189 steps, threshold 0)", "global-pointer",
         ["--head-learning-rate", "1e-3", "--batch-size", "8", "--epochs", "3", "--span-threshold", "0"]),
        ("global-pointer: head lr 1e-3, 315 steps", "global-pointer", ["--head-learning-rate", "1e-3", *STEPS_315]),
        ("global-pointer: head lr 3e-3, 315 steps", "global-pointer", ["--head-learning-rate", "3e-3", *STEPS_315]),
        ("global-pointer: head lr 1e-2, 315 steps", "global-pointer", ["--head-learning-rate", "1e-2", *STEPS_315]),
        ("global-pointer: head lr 3e-3, 630 steps (its defaults)", "global-pointer",
         ["--head-learning-rate", "3e-3", *STEPS_630]),
        ("global-pointer: the same, entity weight 3", "global-pointer",
         ["--head-learning-rate", "3e-3", *STEPS_630, "--global-pointer-entity-weight", "3"]),
        ("global-pointer: the same, entity weight 10", "global-pointer",
         ["--head-learning-rate", "3e-3", *STEPS_630, "--global-pointer-entity-weight", "10"]),
        ("biaffine: the earlier defaults (head lr 1e-3, 189 steps, entity weight 1, threshold 0)", "biaffine",
         ["--biaffine-lstm", "0", "--head-learning-rate", "1e-3", "--biaffine-entity-weight", "1", "--batch-size", "8",
          "--epochs", "3", "--span-threshold", "0"]),
        ("biaffine: head lr 3e-3, 315 steps", "biaffine",
         ["--biaffine-lstm", "0", "--head-learning-rate", "3e-3", "--biaffine-entity-weight", "1", *STEPS_315]),
        ("biaffine: head lr 3e-3, entity weight 10, 315 steps", "biaffine",
         ["--biaffine-lstm", "0", "--head-learning-rate", "3e-3", "--biaffine-entity-weight", "10", *STEPS_315]),
        ("biaffine: the same with a BiLSTM of 128 units", "biaffine",
         ["--biaffine-lstm", "128", "--head-learning-rate", "3e-3", "--biaffine-entity-weight", "10", *STEPS_315]),
    ]),
    "triple-heads": ("webnlg", "the two triple heads on 400 WebNLG* sentences, 1,000 steps (20 epochs of batch 8): "
                     "learning rates of the encoder and the head, thresholds tuned on dev", [
        ("casrel: the earlier defaults (encoder lr 5e-5, head lr 1e-3)", "casrel",
         ["--learning-rate", "5e-5", "--head-learning-rate", "1e-3", *TRIPLE_STEPS]),
        ("casrel: head lr 3e-3", "casrel",
         ["--learning-rate", "5e-5", "--head-learning-rate", "3e-3", *TRIPLE_STEPS]),
        ("casrel: encoder lr 1e-4", "casrel", ["--learning-rate", "1e-4", "--head-learning-rate", "1e-3", *TRIPLE_STEPS]),
        ("casrel: encoder lr 2e-4", "casrel", ["--learning-rate", "2e-4", "--head-learning-rate", "1e-3", *TRIPLE_STEPS]),
        ("gplinker: head lr 3e-3", "gplinker",
         ["--learning-rate", "5e-5", "--head-learning-rate", "3e-3", *TRIPLE_STEPS]),
        ("gplinker: head lr 3e-3, encoder lr 1e-4", "gplinker",
         ["--learning-rate", "1e-4", "--head-learning-rate", "3e-3", *TRIPLE_STEPS]),
    ]),
}


def data(setting, work):
    """The CLI options of a setting's data."""
    if setting == "genia":
        folder = work / "genia"
        if not (folder / "dev.jsonl").exists():
            genia_split(folder)
        return ["--train", folder / "train.jsonl", "--dev", folder / "dev.jsonl",
                "--max-train-examples", GENIA_TRAIN, "--max-length", 128]
    return SETTING


def folder_of(work, study, variant):
    return work / study / "".join(c if c.isalnum() else "_" for c in variant)


def train(setting, head, options, folder, work):
    """One ``train`` run into ``folder`` (skipped when it holds a finished run)."""
    if (folder / "metrics.json").exists():
        return
    folder.parent.mkdir(parents=True, exist_ok=True)
    seconds = kerasbert("ner" if setting == "genia" else "triples", "train", "--checkpoint", MINILM,
                        *data(setting, work), "--head", head, "--output", folder, "--precision", "float32",
                        *options, log=folder.with_suffix(".log"))
    (folder / "wall_seconds").write_text(f"{seconds:.1f}\n")


def row_of(variant, head, options, folder):
    metrics = json.loads((folder / "metrics.json").read_text())
    history = [json.loads(line) for line in (folder / "history.jsonl").read_text().splitlines() if line.strip()]
    dev = metrics["dev"]
    wall = folder / "wall_seconds"
    row = {"variant": variant, "head": head, "options": " ".join(map(str, options)),
           "batch": metrics["batch_size"], "epochs": metrics["epochs"],
           "steps": metrics["steps_per_epoch"] * metrics["epochs"],
           "head lr": metrics.get("head_learning_rate"), "best epoch": metrics["best_epoch"],
           "P": round(dev["precision"], 3), "R": round(dev["recall"], 3), "F1": round(dev["f1"], 3),
           "F1 by epoch": [round(h.get("val_f1", 0.0), 3) for h in history]}
    fitted = metrics.get("span_threshold")
    if fitted:
        row.update({"fitted threshold": fitted["threshold"], "F1 at it": round(fitted["f1"], 3),
                    "R at it": round(fitted["recall"], 3)})
    if "nested" in dev:
        row["nested F1"] = round(dev["nested"]["f1"], 3)
        if fitted:
            row["nested F1 at it"] = round(nested_at_threshold(folder)["f1"], 3)
    if head in ("casrel", "gplinker"):
        tuned = tuned_thresholds(folder, metrics)
        row.update({"tuned thresholds": tuned["thresholds"], "F1 at them": round(tuned["f1"], 3),
                    "R at them": round(tuned["recall"], 3)})
    row["wall seconds"] = round(float(wall.read_text())) if wall.exists() else None
    return row


def nested_at_threshold(folder):
    """The nested entities' dev scores of the run's model as saved (its fitted threshold), predicted as
    ``predict`` does (kept in ``nested_at_threshold.json``)."""
    from bench.ner_heads import scores_on

    cache = folder / "nested_at_threshold.json"
    if not cache.exists():
        settings = json.loads((folder / "settings.json").read_text())
        cache.write_text(json.dumps(scores_on(folder, settings["dev"], exact_spans=True)["nested"]))
    return json.loads(cache.read_text())


def tuned_thresholds(folder, metrics):
    """The thresholds tuned on dev: the run's own (``auto``), else ``kerasbert triples tune --dry-run``'s
    on its dev sentences (kept in ``tuned.json``)."""
    done = metrics.get("tuned_thresholds")
    if done:
        return {**done, "thresholds": "  ".join(f"{n} {v:g}" for n, v in zip(done["names"], done["thresholds"]))}
    cache = folder / "tuned.json"
    if not cache.exists():
        settings = json.loads((folder / "settings.json").read_text())
        thresholds, precision, recall, f1 = tune_on_dev(folder, settings["dev"], settings["max_dev_examples"])
        cache.write_text(json.dumps({"thresholds": thresholds.replace("--threshold-", ""), "precision": precision,
                                     "recall": recall, "f1": f1}))
    return json.loads(cache.read_text())


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--study", required=True, choices=sorted(STUDIES))
    parser.add_argument("--only", help="train only this variant (if not done yet)")
    parser.add_argument("--record", action="store_true", help="write the record from the finished runs (trains "
                        "nothing unless --only names a variant)")
    parser.add_argument("--work", default=os.path.join(tempfile.gettempdir(), "kerasbert_head_study"))
    args = parser.parse_args(argv)
    work = Path(args.work)
    setting, description, variants = STUDIES[args.study]
    print(flags_line(), flush=True)
    rows = []
    for variant, head, options in variants:
        folder = folder_of(work, args.study, variant)
        if args.only == variant or (args.only is None and not args.record):
            train(setting, head, options, folder, work)
        if (folder / "metrics.json").exists():
            rows.append(row_of(variant, head, options, folder))
            print("RESULT " + json.dumps(rows[-1]), flush=True)
    if args.record:  # on the page of the task's heads: a part of ner_heads or triples_small_data
        bench, part = ("ner_heads", "dev study: span heads") if setting == "genia" else \
            ("triples_small_data", "dev study: triple heads")
        write_result(bench, [{"part": part, **row} for row in rows], name=args.study, setup={
            "study": f"{description}, trained in float32 (python -m bench.head_study --study {args.study})",
            "data": SETTINGS[setting],
            "scores": "dev, the best epoch; P/R/F1 at the head's default decision (span heads: margin above 0; "
                      "triples: thresholds 0.5); fitted threshold / tuned thresholds: picked on this dev set for "
                      "the best F1, as --span-threshold auto and --threshold-* auto do at the end of training "
                      "(optimistic as a figure of the model: tuned on the data it is scored on)"
                      + ("; nested F1 at it: the nested entities' F1 of the model as saved (its fitted threshold), "
                         "predicted as predict does" if setting == "genia" else ""),
            "wall seconds": "of the whole run on a shared 2-core machine (other jobs beside it): not a timing",
            "variants not run": [variant for variant, _, _ in variants
                                 if not (folder_of(work, args.study, variant) / "metrics.json").exists()]})


if __name__ == "__main__":
    main()
