"""Writes that fail -- a full disk (a file-size limit, ``RLIMIT_FSIZE``, in a
subprocess), a folder that cannot be written, an output path through a file
-- in export, train (model, backup, history), distill and pretrain: one line
naming the path and the system's reason, exit status 2, no traceback, and
nothing half-written left visible; a backup that fails to write never
replaces the last good one.

The tests run as root in CI, where ``chmod`` stops nothing: "cannot be
written" is a path under a regular file (ENOTDIR) and, where the system has
one, a folder under ``/sys`` (EPERM/EACCES even for root)."""

import errno
import json
import os
import resource
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import REPO_ROOT
from conftest import conll_slice
from conftest import require_shared
from kerasbert.errors import WriteError

LIMIT = 60_000  # bytes: more than settings.json and a history line, less than any weights file here


def toy_checkpoint():
    return require_shared("data", "models", "keras_bert_test_checkpoint")


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    """A small NER model folder (untrained, the toy encoder), CoNLL slices and a text file."""
    from kerasbert_apps.ner.heads.bio.model import NerModel
    from kerasbert_apps.ner.heads.bio.pipeline import Tagger
    from kerasbert_apps.ner.tags import bio_tags
    from kerasbert.checkpoints.loader import load_encoder
    from kerasbert.checkpoints.loader import load_tokenizer

    tmp = tmp_path_factory.mktemp("failed_writes")
    tags = bio_tags(["LOC", "MISC", "ORG", "PER"])
    tokenizer = load_tokenizer(toy_checkpoint(), max_length=16)
    Tagger(NerModel(load_encoder(toy_checkpoint()), len(tags), lstm_units=4), tokenizer, tags,
           max_length=16).save(tmp / "model")
    text = tmp / "text.txt"
    text.write_text("the dog jumped over the fence\n" * 100, encoding="utf-8")
    return {"model": tmp / "model", "train": conll_slice(tmp, "train.conll", 0, 16),
            "dev": conll_slice(tmp, "dev.conll", 16, 4), "text": text}


def kerasbert(*argv, limit=None, cwd=None):
    """The ``kerasbert`` command in a fresh process (with a file-size limit of
    ``limit`` bytes): ``(exit status, the last line of standard error, all of it)``."""

    def set_limit():
        if limit:
            resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    run = subprocess.run([sys.executable, "-m", "kerasbert.cli", *map(str, argv)], capture_output=True, text=True,
                         preexec_fn=set_limit, cwd=cwd or REPO_ROOT,
                         env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"))
    lines = [line for line in run.stderr.splitlines() if line.startswith("kerasbert:")]
    return run.returncode, (lines[-1] if lines else ""), run.stderr


def visible(folder):
    """Everything under ``folder``, hidden staging files included (relative paths)."""
    folder = Path(folder)
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*")) if folder.exists() else []


def test_export_on_a_full_disk(setup, tmp_path):
    status, last, err = kerasbert("ner", "export", "--model", setup["model"], "--output", tmp_path / "export",
                                  limit=LIMIT)
    assert status == 2 and "Traceback" not in err, err
    assert last == f"kerasbert: error: {tmp_path / 'export' / '1'}: cannot write (File too large); nothing was written"
    assert visible(tmp_path / "export") == []  # no version folder, no staging folder


def train_argv(setup, output, command="train"):
    source = ["--teacher", setup["model"], "--student-layers", "1"] if command == "distill" else \
        ["--checkpoint", toy_checkpoint(), "--lstm-units", "4", "--no-calibrate", "--max-length", "16"]
    return ["ner", command, *source, "--train", setup["train"], "--dev", setup["dev"], "--output", output,
            "--epochs", "1", "--batch-size", "8"]


@pytest.mark.parametrize("command", ["train", "distill"])
def test_train_and_distill_on_a_full_disk(setup, tmp_path, command):
    """The first large write of a run is the backup for --resume after the
    first epoch: it fails whole, and no model, no half backup is left."""
    output = tmp_path / "run"
    status, last, err = kerasbert(*train_argv(setup, output, command), limit=LIMIT)
    assert status == 2 and "Traceback" not in err, err
    assert last == f"kerasbert: error: {output / 'backup' / 'latest.weights.h5'}: cannot write (File too large)"
    assert not (output / "model").exists()
    assert visible(output / "backup") == []
    assert json.loads((output / "settings.json").read_text())["output"] == str(output)  # small, complete


def test_pretrain_on_a_full_disk(setup, tmp_path):
    output = tmp_path / "run"
    status, last, err = kerasbert("pretrain", "--checkpoint", toy_checkpoint(), "--text", setup["text"], "--output",
                                  output, "--max-length", "16", "--held-out", "2", limit=LIMIT)
    assert status == 2 and "Traceback" not in err, err
    assert last == f"kerasbert: error: {output / 'backup' / 'latest.weights.h5'}: cannot write (File too large)"
    assert not (output / "encoder").exists() and visible(output / "backup") == []


def in_process(*argv):
    """``kerasbert.cli.main`` in this process: ``(exit status, the last line
    of standard error, all of it)``, as :func:`kerasbert` gives them."""
    import contextlib
    import io

    from kerasbert.cli import main

    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        status = main([str(a) for a in argv])
    lines = [line for line in err.getvalue().splitlines() if line.startswith("kerasbert:")]
    return status, (lines[-1] if lines else ""), err.getvalue()


def test_outputs_that_cannot_be_written(setup, tmp_path):
    """A path through a regular file (ENOTDIR, root or not) for every writing
    command; and a folder under /sys where the system refuses even root. In
    this process (``main``'s exit status and message are what the command
    gives; the full-disk tests above run the command itself)."""
    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    cases = [
        (train_argv(setup, blocker / "run"), f"{blocker / 'run'}: cannot create the output folder (Not a directory)"),
        (["ner", "export", "--model", setup["model"], "--output", blocker / "export"],
         f"{blocker / 'export' / '1'}: cannot write ({blocker} is a file, not a folder)"),
        (["pretrain", "--checkpoint", toy_checkpoint(), "--text", setup["text"], "--output", blocker / "pt",
          "--max-length", "16", "--held-out", "2"],
         f"{blocker / 'pt'}: cannot create the output folder (Not a directory)"),
        (["ner", "evaluate", "--model", setup["model"], "--data", setup["dev"], "--output", blocker / "s.json"],
         f"{blocker / 's.json'}: cannot write ({blocker} is a file, not a folder); choose another --output"),
    ]
    for argv, message in cases:
        status, last, err = in_process(*argv)
        assert status == 2 and "Traceback" not in err, (argv, err)
        assert last == f"kerasbert: error: {message}", (argv, err)
    try:
        os.mkdir("/sys/kerasbert-probe")
        os.rmdir("/sys/kerasbert-probe")
        return  # /sys is writable here: nothing to test
    except OSError as e:
        reason = os.strerror(e.errno)
    status, last, err = in_process("ner", "export", "--model", setup["model"], "--output", "/sys/kerasbert-export")
    assert status == 2 and "Traceback" not in err
    assert last == f"kerasbert: error: /sys/kerasbert-export/1: cannot write ({reason}); nothing was written"


# --- in this process: what a failed write keeps ---------------------------------


def test_a_failed_backup_keeps_the_last_good_one(setup, tmp_path, monkeypatch):
    import keras

    from kerasbert.files import atomic as files
    from kerasbert.training.callbacks import Backup

    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)])
    backup = Backup(str(tmp_path / "backup"))
    backup.set_model(model)
    backup._current_epoch = 1
    backup._save_model()
    good = (tmp_path / "backup" / "latest.weights.h5").read_bytes()
    good_metadata = (tmp_path / "backup" / "training_metadata.json").read_text()

    real_write = os.write

    def disk_full(fd, data):  # the first bytes go out, then the disk is full
        real_write(fd, data[:10])
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    model.layers[0].kernel.assign(model.layers[0].kernel + 1.0)
    backup._current_epoch = 2
    monkeypatch.setattr(files.os, "fdopen", lambda fd, mode: _Writer(fd, disk_full))
    with pytest.raises(WriteError) as error:
        backup._save_model()
    assert str(error.value) == (f"{tmp_path / 'backup' / 'latest.weights.h5'}: cannot write (No space left on "
                                "device); the previous version is kept")
    monkeypatch.undo()
    assert (tmp_path / "backup" / "latest.weights.h5").read_bytes() == good
    assert (tmp_path / "backup" / "training_metadata.json").read_text() == good_metadata
    assert visible(tmp_path / "backup") == ["latest.weights.h5", "training_metadata.json"]


class _Writer:
    """A file object whose writes go through ``write(fd, data)``."""

    def __init__(self, fd, write):
        self.fd, self._write = fd, write

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        os.close(self.fd)

    def write(self, data):
        self._write(self.fd, data)


def test_a_failed_history_line_or_best_model_keeps_what_was_there(tmp_path, monkeypatch):
    from kerasbert.files import atomic as files
    from kerasbert.files.atomic import atomic_append_text
    from kerasbert.files.atomic import atomic_write_dir

    history = tmp_path / "history.jsonl"
    atomic_append_text(history, '{"epoch": 1}\n')
    model_dir = tmp_path / "model"
    atomic_write_dir(model_dir, lambda d: (d / "model.keras").write_bytes(b"good"))

    def full(fd, data):
        raise OSError(errno.EFBIG, os.strerror(errno.EFBIG))

    monkeypatch.setattr(files.os, "fdopen", lambda fd, mode: _Writer(fd, full))
    with pytest.raises(WriteError, match=r"history\.jsonl: cannot write \(File too large\); the previous version is kept"):
        atomic_append_text(history, '{"epoch": 2}\n')
    monkeypatch.undo()

    def half(directory):
        (directory / "model.keras").write_bytes(b"ha")
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(directory / "model.keras"))

    with pytest.raises(WriteError) as error:
        atomic_write_dir(model_dir, half)
    assert str(error.value) == f"{model_dir}: cannot write (No space left on device); the previous version is kept"
    assert history.read_text() == '{"epoch": 1}\n'
    assert (model_dir / "model.keras").read_bytes() == b"good"
    assert visible(tmp_path) == ["history.jsonl", "model", "model/model.keras"]


def test_an_encoder_write_on_a_full_disk_in_this_process(tmp_path):
    """TensorFlow's SaveV2 (pretrain's and distill's encoder/, official
    layout) on a full disk: its OutOfRangeError becomes one line."""
    from kerasbert.checkpoints.loader import load_encoder
    from kerasbert.checkpoints.loader import load_tokenizer
    from kerasbert.checkpoints.loader import save_encoder

    encoder = load_encoder(toy_checkpoint())
    vocab = load_tokenizer(toy_checkpoint()).vocab
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    resource.setrlimit(resource.RLIMIT_FSIZE, (2_000, hard))
    try:
        with pytest.raises(WriteError) as error:
            save_encoder(encoder, tmp_path / "encoder", vocab)
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
    assert str(error.value) == f"{tmp_path / 'encoder'}: cannot write (File too large); nothing was written"
    assert visible(tmp_path) == []
