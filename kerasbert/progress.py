"""Progress of long work: items done, rate and time left, on standard error.

One helper for every long command (``ner predict``, ``evaluate``, ``ner select``, ``ner
calibrate``, ``triples tune``, ``pretrain``'s counting pass) and for the Python API's
``progress=`` switch, drawn by tqdm (``tqdm.auto``: a text bar on a terminal, a widget in a
notebook).

* :func:`progress` opens a bar around a block of work. ``show=True`` draws it, ``False`` draws
  nothing, ``"auto"`` (what the commands pass, unless ``--quiet``) draws it only when standard
  error is a terminal: a log file or a pipe gets nothing, and standard output holds the results
  alone either way.
* The work inside the block reports with :func:`advance` (``n`` items done), which moves the
  innermost open bar, and does nothing when none is open. The one loop every prediction runs
  through (:meth:`kerasbert_apps.base.pipeline.Pipeline.in_batches`) calls it once per batch, so
  a command opens a bar around what it runs and everything inside counts in it, a head's own
  scoring included. :func:`expect` adds items the bar's total did not know of.
* :func:`write` writes to standard output without breaking an open bar that shares its
  terminal.

tqdm is imported only when a bar is drawn.
"""

import contextlib
import contextvars
import sys

#: What ``show`` (and the Python API's ``progress=``) takes.
SHOW = (True, False, "auto")

_OPEN = contextvars.ContextVar("kerasbert_progress", default=None)


def _is_terminal(stream):
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError, OSError):  # no stream, or a closed one
        return False


def shown(show):
    """Whether a bar with ``show`` (one of :data:`SHOW`) is drawn."""
    if isinstance(show, bool):
        return show
    if show == "auto":
        return _is_terminal(sys.stderr)
    raise ValueError(f"progress must be True, False or 'auto', got {show!r}")


@contextlib.contextmanager
def progress(total=None, desc=None, unit="texts", show="auto"):
    """A bar for the work of the ``with`` block: ``total`` items (None: not
    known; the bar then shows the count and the rate, without time left),
    named ``desc``, counted in ``unit``; drawn as ``show`` says
    (:func:`shown`). Yields the tqdm bar, or None when nothing is drawn (the
    block's :func:`advance` calls then move an outer bar, if one is open)."""
    if not shown(show):
        yield None
        return
    from tqdm.auto import tqdm

    bar = tqdm(total=total, desc=desc, unit=" " + unit, file=sys.stderr, dynamic_ncols=True, mininterval=0.5,
               smoothing=0.1, leave=None)
    token = _OPEN.set(bar)
    try:
        yield bar
    finally:
        _OPEN.reset(token)
        bar.close()


def advance(n=1):
    """``n`` more items done, on the innermost open bar (none open: nothing)."""
    bar = _OPEN.get()
    if bar is not None:
        bar.update(n)


def expect(n):
    """``n`` more items to do than the innermost open bar's total said
    (negative: fewer); nothing for a bar without a total, or none open."""
    bar = _OPEN.get()
    if bar is not None and bar.total is not None:
        bar.total = max(bar.total + n, bar.n)
        bar.refresh()


def write(text, file=None):
    """Write ``text`` to ``file`` (standard output) as it is; an open bar on
    the same terminal is cleared first and drawn again after it."""
    file = sys.stdout if file is None else file
    bar = _OPEN.get()
    if bar is None or not _is_terminal(file):
        file.write(text)
        return
    with bar.external_write_mode(file=file):
        file.write(text)
        file.flush()
