"""Benchmark results as data: one JSON file per benchmark run under ``bench/results/``.

Every benchmark calls :func:`write_result` once at the end with its rows (one dict per
system or setting measured in that run) and a short ``setup`` (sizes, data, what each
row means). The file also records what makes a figure comparable: the command line,
the date, the CPU model and its vector / bfloat16 flags, the core count and the
versions of the runtimes involved. The docs' Benchmarks page is generated from these
files; history lives in them and in git, not in prose.

    from results import write_result          # bench/ is on sys.path when a bench runs
    write_result("serving_throughput", rows, setup={"sentences": 256, ...})
"""

import datetime
import importlib.metadata
import json
import os
import platform
import sys
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results"
FLAGS = ("avx2", "avx512f", "avx512_bf16", "amx_bf16", "amx_tile")
PACKAGES = ("tensorflow", "keras", "keras-hub", "tensorflow-text", "jax", "torch", "transformers", "onnxruntime")


def cpu():
    """``{"model": ..., "flags": [...], "cores": n}`` of this machine (flags: those of :data:`FLAGS` it has)."""
    model, flags = platform.processor() or platform.machine(), set()
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                key, _, value = line.partition(":")
                if key.strip() == "model name" and model in ("", platform.machine(), platform.processor()):
                    model = value.strip()
                elif key.strip() == "flags" and not flags:
                    flags = set(value.split())
    except OSError:
        pass
    return {"model": model, "flags": [f for f in FLAGS if f in flags], "cores": os.cpu_count()}


def flags_line():
    """One line to print beside every figure: the CPU model, its bf16/AMX flags and cores."""
    info = cpu()
    return f"CPU: {info['model']}, flags: {','.join(info['flags']) or 'none of ' + '/'.join(FLAGS)}, {info['cores']} cores"


def versions():
    found = {}
    for name in PACKAGES:
        try:
            found[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            pass
    found["python"] = platform.python_version()
    return found


def require_chinese_vocabulary(checkpoint, data):
    """Stop (exit 2, one line) unless ``checkpoint``'s vocabulary has Chinese characters: a
    Chinese corpus (``data``) tokenized with an English vocabulary is mostly ``[UNK]``, and
    its figures describe the vocabulary, not the kit."""
    vocab = next((p for p in (Path(checkpoint) / "vocab.txt", Path(checkpoint).parent / "vocab.txt") if p.is_file()), None)
    if vocab is None and str(checkpoint) != "starter":
        return  # no vocab.txt to read (e.g. a tokenizer.json folder): the bench trusts the checkpoint given
    text = vocab.read_text(encoding="utf-8", errors="replace") if vocab else ""
    chinese = sum(1 for line in text.splitlines() if len(line) == 1 and "\u4e00" <= line <= "\u9fff")
    if chinese < 1000:
        raise SystemExit(f"error: {data} is Chinese, but the vocabulary of {checkpoint} has {chinese} Chinese characters: give a Chinese "
                         "checkpoint (--checkpoint), or leave the Chinese data out")


def write_result(bench, rows, setup=None, name=None, root=None, columns=None, path=None, **fields):
    """Write ``bench/results/<bench>/<date>-<name or "run">.json`` atomically and return its path.

    ``rows``: a list of dicts, one per system measured in this run (the peer included);
    rows that all carry the same ``"part"`` make the record that part of the bench (one
    call per part; give each its own ``name``: two calls in the same minute with the same
    name would write the same file). ``setup``: a dict of what the run measured and how
    (sizes, data, threads, notes). ``root``: another folder to write ``<bench>/...`` into
    (a machine whose results are copied back into ``bench/results/`` later). ``columns``:
    the row keys the docs table shows, in order (default: all of them). ``path``: the file
    to write instead (a run that rewrites its record as it goes); other keyword arguments are
    further fields of the record (``summary``, ``notes``, or ``date`` and ``command`` given by
    the caller).
    """
    now = datetime.datetime.now(datetime.timezone.utc)
    record = {
        "bench": bench,
        "date": now.strftime("%Y-%m-%d %H:%M UTC"),
        "command": " ".join([Path(sys.argv[0]).name] + sys.argv[1:]),
        "cpu": cpu(),
        "versions": versions(),
        "setup": setup or {},
        "rows": rows,
    }
    record.update(fields)
    if columns:
        record["columns"] = list(columns)
    if path is None:
        path = Path(root or RESULTS) / bench / f"{now.strftime('%Y-%m-%dT%H%M')}-{name or 'run'}.json"
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(".json.partial")
    partial.write_text(json.dumps(record, indent=1, default=str) + "\n", encoding="utf-8")
    os.replace(partial, path)
    print(f"result written: {path}", flush=True)
    return path
