"""Training speed on one GPU: kerasbert's BERT-base NER heads (JAX) against Hugging Face's BertForTokenClassification (PyTorch), in one run.

Figures, not a test. Each configuration runs in a process of its own (its own peak memory); the
record is rewritten after each. Both train a random BERT-base on synthetic rows of 128 real tokens
with valid BIO tags. **Ours**: the library's model, batches and optimizer, ``fit`` for two epochs,
the second timed, then the jitted step alone (``jitted_step_ms``); heads ``softmax``, ``crf``
(``--bilstm``: :mod:`kerasbert.layers.bilstm`'s implementation), ``crf-no-bilstm``. **The peer**:
``BertForTokenClassification``, fused AdamW, a plain loop, bf16 autocast or float32 with TF32,
optionally ``torch.compile``. MFU: model FLOPs per step (:data:`FLOPS_FORMULA`) / step time / the
device's dense peak (:data:`PEAKS`). Needs JAX, PyTorch with CUDA and ``transformers``; not TensorFlow::

    export KERAS_BACKEND=jax XLA_FLAGS=--xla_gpu_enable_triton_gemm=false
    python -m bench.gpu_training                                  # batches 128 and 256, both precisions
    python -m bench.gpu_training --batches 512 --precisions mixed_bfloat16 --peer-compile
    KERAS_BACKEND=jax python -m bench.gpu_training --tiny --out gt-smoke   # a smoke test, on a CPU
"""

import argparse
import datetime
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from bench.common import RESULTS
from bench.common import ROOT
from bench.common import fail
from bench.common import flags_line
from bench.common import write_result

#: Encoder shapes (EncoderConfig fields); randomly initialised.
ENCODERS = {
    "bert-base": {"vocab_size": 30522, "hidden_size": 768, "num_layers": 12, "num_heads": 12, "intermediate_size": 3072},
    "tiny": {"vocab_size": 1000, "hidden_size": 64, "num_layers": 2, "num_heads": 2, "intermediate_size": 256},
}
#: Our heads (the rows' names): NerTrainSettings fields; ``--heads`` names them with dashes.
HEADS = {"softmax": {"head": "softmax", "lstm": False}, "crf": {"head": "crf"},
         "crf, no BiLSTM": {"head": "crf", "lstm": False}}
TYPES = ("LOC", "MISC", "ORG", "PER")  # CoNLL-2003's entity types: 9 BIO tags
#: Dense (no sparsity) peak TFLOP/s by device name (JAX's ``device_kind``, PyTorch's
#: ``get_device_name``), from NVIDIA's datasheets; the first pattern found in the name wins.
PEAKS = (
    ("H100 PCIe", {"bf16": 756.0, "tf32": 378.0, "fp32": 51.2}),
    ("H100 NVL", {"bf16": 835.5, "tf32": 417.5, "fp32": 60.0}),
    ("H100", {"bf16": 989.4, "tf32": 494.7, "fp32": 66.9}),  # SXM5: "NVIDIA H100 80GB HBM3"
    ("H200 NVL", {"bf16": 835.5, "tf32": 417.5, "fp32": 60.0}),
    ("H200", {"bf16": 989.4, "tf32": 494.7, "fp32": 66.9}),  # SXM: the H100 SXM's chip
    ("A100", {"bf16": 312.0, "tf32": 156.0, "fp32": 19.5}),
)
PEAK_OF = {"mixed_bfloat16": "bf16", "bf16 autocast": "bf16", "float32": "tf32", "float32 (TF32)": "tf32"}
#: Our precision -> the peer's in the same comparison.
TWIN = {"mixed_bfloat16": "bf16 autocast", "float32": "float32 (TF32)"}
FLOPS_FORMULA = "6*N*T + 12*L*H*S*T (T tokens per step, N non-embedding trainable weights)"
COLUMNS = ("system", "head", "bilstm", "precision", "batch", "tokens_per_s", "vs_peer", "step_ms", "jitted_step_ms",
           "mfu", "peak_gib", "first_step_s", "note")
OURS, PEER = "kerasbert (JAX)", "transformers (PyTorch)"


def mfu_fields(flops, seconds, device_name, precision):
    """``mfu`` of ``flops`` done in ``seconds`` (and the peak it was taken against)."""
    pattern, peaks = next(((p, v) for p, v in PEAKS if p in (device_name or "")), (None, None))
    if peaks is None:
        return {"mfu": None, "mfu_note": f"no peak known for {device_name!r}: MFU omitted"}
    kind = PEAK_OF[precision]
    return {"mfu": round(flops / seconds / (peaks[kind] * 1e12), 4), "peak_tflops": peaks[kind],
            "peak_name": f"{pattern} {kind} dense"}


def speed_fields(tokens, seconds, n_weights, shape, seq, device_name, precision):
    """tokens/s, step ms, model FLOPs and MFU of a step of ``tokens`` taking ``seconds``."""
    flops = 6 * n_weights * tokens + 12 * shape["num_layers"] * shape["hidden_size"] * seq * tokens
    return {"tokens_per_s": round(tokens / seconds, 1), "step_ms": round(seconds * 1000, 3),
            **mfu_fields(flops, seconds, device_name, precision), "non_embedding_weights": n_weights,
            "model_flops_per_step": flops, "flops_formula": FLOPS_FORMULA}


# --- ours (a child process, JAX) ------------------------------------------------------------


def synthetic_rows(count, seq, vocab, seed=0, distinct=64):
    """``count`` rows of ``seq`` real tokens ([CLS] ... [SEP]), random ids, valid BIO tags
    (entities of 1-3 tokens): ``distinct`` rows, repeated."""
    from kerasbert_apps.ner.tags import bio_tags

    rng = np.random.default_rng(seed)
    names = bio_tags(list(TYPES))
    ids_pool, tags_pool = [], []
    for _ in range(min(count, distinct)):
        ids = rng.integers(1000 if vocab > 2000 else 5, vocab, seq).astype(np.int32)
        ids[0], ids[-1] = 101 % vocab, 102 % vocab
        tags, position = np.zeros(seq, np.int32), 1
        while position < seq - 1:
            if rng.random() < 0.1:
                length = int(min(rng.integers(1, 4), seq - 1 - position))
                kind = TYPES[int(rng.integers(len(TYPES)))]
                tags[position], tags[position + 1 : position + length] = (names.index(f"B-{kind}"),
                                                                         names.index(f"I-{kind}"))
                position += length
            position += 1
        ids_pool.append(ids)
        tags_pool.append(tags)
    pick = [i % len(ids_pool) for i in range(count)]
    return {"token_ids": [ids_pool[i] for i in pick], "segment_ids": [np.zeros(seq, np.int32)] * count,
            "padding_mask": [np.ones(seq, np.int32)] * count, "tags": [tags_pool[i] for i in pick]}


def count_traces(model):
    """Wrap ``model.train_step`` so that each trace of the jitted step is recorded with its batch shape."""
    traces, original = [], model.train_step

    def train_step(state, data):
        x = data[0] if isinstance(data, (tuple, list)) else data
        traces.append(tuple(int(d) for d in x["token_ids"].shape))
        return original(state, data)

    model.train_step = train_step
    return traces


def device_memory():
    """The device's memory counters as JAX reports them (``peak_bytes_in_use``, ``bytes_limit``, ...)."""
    import jax

    stats = jax.devices()[0].memory_stats() or {}
    return {k: int(stats[k]) for k in ("peak_bytes_in_use", "bytes_in_use", "bytes_limit") if k in stats}


def step_clock():
    """A Keras callback keeping the wall time of each epoch and of the first batch."""
    import keras

    class Clock(keras.callbacks.Callback):
        async_safe = True  # as kerasbert's TrainingSpeed: Keras then does not wait for each step
        epochs, first_batch = [], None

        def on_epoch_begin(self, epoch, logs=None):
            self.start = time.perf_counter()

        def on_train_batch_end(self, batch, logs=None):
            if self.first_batch is None:
                float((logs or {}).get("loss", 0.0))  # wait for the step
                self.first_batch = time.perf_counter() - self.start

        def on_epoch_end(self, epoch, logs=None):
            float((logs or {}).get("loss", 0.0))  # the epoch's last step done (JAX dispatches ahead)
            self.epochs = self.epochs + [time.perf_counter() - self.start]

    return Clock()


def ours_rows(config):
    """Print the rows of one model (``encoder``, ``seq``, ``warmup``, ``steps``, ``head``,
    ``precision``, ``bilstm``) at each of its ``batches``, ascending (the process's peak memory is
    then the batch's)."""
    import dataclasses

    import jax
    import keras

    from kerasbert.checkpoints.config import EncoderConfig
    from kerasbert.training.fit import compile_for_training
    from kerasbert.training.fit import set_precision
    from kerasbert_apps.ner.heads.bio.pipeline import Tagger
    from kerasbert_apps.ner.tags import bio_tags
    from kerasbert_apps.ner.train import NerTrainSettings

    shape = ENCODERS[config["encoder"]]
    seq, steps, warmup = config["seq"], config["steps"], config["warmup"]
    settings = NerTrainSettings(checkpoint="(random)", train="(synthetic)", dev="(synthetic)", output="(none)",
                                epochs=2, max_length=seq, precision=config["precision"], **HEADS[config["head"]])
    set_precision(settings.precision)
    keras.utils.set_random_seed(0)
    encoder_config = EncoderConfig(**shape, max_position_embeddings=max(512, seq))
    labels = bio_tags(list(TYPES))
    model = Tagger.build_model(encoder_config.encoder_class()(**encoder_config.encoder_kwargs()), labels, settings)
    bilstm = ""
    if getattr(model, "lstm", None) is not None:
        model.lstm.implementation = config["bilstm"]
        bilstm = model.lstm.chosen_implementation()
        if config["bilstm"] not in ("auto", bilstm):
            bilstm += f" ({config['bilstm']} not available)"
    pipeline = Tagger(model, None, labels, max_length=seq)
    device = jax.devices()[0]
    tables = ("token_embedding/embeddings", "position_embedding/embeddings", "segment_embedding/embeddings")
    n_weights = sum(int(np.prod(v.shape)) for v in model.trainable_variables if not v.path.endswith(tables))
    for batch in config["batches"]:
        started = time.perf_counter()
        batch_settings = dataclasses.replace(settings, batch_size=batch)
        batch_settings.check()
        batches = pipeline.batches(synthetic_rows(batch * (warmup + steps), seq, shape["vocab_size"]), batch_settings)
        traces = count_traces(model)
        compile_for_training(model, len(batches), batch_settings, Tagger.head_prefix)
        clock = step_clock()
        model.fit(batches, epochs=2, callbacks=[clock], verbose=0)
        fit_step = clock.epochs[1] / len(batches)
        # The jitted step alone, back to back, on batches already on the device.
        on_device = [jax.device_put(batches[i]) for i in range(min(len(batches), 2))]
        names = ("trainable_variables", "non_trainable_variables", "optimizer_variables", "metrics_variables")
        state = model._get_jax_state(**{k: True for k in names}, purge_model_variables=False)
        logs, state = model.train_function(state, iter([on_device[0]]))  # the state is donated: keep the new one
        jax.block_until_ready(logs)
        t = time.perf_counter()
        for i in range(steps):
            logs, state = model.train_function(state, iter([on_device[i % len(on_device)]]))
        jax.block_until_ready((logs, state))
        jitted = (time.perf_counter() - t) / steps
        model._jax_state, model._jax_state_synced = dict(zip(names, state)), False
        model.jax_state_sync()  # the variables hold the state again (its old buffers were donated)
        memory = device_memory()
        print("ROW " + json.dumps({
            "system": OURS, "head": config["head"], "bilstm": bilstm, "precision": config["precision"],
            "batch": batch, "seq": seq,
            **speed_fields(batch * seq, fit_step, n_weights, shape, seq, device.device_kind, config["precision"]),
            "jitted_step_ms": round(jitted * 1000, 3), "jitted_tokens_per_s": round(batch * seq / jitted, 1),
            "peak_gib": round(memory["peak_bytes_in_use"] / 2**30, 2) if "peak_bytes_in_use" in memory else None,
            "first_step_s": round(clock.first_batch, 2), "final_loss": float(logs["loss"]),
            "traces": len(traces), "optimizer": type(model.optimizer).__name__,
            "device": device.device_kind, "platform": device.platform, "jax": jax.__version__,
            "keras": keras.__version__, "seconds": round(time.perf_counter() - started, 1), **memory}), flush=True)
        model.train_step = type(model).train_step.__get__(model)  # the next batch counts its own traces


# --- the peer (a child process, PyTorch) ----------------------------------------------------


def peer_rows(config):
    """Print ``BertForTokenClassification``'s rows: one per ``(precision, batch, compiled)`` of ``runs``."""
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
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = True  # float32 as XLA runs it
    sync = torch.cuda.synchronize if cuda else (lambda: None)
    for precision, batch, compiled in config["runs"]:
        started = time.perf_counter()
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

        def step(i):
            rows = slice((i * batch) % pool, (i * batch) % pool + batch) if pool >= 2 * batch else slice(0, batch)
            inputs = {"input_ids": ids[rows], "attention_mask": mask, "token_type_ids": segments, "labels": labels[rows]}
            inputs = {k: v.to(device, non_blocking=True) for k, v in inputs.items()}
            with torch.autocast(device.type, dtype=torch.bfloat16, enabled=precision == "bf16 autocast"):
                loss = step_model(**inputs).loss
            loss.backward()
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
            return loss

        row = {"system": PEER, "head": "softmax", "bilstm": "", "precision": precision, "batch": batch, "seq": seq,
               "note": "torch.compile" if compiled else "", "device": name}
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
            print("ROW " + json.dumps({**row, "note": "out of memory" + (", torch.compile" if compiled else "")}))
        else:
            tables = ("word_embeddings", "position_embeddings", "token_type_embeddings")
            n_weights = sum(p.numel() for k, p in model.named_parameters()
                            if p.requires_grad and not any(t in k for t in tables))
            print("ROW " + json.dumps({
                **row, **speed_fields(batch * seq, seconds, n_weights, shape, seq, name, precision),
                "peak_gib": round(torch.cuda.max_memory_allocated() / 2**30, 2) if cuda else None,
                "first_step_s": round(first, 2), "final_loss": float(loss.detach()),
                "optimizer": "AdamW (fused)" if cuda else "AdamW",
                "attention": getattr(model.config, "_attn_implementation", None),
                "platform": device.type, "torch": torch.__version__, "transformers": transformers.__version__,
                "seconds": round(time.perf_counter() - started, 1)}), flush=True)
        model = optimizer = step_model = None  # the GPU's memory free for the next run
        gc.collect()
        if cuda:
            torch.cuda.empty_cache()


# --- the run (the parent: no JAX, no PyTorch; it never touches the GPU) ---------------------


def run_child(kind, config, log):
    """``(rows, exit status, seconds, last lines)`` of ``python -m bench.gpu_training --child KIND CONFIG``."""
    started, rows, lines = time.perf_counter(), [], []
    with subprocess.Popen([sys.executable, "-m", "bench.gpu_training", "--child", kind, json.dumps(config)], cwd=ROOT,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                          env=dict(os.environ, PYTHONUNBUFFERED="1")) as child:
        for line in child.stdout:
            child_line(line, log, rows, lines)
    return rows, child.returncode, time.perf_counter() - started, lines[-3:]


def child_line(line, log, rows, lines):
    """One line of a job's child process: logged, and kept as a row (``ROW {json}``) or as text."""
    log.write(line)
    log.flush()
    if line.startswith("ROW "):
        rows.append(json.loads(line[4:]))
    else:
        lines.append(line.rstrip())


def describe(kind, config):
    if kind == "ours":
        return f"ours {config['head']} {config['precision']} bilstm={config['bilstm']} batches {config['batches']}"
    if kind == "peer":
        return "peer " + ", ".join(f"{p} {b}{' compiled' if c else ''}" for p, b, c in config["runs"])
    return f"{kind} {json.dumps(config)}"


def compare(rows):
    """``vs_peer`` for each of our rows: its tokens/s over the peer's at the same batch and precision
    (:data:`TWIN`), the peer without torch.compile."""
    peers = {(r["batch"], r["precision"]): r["tokens_per_s"] for r in rows
             if r.get("system") == PEER and r.get("tokens_per_s") and r.get("note") != "torch.compile"}
    for r in rows:
        if r.get("system") == OURS and r.get("tokens_per_s"):
            peer = peers.get((r["batch"], TWIN.get(r["precision"])))
            r["vs_peer"] = round(r["tokens_per_s"] / peer, 3) if peer else None


def targets(rows):
    """The comparisons the record's summary gives, at the best batch of our softmax head in
    mixed_bfloat16 (``None`` where a row is missing)."""

    def find(system, head, precision, batch, bilstm=None, but=None):
        found = [r for r in rows if r.get("system") == system and r.get("head") == head and r.get("tokens_per_s")
                 and r.get("precision") == precision and batch in (None, r["batch"]) and not r.get("note")
                 and bilstm in (None, r.get("bilstm")) and (but is None or r.get("bilstm") != but)]
        return max(found, key=lambda r: r["tokens_per_s"]) if found else None

    def ratio(a, b):
        return round(a["tokens_per_s"] / b["tokens_per_s"], 3) if a and b else None

    best = find(OURS, "softmax", "mixed_bfloat16", None)
    batch = best and best["batch"]
    crf = find(OURS, "crf", "mixed_bfloat16", batch, but="keras") if batch else None
    no_bilstm = find(OURS, "crf, no BiLSTM", "mixed_bfloat16", batch)
    peer = find(PEER, "softmax", "bf16 autocast", batch) if batch else None
    return {
        "best batch (ours, softmax, mixed_bfloat16)": batch,
        "softmax bf16 / peer bf16 (>= 1.0)": ratio(best, peer),
        "crf bf16 / peer bf16 (>= 0.8)": ratio(crf, peer),
        "softmax bf16 / softmax float32 (>= 2)": ratio(best, find(OURS, "softmax", "float32", batch)) if batch else None,
        "softmax bf16 MFU (>= 0.35)": best and best.get("mfu"),
        "crf (BiLSTM) / crf, no BiLSTM, bf16 (>= 0.85)": ratio(crf, no_bilstm) if batch else None,
        "crf with Keras's BiLSTM / crf, no BiLSTM (before)": ratio(
            find(OURS, "crf", "mixed_bfloat16", batch, bilstm="keras"), no_bilstm) if batch else None,
    }


def format_row(r):
    what = (f"  {r.get('system')} {r.get('head')}{' (' + r['bilstm'] + ')' if r.get('bilstm') else ''} "
            f"{r.get('precision')} batch {r.get('batch')}: ")
    if not r.get("tokens_per_s"):
        return what + (f"{r['step_ms']:.2f} ms/step" if r.get("step_ms") else str(r.get("note", "")))
    mfu = f"MFU {r['mfu'] * 100:.1f}%" if r.get("mfu") is not None else "MFU n/a"
    jitted = f", jitted {r['jitted_step_ms']:.1f} ms" if r.get("jitted_step_ms") else ""
    step = f" (step {r['step_ms']:.1f} ms{jitted})" if r.get("step_ms") else ""
    return (what + f"{r['tokens_per_s']:,.0f} tokens/s{step}; {mfu}; "
            f"peak {r.get('peak_gib')} GiB; first step {r.get('first_step_s')} s {r.get('note', '')}".rstrip())


def setup_of(encoder, seq, warmup, steps, **more):
    """The record's setup: what was measured and how."""
    return {
        "encoder": {encoder: ENCODERS[encoder]}, "seq": seq, "weights": "randomly initialised",
        "data": "synthetic rows of seq real tokens (no padding), valid BIO tags, 4 entity types (9 tags)",
        "ours": "the library's model, BucketedBatches and compile_for_training (grouped AdamW); tokens/s and "
                "step_ms: a fit step (the 2nd of two epochs of warmup+steps batches); jitted_step_ms: the "
                "jitted step alone, back to back",
        "peer": "transformers BertForTokenClassification (same shape, 9 labels, random init), AdamW (fused on a GPU), "
                "a plain loop (batch from pinned host memory, forward, backward, step, zero_grad), bf16 autocast or "
                "float32 with TF32 matrix products; warm-up excluded, timed steps synchronised at the end",
        "steps": {"warmup": warmup, "timed": steps}, "flops_formula": FLOPS_FORMULA, "peak_for_precision": PEAK_OF,
        "peaks_tflops": "; ".join(f"{n}: " + ", ".join(f"{k} {v:g}" for k, v in p.items()) for n, p in PEAKS),
        "xla_flags": os.environ.get("XLA_FLAGS", ""), **more}


def measure(jobs, out, setup, runner=None, name="speed"):
    """Run ``jobs`` in order: ``(kind, config)`` pairs, a callable config called with the rows so far
    when its turn comes; each in a child process to its end (:func:`run_child`), or by ``runner``
    (its ``run``, its ``skip`` giving the reason to skip a job, its ``command`` for the record). The
    record ``OUT/gpu_training/<date>-<name>.json`` is rewritten after every job; returns its path."""
    if os.environ.get("KERAS_BACKEND") != "jax":
        fail(f"gpu_training needs KERAS_BACKEND=jax (it is {os.environ.get('KERAS_BACKEND', 'unset')!r})")
    now = datetime.datetime.now(datetime.timezone.utc)
    path = Path(out) / "gpu_training" / f"{now.strftime('%Y-%m-%dT%H%M')}-{name}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    setup = {"started": now.strftime("%Y-%m-%d %H:%M UTC"), **setup}
    print(f"{flags_line()}\nXLA_FLAGS={setup['xla_flags']!r}; record: {path}", flush=True)
    rows, skipped, jobs_done, began = [], [], [], time.perf_counter()

    def write():
        compare(rows)
        write_result("gpu_training", rows, setup=setup, columns=COLUMNS, path=path, date=setup["started"],
                     summary=targets(rows), notes=[f"not measured: {s}" for s in skipped], jobs=jobs_done,
                     **({"command": runner.command} if runner else {}))

    log_path = path.parent / "gpu_training.log" if Path(out) != RESULTS else Path(tempfile.gettempdir()) / "gpu_training.log"
    with open(log_path, "a", encoding="utf-8") as log:
        for kind, config in jobs:
            config = config(rows) if callable(config) else config
            if kind == "ours":
                config["batches"] = [b for b in config["batches"] if b]
            if not config.get("batches", config.get("runs", True)):
                continue
            what = describe(kind, config)
            reason = runner and runner.skip(kind, config, what)
            if reason:
                print(f"skipped ({reason}): {what}", flush=True)
                skipped.append(f"{what} ({reason})")
            else:
                print(f"[{time.perf_counter() - began:5.0f} s] {what}", flush=True)
                got, status, seconds, tail = (runner.run if runner else run_child)(kind, config, log)
                print("\n".join(format_row(row) for row in got), flush=True)
                rows += got
                jobs_done.append({"job": what, "seconds": round(seconds, 1), "status": status, "rows": len(got)})
                if status != 0:
                    print(f"  status {status}: " + " | ".join(tail), flush=True)
                    skipped.append(f"{what}: status {status}: " + " | ".join(tail)[-300:])
            write()
    write()
    print("\n".join(["summary:"] + [f"  {k}: {v}" for k, v in targets(rows).items()]), flush=True)
    print(f"record: {path} ({len(rows)} rows, {len(skipped)} skipped or failed); log: {log_path}")
    return path


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--heads", default="softmax,crf,crf-no-bilstm", help="of softmax, crf, crf-no-bilstm")
    parser.add_argument("--precisions", default="mixed_bfloat16,float32", help="ours; the peer's are their twins")
    parser.add_argument("--batches", default="128,256", help="each model at each batch, in one process")
    parser.add_argument("--bilstm", default="auto", choices=("auto", "scan", "cudnn", "keras"),
                        help="the CRF head's BiLSTM implementation (kerasbert.layers.bilstm)")
    parser.add_argument("--no-peer", action="store_true", help="leave the peer out")
    parser.add_argument("--peer-compile", action="store_true", help="also the peer under torch.compile (bf16)")
    parser.add_argument("--tiny", action="store_true", help="a 2-layer H=64 encoder, 16 tokens (a smoke test)")
    parser.add_argument("--out", help="write the record under this folder (OUT/gpu_training/) instead of bench/results")
    parser.add_argument("--child", nargs=2, metavar=("KIND", "CONFIG"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        kind, config = args.child
        return {"ours": ours_rows, "peer": peer_rows}[kind](json.loads(config))
    if args.tiny and not args.out:
        fail("--tiny is a smoke test, not a result: give --out, the folder for its record")
    heads = [{"crf-no-bilstm": "crf, no BiLSTM"}.get(h, h) for h in args.heads.split(",")]
    unknown = [h for h in heads if h not in HEADS] + [p for p in args.precisions.split(",") if p not in TWIN]
    if unknown:
        fail(f"unknown head or precision: {', '.join(unknown)}")
    base = {"encoder": "tiny" if args.tiny else "bert-base", "seq": 16 if args.tiny else 128,
            "warmup": 2 if args.tiny else 3, "steps": 3 if args.tiny else 10}
    batches = sorted(int(b) for b in args.batches.split(","))
    jobs = [("ours", {**base, "head": h, "precision": p, "bilstm": args.bilstm, "batches": batches})
            for p in args.precisions.split(",") for h in heads]
    runs = [(TWIN[p], b, False) for p in args.precisions.split(",") for b in batches]
    runs += [("bf16 autocast", b, True) for b in batches] if args.peer_compile else []
    jobs += [] if args.no_peer else [("peer", {**base, "runs": runs})]
    return measure(jobs, args.out or RESULTS, setup_of(**base, heads=heads, batches=batches),
                   name="speed-tiny" if args.tiny else "speed")


if __name__ == "__main__":
    main()
