"""Atomic writes: a folder or a file appears complete or not at all.

One implementation for everything kerasbert writes that a reader may open
while it is being written, or that an interruption must not leave half-done:
the best model of a training run, SavedModel versions that TF Serving polls,
official-layout checkpoints, run settings, metrics and scores.

:func:`atomic_write_dir` fills a hidden staging folder beside the target and
then publishes it; what publishing means is the ``exists`` policy:

* ``"replace"`` -- the target folder is swapped for the new one (renames
  only); an interruption leaves the old folder or the new one, never a mix
  (a training run's ``OUTPUT/model``);
* ``"refuse"`` -- the target must not exist, before or after the write; an
  existing one is never touched (TF Serving versions: ``EXPORT_BASE/N``);
* ``"merge"`` -- the files are moved into the (possibly existing) target one
  by one, in the order of ``last`` (a checkpoint's ``.index``, what readers
  open first, goes last), other files of the target stay.

Staging folders start with ``.`` so that TF Serving, which loads only
integer-named versions, never sees them. What is published gets the mode a
plain ``mkdir`` / ``open`` would give it under the process's umask (not the
private 0700 / 0600 of temporary files): a server running as another user
can read an export.
"""

import os
import shutil
import tempfile
from pathlib import Path

from kerasbert.errors import KerasbertError

EXISTS_POLICIES = ("replace", "refuse", "merge")


def _umask():
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def atomic_write_dir(target, write, exists="replace", last=()):
    """Create folder ``target`` by calling ``write(staging_folder)``, then
    publish it by the ``exists`` policy (module docstring). ``last``: for
    ``"merge"``, file suffixes moved after all the others. Returns ``target``;
    on any error (or an interruption) the staging folder is removed and the
    target is as it was."""
    if exists not in EXISTS_POLICIES:
        raise ValueError(f"exists must be one of {EXISTS_POLICIES}, got {exists!r}")
    target = Path(target)
    if target.parent.exists() and not target.parent.is_dir():
        raise KerasbertError(f"{target.parent}: exists and is not a folder")
    if exists == "refuse" and target.exists():
        raise KerasbertError(f"{target} already exists and is never overwritten")
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{target.name}.tmp-", dir=target.parent))
    try:
        os.chmod(staging, 0o777 & ~_umask())
        write(staging)
        if exists == "merge":
            target.mkdir(exist_ok=True)
            for file in sorted(staging.iterdir(), key=lambda p: (p.suffix in last, p.name)):
                os.replace(file, target / file.name)
            staging.rmdir()
        elif exists == "refuse":
            if target.exists():  # another writer took the name meanwhile
                raise KerasbertError(f"{target} appeared while it was being written; nothing was overwritten")
            os.rename(staging, target)
        else:
            old = None
            if target.exists():
                old = target.parent / f".{target.name}.old-{os.getpid()}"
                os.replace(target, old)
            os.replace(staging, target)
            if old is not None:
                shutil.rmtree(old, ignore_errors=True)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return target


def atomic_write_text(path, text):
    """Write ``text`` (UTF-8) to ``path`` through a temporary file and a rename."""
    return atomic_write_bytes(path, text.encode("utf-8"))


def atomic_write_bytes(path, data):
    """Write ``data`` to ``path`` through a temporary file and a rename."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        os.chmod(tmp, 0o666 & ~_umask())
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path
