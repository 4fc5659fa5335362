"""Training speed on one GPU: kerasbert's BERT-base NER heads (JAX) against Hugging Face's BertForTokenClassification (PyTorch), in one run.

Figures, not a test. ``run`` measures, in one call and in order of
importance, each configuration in a process of its own (so that its peak
memory is its own and a crash costs one row), and writes the record after
every process (``OUT/gpu_training/<date>-speed.json``, the format of
``bench/results/``), so that a run stopped early still leaves what it
measured:

* **ours**: the library's own model (``Tagger.build_model``), batches
  (``BucketedBatches``) and optimizer (``compile_for_training``: grouped
  AdamW), BERT-base shape (12 layers, H=768, FF 3072, 12 heads, vocabulary
  30522, randomly initialised: speed does not depend on the values), on
  synthetic rows of exactly ``seq`` real tokens with valid BIO tags, trained
  with ``fit`` for two epochs of ``warmup + steps`` batches (the first
  compiles; the second is timed: **tokens/s** is what ``kerasbert ner train``
  gets, host batching and callbacks included) and then the jitted step alone,
  back to back (``jitted_step_ms``). Heads: ``softmax`` (no BiLSTM: the
  peer's architecture), ``crf`` (the BiLSTM-CRF, ``ner train``'s default, its
  BiLSTM by :mod:`kerasbert.layers.bilstm`: ``auto`` is its fused scan; ``cudnn`` cuDNN's kernel; ``keras``
  is Keras's own masked LSTM, the implementation before it; ``scan`` the
  portable one), ``crf, no BiLSTM``;
* **the peer**: ``BertForTokenClassification`` of the same configuration
  (random init, 9 labels), AdamW (fused), a plain loop (each batch moved from
  host memory to the GPU, forward, ``loss.backward()``, ``step``,
  ``zero_grad``), bf16 ``torch.autocast`` or float32 with TF32 matrix products
  (what XLA does with float32 by default), optionally ``torch.compile``;
  warm-up steps excluded, the timed steps back to back, synchronised at the
  end;
* **the BiLSTM alone** (``bench/bilstm_speed.py``'s measurement at the batch
  of the CRF rows, 128 steps, 768 features, 128 units): each implementation's
  forward and backward.

Batch sizes: 128 and 256 first (the comparisons the targets name), the CRF
rows at the better of the two for the softmax head, then 32 and the largest
that fits (a power of two, from the memory measured at 128 and 256). Each
process gets the time left before ``--deadline`` (seconds from the start); a
job that the time left cannot hold, by the timings measured so far, is
skipped and the record says so.

Model FLOPs per training step (stated in every row)::

    6 * N * T + 12 * L * H * S * T

``T`` = tokens in the step (batch x seq; all real here), ``N`` = trainable
weights outside the embedding tables (encoder layers and head), ``L`` layers,
``H`` hidden size, ``S`` = seq: the matrix products forward (2) and backward
(4), and attention's scores and mixing (4 L H S per token forward, x3 for
training). The BiLSTM's products are in ``N``; the CRF's recursions and the
softmaxes are not counted. MFU = model FLOPs per step / step time / the
device's dense peak for the precision (:data:`PEAKS`, by device name:
``mixed_bfloat16`` and bf16 autocast -> bf16, float32 -> TF32). A device not
in the table gets no MFU, and the row says so.

On a GPU host, with JAX (CUDA), PyTorch (CUDA) and ``transformers``
installed, TensorFlow not needed::

    export KERAS_BACKEND=jax XLA_FLAGS=--xla_gpu_enable_triton_gemm=false
    python bench/gpu_training.py run --out OUT            # about 7 minutes
    python bench/gpu_training.py run --plan short --out OUT   # the comparisons the targets name
    cp OUT/gpu_training/*.json bench/results/gpu_training/
    KERAS_BACKEND=jax python bench/gpu_training.py run --tiny --out gt-smoke   # CPU smoke test, every path

With jax 0.11.2 on an H100, XLA aborted compiling a training step in its
Triton GEMM tiling; ``XLA_FLAGS=--xla_gpu_enable_triton_gemm=false`` avoids it.
"""

import argparse
import datetime
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))
from gpu_conll import count_traces  # noqa: E402  (numpy only at import)
from gpu_conll import memory as device_memory  # noqa: E402

#: Encoder shapes (EncoderConfig fields); randomly initialised.
ENCODERS = {
    "bert-base": {"vocab_size": 30522, "hidden_size": 768, "num_layers": 12, "num_heads": 12, "intermediate_size": 3072},
    "tiny": {"vocab_size": 1000, "hidden_size": 64, "num_layers": 2, "num_heads": 2, "intermediate_size": 256},
}
#: Our heads: NerTrainSettings fields, and the BiLSTM implementation (kerasbert.layers.bilstm).
HEADS = {
    "softmax": {"head": "softmax", "lstm": False},
    "crf": {"head": "crf"},
    "crf, no BiLSTM": {"head": "crf", "lstm": False},
}
#: CoNLL-2003's entity types (the rows' labels: 9 BIO tags).
TYPES = ("LOC", "MISC", "ORG", "PER")
#: Dense (no sparsity) peak TFLOP/s by device name (JAX's ``device_kind``,
#: PyTorch's ``get_device_name``), from NVIDIA's datasheets; the first pattern
#: found in the name wins.
PEAKS = (
    ("H100 PCIe", {"bf16": 756.0, "tf32": 378.0, "fp32": 51.2}),
    ("H100 NVL", {"bf16": 835.5, "tf32": 417.5, "fp32": 60.0}),
    ("H100", {"bf16": 989.4, "tf32": 494.7, "fp32": 66.9}),  # SXM5: "NVIDIA H100 80GB HBM3"
    ("H200 NVL", {"bf16": 835.5, "tf32": 417.5, "fp32": 60.0}),
    ("H200", {"bf16": 989.4, "tf32": 494.7, "fp32": 66.9}),  # SXM: the H100 SXM's chip
    ("A100", {"bf16": 312.0, "tf32": 156.0, "fp32": 19.5}),
)
PEAK_OF = {"mixed_bfloat16": "bf16", "bf16 autocast": "bf16", "float32": "tf32", "float32 (TF32)": "tf32"}
FLOPS_FORMULA = "6*N*T + 12*L*H*S*T (T tokens per step, N non-embedding trainable weights)"
#: The docs table's columns.
COLUMNS = ("system", "head", "bilstm", "precision", "batch", "tokens_per_s", "vs_peer", "step_ms", "jitted_step_ms",
           "mfu", "peak_gib", "first_step_s", "note")
OURS, PEER = "kerasbert (JAX)", "transformers (PyTorch)"
#: Seconds a torch.compile row is expected to take (compiling the training step), before one was measured.
COMPILE_ESTIMATE = 120.0


def fail(message):
    """A clear one-line error and exit status 2."""
    print(f"error: {message}", file=sys.stderr)
    raise SystemExit(2)


def peak_tflops(device_name):
    """``(pattern, peaks)`` of the first :data:`PEAKS` pattern in ``device_name``, or ``(None, None)``."""
    for pattern, peaks in PEAKS:
        if pattern in device_name:
            return pattern, peaks
    return None, None


def mfu_fields(flops, seconds, device_name, precision):
    """``mfu`` (and the peak it was taken against) of ``flops`` done in ``seconds``."""
    pattern, peaks = peak_tflops(device_name or "")
    if peaks is None:
        return {"mfu": None, "mfu_note": f"no peak known for {device_name!r}: MFU omitted"}
    kind = PEAK_OF[precision]
    return {"mfu": round(flops / seconds / (peaks[kind] * 1e12), 4), "peak_tflops": peaks[kind],
            "peak_name": f"{pattern} {kind} dense"}


def train_flops(n_weights, tokens, layers, hidden, seq):
    return 6 * n_weights * tokens + 12 * layers * hidden * seq * tokens


def median_ms(seconds):
    return round(float(np.median(seconds)) * 1000, 3) if len(seconds) else None


# =============================================================================
# ours (a child process, JAX)
# =============================================================================


def synthetic_rows(count, seq, vocab, seed=0, distinct=64):
    """``count`` training rows of ``seq`` real tokens ([CLS] ... [SEP]) with
    random ids and valid BIO tags (entities of 1-3 tokens, about one token in
    five inside one): ``distinct`` rows, repeated (speed does not depend on
    the values)."""
    from kerasbert_apps.ner.tags import bio_tags

    rng = np.random.default_rng(seed)
    names = bio_tags(list(TYPES))
    ids_pool, tags_pool = [], []
    for _ in range(min(count, distinct)):
        ids = rng.integers(1000 if vocab > 2000 else 5, vocab, seq).astype(np.int32)
        ids[0], ids[-1] = 101 % vocab, 102 % vocab
        tags = np.zeros(seq, np.int32)
        position = 1
        while position < seq - 1:
            if rng.random() < 0.1:
                length = int(min(rng.integers(1, 4), seq - 1 - position))
                kind = TYPES[int(rng.integers(len(TYPES)))]
                tags[position] = names.index(f"B-{kind}")
                tags[position + 1 : position + length] = names.index(f"I-{kind}")
                position += length
            position += 1
        ids_pool.append(ids)
        tags_pool.append(tags)
    pick = [i % len(ids_pool) for i in range(count)]
    return {"token_ids": [ids_pool[i] for i in pick], "segment_ids": [np.zeros(seq, np.int32)] * count,
            "padding_mask": [np.ones(seq, np.int32)] * count, "tags": [tags_pool[i] for i in pick]}


def model_weights(model):
    """N: trainable weights outside the embedding tables."""
    tables = ("token_embedding/embeddings", "position_embedding/embeddings", "segment_embedding/embeddings")
    return sum(int(np.prod(v.shape)) for v in model.trainable_variables if not v.path.endswith(tables))


class StepClock:
    """A Keras callback: wall time of each epoch and of the first batch."""

    def __new__(cls):
        import keras

        class Clock(keras.callbacks.Callback):
            async_safe = True  # as kerasbert's TrainingSpeed: Keras then does not wait for each step

            def __init__(self):
                super().__init__()
                self.epochs, self.first_batch = [], None

            def on_epoch_begin(self, epoch, logs=None):
                self.start = time.perf_counter()

            def on_train_batch_end(self, batch, logs=None):
                if self.first_batch is None:
                    if logs and "loss" in logs:
                        float(logs["loss"])  # wait for the step
                    self.first_batch = time.perf_counter() - self.start

            def on_epoch_end(self, epoch, logs=None):
                if logs and "loss" in logs:
                    float(logs["loss"])  # the epoch's last step done (JAX dispatches ahead)
                self.epochs.append(time.perf_counter() - self.start)

        return Clock()


def ours_rows(config):
    """Rows of one model configuration (``head``, ``precision``, ``bilstm``,
    ``encoder``, ``seq``, ``warmup``, ``steps``) at each of ``batches``, in
    that order (ascending: the process's peak memory is then the batch's)."""
    import dataclasses

    import jax
    import keras

    from kerasbert_apps.ner.heads.bio.pipeline import Tagger
    from kerasbert_apps.ner.tags import bio_tags
    from kerasbert_apps.ner.train import NerTrainSettings
    from kerasbert.checkpoints.config import EncoderConfig
    from kerasbert.training.fit import compile_for_training
    from kerasbert.training.fit import set_precision

    shape = ENCODERS[config["encoder"]]
    seq, steps, warmup = config["seq"], config["steps"], config["warmup"]
    settings = NerTrainSettings(checkpoint="(random)", train="(synthetic)", dev="(synthetic)", output="(none)",
                                epochs=2, max_length=seq, precision=config["precision"], **HEADS[config["head"]])
    set_precision(settings.precision)
    keras.utils.set_random_seed(0)
    encoder_config = EncoderConfig(**shape, max_position_embeddings=max(512, seq))
    encoder = encoder_config.encoder_class()(**encoder_config.encoder_kwargs())
    labels = bio_tags(list(TYPES))
    model = Tagger.build_model(encoder, labels, settings)
    bilstm = ""
    if getattr(model, "lstm", None) is not None:
        model.lstm.implementation = config["bilstm"]
        bilstm = model.lstm.chosen_implementation()
        if config["bilstm"] not in ("auto", bilstm):
            bilstm += f" ({config['bilstm']} not available)"
    pipeline = Tagger(model, None, labels, max_length=seq)
    device = jax.devices()[0]
    n_weights = model_weights(model)
    for batch in config["batches"]:
        started = time.perf_counter()
        batch_settings = dataclasses.replace(settings, batch_size=batch)
        batch_settings.check()
        rows = synthetic_rows(batch * (warmup + steps), seq, shape["vocab_size"])
        batches = pipeline.batches(rows, batch_settings)
        traces = count_traces(model)
        compile_for_training(model, len(batches), batch_settings, Tagger.head_prefix)
        clock = StepClock()
        model.fit(batches, epochs=2, callbacks=[clock], verbose=0)
        fit_step = clock.epochs[1] / len(batches)

        on_device = [jax.device_put(batches[i]) for i in range(min(len(batches), 2))]
        state = model._get_jax_state(trainable_variables=True, non_trainable_variables=True, optimizer_variables=True,
                                     metrics_variables=True, purge_model_variables=False)
        logs, state = model.train_function(state, iter([on_device[0]]))  # the state is donated: keep the new one
        jax.block_until_ready(logs)
        t = time.perf_counter()
        for i in range(steps):
            logs, state = model.train_function(state, iter([on_device[i % len(on_device)]]))
        jax.block_until_ready((logs, state))
        jitted = (time.perf_counter() - t) / steps
        model._jax_state = dict(zip(("trainable_variables", "non_trainable_variables", "optimizer_variables",
                                     "metrics_variables"), state))
        model._jax_state_synced = False
        model.jax_state_sync()  # the variables hold the state again (its old buffers were donated)

        tokens = batch * seq
        flops = train_flops(n_weights, tokens, shape["num_layers"], shape["hidden_size"], seq)
        memory = device_memory()
        row = {
            "system": OURS, "head": config["head"], "bilstm": bilstm, "precision": config["precision"],
            "batch": batch, "seq": seq, "tokens_per_s": round(tokens / fit_step, 1),
            "step_ms": round(fit_step * 1000, 3), "jitted_step_ms": round(jitted * 1000, 3),
            "jitted_tokens_per_s": round(tokens / jitted, 1),
            **mfu_fields(flops, fit_step, device.device_kind, config["precision"]),
            "peak_gib": round(memory["peak_bytes_in_use"] / 2**30, 2) if "peak_bytes_in_use" in memory else None,
            "first_step_s": round(clock.first_batch, 2), "final_loss": float(logs["loss"]),
            "traces": len(traces), "optimizer": type(model.optimizer).__name__,
            "non_embedding_weights": n_weights, "model_flops_per_step": flops, "flops_formula": FLOPS_FORMULA,
            "device": device.device_kind, "platform": device.platform, "jax": jax.__version__,
            "keras": keras.__version__, "seconds": round(time.perf_counter() - started, 1), **memory,
        }
        print("ROW " + json.dumps(row), flush=True)
        model.train_step = type(model).train_step.__get__(model)  # the next batch counts its own traces


def bilstm_rows(config):
    """The BiLSTM alone (bench/bilstm_speed.py), each implementation."""
    import jax

    from bilstm_speed import measure
    from kerasbert.layers.bilstm import cudnn_works

    implementations = ["keras", "scan"] + (["cudnn"] if cudnn_works() else [])
    device = jax.devices()[0]
    for precision in config["precisions"]:
        for row in measure(config["batch"], config["seq"], config["features"], config["units"], precision,
                           implementations, config["steps"], 3):
            print("ROW " + json.dumps({"system": OURS, "head": "BiLSTM alone", "bilstm": row["runs_as"],
                                       "precision": precision, "batch": row["batch"], "seq": row["time"],
                                       "step_ms": row["step_ms"], "speedup_vs_keras": row["speedup_vs_keras"],
                                       "max_difference_vs_keras": row["max_difference"],
                                       "first_step_s": row["compile_s"],
                                       "note": f"{row['features']} features, {row['units']} units, forward + backward",
                                       "device": device.device_kind, "platform": device.platform}), flush=True)


# =============================================================================
# the peer (a child process, PyTorch)
# =============================================================================


def peer_rows(config):
    """Hugging Face ``BertForTokenClassification`` rows: one per ``(precision, batch, compiled)`` of ``runs``."""
    import gc

    import torch
    import transformers

    shape = ENCODERS[config["encoder"]]
    seq, steps, warmup = config["seq"], config["steps"], config["warmup"]
    cuda = torch.cuda.is_available()
    device = torch.device("cuda" if cuda else "cpu")
    name = torch.cuda.get_device_name(0) if cuda else "cpu"
    hf_config = transformers.BertConfig(
        vocab_size=shape["vocab_size"], hidden_size=shape["hidden_size"], num_hidden_layers=shape["num_layers"],
        num_attention_heads=shape["num_heads"], intermediate_size=shape["intermediate_size"],
        max_position_embeddings=max(512, seq), num_labels=1 + 2 * len(TYPES))
    for precision, batch, compiled in config["runs"]:
        started = time.perf_counter()
        torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = precision != "float32 (highest)"
        torch.manual_seed(0)
        model = transformers.BertForTokenClassification(hf_config).to(device).train()
        optimizer = torch.optim.AdamW(model.parameters(), lr=5e-5, weight_decay=0.01, fused=cuda)
        step_model = torch.compile(model) if compiled else model
        generator = torch.Generator().manual_seed(0)
        pool = min(batch * 2, 4096)
        ids = torch.randint(1000 if shape["vocab_size"] > 2000 else 5, shape["vocab_size"], (pool, seq),
                            generator=generator)
        labels = torch.randint(0, hf_config.num_labels, (pool, seq), generator=generator)
        if cuda:
            ids, labels = ids.pin_memory(), labels.pin_memory()
        mask, segments = torch.ones(batch, seq, dtype=torch.long), torch.zeros(batch, seq, dtype=torch.long)
        autocast = precision == "bf16 autocast"

        def step(i):
            rows = slice((i * batch) % pool, (i * batch) % pool + batch) if pool >= 2 * batch else slice(0, batch)
            inputs = {"input_ids": ids[rows], "attention_mask": mask, "token_type_ids": segments, "labels": labels[rows]}
            inputs = {k: v.to(device, non_blocking=True) for k, v in inputs.items()}
            with torch.autocast(device.type, dtype=torch.bfloat16, enabled=autocast):
                loss = step_model(**inputs).loss
            loss.backward()
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
            return loss

        def sync():
            if cuda:
                torch.cuda.synchronize()

        try:
            if cuda:
                torch.cuda.reset_peak_memory_stats()
            t = time.perf_counter()
            loss = step(0)
            sync()
            first = time.perf_counter() - t
            for i in range(1, warmup):
                step(i)
            sync()
            t = time.perf_counter()
            for i in range(steps):
                loss = step(warmup + i)
            sync()
            seconds = (time.perf_counter() - t) / steps
        except torch.cuda.OutOfMemoryError:
            print("ROW " + json.dumps({"system": PEER, "head": "softmax", "precision": precision, "batch": batch,
                                       "seq": seq, "note": "out of memory" + (", torch.compile" if compiled else ""),
                                       "device": name}), flush=True)
        else:
            tokens = batch * seq
            tables = ("word_embeddings", "position_embeddings", "token_type_embeddings")
            n_weights = sum(p.numel() for k, p in model.named_parameters() if p.requires_grad and not any(
                t in k for t in tables))
            flops = train_flops(n_weights, tokens, shape["num_layers"], shape["hidden_size"], seq)
            row = {
                "system": PEER, "head": "softmax", "bilstm": "", "precision": precision, "batch": batch, "seq": seq,
                "tokens_per_s": round(tokens / seconds, 1), "step_ms": round(seconds * 1000, 3),
                **mfu_fields(flops, seconds, name, precision),
                "peak_gib": round(torch.cuda.max_memory_allocated() / 2**30, 2) if cuda else None,
                "first_step_s": round(first, 2), "final_loss": float(loss.detach()),
                "note": "torch.compile" if compiled else "", "optimizer": "AdamW (fused)" if cuda else "AdamW",
                "attention": getattr(model.config, "_attn_implementation", None),
                "non_embedding_weights": n_weights, "model_flops_per_step": flops, "flops_formula": FLOPS_FORMULA,
                "device": name, "platform": device.type, "torch": torch.__version__,
                "transformers": transformers.__version__, "seconds": round(time.perf_counter() - started, 1),
            }
            print("ROW " + json.dumps(row), flush=True)
        del model, optimizer, step_model
        gc.collect()
        if cuda:
            torch.cuda.empty_cache()


# =============================================================================
# run (the parent: no JAX, no PyTorch; it never touches the GPU)
# =============================================================================


class Plan:
    """The jobs of a run, in order, each ``(kind, config, what it measures)``;
    ``best`` and ``largest`` batches are filled in from the rows measured so far."""

    def __init__(self, name, tiny, batch=None):
        self.name, self.tiny, self.batch = name, tiny, batch
        self.encoder = "tiny" if tiny else "bert-base"
        self.seq = 16 if tiny else 128
        self.steps, self.warmup = (3, 2) if tiny else (10, 3)
        self.first = (4, 8) if tiny else (128, 256)
        self.small = 2 if tiny else 32

    def jobs(self):
        """Yield ``(kind, config)``; a callable config is called with the rows so far when its turn comes."""
        base = {"encoder": self.encoder, "seq": self.seq, "steps": self.steps, "warmup": self.warmup}
        a, b = self.first

        def ours(head, precision, batches, bilstm="auto"):
            return "ours", lambda rows: {**base, "head": head, "precision": precision, "bilstm": bilstm,
                                         "batches": batches(rows) if callable(batches) else list(batches)}

        best = self.best_batch
        if self.name == "at-batch":  # every comparison at one batch (--batch), the peer beside it, then batch 32
            n = self.batch or b
            yield ours("softmax", "mixed_bfloat16", sorted({b, n}))
            yield "peer", {**base, "runs": [("bf16 autocast", n, False), ("float32 (TF32)", n, False)]
                           + ([("bf16 autocast", b, False)] if b != n else [])}
            yield ours("crf", "mixed_bfloat16", [n])
            yield ours("crf, no BiLSTM", "mixed_bfloat16", [n])
            yield ours("softmax", "float32", [n])
            yield ours("crf", "mixed_bfloat16", [self.small])
            yield ours("crf, no BiLSTM", "mixed_bfloat16", [self.small])
            yield ours("crf", "mixed_bfloat16", [self.small], bilstm="keras")
            return
        yield ours("softmax", "mixed_bfloat16", (a, b))
        yield "peer", {**base, "runs": [("bf16 autocast", a, False), ("bf16 autocast", b, False),
                                        ("float32 (TF32)", b, False), ("float32 (TF32)", a, False),
                                        ("bf16 autocast", self.small, False)]}
        yield ours("crf", "mixed_bfloat16", lambda rows: [best(rows)])
        # if the CRF head's row failed (cuDNN's BiLSTM at this size, say), the portable scan at once
        yield ours("crf", "mixed_bfloat16", lambda rows: [] if self.has(rows, "crf") else [best(rows)], bilstm="scan")
        yield ours("crf, no BiLSTM", "mixed_bfloat16", lambda rows: [best(rows)])
        yield "bilstm", lambda rows: {"batch": best(rows), "seq": self.seq, "features": 32 if self.tiny else 768,
                                      "units": 8 if self.tiny else 128, "steps": self.steps,
                                      "precisions": ["mixed_bfloat16"]}
        yield ours("crf", "mixed_bfloat16", lambda rows: [best(rows)], bilstm="keras")
        yield ours("softmax", "float32", lambda rows: [best(rows)])
        if self.name == "short":
            return
        yield ours("softmax", "mixed_bfloat16", lambda rows: [self.small] + self.largest(rows))
        yield "peer", lambda rows: {**base, "runs": [("bf16 autocast", n, False) for n in self.largest(rows)]}
        yield ours("crf", "float32", lambda rows: [best(rows)])
        yield ours("crf", "mixed_bfloat16", lambda rows: [] if self.has(rows, "crf", "scan") else [best(rows)],
                   bilstm="scan")
        yield ours("crf, no BiLSTM", "float32", lambda rows: [best(rows)])
        yield ours("crf", "mixed_bfloat16", lambda rows: [self.small])
        yield ours("crf, no BiLSTM", "mixed_bfloat16", lambda rows: [self.small])
        yield "peer", lambda rows: {**base, "runs": [("bf16 autocast", best(rows), True)]}

    @staticmethod
    def has(rows, head, bilstm=None, precision="mixed_bfloat16"):
        """Whether a row of ours with this head (and BiLSTM implementation) and precision was measured."""
        return any(r.get("system") == OURS and r.get("head") == head and r.get("precision") == precision
                   and r.get("tokens_per_s") and (bilstm is None or r.get("bilstm") == bilstm) for r in rows)

    def best_batch(self, rows):
        """The batch of the best tokens/s of our softmax head in mixed_bfloat16 (the second first batch if none)."""
        found = [r for r in rows if r.get("system") == OURS and r.get("head") == "softmax"
                 and r.get("precision") == "mixed_bfloat16" and r.get("tokens_per_s")]
        return max(found, key=lambda r: r["tokens_per_s"])["batch"] if found else self.first[1]

    def largest(self, rows):
        """``[batch]``: the largest power of two above the first batches whose
        memory, extrapolated linearly from our softmax head's peaks at the
        first two batches, stays under 90% of the device's limit; ``[]`` if none."""
        found = {r["batch"]: r for r in rows if r.get("system") == OURS and r.get("head") == "softmax"
                 and r.get("precision") == "mixed_bfloat16" and r.get("peak_bytes_in_use")}
        a, b = self.first
        if a not in found or b not in found or not found[b].get("bytes_limit"):
            return [2 * b]
        slope = (found[b]["peak_bytes_in_use"] - found[a]["peak_bytes_in_use"]) / (b - a)
        limit, batch = 0.9 * found[b]["bytes_limit"], None
        candidate = 2 * b
        while found[b]["peak_bytes_in_use"] + slope * (candidate - b) < limit and candidate <= 8192:
            batch, candidate = candidate, 2 * candidate
        return [batch] if batch else []


def estimate(kind, config, costs):
    """Seconds a job should take: a process's start, and per batch a compile
    and the measurement (the defaults until a job of the kind was measured)."""
    start, per_batch = costs[kind]
    if kind == "ours":
        return start + per_batch * len(config["batches"])
    if kind == "peer":
        return start + sum(COMPILE_ESTIMATE if compiled else per_batch for _, _, compiled in config["runs"])
    return start + per_batch * 3 * len(config["precisions"])


def run_child(kind, config, timeout, block_tensorflow, log):
    """``(rows, status, seconds)`` of one child process."""
    command = [sys.executable, __file__, "child", kind, json.dumps(config)]
    command += ["--block-tensorflow"] if block_tensorflow else []
    started = time.perf_counter()
    rows, lines = [], []
    with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                          env=dict(os.environ, PYTHONUNBUFFERED="1")) as child:
        deadline = started + timeout
        try:
            import selectors

            selector = selectors.DefaultSelector()
            selector.register(child.stdout, selectors.EVENT_READ)
            while True:
                left = deadline - time.perf_counter()
                if left <= 0:
                    raise subprocess.TimeoutExpired(command, timeout)
                if not selector.select(timeout=min(left, 5)):
                    continue
                line = child.stdout.readline()
                if not line:
                    break
                log.write(line)
                log.flush()
                if line.startswith("ROW "):
                    rows.append(json.loads(line[4:]))
                else:
                    lines.append(line.rstrip())
            child.wait(timeout=max(1, deadline - time.perf_counter()))
            status = child.returncode
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()
            status = "stopped at the deadline"
    return rows, status, time.perf_counter() - started, lines[-3:]


def compare(rows):
    """``vs_peer`` for each of our rows: its tokens/s over the peer's at the same batch (bf16 against bf16
    autocast, float32 against float32 with TF32, the peer without torch.compile)."""
    peers = {(r["batch"], r["precision"]): r["tokens_per_s"] for r in rows
             if r.get("system") == PEER and r.get("tokens_per_s") and r.get("note") != "torch.compile"}
    twin = {"mixed_bfloat16": "bf16 autocast", "float32": "float32 (TF32)"}
    for r in rows:
        if r.get("system") == OURS and r.get("tokens_per_s") and r.get("head") != "BiLSTM alone":
            peer = peers.get((r["batch"], twin.get(r["precision"])))
            r["vs_peer"] = round(r["tokens_per_s"] / peer, 3) if peer else None


def targets(rows):
    """The issue's targets, from the rows (``None`` where a row is missing)."""

    def find(system, head, precision, batch=None, bilstm=None, note=""):
        found = [r for r in rows if r.get("system") == system and r.get("head") == head and r.get("precision") == precision
                 and r.get("tokens_per_s") and (batch is None or r["batch"] == batch)
                 and (bilstm is None or r.get("bilstm") == bilstm) and r.get("note", "") == note]
        return max(found, key=lambda r: r["tokens_per_s"]) if found else None

    def ratio(a, b):
        return round(a["tokens_per_s"] / b["tokens_per_s"], 3) if a and b else None

    best = find(OURS, "softmax", "mixed_bfloat16")
    batch = best and best["batch"]
    crf = None
    if batch:
        crf = max((r for r in rows if r.get("system") == OURS and r.get("head") == "crf" and r.get("tokens_per_s")
                   and r["precision"] == "mixed_bfloat16" and r["batch"] == batch and r.get("bilstm") != "keras"),
                  key=lambda r: r["tokens_per_s"], default=None)
    peer = find(PEER, "softmax", "bf16 autocast", batch) if batch else None
    return {
        "best batch (ours, softmax, mixed_bfloat16)": batch,
        "softmax bf16 / peer bf16 (>= 1.0)": ratio(best, peer),
        "crf bf16 / peer bf16 (>= 0.8)": ratio(crf, peer),
        "softmax bf16 / softmax float32 (>= 2)": ratio(best, find(OURS, "softmax", "float32", batch)) if batch else None,
        "softmax bf16 MFU (>= 0.35)": best and best.get("mfu"),
        "crf (BiLSTM) / crf, no BiLSTM, bf16 (>= 0.85)": ratio(
            crf, find(OURS, "crf, no BiLSTM", "mixed_bfloat16", batch)) if batch else None,
        "crf with Keras's BiLSTM / crf, no BiLSTM (before)": ratio(
            find(OURS, "crf", "mixed_bfloat16", batch, bilstm="keras"),
            find(OURS, "crf, no BiLSTM", "mixed_bfloat16", batch)) if batch else None,
    }


def recorded_command(argv):
    """The command line as the record gives it: the script's name, and ``OUT`` for the output folder
    (a path of the machine that ran it)."""
    words = [Path(argv[0]).name]
    for i, word in enumerate(argv[1:], 1):
        words.append("OUT" if argv[i - 1] == "--out" else "--out=OUT" if word.startswith("--out=") else word)
    return " ".join(words)


def write_record(path, rows, setup, skipped, jobs):
    """The record (``bench/results``' format) at ``path``, replaced atomically."""
    from results import write_result

    compare(rows)
    write_result("gpu_training", rows, setup=setup, columns=COLUMNS, path=path, date=setup["started"],
                 command=recorded_command(sys.argv), summary=targets(rows),
                 notes=[f"not measured: {s}" for s in skipped], jobs=jobs)


def describe(kind, config):
    if kind == "ours":
        return f"ours {config['head']} {config['precision']} bilstm={config['bilstm']} batches {config['batches']}"
    if kind == "peer":
        return "peer " + ", ".join(f"{p} {b}{' compiled' if c else ''}" for p, b, c in config["runs"])
    return f"BiLSTM alone, batch {config['batch']}, {config['precisions']}"


def format_row(r):
    what = (f"  {r.get('system')} {r.get('head')}{' (' + r['bilstm'] + ')' if r.get('bilstm') else ''} "
            f"{r.get('precision')} batch {r.get('batch')}: ")
    if not r.get("tokens_per_s"):
        if r.get("step_ms"):
            return what + f"{r['step_ms']:.2f} ms/step ({r.get('speedup_vs_keras')}x keras)"
        return what + str(r.get("note", ""))
    mfu = f"MFU {r['mfu'] * 100:.1f}%" if r.get("mfu") is not None else "MFU n/a"
    step = ""
    if r.get("step_ms"):
        jitted = f", jitted {r['jitted_step_ms']:.1f} ms" if r.get("jitted_step_ms") else ""
        step = f" (step {r['step_ms']:.1f} ms{jitted})"
    return (what + f"{r['tokens_per_s']:,.0f} tokens/s{step}; {mfu}; "
            f"peak {r.get('peak_gib')} GiB; first step {r.get('first_step_s')} s {r.get('note', '')}".rstrip())


def run(args):
    if os.environ.get("KERAS_BACKEND") != "jax":
        fail(f"run needs KERAS_BACKEND=jax (it is {os.environ.get('KERAS_BACKEND', 'unset')!r})")
    began = time.perf_counter()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    now = datetime.datetime.now(datetime.timezone.utc)
    path = out / "gpu_training" / f"{now.strftime('%Y-%m-%dT%H%M')}-speed{'-tiny' if args.tiny else ''}.json"
    plan = Plan(args.plan, args.tiny, getattr(args, "batch", None))
    from results import flags_line

    print(flags_line(), flush=True)
    print(f"XLA_FLAGS={os.environ.get('XLA_FLAGS', '')!r}; plan {args.plan}; deadline {args.deadline:.0f} s; "
          f"record: {path}", flush=True)
    setup = {
        "started": now.strftime("%Y-%m-%d %H:%M UTC"), "plan": args.plan, "batch": getattr(args, "batch", None), "tiny": bool(args.tiny),
        "encoder": {plan.encoder: ENCODERS[plan.encoder]}, "seq": plan.seq, "weights": "randomly initialised",
        "data": "synthetic rows of seq real tokens (no padding), valid BIO tags, 4 entity types (9 tags)",
        "ours": "the library's model, BucketedBatches and compile_for_training (grouped AdamW); tokens/s and "
                "step_ms: a fit step (the 2nd of two epochs of warmup+steps batches); jitted_step_ms: the "
                "jitted step alone, back to back",
        "peer": "transformers BertForTokenClassification (same shape, 9 labels, random init), AdamW (fused on a "
                "GPU), a plain loop: each batch moved from pinned host memory, forward, backward, step, zero_grad; "
                "bf16 autocast or float32 with TF32 matrix products; warm-up excluded, timed steps back to back, "
                "synchronised at the end",
        "steps": {"warmup": plan.warmup, "timed": plan.steps},
        "flops_formula": FLOPS_FORMULA, "peak_for_precision": PEAK_OF,
        "peaks_tflops": "; ".join(f"{name}: " + ", ".join(f"{k} {v:g}" for k, v in peaks.items()) for name, peaks in PEAKS),
        "xla_flags": os.environ.get("XLA_FLAGS", ""), "deadline_s": args.deadline,
    }
    rows, skipped, jobs = [], [], []
    #: (process start, seconds per batch) of each kind, before one was measured
    costs = {"ours": (25.0, 40.0), "peer": (20.0, 10.0), "bilstm": (15.0, 8.0)} if not args.tiny else \
        {"ours": (30.0, 30.0), "peer": (20.0, 5.0), "bilstm": (15.0, 15.0)}
    with open(out / "gpu_training.log", "a", encoding="utf-8") as log:
        for kind, config in plan.jobs():
            config = config(rows) if callable(config) else config
            if kind == "ours" and not all(config["batches"]):
                config["batches"] = [b for b in config["batches"] if b]
            if (kind == "ours" and not config["batches"]) or (kind == "peer" and not config["runs"]):
                continue
            left = args.deadline - (time.perf_counter() - began)
            need = estimate(kind, config, costs)
            what = describe(kind, config)
            if need > left:
                print(f"skipped (needs about {need:.0f} s, {left:.0f} s left): {what}", flush=True)
                skipped.append(f"{what} (needs about {need:.0f} s, {left:.0f} s left)")
                write_record(path, rows, setup, skipped, jobs)
                continue
            print(f"[{time.perf_counter() - began:5.0f} s] {what} (about {need:.0f} s)", flush=True)
            got, status, seconds, tail = run_child(kind, config, left, args.block_tensorflow, log)
            for row in got:
                print(format_row(row), flush=True)
            rows += got
            jobs.append({"job": what, "seconds": round(seconds, 1), "status": status, "rows": len(got)})
            if status != 0:
                print(f"  status {status}: " + " | ".join(tail), flush=True)
                skipped.append(f"{what}: status {status}: " + " | ".join(tail)[-300:])
            measured = [r["seconds"] for r in got if r.get("seconds") and r.get("note") != "torch.compile"]
            if kind != "bilstm" and measured and status == 0:  # calibrate: the start, and the time per batch
                costs[kind] = (max(seconds - sum(r.get("seconds") or 0 for r in got), 5.0), max(measured))
            write_record(path, rows, setup, skipped, jobs)
    write_record(path, rows, setup, skipped, jobs)
    print("\ntargets:", flush=True)
    for key, value in targets(rows).items():
        print(f"  {key}: {value}", flush=True)
    print(f"record: {path} ({len(rows)} rows, {len(skipped)} skipped or failed; {time.perf_counter() - began:.0f} s)")


def child(args):
    if args.block_tensorflow:
        sys.modules["tensorflow"] = None  # fail on any TensorFlow import, as on a host without it
    config = json.loads(args.config)
    {"ours": ours_rows, "peer": peer_rows, "bilstm": bilstm_rows}[args.kind](config)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    p = commands.add_parser("run", help="measure ours and the peer, most important first, until the deadline")
    p.add_argument("--out", required=True, help="where the record (OUT/gpu_training/*.json) and the log go")
    p.add_argument("--plan", choices=("full", "short", "at-batch"), default="full",
                   help="short: only the comparisons the targets name (softmax and peer at 128 and 256, the CRF "
                        "heads at the better batch, float32); at-batch: every comparison at --batch, then the "
                        "CRF heads at batch 32")
    p.add_argument("--batch", type=int, help="the batch of --plan at-batch (default: the second first batch, 256)")
    p.add_argument("--deadline", type=float, default=400, help="seconds for the whole run (default 400)")
    p.add_argument("--tiny", action="store_true",
                   help="a 2-layer H=64 encoder, batches of 2-8 x 16 tokens (a smoke test of every path, on a CPU)")
    p.add_argument("--block-tensorflow", action="store_true", help="fail on any TensorFlow import in the children")
    p = commands.add_parser("child", help=argparse.SUPPRESS)
    p.add_argument("kind", choices=("ours", "peer", "bilstm"))
    p.add_argument("config")
    p.add_argument("--block-tensorflow", action="store_true")
    args = parser.parse_args()
    {"run": run, "child": child}[args.command](args)


if __name__ == "__main__":
    main()
