"""What the progress bar costs ``predict``: the same lines predicted with and without it, in one run.

Figures, not a test. The loop of ``kerasbert ner predict FILE`` (:func:`kerasbert_apps.base.cli.print_predictions`,
output to ``/dev/null``) over ``--lines`` CoNLL-2003 test sentences, with the bar drawn on a
pseudo-terminal and without, alternately, ``--pairs`` rounds after a warm-up. The model: the demo's
shape, untrained head, or ``--model``. The cost: ``(with - without) / without`` of the medians, in %.

    python -m bench.progress_cost [--lines 20000] [--pairs 3] [--batch-size 32] [--model RUN/model]
"""

import argparse
import contextlib
import fcntl
import os
import statistics
import struct
import sys
import tempfile
import termios
import threading
import time
from pathlib import Path

from bench.common import CONLL
from bench.common import MINILM
from bench.common import fail
from bench.common import flags_line
from bench.common import positive
from bench.common import read_conll
from bench.common import sentence_text
from bench.common import untrained_tagger
from bench.common import write_result


@contextlib.contextmanager
def terminal(columns=120):
    """A ``columns``-wide pseudo-terminal's writing end as a text file, its output read and dropped by a thread."""
    reader, writer = os.openpty()
    fcntl.ioctl(writer, termios.TIOCSWINSZ, struct.pack("HHHH", 24, columns, 0, 0))

    def drain():
        while True:
            try:
                if not os.read(reader, 1 << 16):
                    return
            except OSError:  # the writing end was closed
                return

    thread = threading.Thread(target=drain, daemon=True)
    thread.start()
    stream = os.fdopen(writer, "w", encoding="utf-8", buffering=1)
    try:
        yield stream
    finally:
        stream.close()
        thread.join(timeout=5)
        os.close(reader)


def timed_run(predict, path, batch_size, bar_on):
    """Seconds of one pass of ``print_predictions`` over ``path``, the bar on ``bar_on`` (a stream) or none."""
    from kerasbert_apps.base.cli import print_predictions

    with open(os.devnull, "w", encoding="utf-8") as sink, contextlib.redirect_stdout(sink):
        with contextlib.redirect_stderr(bar_on) if bar_on is not None else contextlib.nullcontext():
            began = time.perf_counter()
            print_predictions(predict, str(path), batch_size, progress=bar_on is not None)
            return time.perf_counter() - began


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--lines", type=positive(int), default=20_000, help="lines per run (default: %(default)s)")
    parser.add_argument("--pairs", type=positive(int), default=3, help="rounds each way (default: %(default)s)")
    parser.add_argument("--batch-size", type=positive(int), default=32, help="texts per batch (default: %(default)s)")
    parser.add_argument("--model", help="a model folder (default: an untrained tagger of the demo's shape on MiniLM)")
    args = parser.parse_args(argv)
    if not args.model and not MINILM.is_dir():
        fail(f"{MINILM}: missing (the MiniLM checkpoint; or give --model)")
    print(flags_line(), flush=True)

    import kerasbert_apps.ner

    pipeline = kerasbert_apps.ner.load(args.model) if args.model else untrained_tagger(MINILM, demo=True)
    sentences = [sentence_text(block) for block in read_conll(CONLL / "eng.testb")]
    if not sentences:
        fail(f"{CONLL / 'eng.testb'}: no sentences")
    with tempfile.TemporaryDirectory() as work:
        path = Path(work) / "lines.txt"
        path.write_text("".join(sentences[i % len(sentences)] + "\n" for i in range(args.lines)), encoding="utf-8")
        runs = {"off": [], "on": []}
        with terminal() as bar_on:
            for stream in (None, bar_on):  # warm-up: the first pass traces the serving function
                timed_run(pipeline.predict, path, args.batch_size, stream)
            for round_ in range(args.pairs):
                order = (("off", None), ("on", bar_on)) if round_ % 2 == 0 else (("on", bar_on), ("off", None))
                for name, stream in order:
                    seconds = timed_run(pipeline.predict, path, args.batch_size, stream)
                    runs[name].append(seconds)
                    print(f"round {round_ + 1}, progress {name}: {seconds:.2f} s", file=sys.stderr, flush=True)
    off, on = statistics.median(runs["off"]), statistics.median(runs["on"])
    rows = [
        {"system": "predict, no progress", "progress": "off", "seconds": off, "lines_per_s": args.lines / off,
         "cost_percent": None, "runs_s": runs["off"]},
        {"system": "predict, progress on a terminal", "progress": "on", "seconds": on, "lines_per_s": args.lines / on,
         "cost_percent": 100 * (on - off) / off, "runs_s": runs["on"]},
    ]
    setup = {"lines": args.lines, "pairs": args.pairs, "batch_size": args.batch_size,
             "model": args.model or "untrained MiniLM + BiLSTM(64)-CRF tagger, windows of 64",
             "data": "CoNLL-2003 eng.testb sentences, cycled",
             "seconds": "median of the rounds; each run: print_predictions over the file, output to /dev/null",
             "cost_percent": "(progress on - off) / off, in percent; on: the bar on a pseudo-terminal and the "
                             "file's lines counted first, as the command does on a terminal"}
    write_result("progress_cost", rows, setup=setup,
                 columns=("system", "seconds", "lines_per_s", "cost_percent"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
