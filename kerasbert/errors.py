"""Errors that a user can act on.

Everything kerasbert raises on bad input derives from :class:`KerasbertError`.
The ``kerasbert`` command prints such an error as one message, without a
traceback, and exits with status 2; anything else is a bug and keeps its
traceback.
"""


class KerasbertError(Exception):
    """Base class: a problem with the user's input, files or settings."""


class CheckpointError(KerasbertError):
    """A checkpoint folder is missing, incomplete, inconsistent or unreadable."""


class InputDataError(KerasbertError):
    """A data file is malformed. The message names the file, the line and the problem.

    Args:
        path: the file (str or path-like).
        line: 1-based line number, or None when the problem is the whole file.
        problem: what is wrong, in words.
    """

    def __init__(self, path, line, problem):
        self.path = str(path)
        self.line = line
        self.problem = problem
        where = self.path if line is None else f"{self.path}, line {line}"
        super().__init__(f"{where}: {problem}")
