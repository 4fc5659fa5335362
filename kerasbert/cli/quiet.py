"""TensorFlow's C++ start-up lines, kept off the ``kerasbert`` command's standard error.

Importing TensorFlow 2.21 writes a handful of lines to standard error from
its C++ libraries (``WARNING: All log messages before absl::InitializeLog()
is called are written to STDERR``, ``oneDNN custom operations are on ...``,
``Could not find cuda drivers on your machine ...``, each once per library
that logs them). They are written before ``TF_CPP_MIN_LOG_LEVEL`` is read,
by C++ code, to file descriptor 2: setting the variable, even before the
import, does not silence them, and neither does anything Python does to
``sys.stderr``.

:func:`quiet_tensorflow_import` installs an import hook: while the module
``tensorflow`` is executed (its first import, wherever it happens), file
descriptor 2 goes to a temporary file; afterwards every line that is not a
known start-up line (:func:`is_startup_line`) is written back to standard
error, in order -- a real error or warning during the import is never
hidden. It also sets ``TF_CPP_MIN_LOG_LEVEL=3`` (unless already set) for
what TensorFlow logs later, which does read it. The CLI calls it first
thing, unless ``--verbose`` or ``KERASBERT_VERBOSE=1`` asks for everything.
"""

import contextlib
import importlib.abc
import os
import re
import sys
import tempfile

#: Set to 1 to see everything TensorFlow writes (the CLI's ``--verbose`` does the same).
VERBOSE_VARIABLE = "KERASBERT_VERBOSE"

# absl's prefix: severity and date, time (before absl::InitializeLog, seconds since 1970), thread, file:line]
_ABSL = re.compile(rb"^[IWE]\d{4} [\d:.]+\s+\d+ (?P<file>[\w.]+):\d+\] (?P<message>.*)$")
#: (C++ file, start of the message) of the lines TensorFlow writes when it is imported.
STARTUP_MESSAGES = (
    (b"port.cc", b"oneDNN custom operations are on."),
    (b"cudart_stub.cc", b"Could not find cuda drivers on your machine"),
    (b"cpu_feature_guard.cc", b"This TensorFlow binary is optimized to use available CPU instructions"),
    (b"cuda_dnn.cc", b"Unable to register cuDNN factory"),
    (b"cuda_fft.cc", b"Unable to register cuFFT factory"),
    (b"cuda_blas.cc", b"Unable to register cuBLAS factory"),
    (b"computation_placer.cc", b"computation placer already registered"),
    (b"py_utils.cc", b"TF-TRT Warning: Could not find TensorRT"),
)
_OTHER_LINES = (
    re.compile(rb"^WARNING: All log messages before absl::InitializeLog\(\) is called are written to STDERR$"),
    # the second line of cpu_feature_guard.cc's message
    re.compile(rb"^To enable the following instructions: .*rebuild TensorFlow with the appropriate compiler flags\.$"),
)


def verbose():
    """Whether ``KERASBERT_VERBOSE`` asks for TensorFlow's start-up lines."""
    return os.environ.get(VERBOSE_VARIABLE, "").strip().lower() not in ("", "0", "false", "no")


def is_startup_line(line):
    """Whether ``line`` (bytes, without its end) is one of TensorFlow's known start-up lines."""
    line = line.rstrip(b"\r\n")
    found = _ABSL.match(line)
    if found:
        return any(found["file"] == file and found["message"].startswith(start) for file, start in STARTUP_MESSAGES)
    return any(pattern.match(line) for pattern in _OTHER_LINES)


@contextlib.contextmanager
def startup_lines_dropped():
    """Everything written to file descriptor 2 inside the block is held
    back, then written to it again without TensorFlow's start-up lines (in
    order, once the block ends, even when it raises)."""
    try:
        sys.stderr.flush()
        saved = os.dup(2)
    except (OSError, ValueError, AttributeError):  # no usable standard error: nothing to filter
        yield
        return
    with tempfile.TemporaryFile() as held:
        os.dup2(held.fileno(), 2)
        try:
            yield
        finally:
            try:
                sys.stderr.flush()
            except (OSError, ValueError, AttributeError):
                pass
            os.dup2(saved, 2)
            os.close(saved)
            held.seek(0)
            kept = [line for line in held.read().splitlines(keepends=True) if not is_startup_line(line)]
            if kept:
                os.write(2, b"".join(kept))


class _QuietLoader(importlib.abc.Loader):
    """Runs the wrapped loader's ``exec_module`` inside :func:`startup_lines_dropped`."""

    def __init__(self, loader):
        self.loader = loader

    def create_module(self, spec):
        return self.loader.create_module(spec)

    def exec_module(self, module):
        module.__loader__ = self.loader  # the module sees its own loader
        if module.__spec__ is not None:
            module.__spec__.loader = self.loader
        with startup_lines_dropped():
            self.loader.exec_module(module)


class _QuietFinder(importlib.abc.MetaPathFinder):
    """Finds ``tensorflow`` with the other finders and wraps its loader (once)."""

    names = ("tensorflow",)

    def find_spec(self, fullname, path, target=None):
        if fullname not in self.names:
            return None
        sys.meta_path.remove(self)  # once: TensorFlow is then imported
        for finder in sys.meta_path:
            find = getattr(finder, "find_spec", None)
            spec = find(fullname, path, target) if find else None
            if spec is not None:
                if spec.loader is not None and hasattr(spec.loader, "exec_module"):
                    spec.loader = _QuietLoader(spec.loader)
                return spec
        return None


def quiet_tensorflow_import():
    """Keep TensorFlow's start-up lines off standard error (module docstring);
    does nothing when TensorFlow is already imported or when already done."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    if "tensorflow" in sys.modules or any(isinstance(f, _QuietFinder) for f in sys.meta_path):
        return
    sys.meta_path.insert(0, _QuietFinder())
