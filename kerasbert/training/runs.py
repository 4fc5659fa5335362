"""A run's output folder: which folder a run may write into, held for the run's life.

``train``, ``distill`` and ``pretrain`` write only into an ``OUTPUT`` folder
that is new, empty, or a folder of an earlier run of the same command. Such
a folder is marked by :data:`RUN_FILE` (``run.json``: the command, when it
started, the kerasbert version), the first file a run writes. :func:`claim`
decides, before anything is written:

* a new or empty folder: a new run;
* a folder marked as a run of the same command: continued with ``resume``
  (from its ``backup/``), replaced with ``overwrite`` (its content deleted,
  the marker first rewritten, then everything else), refused otherwise;
* a folder of another command's run, or one that holds anything without
  the marker (someone's files): refused, in one line naming what is there;
* a folder written by a kerasbert from before the marker (``settings.json``
  beside ``history.jsonl``, ``backup/`` or ``model/``): resumed with
  ``resume`` when its ``backup/`` is there, as it was then (the marker is
  written when the resume starts writing); otherwise refused, also with
  ``overwrite``, which never deletes a folder without the marker.

A run holds an exclusive lock on its folder from :func:`claim` to its end: a
second run into the same folder is refused at its start, in one line. The
lock is ``flock`` on the folder itself (no lock file is created): the
kernel releases it when the process ends, however it ends (a crash,
``kill -9``), so a killed run never leaves a stale lock behind.

A resume writes nothing until the backup it resumes from has been restored
into the model (:func:`commit`, called by :class:`kerasbert.training.callbacks.Backup`):
a ``--resume`` that fails (a backup that does not fit the model built from
this call's settings and data) leaves the folder as it was.

A command (``Task.train``, ``Task.distill``, ``pretrain``) is wrapped in
:func:`run_command`: when it returns, its run is finished (:func:`finish`:
``backup/`` removed, the marker says when it finished); however it ends,
the lock is released. Until the command returned, ``backup/`` stays, so a
run interrupted after its last epoch (while its best model is being
calibrated, its metrics written) is completed by ``--resume``.

Only the process that writes OUTPUT claims it (the chief under
``MultiWorkerMirroredStrategy``; the other workers write nothing there).
"""

import datetime
import functools
import json
import os
import shutil
import socket
from pathlib import Path

from kerasbert.errors import KerasbertError

#: The run marker, written first into a run's output folder.
RUN_FILE = "run.json"
#: What a run writes that --resume continues from.
BACKUP_DIR = "backup"
SETTINGS_FILE = "settings.json"
HISTORY_FILE = "history.jsonl"
#: A folder holding a run's settings.json and one of these, with no marker, is a run of an earlier kerasbert.
_LEGACY_RUN_FILES = (HISTORY_FILE, BACKUP_DIR, "model")


class _Held:
    """A folder this process holds: its lock and what a resume writes once the backup is restored."""

    def __init__(self, folder, fd):
        self.folder, self.fd = folder, fd
        self.pending = None  # (marker dict, settings text) of a resume, written by commit()
        self.managed = False  # claimed inside run_command, which finishes and releases it


_HELD = {}  # resolved folder -> _Held
_COMMANDS = []  # one list per run_command call in progress: the folders it claimed


def _key(folder):
    return str(Path(folder).resolve())


def _now():
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")


def _marker(command):
    import kerasbert

    return {"command": command, "kerasbert": kerasbert.__version__, "started": _now(),
            "pid": os.getpid(), "host": socket.gethostname(), "finished": None}


def read_marker(folder):
    """The run marker of ``folder`` (a dict with ``"command"``), None when there is none;
    a damaged one is an error naming it."""
    from kerasbert.files.atomic import damaged
    from kerasbert.files.atomic import read_json

    path = Path(folder) / RUN_FILE
    if not path.exists():
        return None
    marker = read_json(path, "the run marker")
    if not isinstance(marker, dict) or not isinstance(marker.get("command"), str):
        raise damaged(path, "not a kerasbert run marker (a JSON object with a \"command\")")
    return marker


def _write_marker(folder, marker):
    from kerasbert.files.atomic import atomic_write_text

    atomic_write_text(Path(folder) / RUN_FILE, json.dumps(marker, indent=2, ensure_ascii=False) + "\n")


def _epochs(n):
    """``"3 epochs in history.jsonl"``."""
    return f"{n} epoch{'' if n == 1 else 's'} in {HISTORY_FILE}"


def _legacy_run(folder, entries):
    """Whether ``folder`` is a run of a kerasbert from before the run marker:
    its ``settings.json`` (a run's settings: ``output`` and ``resume``
    among them) beside ``history.jsonl``, ``backup/`` or ``model/``."""
    if SETTINGS_FILE not in entries or not any(name in entries for name in _LEGACY_RUN_FILES):
        return False
    try:
        settings = json.loads((Path(folder) / SETTINGS_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(settings, dict) and {"output", "resume"} <= set(settings)


def _what_is_there(entries, folder):
    shown = [name + ("/" if (Path(folder) / name).is_dir() else "") for name in entries[:3]]
    more = len(entries) - len(shown)
    return ", ".join(shown) + (f" and {more} more" if more else "")


def _lock(folder):
    """An exclusive ``flock`` on ``folder`` (its descriptor, or None where the
    file system has no locks: a note is printed); a folder another run holds
    is refused."""
    try:
        import fcntl
    except ImportError:  # not a POSIX system
        print(f"note: {folder}: no file locks here; make sure no other run writes into this folder")
        return None
    fd = os.open(folder, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        try:
            marker = read_marker(folder) or {}
        except KerasbertError:
            marker = {}
        who = (f" (kerasbert {marker['command']}, process {marker.get('pid')} on {marker.get('host')}, started "
               f"{marker.get('started')})" if marker.get("command") else "")
        raise KerasbertError(f"{folder}: another run is writing into this folder{who}; wait for it to end, or "
                             "choose another --output")
    except OSError as e:  # a file system without flock (some network file systems)
        os.close(fd)
        print(f"note: {folder}: cannot lock the folder ({e.strerror or e}); make sure no other run writes into it")
        return None
    return fd


def _clear(folder, keep):
    """Delete everything in ``folder`` but ``keep``."""
    for entry in sorted(Path(folder).iterdir()):
        if entry.name == keep:
            continue
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry)
        else:
            entry.unlink()


def claim(folder, command, settings_text, resume=False, overwrite=False):
    """Take ``folder`` for a run of ``command`` (``"ner train"``): decide by
    the rules of the module docstring, lock it, and write the marker and
    ``settings_text`` (``settings.json``) -- for a resume from a backup, only
    once the backup is restored (:func:`commit`). Returns the folder."""
    from kerasbert.errors import WriteError
    from kerasbert.files.atomic import atomic_write_text

    folder = Path(folder)
    if resume and overwrite:
        raise KerasbertError("--resume continues the run in OUTPUT and --overwrite replaces it: give one of them")
    if folder.exists() and not folder.is_dir():
        raise KerasbertError(f"{folder}: is a file; --output must be a folder")
    key = _key(folder) if folder.exists() else None
    held = _HELD.get(key) if key else None
    if held is not None and held.managed and any(key in claimed for claimed in _COMMANDS):
        raise KerasbertError(f"{folder}: another run in this process is writing into this folder; choose another "
                             "--output")
    if held is None:
        try:
            folder.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise WriteError(f"{folder}: cannot create the output folder ({e.strerror or e}"
                             + (f": {e.filename}" if e.filename and str(e.filename) != str(folder) else "") + ")")
        key = _key(folder)
        held = _Held(folder, _lock(folder))
        _HELD[key] = held
    try:
        pending = _decide(folder, command, resume, overwrite)
    except BaseException:
        release(folder)
        raise
    if _COMMANDS:
        held.managed = True
        _COMMANDS[-1].append(key)
    if pending is not None:  # a resume from a backup: written once the backup is restored
        held.pending = (pending, settings_text)
    else:
        _write_marker(folder, _marker(command))  # first
        atomic_write_text(folder / SETTINGS_FILE, settings_text)
    return folder


def _decide(folder, command, resume, overwrite):
    """Check ``folder`` for a run of ``command``; clear it for ``overwrite``.
    Returns the marker to write when the run resumes from a backup (None:
    write it now)."""
    from kerasbert.training.history import read_history

    entries = sorted(os.listdir(folder))
    if not entries:
        return None
    marker = read_marker(folder)
    backup = (folder / BACKUP_DIR).is_dir()
    epochs = len(read_history(folder / HISTORY_FILE))  # a damaged history is named now, not halfway through
    if marker is None:
        if not _legacy_run(folder, entries):
            raise KerasbertError(
                f"{folder}: not empty and not a kerasbert run folder (it holds {_what_is_there(entries, folder)}); a "
                "run writes only into a new or empty folder, or into its own: choose another --output")
        if resume and backup:
            return _marker(command)
        if resume:
            raise KerasbertError(f"{folder}: nothing to resume: no backup/ in this run folder (written by an "
                                 "earlier kerasbert; its training ended); choose another --output")
        raise KerasbertError(
            f"{folder} already holds a training run (written by an earlier kerasbert, without {RUN_FILE}); "
            + ("pass --resume to continue it from its backup/, or " if backup else "")
            + "choose another --output (--overwrite replaces only a folder of this kerasbert's runs)")
    if marker["command"] != command:
        raise KerasbertError(f"{folder}: holds a `kerasbert {marker['command']}` run, not a `kerasbert {command}` "
                             "one; choose another --output")
    if resume:
        if backup:
            return dict(marker, pid=os.getpid(), host=socket.gethostname(), resumed=_now(), finished=None)
        if epochs:
            raise KerasbertError(f"{folder}: nothing to resume: no backup/ (the run's training ended: "
                                 f"{_epochs(epochs)}); pass --overwrite to train it again")
        return None  # stopped before its first backup: it starts again
    if overwrite:
        _write_marker(folder, _marker(command))  # still marked if the clearing is interrupted
        _clear(folder, keep=RUN_FILE)
        return None
    state = ("interrupted: pass --resume to continue it from its backup/, or --overwrite to replace it" if backup
             else "pass --overwrite to replace it")
    raise KerasbertError(f"{folder} already holds a `kerasbert {command}` run (started {marker.get('started')}, "
                         f"{_epochs(epochs)}); {state}, or choose another --output")


def commit(folder):
    """Write what a resume of ``folder`` held back (the marker, then
    ``settings.json``): called once its backup is restored. Nothing to do
    for a folder this process does not hold or a run that is not a resume."""
    from kerasbert.files.atomic import atomic_write_text

    held = _HELD.get(_key(folder))
    if held is None or held.pending is None:
        return
    marker, settings_text = held.pending
    held.pending = None
    _write_marker(folder, marker)
    atomic_write_text(Path(folder) / SETTINGS_FILE, settings_text)


def is_managed(folder):
    """Whether ``folder`` is held by a run inside :func:`run_command` (which
    removes the backup when the command returns)."""
    held = _HELD.get(_key(folder))
    return held is not None and held.managed


def finish(folder):
    """A run that completed: ``backup/`` removed (renamed away first, so an
    interruption never leaves half a backup), the marker's ``finished`` set."""
    folder = Path(folder)
    backup = folder / BACKUP_DIR
    if backup.exists():
        gone = folder / f".{BACKUP_DIR}.removed-{os.getpid()}"
        os.replace(backup, gone)
        shutil.rmtree(gone, ignore_errors=True)
    marker = read_marker(folder)
    if marker is not None:
        _write_marker(folder, dict(marker, finished=_now()))


def release(folder):
    """Release the lock on ``folder`` (the kernel does it anyway when the process ends)."""
    held = _HELD.pop(_key(folder), None)
    if held is not None and held.fd is not None:
        os.close(held.fd)  # closing the only descriptor releases the flock


def run_command(function):
    """Decorator for a command that runs into an output folder
    (:func:`claim` through :func:`kerasbert.training.fit.start_run`): when it returns,
    the folders it claimed are finished (:func:`finish`); however it ends,
    they are released, and the global Keras dtype policy the run set (its
    precision) is put back as it was, so what the process builds or loads
    next (a notebook loading the model it trained) is not built in it."""

    @functools.wraps(function)
    def wrapper(*args, **kwargs):
        import keras

        policy = keras.mixed_precision.global_policy()
        claimed = []
        _COMMANDS.append(claimed)
        try:
            result = function(*args, **kwargs)
            for key in claimed:
                if key in _HELD:
                    finish(_HELD[key].folder)
            return result
        finally:
            keras.mixed_precision.set_global_policy(policy)
            _COMMANDS.remove(claimed)
            for key in claimed:
                if key in _HELD:
                    release(_HELD[key].folder)

    return wrapper
