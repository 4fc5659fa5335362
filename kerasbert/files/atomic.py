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

A write that fails (a full disk, a file-size limit, a folder that cannot be
written) raises :class:`~kerasbert.errors.WriteError`, one line naming the
path and the operating system's reason; the staging folder or temporary file
is removed, so nothing half-written becomes visible.

The second half of the module reads back what kerasbert wrote (and the
checkpoint files it reads): :func:`check_file` tells a missing file from a
damaged one (a truncated zip archive -- ``.keras``, ``.npz`` --, a truncated
HDF5 file, an empty file) in one line naming the file, and :func:`read_json`
names the line of a broken JSON file. Every loader of a model folder calls
them (:mod:`kerasbert.checkpoints.saving`) before handing a file to Keras, whose own
errors for a damaged file are tracebacks that often say "not found".
"""

import json
import os
import shutil
import struct
import tempfile
import zipfile
from pathlib import Path

from kerasbert.errors import KerasbertError
from kerasbert.errors import WriteError

EXISTS_POLICIES = ("replace", "refuse", "merge")


def cache_base():
    """The kit's cache folder: ``$KERASBERT_CACHE``, else
    ``$XDG_CACHE_HOME/kerasbert``, else ``~/.cache/kerasbert`` (each cache a
    subfolder; every one of them may be deleted at any time)."""
    return Path(os.environ.get("KERASBERT_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"), "kerasbert"))


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
    _check_folders_above(target)
    if exists == "refuse" and target.exists():
        raise KerasbertError(f"{target} already exists and is never overwritten")
    staging = None
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=f".{target.name}.tmp-", dir=target.parent))
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
    except BaseException as e:
        if staging is not None:
            shutil.rmtree(staging, ignore_errors=True)
        reason = write_failure(e)
        if reason is not None:
            kept = "the previous version is kept" if exists == "replace" and target.exists() else "nothing was written"
            raise WriteError(f"{target}: cannot write ({reason}); {kept}") from e
        raise
    return target


def _check_folders_above(path):
    """A :class:`WriteError` when a folder that ``path`` goes through is a
    file (``mkdir`` would say "File exists" or "Not a directory")."""
    for above in Path(path).parents:
        if above.exists() or above.is_symlink():
            if not above.is_dir():
                raise WriteError(f"{path}: cannot write ({above} is a file, not a folder)")
            return


def atomic_write_text(path, text):
    """Write ``text`` (UTF-8) to ``path`` through a temporary file and a rename."""
    return atomic_write_bytes(path, text.encode("utf-8"))


def atomic_write_bytes(path, data):
    """Write ``data`` to ``path`` through a temporary file and a rename."""
    path = Path(path)
    _check_folders_above(path)
    tmp = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
        os.chmod(tmp, 0o666 & ~_umask())
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException as e:
        if tmp is not None:
            Path(tmp).unlink(missing_ok=True)
        reason = write_failure(e)
        if reason is not None:
            raise WriteError(f"{path}: cannot write ({reason})" + ("; the previous version is kept" if path.exists()
                                                                     else "")) from e
        raise
    return path


def atomic_append_text(path, text):
    """Append ``text`` to the (small) file ``path`` all at once: the file is
    rewritten through :func:`atomic_write_bytes`, so a failed or interrupted
    append leaves the file as it was, never a half line (``history.jsonl``)."""
    path = Path(path)
    try:
        old = path.read_bytes() if path.exists() else b""
    except OSError as e:
        raise WriteError(f"{path}: cannot read it to append ({e.strerror or e})") from e
    return atomic_write_bytes(path, old + text.encode("utf-8"))


# TensorFlow's errors for a failed file write (SaveV2 on a full disk raises
# OutOfRangeError or ResourceExhaustedError, a folder it cannot create
# PermissionDeniedError, FailedPreconditionError or NotFoundError).
_TF_WRITE_ERRORS = ("OutOfRangeError", "ResourceExhaustedError", "PermissionDeniedError", "FailedPreconditionError",
                    "NotFoundError", "AlreadyExistsError", "DataLossError", "UnknownError")


def write_failure(error):
    """The reason, in words, when ``error`` is a failed write (an
    :class:`OSError`, or TensorFlow's or h5py's error for one); None for
    anything else (a bug, an interruption, an error already explained)."""
    if isinstance(error, KerasbertError) or not isinstance(error, Exception):
        return None
    if isinstance(error, OSError):
        # h5py's strerror is a paragraph; the errno's own words are enough.
        return os.strerror(error.errno) if error.errno else (str(error).splitlines() or [type(error).__name__])[0]
    name = type(error).__name__
    if type(error).__module__.startswith("tensorflow") and name in _TF_WRITE_ERRORS:
        import re

        message = getattr(error, "message", None) or str(error)
        lines = [line.strip() for line in message.strip().splitlines() if line.strip()]
        line = re.sub(r"\{\{[^}]*\}\}\s*|\s*\[Op:\w+\]", "", lines[0] if lines else name)
        # "<a temporary file>; File too large": the reason is after the path
        return line.rsplit("; ", 1)[1] if "; " in line and "/" in line.rsplit("; ", 1)[0] else line
    if isinstance(error, RuntimeError) and type(error).__module__.startswith("h5py"):
        return str(error).strip().splitlines()[0]
    return None


# =============================================================================
# Reading: a missing file, a damaged one
# =============================================================================

#: What :func:`check_file` checks a file for: ``"zip"`` (a ``.keras`` or
#: ``.npz`` archive: complete, entries' checksums right), ``"hdf5"``
#: (``.weights.h5``, ``.lora.h5``: a complete HDF5 file), ``"json"``,
#: ``"text"`` (not empty).
FILE_KINDS = ("zip", "hdf5", "json", "text")

_ZIP_LOCAL = b"PK\x03\x04"
_HDF5_SIGNATURE = b"\x89HDF\r\n\x1a\n"


def missing(path, what=""):
    """The error for a file that is not there."""
    return KerasbertError(f"{path}: missing" + (f" ({what})" if what else ""))


def damaged(path, problem):
    """The error for a file that is there but is not what it should be."""
    return KerasbertError(f"{path}: damaged: {problem}")


def _size(n):
    return f"{n:,} bytes"


def check_file(path, kind, what=""):
    """Raise a one-line :class:`~kerasbert.errors.KerasbertError` naming
    ``path`` when the file is missing (``"<path>: missing"``) or is not a
    complete file of ``kind`` (:data:`FILE_KINDS`: ``"<path>: damaged:
    ..."``, with the size found and, where the file says it, the size
    expected). ``what`` says what the file is for, in words. Returns the
    path."""
    path = Path(path)
    if kind not in FILE_KINDS:
        raise ValueError(f"kind must be one of {FILE_KINDS}, got {kind!r}")
    if not path.exists():
        raise missing(path, what)
    if path.is_dir():
        raise damaged(path, "a folder where a file should be")
    try:
        size = path.stat().st_size
        if size == 0:
            raise damaged(path, "empty (0 bytes)")
        if kind == "zip":
            _check_zip(path, size)
        elif kind == "hdf5":
            _check_hdf5(path, size)
        elif kind == "json":
            read_json(path)
    except OSError as e:
        raise KerasbertError(f"{path}: cannot read ({e.strerror or e})") from e
    return path


def _zip_needs(path, size):
    """The bytes a zip archive's local entries need, walked from the start
    (each header gives its entry's compressed size); None when an entry does
    not say (a streamed entry) or the file does not start as a zip archive."""
    offset = 0
    with open(path, "rb") as f:
        while offset < size:
            f.seek(offset)
            header = f.read(30)
            if len(header) < 30 or header[:4] != _ZIP_LOCAL:
                break
            flags, = struct.unpack("<H", header[6:8])
            compressed, = struct.unpack("<I", header[18:22])
            name_length, extra_length = struct.unpack("<HH", header[26:30])
            if flags & 0x08 or compressed == 0xFFFFFFFF:
                return None
            offset += 30 + name_length + extra_length + compressed
    return offset if offset else None


def _check_zip(path, size):
    label = f"{path.suffix} archive" if path.suffix else "zip archive"
    with open(path, "rb") as f:
        start = f.read(4)
    if start != _ZIP_LOCAL and start != b"PK\x05\x06":
        raise damaged(path, f"not a {label} (it does not start as a zip archive; {_size(size)})")
    if not zipfile.is_zipfile(path):
        needs = _zip_needs(path, size)
        if needs and needs > size:
            raise damaged(path, f"not a complete {label} ({size:,} of at least {_size(needs)}: cut short?)")
        raise damaged(path, f"not a complete {label} (no zip directory at its end; {_size(size)}: cut short?)")
    try:
        with zipfile.ZipFile(path) as archive:
            bad = archive.testzip()
    except (zipfile.BadZipFile, EOFError, ValueError, NotImplementedError) as e:
        raise damaged(path, f"not a readable {label} ({e})")
    if bad is not None:
        raise damaged(path, f"{bad} inside the {label} fails its checksum")


def _check_hdf5(path, size):
    with open(path, "rb") as f:
        start = f.read(8)
    if start != _HDF5_SIGNATURE:
        raise damaged(path, f"not an HDF5 file (no HDF5 signature; {_size(size)})")
    import re

    import h5py

    try:
        with h5py.File(path, "r"):
            pass
    except (OSError, RuntimeError, ValueError) as e:
        message = str(e)
        found = re.search(r"eof = (\d+).*stored_eof = (\d+)", message)
        if found:
            raise damaged(path, f"not a complete HDF5 file ({int(found.group(1)):,} of {_size(int(found.group(2)))}: "
                          "cut short?)")
        raise damaged(path, f"not a readable HDF5 file ({message.splitlines()[0] if message else type(e).__name__})")


def read_json(path, what=""):
    """The parsed content of the JSON file ``path``; a missing, empty, non-UTF-8
    or malformed file raises a one-line error naming the file (and the line:
    ``"<path>, line 3: damaged: not valid JSON (...)"``; a file that ends
    in the middle of a value says it looks cut short)."""
    path = Path(path)
    if not path.exists():
        raise missing(path, what)
    try:
        data = path.read_bytes()
    except OSError as e:
        raise KerasbertError(f"{path}: cannot read ({e.strerror or e})") from e
    if not data.strip():
        raise damaged(path, f"empty ({_size(len(data))})")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data.count(b"\n", 0, e.start) + 1
        raise KerasbertError(f"{path}, line {line}: damaged: not UTF-8 (byte 0x{data[e.start]:02x} at offset "
                             f"{e.start:,})")
    if text.startswith("\ufeff"):
        text = text[1:]
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        ends = e.pos >= len(text.rstrip()) or (e.msg.startswith("Unterminated") and "\n" not in text[e.pos:].rstrip())
        cut = " (it ends early: cut short?)" if ends else ""
        raise KerasbertError(f"{path}, line {e.lineno}: damaged: not valid JSON ({e.msg}, column {e.colno}){cut}")
    except RecursionError:
        raise damaged(path, "JSON nested too deeply to read")
