"""bench/gpu_training.py on the CPU: what one run on a GPU relies on, checked without a GPU.

* our rows (a child process on JAX with TensorFlow made unimportable, as on a
  host without it): the library's model at each batch in one process, one
  trace of the step per batch, the BiLSTM's implementation named, the FLOP
  count by its stated formula, no MFU for a device without a known peak;
* the peer's rows (PyTorch, transformers' BertForTokenClassification): bf16
  autocast and float32, the same FLOP formula over its own weights;
* the parent's plan: the target comparisons first, the CRF rows at the best
  batch measured, the largest batch from the memory measured, a job the
  deadline cannot hold skipped and named in the record; the record's ratios
  and targets; docs/gen_bench.py renders it;
* MFU against the device's peak, by name;
* bad input is a one-line error.
"""

import importlib.util
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "bench" / "gpu_training.py"


def load(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def bench():
    return load(BENCH, "gpu_training_bench")


def jax_env():
    return dict(os.environ, KERAS_BACKEND="jax", JAX_PLATFORMS="cpu", TF_CPP_MIN_LOG_LEVEL="3")


def child_rows(kind, config):
    run = subprocess.run([sys.executable, str(BENCH), "child", kind, json.dumps(config), "--block-tensorflow"],
                         capture_output=True, text=True, env=jax_env(), timeout=600)
    rows = [json.loads(line[4:]) for line in run.stdout.splitlines() if line.startswith("ROW ")]
    assert run.returncode == 0 and rows, run.stdout[-2000:] + run.stderr[-3000:]
    return rows


def test_our_rows_on_jax_without_tensorflow():
    config = {"encoder": "tiny", "seq": 16, "steps": 1, "warmup": 1, "head": "crf", "precision": "mixed_bfloat16",
              "bilstm": "auto", "batches": [2, 4]}
    rows = child_rows("ours", config)
    assert [r["batch"] for r in rows] == [2, 4]
    for row in rows:
        assert row["system"] == "kerasbert (JAX)" and row["head"] == "crf" and row["bilstm"] == "scan"  # auto on a CPU
        assert row["traces"] == 1 and row["optimizer"] == "GroupedAdamW"
        tokens = row["batch"] * 16
        assert row["tokens_per_s"] > 0 and row["jitted_step_ms"] > 0
        assert abs(row["tokens_per_s"] - tokens / row["step_ms"] * 1000) < 0.01 * row["tokens_per_s"]
        assert row["model_flops_per_step"] == 6 * row["non_embedding_weights"] * tokens + 12 * 2 * 64 * 16 * tokens
        assert row["platform"] == "cpu" and row["mfu"] is None and "MFU omitted" in row["mfu_note"]
    # N: the encoder's layers and the head (BiLSTM of 128 units a direction over H=64, emissions, CRF)
    bilstm = 2 * (4 * 128 * (64 + 128 + 1))
    assert bilstm < rows[0]["non_embedding_weights"] < bilstm + 2 * (12 * 64 * 64 + 2000 * 64)


def test_peer_rows_with_pytorch():
    config = {"encoder": "tiny", "seq": 16, "steps": 2, "warmup": 1,
              "runs": [["bf16 autocast", 2, False], ["float32 (TF32)", 4, False]]}
    rows = child_rows("peer", config)
    assert [(r["precision"], r["batch"]) for r in rows] == [("bf16 autocast", 2), ("float32 (TF32)", 4)]
    for row in rows:
        assert row["system"] == "transformers (PyTorch)" and row["head"] == "softmax"
        tokens = row["batch"] * 16
        assert row["tokens_per_s"] > 0 and row["final_loss"] > 0
        assert row["model_flops_per_step"] == 6 * row["non_embedding_weights"] * tokens + 12 * 2 * 64 * 16 * tokens
        # the encoder's two layers and the classifier, without the embedding tables
        assert 2 * 12 * 64 * 64 < row["non_embedding_weights"] < 2 * (12 * 64 * 64 + 2000 * 64)
        assert row["mfu"] is None


SPEED = {32: 300.0, 128: 700.0, 256: 800.0, 512: 780.0}


def fake_rows(kind, config, memory_per_row=2**20):
    """What a child would print, with made-up speeds (the best at 256; the peer's 0.9 of ours)."""
    if kind == "ours":
        return [{"system": "kerasbert (JAX)", "head": config["head"], "precision": config["precision"],
                 "bilstm": {"auto": "scan"}.get(config["bilstm"], config["bilstm"]) if config["head"] == "crf" else "",
                 "batch": b, "tokens_per_s": SPEED.get(b, 100.0), "seconds": 10.0, "mfu": 0.4,
                 "peak_bytes_in_use": 2**30 + memory_per_row * b, "bytes_limit": 2**30 + 1000 * memory_per_row}
                for b in config["batches"]]
    if kind == "peer":
        return [{"system": "transformers (PyTorch)", "head": "softmax", "precision": p, "batch": b,
                 "tokens_per_s": 0.9 * SPEED.get(b, 100.0), "seconds": 5.0, "note": "torch.compile" if c else ""}
                for p, b, c in config["runs"]]
    return [{"system": "kerasbert (JAX)", "head": "BiLSTM alone", "bilstm": "keras", "precision": "mixed_bfloat16",
             "batch": config["batch"], "step_ms": 3.0}]


def test_at_batch_plan_compares_everything_at_one_batch(tmp_path, monkeypatch):
    """``--plan at-batch --batch N``: our softmax head at 256 and N, the peer beside it (bf16, float32),
    the CRF heads and float32 at N, then the CRF heads at 32."""
    gpu = bench()
    calls = []

    def run_child(kind, config, timeout, block_tensorflow, log):
        calls.append((kind, config))
        return fake_rows(kind, config), 0, 1.0, []

    monkeypatch.setattr(gpu, "run_child", run_child)
    monkeypatch.setenv("KERAS_BACKEND", "jax")
    args = type("Args", (), {"out": str(tmp_path), "plan": "at-batch", "batch": 512, "deadline": 1e6, "tiny": False,
                             "block_tensorflow": False})()
    gpu.run(args)
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
    gpu = bench()
    calls, clock = [], [0.0]

    def run_child(kind, config, timeout, block_tensorflow, log):
        calls.append((kind, config))
        clock[0] += 30.0
        return fake_rows(kind, config), 0, 30.0, []

    monkeypatch.setattr(gpu, "run_child", run_child)
    monkeypatch.setattr(gpu.time, "perf_counter", lambda: clock[0])
    monkeypatch.setenv("KERAS_BACKEND", "jax")
    args = type("Args", (), {"out": str(tmp_path), "plan": "full", "deadline": 300.0, "tiny": False,
                             "block_tensorflow": False})()
    gpu.run(args)
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
    assert record["bench"] == "gpu_training" and record["columns"][0] == "system"
    assert gpu.recorded_command(["bench/gpu_training.py", "run", "--out", str(tmp_path), "--plan", "short"]) == \
        "gpu_training.py run --out OUT --plan short"
    assert any(note.startswith("not measured: ") and "needs about" in note for note in record["notes"])
    summary = record["summary"]
    assert summary["best batch (ours, softmax, mixed_bfloat16)"] == 256
    assert summary["softmax bf16 / peer bf16 (>= 1.0)"] == pytest.approx(1 / 0.9, abs=1e-3)
    assert summary["crf (BiLSTM) / crf, no BiLSTM, bf16 (>= 0.85)"] == pytest.approx(1.0)
    ours_256 = next(r for r in record["rows"] if r["system"] == "kerasbert (JAX)" and r["head"] == "softmax"
                    and r["batch"] == 256 and r["precision"] == "mixed_bfloat16")
    assert ours_256["vs_peer"] == pytest.approx(1 / 0.9, abs=1e-3)

    gen = load(ROOT / "docs" / "gen_bench.py", "gen_bench_for_gpu_training")
    text = gen.render(results=tmp_path, bench_dir=ROOT / "bench", only=["gpu_training"])
    assert "| system | head | bilstm | precision | batch | tokens_per_s | vs_peer |" in text
    assert "| softmax bf16 / peer bf16 (&gt;= 1.0) | 1.111 |" in text  # cells are HTML-escaped
    assert "- not measured: " in text


def test_an_unmeasured_job_is_skipped_not_waited_for(tmp_path, monkeypatch):
    gpu = bench()
    calls = []
    monkeypatch.setattr(gpu, "run_child", lambda kind, config, *a: (calls.append(kind), ([], 1, 1.0, ["boom"]))[1])
    monkeypatch.setenv("KERAS_BACKEND", "jax")
    args = type("Args", (), {"out": str(tmp_path), "plan": "short", "deadline": 30.0, "tiny": False,
                             "block_tensorflow": False})()
    gpu.run(args)  # every job needs more than 30 s by the default estimates: nothing runs
    assert calls == []
    record = json.loads(next((tmp_path / "gpu_training").glob("*.json")).read_text())
    assert record["rows"] == [] and len(record["notes"]) >= 5
    assert all(value is None for key, value in record["summary"].items())


def test_mfu_by_device_name():
    gpu = bench()
    flops = 989.4e12 * 0.5
    assert gpu.mfu_fields(flops, 1.0, "NVIDIA H100 80GB HBM3", "mixed_bfloat16")["mfu"] == 0.5
    assert gpu.mfu_fields(flops, 1.0, "NVIDIA H200", "bf16 autocast")["peak_name"] == "H200 bf16 dense"
    assert gpu.mfu_fields(flops, 1.0, "NVIDIA H100 PCIe", "float32 (TF32)")["peak_tflops"] == 378.0
    assert gpu.mfu_fields(flops, 1.0, "NVIDIA H200 NVL", "float32")["peak_name"] == "H200 NVL tf32 dense"
    assert gpu.mfu_fields(flops, 1.0, "Some GPU", "float32")["mfu"] is None


def test_bad_input_is_one_line():
    env = dict(jax_env(), KERAS_BACKEND="tensorflow")
    out = str(Path(tempfile.gettempdir()) / "x")
    run = subprocess.run([sys.executable, str(BENCH), "run", "--out", out], capture_output=True, text=True, env=env,
                         timeout=120)
    assert run.returncode == 2
    assert run.stderr.strip().splitlines()[-1] == "error: run needs KERAS_BACKEND=jax (it is 'tensorflow')"


def test_a_failed_crf_row_is_followed_by_the_portable_scan(tmp_path, monkeypatch):
    gpu = bench()
    calls = []

    def run_child(kind, config, timeout, block_tensorflow, log):
        calls.append((kind, config.get("head"), config.get("bilstm")))
        if kind == "ours" and config["head"] == "crf" and config["bilstm"] == "auto":
            return [], 1, 10.0, ["XlaRuntimeError: cuDNN"]
        return fake_rows(kind, config), 0, 10.0, []

    monkeypatch.setattr(gpu, "run_child", run_child)
    monkeypatch.setenv("KERAS_BACKEND", "jax")
    args = type("Args", (), {"out": str(tmp_path), "plan": "short", "deadline": 10000.0, "tiny": False,
                             "block_tensorflow": False})()
    gpu.run(args)
    assert calls[2:4] == [("ours", "crf", "auto"), ("ours", "crf", "scan")]
    record = json.loads(next((tmp_path / "gpu_training").glob("*.json")).read_text())
    assert any("status 1" in note and "cuDNN" in note for note in record["notes"])
    assert record["summary"]["crf bf16 / peer bf16 (>= 0.8)"] is not None  # from the scan's row
