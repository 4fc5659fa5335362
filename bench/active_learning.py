"""Active learning on CoNLL-2003: ``kerasbert ner select`` against random sampling (a benchmark, not a test).

Each step a ``kerasbert`` CLI subprocess: per seed, ``--start`` random eng.train sentences (shared
by the strategies); then per strategy, rounds of: train a tagger on the labelled sentences (MiniLM,
float32, max length 64), scored on eng.testa; ``kerasbert ner select --strategy S --budget STEP``
over the other sentences, the chosen ones joining with their gold tags. Selection runs up to
``--max-selected`` sentences, random sampling (``--diversity 1``) up to ``--max-random``. Rows per
strategy, seed and size, and the means; the curves: ``bench/figures/active_learning.png``.
``--smoke`` writes both under ``--work``. Records named ``gpu``: ``bench/offline_gpu_host/``.

    python -m bench.active_learning                          # the full run: hours on a CPU
    python -m bench.active_learning --smoke --work al-smoke  # minutes: tiny numbers, proves the loop
"""

import argparse
import json
import os
import random
import statistics
import tempfile
import time
from pathlib import Path

from bench.common import CONLL
from bench.common import FIGURES
from bench.common import MINILM
from bench.common import ROOT
from bench.common import kerasbert
from bench.common import read_conll
from bench.common import sentence_text
from bench.common import write_result

FIGURE = FIGURES / "active_learning.png"


def write_conll(path, sentences):
    Path(path).write_text("".join("\n".join(s) + "\n\n" for s in sentences), encoding="utf-8")


def train(labelled, folder, dev, args, seed):
    """Train on ``labelled`` sentences; returns (dev F1, seconds)."""
    data = folder / "train.conll"
    folder.mkdir(parents=True, exist_ok=True)
    write_conll(data, labelled)
    command = ["ner", "train", "--checkpoint", str(args.checkpoint), "--train", str(data), "--dev", str(dev),
               "--output", str(folder / "run"), "--max-length", "64", "--seed", str(seed), "--precision", "float32"]
    if args.epochs != "auto":
        command += ["--epochs", args.epochs]
    seconds = kerasbert(*command, log=folder / "train.log")
    metrics = json.loads((folder / "run" / "metrics.json").read_text(encoding="utf-8"))
    return metrics["dev"]["f1"], seconds


def select(folder, pool_indices, train_sentences, strategy, budget, seed):
    """``ner select`` over the unlabelled sentences; returns (chosen indices, seconds)."""
    pool = folder / "pool.txt"
    pool.write_text("".join(sentence_text(train_sentences[i]) + "\n" for i in pool_indices), encoding="utf-8")
    chosen = folder / "chosen.jsonl"
    plain = ["--diversity", "1"] if strategy == "random" else []  # the baseline: plain random sampling
    seconds = kerasbert("ner", "select", "--model", folder / "run", "--pool", pool, "--budget", budget,
                        "--strategy", strategy, "--format", "jsonl", "--seed", seed, "--output", chosen, *plain,
                        log=folder / "select.log")
    lines = [json.loads(line)["line"] for line in chosen.read_text(encoding="utf-8").splitlines() if line.strip()]
    return [pool_indices[line - 1] for line in lines], seconds


def curve(strategy, seed, start, train_sentences, dev, args, work, first):
    """One learning curve: rows of (labelled, dev F1); ``first`` the (F1, seconds) at ``start`` (shared)."""
    limit = args.max_random if strategy == "random" else args.max_selected
    labelled = list(start)
    rows = []
    f1, seconds = first
    select_seconds = 0.0
    while True:
        rows.append({"strategy": strategy, "seed": seed, "labelled": len(labelled), "dev_f1": round(f1, 4),
                     "train_seconds": round(seconds, 1), "select_seconds": round(select_seconds, 1)})
        print(json.dumps(rows[-1]), flush=True)
        if len(labelled) + args.step > limit:
            return rows
        folder = work / f"seed{seed}" / strategy / f"{len(labelled):04d}"
        if len(labelled) == len(start):  # the shared first model
            folder = work / f"seed{seed}" / "start"
        taken = set(labelled)
        pool = [i for i in range(len(train_sentences)) if i not in taken]
        if args.pool_size:
            pool = pool[: args.pool_size]
        chosen, select_seconds = select(folder, pool, train_sentences, strategy, args.step, seed)
        labelled += chosen
        folder = work / f"seed{seed}" / strategy / f"{len(labelled):04d}"
        f1, seconds = train([train_sentences[i] for i in labelled], folder, dev, args, seed)


def plot(rows, path):
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib is not installed: no figure")
        return None
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    for strategy in sorted({r["strategy"] for r in rows}):
        points = sorted({r["labelled"] for r in rows if r["strategy"] == strategy})
        per = [[r["dev_f1"] for r in rows if r["strategy"] == strategy and r["labelled"] == n] for n in points]
        ax.plot(points, [statistics.mean(v) for v in per], marker="o", label=strategy)
        ax.fill_between(points, [min(v) for v in per], [max(v) for v in per], alpha=0.2)
    ax.set_xlabel("labelled sentences")
    ax.set_ylabel("dev F1 (eng.testa)")
    ax.set_title("CoNLL-2003, MiniLM: kerasbert ner select vs random")
    ax.grid(alpha=0.3)
    ax.legend()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    print(f"figure written: {path}")
    return path


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--work", default=os.path.join(tempfile.gettempdir(), "kerasbert-active-learning"), help="folder for runs and logs")
    parser.add_argument("--strategies", default="least-confident,entropy,random")
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--start", type=int, default=100, help="first labelled sentences (random)")
    parser.add_argument("--step", type=int, default=100, help="sentences added per round")
    parser.add_argument("--max-selected", type=int, default=600, help="last labelled size of a selection strategy")
    parser.add_argument("--max-random", type=int, default=900, help="last labelled size of random sampling")
    parser.add_argument("--epochs", default="auto", help="ner train --epochs (default: the auto rule)")
    parser.add_argument("--pool-size", type=int, default=0, help="only the first N unlabelled sentences (0: all)")
    parser.add_argument("--test-size", type=int, default=0, help="only the first N eng.testa sentences (0: all)")
    parser.add_argument("--checkpoint", default=str(MINILM))
    parser.add_argument("--smoke", action="store_true", help="tiny numbers, result and figure under --work")
    args = parser.parse_args(argv)
    if args.smoke:
        args.start, args.step, args.max_selected, args.max_random = 20, 20, 60, 60
        args.seeds, args.epochs, args.pool_size, args.test_size = "0", "1", 2000, 200
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    # a smoke run's numbers mean nothing: its record and figure stay out of bench/
    figure, root = (work / "active_learning.png", work / "results") if args.smoke else (FIGURE, None)
    train_sentences = read_conll(CONLL / "eng.train.gz")
    dev = CONLL / "eng.testa"
    if args.test_size:
        dev = work / "testa_subset.conll"
        write_conll(dev, read_conll(CONLL / "eng.testa")[: args.test_size])
    rows = []
    began = time.perf_counter()
    for seed in [int(s) for s in args.seeds.split(",")]:
        start = random.Random(seed).sample(range(min(len(train_sentences), args.pool_size or len(train_sentences))),
                                           args.start)
        first = train([train_sentences[i] for i in start], work / f"seed{seed}" / "start", dev, args, seed)
        for strategy in args.strategies.split(","):
            rows += curve(strategy, seed, start, train_sentences, dev, args, work, first)
    means = []
    for strategy in dict.fromkeys(r["strategy"] for r in rows):
        for n in sorted({r["labelled"] for r in rows if r["strategy"] == strategy}):
            f1s = [r["dev_f1"] for r in rows if r["strategy"] == strategy and r["labelled"] == n]
            means.append({"strategy": strategy, "seed": "mean", "labelled": n, "dev_f1": round(statistics.mean(f1s), 4),
                          "seeds": len(f1s)})
    path = plot(rows, figure)
    setup = {"data": "CoNLL-2003: pool eng.train, scored (and model selected) on eng.testa",
             "checkpoint": Path(args.checkpoint).name, "start": args.start, "step": args.step,
             "max_selected": args.max_selected, "max_random": args.max_random, "seeds": args.seeds,
             "epochs": args.epochs, "precision": "float32", "max_length": 64, "pool_size": args.pool_size or "all",
             "test_size": args.test_size or "all", "smoke": args.smoke, "hours": round((time.perf_counter() - began) / 3600, 2),
             "figure": str(path.relative_to(ROOT)) if path and path.is_relative_to(ROOT) else str(path)}
    write_result("active_learning", means + rows, setup, name="smoke" if args.smoke else None, root=root)
    for strategy in dict.fromkeys(r["strategy"] for r in means):  # their sizes in order
        print(f"{strategy:>16}: " + ", ".join(f"{r['labelled']}: {r['dev_f1']:.4f}" for r in means
                                              if r["strategy"] == strategy))


if __name__ == "__main__":
    main()
