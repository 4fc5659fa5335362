"""bench/gpu_training.py on the CPU: what a run on a GPU relies on, checked without a GPU.

* our rows (a child process on JAX with TensorFlow made unimportable: the bench says TensorFlow is
  not needed): the library's model at each batch in one process, one trace of the step per batch,
  the BiLSTM's implementation named, the FLOP count by its stated formula, no MFU for a device
  without a known peak;
* the peer's rows (PyTorch, transformers' BertForTokenClassification): bf16 autocast and float32,
  the same FLOP formula over its own weights;
* a run: the jobs the options name, in order; the record's ratios against the peer and its summary;
  docs/gen_bench.py renders it;
* MFU against the device's peak, by name;
* bad input is a one-line error.
"""

import importlib
import importlib.util
import json
import os
import subprocess
import sys

import pytest

from conftest import REPO_ROOT

#: Runs ``python -m bench.gpu_training ARGS`` with ``import tensorflow`` failing.
WITHOUT_TENSORFLOW = ("import runpy, sys; sys.modules['tensorflow'] = None; sys.argv[0] = 'gpu_training'; "
                      "runpy.run_module('bench.gpu_training', run_name='__main__')")


def bench():
    return importlib.import_module("bench.gpu_training")


def jax_env():
    return dict(os.environ, KERAS_BACKEND="jax", JAX_PLATFORMS="cpu", TF_CPP_MIN_LOG_LEVEL="3")


def child_rows(kind, config):
    run = subprocess.run([sys.executable, "-c", WITHOUT_TENSORFLOW, "--child", kind, json.dumps(config)],
                         capture_output=True, text=True, env=jax_env(), timeout=600, cwd=REPO_ROOT)
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
                 "batch": b, "tokens_per_s": SPEED.get(b, 100.0) * (0.9 if config["head"] == "crf" else 1.0),
                 "seconds": 10.0, "mfu": 0.4, "peak_bytes_in_use": 2**30 + memory_per_row * b,
                 "bytes_limit": 2**30 + 1000 * memory_per_row} for b in config["batches"]]
    if kind == "peer":
        return [{"system": "transformers (PyTorch)", "head": "softmax", "precision": p, "batch": b,
                 "tokens_per_s": 0.9 * SPEED.get(b, 100.0), "seconds": 5.0, "note": "torch.compile" if c else ""}
                for p, b, c in config["runs"]]
    return [{"system": "kerasbert (JAX)", "head": "BiLSTM alone", "bilstm": "keras", "precision": "mixed_bfloat16",
             "batch": config["batch"], "step_ms": 3.0}]


def test_a_run_measures_what_its_options_name(tmp_path, monkeypatch):
    gpu = bench()
    calls = []

    def run_child(kind, config, log, launcher=None):
        calls.append((kind, config))
        return fake_rows(kind, config), 0, 1.0, []

    monkeypatch.setattr(gpu, "run_child", run_child)
    monkeypatch.setenv("KERAS_BACKEND", "jax")
    path = gpu.main(["--heads", "softmax,crf-no-bilstm,crf", "--precisions", "mixed_bfloat16,float32",
                     "--batches", "256,128", "--peer-compile", "--out", str(tmp_path)])
    jobs = [(k, c.get("head"), c.get("precision"), c.get("batches") or c.get("runs")) for k, c in calls]
    assert jobs[:3] == [("ours", "softmax", "mixed_bfloat16", [128, 256]),
                        ("ours", "crf, no BiLSTM", "mixed_bfloat16", [128, 256]),
                        ("ours", "crf", "mixed_bfloat16", [128, 256])]
    assert [j[2] for j in jobs[3:6]] == ["float32"] * 3 and calls[0][1]["encoder"] == "bert-base"
    assert jobs[6] == ("peer", None, None, [("bf16 autocast", 128, False), ("bf16 autocast", 256, False),
                                            ("float32 (TF32)", 128, False), ("float32 (TF32)", 256, False),
                                            ("bf16 autocast", 128, True), ("bf16 autocast", 256, True)])
    assert len(jobs) == 7 and path.parent == tmp_path / "gpu_training" and path.name.endswith("-speed.json")
    record = json.loads(path.read_text())
    assert record["bench"] == "gpu_training" and record["columns"][0] == "system"
    assert record["setup"]["heads"] == ["softmax", "crf, no BiLSTM", "crf"] and record["setup"]["batches"] == [128, 256]
    summary = record["summary"]
    assert summary["best batch (ours, softmax, mixed_bfloat16)"] == 256
    assert summary["softmax bf16 / peer bf16 (>= 1.0)"] == pytest.approx(1 / 0.9, abs=1e-3)
    assert summary["crf bf16 / peer bf16 (>= 0.8)"] == pytest.approx(1.0, abs=1e-3)
    assert summary["crf (BiLSTM) / crf, no BiLSTM, bf16 (>= 0.85)"] == pytest.approx(0.9)
    assert summary["softmax bf16 / softmax float32 (>= 2)"] == pytest.approx(1.0)
    ours_256 = next(r for r in record["rows"] if r["system"] == "kerasbert (JAX)" and r["head"] == "softmax"
                    and r["batch"] == 256 and r["precision"] == "mixed_bfloat16")
    assert ours_256["vs_peer"] == pytest.approx(1 / 0.9, abs=1e-3)  # against bf16 autocast, not torch.compile
    gen = _gen_bench()
    text = gen.render(results=tmp_path, bench_dir=REPO_ROOT / "bench", only=["gpu_training"])
    assert "| system | head | bilstm | precision | batch | tokens_per_s | vs_peer |" in text
    assert "| softmax bf16 / peer bf16 (&gt;= 1.0) | 1.111 |" in text  # cells are HTML-escaped


def _gen_bench():
    spec = importlib.util.spec_from_file_location("gen_bench_for_gpu_training", REPO_ROOT / "docs" / "gen_bench.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_a_failed_job_is_named_in_the_record(tmp_path, monkeypatch):
    gpu = bench()
    monkeypatch.setattr(gpu, "run_child", lambda kind, config, log, launcher=None: (
        ([], 1, 1.0, ["XlaRuntimeError: cuDNN"]) if config.get("head") == "crf" else (fake_rows(kind, config), 0, 1.0, [])))
    monkeypatch.setenv("KERAS_BACKEND", "jax")
    record = json.loads(gpu.main(["--heads", "softmax,crf", "--precisions", "mixed_bfloat16", "--batches", "8",
                                  "--no-peer", "--tiny", "--out", str(tmp_path)]).read_text())
    assert [r["head"] for r in record["rows"]] == ["softmax"] and record["setup"]["encoder"] == {
        "tiny": gpu.ENCODERS["tiny"]}
    assert any(note.startswith("not measured: ours crf") and "status 1" in note and "cuDNN" in note
               for note in record["notes"])
    assert [j["status"] for j in record["jobs"]] == [0, 1]


def test_mfu_by_device_name():
    gpu = bench()
    flops = 989.4e12 * 0.5
    assert gpu.mfu_fields(flops, 1.0, "NVIDIA H100 80GB HBM3", "mixed_bfloat16")["mfu"] == 0.5
    assert gpu.mfu_fields(flops, 1.0, "NVIDIA H200", "bf16 autocast")["peak_name"] == "H200 bf16 dense"
    assert gpu.mfu_fields(flops, 1.0, "NVIDIA H100 PCIe", "float32 (TF32)")["peak_tflops"] == 378.0
    assert gpu.mfu_fields(flops, 1.0, "NVIDIA H200 NVL", "float32")["peak_name"] == "H200 NVL tf32 dense"
    assert gpu.mfu_fields(flops, 1.0, "Some GPU", "float32")["mfu"] is None


@pytest.mark.parametrize("argv, env, error", [
    ([], {"KERAS_BACKEND": "tensorflow"}, "error: gpu_training needs KERAS_BACKEND=jax (it is 'tensorflow')"),
    (["--heads", "softmax,bilstm"], {}, "error: unknown head or precision: bilstm"),
    (["--tiny"], {}, "error: --tiny is a smoke test, not a result: give --out, the folder for its record"),
])
def test_bad_input_is_one_line(argv, env, error):
    run = subprocess.run([sys.executable, "-m", "bench.gpu_training", *argv], capture_output=True, text=True,
                         env=dict(jax_env(), **env), timeout=120, cwd=REPO_ROOT)
    assert run.returncode == 2 and run.stderr.strip().splitlines()[-1] == error
