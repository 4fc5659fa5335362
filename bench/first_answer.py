"""The first answer: one sentence, whole process, ours beside the Hugging Face pipeline's.

Figures, not a test. A fresh process that answers one sentence and exits, each system in its own
process (start to exit, peak memory from the kernel), the systems in turn (``--pairs`` rounds,
medians): ``kerasbert ner predict`` on a model of the demo's shape (untrained head, or ``--model``)
from the serving cache (its ONNX entry; with ``--engine savedmodel``, its SavedModel entry, also
with ``KERASBERT_GRAPPLER=1``), as the folder's first, with ``--no-cache``, and on 512 lines, and
with ``--engine onnx`` on the model's ONNX export (ONNX Runtime, no TensorFlow in the process); ``SavedModel, first call`` (load the export, call it once); ``hf`` (Hugging Face's
``pipeline("ner")`` on the same MiniLM weights). The phases (imports, loading, tracing, first call)
come from a second, instrumented process of the same steps.

    python -m bench.first_answer [--model RUN/model] [--pairs 3]
"""

import argparse
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.common import ROOT
from bench.common import flags_line
from bench.common import write_result

SENTENCE = "Maria Sanchez joined Siemens in Munich after the Berlin Marathon."
#: Lines of the file that shows the cached function's speed past the first call (words of SENTENCE, shuffled).
MANY = 512
COLUMNS = ("system", "seconds", "vs_hf", "peak_mb", "imports_s", "load_s", "trace_s", "first_call_s", "nodes")

MAKE_MODEL = "import sys; from bench.common import untrained_tagger; untrained_tagger(demo=True).save(sys.argv[1])"

EXPORT = r"""
import json, sys
from kerasbert.serving.saved_model import saved_model_node_count
from kerasbert_apps.ner.heads.bio.pipeline import Tagger

from kerasbert_apps.base.onnx_export import export_onnx

tagger = Tagger.load(sys.argv[1])
export = tagger.export(sys.argv[2])
onnx = export_onnx(tagger, sys.argv[3])
print(json.dumps({"export": str(export), "onnx": str(onnx), "nodes": saved_model_node_count(export)}))
"""

# How the command starts: the time, then its imports.
COMMAND_START = r"""
import json, sys, time
began = time.perf_counter()
from kerasbert.cli import lean_import
from kerasbert.cli import quiet

lean_import.skip_optional_integrations()
quiet.quiet_tensorflow_import()
"""

# The steps of `kerasbert ner predict --no-cache` on one sentence, each timed.
PHASES = COMMAND_START + r"""
import tensorflow as tf, tensorflow_text, keras  # noqa: F401
from kerasbert_apps.ner.train import NER

imported = time.perf_counter()
pipeline = NER.load(sys.argv[1])
loaded = time.perf_counter()
function = pipeline.serving_function
function.get_concrete_function()
traced = time.perf_counter()
function(tf.constant([sys.argv[2]]))
answered = time.perf_counter()
print(json.dumps({"imports_s": imported - began, "load_s": loaded - imported, "trace_s": traced - loaded,
                  "first_call_s": answered - traced}))
"""

# The steps of `kerasbert ner predict` from the serving cache (its entry written before), each timed.
CACHED_PHASES = COMMAND_START + r"""
import contextlib
engine = sys.argv[3]
if engine == "savedmodel":
    import tensorflow as tf, keras  # noqa: F401
from kerasbert_apps.base.serving_cache import cached_predict
from kerasbert_apps.ner.train import NER

imported = time.perf_counter()
with contextlib.ExitStack() as stack:  # as the command runs it
    predict = cached_predict(NER, sys.argv[1], "float32", lambda pipeline: pipeline, verbose=False, engine=engine,
                             stack=stack)
    loaded = time.perf_counter()
    predict([sys.argv[2]])
    answered = time.perf_counter()
print(json.dumps({"imports_s": imported - began, "load_s": loaded - imported, "first_call_s": answered - loaded}))
"""

SAVED_MODEL = r"""
import json, sys, time
began = time.perf_counter()
import tensorflow as tf, tensorflow_text  # noqa: F401
imported = time.perf_counter()
serve = tf.saved_model.load(sys.argv[1]).signatures["serving_default"]
loaded = time.perf_counter()
serve(text=tf.constant([sys.argv[2]]))
answered = time.perf_counter()
print(json.dumps({"imports_s": imported - began, "load_s": loaded - imported, "first_call_s": answered - loaded}))
"""

HF = r"""
import sys
import torch, transformers
from transformers import AutoTokenizer, BertForTokenClassification, pipeline
from kerasbert.checkpoints.loader import resolve_checkpoint

folder = resolve_checkpoint("starter")
model = BertForTokenClassification.from_pretrained(folder, num_labels=9).eval()
ner = pipeline("ner", model=model, tokenizer=AutoTokenizer.from_pretrained(folder), aggregation_strategy="simple",
               device=-1)
with torch.inference_mode():
    ner([sys.argv[1]])
"""


def timed(argv, env=None):
    """``(seconds, stdout)`` of one process, start to exit."""
    began = time.perf_counter()
    process = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    out, err = process.communicate()
    seconds = time.perf_counter() - began
    if process.returncode != 0:
        raise SystemExit(f"{argv[:4]} failed:\n{err.decode(errors='replace')[-3000:]}")
    return seconds, out.decode()


def peak_mb(argv, env=None):
    """Peak resident memory (MB) of one run of ``argv`` (``/usr/bin/time``-free: a wrapper process reads it)."""
    wrapper = ("import resource, subprocess, sys; subprocess.run(sys.argv[1:], check=True, capture_output=True); "
               "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024)")
    return float(subprocess.run([sys.executable, "-c", wrapper, *argv], check=True, capture_output=True,
                                text=True, env=env).stdout.split()[-1])


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", help="a tagger folder (default: the demo's shape, untrained head)")
    parser.add_argument("--pairs", type=int, default=3, help="rounds of every system, taken in turn (medians)")
    args = parser.parse_args()
    print(flags_line(), flush=True)
    env = dict(os.environ)
    env.pop("TF_CPP_MIN_LOG_LEVEL", None)
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        model = Path(args.model) if args.model else tmp / "model"
        if not args.model:
            subprocess.run([sys.executable, "-c", MAKE_MODEL, str(model)], check=True, env=env, cwd=ROOT)
        exported = json.loads(subprocess.run([sys.executable, "-c", EXPORT, str(model), str(tmp / "export"),
                                              str(tmp / "onnx")],
                                             check=True, capture_output=True, text=True, env=env).stdout.splitlines()[-1])
        (tmp / "in.txt").write_text(SENTENCE + "\n", encoding="utf-8")
        rng = random.Random(0)
        words = SENTENCE.rstrip(".").split()
        (tmp / "many.txt").write_text("".join(" ".join(rng.choice(words) for _ in range(rng.randint(5, 40))) + ".\n"
                                              for _ in range(MANY)), encoding="utf-8")
        predict = [sys.executable, "-m", "kerasbert.cli", "ner", "predict", "--model", str(model), str(tmp / "in.txt")]
        many = predict[:-1] + [str(tmp / "many.txt")]
        grappler_env = dict(env, KERASBERT_CACHE=str(tmp / "cache"), KERASBERT_GRAPPLER="1")
        cached_env = dict(env, KERASBERT_CACHE=str(tmp / "cache"))
        saved = predict[:5] + ["--engine", "savedmodel"] + predict[5:]
        saved_many = many[:5] + ["--engine", "savedmodel"] + many[5:]
        for argv in (predict, saved):  # the folder's first predict, one entry of each engine
            subprocess.run(argv, check=True, capture_output=True, env=cached_env)
        first_env = dict(env, KERASBERT_CACHE=str(tmp / "first"))
        systems = {  # name: (argv, environment, instrumented argv)
            "kerasbert ner predict": (predict, cached_env,
                                      [sys.executable, "-c", CACHED_PHASES, str(model), SENTENCE, "auto"]),
            "kerasbert ner predict --engine savedmodel": (
                saved, cached_env, [sys.executable, "-c", CACHED_PHASES, str(model), SENTENCE, "savedmodel"]),
            "kerasbert ner predict, first of the folder": (predict, first_env, None),
            "kerasbert ner predict --no-cache": (predict + ["--no-cache"], env,
                                                 [sys.executable, "-c", PHASES, str(model), SENTENCE]),
            "kerasbert ner predict --engine savedmodel, KERASBERT_GRAPPLER=1": (saved, grappler_env, None),
            f"kerasbert ner predict, {MANY} lines": (many, cached_env, None),
            f"kerasbert ner predict --engine savedmodel, {MANY} lines": (saved_many, cached_env, None),
            f"kerasbert ner predict --engine savedmodel, {MANY} lines, KERASBERT_GRAPPLER=1": (saved_many, grappler_env,
                                                                                               None),
            "kerasbert ner predict --engine onnx": (
                predict[:5] + ["--engine", "onnx", "--model", exported["onnx"], str(tmp / "in.txt")], env, None),
            "SavedModel, first call": ([sys.executable, "-c", SAVED_MODEL, exported["export"], SENTENCE], env, None),
            "hf": ([sys.executable, "-c", HF, SENTENCE], env, None),
        }
        seconds = {name: [] for name in systems}
        steps = {name: [] for name in systems}
        for round_ in range(args.pairs):
            for name, (argv, system_env, phases) in systems.items():
                if name == "kerasbert ner predict, first of the folder":
                    shutil.rmtree(tmp / "first" / "serving", ignore_errors=True)
                took, out = timed(argv, system_env)
                seconds[name].append(took)
                if name == "SavedModel, first call":
                    steps[name].append(json.loads(out.splitlines()[-1]))
                print(f"round {round_ + 1}: {name}: {took:.2f} s", flush=True)
            for name, (_, system_env, phases) in systems.items():
                if phases:
                    took, out = timed(phases, system_env)
                    steps[name].append(json.loads(out.splitlines()[-1]))
        hf = statistics.median(seconds["hf"])
        rows = []
        for name, (argv, system_env, _) in systems.items():
            if name == "kerasbert ner predict, first of the folder":
                shutil.rmtree(tmp / "first" / "serving", ignore_errors=True)
            row = {"system": name, "seconds": round(statistics.median(seconds[name]), 2),
                   "vs_hf": None if argv in (many, saved_many) else round(statistics.median(seconds[name]) / hf, 2),
                   "peak_mb": round(peak_mb(argv, system_env))}
            for key in ("imports_s", "load_s", "trace_s", "first_call_s"):
                values = [s[key] for s in steps[name] if key in s]
                if values:
                    row[key] = round(statistics.median(values), 2)
            if name == "SavedModel, first call":
                row["nodes"] = exported["nodes"]["serving"]
            rows.append(row)
            print(json.dumps(row), flush=True)
    write_result("first_answer", rows, columns=COLUMNS, setup={
        "sentence": SENTENCE, "pairs": args.pairs,
        "model": args.model or "MiniLM + BiLSTM(64)-CRF, windows of 64, untrained head (the demo's shape)",
        "how": "each system a fresh process timed from start to exit, systems in turn, medians; phases from a "
               "second, instrumented process of the same steps; peak_mb: the process's peak resident memory; "
               "'first of the folder' starts each time with no serving cache entry",
    })


if __name__ == "__main__":
    main()
