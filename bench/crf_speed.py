"""Microbenchmark of `kerasbert.layers.crf` on CPU, TensorFlow backend.

Times, per batch:
- `crf_log_likelihood` forward + gradient (w.r.t. potentials and transitions),
- `crf_decode` (Viterbi),
each inside `tf.function` with `jit_compile` False and True. Reports the median
of `--repeats` runs after `--warmup` runs. Figures only, not a test. The
rows (one per function and jit_compile setting) go to
`bench/results/crf_speed/` (`bench/results.py`).

    TF_CPP_MIN_LOG_LEVEL=3 python bench/crf_speed.py [--batch 32 --time 128 --tags 9]
"""

import argparse
import os
import platform
import statistics
import sys
import time
from pathlib import Path

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")  # CPU figures

import keras  # noqa: E402
import numpy as np  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from kerasbert.layers import crf  # noqa: E402
from results import flags_line  # noqa: E402
from results import write_result  # noqa: E402


def median_ms(fn, args, warmup, repeats):
    for _ in range(warmup):
        _block(fn(*args))
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        _block(fn(*args))
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times), min(times), max(times)


def _block(outputs):
    for x in outputs:
        x.numpy()  # waits for the computation


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--time", type=int, default=128)
    parser.add_argument("--tags", type=int, default=9)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    if keras.backend.backend() != "tensorflow":
        raise SystemExit("this benchmark needs KERAS_BACKEND=tensorflow")
    import tensorflow as tf

    rng = np.random.default_rng(0)
    potentials = tf.constant(
        rng.normal(size=(args.batch, args.time, args.tags)), tf.float32
    )
    tags = tf.constant(rng.integers(0, args.tags, (args.batch, args.time)), tf.int32)
    lengths = tf.constant(
        rng.integers(args.time // 2, args.time + 1, args.batch), tf.int32
    )
    transitions = tf.Variable(rng.normal(size=(args.tags, args.tags)), dtype=tf.float32)

    print(
        f"platform: {platform.platform()} | {platform.processor() or platform.machine()}"
        f" | os.cpu_count()={os.cpu_count()} | load average {os.getloadavg()}"
    )
    print(flags_line())
    print(
        f"tensorflow {tf.__version__}, keras {keras.__version__}, CPU only; "
        f"batch={args.batch} time={args.time} tags={args.tags} "
        f"(lengths {args.time // 2}..{args.time}); median of {args.repeats} "
        f"runs after {args.warmup} warm-up runs"
    )
    rows = []
    for jit_compile in (False, True):

        @tf.function(jit_compile=jit_compile)
        def likelihood_and_grad(potentials, tags, lengths):
            with tf.GradientTape() as tape:
                tape.watch(potentials)
                log_likelihood, _ = crf.crf_log_likelihood(
                    potentials, tags, lengths, transitions
                )
                loss = -tf.reduce_mean(log_likelihood)
            grads = tape.gradient(loss, [potentials, transitions])
            return [loss] + grads

        @tf.function(jit_compile=jit_compile)
        def decode(potentials, lengths):
            return crf.crf_decode(potentials, transitions, lengths)

        for name, fn, fn_args in (
            ("log_likelihood + grad", likelihood_and_grad, (potentials, tags, lengths)),
            ("decode (Viterbi)", decode, (potentials, lengths)),
        ):
            med, low, high = median_ms(fn, fn_args, args.warmup, args.repeats)
            print(
                f"jit_compile={str(jit_compile):5}  {name:22} "
                f"median {med:8.2f} ms  (min {low:.2f}, max {high:.2f})"
            )
            rows.append({"function": name, "jit_compile": jit_compile, "median ms": round(med, 3),
                         "min ms": round(low, 3), "max ms": round(high, 3)})
    write_result("crf_speed", rows, setup={
        "shape": f"batch {args.batch} x {args.time} steps x {args.tags} tags "
                 f"(lengths drawn from {args.time // 2}..{args.time})",
        "timing": f"median, min and max of {args.repeats} runs after {args.warmup} warm-up runs, "
                  "each in a tf.function, CPU only",
        "functions": "kerasbert.layers.crf: crf_log_likelihood forward + gradient (potentials, transitions); "
                     "crf_decode (Viterbi)",
    })


if __name__ == "__main__":
    main()
