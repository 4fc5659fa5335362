"""Triple extraction on small data: 400 WebNLG* training sentences, 150 dev, ``--max-length 64``.

Figures, not a test. Each head (``--heads``) trains as a ``kerasbert triples train`` subprocess on
:data:`SETTING` (MiniLM, float32, the other settings ``auto`` unless ``--extra`` adds options). A row:
the best dev F1 (exact match) with P, R and epoch, the dev F1 per epoch, the wall seconds; with
``--tune``, the best thresholds of ``triples tune --dry-run`` on the same dev file (optimistic).
``--from-runs`` records finished runs of this setting instead of training.

    python -m bench.triples_small_data [--heads casrel,gplinker] [--extra "--epochs 20 --patience 0"] [--tune]
    python -m bench.triples_small_data --from-runs RUN1 RUN2
"""

import argparse
import json
import os
import re
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path

from bench.common import MINILM
from bench.common import SHARED
from bench.common import flags_line
from bench.common import kerasbert
from bench.common import write_result

WEBNLG = SHARED / "webnlg_casrel_star"
TRAIN, DEV, MAX_LENGTH = 400, 150, 64
#: The setting's ``triples train`` options.
SETTING = ["--train", WEBNLG / "train_triples.json.gz", "--dev", WEBNLG / "val_triples.json",
           "--max-train-examples", TRAIN, "--max-dev-examples", DEV, "--max-length", MAX_LENGTH]
TARGET = 0.55


def train(folder, head, extra):
    """One ``kerasbert triples train`` run of the setting into ``folder``; its wall seconds."""
    seconds = kerasbert("triples", "train", "--checkpoint", MINILM, *SETTING, "--head", head, "--output", folder,
                        "--precision", "float32", *extra, log=Path(folder).with_suffix(".log"))
    (Path(folder) / "wall_seconds").write_text(f"{seconds:.1f}\n")
    return seconds


def tune_on_dev(folder, dev, count):
    """``kerasbert triples tune --dry-run`` of the run in ``folder`` on the first ``count`` sentences of
    ``dev``: ``(the best threshold options as printed, dev precision, recall, F1)``."""
    sentences = Path(folder) / "dev_sentences.json"
    sentences.write_text(json.dumps(json.loads(Path(dev).read_text())[:count]))
    done = subprocess.run([sys.executable, "-m", "kerasbert.cli", "triples", "tune", "--model", str(folder),
                           "--data", str(sentences), "--dry-run"], capture_output=True, text=True)
    found = re.search(r"best: (.*?): P ([\d.]+)\s+R ([\d.]+)\s+F1 ([\d.]+)", done.stdout)
    if not found:
        sys.exit(f"triples tune printed no best pair: {done.stdout[-500:]} {done.stderr[-500:]}")
    return (found.group(1).strip(), *(float(found.group(i)) for i in (2, 3, 4)))


def tune(folder):
    """The best threshold pair on the dev file, as ``tune --dry-run`` prints it."""
    thresholds, precision, recall, f1 = tune_on_dev(folder, WEBNLG / "val_triples.json", DEV)
    return {"tuned_thresholds": thresholds, "tuned_dev_f1": f1, "tuned_dev_precision": precision,
            "tuned_dev_recall": recall, "tuned_note": "thresholds tuned on the dev file and scored on it (optimistic)"}


def row_of(folder, seconds=None):
    folder = Path(folder)
    settings = json.loads((folder / "settings.json").read_text())
    metrics = json.loads((folder / "metrics.json").read_text())
    history = [json.loads(line) for line in (folder / "history.jsonl").read_text().splitlines() if line.strip()]
    for key, want in (("max_train_examples", TRAIN), ("max_dev_examples", DEV), ("max_length", MAX_LENGTH)):
        if settings.get(key) != want:
            sys.exit(f"{folder}: not this bench's setting ({key} is {settings.get(key)!r}, not {want})")
    if seconds is None and (folder / "wall_seconds").exists():
        seconds = float((folder / "wall_seconds").read_text())
    dev = metrics["dev"]
    return {"head": settings.get("head", "casrel"), "batch_size": metrics.get("batch_size"),
            "epochs": metrics.get("epochs"), "patience": metrics.get("patience"),
            "learning_rate": metrics.get("learning_rate", settings.get("learning_rate")),
            "head_learning_rate": metrics.get("head_learning_rate", settings.get("head_learning_rate")),
            "best_epoch": metrics.get("best_epoch"), "dev_f1": round(dev["f1"], 4),
            "dev_precision": round(dev["precision"], 4), "dev_recall": round(dev["recall"], 4),
            "dev_f1_by_epoch": [round(h.get("val_f1", 0.0), 4) for h in history],
            "wall_seconds": round(seconds, 1) if seconds is not None else None,
            "target_dev_f1": TARGET, "meets_target": dev["f1"] >= TARGET,
            "extra_options": " ".join(f"--{key.replace('_', '-')} {settings[key]}" for key in
                                      ("epochs", "patience", "batch_size", "precision")
                                      if settings.get(key) not in (None, "auto", "float32"))}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--heads", default="casrel,gplinker")
    parser.add_argument("--extra", default="", help="more `triples train` options, one string")
    parser.add_argument("--tune", action="store_true", help="also the best thresholds on dev (tune --dry-run)")
    parser.add_argument("--work", default=os.path.join(tempfile.gettempdir(), "kerasbert_triples_small"))
    parser.add_argument("--from-runs", nargs="+", help="record these finished runs instead of training")
    args = parser.parse_args(argv)
    print(flags_line(), flush=True)
    rows = []
    if not args.from_runs:
        Path(args.work).mkdir(parents=True, exist_ok=True)
    for folder in args.from_runs or [Path(args.work) / head for head in args.heads.split(",")]:
        row = row_of(folder) if args.from_runs else row_of(folder, train(folder, folder.name, shlex.split(args.extra)))
        if args.tune:
            row.update(tune(folder))
        rows.append(row)
        print("RESULT " + json.dumps(row), flush=True)
    write_result("triples_small_data", rows, setup={
        "data": f"WebNLG* (CasRel form): first {TRAIN} training sentences, first {DEV} validation sentences as dev",
        "checkpoint": "MiniLM L6 H384 uncased", "max_length": MAX_LENGTH,
        "settings": "float32, defaults (the auto rule) unless extra_options says otherwise",
        "score": "dev F1, exact match, of the best epoch", "target": f"dev F1 >= {TARGET} in under 6 minutes on 2 cores"},
        columns=["head", "extra_options", "batch_size", "epochs", "best_epoch", "dev_f1", "dev_precision",
                 "dev_recall", "tuned_dev_f1", "wall_seconds", "meets_target"])


if __name__ == "__main__":
    main()
