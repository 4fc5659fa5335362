"""Where a serving request spends its time: the exported SavedModel profiled op by op.

Figures, not a test. An export's ``text`` signature is called under TensorFlow's profiler and every
kernel read back from the trace: ops per call, time by op type and by stage (:func:`stage_of`), at
batch 1 (a CoNLL-2003 test sentence a call) and 64, beside the median wall time per call; kernel
times are summed over threads. ``--task triples`` profiles a CasRel extractor instead.

    python -m bench.serving_profile [--model RUN/model] [--task ner|triples] [--precision float32|bfloat16] [--threads 2]
"""

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path

from bench.common import flags_line
from bench.common import starter_folder
from bench.common import write_result
from bench.serving_throughput import conll_sentences
from bench.serving_throughput import export_of
from bench.serving_throughput import load_tagger


def trace_ops(call, calls, logdir):
    """``[(node name, op type, ms per call)]`` of every kernel of ``calls`` calls ``call()`` under TensorFlow's profiler."""
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
    """:func:`trace_ops`'s kernels summed per call: ``ops_per_call``, ``op_ms``, ``by_stage_ms``
    (``stage_of(node name)``), ``by_op_ms`` and ``op_counts`` (the ``top`` op types)."""
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


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", help="trained tagger folder (default: MiniLM + untrained head, same shapes)")
    parser.add_argument("--sentences", type=int, default=64, help="batch-1 calls: this many CoNLL test sentences")
    parser.add_argument("--task", choices=("ner", "triples"), default="ner", help="triples: an untrained CasRel extractor")
    parser.add_argument("--precision", choices=("float32", "bfloat16"), default="float32")
    parser.add_argument("--threads", type=int, default=os.cpu_count(), help="inter-op threads")
    parser.add_argument("--intra-threads", type=int, help="intra-op threads (default: --threads)")
    parser.add_argument("--head-compiled", action="store_true", help="the export with --jit-compile head (NER)")
    parser.add_argument("--keras-layers", action="store_true", help="the encoder traced as Keras layers (as before "
                        "kerasbert.models.fused_encoder)")
    args = parser.parse_args()
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    import tensorflow as tf

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
                     "encoder": encoder, "batch": label, **result})
    write_result("serving_profile", rows, setup={"model": what, "sentences": args.sentences,
                                                  "how": "TF profiler trace of the SavedModel's signature"},
                 name=f"{args.task}-{args.precision}{'-head' if args.head_compiled else ''}-intra{intra}"
                      f"{'-keras' if args.keras_layers else ''}",
                 columns=("batch", "wall_ms_p50", "ops_per_call", "op_ms", "by_stage_ms", "by_op_ms"))


if __name__ == "__main__":
    main()
