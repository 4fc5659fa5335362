"""A run's ``history.jsonl`` (one JSON object per epoch, written by
:class:`kerasbert.training.callbacks.EpochEvaluator`): read it, plot it.

matplotlib is imported only by :func:`plot_history`, when it draws.
"""

import json
from pathlib import Path

from kerasbert.files.atomic import atomic_write_bytes


def read_history(path):
    """The records of ``history.jsonl`` (one JSON object a line); a damaged
    line (a run's history edited or cut short) raises an error naming it."""
    from kerasbert.errors import InputDataError

    path = Path(path)
    if not path.exists():
        return []
    records = []
    for number, line in enumerate(path.read_text(encoding="utf-8", errors="replace").splitlines(), 1):
        if line.strip():
            try:
                record = json.loads(line)
            except json.JSONDecodeError as e:
                raise InputDataError(path, number, f"damaged: not valid JSON ({e.msg}); the history of a run "
                                     "has one JSON object a line")
            if not isinstance(record, dict):
                raise InputDataError(path, number, "damaged: not a JSON object")
            records.append(record)
    return records


def plot_history(history_path, png_path, metric="f1"):
    """Write a PNG of training loss and dev ``metric`` per epoch. Returns the
    path, or None (with a message) when matplotlib is not installed."""
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError:
        print("note: no training plot (matplotlib is not installed: pip install 'kerasbert[plots]')")
        return None
    records = read_history(history_path)
    if not records:
        return None
    epochs = [r["epoch"] for r in records]
    # A Figure of its own (no pyplot): the global backend of a notebook is left alone.
    fig = Figure(figsize=(9, 3.2))
    FigureCanvasAgg(fig)
    a, b = fig.subplots(1, 2)
    a.plot(epochs, [r.get("loss") for r in records], marker="o")
    a.set_title("training loss")
    a.set_xlabel("epoch")
    b.plot(epochs, [r.get(f"val_{metric}") for r in records], marker="o", color="tab:green")
    b.set_title(f"dev {metric}")
    b.set_xlabel("epoch")
    fig.tight_layout()
    import io

    buffer = io.BytesIO()
    fig.savefig(buffer, dpi=100, format="png")
    return atomic_write_bytes(Path(png_path), buffer.getvalue())  # whole, or the previous plot kept
