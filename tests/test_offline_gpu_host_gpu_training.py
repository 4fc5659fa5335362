"""bench/offline_gpu_host/gpu_training.py on the CPU: bench.gpu_training under a deadline, checked without a GPU.

* the plan: the comparisons the summary names first, the CRF rows at the best batch measured, the
  largest batch from the memory measured, the portable scan at once when the CRF row failed,
  ``at-batch``: every comparison at one batch;
* the deadline: a job the time left cannot hold is skipped and named in the record; the record's
  command line has ``OUT`` for the host's folder;
* its children: TensorFlow blocked, the BiLSTM alone measured by ``bench.bilstm_speed``;
* bad input is a one-line error.
"""

import importlib
import json
import os
import subprocess
import sys
from types import SimpleNamespace

import pytest

from conftest import REPO_ROOT
from test_gpu_training_bench import fake_rows

TOOL = "bench.offline_gpu_host.gpu_training"


def tool():
    return importlib.import_module(TOOL)


def args(out, plan="full", deadline=1e6, batch=None):
    return SimpleNamespace(out=str(out), plan=plan, batch=batch, deadline=deadline, tiny=False, block_tensorflow=False)


def test_at_batch_plan_compares_everything_at_one_batch(tmp_path, monkeypatch):
    """``--plan at-batch --batch N``: our softmax head at 256 and N, the peer beside it (bf16, float32),
    the CRF heads and float32 at N, then the CRF heads at 32."""
    gpu = tool()
    calls = []

    def run_child(kind, config, timeout, block_tensorflow, log):
        calls.append((kind, config))
        return fake_rows(kind, config), 0, 1.0, []

    monkeypatch.setattr(gpu, "run_child", run_child)
    monkeypatch.setenv("KERAS_BACKEND", "jax")
    gpu.run(args(tmp_path, "at-batch", batch=512))
    kinds = [(k, c.get("head"), c.get("precision"), c.get("bilstm"), c.get("batches") or c.get("runs"))
             for k, c in calls]
    assert kinds[0] == ("ours", "softmax", "mixed_bfloat16", "auto", [256, 512])
    assert kinds[1][0] == "peer" and kinds[1][4] == [("bf16 autocast", 512, False), ("float32 (TF32)", 512, False),
                                                     ("bf16 autocast", 256, False)]
    assert kinds[2:5] == [("ours", "crf", "mixed_bfloat16", "auto", [512]),
                          ("ours", "crf, no BiLSTM", "mixed_bfloat16", "auto", [512]),
                          ("ours", "softmax", "float32", "auto", [512])]
    assert [k[1:] for k in kinds[5:]] == [("crf", "mixed_bfloat16", "auto", [32]),
                                          ("crf, no BiLSTM", "mixed_bfloat16", "auto", [32]),
                                          ("crf", "mixed_bfloat16", "keras", [32])]
    record = json.loads(next((tmp_path / "gpu_training").glob("*-speed.json")).read_text())
    assert record["setup"]["plan"] == "at-batch" and record["setup"]["batch"] == 512


def test_plan_order_deadline_and_record(tmp_path, monkeypatch):
    gpu = tool()
    calls, clock = [], [0.0]

    def run_child(kind, config, timeout, block_tensorflow, log):
        calls.append((kind, config))
        clock[0] += 30.0
        return fake_rows(kind, config), 0, 30.0, []

    monkeypatch.setattr(gpu, "run_child", run_child)
    monkeypatch.setattr(gpu.time, "perf_counter", lambda: clock[0])
    monkeypatch.setenv("KERAS_BACKEND", "jax")
    monkeypatch.setattr(sys, "argv", ["gpu_training.py", "--out", str(tmp_path), "--plan", "full"])
    gpu.run(args(tmp_path, "full", deadline=300.0))
    kinds = [(k, c.get("head"), c.get("precision"), c.get("bilstm"), c.get("batches") or c.get("batch") or c.get("runs"))
             for k, c in calls]
    # the target comparisons first: our softmax head and the peer at 128 and 256
    assert kinds[0] == ("ours", "softmax", "mixed_bfloat16", "auto", [128, 256])
    assert kinds[1][0] == "peer" and kinds[1][4][:2] == [("bf16 autocast", 128, False), ("bf16 autocast", 256, False)]
    # then the CRF heads at the better batch (256 here), the BiLSTM alone, the old BiLSTM, float32
    assert kinds[2] == ("ours", "crf", "mixed_bfloat16", "auto", [256])
    assert kinds[3] == ("ours", "crf, no BiLSTM", "mixed_bfloat16", "auto", [256])
    assert kinds[4][0] == "bilstm" and kinds[4][4] == 256
    assert kinds[5] == ("ours", "crf", "mixed_bfloat16", "keras", [256])
    assert kinds[6] == ("ours", "softmax", "float32", "auto", [256])
    # 32 and the largest batch that fits: memory 1 GiB + 1 MiB a row, limit 1 GiB + 1000 MiB -> 512
    assert kinds[7] == ("ours", "softmax", "mixed_bfloat16", "auto", [32, 512])
    assert len(calls) < 15  # 30 s a job against a 300 s deadline: the later jobs were skipped

    records = list((tmp_path / "gpu_training").glob("*-speed.json"))
    assert len(records) == 1
    record = json.loads(records[0].read_text())
    assert record["bench"] == "gpu_training" and record["setup"]["deadline_s"] == 300.0
    assert record["command"] == "python -m bench.offline_gpu_host.gpu_training --out OUT --plan full"
    assert any(note.startswith("not measured: ") and "needs about" in note for note in record["notes"])
    assert record["summary"]["best batch (ours, softmax, mixed_bfloat16)"] == 256
    assert any(r["head"] == "BiLSTM alone" for r in record["rows"])


def test_an_unmeasured_job_is_skipped_not_waited_for(tmp_path, monkeypatch):
    gpu = tool()
    calls = []
    monkeypatch.setattr(gpu, "run_child", lambda kind, config, *a: (calls.append(kind), ([], 1, 1.0, ["boom"]))[1])
    monkeypatch.setenv("KERAS_BACKEND", "jax")
    gpu.run(args(tmp_path, "short", deadline=30.0))  # every job needs more than 30 s by the default estimates
    assert calls == []
    record = json.loads(next((tmp_path / "gpu_training").glob("*.json")).read_text())
    assert record["rows"] == [] and len(record["notes"]) >= 5
    assert all(value is None for key, value in record["summary"].items())


def test_a_failed_crf_row_is_followed_by_the_portable_scan(tmp_path, monkeypatch):
    gpu = tool()
    calls = []

    def run_child(kind, config, timeout, block_tensorflow, log):
        calls.append((kind, config.get("head"), config.get("bilstm")))
        if kind == "ours" and config["head"] == "crf" and config["bilstm"] == "auto":
            return [], 1, 10.0, ["XlaRuntimeError: cuDNN"]
        return fake_rows(kind, config), 0, 10.0, []

    monkeypatch.setattr(gpu, "run_child", run_child)
    monkeypatch.setenv("KERAS_BACKEND", "jax")
    gpu.run(args(tmp_path, "short", deadline=10000.0))
    assert calls[2:4] == [("ours", "crf", "auto"), ("ours", "crf", "scan")]
    record = json.loads(next((tmp_path / "gpu_training").glob("*.json")).read_text())
    assert any("status 1" in note and "cuDNN" in note for note in record["notes"])
    assert record["summary"]["crf bf16 / peer bf16 (>= 0.8)"] is not None  # from the scan's row


def test_children_without_tensorflow():
    """The BiLSTM alone, in a child that fails on any TensorFlow import, as on the host."""
    config = {"batch": 2, "seq": 8, "features": 16, "units": 4, "steps": 1, "precisions": ["float32"]}
    env = dict(os.environ, KERAS_BACKEND="jax", JAX_PLATFORMS="cpu", TF_CPP_MIN_LOG_LEVEL="3")
    run = subprocess.run([sys.executable, "-m", TOOL, "--child", "bilstm", json.dumps(config), "--block-tensorflow"],
                         capture_output=True, text=True, env=env, timeout=600, cwd=REPO_ROOT)
    rows = [json.loads(line[4:]) for line in run.stdout.splitlines() if line.startswith("ROW ")]
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-3000:]
    assert sorted(r["bilstm"] for r in rows) == ["keras", "scan"] and all(r["head"] == "BiLSTM alone" for r in rows)
    assert all(r["step_ms"] > 0 and r["max_difference_vs_keras"] < 1e-3 for r in rows)


@pytest.mark.parametrize("argv, backend, error", [
    (["--out", "x"], "tensorflow", "error: gpu_training needs KERAS_BACKEND=jax (it is 'tensorflow')"),
    ([], "jax", "error: --out is required"),
])
def test_bad_input_is_one_line(tmp_path, argv, backend, error):
    env = dict(os.environ, KERAS_BACKEND=backend, TF_CPP_MIN_LOG_LEVEL="3")
    run = subprocess.run([sys.executable, "-m", TOOL, *[str(tmp_path / a) if a == "x" else a for a in argv]],
                         capture_output=True, text=True, env=env, timeout=120, cwd=REPO_ROOT)
    assert run.returncode == 2 and run.stderr.strip().splitlines()[-1].endswith(error), run.stderr[-1000:]
