"""NER on CoNLL-2003 with the MiniLM checkpoint: kerasbert vs the Hugging Face recipe.

Figures, not a test. Each system (:data:`SYSTEM_NAMES`) runs in a subprocess of its own (its own
peak RSS), trains on eng.train, is selected on eng.testa and scored on eng.testb with seqeval:
``ours`` (``kerasbert_apps.ner.train``, BiLSTM-CRF; ``ours_bf16`` in mixed_bfloat16, ``ours_auto``
with ``--precision auto``) and ``hf`` (``BertForTokenClassification`` on the same weights,
first-subword labels, AdamW 5e-5 with 10% warm-up, PyTorch CPU). Training tokens/s: real WordPiece
tokens over the epochs after the first; inference: the test set in batches of 32. ``--max-train``
makes part ``CoNLL-2003 short run``; ``--cluener`` (a Chinese ``--checkpoint``) adds ``CLUENER2020``.

    python -m bench.ner_conll2003 [--systems ours,hf,ours_bf16] [--epochs 3]
        [--max-train N] [--max-length 128] [--cluener]
"""

import argparse
import json
import os
import resource
import sys
import tempfile
import time
from pathlib import Path

from bench.common import CONLL
from bench.common import CPU_CAPS
from bench.common import MINILM
from bench.common import SHARED
from bench.common import cap_env
from bench.common import child_result
from bench.common import flags_line
from bench.common import require_chinese_vocabulary
from bench.common import starter_folder
from bench.common import write_result

#: The rows' ``system`` names in bench/results/ner_conll2003/ (the same as the records moved from the README).
SYSTEM_NAMES = {
    "ours": "kerasbert MiniLM-BiLSTM-CRF, float32",
    "ours_bf16": "kerasbert MiniLM-BiLSTM-CRF, mixed_bfloat16",
    "ours_auto": "kerasbert MiniLM-BiLSTM-CRF, --precision auto",
    "hf": "HF recipe (first-subword labels, AdamW 5e-5, 10% warmup), PyTorch CPU",
    "cluener": "kerasbert MiniLM-BiLSTM-CRF",
}


def peak_rss_mb():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def run_ours(args, precision, train_path, dev_path, test_path, tag):
    from kerasbert_apps.ner.readers import read_ner_file
    from kerasbert_apps.ner.evaluate import score
    from kerasbert_apps.ner.heads.bio.pipeline import Tagger
    from kerasbert_apps.ner.train import NerTrainSettings
    from kerasbert_apps.ner.train import train

    out = Path(args.workdir) / tag
    if out.exists() and not (out / "backup").exists():
        import shutil

        shutil.rmtree(out)  # a finished run of an earlier invocation: measure a fresh one (a killed one resumes)
    config = NerTrainSettings(
        checkpoint=str(args.checkpoint), train=str(train_path), dev=str(dev_path), output=str(out),
        epochs=args.epochs, batch_size=32, max_length=args.max_length, precision=precision,
        max_train_examples=args.max_train, resume=(out / "backup").exists(),
    )
    metrics = train(config)
    tagger = Tagger.load(out / "model")
    result = {"system": tag, "precision": config.precision, "dev_f1": metrics["dev"]["f1"],
              "train_tokens_per_s": metrics["train_tokens_per_s_after_first_epoch"],
              "train_epoch_seconds": metrics["train_epoch_seconds"]}
    if test_path is not None:
        test = read_ner_file(test_path).examples
        start = time.perf_counter()
        predictions = tagger.predict([e.text for e in test], batch_size=32)
        seconds = time.perf_counter() - start
        result.update(test_f1=score(test, predictions)["f1"], infer_sentences_per_s=len(test) / seconds)
    result["peak_rss_mb"] = peak_rss_mb()
    return result


def run_hf(args):
    import numpy as np
    import torch
    from seqeval.metrics import f1_score
    from transformers import BertForTokenClassification
    from transformers import BertTokenizerFast
    from transformers import DataCollatorForTokenClassification
    from transformers import get_linear_schedule_with_warmup

    from kerasbert_apps.ner.readers import read_ner_file
    from kerasbert_apps.ner.tags import spans_to_tags

    torch.manual_seed(42)
    torch.set_num_threads(os.cpu_count())
    folder = str(starter_folder())
    splits = {name: read_ner_file(CONLL / f).examples for name, f in
              (("train", "eng.train.gz"), ("dev", "eng.testa"), ("test", "eng.testb"))}
    if args.max_train:
        splits["train"] = splits["train"][: args.max_train]
    words = {k: [[e.text[a:b] for a, b in e.words] for e in v] for k, v in splits.items()}
    tags = {k: [spans_to_tags(e.words, e.entities, "bio") for e in v] for k, v in splits.items()}
    labels = sorted({t for sent in tags["train"] for t in sent}, key=lambda t: (t != "O", t))
    label_id = {t: i for i, t in enumerate(labels)}
    tokenizer = BertTokenizerFast.from_pretrained(folder)
    model = BertForTokenClassification.from_pretrained(folder, num_labels=len(labels))
    collate = DataCollatorForTokenClassification(tokenizer, return_tensors="pt")  # pads with 0, labels with -100

    def encode(split):
        enc = tokenizer(words[split], is_split_into_words=True, truncation=True, max_length=args.max_length)
        label_rows = []
        for i, sent_tags in enumerate(tags[split]):
            previous, row = None, []
            for w in enc.word_ids(i):
                row.append(-100 if w is None or w == previous else label_id.get(sent_tags[w], 0))
                previous = w
            label_rows.append(row)
        return enc, label_rows

    def batches(enc, label_rows, order):
        for b in range(0, len(order), 32):
            idx = order[b : b + 32]
            batch = collate([{"input_ids": enc["input_ids"][i], "labels": label_rows[i]} for i in idx])
            yield idx, batch["input_ids"], batch["attention_mask"], batch["labels"]

    def predict(split):
        enc, rows = encode(split)
        model.eval()
        predicted = [None] * len(rows)
        start = time.perf_counter()
        with torch.inference_mode():
            for idx, ids, mask, lab in batches(enc, rows, list(range(len(rows)))):
                argmax = model(input_ids=ids, attention_mask=mask).logits.argmax(-1)
                for r, i in enumerate(idx):
                    out, previous = [], None
                    for k, w in enumerate(enc.word_ids(i)):
                        if w is not None and w != previous:
                            out.append(labels[int(argmax[r, k])])
                        previous = w
                    out += ["O"] * (len(tags[split][i]) - len(out))  # words cut by max_length
                    predicted[i] = out
        seconds = time.perf_counter() - start
        return f1_score(tags[split], predicted), len(rows) / seconds

    enc, rows = encode("train")
    rng = np.random.default_rng(42)
    steps = args.epochs * ((len(rows) + 31) // 32)
    optimizer = torch.optim.AdamW(model.parameters(), lr=5e-5, weight_decay=0.01)
    schedule = get_linear_schedule_with_warmup(optimizer, int(0.1 * steps), steps)
    epoch_seconds, real_tokens = [], sum(len(r) for r in enc["input_ids"])
    for epoch in range(args.epochs):
        model.train()
        start = time.perf_counter()
        for _, ids, mask, lab in batches(enc, rows, list(rng.permutation(len(rows)))):
            loss = model(input_ids=ids, attention_mask=mask, labels=lab).loss
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            schedule.step()
            optimizer.zero_grad()
        epoch_seconds.append(time.perf_counter() - start)
        print(f"hf epoch {epoch + 1}: {epoch_seconds[-1]:.0f} s", flush=True)
    dev_f1, _ = predict("dev")
    test_f1, rate = predict("test")
    later = epoch_seconds[1:] or epoch_seconds
    return {"system": "hf", "dev_f1": dev_f1, "test_f1": test_f1,
            "train_tokens_per_s": real_tokens * len(later) / sum(later), "train_epoch_seconds": epoch_seconds,
            "infer_sentences_per_s": rate, "peak_rss_mb": peak_rss_mb()}


def result_rows(results, part):
    """The records' rows of this run's ``results`` (the children's RESULT dicts) for ``part``."""
    rows = []
    hf = next((r for r in results if r["system"] == "hf"), None)
    for r in results:
        name = SYSTEM_NAMES.get(r["system"], r["system"])
        if r["system"] == "ours_auto":
            name += f" ({r['precision']} here)"
        row = {"part": part, "system": name, "id": r["system"],
               "trained in": r.get("precision", "float32"), "dev F1": round(r["dev_f1"] * 100, 2)}
        if "test_f1" in r:
            row["test F1"] = round(r["test_f1"] * 100, 2)
        row["train tokens/s"] = round(r["train_tokens_per_s"], 1) if r["train_tokens_per_s"] else None
        if hf and hf["train_tokens_per_s"] and r["train_tokens_per_s"]:
            row["train tokens/s / HF"] = f"{(r['train_tokens_per_s'] or 0) / hf['train_tokens_per_s']:.2f}x"
        if "infer_sentences_per_s" in r:
            row["inference sentences/s"] = round(r["infer_sentences_per_s"], 1)
        row["peak RSS GB"] = round(r["peak_rss_mb"] / 1024, 2)
        row["epoch seconds"] = [round(x, 1) for x in r.get("train_epoch_seconds") or []]
        rows.append(row)
    return rows


def write_results(args, results):
    """One record per part measured in this run."""
    training = (f"{args.epochs} epochs, batch 32, max length {args.max_length}, "
                f"train sentences: {args.max_train or 'all'}, checkpoint {Path(args.checkpoint).name}")
    conll = [r for r in results if r["system"] != "cluener"]
    if conll:
        part = "CoNLL-2003 short run" if args.max_train else "CoNLL-2003"
        write_result("ner_conll2003", result_rows(conll, part), name="conll", cpu_cap=args.cpu_cap, setup={
            "data": "CoNLL-2003: trained on eng.train, model selected on eng.testa (dev), scored on eng.testb "
                    "(test) with seqeval",
            "training": training,
            "rows": "each system in its own subprocess: kerasbert (kerasbert_apps.ner.train, BiLSTM-CRF head) in "
                    "float32, mixed_bfloat16 and --precision auto (the precision it chose: the row's 'trained in'); "
                    "the Hugging Face recipe (BertForTokenClassification on the same weights) on PyTorch CPU",
            "note": "train tokens/s: real WordPiece tokens over the epochs after the first (the first includes "
                    "graph tracing); inference: the test set in batches of 32, tokenization included; F1 in %",
        })
    cluener = [r for r in results if r["system"] == "cluener"]
    if cluener:
        write_result("ner_conll2003", result_rows(cluener, "CLUENER2020"), name="cluener", setup={
            "data": "CLUENER2020 (Chinese): trained on train.json, scored on dev.json",
            "training": training,
        })


def child(args):
    if args.child == "hf":
        result = run_hf(args)
    elif args.child == "cluener":
        data = SHARED / "cluener2020"
        result = run_ours(args, "float32", data / "train.json.gz", data / "dev.json", None, "cluener")
    else:
        precision = {"ours_bf16": "mixed_bfloat16", "ours_auto": "auto"}.get(args.child, "float32")
        result = run_ours(args, precision, CONLL / "eng.train.gz", CONLL / "eng.testa", CONLL / "eng.testb", args.child)
    print("RESULT " + json.dumps(result), flush=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--systems", default="ours,hf,ours_bf16")
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--max-train", type=int, default=0, help="first N training sentences (0: all)")
    parser.add_argument("--max-length", type=int, default=128)
    parser.add_argument("--checkpoint", default=str(MINILM))
    parser.add_argument("--workdir", default=os.path.join(tempfile.gettempdir(), "kerasbert_bench_ner"))
    parser.add_argument("--cluener", action="store_true",
                        help="also train on CLUENER2020 and report dev F1 (needs a Chinese --checkpoint)")
    parser.add_argument("--cpu-cap", choices=sorted(CPU_CAPS),
                        help="cap the instruction sets oneDNN, MKL and PyTorch use (avx2: as on an AVX2-only CPU)")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        return child(args)
    if args.cluener:
        require_chinese_vocabulary(args.checkpoint, "CLUENER2020")
    print(flags_line(args.cpu_cap))
    print(f"CoNLL-2003 from {CONLL}; MiniLM (6 layers, H=384); epochs {args.epochs}, batch 32, "
          f"max length {args.max_length}, train sentences: {args.max_train or 'all'}\n", flush=True)
    systems = args.systems.split(",") + (["cluener"] if args.cluener else [])
    results = []
    Path(args.workdir).mkdir(parents=True, exist_ok=True)
    for system in systems:
        result = child_result("bench.ner_conll2003", *sys.argv[1:], "--child", system,
                              log=Path(args.workdir) / f"{system}.log", env=cap_env(args.cpu_cap))
        results += [result] if result else []
    if results:
        write_results(args, results)


if __name__ == "__main__":
    main()
