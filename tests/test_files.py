"""Atomic writes (kerasbert.files.atomic): all or nothing, and readable by others as a plain write would be."""

import os
import stat

import pytest

from kerasbert.errors import KerasbertError
from kerasbert.files.atomic import atomic_write_dir
from kerasbert.files.atomic import atomic_write_text


@pytest.fixture
def umask_022():
    old = os.umask(0o022)
    yield
    os.umask(old)


def mode(path):
    return stat.S_IMODE(path.stat().st_mode)


def test_published_files_and_folders_get_the_umask_modes(tmp_path, umask_022):
    """A TF Serving process running as another user must be able to read an
    export: no 0700 folder, no 0600 file (what temporary files get)."""
    assert mode(atomic_write_text(tmp_path / "scores.json", "{}\n")) == 0o644

    def write(folder):
        (folder / "saved_model.pb").write_bytes(b"x")

    for policy in ("replace", "refuse", "merge"):
        target = atomic_write_dir(tmp_path / policy / "1", write, exists=policy)
        assert mode(target) == 0o755, policy
        assert mode(target / "saved_model.pb") == 0o644
    os.umask(0o077)  # a private umask is respected
    assert mode(atomic_write_text(tmp_path / "private.json", "{}\n")) == 0o600
    assert mode(atomic_write_dir(tmp_path / "private", write)) == 0o700


def test_replace_refuse_merge_and_interruption(tmp_path):
    def write(text):
        def fill(folder):
            (folder / "a.txt").write_text(text)
        return fill

    target = tmp_path / "model"
    atomic_write_dir(target, write("old"))
    atomic_write_dir(target, write("new"))
    assert (target / "a.txt").read_text() == "new"

    def broken(folder):
        (folder / "a.txt").write_text("half")
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        atomic_write_dir(target, broken)
    assert (target / "a.txt").read_text() == "new"  # the old folder, untouched
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model"]  # no staging folder left
    with pytest.raises(KerasbertError, match="never overwritten"):
        atomic_write_dir(target, write("x"), exists="refuse")
    (target / "keep.txt").write_text("k")
    atomic_write_dir(target, lambda f: (f / "b.index").write_text("i"), exists="merge", last=(".index",))
    assert sorted(p.name for p in target.iterdir()) == ["a.txt", "b.index", "keep.txt"]
