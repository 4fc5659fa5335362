"""Nothing a user has is lost to a run: a run writes only into a folder that
is new, empty or its own (marked by its run.json), holds it while it runs,
and an interrupted run -- Ctrl-C, SIGTERM, a failed --resume -- keeps every
epoch and every file. Exports stopped by SIGTERM leave nothing behind.

Everything trains the toy checkpoint on a few sentences (seconds); the
signal tests run the CLI in a fresh process and send the signal when a file
it writes shows that it got to the point under test."""

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import REPO_ROOT
from conftest import conll_slice
from conftest import require_shared
from kerasbert.cli import main


def toy_checkpoint():
    return require_shared("data", "models", "keras_bert_test_checkpoint")


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("run_folders_data")
    return conll_slice(tmp, "train.conll", 0, 24), conll_slice(tmp, "dev.conll", 24, 8)


def train_args(data, output, *more, epochs=2):
    return ["ner", "train", "--checkpoint", toy_checkpoint(), "--train", data[0], "--dev", data[1],
            "--output", output, "--epochs", str(epochs), "--batch-size", "8", "--max-length", "16",
            "--lstm-units", "4", "--no-calibrate", *more]


def cli(capsys, *argv):
    """``kerasbert ARGV`` in this process: ``(status, the last line of standard error, all of it)``."""
    capsys.readouterr()
    status = main([str(a) for a in argv])
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.strip()]
    return status, (lines[-1] if lines else ""), err


def snapshot(folder):
    """Every file under ``folder`` (hidden ones too) with its bytes."""
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(Path(folder).rglob("*")) if p.is_file()}


def epochs_of(run):
    return [json.loads(line)["epoch"] for line in (Path(run) / "history.jsonl").read_text().splitlines()]


@pytest.fixture(scope="module")
def finished(tmp_path_factory, data):
    """A finished `ner train` run (one epoch)."""
    run = tmp_path_factory.mktemp("finished") / "run"
    assert main([str(a) for a in train_args(data, run, epochs=1)]) == 0
    return run


# --- a run owns its output folder -------------------------------------------------------


def test_train_never_writes_into_a_folder_that_is_not_a_runs(tmp_path, data, capsys):
    """Someone's files, or a finished run of an earlier kerasbert without
    history.jsonl: refused in one line naming what is there, with or without
    --overwrite; not a byte changed (train used to replace their
    settings.json, metrics.json and model/ and exit 0)."""
    theirs = tmp_path / "theirs"
    (theirs / "model").mkdir(parents=True)
    (theirs / "model" / "weights.bin").write_bytes(b"\x00" * 100)
    (theirs / "notes.txt").write_text("mine\n")
    (theirs / "settings.json").write_text('{"mine": true}\n')
    (theirs / "metrics.json").write_text('{"f1": 0.9}\n')
    earlier = tmp_path / "earlier"  # a finished run as an earlier kerasbert left it, history.jsonl deleted
    (earlier / "model").mkdir(parents=True)
    (earlier / "model" / "model.keras").write_bytes(b"PK\x05\x06" + b"\x00" * 18)
    (earlier / "settings.json").write_text(json.dumps({"output": str(earlier), "resume": False, "epochs": 3}))
    (earlier / "metrics.json").write_text('{"best_epoch": 2}\n')
    before = {folder: snapshot(folder) for folder in (theirs, earlier)}
    for more in ((), ("--overwrite",)):
        status, last, err = cli(capsys, *train_args(data, theirs, *more))
        assert status == 2 and "Traceback" not in err, err
        assert last == (f"kerasbert: error: {theirs}: not empty and not a kerasbert run folder (it holds "
                        "metrics.json, model/, notes.txt and 1 more); a run writes only into a new or empty folder, "
                        "or into its own: choose another --output")
        status, last, err = cli(capsys, *train_args(data, earlier, *more))
        assert status == 2 and "Traceback" not in err, err
        assert last == (f"kerasbert: error: {earlier} already holds a training run (written by an earlier "
                        "kerasbert, without run.json); choose another --output (--overwrite replaces only a folder "
                        "of this kerasbert's runs)")
        assert {folder: snapshot(folder) for folder in (theirs, earlier)} == before


def test_a_finished_run_is_replaced_only_with_overwrite_and_only_by_its_own_command(finished, tmp_path, data,
                                                                                    capsys):
    run = tmp_path / "run"
    shutil.copytree(finished, run)
    marker = json.loads((run / "run.json").read_text())
    assert marker["command"] == "ner train" and marker["finished"] and marker["kerasbert"]
    before = snapshot(run)
    status, last, _ = cli(capsys, *train_args(data, run))
    assert status == 2 and last.startswith(f"kerasbert: error: {run} already holds a `kerasbert ner train` run "
                                           f"(started {marker['started']}, 1 epoch in history.jsonl); pass "
                                           "--overwrite to replace it")
    status, last, _ = cli(capsys, "pretrain", "--checkpoint", toy_checkpoint(), "--text", data[1], "--output", run,
                          "--max-length", "16", "--held-out", "1", "--overwrite")
    assert status == 2 and last == (f"kerasbert: error: {run}: holds a `kerasbert ner train` run, not a "
                                    "`kerasbert pretrain` one; choose another --output")
    assert snapshot(run) == before
    (run / "model" / "stale.txt").write_text("from the old run")
    status, _, err = cli(capsys, *train_args(data, run, "--overwrite", epochs=1))
    assert status == 0, err
    assert epochs_of(run) == [1] and not (run / "model" / "stale.txt").exists()
    assert json.loads((run / "settings.json").read_text())["overwrite"] is True


# --- two runs, one folder; SIGTERM in training ---------------------------------------------


def _start(argv, **kwargs):
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    return subprocess.Popen([sys.executable, "-m", "kerasbert.cli", *map(str, argv)], cwd=REPO_ROOT, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, **kwargs)


def _wait_for(condition, process, seconds=120):
    deadline = time.monotonic() + seconds
    while not condition():
        if process.poll() is not None:
            pytest.fail(f"the command ended (status {process.returncode}) first:\n{process.stderr.read()[-3000:]}")
        if time.monotonic() > deadline:
            process.kill()
            pytest.fail("the command did not get there in time")
        time.sleep(0.05)


def _terminate_when(condition, process):
    """SIGTERM to ``process`` once ``condition()`` holds; it must end as
    Ctrl-C ends a command: one line, exit status 143."""
    _wait_for(condition, process)
    process.send_signal(signal.SIGTERM)
    try:
        err = process.communicate(timeout=60)[1]
    except subprocess.TimeoutExpired:
        process.kill()
        pytest.fail(f"still running a minute after SIGTERM:\n{process.communicate()[1][-3000:]}")
    assert process.returncode == 143, err[-3000:]
    assert "Traceback" not in err and err.strip().splitlines()[-1] == "kerasbert: terminated (SIGTERM)", err[-3000:]


def test_a_second_run_into_a_running_runs_folder_is_refused_and_sigterm_keeps_the_run_resumable(tmp_path, data,
                                                                                                capsys):
    """A `ner train` in its own process holds its folder: a second train into
    it is refused at its start (both used to exit 0 into one mixed folder).
    SIGTERM stops the first like Ctrl-C: one line, exit status 143, its
    backup kept; the kernel released its lock, so --resume continues it at
    once, every epoch in history.jsonl once."""
    run = tmp_path / "run"
    first = _start(train_args(data, run, epochs=200))
    try:
        _wait_for(lambda: (run / "settings.json").exists(), first)
        status, last, err = cli(capsys, *train_args(data, run, "--resume", epochs=1))
        assert status == 2 and "Traceback" not in err, err
        assert re.fullmatch(rf"kerasbert: error: {re.escape(str(run))}: another run is writing into this folder "
                            r"\(kerasbert ner train, process \d+ on .+, started .+\); wait for it to end, or choose "
                            r"another --output", last), last
        _terminate_when(lambda: (run / "history.jsonl").exists(), first)
    finally:
        first.kill()
    backup = json.loads((run / "backup" / "training_metadata.json").read_text())["epoch"]
    assert not list(run.rglob(".*"))  # no staging folder or temporary file left
    status, _, err = cli(capsys, *train_args(data, run, "--resume", epochs=backup))  # the backup's epochs: no more
    assert status == 0, err
    assert epochs_of(run) == list(range(1, backup + 1))
    assert not (run / "backup").exists() and json.loads((run / "run.json").read_text())["finished"]


@pytest.mark.parametrize("signum, status, line", [(signal.SIGTERM, 143, "kerasbert: terminated (SIGTERM)"),
                                                   (signal.SIGINT, 130, "kerasbert: interrupted")])
def test_a_stop_that_lands_in_a_finaliser_still_stops_the_command(monkeypatch, capsys, signum, status, line):
    """A signal's handler runs in whatever Python code the main thread is
    in; in a finaliser (``__del__``; TensorFlow's objects have them) Python
    drops the exception it raises. The command used to go on to its end (a
    SIGTERM, ignored after its first delivery, could not stop it at all)."""
    import kerasbert.cli

    went_on = []

    def command(args):
        class Finaliser:
            def __del__(self):
                os.kill(os.getpid(), signum)
                sum(range(100_000))  # the handler runs here

        Finaliser()
        for _ in range(500):  # up to 5 s: the stop comes again from a timer thread, late on a loaded machine
            time.sleep(0.01)
        went_on.append(True)
        return 0

    monkeypatch.setattr(kerasbert.cli, "cmd_inspect", command)
    capsys.readouterr()
    assert main(["inspect", "anything"]) == status
    assert not went_on
    assert capsys.readouterr().err.strip().splitlines()[-1] == line
    assert signal.getsignal(signal.SIGTERM) is not kerasbert.cli._terminate  # put back


# --- an interrupted run keeps every epoch ---------------------------------------------------


def _settings(data, output, **more):
    from kerasbert_apps.ner.train import NerTrainSettings

    return NerTrainSettings(**dict(checkpoint=str(toy_checkpoint()), train=str(data[0]), dev=str(data[1]),
                                   output=str(output), epochs=2, batch_size=8, max_length=16, lstm_units=4,
                                   calibrate=False, seed=3, **more))


def test_a_run_interrupted_while_an_epoch_is_scored_resumes_with_every_epoch_once(tmp_path, data, monkeypatch):
    """Interrupted while epoch 2 is scored on dev (its backup is written,
    its history line is not): the resume scores epoch 2 from the backup
    before it trains on (it used to go on with epoch 3: history.jsonl held
    epochs 1 and 3, and epoch 2, maybe the best, was lost; here epoch 2 is
    the last, so it ended with epoch 1 alone); the best model and its
    dev_scores.json are the history's best epoch."""
    from kerasbert_apps.ner.train import NER
    from kerasbert_apps.ner.train import train

    run = tmp_path / "run"
    real_score, calls = NER.score, []

    def score_interrupted_at_the_second_epoch(*args):
        calls.append(1)
        if len(calls) == 2:
            raise KeyboardInterrupt("interrupted while epoch 2 is scored")
        return real_score(*args)

    monkeypatch.setattr(NER, "score", score_interrupted_at_the_second_epoch)
    with pytest.raises(KeyboardInterrupt):
        train(_settings(data, run))
    monkeypatch.undo()
    assert epochs_of(run) == [1]
    train(_settings(data, run, resume=True))
    history = [json.loads(line) for line in (run / "history.jsonl").read_text().splitlines()]
    assert [h["epoch"] for h in history] == [1, 2]
    assert all("loss" in h and "val_f1" in h for h in history)  # epoch 2's training loss kept by its backup
    best = max(history, key=lambda h: h["val_f1"])
    assert json.loads((run / "model" / "dev_scores.json").read_text())["f1"] == pytest.approx(best["val_f1"])


def test_a_run_backed_up_by_steps_and_interrupted_twice_resumes_where_it_was(tmp_path):
    """With a backup every few steps, a resumed run interrupted again before
    its first epoch ends resumes at that epoch once more (its step backup
    used to say epoch 0: the third start trained the run over from its first
    epoch)."""
    import keras
    import numpy as np

    from kerasbert.training.callbacks import Backup

    x, y = np.random.default_rng(0).normal(size=(32, 4)), np.zeros((32, 1))

    class Run(keras.callbacks.Callback):
        def __init__(self, stop_at=None):
            super().__init__()
            self.stop_at, self.epochs = stop_at, []

        def on_epoch_begin(self, epoch, logs=None):
            self.epochs.append(epoch)

        def on_train_batch_end(self, batch, logs=None):
            if (self.epochs[-1], batch) == self.stop_at:
                raise KeyboardInterrupt("simulated interruption")

    def fit(stop_at=None):
        model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(1)])
        model.compile(optimizer="sgd", loss="mse")
        run = Run(stop_at)
        try:
            model.fit(x, y, batch_size=4, epochs=3, verbose=0, callbacks=[Backup(str(tmp_path / "backup"), save_freq=2),
                                                                         run])
        except KeyboardInterrupt:
            pass
        return run.epochs

    assert fit(stop_at=(1, 4)) == [0, 1]
    assert fit(stop_at=(1, 4)) == [1]  # resumed at epoch 1, interrupted in it again after a step backup
    assert fit() == [1, 2]


def test_a_failed_resume_changes_nothing_and_says_why_in_one_line(tmp_path, data, capsys):
    """A --resume whose data give another label set: one line, no
    traceback, no weight arrays (it used to print them, after rewriting the
    run's settings.json), the folder unchanged. The same folder, as an
    earlier kerasbert wrote it (no run.json), resumes with the right data."""
    import keras

    from kerasbert_apps.ner.train import train

    class StopAfterTheFirstEpoch(keras.callbacks.Callback):
        def on_epoch_end(self, epoch, logs=None):
            raise KeyboardInterrupt("simulated interruption")

    run = tmp_path / "run"
    with pytest.raises(KeyboardInterrupt):
        train(_settings(data, run), callbacks=[StopAfterTheFirstEpoch()])
    other = tmp_path / "other.conll"
    other.write_text(data[0].read_text() + "\nZorblax NNP B-NP B-ALIEN\n")
    before = snapshot(run)
    status, last, err = cli(capsys, *train_args((other, data[1]), run, "--resume"))
    assert status == 2 and "Traceback" not in err and "[[" not in err, err
    assert re.fullmatch(rf"kerasbert: error: {re.escape(str(run / 'backup'))}: cannot resume: the backup's weights "
                        r"do not fit the model built from this call's settings and data \(\S+: \([\d, ]+\) in the "
                        r"backup, \([\d, ]+\) in the model\); resume with the interrupted run's settings and "
                        r"data \(its settings.json\), or pass --overwrite to start again", last), last
    assert snapshot(run) == before
    (run / "run.json").unlink()  # a folder of a kerasbert from before the run marker
    status, last, _ = cli(capsys, *train_args(data, run, "--overwrite"))
    assert status == 2 and "--overwrite replaces only a folder of this kerasbert's runs" in last
    status, _, err = cli(capsys, *train_args(data, run, "--resume", epochs=1))  # the backup's epoch: no more
    assert status == 0, err
    assert epochs_of(run) == [1] and json.loads((run / "run.json").read_text())["command"] == "ner train"


# --- SIGTERM during an export ---------------------------------------------------------------


def test_sigterm_during_an_export_leaves_no_temporary_version_folder(finished, tmp_path):
    """`docker stop`, systemd and Kubernetes send SIGTERM: the export's hidden
    staging folder in the export base is removed (it used to stay, tens of
    MB, forever), no version is published; one line, exit status 143."""
    base = tmp_path / "exports"
    base.mkdir()
    export = _start(["ner", "export", "--model", finished, "--output", base])
    try:
        _terminate_when(lambda: any(p.name.startswith(".") for p in base.iterdir()), export)
    finally:
        export.kill()
    assert list(base.iterdir()) == []
