"""The encoder alone, every runtime on the same CPU: the floor a serving graph sits on.

Figures, not a test. The starter's MiniLM encoder (the same weights everywhere) at batch 1 x 20
tokens (p50, p90 of ``--calls`` calls) and 64 x 32 (sentences/s, median of ``--runs``), in this
process: ``tf-keras`` (its Keras layers in a ``tf.function``), ``tf-fused``
(:mod:`kerasbert.models.fused_encoder`), ``-bf16`` (under the ``bfloat16`` policy), ``-const`` (weights
traced as constants, as every export runs), ``tf-keras-xla``; ``torch``, ``torch-bf16`` (Hugging
Face ``BertModel``) and ``ort`` (ONNX Runtime), with all cores and one thread (``-1t``).

Each row also gives the arithmetic rate it reached (the encoder's multiply-adds per call, counted
from its configuration, over the time) and that rate as a share of the same cores' rate on one large
float32 matrix product (``torch.mm`` of two 1024 x 1024 matrices, the best of a few): how far a
runtime is from what these cores do at all in float32.

    python -m bench.encoder_floor [--calls 200] [--runs 10] [--intra-threads 1]
"""

import argparse
import os
import statistics
import tempfile
from pathlib import Path

from bench.common import flags_line
from bench.common import hf_inputs
from bench.common import random_inputs
from bench.common import starter_folder
from bench.common import times_ms
from bench.common import write_result

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

SHAPES = {"batch 1 x 20": (1, 20), "batch 64 x 32": (64, 32)}


def encoder_flops(encoder, batch, length):
    """Floating-point operations of one call of ``encoder`` on ``batch`` rows of ``length`` tokens
    (two per multiply-add): its four attention projections and two feed-forward products per layer,
    and attention's two products over the tokens; embeddings, softmax and LayerNorm left out."""
    hidden, inner, layers = encoder.hidden_dim, encoder.intermediate_dim, encoder.num_layers
    tokens = batch * length
    per_layer = 2 * tokens * (4 * hidden * hidden + 2 * hidden * inner) + 2 * 2 * batch * length * length * hidden
    return layers * per_layer


def gemm_rate(threads, size=1024, repeats=20):
    """GFLOP/s of ``torch.mm`` of two float32 ``size`` x ``size`` matrices on ``threads`` threads,
    the best of ``repeats`` calls: the cores' float32 rate on a product big enough to keep them busy."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    a, b = torch.randn(size, size), torch.randn(size, size)
    try:
        best = min(times_ms(torch.mm, a, b, repeats=repeats, warmup=3))
    finally:
        torch.set_num_threads(before)
    return 2 * size ** 3 / (best / 1000) / 1e9


def measure(call, args):
    """``{"p50_ms", "p90_ms"}`` at batch 1 and ``{"sent_per_s"}`` at batch 64 of ``call(inputs)``."""
    one, many = random_inputs(*SHAPES["batch 1 x 20"]), random_inputs(*SHAPES["batch 64 x 32"])
    times = sorted(times_ms(call, one, repeats=args.calls, warmup=5))
    rates = [64000 / ms for ms in times_ms(call, many, repeats=args.runs)]
    return {"p50_ms": times[len(times) // 2], "p90_ms": times[int(len(times) * 0.9)],
            "batch_64_sent_per_s": statistics.median(rates)}


def tensorflow_systems(encoder, args):
    import tensorflow as tf

    from kerasbert.training.distill import copy_layer_weights
    from kerasbert.training.distill import student_encoder
    from kerasbert.models.fused_encoder import constant_weights
    from kerasbert.models.fused_encoder import fused_encoder

    bf16 = student_encoder(encoder, range(encoder.num_layers), dtype="bfloat16")
    copy_layer_weights(encoder, bf16)

    def keras_fn(model, jit=False):
        fn = tf.function(lambda x: model(x, training=False)["sequence_output"], jit_compile=jit)
        return lambda x: fn({k: tf.constant(v) for k, v in x.items()}).numpy()

    def fused_fn(model, constant=False):
        fused = fused_encoder(model)
        fn = tf.function(lambda x: fused(x)["sequence_output"])
        if constant:  # traced now, under constant_weights(), on the shapes' signature
            spec = {k: tf.TensorSpec([None, None], tf.int32) for k in ("token_ids", "segment_ids", "padding_mask")}
            with constant_weights():
                fn = fn.get_concrete_function(spec)
        return lambda x: fn({k: tf.constant(v) for k, v in x.items()}).numpy()

    return {"tf-keras": keras_fn(encoder), "tf-fused": fused_fn(encoder), "tf-fused-bf16": fused_fn(bf16),
            "tf-fused-const": fused_fn(encoder, True), "tf-fused-bf16-const": fused_fn(bf16, True),
            "tf-keras-bf16": keras_fn(bf16), "tf-keras-xla": keras_fn(encoder, jit=True)}


def torch_systems(folder, threads):
    import torch
    from transformers import BertModel

    torch.set_num_threads(threads)
    model = BertModel.from_pretrained(folder, add_pooling_layer=False).eval()

    def run(x, bf16=False):
        inputs = {k: torch.from_numpy(v) for k, v in hf_inputs(x).items()}
        with torch.inference_mode(), torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            return model(**inputs).last_hidden_state.float().numpy()

    return model, {"torch": run, "torch-bf16": lambda x: run(x, bf16=True)}


def ort_session(model, threads):
    import onnxruntime
    import torch

    class Encoder(torch.nn.Module):  # keyword arguments, the last hidden state only
        def __init__(self, bert):
            super().__init__()
            self.bert = bert

        def forward(self, input_ids, attention_mask, token_type_ids):
            return self.bert(input_ids=input_ids, attention_mask=attention_mask,
                             token_type_ids=token_type_ids).last_hidden_state

    path = Path(tempfile.mkdtemp()) / "encoder.onnx"
    example = hf_inputs(random_inputs(2, 8))
    names = list(example)  # the order of Encoder.forward's arguments
    example = tuple(torch.from_numpy(v) for v in example.values())
    torch.onnx.export(Encoder(model), example, str(path), input_names=names, output_names=["last_hidden_state"],
                      dynamic_axes={n: {0: "batch", 1: "length"} for n in names + ["last_hidden_state"]},
                      opset_version=17, dynamo=False)
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    session = onnxruntime.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])

    return lambda x: session.run(None, hf_inputs(x))[0]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=200, help="batch-1 calls timed")
    parser.add_argument("--runs", type=int, default=10, help="batch-64 calls timed")
    parser.add_argument("--intra-threads", type=int, default=1, help="TensorFlow intra-op threads (default 1)")
    parser.add_argument("--systems", default="tf-keras,tf-fused,tf-fused-bf16,tf-fused-const,tf-fused-bf16-const,"
                        "tf-keras-bf16,tf-keras-xla,"
                        "torch,torch-bf16,ort,torch-1t,torch-bf16-1t,ort-1t")
    args = parser.parse_args()
    folder = str(starter_folder())
    wanted = args.systems.split(",")
    cores = os.cpu_count()
    print(f"{flags_line()}\nMiniLM (starter checkpoint), batch 1 x 20 tokens: p50/p90 of {args.calls} calls; "
          f"batch 64 x 32: median of {args.runs} calls. TensorFlow intra-op threads {args.intra_threads}, "
          f"inter-op {cores}.")
    import tensorflow as tf

    import kerasbert

    tf.config.threading.set_intra_op_parallelism_threads(args.intra_threads)  # before TensorFlow starts
    tf.config.threading.set_inter_op_parallelism_threads(cores)
    encoder = kerasbert.load_encoder(folder)
    flops = {shape: encoder_flops(encoder, *size) for shape, size in SHAPES.items()}
    peak = {threads: gemm_rate(threads) for threads in sorted({cores, 1, args.intra_threads})}
    print("encoder GFLOP per call: " + ", ".join(f"{k} {v / 1e9:.3f}" for k, v in flops.items())
          + "; float32 torch.mm 1024^3, best of 20: "
          + ", ".join(f"{t} thread(s) {g:.0f} GFLOP/s" for t, g in peak.items()))
    rows = []

    def report(name, threads, call):
        result = {"system": name, "threads": threads, **measure(call, args)}
        result["p50_gflop_per_s"] = flops["batch 1 x 20"] / (result["p50_ms"] / 1000) / 1e9
        result["batch_64_gflop_per_s"] = flops["batch 64 x 32"] * result["batch_64_sent_per_s"] / 64 / 1e9
        result["p50_of_gemm_rate"] = result["p50_gflop_per_s"] / peak[threads]
        result["batch_64_of_gemm_rate"] = result["batch_64_gflop_per_s"] / peak[threads]
        rows.append(result)
        print(f"{name:<16} threads {threads}: batch 1 p50 {result['p50_ms']:6.2f} ms (p90 {result['p90_ms']:6.2f}, "
              f"{result['p50_of_gemm_rate']:.2f} of the GEMM rate), batch 64 {result['batch_64_sent_per_s']:7.1f} "
              f"sentences/s ({result['batch_64_of_gemm_rate']:.2f})", flush=True)

    tf_wanted = [w for w in wanted if w.startswith("tf-")]
    if tf_wanted:
        systems = tensorflow_systems(encoder, args)
        for name in tf_wanted:
            report(name, args.intra_threads, systems[name])
    for threads, suffix in ((cores, ""), (1, "-1t")):
        names = [n for n in ("torch", "torch-bf16", "ort") if n + suffix in wanted]
        if not names:
            continue
        model, systems = torch_systems(folder, threads)
        for name in names:
            call = ort_session(model, threads) if name == "ort" else systems[name]
            report(name + suffix, threads, call)
    floor = min((r for r in rows if r["system"].startswith("ort")), key=lambda r: r["p50_ms"], default=None)
    if floor:
        print(f"\nagainst the fastest ONNX Runtime at batch 1 ({floor['system']}, {floor['p50_ms']:.2f} ms):")
        for r in rows:
            r["p50_vs_ort"] = r["p50_ms"] / floor["p50_ms"]
            print(f"  {r['system']:<16} {r['p50_vs_ort']:.2f}x")
    write_result("encoder_floor", rows, setup={
        "encoder": "MiniLM (all-MiniLM-L6-v2 weights): 6 layers, H=384", "shapes": list(SHAPES),
        "calls": args.calls, "runs": args.runs, "tensorflow_intra_op_threads": args.intra_threads,
        "tensorflow_inter_op_threads": cores, "encoder_gflop_per_call": {k: v / 1e9 for k, v in flops.items()},
        "gemm_gflop_per_s": {str(t): g for t, g in peak.items()},
        "gemm": "torch.mm of two float32 1024 x 1024 matrices, best of 20 calls"})


if __name__ == "__main__":
    main()
