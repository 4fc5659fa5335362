"""Fine-tuning strategies on CoNLL-2003, and domain pre-training on GENIA (MiniLM checkpoint).

Figures, not a test. Every run is a ``kerasbert`` CLI subprocess, float32, batch 32, max length 128.

* ``conll``: each system of :data:`SYSTEMS` trains ``--epochs`` on eng.train, selected on eng.testa,
  scored on eng.testb; with its trainable and total weights and the model folder's size;
* ``speed``: each system trains 2 epochs on the first ``--speed-examples`` sentences, the second
  timed (tokens/s); the systems take turns (``--speed-repeats`` rounds), the median pass is the
  figure. ``--systems full,pretrain`` also times ``kerasbert pretrain`` on CoNLL sentences;
* ``genia``: ``kerasbert pretrain`` continues MiniLM's masked-LM on GENIA's dev and test sentences,
  the test ones held out (the accuracy before and after); then the BIO head trains on the first
  80% of GENIA dev (scored on test) with and without the pre-trained encoder.

    python -m bench.finetuning_strategies [--parts conll,speed,genia] [--work DIR] [--epochs 1]
"""

import argparse
import itertools
import json
import os
import statistics
import tempfile
from pathlib import Path

from bench.common import CONLL
from bench.common import GENIA
from bench.common import MINILM
from bench.common import kerasbert
from bench.common import read_conll
from bench.common import run_parts
from bench.common import sentence_text
from bench.common import write_result

SYSTEMS = {
    "full": [],
    "lora8": ["--lora-rank", "8", "--learning-rate", "5e-4"],
    "frozen": ["--freeze-encoder"],
    "decay0.9": ["--layer-lr-decay", "0.9"],
}
#: The rows' ``system`` names in bench/results/finetuning_strategies/.
SYSTEM_NAMES = {
    "full": "full fine-tuning",
    "lora8": "LoRA rank 8 (--lora-rank 8 --learning-rate 5e-4)",
    "frozen": "frozen encoder + layer mix (--freeze-encoder)",
    "decay0.9": "layer-wise decay (--layer-lr-decay 0.9)",
    "pretrain": "pretrain (kerasbert pretrain, CoNLL training sentences packed to 128)",
}


def folder_mb(path):
    return sum(f.stat().st_size for f in Path(path).rglob("*") if f.is_file()) / 2**20


def result(**fields):
    print("RESULT " + json.dumps(fields), flush=True)
    return fields


def train_and_test(name, output, train, dev, test, extra, epochs, log_dir, checkpoint=MINILM):
    """``ner train`` (``epochs`` at batch 32, no early stopping) then ``ner evaluate`` on ``test``."""
    seconds = kerasbert("ner", "train", "--checkpoint", checkpoint, "--train", train, "--dev", dev, "--output", output,
                        "--epochs", epochs, "--batch-size", 32, "--max-length", 128, "--patience", 0, *extra,
                        "--precision", "float32", log=log_dir / f"{name}.train.log")
    scores_path = output / "test_scores.json"
    kerasbert("ner", "evaluate", "--model", output, "--data", test, "--output", scores_path,
              log=log_dir / f"{name}.test.log")
    metrics = json.loads((output / "metrics.json").read_text())
    test_scores = json.loads(scores_path.read_text())
    return dict(dev_f1=metrics["dev"]["f1"], test_f1=test_scores["f1"], train_seconds=round(seconds),
                trainable_weights=metrics["trainable_weights"], total_weights=metrics["total_weights"],
                folder_mb=round(folder_mb(output / "model"), 1))


def part_conll(args, work):
    rows = []
    for name in args.systems.split(","):
        fields = train_and_test(name, work / "conll" / name, CONLL / "eng.train.gz", CONLL / "eng.testa",
                                CONLL / "eng.testb", SYSTEMS[name], args.epochs, work)
        rows.append(result(part="conll", system=name, epochs=args.epochs, **fields))
    return rows


def speed_pretrain(args, work, suffix=""):
    """Masked-LM training tokens/s on the CoNLL training sentences packed to 128 (every position a real
    token): 2 epochs of ``--pretrain-speed-steps`` batches of 32, the second timed."""
    text = work / "speed" / "pretrain_text.txt"
    text.parent.mkdir(parents=True, exist_ok=True)
    sentences = read_conll(CONLL / "eng.train.gz", limit=4000)
    text.write_text("".join(sentence_text(block) + "\n" for block in sentences), encoding="utf-8")
    output = work / "speed" / ("pretrain" + suffix)
    kerasbert("pretrain", "--checkpoint", MINILM, "--text", text, "--output", output, "--max-length", 128,
              "--batch-size", 32, "--steps-per-epoch", args.pretrain_speed_steps, "--epochs", 2,
              "--precision", "float32", log=work / f"speed.pretrain{suffix}.log")
    metrics = json.loads((output / "metrics.json").read_text())
    return dict(steps_per_epoch=args.pretrain_speed_steps, batch_size=32, max_length=128,
                tokens_per_s=round(metrics["train_tokens_per_s_after_first_epoch"], 1))


def part_speed(args, work):
    """Each system's speed pass ``--speed-repeats`` times, the systems interleaved (A B C, A B C, ...) so
    that a slow spell of the machine hits them alike; the median pass, with every pass."""
    passes = {name: [] for name in args.systems.split(",")}
    for repeat in range(args.speed_repeats):
        for name in passes:
            suffix = f".{repeat + 1}" if args.speed_repeats > 1 else ""
            if name == "pretrain":
                passes[name].append(speed_pretrain(args, work, suffix))
                continue
            output = work / "speed" / (name + suffix)
            kerasbert("ner", "train", "--checkpoint", MINILM, "--train", CONLL / "eng.train.gz", "--dev",
                      CONLL / "eng.testa", "--output", output, "--epochs", 2, "--batch-size", 32, "--max-length", 128,
                      "--max-train-examples", args.speed_examples, "--max-dev-examples", 50, "--patience", 0,
                      "--precision", "float32", *SYSTEMS[name], log=work / f"speed.{name}{suffix}.log")
            metrics = json.loads((output / "metrics.json").read_text())
            passes[name].append(dict(examples=args.speed_examples, tokens_per_epoch=metrics["train_tokens_per_epoch"],
                                     tokens_per_s=round(metrics["train_tokens_per_s_after_first_epoch"], 1)))
    rows = []
    for name, runs in passes.items():
        rows.append(result(part="speed", system=name, **{k: v for k, v in runs[0].items() if k != "tokens_per_s"},
                           passes=len(runs), tokens_per_s=round(statistics.median(r["tokens_per_s"] for r in runs), 1),
                           every_pass=[r["tokens_per_s"] for r in runs]))
    return rows


def genia_jsonl(source, target, lines=None):
    """GENIA's JSON (word lists, word-index entities) as kerasbert JSON lines (words joined by spaces)."""
    records = json.loads(Path(source).read_text(encoding="utf-8"))
    lines = lines if lines is not None else range(len(records))
    with open(target, "w", encoding="utf-8") as out:
        for i in lines:
            words = records[i]["sentence"]
            starts = list(itertools.accumulate((len(word) + 1 for word in words[:-1]), initial=0))
            entities = [{"start": starts[e["index"][0]], "end": starts[e["index"][-1]] + len(words[e["index"][-1]]),
                         "type": e["type"]} for e in records[i]["ner"]]
            out.write(json.dumps({"text": " ".join(words), "entities": entities}) + "\n")
    return len(lines)


def packed_sequences(text_path, max_length):
    from kerasbert.checkpoints.loader import load_tokenizer
    from kerasbert.checkpoints.loader import open_checkpoint
    from kerasbert.training.pretraining import read_lines
    from kerasbert.training.pretraining import stream_sequences

    tokenizer = load_tokenizer(open_checkpoint(MINILM), max_length=max_length)
    return sum(1 for _ in stream_sequences(read_lines([text_path]), tokenizer, max_length))


def genia_split(data):
    """GENIA has no train split here: the first 80% of dev.json as ``data/train.jsonl``, the rest as
    ``data/dev.jsonl``, test.json as ``data/test.jsonl``; their numbers of sentences."""
    data.mkdir(parents=True, exist_ok=True)
    dev_count = len(json.loads((GENIA / "dev.json").read_text()))
    cut = int(dev_count * 0.8)
    genia_jsonl(GENIA / "dev.json", data / "train.jsonl", range(cut))
    genia_jsonl(GENIA / "dev.json", data / "dev.jsonl", range(cut, dev_count))
    return cut, dev_count - cut, genia_jsonl(GENIA / "test.json", data / "test.jsonl")


def part_genia(args, work):
    data = work / "genia"
    cut, _, _ = genia_split(data)
    test_text = data / "test_text.txt"
    test_text.write_text("".join(" ".join(r["sentence"]) + "\n" for r in json.loads((GENIA / "test.json").read_text())))
    held_out = packed_sequences(test_text, 128)
    text = data / "mlm_text.txt"
    text.write_text(test_text.read_text() + "".join(" ".join(r["sentence"]) + "\n"
                                                     for r in json.loads((GENIA / "dev.json").read_text())))
    pre = work / "genia_pretrain"
    seconds = kerasbert("pretrain", "--checkpoint", MINILM, "--text", text, "--output", pre, "--max-length", 128,
                        "--batch-size", 32, "--steps-per-epoch", args.pretrain_steps, "--epochs", args.pretrain_epochs,
                        "--held-out", held_out, "--precision", "float32", log=work / "genia.pretrain.log")
    metrics = json.loads((pre / "metrics.json").read_text())
    rows = [result(part="pretrain", held_out_sequences=held_out, steps=metrics["steps"], batch_size=32,
                   max_length=128, train_seconds=round(seconds),
                   held_out_accuracy_before=round(metrics["held_out_accuracy_before"], 4),
                   held_out_accuracy_after=round(metrics["held_out_accuracy"], 4),
                   tokens_per_s=round(metrics["train_tokens_per_s_after_first_epoch"], 1))]
    for name, checkpoint in (("genia_minilm", MINILM), ("genia_pretrained", pre / "encoder")):
        fields = train_and_test(name, work / name, data / "train.jsonl", data / "dev.jsonl", data / "test.jsonl", (),
                                args.genia_epochs, work, checkpoint)
        rows.append(result(part="genia", system=name, train_sentences=cut, epochs=args.genia_epochs,
                           **{k: fields[k] for k in ("dev_f1", "test_f1", "train_seconds")}))
    return rows


def write_results(args, rows):
    """One record per part this run measured, a row per system."""
    training = "MiniLM, float32, batch 32, max length 128"
    conll = [r for r in rows if r["part"] == "conll"]
    if conll:
        write_result("finetuning_strategies", [{
            "part": "CoNLL-2003", "system": SYSTEM_NAMES.get(r["system"], r["system"]), "id": r["system"],
            "test F1": round(r["test_f1"] * 100, 2), "dev F1": round(r["dev_f1"] * 100, 2),
            "trainable weights": r["trainable_weights"],
            "share": f"{r['trainable_weights'] / r['total_weights']:.1%}" if r["total_weights"] else None,
            "model folder": f"{r['folder_mb']} MB", "train seconds": r["train_seconds"]} for r in conll],
            name="conll", setup={
                "data": f"CoNLL-2003, {args.epochs} epoch(s) of eng.train each, selected on eng.testa, scored on "
                        f"eng.testb (seqeval); {training}",
                "note": "the same budget for every system; training speed: part 'training speed' "
                        "(separate short passes); model folder in MiB",
            })
    speed = [r for r in rows if r["part"] == "speed"]
    if speed:
        full = next((r["tokens_per_s"] for r in speed if r["system"] == "full"), None)
        write_result("finetuning_strategies", [{
            "part": "training speed", "system": SYSTEM_NAMES.get(r["system"], r["system"]), "id": r["system"],
            "tokens/s": r["tokens_per_s"], "every pass": r["every_pass"],
            "vs full": f"{r['tokens_per_s'] / full:.2f}x" if full else None} for r in speed],
            name="speed", setup={
                "passes": f"{args.speed_repeats} per system, the systems taking turns; the median pass is the figure",
                "ner": f"2 epochs on the first {args.speed_examples} CoNLL-2003 training sentences, the second "
                       f"timed (real WordPiece tokens/s); {training}",
                **({"pretrain": f"kerasbert pretrain in float32 on the CoNLL training sentences packed to 128, "
                                f"2 epochs of {args.pretrain_speed_steps} batches of 32, the second timed (every "
                                "position a token)"}
                   if any(r["system"] == "pretrain" for r in speed) else {}),
            })
    pre = next((r for r in rows if r["part"] == "pretrain"), None)
    genia = {r["system"]: r for r in rows if r["part"] == "genia"}
    if pre and genia:
        table = []
        for name, encoder, accuracy in (
                ("genia_minilm", "MiniLM", pre["held_out_accuracy_before"]),
                ("genia_pretrained", f"MiniLM + {pre['steps']} steps of continued pre-training on GENIA",
                 pre["held_out_accuracy_after"])):
            if name in genia:
                table.append({"part": "GENIA continued pre-training", "encoder": encoder,
                              "held-out masked-token accuracy": accuracy,
                              "GENIA NER dev F1": round(genia[name]["dev_f1"] * 100, 2),
                              "GENIA NER test F1": round(genia[name]["test_f1"] * 100, 2)})
        write_result("finetuning_strategies", table, name="genia", setup={
            "pretraining": f"MLM on the GENIA dev and test sentences, the test sentences ({pre['held_out_sequences']} "
                           f"packed sequences of 128) held out; {pre['steps']} steps of batch 32 in float32, "
                           f"{pre['tokens_per_s']} tokens/s",
            "ner": f"BIO head trained on the first 80% of GENIA dev.json ({genia[next(iter(genia))]['train_sentences']} "
                   f"sentences), selected on the rest, {args.genia_epochs} epochs in float32, scored on test.json, "
                   "nested entities resolved by the reader's rule",
        })


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--parts", default="conll,speed,genia")
    parser.add_argument("--systems", default=",".join(SYSTEMS))
    parser.add_argument("--work", default=os.path.join(tempfile.gettempdir(), "kerasbert-strategies"))
    parser.add_argument("--epochs", type=int, default=1, help="CoNLL epochs per system")
    parser.add_argument("--speed-examples", type=int, default=1000)
    parser.add_argument("--speed-repeats", type=int, default=3,
                        help="speed passes per system, interleaved; the median is reported")
    parser.add_argument("--pretrain-steps", type=int, default=30)
    parser.add_argument("--pretrain-speed-steps", type=int, default=12,
                        help="batches per epoch of the pre-training speed pass (--systems ...,pretrain)")
    parser.add_argument("--pretrain-epochs", type=int, default=2)
    parser.add_argument("--genia-epochs", type=int, default=4)
    run_parts(parser.parse_args(), {"conll": part_conll, "speed": part_speed, "genia": part_genia}, write_results)


if __name__ == "__main__":
    main()
