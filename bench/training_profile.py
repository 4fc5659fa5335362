"""Where one NER training step spends its time, float32 against mixed_bfloat16 (and the Hugging Face recipe's).

Figures, not a test. The step ``kerasbert ner train`` runs (MiniLM starter, BiLSTM, CRF, default
settings) on one batch of ``--batch`` x ``--length`` tokens under TensorFlow's profiler, each
precision in a process of its own; every kernel put in a stage by its node name (:func:`stage_of`),
summed over threads. Host-side batching is timed on its own. ``--peer``: the Hugging Face recipe's
step under ``torch.profiler``; ``--cpu-cap avx2``: as on an AVX2-only CPU (:data:`bench.common.CPU_CAPS`).

    python -m bench.training_profile [--precisions float32,mixed_bfloat16] [--peer] [--cpu-cap avx2]
"""

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

from bench.common import CPU_CAPS
from bench.common import cap_env
from bench.common import child_result
from bench.common import flags_line
from bench.common import median_ms
from bench.common import starter_folder
from bench.common import write_result
from bench.serving_profile import op_table
from bench.serving_profile import print_op_table
from bench.serving_profile import trace_ops

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")


def stage_of(node):
    """A kernel's stage by its node name: the encoder forward / backward (the gradient tape's ops), the
    head's layers, the optimizer, and the loss (the CRF's forward algorithm runs there) with the rest."""
    backward = " (backward)" if "gradient_tape/" in node or node.startswith("gradients/") else ""
    for key, stage in (("bilstm", "BiLSTM"), ("crf", "CRF loss"), ("emissions", "emissions")):
        if key in node:
            return stage + backward
    if "encoder" in node or "transformer_layer" in node or "embedding" in node:
        return "encoder backward" if backward else "encoder forward"
    if any(k in node.lower() for k in ("adam", "optimizer", "learning_rate", "assignadd", "assignsub")):
        return "optimizer"
    return "loss (CRF) and the rest" + backward


def one_precision(args):
    """In a child process: the step profile of ``args.precision``."""
    import numpy as np
    import tensorflow as tf

    import kerasbert
    from kerasbert_apps.ner.heads.bio.model import HEAD_PREFIX
    from kerasbert_apps.ner.heads.bio.model import NerModel
    from kerasbert_apps.ner.train import NerTrainSettings
    from kerasbert.training.batching import BucketedBatches
    from kerasbert.training.fit import compile_for_training
    from kerasbert.training.fit import set_precision

    tf.config.threading.set_intra_op_parallelism_threads(args.intra_threads)
    tf.config.threading.set_inter_op_parallelism_threads(os.cpu_count())
    set_precision(args.precision)
    settings = NerTrainSettings(precision=args.precision, epochs=1)
    model = NerModel(kerasbert.load_encoder(starter_folder()), 9)
    compile_for_training(model, 100, settings, HEAD_PREFIX)
    rng = np.random.default_rng(0)
    n = args.batch * 8
    rows = {"token_ids": [rng.integers(1000, 30000, args.length).astype(np.int32) for _ in range(n)],
            "segment_ids": [np.zeros(args.length, np.int32) for _ in range(n)],
            "padding_mask": [np.ones(args.length, np.int32) for _ in range(n)],
            "tags": [rng.integers(0, 9, args.length).astype(np.int32) for _ in range(n)]}
    batches = BucketedBatches(rows, args.batch, targets=("tags",), max_width=args.length)
    host_ms = median_ms(lambda: [batches[i] for i in range(len(batches))], repeats=1, warmup=0) / len(batches)
    x, y = batches[0]
    step_ms = median_ms(model.train_on_batch, x, y, repeats=args.steps, warmup=3)
    events = trace_ops(lambda: model.train_on_batch(x, y), args.steps, tempfile.mkdtemp())
    return {"precision": args.precision, "intra_op": args.intra_threads, "step_ms": step_ms,
            "tokens_per_s": args.batch * args.length / step_ms * 1000, "host_batch_ms": host_ms,
            **op_table(events, args.steps, stage_of, top=14)}


def peer_step(args):
    """In a child process: the Hugging Face recipe's training step (``BertForTokenClassification``
    on the same MiniLM weights, AdamW, gradient clipping; PyTorch CPU, as ``bench.ner_conll2003``'s
    ``hf`` system trains) on one batch, under ``torch.profiler``: its stages are the spans the step
    marks, its ops PyTorch's own (self CPU time)."""
    import torch
    from torch.profiler import ProfilerActivity
    from torch.profiler import profile
    from torch.profiler import record_function
    from transformers import BertForTokenClassification

    torch.manual_seed(0)
    torch.set_num_threads(args.intra_threads)
    model = BertForTokenClassification.from_pretrained(str(starter_folder()), num_labels=9)
    model.train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=5e-5, weight_decay=0.01)
    ids = torch.randint(1000, 30000, (args.batch, args.length))
    mask = torch.ones_like(ids)
    labels = torch.randint(0, 9, (args.batch, args.length))

    def step():
        with record_function("encoder forward"):
            hidden = model.bert(input_ids=ids, attention_mask=mask)[0]
        with record_function("emissions and loss"):
            logits = model.classifier(model.dropout(hidden))
            loss = torch.nn.functional.cross_entropy(logits.view(-1, 9), labels.view(-1))
        with record_function("backward (encoder and head)"):
            loss.backward()
        with record_function("optimizer"):
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            optimizer.zero_grad()

    step_ms = median_ms(step, repeats=args.steps, warmup=3)
    with profile(activities=[ProfilerActivity.CPU]) as trace:
        for _ in range(args.steps):
            step()
    stages = ("encoder forward", "emissions and loss", "backward (encoder and head)", "optimizer")
    events = trace.key_averages()
    by_stage = {e.key: e.cpu_time_total / 1000 / args.steps for e in events if e.key in stages}
    ops = sorted((e for e in events if e.key not in stages and e.self_cpu_time_total > 0),
                 key=lambda e: -e.self_cpu_time_total)[:14]
    return {"system": "Hugging Face recipe (PyTorch)", "precision": "float32", "intra_op": args.intra_threads,
            "step_ms": step_ms, "tokens_per_s": args.batch * args.length / step_ms * 1000,
            "op_ms": round(sum(e.self_cpu_time_total for e in events if e.key not in stages) / 1000 / args.steps, 3),
            "by_stage_ms": {k: round(v, 3) for k, v in sorted(by_stage.items(), key=lambda kv: -kv[1])},
            "by_op_ms": {e.key: round(e.self_cpu_time_total / 1000 / args.steps, 3) for e in ops},
            "op_counts": {e.key: round(e.count / args.steps) for e in ops}}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--precisions", default="float32,mixed_bfloat16")
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--length", type=int, default=128)
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--intra-threads", type=int, default=os.cpu_count())
    parser.add_argument("--peer", action="store_true",
                        help="also profile the Hugging Face recipe's step (PyTorch, torch.profiler) on the same batch")
    parser.add_argument("--cpu-cap", choices=sorted(CPU_CAPS),
                        help="cap the instruction sets oneDNN, MKL and PyTorch use (e.g. avx2: as on an AVX2-only CPU)")
    parser.add_argument("--precision", help=argparse.SUPPRESS)  # the child's
    args = parser.parse_args()
    if args.precision:
        result = peer_step(args) if args.precision == "hf" else one_precision(args)
        print("RESULT " + json.dumps(result), flush=True)
        return
    print(f"{flags_line(args.cpu_cap)}\nNER training step (MiniLM + BiLSTM + CRF, default settings), batch "
          f"{args.batch} x {args.length} tokens, median of {args.steps} steps; intra-op threads {args.intra_threads}")
    rows = []
    for precision in args.precisions.split(",") + (["hf"] if args.peer else []):
        row = child_result("bench.training_profile", "--precision", precision, "--batch", args.batch, "--length",
                           args.length, "--steps", args.steps, "--intra-threads", args.intra_threads,
                           log=Path(tempfile.gettempdir()) / f"training_profile_{precision}.log",
                           env=cap_env(args.cpu_cap))
        if row is None:  # one process per precision policy
            sys.exit(f"{precision}: the child failed")
        row.setdefault("system", "kerasbert (TensorFlow)")
        rows.append(row)
        print(f"\n{row['system']}, {row['precision']}: step {row['step_ms']:.0f} ms ({row['tokens_per_s']:.0f} "
              f"tokens/s), {row['op_ms']:.0f} ms of kernel time"
              + (f", host batching {row['host_batch_ms']:.2f} ms per batch" if "host_batch_ms" in row else ""))
        print_op_table(row, ops=10, width=28)
    peer = next((r for r in rows if r["precision"] == "float32" and r["system"] != rows[0]["system"]), None)
    for row in rows[1:]:
        if row is not peer:
            row["tokens_per_s_vs_first"] = row["tokens_per_s"] / rows[0]["tokens_per_s"]
            print(f"\n{row['precision']} / {rows[0]['precision']}: {row['tokens_per_s_vs_first']:.2f}x tokens/s")
    if peer:
        for row in rows:
            if row is not peer:
                row["tokens_per_s_vs_peer"] = row["tokens_per_s"] / peer["tokens_per_s"]
                print(f"{row['system']}, {row['precision']} / the Hugging Face recipe: "
                      f"{row['tokens_per_s_vs_peer']:.2f}x tokens/s")
    write_result("training_profile", rows, cpu_cap=args.cpu_cap, setup={
        "model": "MiniLM starter encoder + BiLSTM + CRF, NerTrainSettings defaults"
                 + ("; the peer: BertForTokenClassification on the same weights, AdamW" if args.peer else ""),
        "batch": args.batch, "length": args.length, "steps": args.steps,
        "how": "TF profiler trace of model.train_on_batch; stages from node names"
               + ("; the peer: torch.profiler, stages by the spans its step marks" if args.peer else "")})


if __name__ == "__main__":
    main()
