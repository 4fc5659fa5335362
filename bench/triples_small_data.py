"""Triple extraction on small data: 400 WebNLG* training sentences, 150 dev, ``--max-length 64``.

Figures, not a test. The small-data setting: the first
400 sentences of WebNLG*'s training file, the first 150 of its validation file
as dev, the MiniLM checkpoint, ``--max-length 64`` and every other setting at
its default (the ``auto`` rule picks batch size, epochs and patience), unless
``--extra`` adds options (e.g. ``--epochs 20 --patience 0`` to see the whole
curve). Each run is a ``kerasbert triples train`` CLI subprocess, as a user
runs it; the row gives the head, the options, the best dev F1 (exact match)
with its precision and recall and epoch, the dev F1 of every epoch, the wall
seconds of the run, and, with ``--tune``, the best threshold pair of
``kerasbert triples tune --dry-run`` on the same dev file (tuned on dev and
scored on it: an optimistic figure, said so in the row).

``--from-runs DIR [DIR ...]`` records runs already made with this setting
(their ``settings.json``, ``history.jsonl`` and ``metrics.json``) instead of
training; their wall time is unknown unless ``DIR/wall_seconds`` holds it.

    python bench/triples_small_data.py [--heads casrel,gplinker] [--extra "--epochs 20 --patience 0"] [--tune]
    python bench/triples_small_data.py --from-runs RUN1 RUN2
"""

import argparse
import json
import os
import re
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("KERASBERT_SHARED", ROOT.parent / "shared")) / "data"
WEBNLG = SHARED / "webnlg_casrel_star"
MINILM = SHARED / "models" / "minilm_l6_h384_uncased"
sys.path.insert(0, str(Path(__file__).resolve().parent))
from results import flags_line  # noqa: E402
from results import write_result  # noqa: E402

TRAIN, DEV, MAX_LENGTH = 400, 150, 64
TARGET = 0.55


def kerasbert(*args):
    return [sys.executable, "-m", "kerasbert.cli", *map(str, args)]


def train(folder, head, extra):
    """One ``kerasbert triples train`` run of the setting into ``folder``; its wall seconds."""
    command = kerasbert("triples", "train", "--checkpoint", MINILM, "--train", WEBNLG / "train_triples.json.gz",
                        "--dev", WEBNLG / "val_triples.json", "--max-train-examples", TRAIN,
                        "--max-dev-examples", DEV, "--max-length", MAX_LENGTH, "--head", head,
                        "--output", folder, *extra)
    started = time.perf_counter()
    with open(Path(folder).with_suffix(".log"), "w") as log:
        done = subprocess.run(command, stdout=log, stderr=subprocess.STDOUT)
    if done.returncode:
        sys.exit(f"triples train failed ({done.returncode}): see {Path(folder).with_suffix('.log')}")
    seconds = time.perf_counter() - started
    (Path(folder) / "wall_seconds").write_text(f"{seconds:.1f}\n")
    return seconds


def tune(folder):
    """The best threshold pair on the dev file (``tune --dry-run``), as printed."""
    dev = Path(folder) / "dev150.json"
    dev.write_text(json.dumps(json.loads((WEBNLG / "val_triples.json").read_text())[:DEV]))
    done = subprocess.run(kerasbert("triples", "tune", "--model", folder, "--data", dev, "--dry-run"),
                          capture_output=True, text=True)
    best = next((line for line in done.stdout.splitlines() if line.startswith("best:")), "")
    found = re.search(r"best: (.*?): P ([\d.]+)\s+R ([\d.]+)\s+F1 ([\d.]+)", best)
    if not found:
        sys.exit(f"triples tune printed no best pair: {done.stdout[-500:]} {done.stderr[-500:]}")
    return {"tuned_thresholds": found.group(1).strip(), "tuned_dev_f1": float(found.group(4)),
            "tuned_dev_precision": float(found.group(2)), "tuned_dev_recall": float(found.group(3)),
            "tuned_note": "thresholds tuned on the dev file and scored on it (optimistic)"}


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
            "extra_options": " ".join(f"--{key.replace('_', '-')} {settings[key]}" for key in ("epochs", "patience", "batch_size")
                                      if settings.get(key) not in (None, "auto"))}


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
    if args.from_runs:
        for folder in args.from_runs:
            row = row_of(folder)
            if args.tune:
                row.update(tune(folder))
            rows.append(row)
            print("RESULT " + json.dumps(row), flush=True)
    else:
        Path(args.work).mkdir(parents=True, exist_ok=True)
        for head in args.heads.split(","):
            folder = Path(args.work) / head
            seconds = train(folder, head, shlex.split(args.extra))
            row = row_of(folder, seconds)
            if args.tune:
                row.update(tune(folder))
            rows.append(row)
            print("RESULT " + json.dumps(row), flush=True)
    write_result("triples_small_data", rows, setup={
        "data": f"WebNLG* (CasRel form): first {TRAIN} training sentences, first {DEV} validation sentences as dev",
        "checkpoint": "MiniLM L6 H384 uncased", "max_length": MAX_LENGTH,
        "settings": "defaults (the auto rule) unless extra_options says otherwise",
        "score": "dev F1, exact match, of the best epoch", "target": f"dev F1 >= {TARGET} in under 6 minutes on 2 cores"},
        columns=["head", "extra_options", "batch_size", "epochs", "best_epoch", "dev_f1", "dev_precision",
                 "dev_recall", "tuned_dev_f1", "wall_seconds", "meets_target"])


if __name__ == "__main__":
    main()
