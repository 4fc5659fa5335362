"""Where one NER training step spends its time, float32 against mixed_bfloat16.

Figures, not a test. The step ``kerasbert ner train`` runs (the MiniLM starter encoder, BiLSTM, CRF,
compiled by :func:`kerasbert.training.fit.compile_for_training` with the default settings) on one
batch of ``--batch`` x ``--length`` tokens under TensorFlow's profiler, each precision in a process
of its own. Every kernel is read back from the trace and put in a stage by its node name: the
encoder forward / backward (inside the gradient tape's ops), the head's layers (``BiLSTM``, ``CRF
loss``, ``emissions``), the ``optimizer`` (AdamW and the learning-rate schedule), and ``loss (CRF)
and the rest`` (the CRF's forward algorithm runs in the loss, outside its layer; casts, loss
scaling). Host-side batching (:class:`kerasbert.training.batching.BucketedBatches`) is timed on its
own. Kernel times are summed over threads, so they may add up to more than the step's wall time.

    python -m bench.training_profile [--precisions float32,mixed_bfloat16] [--batch 32] [--length 128]
"""

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

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
    backward = "gradient_tape/" in node or node.startswith("gradients/")
    if "bilstm" in node:
        return "BiLSTM" + (" (backward)" if backward else "")
    if "crf" in node:
        return "CRF loss" + (" (backward)" if backward else "")
    if "emissions" in node:
        return "emissions" + (" (backward)" if backward else "")
    if "encoder" in node or "transformer_layer" in node or "embedding" in node:
        return "encoder backward" if backward else "encoder forward"
    if any(k in node.lower() for k in ("adam", "optimizer", "learning_rate", "assignadd", "assignsub")):
        return "optimizer"
    return "loss (CRF) and the rest" + (" (backward)" if backward else "")


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
    began = time.perf_counter()
    for i in range(len(batches)):
        batches[i]
    host_ms = (time.perf_counter() - began) * 1000 / len(batches)
    x, y = batches[0]
    step_ms = median_ms(model.train_on_batch, x, y, repeats=args.steps, warmup=3)
    events = trace_ops(lambda: model.train_on_batch(x, y), args.steps, tempfile.mkdtemp())
    return {"precision": args.precision, "intra_op": args.intra_threads, "step_ms": step_ms,
            "tokens_per_s": args.batch * args.length / step_ms * 1000, "host_batch_ms": host_ms,
            **op_table(events, args.steps, stage_of, top=14)}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--precisions", default="float32,mixed_bfloat16")
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--length", type=int, default=128)
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--intra-threads", type=int, default=os.cpu_count())
    parser.add_argument("--precision", help=argparse.SUPPRESS)  # the child's
    args = parser.parse_args()
    if args.precision:
        print("RESULT " + json.dumps(one_precision(args)), flush=True)
        return
    print(f"{flags_line()}\nNER training step (MiniLM + BiLSTM + CRF, default settings), batch {args.batch} x "
          f"{args.length} tokens, median of {args.steps} steps; TensorFlow intra-op threads {args.intra_threads}")
    rows = []
    for precision in args.precisions.split(","):
        row = child_result("bench.training_profile", "--precision", precision, "--batch", args.batch, "--length",
                           args.length, "--steps", args.steps, "--intra-threads", args.intra_threads,
                           log=Path(tempfile.gettempdir()) / f"training_profile_{precision}.log")
        if row is None:  # one process per precision policy
            sys.exit(f"{precision}: the child failed")
        rows.append(row)
        print(f"\n{precision}: step {row['step_ms']:.0f} ms ({row['tokens_per_s']:.0f} tokens/s), host batching "
              f"{row['host_batch_ms']:.2f} ms per batch, {row['op_ms']:.0f} ms of kernel time")
        print_op_table(row, ops=10, width=28)
    if len(rows) > 1:
        for row in rows[1:]:
            row["tokens_per_s_vs_first"] = row["tokens_per_s"] / rows[0]["tokens_per_s"]
            print(f"\n{row['precision']} / {rows[0]['precision']}: {row['tokens_per_s_vs_first']:.2f}x tokens/s")
    write_result("training_profile", rows, setup={
        "model": "MiniLM starter encoder + BiLSTM + CRF, NerTrainSettings defaults",
        "batch": args.batch, "length": args.length, "steps": args.steps,
        "how": "TF profiler trace of model.train_on_batch; stages from node names"})


if __name__ == "__main__":
    main()
