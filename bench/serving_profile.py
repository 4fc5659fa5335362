"""Where the NER serving signature spends its time, stage by stage.

Figures, not a test. Each stage of the ``text`` signature
(:meth:`kerasbert_apps.base.pipeline.Pipeline.serve` for the NER tagger) is compiled as
a ``tf.function`` of its own and timed on the inputs the previous stage
produced, at batch 1 (one CoNLL-2003 test sentence per call, as online
requests arrive) and at batch 64:

* ``tokenize``  -- the graph tokenizer: normalization, pre-tokenization,
  WordPiece with offsets (:meth:`GraphTokenizer.tokenize`);
* ``windows``   -- the rest of :meth:`GraphTokenizer.windows` ([CLS]/[SEP],
  cutting long texts): windows minus tokenize;
* ``encoder``, ``bilstm`` (the fused ``BlockLSTMV2`` kernel), ``emissions +
  viterbi`` (Dense layer, CRF Viterbi) -- on the row groups the serving graph
  makes (rows sorted by length, groups of 8, each trimmed to its longest
  row), summed over the groups;
* ``grouping``  -- :func:`kerasbert.serving.rows.by_length` around the model (the
  ``While`` loop, gathers, scatter back) minus the model called on each group;
* ``entities``  -- window merge, BIO -> entities with offsets, entity probabilities;
* ``whole``     -- the signature as exported (``Tagger.serving_function``).

With ``--jit-compile`` the model stages are replaced by one, ``model (XLA)``:
encoder, Keras's BiLSTM and the CRF compiled together by XLA on the padded
shapes of :func:`kerasbert.serving.rows.jit_buckets` (compiled before timing), and
``whole`` is the ``--jit-compile`` export's signature.

The stages are timed apart, so their sum is not exactly ``whole`` (each
``tf.function`` call has its own overhead, ~0.1 ms). Median of ``--repeats``
timed calls per sentence (batch 1) or batch, after a warm-up call; batch 1
is the mean over ``--sentences`` sentences, batch 64 over 4 batches.

    python bench/serving_profile.py [--model RUN/model] [--sentences 64] [--repeats 5] [--jit-compile]

With ``--ops`` it profiles, op by op, the exported SavedModel itself instead
(what TF Serving runs): the signature is called under TensorFlow's profiler
(``tf.profiler.experimental``) and every kernel the executor ran is read back
from the trace (``.xplane.pb``): ops per request, time by op type, and time
by stage from the node names (``windows/``: the graph tokenizer; ops under
``fused_encoder`` or an encoder layer: the encoder; other ``model/`` ops: the
head; the rest: grouping, decoding and entity assembly). Op times are kernel
times on either thread, so they may add up to more than the wall time of a
call on 2 cores. ``--task triples`` profiles a CasRel extractor instead of the
NER tagger; ``--precision bfloat16``, ``--threads`` and ``--intra-threads`` as in
``bench/serving_throughput.py``; ``--keras-layers`` profiles the export as it
was before :mod:`kerasbert.models.fused_encoder`. Writes ``bench/results/serving_profile/``.

    python bench/serving_profile.py --ops [--task ner|triples] [--precision float32|bfloat16] [--threads 2]
"""

import argparse
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.serving_throughput import conll_sentences  # noqa: E402
from bench.serving_throughput import cpu_flags  # noqa: E402
from bench.serving_throughput import export_of  # noqa: E402
from bench.serving_throughput import load_tagger  # noqa: E402
from bench.serving_throughput import starter_folder  # noqa: E402


def stages(tagger, jit_compile):
    """name -> tf.function."""
    import tensorflow as tf

    from kerasbert_apps.ner.decode import crf_parameters
    from kerasbert_apps.ner.decode import entities
    from kerasbert_apps.ner.decode import tag_tables
    from kerasbert_apps.ner.heads.bio.fused_bilstm import fused_bilstm
    from kerasbert_apps.ner.heads.bio.fused_bilstm import graph_scorers
    from kerasbert.serving.rows import by_length
    from kerasbert.serving.rows import jit_buckets
    from kerasbert.serving.rows import nonempty_encoder_inputs

    model, gt = tagger.model, tagger.graph_tokenizer
    text = [tf.TensorSpec([None], tf.string)]
    rows = [{k: tf.TensorSpec([None, None], tf.int32) for k in ("token_ids", "segment_ids", "padding_mask")}]
    bilstm = fused_bilstm(model.lstm)
    scorer = jit_buckets(lambda r: model(r, training=False)) if jit_compile else graph_scorers(model)[0]
    tables = tag_tables(tagger.tags)

    def inputs_of(w):
        return nonempty_encoder_inputs(w, tagger.tokenizer.cls_id, tagger.tokenizer.sep_id)

    def head(sequence, mask):
        potentials = model.emissions(sequence)
        return potentials, model.crf(potentials, mask=tf.cast(mask, tf.bool))

    def decode(texts, w, tags, potentials):
        return entities(texts, w, tags, potentials, tables, crf_parameters(model))

    return {
        "tokenize": tf.function(lambda t: gt.tokenize(t), input_signature=text),
        "windows": tf.function(tagger.windows, input_signature=text),
        "encoder": tf.function(lambda r: model.encoder(r, training=False)["sequence_output"], input_signature=rows),
        "model": tf.function(lambda r: scorer(inputs_of(r)), input_signature=rows),
        "model by_length": tf.function(lambda r: by_length(scorer, inputs_of(r)), input_signature=rows),
        "bilstm": tf.function(lambda x, m: bilstm(x, tf.cast(m, tf.bool))),
        "emissions + viterbi": tf.function(head),
        "entities": tf.function(decode),
        "whole": tagger.serving_function_of(jit_compile),
    }


def median_ms(fn, *args, repeats):
    fn(*args)  # warm-up (traces once per shape class)
    times = []
    for _ in range(repeats):
        began = time.perf_counter()
        fn(*args)
        times.append((time.perf_counter() - began) * 1000)
    return statistics.median(times)


def groups(rows, rows_per_call=8):
    """The row groups :func:`kerasbert.serving.rows.by_length` makes: sorted by
    length (stable), ``rows_per_call`` at a time, trimmed to the longest."""
    import numpy as np

    lengths = rows["padding_mask"].numpy().sum(axis=1)
    order = np.argsort(lengths, kind="stable")
    out = []
    for begin in range(0, len(order), rows_per_call):
        index = order[begin : begin + rows_per_call]
        width = int(lengths[index].max())
        out.append({k: v.numpy()[index, :width] for k, v in rows.items()})
    return out


def profile(tagger, batches, repeats, jit_compile):
    """Mean over ``batches`` (lists of texts) of each stage's median ms per call."""
    import tensorflow as tf

    fns = stages(tagger, jit_compile)
    totals = {}
    for texts in batches:
        t = tf.constant(texts)
        w = fns["windows"](t)
        r = {k: w[k] for k in ("token_ids", "segment_ids", "padding_mask")}
        out = fns["model by_length"](r)
        times = {
            "tokenize": median_ms(fns["tokenize"], t, repeats=repeats),
            "windows": median_ms(fns["windows"], t, repeats=repeats),
            "model by_length": median_ms(fns["model by_length"], r, repeats=repeats),
            "entities": median_ms(fns["entities"], t, w, out["tags"], out["potentials"], repeats=repeats),
            "whole": median_ms(fns["whole"], t, repeats=repeats),
        }
        for group in groups(r):
            group = {k: tf.constant(v) for k, v in group.items()}
            parts = {"model": median_ms(fns["model"], group, repeats=repeats)}
            if not jit_compile:
                mask = group["padding_mask"]
                sequence = fns["encoder"](group)
                x = fns["bilstm"](sequence, mask)
                parts["encoder"] = median_ms(fns["encoder"], group, repeats=repeats)
                parts["bilstm"] = median_ms(fns["bilstm"], sequence, mask, repeats=repeats)
                parts["emissions + viterbi"] = median_ms(fns["emissions + viterbi"], x, mask, repeats=repeats)
            for key, value in parts.items():
                times[key] = times.get(key, 0.0) + value
        for key, value in times.items():
            totals[key] = totals.get(key, 0.0) + value / len(batches)
    model_stages = ["model (XLA)"] if jit_compile else ["encoder", "bilstm", "emissions + viterbi"]
    out = {"tokenize": totals["tokenize"], "windows": totals["windows"] - totals["tokenize"]}
    if jit_compile:
        out["model (XLA)"] = totals["model"]
    else:
        out.update({k: totals[k] for k in model_stages})
    out.update(grouping=totals["model by_length"] - totals["model"], entities=totals["entities"], whole=totals["whole"])
    return out


def trace_ops(call, calls, logdir):
    """Run ``call()`` ``calls`` times under TensorFlow's profiler; returns
    ``[(node name, op type, ms)]`` of every kernel it ran, per call."""
    import glob
    import shutil

    import tensorflow as tf

    try:
        from tsl.profiler.protobuf import xplane_pb2
    except ImportError:
        from tensorflow.tsl.profiler.protobuf import xplane_pb2

    shutil.rmtree(logdir, ignore_errors=True)
    tf.profiler.experimental.start(logdir)
    for _ in range(calls):
        call()
    tf.profiler.experimental.stop()
    space = xplane_pb2.XSpace()
    space.ParseFromString(Path(sorted(glob.glob(f"{logdir}/**/*.xplane.pb", recursive=True))[-1]).read_bytes())
    events = []
    for plane in space.planes:
        for line in plane.lines:
            if line.name == "python":
                continue
            for event in line.events:
                name = plane.event_metadata[event.metadata_id].name
                if ":" in name and not name.startswith("Threadpool"):
                    node, op = name.rsplit(":", 1)
                    events.append((node, op, event.duration_ps / 1e9 / calls))
    return events


def stage_of(node):
    if node.startswith("windows/") or "/windows/" in node:
        return "windows (tokenizer)"
    if "fused_encoder" in node or "_encoder/" in node or "transformer_layer" in node:
        return "encoder"
    if node.startswith("model/") or "/model/" in node:
        return "head"
    return "grouping, decoding, assembly"


def op_profile(serve, batches, calls, logdir):
    """Wall time per call (median) and the op table of ``serve`` over ``batches``."""
    import tensorflow as tf

    inputs = [tf.constant(b) for b in batches]
    for t in inputs:
        serve(text=t)
    walls = []
    for _ in range(3):
        for t in inputs:
            began = time.perf_counter()
            serve(text=t)
            walls.append((time.perf_counter() - began) * 1000)
    state = {"i": 0}

    def one():
        serve(text=inputs[state["i"] % len(inputs)])
        state["i"] += 1

    return {"wall_ms_p50": statistics.median(walls), **op_table(trace_ops(one, calls, logdir), calls, stage_of)}


def op_table(events, calls, stage_of, top=20):
    """The kernels of :func:`trace_ops` summed per call: ``ops_per_call``,
    ``op_ms``, ``by_stage_ms`` (``stage_of(node name)``), ``by_op_ms`` and
    ``op_counts`` (the ``top`` op types)."""
    import collections

    by_op, count, by_stage = collections.Counter(), collections.Counter(), collections.Counter()
    for node, op, ms in events:
        if op in ("Process", "_Arg", "_Retval", "NoOp", "Const"):
            continue
        by_op[op] += ms
        count[op] += 1 / calls
        by_stage[stage_of(node)] += ms
    return {"ops_per_call": round(sum(count.values())), "op_ms": round(sum(by_op.values()), 3),
            "by_stage_ms": {k: round(v, 3) for k, v in by_stage.most_common()},
            "by_op_ms": {k: round(v, 3) for k, v in by_op.most_common(top)},
            "op_counts": {k: round(count[k]) for k, _ in by_op.most_common(top)}}


def print_op_table(result, ops=12, width=30):
    for stage, ms in result["by_stage_ms"].items():
        print(f"  stage {stage:<{width}}{ms:9.3f} ms")
    for op, ms in list(result["by_op_ms"].items())[:ops]:
        print(f"  op    {op:<{width}}{ms:9.3f} ms  x{result['op_counts'][op]}")


def untrained_extractor():
    """MiniLM with an untrained CasRel head (the same shapes, so the same speed)."""
    import kerasbert
    from kerasbert_apps.triples.heads.casrel.pipeline import Extractor
    from kerasbert_apps.triples.heads.casrel.model import TripleModel

    folder = starter_folder()
    predicates = ["born_in", "works_for", "located_in", "capital_of"]
    model = TripleModel(kerasbert.load_encoder(folder), len(predicates))
    return Extractor(model, kerasbert.load_tokenizer(folder), predicates), "MiniLM encoder + untrained CasRel head"


def ops_main(args):
    import tempfile

    import tensorflow as tf

    sys.path.insert(0, str(ROOT / "bench"))
    from results import flags_line
    from results import write_result

    intra = args.threads if args.intra_threads is None else args.intra_threads
    tf.config.threading.set_intra_op_parallelism_threads(intra)
    tf.config.threading.set_inter_op_parallelism_threads(args.threads)
    pipeline, what = untrained_extractor() if args.task == "triples" else load_tagger(args.model)
    export = export_of(pipeline.with_precision(args.precision), Path(tempfile.mkdtemp()) / args.task,
                       "head" if args.head_compiled else False, args.keras_layers)
    if args.keras_layers:
        what += ", encoder as Keras layers (before kerasbert.models.fused_encoder)"
    serve = tf.saved_model.load(str(export)).signatures["serving_default"]
    sentences = conll_sentences(max(args.sentences, 64))
    print(flags_line())
    head = " --jit-compile head" if args.head_compiled else ""
    print(f"{args.task}: {what}; export --precision {args.precision}{head}; intra-op threads {intra}, "
          f"inter-op threads {args.threads}")
    rows = []
    for label, batches in (("batch 1", [[s] for s in sentences[: args.sentences]]), ("batch 64", [sentences[:64]])):
        result = op_profile(serve, batches, args.sentences if label == "batch 1" else 5, tempfile.mkdtemp())
        print(f"\n{label}: {result['wall_ms_p50']:.2f} ms per call (median), {result['ops_per_call']} ops per call, "
              f"{result['op_ms']:.2f} ms of kernel time")
        print_op_table(result)
        encoder = "Keras layers (before)" if args.keras_layers else "fused"
        rows.append({"part": f"{args.task}, {args.precision}{head}, {encoder}, intra-op threads {intra}",
                     "task": args.task, "precision": args.precision, "intra_op": intra, "inter_op": args.threads,
                     "encoder": encoder,
                     "batch": label,
                     **result})
    write_result("serving_profile", rows, setup={"model": what, "sentences": args.sentences,
                                                  "how": "TF profiler trace of the SavedModel's signature"},
                 name=f"{args.task}-{args.precision}{'-head' if args.head_compiled else ''}-intra{intra}"
                      f"{'-keras' if args.keras_layers else ''}",
                 columns=("batch", "wall_ms_p50", "ops_per_call", "op_ms", "by_stage_ms", "by_op_ms"))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", help="trained tagger folder (default: MiniLM + untrained head, same shapes)")
    parser.add_argument("--sentences", type=int, default=64, help="batch-1 calls: this many CoNLL test sentences")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--jit-compile", action="store_true", help="profile the --jit-compile export's path")
    parser.add_argument("--ops", action="store_true", help="op-level profile of the exported SavedModel")
    parser.add_argument("--task", choices=("ner", "triples"), default="ner", help="with --ops: which export")
    parser.add_argument("--precision", choices=("float32", "bfloat16"), default="float32", help="with --ops")
    parser.add_argument("--threads", type=int, default=os.cpu_count(), help="with --ops: inter-op threads")
    parser.add_argument("--intra-threads", type=int, help="with --ops: intra-op threads (default: --threads)")
    parser.add_argument("--head-compiled", action="store_true",
                        help="with --ops: profile the export with --jit-compile head (NER)")
    parser.add_argument("--keras-layers", action="store_true",
                        help="with --ops: the encoder traced as its Keras layers (the export before fused_encoder)")
    args = parser.parse_args()
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    if args.ops:
        return ops_main(args)

    sentences = conll_sentences(max(args.sentences, 64 * 4))
    tagger, what = load_tagger(args.model)
    print(f"machine: {platform.machine()}, {os.cpu_count()} CPU cores, flags {' '.join(cpu_flags()) or '-'}, "
          f"{platform.platform()}\nmodel: {what}; jit_compile {args.jit_compile}")
    results = {}
    results["batch 1"] = profile(tagger, [[s] for s in sentences[: args.sentences]], args.repeats, args.jit_compile)
    results["batch 64"] = profile(tagger, [sentences[i : i + 64] for i in range(0, 256, 64)], args.repeats,
                                  args.jit_compile)
    print(f"\n{'stage':<22}{'batch 1 ms':>12}{'batch 64 ms':>13}")
    for stage in results["batch 1"]:
        print(f"{stage:<22}{results['batch 1'][stage]:>12.2f}{results['batch 64'][stage]:>13.1f}")
    print("RESULT " + json.dumps({"flags": cpu_flags(), "jit_compile": args.jit_compile, **results}))


if __name__ == "__main__":
    main()
