"""A Chinese encoder from scratch: a small BERT pretrained on the Chinese corpora's training text, then NER on it.

Figures, not a test; the recipe for a user with no pretrained checkpoint for their language or domain.

1. **Text**: the plain text (never a label) of the Chinese corpora in ``$KERASBERT_SHARED/data``
   (:data:`SOURCES`: training splits where there is one); what the runs below select on or are
   scored on, and every test split, stay out. Shuffled (seed 0) into one file.
2. **Pretraining**: ``kerasbert pretrain --from-scratch`` in this process (a WordPiece vocabulary
   learnt from the text, a random BERT of ``--size``, jieba whole-word masking), ``--steps`` steps,
   stopped earlier after ``--minutes``; the held-out masked-token accuracy every ``--eval-every`` steps.
3. **Fine-tuning**: ``kerasbert ner train`` then ``evaluate`` on CLUENER2020 (scored on dev: its test
   labels are not published) and Weibo NER, and ``triples train`` on CMeIE, each on the pretrained
   encoder and on the same architecture and vocabulary randomly initialised (the pretraining's gain).

The records (``bench/results/chinese_encoder/``) keep the accuracy by step, the F1s (%), the text
that went in, the commands and published scores named with their encoder (``anchors``).

    python -m bench.chinese_encoder [--size mini] [--minutes 60] [--steps 2000] [--datasets cluener,weibo] [--curve 1000]
    python -m bench.chinese_encoder --tiny --work DIR   # seconds: the plumbing only, records under WORK/results
"""

import argparse
import itertools
import json
import math
import os
import random
import shlex
import tempfile
import time
from pathlib import Path

from bench.common import RESULTS
from bench.common import SHARED
from bench.common import command_line
from bench.common import fail
from bench.common import flags_line
from bench.common import open_text
from bench.common import positive
from bench.common import read_conll
from bench.common import write_result

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

#: The pretraining text: (name in the record, file under the shared data folder, how to read it, why this split).
SOURCES = (
    ("CLUENER2020 train", "cluener2020/train.json.gz", "json", "its training split"),
    ("Weibo NER train", "weibo_ner/weiboNER_2nd_conll.train", "weibo", "its training split"),
    ("MSRA validation", "msra_ner_partial/val/sentences.txt", "spaced", "no training split here; its test split "
     "left out"),
    ("People's Daily dev", "people_daily_ner_partial/example.dev", "chars", "no training split here; its test "
     "split left out"),
    ("CMeIE dev", "cmeie/val_triples.json.gz", "json", "its only split here (no training split); the triples "
     "runs below are cut from it: its text goes in, never its triples"),
)
#: What the NER runs train on, select on and are scored on.
DATASETS = {
    "cluener": {"part": "CLUENER2020", "train": "cluener2020/train.json.gz", "dev": "cluener2020/dev.json",
                "test": None, "scored on": "dev, the best epoch's (its test labels are not published)",
                "kind": "json"},
    "weibo": {"part": "Weibo NER", "train": "weibo_ner/weiboNER_2nd_conll.train",
              "dev": "weibo_ner/weiboNER_2nd_conll.dev", "test": "weibo_ner/weiboNER_2nd_conll.test",
              "scored on": "test, with the model of the best dev epoch", "kind": "blocks"},
}
#: Triples: CMeIE's only labelled split here (its dev set), cut at random (seed 0) into these parts.
CMEIE = {"part": "CMeIE triples", "source": "cmeie/val_triples.json.gz", "split": {"train": 2585, "dev": 500, "test": 500},
         "scored on": "test (500 of its dev sentences, never trained or selected on), with the model of the best "
                      "dev epoch", "max length": 256, "epochs": 8, "task": "triples"}
#: Published entity-level F1 (%) on the same corpora, each named with its encoder. Test sets.
ANCHORS = {
    "cluener": [
        {"system": "BiLSTM-CRF (no pretrained encoder)", "test F1": 70.0,
         "source": "CLUENER2020 paper (Xu et al. 2020), test set"},
        {"system": "BERT-base Chinese, fine-tuned", "test F1": 78.8,
         "source": "CLUENER2020 paper (Xu et al. 2020), test set"},
    ],
    "weibo": [
        {"system": "Lattice LSTM (character LSTM with a lexicon, no pretrained encoder)", "test F1": 58.79,
         "source": "Zhang and Yang 2018, Weibo NER (revised) test set"},
        {"system": "FLAT + BERT-base Chinese", "test F1": 68.55,
         "source": "Li et al. 2020, Weibo NER test set"},
    ],
    "cmeie": [],  # none: published CMeIE figures train on its train split (not here) and score its test split
}
#: The sizes of ``--tiny`` (seconds on 2 cores): lines per source, NER sentences (train, dev, scored).
TINY = {"lines": 60, "train": 48, "dev": 16, "test": 16}


def read_source(path, kind, limit=None):
    """The text lines of one corpus file: ``json`` (JSON lines, their ``"text"``), ``spaced`` (one
    sentence a line, its characters separated by spaces), ``chars`` or ``weibo`` (one character a line
    with its tag, a blank line between sentences; Weibo's characters carry a segmentation digit)."""
    if kind in ("chars", "weibo"):
        def char(line):
            c = line.split()[0]
            return c[:-1] if kind == "weibo" and len(c) > 1 and c[-1].isdigit() else c

        return ["".join(map(char, block)) for block in read_conll(path, limit)]
    with open_text(path) as f:
        lines = (json.loads(raw)["text"].strip() if kind == "json" else raw.rstrip("\n").replace(" ", "")
                 for raw in f if raw.strip())
        return list(itertools.islice(filter(None, lines), limit))


def write_corpus(path, data, limit=None, seed=0):
    """The pretraining text of :data:`SOURCES`, shuffled, one line a sentence or document, to ``path``;
    returns what went in, per source: its file, the lines and the characters."""
    every, report = [], {}
    for name, relative, kind, why in SOURCES:
        lines = read_source(data / relative, kind, limit)
        every += lines
        report[name] = {"file": relative, "split": why, "lines": len(lines), "characters": sum(map(len, lines))}
    random.Random(seed).shuffle(every)
    Path(path).write_text("".join(line + "\n" for line in every), encoding="utf-8")
    return report


def head_file(source, target, kind, count):
    """The first ``count`` examples of an NER file (``json``: lines; ``blocks``: blank-line separated
    sentences) as ``target`` (the ``--tiny`` slices)."""
    if kind == "json":
        with open_text(source) as f:
            text = "".join(itertools.islice((line.rstrip("\n") + "\n" for line in f if line.strip()), count))
    else:
        text = "\n\n".join("\n".join(block) for block in read_conll(source, count)) + "\n"
    Path(target).write_text(text, encoding="utf-8")
    return target


def time_budget(minutes):
    """A Keras callback that stops training once ``minutes`` have passed since it began; it counts
    the steps (``steps``, and ``at_epoch_end``: the steps done when each epoch ended) and says
    whether the budget stopped it (``stopped``)."""
    import keras

    class TimeBudget(keras.callbacks.Callback):
        def __init__(self):
            super().__init__()
            self.steps, self.at_epoch_end, self.stopped, self.began = 0, [], False, None

        def on_train_begin(self, logs=None):
            self.began = time.perf_counter()

        def on_train_batch_end(self, batch, logs=None):
            self.steps += 1
            if time.perf_counter() - self.began > minutes * 60:
                self.model.stop_training = self.stopped = True

        def on_epoch_end(self, epoch, logs=None):
            self.at_epoch_end.append(self.steps)

    return TimeBudget()


def pretrain_settings(args, corpus, output):
    from kerasbert.training.settings import PretrainSettings

    return PretrainSettings(from_scratch=True, text=(str(corpus),), output=str(output), size=args.size,
                            layers=args.layers, hidden=args.hidden, vocab_size=args.vocab_size,
                            max_length=args.max_length, batch_size=args.batch_size, steps_per_epoch=args.eval_every,
                            epochs=math.ceil(args.steps / args.eval_every), held_out=args.held_out, seed=args.seed,
                            keep_encoders_every=args.curve // args.eval_every, precision="float32", overwrite=True)


def command(argv, work=None):
    """``argv`` as one line, the work folder written ``WORK`` and the shared data ``../shared/data`` (a record
    names no folder of the machine it ran on)."""
    line = " ".join(str(a) if " " not in str(a) else repr(str(a)) for a in argv).replace(str(SHARED), "../shared/data")
    return line.replace(str(work), "WORK") if work else line


def pretrain_encoder(args, work, corpus):
    """Run ``kerasbert pretrain --from-scratch`` within the time budget; returns its metrics, the
    held-out accuracy by step and the command a user types for the same run (without the budget)."""
    from kerasbert.training.history import read_history
    from kerasbert.training.pretraining import pretrain

    settings = pretrain_settings(args, corpus, work / "pretrain")
    budget = time_budget(args.minutes)
    metrics = pretrain(settings, callbacks=[budget])
    steps = [0] + budget.at_epoch_end
    by_step = [{"step": steps[record["epoch"]],
                "held-out masked-token accuracy": round(100 * record["held_out_accuracy"], 2)}
               for record in read_history(work / "pretrain" / "history.jsonl") if "held_out_accuracy" in record]
    argv = ["kerasbert", "pretrain", "--from-scratch", "--text", corpus, "--output", settings.output, "--size",
            settings.size, "--vocab-size", settings.vocab_size, "--max-length", settings.max_length, "--batch-size",
            settings.batch_size, "--steps-per-epoch", settings.steps_per_epoch, "--epochs", settings.epochs,
            "--held-out", settings.held_out, "--seed", settings.seed, "--precision", "float32"]
    argv += ["--keep-encoders-every", settings.keep_encoders_every] if settings.keep_encoders_every else []
    argv += ["--layers", settings.layers] if settings.layers else []
    argv += ["--hidden", settings.hidden] if settings.hidden else []
    return metrics, by_step, {"steps done": budget.steps, "stopped by the time budget": budget.stopped,
                              "command": command(argv, work), "size": settings.encoder_size()}


def random_encoder(args, work, encoder):
    """The pretrained ``encoder``'s architecture and vocabulary, randomly initialised as the
    pretraining began (the same seed), written as a checkpoint: the no-pretraining baseline."""
    import shutil

    import keras

    from kerasbert.checkpoints.loader import save_encoder
    from kerasbert.tokenizers.vocab import read_vocab
    from kerasbert.training.pretraining import scratch_model

    vocab = read_vocab(encoder / "vocab.txt")
    keras.utils.set_random_seed(args.seed)
    model = scratch_model(pretrain_settings(args, "", ""), len(vocab))
    folder = work / "random_encoder"
    if folder.exists():
        shutil.rmtree(folder)
    save_encoder(model, folder, vocab)
    shutil.copy(encoder / "tokenizer_config.json", folder / "tokenizer_config.json")
    keras.backend.clear_session()
    return folder


def finetune(args, work, name, checkpoint, files, task="ner"):
    """``kerasbert TASK train`` (ner or triples) on ``checkpoint`` (the model of the best dev epoch
    kept), then, where there is a test file, ``kerasbert TASK evaluate`` on it; returns the F1s (%)
    and the commands."""
    from kerasbert.cli import main

    output = work / task / name
    if task == "ner":
        options = ["--epochs", args.finetune_epochs, "--max-length", args.finetune_max_length, "--no-calibrate",
                   *args.ner_options]
    else:
        options = ["--epochs", 1 if args.tiny else CMEIE["epochs"], "--max-length", 48 if args.tiny else CMEIE["max length"]]
    commands = [["kerasbert", task, "train", "--checkpoint", checkpoint, "--train", files["train"], "--dev",
                 files["dev"], "--output", output, "--batch-size", args.finetune_batch_size, "--learning-rate",
                 args.finetune_learning_rate, "--patience", 0, "--seed", args.seed, "--precision", "float32",
                 "--overwrite", *options]]
    if files.get("test"):
        commands.append(["kerasbert", task, "evaluate", "--model", output, "--data", files["test"], "--output",
                         output / "test_scores.json"])
    for argv in commands:
        status = main([str(a) for a in argv[1:]])
        if status:
            fail(f"failed ({status}): {command(argv)}")
    metrics = json.loads((output / "metrics.json").read_text(encoding="utf-8"))
    result = {"dev F1": round(100 * metrics["dev"]["f1"], 2)}
    if files.get("test"):
        result["test F1"] = round(100 * json.loads((output / "test_scores.json").read_text(encoding="utf-8"))["f1"], 2)
    return result, [command(argv, work) for argv in commands]


def pretraining_curve(args, work, files, found, architecture, steps, smoke):
    """CLUENER2020 fine-tuned on each encoder the pretraining kept (``--curve``): its dev F1 by
    pretraining step, the random start (step 0) and the final encoder (``steps`` steps) taken from
    ``found`` (the run's two rows)."""
    kept = sorted((work / "pretrain" / "encoders").glob("step-*"), key=lambda p: int(p.name[5:]))
    rows = [{"pretraining steps": 0, "dev F1": found[1]["dev F1"], "commands": found[1]["commands"]}]
    for encoder in kept:
        result, commands = finetune(args, work, f"cluener-{encoder.name}", encoder, files)
        rows.append({"pretraining steps": int(encoder.name[5:]), **result, "commands": commands})
    rows.append({"pretraining steps": steps, "dev F1": found[0]["dev F1"], "commands": found[0]["commands"]})
    rows = [dict(row, part="CLUENER2020 by pretraining steps" + smoke) for row in rows]
    write_result("chinese_encoder", rows, name="cluener-curve" + ("-tiny" if args.tiny else ""), root=args.results,
                 command=command_line().replace(str(work), "WORK"), anchors=ANCHORS["cluener"],
                 columns=["pretraining steps", "dev F1"], setup={
        "data": DATASETS["cluener"]["train"] + " -> " + DATASETS["cluener"]["dev"] + ", scored on dev (best epoch)",
        "training": f"as the CLUENER2020 record: {args.finetune_epochs} epochs, encoder learning rate "
                    f"{args.finetune_learning_rate:g}, {' '.join(args.ner_options) or 'the default head (BiLSTM-CRF)'}",
        "encoder": architecture + "; the encoders one pretraining run kept every "
                   f"{args.curve} steps (its learning-rate schedule spans all its steps), step 0 the random start"})
    return rows


def cmeie_files(args, work, data):
    """:data:`CMEIE`'s parts as JSON-lines files (``--tiny``: a few sentences each)."""
    with open_text(data / CMEIE["source"]) as f:
        lines = [line for line in f if line.strip()]
    random.Random(0).shuffle(lines)
    files, start = {}, 0
    for role, count in CMEIE["split"].items():
        count = TINY[role] if args.tiny else count
        files[role] = work / "cmeie" / f"{role}.json"
        files[role].parent.mkdir(parents=True, exist_ok=True)
        files[role].write_text("".join(lines[start:start + count]), encoding="utf-8")
        start += count
    return files


def dataset_files(args, work, data, key):
    """The train, dev and test files of dataset ``key`` (``--tiny``: their first few examples)."""
    if key == "cmeie":
        return cmeie_files(args, work, data)
    spec = DATASETS[key]
    files = {role: data / spec[role] for role in ("train", "dev", "test") if spec[role]}
    if args.tiny:
        (work / "tiny").mkdir(parents=True, exist_ok=True)
        suffix = ".json" if spec["kind"] == "json" else ".txt"
        files = {role: head_file(path, work / "tiny" / f"{key}.{role}{suffix}", spec["kind"], TINY[role])
                 for role, path in files.items()}
    return files


def parse_args(argv=None):
    parser = argparse.ArgumentParser(prog="python -m bench.chinese_encoder", description=__doc__.splitlines()[0])
    parser.add_argument("--size", choices=("tiny", "mini", "small"), default="mini",
                        help="BERT size of the new encoder (default: %(default)s)")
    parser.add_argument("--minutes", type=positive(float), default=60.0,
                        help="pretraining budget: training stops after this many minutes (default: %(default)s)")
    parser.add_argument("--steps", type=positive(int), default=2000,
                        help="pretraining steps, the learning rate's schedule (default: %(default)s)")
    parser.add_argument("--eval-every", type=positive(int), default=200,
                        help="held-out masked-token accuracy every N steps (default: %(default)s)")
    parser.add_argument("--batch-size", type=positive(int), default=32, help="pretraining batch (default: %(default)s)")
    parser.add_argument("--max-length", type=positive(int), default=128,
                        help="pretraining sequence length (default: %(default)s)")
    parser.add_argument("--vocab-size", type=positive(int), default=8000,
                        help="vocabulary size at most; every CJK character of the text is kept (default: %(default)s)")
    parser.add_argument("--held-out", type=positive(int), default=256,
                        help="sequences held out for the masked-token accuracy (default: %(default)s)")
    parser.add_argument("--datasets", default="cluener,weibo,cmeie",
                        help=f"corpora to fine-tune on, of {','.join(DATASETS)} (NER) and cmeie (triples) "
                        "(default: %(default)s)")
    parser.add_argument("--curve", type=positive(int), default=None, metavar="N",
                        help="also keep the encoder every N steps (a multiple of --eval-every) and fine-tune CLUENER2020 "
                        "on each: dev F1 against pretraining steps (record cluener-curve)")
    parser.add_argument("--reuse-pretraining", action="store_true",
                        help="fine-tune the encoder an earlier run pretrained in --work (its record: the newest "
                        "pretraining record) instead of pretraining again")
    parser.add_argument("--finetune-epochs", type=positive(int), default=3, help="(default: %(default)s)")
    parser.add_argument("--finetune-batch-size", type=positive(int), default=32, help="(default: %(default)s)")
    parser.add_argument("--finetune-max-length", type=positive(int), default=128, help="(default: %(default)s)")
    parser.add_argument("--finetune-learning-rate", type=positive(float), default=1e-4,
                        help="the encoder's peak learning rate in NER training; the head's is the head's own "
                        "(default: %(default)s)")
    parser.add_argument("--ner-options", default=None,
                        help="more options for kerasbert ner train, in one string, e.g. \"--head global-pointer\" "
                        "(default: none, the default head: BiLSTM-CRF; with --tiny: \"--head softmax --no-lstm\")")
    parser.add_argument("--seed", type=int, default=42, help="(default: %(default)s)")
    parser.add_argument("--work", type=Path, default=Path(tempfile.gettempdir()) / "kerasbert_bench_chinese_encoder",
                        help="folder for the text, the encoders and the NER runs (default: %(default)s)")
    parser.add_argument("--results", type=Path, default=None,
                        help="folder the records go to (default: bench/results; with --tiny: WORK/results)")
    parser.add_argument("--tiny", action="store_true",
                        help="a smoke run in seconds: a few lines of text, a 1-layer encoder, a few steps, a few NER "
                        "sentences, 1 epoch, the softmax head; checks the plumbing, its figures mean nothing")
    args = parser.parse_args(argv)
    datasets = [d for d in args.datasets.split(",") if d]
    unknown = [d for d in datasets if d not in DATASETS and d != "cmeie"]
    if unknown or not datasets:
        parser.error(f"--datasets: unknown {', '.join(unknown) or '(none given)'}; choose from {', '.join(DATASETS)}, cmeie")
    args.datasets = datasets
    args.layers = args.hidden = 0
    if args.ner_options is None:
        args.ner_options = "--head softmax --no-lstm" if args.tiny else ""
    try:
        args.ner_options = shlex.split(args.ner_options)
    except ValueError as e:
        parser.error(f"--ner-options: {e}")
    if args.tiny:
        args.size, args.layers, args.hidden = "tiny", 1, 64
        args.steps, args.eval_every, args.batch_size, args.max_length, args.held_out = 4, 2, 8, 32, 4
        args.finetune_epochs, args.finetune_batch_size, args.finetune_max_length = 1, 16, 48
    if args.curve and (args.curve % args.eval_every or "cluener" not in datasets):
        parser.error("--curve: a multiple of --eval-every, with cluener among --datasets")
    args.curve = args.curve or 0
    if args.results is None:
        args.results = args.work / "results" if args.tiny else RESULTS
    return args


def main(argv=None):
    args = parse_args(argv)
    data = SHARED
    needed = [relative for _, relative, _, _ in SOURCES] + [
        DATASETS[key][role] for key in args.datasets if key in DATASETS for role in ("train", "dev", "test")
        if DATASETS[key][role]]
    missing = [relative for relative in needed if not (data / relative).exists()]
    if missing:
        fail(f"needs the shared corpora in {data} (KERASBERT_SHARED): missing {', '.join(missing)}")
    work = args.work
    work.mkdir(parents=True, exist_ok=True)
    smoke = " (tiny smoke run)" if args.tiny else ""
    print(flags_line(), flush=True)

    began = time.perf_counter()
    corpus = work / "pretraining_text.txt"
    text = write_corpus(corpus, data, TINY["lines"] if args.tiny else None)
    print("pretraining text: " + "; ".join(f"{name} {t['lines']} lines" for name, t in text.items()), flush=True)
    encoder = work / "pretrain" / "encoder"
    if args.reuse_pretraining:
        earlier = sorted((args.results / "chinese_encoder").glob("*-pretraining*.json"))
        if not earlier or not (encoder / "vocab.txt").exists():
            fail(f"--reuse-pretraining: no pretrained encoder in {encoder} with a pretraining record in {args.results}")
        setup = json.loads(earlier[-1].read_text(encoding="utf-8"))["setup"]
        architecture, run, rows = setup["encoder"], {"steps done": setup["pretraining"]["steps done"]}, []
        print(f"reusing {encoder}: {architecture}, {run['steps done']} steps ({earlier[-1].name})", flush=True)
    else:
        metrics, by_step, run = pretrain_encoder(args, work, corpus)
        size = run["size"]
        architecture = (f"BERT {args.size if not args.layers else 'custom'}: {size['layers']} layers, hidden "
                        f"{size['hidden']}, {size['heads']} heads, vocabulary {metrics['vocabulary_size']}")
        setup = {
            "pretraining text": text,
            "rows": "the held-out masked-token accuracy (%) after each step count, step 0 the random start's",
            "left out": "CLUENER2020 dev and test, Weibo NER dev and test, MSRA and People's Daily test: the text the "
                        "NER runs select on or are scored on, and every test split",
            "encoder": architecture,
            "pretraining": {"steps planned": metrics["steps"], "steps done": run["steps done"],
                            "stopped by the time budget": run["stopped by the time budget"], "minutes budget": args.minutes,
                            "batch": args.batch_size, "max length": args.max_length,
                            "learning rate": metrics["learning_rate"],
                            "held-out sequences": metrics["held_out_sequences"],
                            "training minutes": round(metrics["train_seconds"] / 60, 1),
                            "whole-word masking": "jieba", "command": run["command"]},
        }
        rows = [dict(row, part="pretraining" + smoke) for row in by_step]
        write_result("chinese_encoder", rows, setup=setup, name="pretraining" + ("-tiny" if args.tiny else ""),
                     root=args.results, columns=["step", "held-out masked-token accuracy"],
                     command=command_line().replace(str(work), "WORK"))
    baseline = random_encoder(args, work, encoder)
    for key in args.datasets:
        spec, files = DATASETS.get(key, CMEIE), dataset_files(args, work, data, key)
        task = spec.get("task", "ner")
        scored = "test F1" if files.get("test") else "dev F1"
        head = (f"options {' '.join(args.ner_options)}" if args.ner_options and task == "ner" else
                "the default head (BiLSTM-CRF)" if task == "ner" else "the default head")
        found = []
        for name, checkpoint, system in (
                ("pretrained", encoder, f"{architecture}, pretrained from scratch here ({run['steps done']} steps)"),
                ("random", baseline, f"{architecture}, random initialisation, no pretraining")):
            result, commands = finetune(args, work, f"{key}-{name}", checkpoint, files, task)
            found.append({"part": spec["part"] + smoke, "system": system, **result, "commands": commands})
        found[0]["gain over random initialisation"] = round(found[0][scored] - found[1][scored], 2)
        write_result("chinese_encoder", found, name=key + ("-tiny" if args.tiny else ""), root=args.results,
                     command=command_line().replace(str(work), "WORK"), setup={
            "data": (f"{spec['part']}: trained on {spec['train']}, selected on {spec['dev']}, scored on "
                     f"{spec['scored on']}" if task == "ner" else
                     f"{spec['part']}: {spec['source']} (the CMeIE dev set, its only labelled split here) cut at random "
                     f"(seed 0) into {', '.join(f'{n} {r}' for r, n in spec['split'].items())} sentences; scored on "
                     f"{spec['scored on']}; its text was in the pretraining text, its triples never"),
            "training": f"{' '.join(found[0]['commands'][0].split()[:3])}, {head}, batch {args.finetune_batch_size}, "
                        f"encoder learning rate {args.finetune_learning_rate:g}, the other options as the commands "
                        f"give them; F1 in %",
            "encoder": architecture,
        }, anchors=ANCHORS[key], columns=["system", scored] + (["dev F1"] if scored != "dev F1" else [])
            + ["gain over random initialisation"])
        rows += found
        if key == "cluener" and args.curve:
            rows += pretraining_curve(args, work, files, found, architecture, run["steps done"], smoke)
    print(f"\ndone in {(time.perf_counter() - began) / 60:.1f} minutes", flush=True)
    return rows


if __name__ == "__main__":
    from kerasbert.errors import KerasbertError

    try:
        main()
    except KerasbertError as e:  # e.g. jieba not installed: one line, as the kerasbert command says it
        fail(str(e))
