"""``bench.gpu_training`` in one call of a few minutes on a GPU host: the most important comparisons first, under a deadline.

Our tooling around the user benchmark ``bench.gpu_training`` (which measures: ours, the peer, the
rows), for a GPU host where a run has a fixed number of seconds and TensorFlow may be missing:

* the jobs are ordered by what the summary compares (:class:`Plan`): our softmax head (the peer's
  architecture) in mixed_bfloat16 at batch 128 and 256; the peer at both, float32 (TF32) at both,
  bf16 at 32; our CRF head and the CRF head without the BiLSTM at the better batch of the first
  job (the portable scan at once if the CRF row failed); the BiLSTM alone, each implementation
  (``bench.bilstm_speed``'s measurement); the CRF head with Keras's own BiLSTM; our softmax head in
  float32; then, as time allows (``--plan full``), batch 32 and the largest batch that fits (from
  the memory measured at 128 and 256), the peer there, float32 for the CRF heads, the portable
  scan, batch 32 for the CRF heads, and ``torch.compile``. ``--plan at-batch --batch N``: every
  comparison at one batch, then the CRF heads at 32;
* each job gets the time left before ``--deadline`` (seconds from the start); a job that the time
  left cannot hold, by the timings measured so far (a process's start, seconds per batch), is
  skipped and the record says so;
* ``--block-tensorflow``: the children fail on any TensorFlow import, as on a host without it.

The record goes to ``OUT/gpu_training/<date>-speed.json`` (``bench/results``' format), rewritten
after every job, with ``OUT`` in its command line; it is then copied into
``bench/results/gpu_training/``::

    export KERAS_BACKEND=jax XLA_FLAGS=--xla_gpu_enable_triton_gemm=false
    python -m bench.offline_gpu_host.gpu_training --out OUT --deadline 400 [--plan short] [--block-tensorflow]
    KERAS_BACKEND=jax python -m bench.offline_gpu_host.gpu_training --tiny --out gt-smoke   # every path, on a CPU
"""

import argparse
import json
import os
import selectors
import subprocess
import sys
import time

from bench import gpu_training as bench
from bench.common import ROOT

#: Seconds a torch.compile row is expected to take (compiling the training step), before one was measured.
COMPILE_ESTIMATE = 120.0


class Plan:
    """The jobs of a run, in order, each ``(kind, config)``; the ``best`` and ``largest`` batches are
    filled in from the rows measured so far (a callable config is called with them)."""

    def __init__(self, name, tiny, batch=None):
        self.name, self.tiny, self.batch = name, tiny, batch
        self.encoder = "tiny" if tiny else "bert-base"
        self.seq = 16 if tiny else 128
        self.steps, self.warmup = (3, 2) if tiny else (10, 3)
        self.first = (4, 8) if tiny else (128, 256)
        self.small = 2 if tiny else 32

    def base(self):
        return {"encoder": self.encoder, "seq": self.seq, "steps": self.steps, "warmup": self.warmup}

    def jobs(self):
        base = self.base()
        a, b = self.first

        def ours(head, precision, batches, bilstm="auto"):
            return "ours", lambda rows: {**base, "head": head, "precision": precision, "bilstm": bilstm,
                                         "batches": batches(rows) if callable(batches) else list(batches)}

        best = self.best_batch
        if self.name == "at-batch":  # every comparison at one batch (--batch), the peer beside it, then batch 32
            n = self.batch or b
            yield ours("softmax", "mixed_bfloat16", sorted({b, n}))
            yield "peer", {**base, "runs": [("bf16 autocast", n, False), ("float32 (TF32)", n, False)]
                           + ([("bf16 autocast", b, False)] if b != n else [])}
            yield ours("crf", "mixed_bfloat16", [n])
            yield ours("crf, no BiLSTM", "mixed_bfloat16", [n])
            yield ours("softmax", "float32", [n])
            yield ours("crf", "mixed_bfloat16", [self.small])
            yield ours("crf, no BiLSTM", "mixed_bfloat16", [self.small])
            yield ours("crf", "mixed_bfloat16", [self.small], bilstm="keras")
            return
        yield ours("softmax", "mixed_bfloat16", (a, b))
        yield "peer", {**base, "runs": [("bf16 autocast", a, False), ("bf16 autocast", b, False),
                                        ("float32 (TF32)", b, False), ("float32 (TF32)", a, False),
                                        ("bf16 autocast", self.small, False)]}
        yield ours("crf", "mixed_bfloat16", lambda rows: [best(rows)])
        # if the CRF head's row failed (cuDNN's BiLSTM at this size, say), the portable scan at once
        yield ours("crf", "mixed_bfloat16", lambda rows: [] if self.has(rows, "crf") else [best(rows)], bilstm="scan")
        yield ours("crf, no BiLSTM", "mixed_bfloat16", lambda rows: [best(rows)])
        yield "bilstm", lambda rows: {"batch": best(rows), "seq": self.seq, "features": 32 if self.tiny else 768,
                                      "units": 8 if self.tiny else 128, "steps": self.steps,
                                      "precisions": ["mixed_bfloat16"]}
        yield ours("crf", "mixed_bfloat16", lambda rows: [best(rows)], bilstm="keras")
        yield ours("softmax", "float32", lambda rows: [best(rows)])
        if self.name == "short":
            return
        yield ours("softmax", "mixed_bfloat16", lambda rows: [self.small] + self.largest(rows))
        yield "peer", lambda rows: {**base, "runs": [("bf16 autocast", n, False) for n in self.largest(rows)]}
        yield ours("crf", "float32", lambda rows: [best(rows)])
        yield ours("crf", "mixed_bfloat16", lambda rows: [] if self.has(rows, "crf", "scan") else [best(rows)],
                   bilstm="scan")
        yield ours("crf, no BiLSTM", "float32", lambda rows: [best(rows)])
        yield ours("crf", "mixed_bfloat16", lambda rows: [self.small])
        yield ours("crf, no BiLSTM", "mixed_bfloat16", lambda rows: [self.small])
        yield "peer", lambda rows: {**base, "runs": [("bf16 autocast", best(rows), True)]}

    @staticmethod
    def has(rows, head, bilstm=None, precision="mixed_bfloat16"):
        """Whether a row of ours with this head (and BiLSTM implementation) and precision was measured."""
        return any(r.get("system") == bench.OURS and r.get("head") == head and r.get("precision") == precision
                   and r.get("tokens_per_s") and (bilstm is None or r.get("bilstm") == bilstm) for r in rows)

    def best_batch(self, rows):
        """The batch of the best tokens/s of our softmax head in mixed_bfloat16 (the second first batch if none)."""
        found = [r for r in rows if r.get("system") == bench.OURS and r.get("head") == "softmax"
                 and r.get("precision") == "mixed_bfloat16" and r.get("tokens_per_s")]
        return max(found, key=lambda r: r["tokens_per_s"])["batch"] if found else self.first[1]

    def largest(self, rows):
        """``[batch]``: the largest power of two above the first batches whose memory, extrapolated
        linearly from our softmax head's peaks at the first two batches, stays under 90% of the
        device's limit; ``[]`` if none."""
        found = {r["batch"]: r for r in rows if r.get("system") == bench.OURS and r.get("head") == "softmax"
                 and r.get("precision") == "mixed_bfloat16" and r.get("peak_bytes_in_use")}
        a, b = self.first
        if a not in found or b not in found or not found[b].get("bytes_limit"):
            return [2 * b]
        slope = (found[b]["peak_bytes_in_use"] - found[a]["peak_bytes_in_use"]) / (b - a)
        limit, batch = 0.9 * found[b]["bytes_limit"], None
        candidate = 2 * b
        while found[b]["peak_bytes_in_use"] + slope * (candidate - b) < limit and candidate <= 8192:
            batch, candidate = candidate, 2 * candidate
        return [batch] if batch else []


def estimate(kind, config, costs):
    """Seconds a job should take: a process's start, and per batch a compile and the measurement
    (the defaults until a job of the kind was measured)."""
    start, per_batch = costs[kind]
    if kind == "ours":
        return start + per_batch * len(config["batches"])
    if kind == "peer":
        return start + sum(COMPILE_ESTIMATE if compiled else per_batch for _, _, compiled in config["runs"])
    return start + per_batch * 3 * len(config["precisions"])


def run_child(kind, config, timeout, block_tensorflow, log):
    """``(rows, status, seconds, last lines)`` of one child process, stopped after ``timeout`` seconds."""
    command = [sys.executable, "-m", "bench.offline_gpu_host.gpu_training", "--child", kind, json.dumps(config)]
    command += ["--block-tensorflow"] if block_tensorflow else []
    started = time.perf_counter()
    rows, lines = [], []
    with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=ROOT,
                          env=dict(os.environ, PYTHONUNBUFFERED="1")) as child:
        deadline = started + timeout
        selector = selectors.DefaultSelector()
        selector.register(child.stdout, selectors.EVENT_READ)
        try:
            while True:
                left = deadline - time.perf_counter()
                if left <= 0:
                    raise subprocess.TimeoutExpired(command, timeout)
                if not selector.select(timeout=min(left, 5)):
                    continue
                line = child.stdout.readline()
                if not line:
                    break
                bench.child_line(line, log, rows, lines)
            child.wait(timeout=max(1, deadline - time.perf_counter()))
            status = child.returncode
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()
            status = "stopped at the deadline"
    return rows, status, time.perf_counter() - started, lines[-3:]


class Deadline:
    """How ``bench.measure`` runs the jobs: each with the time left before the deadline, a job that by
    the timings measured so far the time left cannot hold skipped."""

    def __init__(self, seconds, tiny, block_tensorflow, command):
        self.seconds, self.block_tensorflow, self.command = seconds, block_tensorflow, command
        self.began = time.perf_counter()
        #: (process start, seconds per batch) of each kind, before one was measured
        self.costs = {"ours": (30.0, 30.0), "peer": (20.0, 5.0), "bilstm": (15.0, 15.0)} if tiny else \
            {"ours": (25.0, 40.0), "peer": (20.0, 10.0), "bilstm": (15.0, 8.0)}

    def left(self):
        return self.seconds - (time.perf_counter() - self.began)

    def skip(self, kind, config, what):
        need = estimate(kind, config, self.costs)
        return f"needs about {need:.0f} s, {self.left():.0f} s left" if need > self.left() else None

    def run(self, kind, config, log):
        got, status, seconds, tail = run_child(kind, config, self.left(), self.block_tensorflow, log)
        measured = [r["seconds"] for r in got if r.get("seconds") and r.get("note") != "torch.compile"]
        if kind != "bilstm" and measured and status == 0:  # calibrate: the start, and the time per batch
            self.costs[kind] = (max(seconds - sum(r.get("seconds") or 0 for r in got), 5.0), max(measured))
        return got, status, seconds, tail


def bilstm_rows(config):
    """Print the BiLSTM alone's rows (``bench.bilstm_speed``'s measurement), each implementation."""
    import jax

    from bench.bilstm_speed import measure
    from kerasbert.layers.bilstm import cudnn_works

    implementations = ["keras", "scan"] + (["cudnn"] if cudnn_works() else [])
    device = jax.devices()[0]
    for precision in config["precisions"]:
        for row in measure(config["batch"], config["seq"], config["features"], config["units"], precision,
                           implementations, config["steps"], 3):
            print("ROW " + json.dumps({"system": bench.OURS, "head": "BiLSTM alone", "bilstm": row["runs_as"],
                                       "precision": precision, "batch": row["batch"], "seq": row["time"],
                                       "step_ms": row["step_ms"], "speedup_vs_keras": row["speedup_vs_keras"],
                                       "max_difference_vs_keras": row["max_difference"],
                                       "first_step_s": row["compile_s"],
                                       "note": f"{row['features']} features, {row['units']} units, forward + backward",
                                       "device": device.device_kind, "platform": device.platform}), flush=True)


def recorded_command(argv):
    """The command line as the record gives it, with ``OUT`` for the output folder (a path of the host)."""
    words = ["python -m bench.offline_gpu_host.gpu_training"]
    for i, word in enumerate(argv[1:], 1):
        words.append("OUT" if argv[i - 1] == "--out" else "--out=OUT" if word.startswith("--out=") else word)
    return " ".join(words)


def run(args):
    plan = Plan(args.plan, args.tiny, args.batch)
    runner = Deadline(args.deadline, args.tiny, args.block_tensorflow, recorded_command(sys.argv))
    setup = bench.setup_of(**plan.base(), plan=args.plan, batch=args.batch, tiny=bool(args.tiny),
                           deadline_s=args.deadline)
    return bench.measure(plan.jobs(), args.out, setup, runner, name="speed-tiny" if args.tiny else "speed")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", help="where the record (OUT/gpu_training/*.json) and the log go")
    parser.add_argument("--plan", choices=("full", "short", "at-batch"), default="full",
                        help="short: only the comparisons the summary names (softmax and peer at 128 and 256, the "
                             "CRF heads at the better batch, float32); at-batch: every comparison at --batch, then "
                             "the CRF heads at batch 32")
    parser.add_argument("--batch", type=int, help="the batch of --plan at-batch (default: the second first batch, 256)")
    parser.add_argument("--deadline", type=float, default=400, help="seconds for the whole run (default 400)")
    parser.add_argument("--tiny", action="store_true",
                        help="a 2-layer H=64 encoder, batches of 2-8 x 16 tokens (a smoke test of every path, on a CPU)")
    parser.add_argument("--block-tensorflow", action="store_true", help="fail on any TensorFlow import in the children")
    parser.add_argument("--child", nargs=2, metavar=("KIND", "CONFIG"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        if args.block_tensorflow:
            sys.modules["tensorflow"] = None  # fail on any TensorFlow import, as on a host without it
        kind, config = args.child
        return {"ours": bench.ours_rows, "peer": bench.peer_rows, "bilstm": bilstm_rows}[kind](json.loads(config))
    if not args.out:
        parser.error("--out is required")
    run(args)


if __name__ == "__main__":
    main()
