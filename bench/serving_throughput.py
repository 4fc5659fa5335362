"""Serving throughput: the exported NER SavedModel vs the Hugging Face pipeline.

Figures, not a test. Every system runs in this process on the CPU, on CoNLL-2003 test sentences
(eng.testb, the words joined by spaces as a client sends them); TensorFlow with ``--intra-threads``
intra-op threads (default 1: measured faster on 2 cores at every batch size) and ``--threads``
inter-op threads (TF Serving's two settings), PyTorch with ``--threads`` threads. Throughput:
sentences/s per batch size, the median of ``--repeats`` passes after a warm-up pass; latency at
batch 1: p50 and p99 of single-sentence calls, taken after every system's throughput, in
``--latency-blocks`` blocks that alternate between the systems of this process (each block a slice
of the latency sentences, every system's turn after a few calls not timed, the order rotated from
block to block), so that a slow drift of the machine's speed during the run reaches every system
alike and the ratios between them hold. The optimum peer runs in its own environment, hence its
own process, in one block. The systems (``--systems``):

* ``kerasbert``: ``Tagger.export``'s SavedModel (text signature: in-graph tokenization, windows, CRF
  Viterbi, entity assembly), its ``serving_default`` called in-process with a string batch. Suffixes:
  ``-jit`` (``export --jit-compile``; its warm-up requests replayed first, as TF Serving does at
  load), ``-head`` (``--jit-compile head``: the head after the encoder compiled by XLA), ``-bf16``
  (``--precision bfloat16``), ``-keras`` (the encoder traced as Keras layers, as before
  :mod:`kerasbert.models.fused_encoder`); ``student...``: the same of ``--student`` (without it, an
  untrained ``--student-layers`` student of ``--model``);
* ``kerasbert-onnx``: the ``ner export --format onnx`` folder run by ONNX Runtime
  (``kerasbert_apps.ner.load(export, engine="onnx").predict``), and ``first_call_ms``: a fresh
  process loads it (``load_ms``) and answers one sentence; ``kerasbert-onnx-int8``: the same
  exported with ``--precision int8``;
* ``hf`` (``hf-1``: one thread): ``transformers.pipeline("ner", aggregation_strategy="simple")`` on
  ``BertForTokenClassification`` with the same MiniLM weights and an untrained 9-label head;
* ``optimum``: optimum-onnx's ``ORTModelForTokenClassification`` in the same pipeline, the strongest
  CPU peer a user would pick, in an environment of its own (``--optimum-python``: ``python -m venv
  ENV && ENV/bin/pip install "optimum-onnx[onnxruntime]" torch==2.13.0``).

``--model``: a trained tagger folder (default: MiniLM with an untrained BiLSTM-CRF head, the same
shapes, so the same speed). A ``-bf16`` or ONNX system also gives ``agreement_with_float32``: its
entities on ``--agreement-sentences`` test sentences against the float32 export's of the same model
(identical entities over the union), and with ``--model`` ``test_f1``: its entities' F1 on those
sentences by ``ner evaluate``'s scorer (the float32 SavedModel's beside it).

    python -m bench.serving_throughput [--model RUN/model] [--student RUN/model] [--systems kerasbert,kerasbert-jit,hf]
        [--sentences 512] [--repeats 3] [--latency-blocks 4] [--threads N] [--intra-threads 1]
        [--optimum-python ENV/bin/python]
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.common import CONLL
from bench.common import ROOT
from bench.common import cpu
from bench.common import flags_line
from bench.common import starter_folder
from bench.common import untrained_tagger
from bench.common import write_result

BATCHES = (1, 8, 64)
#: What the docs' table shows of a run (the record keeps every key).
COLUMNS = ("system", "precision", "p50_ms", "p99_ms", "batch_1_sent_per_s", "batch_8_sent_per_s",
           "batch_64_sent_per_s", "first_call_ms", "p50_vs_hf", "batch_64_vs_hf", "p50_vs_optimum",
           "batch_64_vs_optimum", "batch_64_vs_float32", "agreement_with_float32", "test_f1")
#: The ONNX systems and the precision each exports in.
ONNX_SYSTEMS = {"kerasbert-onnx": "float32", "kerasbert-onnx-int8": "int8"}
#: A fresh process: load an ONNX export, answer one sentence (``first_call_ms``).
FIRST_CALL = """
import json, sys, time
began = time.perf_counter()
from kerasbert_apps.ner import load
serve = load(sys.argv[1], engine="onnx").predict
loaded = time.perf_counter()
serve(["Peter Blackburn visited Paris."])
done = time.perf_counter()
print("FIRST " + json.dumps({"load_ms": (loaded - began) * 1000, "first_call_ms": (done - loaded) * 1000}))
"""


def conll_examples(n):
    from kerasbert_apps.ner.readers import read_ner_file

    return [e for e in read_ner_file(CONLL / "eng.testb").examples if e.text.strip()][:n]


def conll_sentences(n):
    return [e.text for e in conll_examples(n)]


def test_f1(found, n):
    """The F1 of the entity set ``found`` (``(sentence index, start, end, type)``) on the first ``n``
    test sentences, by the kit's scorer (seqeval's, as ``ner evaluate`` scores)."""
    from kerasbert_apps.ner.train import NER

    examples = conll_examples(n)
    predictions = [{"entities": []} for _ in examples]
    for i, start, end, kind in sorted(found):
        predictions[i]["entities"].append({"start": start, "end": end, "type": kind})
    return NER.score(examples, predictions)["f1"]


def throughput(call, sentences, batch, repeats):
    def one_pass():
        began = time.perf_counter()
        for b in range(0, len(sentences), batch):
            call(sentences[b : b + batch])
        return len(sentences) / (time.perf_counter() - began)

    one_pass()  # warmup: graph/kernels initialised, caches filled
    return statistics.median(one_pass() for _ in range(repeats))


def single_call_ms(call, sentences):
    """The wall time (ms) of ``call([s])`` for each of ``sentences``."""
    times = []
    for s in sentences:
        began = time.perf_counter()
        call([s])
        times.append((time.perf_counter() - began) * 1000)
    return times


def percentiles(times):
    """``{"p50_ms", "p99_ms"}`` of single-call times."""
    times = sorted(times)
    return {"p50_ms": times[len(times) // 2], "p99_ms": times[min(len(times) - 1, int(len(times) * 0.99))]}


def latencies(call, sentences):
    """p50 and p99 of single-sentence calls, one block (after one call not timed)."""
    call(sentences[:1])
    return percentiles(single_call_ms(call, sentences))


def alternating_latencies(calls, sentences, blocks, warmup=5):
    """p50 and p99 per system of ``calls`` (name -> batch-1 call) over ``sentences``, taken in
    ``blocks`` blocks that alternate between the systems: block ``b`` times every system on the
    ``b``-th slice of the sentences, the systems' order rotated by one each block, after
    ``warmup`` calls not timed (the previous system's worker threads stop spinning, this one's
    caches fill)."""
    names, blocks = list(calls), max(blocks, 1)
    times = {name: [] for name in names}
    size = -(-len(sentences) // blocks)
    for b in range(blocks):
        part = sentences[b * size : (b + 1) * size]
        for name in names[b % len(names):] + names[: b % len(names)]:
            for _ in range(warmup):
                calls[name](part[:1])
            times[name] += single_call_ms(calls[name], part)
    return {name: percentiles(t) for name, t in times.items() if t}


def speeds(call, sentences, args):
    """Sentences/s at each of :data:`BATCHES`, and ``call`` itself, under ``"batch_1_call"``, for
    the latencies (:func:`alternating_latencies`, after every system's throughput)."""
    rates = {f"batch_{batch}_sent_per_s": throughput(call, sentences, batch, args.repeats) for batch in BATCHES}
    return {**rates, "batch_1_call": call}


def load_tagger(model, student_layers=None):
    """``(Tagger, description)``: the tagger folder ``model``, or :func:`~bench.common.untrained_tagger`;
    with ``student_layers``, its student with that many encoder layers, evenly spread (the shape of
    ``kerasbert ner distill``'s students)."""
    from kerasbert_apps.ner.heads.bio.pipeline import Tagger

    if student_layers:
        teacher, what = load_tagger(model)
        total = teacher.model.encoder.num_layers
        layers = [round(i * (total - 1) / max(student_layers - 1, 1)) for i in range(student_layers)]
        return teacher.student(layers), f"{student_layers}-layer student (teacher layers {layers}) of the {what}"
    if model:
        return Tagger.load(model), f"trained tagger {model}"
    return untrained_tagger(), "MiniLM encoder + untrained BiLSTM-CRF head"


def tagger_of(args, which):
    """:func:`load_tagger` of ``which`` system: ``kerasbert`` (``--model``) or ``student``."""
    if which == "student":
        return load_tagger(args.student) if args.student else load_tagger(args.model, args.student_layers)
    return load_tagger(args.model)


def parse_system(name):
    """``(model, jit_compile, precision)`` of a system name: ``kerasbert`` or ``student``, then ``-jit``
    or ``-head``, ``-bf16`` and/or ``-keras``."""
    parts = name.split("-")
    if parts[0] not in ("kerasbert", "student") or not set(parts[1:]) <= {"jit", "head", "bf16", "keras"}:
        raise ValueError(name)
    jit_compile = "head" if "head" in parts[1:] else "jit" in parts[1:]
    return parts[0], jit_compile, "bfloat16" if "bf16" in parts[1:] else "float32"


def export_of(tagger, folder, jit_compile, keras_layers):
    """``tagger.export(folder)``; with ``keras_layers``, the encoder traced as its Keras layers."""
    import kerasbert.models.fused_encoder as fused

    original = fused.graph_call
    if keras_layers:
        fused.graph_call = lambda *args: None
    try:
        return tagger.export(folder, jit_compile=jit_compile)
    finally:
        fused.graph_call = original


def bench_kerasbert(args, sentences, system):
    """One kerasbert export, timed; a bfloat16 one also returns its ``entities`` (agreement sentences)."""
    import tensorflow as tf

    which, jit_compile, precision = parse_system(system)
    tf.config.threading.set_intra_op_parallelism_threads(args.intra_threads)
    tf.config.threading.set_inter_op_parallelism_threads(args.threads)
    tagger, what = tagger_of(args, which)
    export = export_of(tagger.with_precision(precision), Path(tempfile.mkdtemp()) / "ner", jit_compile,
                       "keras" in system.split("-"))
    serve = tf.saved_model.load(str(export)).signatures["serving_default"]

    def call(texts):
        return serve(text=tf.constant(texts))["count"].numpy()

    options = ((" --jit-compile head" if jit_compile == "head" else " --jit-compile" if jit_compile else "")
               + (f" --precision {precision}" if precision != "float32" else ""))
    if "keras" in system.split("-"):
        options += ", Keras layers (before)"
    layers = int(tagger.model.encoder.num_layers)
    result = {"system": f"{which} ({layers} layers) SavedModel{options} (in-process call)", "name": system,
              "intra_op_threads": args.intra_threads, "inter_op_threads": args.threads,
              "model": what, "encoder_layers": layers, "precision": precision,
              "jit_compile": jit_compile, "flags": cpu()["flags"]}
    if jit_compile:
        from kerasbert.serving.saved_model import read_warmup

        began = time.perf_counter()
        for request in read_warmup(export):  # what TF Serving does at load
            call([t.decode("utf-8") for t in request.inputs["text"].string_val])
        result["warmup_compile_s"] = time.perf_counter() - began
    result.update(speeds(call, sentences, args))
    if precision != "float32":
        result["entities"] = served_entities(serve, conll_sentences(args.agreement_sentences))
    return result


def bench_kerasbert_entities(args, which):
    """The entities of the plain float32 export of ``which`` (kerasbert or student) on the agreement sentences."""
    import tensorflow as tf

    export = tagger_of(args, which)[0].export(Path(tempfile.mkdtemp()) / "ner")
    serve = tf.saved_model.load(str(export)).signatures["serving_default"]
    return served_entities(serve, conll_sentences(args.agreement_sentences))


def served_entities(serve, texts, batch=64):
    """The set of ``(text index, start, end, type)`` an export finds in ``texts``."""
    import tensorflow as tf

    found = set()
    for b in range(0, len(texts), batch):
        out = serve(text=tf.constant(texts[b:b + batch]))
        for i, n in enumerate(out["count"].numpy()):
            for k in range(n):
                found.add((b + i, int(out["start"][i, k]), int(out["end"][i, k]), out["type"][i, k].numpy().decode()))
    return found


def bench_hf(args, sentences, system="hf"):
    import torch
    from transformers import AutoTokenizer
    from transformers import BertForTokenClassification
    from transformers import pipeline

    threads = 1 if system == "hf-1" else args.threads
    torch.set_num_threads(threads)
    folder = starter_folder()
    model = BertForTokenClassification.from_pretrained(folder, num_labels=9).eval()
    tokenizer = AutoTokenizer.from_pretrained(folder)
    result = {"system": f"HF pipeline('ner', aggregation_strategy='simple'), PyTorch {torch.__version__}, "
                        f"{threads} thread{'s' if threads > 1 else ''}", "name": system, "torch_threads": threads,
              "model": "MiniLM encoder + untrained token-classification head", "flags": cpu()["flags"]}
    for batch in BATCHES:
        ner = pipeline("ner", model=model, tokenizer=tokenizer, aggregation_strategy="simple", device=-1,
                       batch_size=batch)

        def call(texts, ner=ner):
            with torch.inference_mode():
                return ner(texts)

        result[f"batch_{batch}_sent_per_s"] = throughput(call, sentences, batch, args.repeats)
        if batch == 1:
            result["batch_1_call"] = call
    return result


def first_call(folder, threads):
    """``{"load_ms", "first_call_ms"}`` of the ONNX export ``folder`` in a fresh process (median of three)."""
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", OMP_NUM_THREADS=str(threads))
    runs = []
    for _ in range(3):
        done = subprocess.run([sys.executable, "-c", FIRST_CALL, str(folder)], capture_output=True,
                              text=True, env=env, cwd=ROOT, check=True)
        runs.append(json.loads(next(l for l in done.stdout.splitlines() if l.startswith("FIRST "))[6:]))
    return {k: statistics.median(r[k] for r in runs) for k in runs[0]}


def bench_onnx(args, sentences, system="kerasbert-onnx"):
    """The tagger's ONNX export (in the system's precision) run by ONNX Runtime, timed, with its
    entities on the agreement sentences."""
    import onnxruntime

    from kerasbert_apps.base.onnx_export import export_onnx
    from kerasbert_apps.ner import load

    tagger, what = load_tagger(args.model)
    precision = ONNX_SYSTEMS[system]
    export = export_onnx(tagger, Path(tempfile.mkdtemp()) / "ner", precision=precision)
    engine = load(export, engine="onnx")

    def call(texts):
        return engine.predict(texts, batch_size=len(texts))

    options = " --precision int8" if precision == "int8" else ""
    result = {"system": f"kerasbert ONNX export{options}, ONNX Runtime {onnxruntime.__version__} (in-process "
                        "predict)", "name": system, "model": what, "precision": precision, "jit_compile": False,
              "flags": cpu()["flags"], "export": "onnx", "export_mb": (export / "model.onnx").stat().st_size / 2**20,
              **speeds(call, sentences, args)}
    result.update(first_call(export, args.threads))
    found = set()
    texts = conll_sentences(args.agreement_sentences)
    for b in range(0, len(texts), 64):
        for i, row in enumerate(engine.predict(texts[b:b + 64], batch_size=64)):
            found.update((b + i, e["start"], e["end"], e["type"]) for e in row["entities"])
    result["entities"] = found
    return result


def bench_optimum(args, sentences):
    """The optimum-onnx peer: this module run by ``--optimum-python`` with ``--as-optimum-peer`` on a HF
    folder written here (the ``hf`` model) and the same sentences."""
    if not args.optimum_python:
        raise SystemExit("the optimum system needs --optimum-python (see the module docstring)")
    from transformers import BertForTokenClassification

    from transformers import AutoTokenizer

    folder = Path(tempfile.mkdtemp()) / "hf-ner"
    BertForTokenClassification.from_pretrained(starter_folder(), num_labels=9).save_pretrained(folder)
    AutoTokenizer.from_pretrained(starter_folder()).save_pretrained(folder)
    (folder / "sentences.json").write_text(json.dumps(sentences), encoding="utf-8")
    command = [args.optimum_python, "-m", "bench.serving_throughput", "--as-optimum-peer", str(folder),
               "--latency-sentences", str(args.latency_sentences),
               "--repeats", str(args.repeats), "--threads", str(args.threads)]
    done = subprocess.run(command, capture_output=True, text=True, cwd=ROOT)
    if done.returncode:
        raise SystemExit(f"the optimum peer failed: {done.stderr.strip().splitlines()[-1:]}")
    return json.loads(next(l for l in done.stdout.splitlines() if l.startswith("RESULT "))[7:])


def optimum_peer(args, sentences):
    """In the optimum environment: ``ORTModelForTokenClassification`` of ``--as-optimum-peer`` in ``pipeline("ner")``."""
    import onnxruntime
    import optimum.onnxruntime
    import transformers
    from transformers import AutoTokenizer
    from transformers import pipeline

    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = args.threads
    model = optimum.onnxruntime.ORTModelForTokenClassification.from_pretrained(
        args.as_optimum_peer, export=True, session_options=options)
    tokenizer = AutoTokenizer.from_pretrained(args.as_optimum_peer)
    result = {"system": f"optimum-onnx ORTModelForTokenClassification in pipeline('ner'), ONNX Runtime "
                        f"{onnxruntime.__version__}, transformers {transformers.__version__}", "name": "optimum",
              "model": "MiniLM encoder + untrained token-classification head", "flags": cpu()["flags"]}
    for batch in BATCHES:
        ner = pipeline("ner", model=model, tokenizer=tokenizer, aggregation_strategy="simple", batch_size=batch)
        result[f"batch_{batch}_sent_per_s"] = throughput(ner, sentences, batch, args.repeats)
        if batch == 1:
            result.update(latencies(ner, sentences[: args.latency_sentences]))
    print("RESULT " + json.dumps(result))


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", help="trained tagger folder (default: MiniLM + untrained head)")
    parser.add_argument("--sentences", type=int, default=512)
    parser.add_argument("--latency-sentences", type=int, default=300)
    parser.add_argument("--latency-blocks", type=int, default=4,
                        help="blocks the latency sentences are cut into, alternating between this process's "
                        "systems (default: %(default)s)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=os.cpu_count(),
                        help="TensorFlow inter-op threads and PyTorch threads (default: all cores)")
    parser.add_argument("--intra-threads", type=int, default=1, help="TensorFlow intra-op threads (default 1)")
    parser.add_argument("--systems", default="kerasbert,kerasbert-jit,hf",
                        help="comma-separated: hf, hf-1, optimum, kerasbert-onnx, kerasbert-onnx-int8, and kerasbert "
                        "or student followed "
                        "by -jit or -head, -bf16 and/or -keras, e.g. kerasbert,kerasbert-bf16,student-jit,hf")
    parser.add_argument("--student", help="a second tagger folder (e.g. a distilled student) for the student* systems")
    parser.add_argument("--student-layers", type=int, default=3,
                        help="without --student: an untrained student of --model with this many encoder layers")
    parser.add_argument("--agreement-sentences", type=int, default=3453,
                        help="test sentences of the agreement with float32 (default: all %(default)s)")
    parser.add_argument("--optimum-python", help="the Python of an environment with optimum-onnx (the optimum system)")
    parser.add_argument("--as-optimum-peer", help=argparse.SUPPRESS)  # the child process of the optimum system
    args = parser.parse_args()
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    if args.as_optimum_peer:
        return optimum_peer(args, json.loads((Path(args.as_optimum_peer) / "sentences.json").read_text("utf-8")))
    sentences = conll_sentences(args.sentences)
    words = sum(len(s.split()) for s in sentences) / len(sentences)
    print(f"{flags_line()}; TensorFlow intra-op threads {args.intra_threads}, "
          f"inter-op threads {args.threads}; PyTorch threads {args.threads} (hf) or 1 (hf-1)")
    print(f"data: {len(sentences)} CoNLL-2003 test sentences ({words:.1f} words on average); "
          f"throughput = median of {args.repeats} passes after a warmup pass; latency over "
          f"{min(args.latency_sentences, len(sentences))} single-sentence calls in {args.latency_blocks} blocks "
          "alternating between the systems")
    systems = args.systems.split(",")
    for system in systems:
        try:
            system in ("hf", "hf-1", "optimum", *ONNX_SYSTEMS) or parse_system(system)
        except ValueError:
            parser.error(f"unknown system {system!r}")
    results = []
    float32_entities = {}
    for system in systems:
        if system in ("hf", "hf-1"):
            result = bench_hf(args, sentences, system)
        elif system == "optimum":
            result = bench_optimum(args, sentences)
        else:
            onnx = system in ONNX_SYSTEMS
            result = bench_onnx(args, sentences, system) if onnx else bench_kerasbert(args, sentences, system)
            which, _, precision = parse_system("kerasbert" if onnx else system)
            found = result.pop("entities", None)
            if found is not None:
                if which not in float32_entities:
                    float32_entities[which] = bench_kerasbert_entities(args, which)
                reference = float32_entities[which]
                result["agreement"] = {
                    "sentences": args.agreement_sentences, "float32_entities": len(reference),
                    "identical_entities": len(reference & found), "entities": len(found),
                    "share_identical": len(reference & found) / max(len(reference | found), 1),
                }
                result["agreement_with_float32"] = result["agreement"]["share_identical"]
                if args.model and which == "kerasbert":  # a trained tagger: its F1 beside float32's
                    result["test_f1"] = test_f1(found, args.agreement_sentences)
                    result["agreement"]["float32_test_f1"] = test_f1(reference, args.agreement_sentences)
        results.append(result)
    calls = {i: r.pop("batch_1_call") for i, r in enumerate(results) if "batch_1_call" in r}
    timed = alternating_latencies(calls, sentences[: args.latency_sentences], args.latency_blocks)
    for i, figures in timed.items():
        results[i].update(figures)
    for result in results:
        print("RESULT " + json.dumps(result))
    hf = next((r for r in results if r.get("name") == "hf"), None) or next((r for r in results if r.get("name") == "hf-1"), None)
    peer = next((r for r in results if r.get("name") == "optimum"), None)
    for r in results:
        for name, other in (("hf", hf), ("optimum", peer)):
            if other and r is not other:
                r[f"p50_vs_{name}"] = r["p50_ms"] / other["p50_ms"]
                r[f"batch_64_vs_{name}"] = r["batch_64_sent_per_s"] / other["batch_64_sent_per_s"]
        plain = next((p for p in results if p.get("model") == r.get("model") and p.get("precision") == "float32"
                      and p.get("jit_compile") == r.get("jit_compile")
                      and ("keras" in p.get("name", "")) == ("keras" in r.get("name", ""))), None)
        if r.get("name") in float32_entities and args.model:  # the float32 SavedModel: its F1 as the others'
            r["test_f1"] = test_f1(float32_entities[r["name"]], args.agreement_sentences)
        if r.get("precision") == "bfloat16" and plain:
            r["batch_64_vs_float32"] = r["batch_64_sent_per_s"] / plain["batch_64_sent_per_s"]
            r["p50_vs_float32"] = r["p50_ms"] / plain["p50_ms"]
    write_result("serving_throughput", results, setup={
        "sentences": len(sentences), "words_per_sentence": round(words, 1), "repeats": args.repeats,
        "latency_sentences": min(args.latency_sentences, len(sentences)), "latency_blocks": args.latency_blocks,
        "latency": "p50/p99 of single-sentence calls, in blocks alternating between the systems of this process "
                   "(the optimum peer: its own process, one block)", "model": args.model or "untrained head",
        "student": args.student, "tensorflow_intra_op_threads": args.intra_threads,
        "tensorflow_inter_op_threads": args.threads}, columns=COLUMNS)


if __name__ == "__main__":
    main()
