"""Errors that a user can act on.

Everything kerasbert raises on bad input derives from :class:`KerasbertError`.
The ``kerasbert`` command prints such an error as one message, without a
traceback, and exits with status 2; so does an :class:`OSError` (a file that
cannot be read or written: the path and the system's reason). Anything else
is a bug and keeps its traceback.
"""


class KerasbertError(Exception):
    """Base class: a problem with the user's input, files or settings."""


class CheckpointError(KerasbertError):
    """A checkpoint folder is missing, incomplete, inconsistent or unreadable."""


class WriteError(KerasbertError):
    """A file or folder could not be written (a full disk, a file-size limit,
    no permission); the message names the path and the operating system's
    reason, and what was kept (nothing half-written is left visible)."""


class InputDataError(KerasbertError):
    """A data file is malformed. The message names the file, the line and the problem.

    Args:
        path: the file (str or path-like).
        line: 1-based line number, or None when the problem is the whole file;
            a :class:`RecordLine` (an element of a JSON array) also names the
            record: ``train.json, record 2 (line 1): ...``.
        problem: what is wrong, in words.
    """

    def __init__(self, path, line, problem):
        self.path = str(path)
        self.line = line
        self.problem = problem
        if line is None:
            where = self.path
        elif isinstance(line, RecordLine):
            where = f"{self.path}, record {line.record} (line {int(line)})"
        else:
            where = f"{self.path}, line {line}"
        super().__init__(f"{where}: {problem}")


class RecordLine(int):
    """The line where an element of a JSON array starts, knowing the element's
    1-based index (``record``): files such as CasRel's hold a whole array on
    one line, where the line alone locates nothing."""

    def __new__(cls, line, record):
        value = super().__new__(cls, line)
        value.record = int(record)
        return value
