"""NER training end to end on the toy checkpoint: resume, precision,
MirroredStrategy, logs, and bad input at the CLI. (The CLI's evaluate /
predict / output formats on a real trained tagger are in test_demo.py, on the
demo's run.)"""

import json
import os
import re
import subprocess
import sys

import keras
import numpy as np
import pytest

from kerasbert_apps.ner.train import NerTrainSettings
from kerasbert_apps.ner.train import train
from conftest import REPO_ROOT
from conftest import conll_slice
from conftest import interrupt_then_resume
from conftest import require_shared
from conftest import seen_precision
from conftest import train_on_two_logical_cpus
from conftest import train_on_two_workers
from kerasbert.cli import main
from kerasbert.training.fit import progress_verbosity


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("ner_data")
    return conll_slice(tmp, "train.conll", 0, 300), conll_slice(tmp, "dev.conll", 300, 100)


def _toy_settings(tmp_path, data, **overrides):
    toy = require_shared("data", "models", "keras_bert_test_checkpoint")
    settings = dict(
        checkpoint=str(toy), train=str(data[0]), dev=str(data[1]), output=str(tmp_path / "run"),
        epochs=2, batch_size=8, max_length=16, max_train_examples=64, max_dev_examples=16,
        lstm_units=8, seed=7, calibrate=False,  # the score temperature is tested elsewhere
    )
    settings.update(overrides)
    return NerTrainSettings(**settings)


def test_resume_continues_an_interrupted_run_in_mixed_float16(tmp_path, data):
    """Interrupted mid-epoch, refused without --resume, continued with it; in
    mixed_float16, so the loss-scaling optimizer's state is restored too."""
    settings = _toy_settings(tmp_path, data, backup_every_steps=2, precision="mixed_float16")
    seen = seen_precision()
    try:
        history = interrupt_then_resume(train, settings, _toy_settings(tmp_path, data), epoch=1, batch=4,
                                        callbacks=[seen])
    finally:
        keras.mixed_precision.set_global_policy("float32")
    # the resumed run trained in float16 with loss scaling
    assert "float16" in seen.compute_dtypes and seen.optimizer == "LossScaleOptimizer", vars(seen)
    assert [h["epoch"] for h in history] == [1, 2]  # epoch 1 from the first run; 2 resumed mid-epoch
    assert all(np.isfinite(h["loss"]) for h in history)
    assert history[-1]["loss"] < history[0]["loss"]


def test_mixed_bfloat16_trains_and_logs_one_line_per_epoch(tmp_path, data, capsys):
    seen = seen_precision()
    try:
        metrics = train(_toy_settings(tmp_path, data, precision="mixed_bfloat16"), callbacks=[seen])
    finally:
        keras.mixed_precision.set_global_policy("float32")
    assert "bfloat16" in seen.compute_dtypes and seen.optimizer != "LossScaleOptimizer", vars(seen)
    # Standard output is not a terminal here (as in `> train.log`): one line
    # per epoch, no progress bar updates.
    out = capsys.readouterr().out
    assert "\x1b" not in out and "\b" not in out and "\r" not in out
    assert len([line for line in out.splitlines() if re.match(r"\d+/\d+ - .*loss: ", line)]) == 2
    history = [json.loads(line) for line in (tmp_path / "run" / "history.jsonl").read_text().splitlines()]
    assert all(np.isfinite(h["loss"]) for h in history)
    assert history[-1]["loss"] < history[0]["loss"]
    assert metrics["best_epoch"] in (1, 2)


@pytest.fixture(scope="module")
def one_device(tmp_path_factory, data):
    """The history of the run that MirroredStrategy and MultiWorkerMirroredStrategy
    are compared with: this process, one device, the same global batch."""
    tmp = tmp_path_factory.mktemp("one_device")
    train(_toy_settings(tmp, data, output=str(tmp / "default"), dropout=0.0))
    return [json.loads(line) for line in (tmp / "default" / "history.jsonl").read_text().splitlines()]


def _assert_same_losses(one, other):
    assert len(one) == len(other) == 2
    # Not bit-equal: a batch that does not split evenly over the replicas is
    # averaged as a mean of per-replica means, and reductions run in another
    # order. Measured: 0.2% apart per epoch; a wrong loss scaling is 100% off.
    for a, b in zip(one, other):
        assert b["loss"] == pytest.approx(a["loss"], rel=1e-2)


def test_mirrored_on_two_logical_devices_agrees_with_one_device(tmp_path, data, one_device):
    """The same run in a process with two logical CPUs under MirroredStrategy
    and in this process on one device."""
    settings = _toy_settings(tmp_path, data, strategy="mirrored", output=str(tmp_path / "mirrored"), dropout=0.0)
    _assert_same_losses(one_device, train_on_two_logical_cpus(settings, "kerasbert_apps.ner.train"))


def test_multiworker_two_processes_agree_with_one_device(tmp_path, data, one_device):
    """Two worker processes on 127.0.0.1 (TF_CONFIG), each with half of every
    global batch of 8: the same losses as one device with batches of 8; the
    chief writes the run, the other worker nothing in its OUTPUT."""
    settings = _toy_settings(tmp_path, data, strategy="multiworker", output=str(tmp_path / "chief"), dropout=0.0)
    history, (chief, worker) = train_on_two_workers(settings, "kerasbert_apps.ner.train", tmp_path / "worker")
    _assert_same_losses(one_device, history)
    assert "MultiWorkerMirroredStrategy: 2 workers, this is worker 0 (the chief" in chief
    assert "this is worker 1 (writes nothing in OUTPUT)" in worker
    assert not (tmp_path / "worker").exists()
    assert {"metrics.json", "settings.json", "model"} <= {p.name for p in (tmp_path / "chief").iterdir()}
    assert not (tmp_path / "chief" / "backup").exists()  # removed by the chief at the end
    # both workers stopped at the same epoch with the same best dev scores
    best = [re.findall(r"best dev scores \(epoch (\d+)", text) for text in (chief, worker)]
    assert best[0] == best[1] and len(best[0]) == 1


@pytest.mark.parametrize(
    "content, problem",
    [
        ("EU B-ORG\nrejects\n", "line 2"),  # wrong column count
        ("EU X-ORG\n", "line 1"),  # unknown tag prefix
        ("", "no examples"),  # empty file
    ],
)
def test_bad_training_data_is_a_clear_error(tmp_path, data, capsys, content, problem):
    bad = tmp_path / "bad.conll"
    bad.write_text(content)
    status = main(["ner", "train", "--checkpoint", "starter", "--train", str(bad), "--dev", str(data[1]),
                   "--output", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert status == 2
    assert "bad.conll" in err and problem in err
    assert "Traceback" not in err


def test_bad_jsonl_and_non_utf8_name_file_and_line(tmp_path, data, capsys):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"text": "ok", "label": []}\n{"text": oops}\n')
    assert main(["ner", "train", "--checkpoint", "x", "--train", str(bad), "--dev", str(data[1]), "--output", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert "bad.jsonl, line 2" in err
    binary = tmp_path / "latin1.conll"
    binary.write_bytes(b"EU B-ORG\nna\xefve O\n")
    assert main(["ner", "train", "--checkpoint", "x", "--train", str(binary), "--dev", str(data[1]), "--output", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert "latin1.conll, line 2" in err and "UTF-8" in err


def test_no_traceback_in_a_real_process(tmp_path):
    bad = tmp_path / "bad.conll"
    bad.write_text("EU B-ORG\nrejects\n")
    run = subprocess.run([sys.executable, "-m", "kerasbert.cli", "ner", "train", "--checkpoint", "x", "--train", str(bad),
                          "--dev", str(bad), "--output", str(tmp_path / "o")],
                         capture_output=True, text=True, env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"), cwd=REPO_ROOT)
    assert run.returncode == 2
    assert "bad.conll, line 2" in run.stderr and "Traceback" not in run.stderr


def test_training_plot_without_matplotlib_says_how_to_get_it(tmp_path, monkeypatch, capsys):
    from kerasbert.training.history import plot_history

    (tmp_path / "history.jsonl").write_text('{"epoch": 1, "loss": 2.0, "val_f1": 0.5}\n')
    for name in ("matplotlib", "matplotlib.figure", "matplotlib.backends", "matplotlib.backends.backend_agg"):
        monkeypatch.setitem(sys.modules, name, None)  # import -> ImportError, even if imported before
    assert plot_history(tmp_path / "history.jsonl", tmp_path / "history.png") is None
    assert "pip install 'kerasbert[plots]'" in capsys.readouterr().out
    assert not (tmp_path / "history.png").exists()


def test_progress_bar_only_on_a_terminal():
    class Stream:
        def __init__(self, tty):
            self.tty = tty

        def isatty(self):
            return self.tty

    assert progress_verbosity(Stream(True)) == 1
    assert progress_verbosity(Stream(False)) == 2
