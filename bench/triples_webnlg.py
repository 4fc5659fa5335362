"""Triple extraction with the MiniLM checkpoint: WebNLG*, WebNLG (exact); CMeIE with a Chinese checkpoint.

Figures, not a test. Each dataset in a subprocess of its own (its log in WORKDIR): train (float32),
select on dev, score test in exact-match and CasRel's partial-match mode (the published WebNLG*
figures are partial-match), training tokens/s after the first epoch and inference sentences/s
(batch 32, median of 3 passes). A finished run in WORKDIR/<dataset>[_gplinker] is reused (the bench
stops if its settings differ), so ``--tune-thresholds`` can follow a plain run. CMeIE (Chinese: only
when named, with a Chinese ``--checkpoint``) ships only its dev set: split 80/20, the test part as dev.

    python -m bench.triples_webnlg [--datasets webnlg_star,webnlg_exact[,cmeie]] [--head casrel|gplinker]
        [--epochs 10] [--batch-size 16] [--tune-thresholds] [...]   # every option: --help
"""

import argparse
import dataclasses
import json
import os
import sys
import tempfile
from pathlib import Path

from bench.common import MINILM
from bench.common import SHARED
from bench.common import child_result
from bench.common import flags_line
from bench.common import median_ms
from bench.common import require_chinese_vocabulary
from bench.common import write_result

DATASETS = {
    "webnlg_star": ("webnlg_casrel_star", "train_triples.json.gz", "val_triples.json", "test_triples.json"),
    "webnlg_exact": ("webnlg_exact", "train_triples.json.gz", "val_triples.json", "test_triples.json"),
}
#: The rows' ``dataset`` names and parts in bench/results/triples_webnlg/.
DATASET_NAMES = {"webnlg_star": ("WebNLG*", "WebNLG"), "webnlg_exact": ("WebNLG exact", "WebNLG"),
                 "cmeie": ("CMeIE", "CMeIE")}


def cmeie_split(workdir):
    """Write CMeIE's dev set as 80% train / 20% test JSONL files (file order)."""
    from kerasbert_apps.triples.data import read_triples_file
    from kerasbert_apps.triples.data import write_jsonl

    examples = read_triples_file(SHARED / "cmeie" / "val_triples.json.gz").examples
    cut = int(0.8 * len(examples))
    workdir.mkdir(parents=True, exist_ok=True)
    write_jsonl(examples[:cut], workdir / "cmeie_train.jsonl")
    write_jsonl(examples[cut:], workdir / "cmeie_test.jsonl")
    print(f"CMeIE: {len(examples)} sentences -> {cut} train / {len(examples) - cut} test (file order; test also used as dev)")
    return workdir / "cmeie_train.jsonl", workdir / "cmeie_test.jsonl", workdir / "cmeie_test.jsonl"


def check_same_settings(out, config):
    """Stop if ``out`` holds a run (finished or not) of other settings than ``config``: reusing or
    resuming it would report figures of settings the command line does not show."""
    saved = out / "settings.json"
    if not saved.exists():
        return
    old = json.loads(saved.read_text())
    new = dataclasses.asdict(config)
    keys = ("train", "dev", "epochs", "batch_size", "learning_rate", "head_learning_rate", "max_length", "precision",
            "max_train_examples", "head", "checkpoint", "seed", "dropout", "pointer_size", "layer_lr_decay")
    differ = [f"{k}: {old.get(k)!r} there, {new[k]!r} asked" for k in keys
              if _comparable(k, old.get(k)) != _comparable(k, new[k])]
    if differ:
        raise SystemExit(f"{out} holds a run with other settings ({'; '.join(differ)}); use another --workdir")


def _comparable(key, value):
    """A setting's value, a file's path resolved (through symbolic links)."""
    return str(Path(str(value)).resolve()) if key in ("train", "dev", "checkpoint") and value else value


def _training_defaults():
    """The training defaults of the settings this bench passes through."""
    from kerasbert_apps.triples.train import TriplesTrainSettings

    fields = {f.name: f.default for f in dataclasses.fields(TriplesTrainSettings)}
    return {k: fields[k] for k in ("dropout", "pointer_size", "layer_lr_decay")}


def child(args):
    from kerasbert_apps.triples.data import read_triples_file
    from kerasbert_apps.triples.evaluate import score
    from kerasbert_apps.triples.train import TRIPLES
    from kerasbert_apps.triples.train import TriplesTrainSettings
    from kerasbert_apps.triples.train import train

    workdir = Path(args.workdir)
    if args.child == "cmeie":
        train_path, dev_path, test_path = cmeie_split(workdir / "data")
    else:
        folder, tr, dv, te = DATASETS[args.child]
        train_path, dev_path, test_path = (SHARED / folder / f for f in (tr, dv, te))
    out = workdir / (args.child if args.head == "casrel" else f"{args.child}_{args.head}")
    config = TriplesTrainSettings(
        checkpoint=str(args.checkpoint), train=str(train_path), dev=str(dev_path), output=str(out),
        epochs=args.epochs, batch_size=args.batch_size, max_length=args.max_length, precision="float32",
        resume=(out / "backup").exists(),
        learning_rate=args.learning_rate, max_train_examples=args.max_train_examples,
        eval_mode="partial" if args.child == "webnlg_star" else "exact", head=args.head, seed=args.seed,
        dropout=args.dropout, pointer_size=args.pointer_size, layer_lr_decay=args.layer_lr_decay,
        **({"head_learning_rate": args.head_learning_rate} if args.head_learning_rate else {}),
    )
    check_same_settings(out, config)
    if (out / "metrics.json").exists() and (out / "model").exists():
        print(f"{out} holds a finished run: reusing its model and metrics (delete it to retrain)")
        metrics = json.loads((out / "metrics.json").read_text())
    else:
        metrics = train(config)
    extractor = TRIPLES.load(out / "model")
    tuned = {}
    if args.tune_thresholds:
        from kerasbert_apps.triples.tuning import tune_thresholds
        from kerasbert_apps.triples.tuning import tuned

        dev = read_triples_file(dev_path).examples
        print(f"tuning the thresholds on {dev_path} ({config.eval_mode} match):", flush=True)
        found = tune_thresholds(extractor, dev, lambda ex, pred: score(ex, pred, mode=config.eval_mode))
        extractor = tuned(extractor, found)
        tuned = {"thresholds": dict(zip(found["names"], found["best"]["thresholds"])),
                 "dev_f1_default_thresholds": found["default"]["f1"], "dev_f1_tuned": found["best"]["f1"]}
    test = read_triples_file(test_path).examples
    texts = [e.text for e in test]
    predictions = extractor.predict(texts, batch_size=32)  # warm-up: traces every batch shape
    seconds = median_ms(lambda: extractor.predict(texts, batch_size=32), repeats=3, warmup=0) / 1000
    scores = score(test, predictions)
    result = {
        "dataset": args.child, "head": args.head, "dev_f1": metrics["dev"]["f1"],
        "test_exact_f1": scores["exact"]["f1"], "test_partial_f1": scores["partial"]["f1"],
        "by_overlap": {k: v["f1"] for k, v in scores["by_overlap"].items()},
        "train_tokens_per_s": metrics["train_tokens_per_s_after_first_epoch"],
        "infer_sentences_per_s": len(test) / seconds, **tuned,
    }
    print("RESULT " + json.dumps(result), flush=True)


def write_results(args, results):
    """One record per part this run measured, a row per dataset."""
    settings = args.head
    if args.head_learning_rate:
        settings += f", head lr {args.head_learning_rate:g}"
    if args.learning_rate != 1e-4:
        settings += f", encoder lr {args.learning_rate:g}"
    training = (f"MiniLM, float32, head {args.head}, {args.epochs} epochs, batch {args.batch_size}, max length "
                f"{args.max_length}, encoder lr {args.learning_rate:g}, head lr {args.head_learning_rate or 'default'}, "
                f"seed {args.seed}, dropout {args.dropout:g}, pointer size {args.pointer_size}, layer lr decay "
                f"{args.layer_lr_decay:g}, train sentences: {args.max_train_examples or 'all'}; model selected on dev F1")
    parts = {}
    for r in results:
        dataset, part = DATASET_NAMES.get(r["dataset"], (r["dataset"], r["dataset"]))
        o = r["by_overlap"]
        tuned = ("tuned thresholds (" + ", ".join(f"{k} {v:g}" for k, v in r["thresholds"].items())
                 + f"; dev F1 {r['dev_f1_default_thresholds'] * 100:.1f} -> {r['dev_f1_tuned'] * 100:.1f})"
                 if "thresholds" in r else "")
        parts.setdefault(part, []).append({
            "part": part, "dataset": dataset, "settings": settings + (", " + tuned if tuned else ""),
            "epochs": args.epochs, "dev F1": round(r["dev_f1"] * 100, 2),
            "test exact F1": round(r["test_exact_f1"] * 100, 2), "test partial F1": round(r["test_partial_f1"] * 100, 2),
            "normal / SEO / EPO F1": " / ".join(f"{o[k] * 100:.1f}" for k in ("normal", "SEO", "EPO")),
            "train tokens/s": round(r["train_tokens_per_s"], 1) if r["train_tokens_per_s"] else None,
            "inference sent/s": round(r["infer_sentences_per_s"], 1)})
    for part, rows in parts.items():
        data = ("CMeIE's official dev set split 80/20 in file order (the test part also serving as dev)"
                if part == "CMeIE" else "WebNLG* (CasRel's version: last word of each entity; partial match) and "
                "WebNLG with exact entities (exact match); train, dev (model selection) and test splits")
        write_result("triples_webnlg", rows, name=part.lower(), setup={
            "data": data, "training": training,
            "note": "F1 in %; train tokens/s over the epochs after the first; inference: the test split in batches "
                    "of 32, median of 3 passes after a warm-up pass",
        })


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", default="webnlg_star,webnlg_exact",
                        help="comma-separated: webnlg_star, webnlg_exact, cmeie (Chinese: needs a Chinese --checkpoint)")
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--max-length", type=int, default=128)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--learning-rate", type=float, default=1e-4, help="peak encoder learning rate")
    parser.add_argument("--head-learning-rate", type=float, default=0.0,
                        help="peak learning rate of the head (0: the training default)")
    parser.add_argument("--max-train-examples", type=int, default=0, help="first N training sentences (0: all)")
    parser.add_argument("--head", choices=("casrel", "gplinker"), default="casrel", help="the triple head")
    parser.add_argument("--tune-thresholds", action="store_true",
                        help="pick the decision thresholds on dev after training (kerasbert triples tune), "
                        "score test with them")
    parser.add_argument("--seed", type=int, default=42, help="training seed (shuffling, initialisation)")
    defaults = _training_defaults()
    parser.add_argument("--dropout", type=float, default=defaults["dropout"], help="dropout on the encoder output")
    parser.add_argument("--pointer-size", type=int, default=defaults["pointer_size"],
                        help="query/key size of each GlobalPointer (gplinker)")
    parser.add_argument("--layer-lr-decay", type=float, default=defaults["layer_lr_decay"],
                        help="layer-wise learning-rate decay of the encoder (1.0: off)")
    parser.add_argument("--checkpoint", default=str(MINILM))
    parser.add_argument("--workdir", default=os.path.join(tempfile.gettempdir(), "kerasbert_bench_triples"))
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        return child(args)
    if "cmeie" in args.datasets.split(","):
        require_chinese_vocabulary(args.checkpoint, "CMeIE")
    print(flags_line(), flush=True)
    results = []
    Path(args.workdir).mkdir(parents=True, exist_ok=True)
    for name in args.datasets.split(","):
        log = Path(args.workdir) / (f"{name}.log" if args.head == "casrel" else f"{name}_{args.head}.log")
        print(f"{name}: training, log in {log}", flush=True)
        result = child_result("bench.triples_webnlg", *sys.argv[1:], "--child", name, log=log)
        results += [result] if result else []
    if results:
        write_results(args, results)


if __name__ == "__main__":
    main()
