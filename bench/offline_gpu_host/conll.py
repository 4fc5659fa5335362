"""A CoNLL-2003 NER run trained on a GPU host without TensorFlow, its weights brought back for export and parity.

Our tooling, not a benchmark a user runs; the run it is compared with is
``bench.ner_conll2003``'s ``ours`` (its newest record). A GPU host with JAX but no TensorFlow cannot run the library's tokenizer,
decoding and export (TensorFlow), so the work is split between the preparing
machine (with TensorFlow) and the GPU host, as in ``triples_sweep``:

1. ``prepare`` (preparing machine, TensorFlow): the CoNLL-2003 training rows exactly as
   ``kerasbert ner train`` makes them (:meth:`kerasbert_apps.ner.heads.bio.pipeline.Tagger.features`
   of eng.train; eng.testa's rows for the dev score on the GPU host), the tag list and
   the run's settings (the CPU bench's: MiniLM, batch 32, 3 epochs, max length
   128, float32, BiLSTM-CRF) go to BUNDLE, with the MiniLM checkpoint written
   in Hugging Face layout with only the word embeddings of the token ids that
   eng.train/testa/testb use (ids renumbered; an unused row is never looked
   up), packed like the weights that come back (byte planes split, zlib),
   with zeros where training never reaches: the word embeddings of tokens
   only eng.testb uses, the position embeddings beyond max length, the
   (frozen) pooler. About 55 MiB, to copy to the GPU host with the checkout
   and the wheels of ``wheels.sh``.
2. ``train`` (GPU host, ``KERAS_BACKEND=jax``): the MiniLM CoNLL-2003 run through
   the library's path (``start_run``, ``load_encoder``, ``Tagger.build_model``,
   ``Tagger.batches`` = ``BucketedBatches`` with its bucketed widths,
   ``compile_for_training``, ``fit_and_select``), dev scored after every
   epoch in numpy (entity F1 over the BIO tags of eng.testa's window rows:
   the Viterbi tags of the model against the rows' gold tags; it selects the
   epoch, the library's scorer runs in ``check``). The best epoch's weights
   go to OUT as ``weights-N.npz`` parts of at most 15 MiB, 62 MiB in all (what
   the GPU host lets us copy back is limited in size): the encoder's weights as the
   XOR of their float32 bits with the bundle's (exactly reversible; most high
   bits cancel), byte planes split, zlib; the head's as they are. And
   ``run.json``: settings, per-epoch history, timings, traces.
3. ``check`` (preparing machine, TensorFlow): the weights put back into the MiniLM model
   with its full vocabulary (trained rows in place, the other rows the
   checkpoint's; the test-only rows the checkpoint's times the weight decay
   measured on the rows of dev-only tokens, which training reached the same
   way: by decay alone), saved as a model folder (``Tagger.save``, score
   temperature fitted on dev as ``ner train`` does), scored on eng.testb with
   ``kerasbert ner evaluate``, exported (``kerasbert ner export``) and the
   SavedModel's entities compared with ``Tagger.predict``'s.

::

    python -m bench.offline_gpu_host.conll prepare --bundle .gpu/ner
    # on the GPU host, with the checkout, the bundle and the wheels of wheels.sh installed:
    export KERAS_BACKEND=jax XLA_FLAGS=--xla_gpu_enable_triton_gemm=false
    python -m bench.offline_gpu_host.conll train --bundle .gpu/ner --out OUT
    # on the preparing machine, with OUT's files:
    python -m bench.offline_gpu_host.conll check --bundle .gpu/ner --run OUT --model-out runs/gpu_conll/model
"""

import argparse
import dataclasses
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import zlib
from pathlib import Path

import numpy as np

from bench.common import CONLL
from bench.common import MINILM
from bench.common import RESULTS
from bench.common import ROOT
from bench.common import fail
from bench.common import write_result
from bench.gpu_training import count_traces
from bench.gpu_training import device_memory as memory

MAX_LENGTH = 128
DEV_BATCH = 64
PART_BYTES = 15 * 2**20
LIBRARY_PAD = 8  # BucketedBatches' pad_to_multiple, which ner train uses
RETURN_BYTES = 62 * 2**20  # the weights train copies to OUT at most (the rest stays in --workdir)
MAX_PARTS = 7
CHUNK_VALUES = 2**21  # values per compressed piece of a weight

PRECISIONS = ("float32", "mixed_bfloat16", "mixed_float16")


def block_tensorflow():
    """Make ``import tensorflow`` fail, as on a host without it (``--block-tensorflow``)."""
    sys.modules["tensorflow"] = None


def quiet_tf_logs():
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


def median_ms(seconds):
    return round(statistics.median(seconds) * 1000, 3) if seconds else None


# =============================================================================
# prepare (TensorFlow)
# =============================================================================


def hf_name(official):
    """An official BERT variable name -> ``(Hugging Face tensor name, transpose)``;
    the inverse of :func:`kerasbert.checkpoints.checkpoint.official_name_from_hf` (checked
    against it in :func:`prepare`)."""
    parts = official.split("/")
    if parts[0] != "bert":
        return None, False
    path, leaf = [], parts[-1]
    for part in parts[:-1]:
        path += part.split("_", 1) if part.startswith("layer_") and part[6:].isdigit() else [part]
    if parts[1] == "embeddings" and leaf.endswith("_embeddings"):  # a table: no leaf
        return ".".join(path + [leaf, "weight"]), False
    if path[-1] == "LayerNorm":
        return ".".join(path + [{"gamma": "weight", "beta": "bias"}[leaf]]), False
    if leaf == "kernel":
        return ".".join(path + ["weight"]), True
    return ".".join(path + [leaf]), False


def conll_settings(args, output="(gpu run)"):
    """The CPU bench's settings (``bench.ner_conll2003``): MiniLM, eng.train,
    dev eng.testa, 3 epochs, batch 32, max length 128 (``args.max_length``
    where given: ``active_learning``'s 64), everything else the
    ``ner train`` defaults."""
    from kerasbert_apps.ner.train import NerTrainSettings

    return NerTrainSettings(checkpoint=str(args.checkpoint), train=str(CONLL / "eng.train.gz"),
                            dev=str(CONLL / "eng.testa"), output=output, epochs=3, batch_size=32,
                            max_length=getattr(args, "max_length", MAX_LENGTH), max_train_examples=args.max_train,
                            max_dev_examples=args.max_dev)


def prepare(args):
    quiet_tf_logs()
    from kerasbert_apps.ner.heads.bio.pipeline import Tagger
    from kerasbert_apps.ner.train import NER
    from kerasbert.checkpoints.checkpoint import is_training_state
    from kerasbert.checkpoints.checkpoint import official_name_from_hf
    from kerasbert.training.fit import open_encoder_checkpoint
    from kerasbert.training.fit import resolve_auto
    from kerasbert.checkpoints.loader import load_encoder

    if not Path(args.checkpoint).exists():
        fail(f"{args.checkpoint}: no such checkpoint folder")
    settings = conll_settings(args)
    settings.check()
    train_examples, dev_examples = NER.read_run_data(settings)
    tags = Tagger.training_labels(train_examples, dev_examples, settings)
    folder, tokenizer = open_encoder_checkpoint(settings)
    pipeline = Tagger(None, tokenizer, tags, max_length=settings.max_length)
    rows, report = pipeline.features(train_examples)
    print("train features: " + report.summary().replace("\n", "\n  "))
    dev_rows, report = pipeline.features(dev_examples)
    print("dev features: " + report.summary().replace("\n", "\n  "))
    for name, got in (("train", rows), ("dev", dev_rows)):  # what the bundle leaves out, it rebuilds
        if any(s.any() for s in got["segment_ids"]) or not all(m.all() for m in got["padding_mask"]):
            fail(f"{name} rows: segment_ids not all 0 or padding_mask not all 1; the bundle cannot rebuild them")
    test_texts = [e.text for e in NER.read(str(CONLL / "eng.testb"), settings, "test")]
    test_windows = pipeline.windows_numpy(test_texts)

    used = {0, tokenizer.cls_id, tokenizer.sep_id, tokenizer.token_to_id("[UNK]")}
    for ids in rows["token_ids"] + dev_rows["token_ids"]:
        used.update(ids.tolist())
    used.update(np.unique(test_windows["token_ids"]).tolist())
    kept = np.array(sorted(used))
    renumber = np.full(tokenizer.vocabulary_size, -1, np.int64)
    renumber[kept] = np.arange(len(kept))
    print(f"vocabulary: {len(kept)} of {tokenizer.vocabulary_size} tokens used by eng.train/testa/testb, "
          "the others' embeddings left out")

    out = Path(args.bundle)
    shutil.rmtree(out, ignore_errors=True)
    (out / "encoder").mkdir(parents=True)
    arrays = {"kept": kept}
    for split, got in (("train", rows), ("dev", dev_rows)):
        arrays[f"{split}/lengths"] = np.array([len(v) for v in got["token_ids"]], np.int32)
        arrays[f"{split}/token_ids"] = renumber[np.concatenate(got["token_ids"])].astype(np.int32)
        arrays[f"{split}/tags"] = np.concatenate(got["tags"]).astype(np.int32)

    # Zeroed (they pack to nothing; check puts them back): the word embeddings
    # of tokens only eng.testb uses, which training never reaches (no gradient,
    # only AdamW's weight decay: check scales the checkpoint's rows by the
    # decay measured on the rows of tokens only the dev set uses); the position
    # embeddings beyond max_length (never looked up); the pooler (frozen, and
    # no token head reads it).
    trained_ids = set(np.concatenate(rows["token_ids"]).tolist()) | {0, tokenizer.cls_id, tokenizer.sep_id}
    dev_ids = set(np.concatenate(dev_rows["token_ids"]).tolist())
    test_only = np.array(sorted(set(kept.tolist()) - trained_ids - dev_ids), np.int64)
    dev_only = np.array(sorted(dev_ids - trained_ids), np.int64)
    arrays["zeroed_rows"], arrays["canary_rows"] = renumber[test_only], renumber[dev_only]
    print(f"word embeddings zeroed in the bundle: {len(test_only)} tokens only eng.testb uses; "
          f"{len(dev_only)} tokens only eng.testa uses measure their weight decay in check")
    np.savez_compressed(out / "data.npz", **arrays)
    weights = {}
    for name in sorted(folder.shapes):
        if is_training_state(name) or not name.startswith("bert/"):
            continue
        key, transpose = hf_name(name)
        back, back_transpose, _ = official_name_from_hf(key, "bert")
        if (back, back_transpose) != (name, transpose):
            fail(f"{name}: the Hugging Face name {key} maps back to {back}")
        value = np.array(folder.read(name), np.float32)
        if name == "bert/embeddings/word_embeddings":
            value = value[kept]
            value[renumber[test_only]] = 0.0
        elif name == "bert/embeddings/position_embeddings":
            value[settings.max_length :] = 0.0
        elif name.startswith("bert/pooler/"):
            value[...] = 0.0
        weights[key] = np.ascontiguousarray(value.T if transpose else value)
    packed = pack_weights(sorted(weights.items()), {}, out / "encoder", part_bytes=2**30, max_parts=1)
    config = folder.config.to_hf_dict()
    config["vocab_size"] = len(kept)
    (out / "encoder" / "config.json").write_text(json.dumps(config, indent=2))
    (out / "encoder" / "vocab.txt").write_text("".join(tokenizer.id_to_token(int(i)) + "\n" for i in kept))
    (out / "encoder" / "tokenizer_config.json").write_text(json.dumps({"do_lower_case": tokenizer.lowercase}))

    # The trimmed encoder must compute what the checkpoint's does on renumbered ids.
    sample = [r for r in rows["token_ids"][:8]]
    width = max(len(r) for r in sample)
    ids = np.stack([np.pad(r, (0, width - len(r))) for r in sample]).astype(np.int32)
    mask = (np.arange(width)[None] < np.array([len(r) for r in sample])[:, None]).astype(np.int32)
    inputs = {"token_ids": ids, "segment_ids": np.zeros_like(ids), "padding_mask": mask}
    full = np.asarray(load_encoder(folder)(inputs, training=False)["sequence_output"])
    trimmed = np.asarray(load_encoder(unpacked_encoder(out))({**inputs, "token_ids": renumber[ids].astype(np.int32)},
                                                            training=False)["sequence_output"])
    difference = float(np.abs(full - trimmed).max())
    if difference > 1e-4:
        fail(f"the trimmed encoder differs from the checkpoint by {difference:.2e}")
    resolved = resolve_auto(settings, len(rows["token_ids"]))
    import hashlib

    # The weights come back as XOR with this bundle's: check refuses a run trained from another bundle.
    bundle_id = hashlib.sha1()
    for path in sorted((out / "encoder").iterdir()) + [out / "data.npz"]:
        bundle_id.update(path.read_bytes())
    meta = {"bundle_id": bundle_id.hexdigest()[:16], "tags": tags, "settings": dataclasses.asdict(resolved),
            "checkpoint": str(Path(args.checkpoint).resolve()),
            "vocabulary": {"kept": len(kept), "of": tokenizer.vocabulary_size},
            "rows": {"train": len(rows["token_ids"]), "dev": len(dev_rows["token_ids"])},
            "examples": {"train": len(train_examples), "dev": len(dev_examples)},
            "train_tokens": int(arrays["train/lengths"].sum()), "trimmed_encoder_max_difference": difference}
    (out / "bundle.json").write_text(json.dumps(meta, indent=2) + "\n")
    size = sum(p.stat().st_size for p in out.rglob("*") if p.is_file())
    print(f"trimmed encoder = checkpoint within {difference:.1e} on 8 training rows; its weights "
          f"{sum(v.nbytes for v in weights.values()) / 2**20:.1f} MiB, packed {packed / 2**20:.1f} MiB")
    print(f"{out}: {size / 2**20:.1f} MiB ({len(rows['token_ids'])} train rows, {len(dev_rows['token_ids'])} dev rows)")


# =============================================================================
# the bundle, the dev score and the weights' transport (numpy, no TensorFlow)
# =============================================================================


def load_bundle(bundle):
    """``(meta, train rows, dev rows)``: rows as :meth:`Pipeline.features` gives
    them (``token_ids``, ``segment_ids``, ``padding_mask``, ``tags``)."""
    bundle = Path(bundle)
    if not (bundle / "bundle.json").exists():
        fail(f"{bundle}: not a bundle (no bundle.json); write one with: "
             f"python -m bench.offline_gpu_host.conll prepare --bundle {bundle}")
    meta = json.loads((bundle / "bundle.json").read_text())
    data = np.load(bundle / "data.npz")
    splits = {}
    for split in ("train", "dev"):
        cuts = np.cumsum(data[f"{split}/lengths"])[:-1]
        ids = np.split(data[f"{split}/token_ids"], cuts)
        splits[split] = {"token_ids": ids, "segment_ids": [np.zeros(len(r), np.int32) for r in ids],
                         "padding_mask": [np.ones(len(r), np.int32) for r in ids],
                         "tags": np.split(data[f"{split}/tags"], cuts)}
    return meta, splits["train"], splits["dev"]


def bio_entities(tags, names):
    """The entities ``(start, end, type)`` (end exclusive) of one BIO tag id
    sequence, chunked as conlleval / seqeval's default: ``B-X`` starts one,
    ``I-X`` continues an ``X`` or starts one after anything else."""
    found, start, kind = set(), None, None
    for i, tag in enumerate(list(tags) + [0]):
        name = names[tag]
        inside = name.startswith("I-") and kind == name[2:]
        if start is not None and not inside:
            found.add((start, i, kind))
            start, kind = None, None
        if name != "O" and not inside:
            start, kind = i, name[2:]
    return found


def row_entity_f1(predicted, gold, names):
    """Micro entity F1 / precision / recall over rows (lists of tag id sequences)."""
    hits = n_pred = n_gold = 0
    for row, (p, g) in enumerate(zip(predicted, gold)):
        p, g = bio_entities(p, names), bio_entities(g, names)
        hits, n_pred, n_gold = hits + len(p & g), n_pred + len(p), n_gold + len(g)
    precision = hits / n_pred if n_pred else 0.0
    recall = hits / n_gold if n_gold else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return {"f1": f1, "precision": precision, "recall": recall, "entities": n_gold}


def pack_weights(named, initial, directory, part_bytes=PART_BYTES, max_parts=MAX_PARTS):
    """Write ``named`` (a list of ``(path, array)``) as ``weights.json`` and
    ``weights-N.npz`` parts of at most ``part_bytes``: a float32 array with a
    same-shaped ``initial[path]`` as the XOR of their bits (exactly
    reversible), every array's byte planes split (the high bytes of similar
    numbers compress) and zlib-compressed, in pieces of ``CHUNK_VALUES``
    values. Returns the bytes written."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    entries, pieces = [], []
    for path, value in named:
        value = np.ascontiguousarray(value)
        base = initial.get(path)
        xor = base is not None and value.dtype == np.float32 and base.shape == value.shape
        bits = value.view(np.uint32) ^ np.ascontiguousarray(base, np.float32).view(np.uint32) if xor else value
        flat = bits.reshape(-1)
        names = []
        for begin in range(0, max(len(flat), 1), CHUNK_VALUES):
            chunk = flat[begin : begin + CHUNK_VALUES]
            planes = chunk.view(np.uint8).reshape(-1, chunk.dtype.itemsize).T
            names.append(f"w{len(pieces)}")
            pieces.append((names[-1], np.frombuffer(zlib.compress(planes.tobytes(), 6), np.uint8)))
        entries.append({"path": path, "shape": list(value.shape), "dtype": str(value.dtype), "xor": bool(xor),
                        "pieces": names})
    parts, where = [[]], {}
    for name, blob in pieces:
        if len(blob) > part_bytes - 2**16:
            raise ValueError(f"a compressed piece of {len(blob)} bytes does not fit a part of {part_bytes}")
        if sum(len(b) for _, b in parts[-1]) + len(blob) > part_bytes - 2**16:
            parts.append([])
        parts[-1].append((name, blob))
    if len(parts) > max_parts:
        raise ValueError(f"the weights need {len(parts)} parts of {part_bytes} bytes; at most {max_parts} come back")
    for index, part in enumerate(parts):
        np.savez(directory / f"weights-{index}.npz", **dict(part))
        where.update({name: index for name, _ in part})
    for entry in entries:
        entry["parts"] = [where[name] for name in entry["pieces"]]
    (directory / "weights.json").write_text(json.dumps(entries) + "\n")
    return sum((directory / f"weights-{i}.npz").stat().st_size for i in range(len(parts)))


def unpack_weights(directory, initial):
    """``[(path, array)]`` written by :func:`pack_weights` (``initial``: the same
    starting values, by path)."""
    directory = Path(directory)
    entries = json.loads((directory / "weights.json").read_text())
    parts = {}
    named = []
    for entry in entries:
        dtype = np.dtype("uint32" if entry["xor"] else entry["dtype"])
        chunks = []
        for name, index in zip(entry["pieces"], entry["parts"]):
            if index not in parts:
                parts[index] = np.load(directory / f"weights-{index}.npz")
            raw = np.frombuffer(zlib.decompress(parts[index][name].tobytes()), np.uint8)
            chunks.append(raw.reshape(dtype.itemsize, -1).T.copy().view(dtype).reshape(-1))
        bits = np.concatenate(chunks)[: int(np.prod(entry["shape"]))].reshape(entry["shape"])
        if entry["xor"]:
            base = np.ascontiguousarray(initial[entry["path"]], np.float32)
            bits = (bits ^ base.view(np.uint32)).view(np.float32)
        named.append((entry["path"], bits.astype(entry["dtype"], copy=False)))
    return named


def unpacked_encoder(bundle):
    """The bundle's encoder as a Hugging Face layout folder: ``model.safetensors``
    unpacked from ``encoder/weights-*.npz`` once, under /tmp (never inside the
    bundle, which must stay small enough to carry); returns its path."""
    import hashlib
    import tempfile

    from safetensors.numpy import save_file

    source = Path(bundle).resolve() / "encoder"
    if not (source / "weights.json").exists():
        fail(f"{bundle}: no encoder/weights.json (write the bundle with: python -m bench.offline_gpu_host.conll prepare)")
    key = hashlib.sha1((str(source) + (source / "weights.json").read_text()).encode()).hexdigest()[:12]
    target = Path(tempfile.gettempdir()) / f"gpu_conll_encoder_{key}"
    if not (target / "model.safetensors").exists():
        target.mkdir(parents=True, exist_ok=True)
        for name in ("config.json", "vocab.txt", "tokenizer_config.json"):
            shutil.copy(source / name, target / name)
        save_file(dict(unpack_weights(source, {})), str(target / "model.safetensors.partial"))
        os.replace(target / "model.safetensors.partial", target / "model.safetensors")
    return str(target)


# =============================================================================
# train's helpers
# =============================================================================


def host_and_transfer(batches, n):
    """Seconds to build each of the first ``n`` batches on the host, and to put each on the device."""
    import jax

    host, transfer = [], []
    for i in range(min(len(batches), n)):
        t = time.perf_counter()
        data = batches[i]
        host.append(time.perf_counter() - t)
        t = time.perf_counter()
        jax.block_until_ready(jax.device_put(data))
        transfer.append(time.perf_counter() - t)
    return host, transfer


# =============================================================================
# train (JAX, no TensorFlow)
# =============================================================================


def dev_forward(model, dev):
    """``dev_scores`` for ``fit_and_select``: the model's Viterbi tags of every
    dev row (batches of DEV_BATCH rows padded to MAX_LENGTH: one shape)."""
    count = len(dev["token_ids"])
    ids = np.zeros((count, MAX_LENGTH), np.int32)
    for i, row in enumerate(dev["token_ids"]):
        ids[i, : len(row)] = row
    mask = (ids != 0).astype(np.int32)
    mask[:, 0] = 1

    def tags():
        out = []
        for begin in range(0, count, DEV_BATCH):
            chunk = ids[begin : begin + DEV_BATCH]
            pad = [(0, DEV_BATCH - len(chunk)), (0, 0)]
            inputs = {"token_ids": np.pad(chunk, pad), "segment_ids": np.zeros((DEV_BATCH, MAX_LENGTH), np.int32),
                      "padding_mask": np.pad(mask[begin : begin + DEV_BATCH], pad)}
            predicted = np.asarray(model.predict_on_batch(inputs)["tags"])
            out += [predicted[k, : len(dev["token_ids"][begin + k])] for k in range(len(chunk))]
        return out

    return tags


def train(args):
    if args.block_tensorflow:
        block_tensorflow()
    meta, rows, dev = load_bundle(args.bundle)
    import jax
    import keras

    from kerasbert_apps.ner.heads.bio.pipeline import Tagger
    from kerasbert_apps.ner.train import NerTrainSettings
    from kerasbert.training.batching import BucketedBatches
    from kerasbert.training.distribution import distribution_scope
    from kerasbert.training.fit import compile_for_training
    from kerasbert.training.fit import fit_and_select
    from kerasbert.training.fit import open_encoder_checkpoint
    from kerasbert.training.fit import resolve_auto
    from kerasbert.training.fit import start_run
    from kerasbert.checkpoints.loader import load_encoder

    if keras.backend.backend() != "jax":
        fail(f"train is the JAX run: set KERAS_BACKEND=jax (the backend is {keras.backend.backend()})")
    tags = meta["tags"]
    given = {k: v for k, v in meta["settings"].items()}
    work = Path(args.workdir)
    if work.exists():
        shutil.rmtree(work)
    given.update(checkpoint=unpacked_encoder(args.bundle), output=str(work), precision=args.precision,
                 strategy=args.strategy)
    if args.epochs:
        given["epochs"] = args.epochs
    if args.max_train:
        rows = {k: v[: args.max_train] for k, v in rows.items()}
        dev = {k: v[: args.max_train] for k, v in dev.items()}
    settings = NerTrainSettings(**given)
    settings.check()
    device = jax.devices()[0]
    print(f"device: {device.device_kind} ({device.platform}); jax {jax.__version__}, keras {keras.__version__}; "
          f"XLA_FLAGS={os.environ.get('XLA_FLAGS', '')!r}; {len(rows['token_ids'])} train rows, "
          f"{len(dev['token_ids'])} dev rows; precision {settings.precision}, batch {settings.batch_size}, "
          f"{settings.epochs} epochs", flush=True)

    start_run(settings)
    checkpoint, tokenizer = open_encoder_checkpoint(settings)
    with distribution_scope(settings.strategy):
        model = Tagger.build_model(load_encoder(checkpoint), tags, settings)
        initial = {v.path: keras.ops.convert_to_numpy(v) for v in model.encoder.weights}
        pipeline = Tagger.for_training(model, tokenizer, tags, settings)
        settings = resolve_auto(settings, len(rows["token_ids"]))
        if args.pad_to_multiple == LIBRARY_PAD:
            batches = pipeline.batches(rows, settings)  # exactly ner train's
        else:  # the same batches with fewer widths (fewer traces of the step)
            batches = BucketedBatches(rows, settings.batch_size, targets=("tags",), seed=settings.seed,
                                      max_width=pipeline.max_length, pad_to_multiple=args.pad_to_multiple)
        traces = count_traces(model)
        compile_for_training(model, len(batches), settings, Tagger.head_prefix)

    predict_tags = dev_forward(model, dev)
    history = []

    def dev_scores():
        t = time.perf_counter()
        scores = row_entity_f1(predict_tags(), dev["tags"], tags)
        scores["seconds"] = round(time.perf_counter() - t, 2)
        history.append(scores)
        return scores

    def save_weights(directory):
        named = [(v.path, keras.ops.convert_to_numpy(v)) for v in model.weights]
        pack_weights(named, initial, directory)

    metrics = fit_and_select(model, batches, settings, dev_scores=dev_scores, save_pipeline=save_weights,
                             format_scores=lambda s: f"dev entity F1 over the window rows' BIO tags: "
                                                     f"{s['f1']:.4f} (P {s['precision']:.4f}, R {s['recall']:.4f})")
    # What one step is made of, after training: host batching and the transfer.
    host, transfer = host_and_transfer(batches, 20)
    widths = sorted({batches._width(b) for b in batches.batches})
    epochs = metrics["train_epoch_seconds"]
    steps = len(batches)
    later = epochs[1:]
    run = {
        "device": device.device_kind, "platform": device.platform,
        "versions": {"jax": jax.__version__, "keras": keras.__version__},
        "xla_flags": os.environ.get("XLA_FLAGS", ""), "settings": dataclasses.asdict(settings), "tags": tags,
        "pad_to_multiple": args.pad_to_multiple, "bundle_id": meta.get("bundle_id"),
        "bundle": {k: meta[k] for k in ("vocabulary", "rows", "examples", "train_tokens")},
        "metrics": metrics, "dev_by_epoch": history,
        "steps_per_epoch": steps, "bucket_widths": widths, "traces": len(traces), "trace_shapes": sorted(set(traces)),
        "compile_seconds_estimate": round(epochs[0] - float(np.mean(later)), 2) if later else None,
        "step_ms_after_first_epoch": round(float(np.mean(later)) / steps * 1000, 2) if later else None,
        "host_batch_ms": median_ms(host), "transfer_ms": median_ms(transfer), **memory(),
    }
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    model_dir = work / "model"
    copied, left = 0, []
    parts = sorted(model_dir.glob("weights-*.npz"), key=lambda p: int(p.stem.split("-")[1]))
    for path in [model_dir / "weights.json"] + parts:  # at most RETURN_BYTES to OUT
        if copied + path.stat().st_size > RETURN_BYTES:
            left.append(str(path))
            continue
        shutil.copy(path, out / path.name)
        copied += path.stat().st_size
    run["left_in_workdir"] = left
    (out / "run.json").write_text(json.dumps(run, indent=1, default=str) + "\n")
    if left:
        print(f"WARNING: the weights are over the {RETURN_BYTES / 2**20:.0f} MiB copied to OUT; left in "
              "--workdir (copy them to OUT yourself where the host allows): " + " ".join(left))
    print(f"\ntrain seconds {metrics['train_seconds']:.1f} (epochs {', '.join(f'{s:.1f}' for s in epochs)} s); "
          f"tokens/s after the first epoch {metrics['train_tokens_per_s_after_first_epoch'] or 0:,.0f}; "
          f"{len(traces)} traces of the step over {len(widths)} bucket widths; compile about "
          f"{run['compile_seconds_estimate']} s; host batch {run['host_batch_ms']} ms, transfer {run['transfer_ms']} ms")
    print(f"best epoch {metrics['best_epoch']}; weights {copied / 2**20:.1f} MiB in "
          f"{len(list(out.glob('weights-*.npz')))} parts + weights.json + run.json -> {out}")


# =============================================================================
# check (TensorFlow): the weights back into a model folder, evaluate, export, parity
# =============================================================================


def check(args):
    quiet_tf_logs()
    import keras
    import tensorflow as tf

    from kerasbert_apps.ner.heads.bio.pipeline import Tagger
    from kerasbert_apps.ner.train import NER
    from kerasbert_apps.ner.train import NerTrainSettings
    from kerasbert.serving.rows import unpad
    from kerasbert.checkpoints.loader import load_encoder
    from kerasbert.checkpoints.loader import load_tokenizer
    from kerasbert.checkpoints.loader import open_checkpoint

    run_dir, bundle = Path(args.run), Path(args.bundle)
    if not (run_dir / "weights.json").exists() or not (run_dir / "run.json").exists():
        fail(f"{run_dir}: no weights.json/run.json (what `train --out` writes)")
    meta = json.loads((bundle / "bundle.json").read_text())
    run = json.loads((run_dir / "run.json").read_text())
    if not meta.get("bundle_id") or run.get("bundle_id") != meta["bundle_id"]:
        fail(f"{run_dir} was trained from bundle {run.get('bundle_id')}, {bundle} is {meta.get('bundle_id')}: check needs "
             "the very bundle the run was trained from (its weights come back relative to it)")
    kept = np.load(bundle / "data.npz")["kept"]
    given = dict(run["settings"])
    settings = NerTrainSettings(**{**given, "checkpoint": meta["checkpoint"], "precision": "float32",
                                   "strategy": "default"})
    tags = run["tags"]

    trimmed = Tagger.build_model(load_encoder(unpacked_encoder(bundle)), tags, settings)
    initial = {v.path: keras.ops.convert_to_numpy(v) for v in trimmed.encoder.weights}
    named = unpack_weights(run_dir, initial)
    full = Tagger.build_model(load_encoder(meta["checkpoint"]), tags, settings)
    if [p for p, _ in named] != [v.path for v in trimmed.weights] or len(full.weights) != len(named):
        fail("the weights brought back are not this model's (variable paths differ): the same kerasbert and keras on the GPU host?")
    arrays = np.load(bundle / "data.npz")
    zeroed, canary = kept[arrays["zeroed_rows"]], arrays["canary_rows"]
    for variable, (path, value) in zip(full.weights, named):
        original = keras.ops.convert_to_numpy(variable).copy()  # the checkpoint's
        if path.endswith("token_embedding/embeddings"):
            # rows of tokens training never reached only decayed: measure by how much on the dev-only rows
            before = original[kept[canary]]
            use = np.abs(before) > 1e-3
            ratio = value[canary][use] / before[use]
            decay = np.float32(np.median(ratio)) if use.any() else np.float32(1.0)
            print(f"word embeddings: {len(canary)} rows of tokens only dev uses decayed by x{decay:.7f} "
                  f"(spread {float(np.abs(ratio - decay).max()) if use.any() else 0.0:.1e}); the {len(zeroed)} "
                  f"rows of test-only tokens: the checkpoint's x that")
            table = original
            table[kept] = value
            table[zeroed] = original[zeroed] * decay
            value = table
        elif path.endswith("position_embedding/embeddings"):
            value = np.concatenate([value[: settings.max_length], original[settings.max_length :]])
        elif "pooled_dense" in path:  # frozen: the checkpoint's
            value = original
        if tuple(variable.shape) != value.shape:
            fail(f"{path}: shape {value.shape} brought back, {tuple(variable.shape)} in the model")
        variable.assign(value)
    tokenizer = load_tokenizer(open_checkpoint(meta["checkpoint"]), max_length=settings.max_length)
    pipeline = Tagger(full, tokenizer, tags, max_length=settings.max_length)
    model_dir = Path(args.model_out)
    if model_dir.exists():
        fail(f"{model_dir} exists; choose another --model-out")
    pipeline.save(str(model_dir))
    data = {split: CONLL / f"eng.{split}" for split in ("testa", "testb")}
    if args.max_examples:  # a smoke run: the first sentences of each file
        for split in data:
            data[split] = first_sentences(data[split], args.max_examples, model_dir.parent / f"eng.{split}")
    dev_examples = NER.read(str(data["testa"]), settings, "dev")
    if settings.calibrate:
        Tagger.after_training(model_dir, dev_examples, settings)
    pipeline = Tagger.load(model_dir)
    print(f"model folder: {model_dir} (trained on {run['device']}, best epoch {run['metrics']['best_epoch']})")

    kerasbert = str(Path(sys.executable).parent / "kerasbert")
    scores = {}
    for split in ("testa", "testb"):
        path = model_dir.parent / f"eng.{split}.scores.json"
        command = [kerasbert, "ner", "evaluate", "--model", str(model_dir), "--data", str(data[split]),
                   "--output", str(path)]
        print("$ " + " ".join(command), flush=True)
        subprocess.run(command, check=True)
        scores[split] = json.loads(path.read_text())
    export_base = model_dir.parent / "export"
    command = [kerasbert, "ner", "export", "--model", str(model_dir), "--output", str(export_base)]
    print("$ " + " ".join(command), flush=True)
    subprocess.run(command, check=True)
    version = max((p for p in export_base.iterdir() if p.name.isdigit()), key=lambda p: int(p.name))
    serve = tf.saved_model.load(str(version)).signatures["serving_default"]
    test = [e.text for e in NER.read(str(data["testb"]), settings, "test")]
    predicted = pipeline.predict(test, batch_size=32)
    differ, worst = 0, 0.0
    for begin in range(0, len(test), 64):
        texts = test[begin : begin + 64]
        rows = unpad(serve(text=tf.constant(texts)))
        for text, row, mine in zip(texts, rows, predicted[begin : begin + 64]):
            theirs = pipeline.result(text, row)["entities"]
            if [(e["start"], e["end"], e["type"]) for e in theirs] != [(e["start"], e["end"], e["type"]) for e in mine["entities"]]:
                differ += 1
            worst = max([worst] + [abs(a["score"] - b["score"]) for a, b in zip(theirs, mine["entities"])])
    f1 = {s: scores[s]["f1"] for s in scores}
    cpu = cpu_reference()
    print(f"\nGPU-trained model ({run['device']}, jax {run['versions']['jax']}, {run['settings']['precision']}): "
          f"dev (eng.testa) F1 {f1['testa'] * 100:.2f}, test (eng.testb) F1 {f1['testb'] * 100:.2f}; its own dev "
          f"score on the GPU host (window rows' BIO tags) {run['metrics']['dev']['f1'] * 100:.2f}")
    if cpu:
        print(f"the CPU run ({cpu['source']}): dev F1 {cpu['dev F1']:.2f}, test F1 {cpu['test F1']:.2f}; test "
              f"difference {f1['testb'] * 100 - cpu['test F1']:+.2f} (target: within 0.5)")
    print(f"SavedModel vs predict on {len(test)} test texts: {differ} differ in their entities; scores within {worst:.1e}")
    if args.max_examples:
        print("a smoke run (--max-examples): not written to bench/results")
        raise SystemExit(1 if differ else 0)
    write_result("gpu_conll", [{
        "system": "MiniLM-BiLSTM-CRF trained on the GPU, scored with TensorFlow", "device": run["device"],
        "precision": run["settings"]["precision"], "dev_f1": f1["testa"], "test_f1": f1["testb"],
        "cpu_test_f1": cpu and cpu["test F1"] / 100, "best_epoch": run["metrics"]["best_epoch"],
        "train_seconds": run["metrics"]["train_seconds"],
        "train_tokens_per_s_after_first_epoch": run["metrics"]["train_tokens_per_s_after_first_epoch"],
        "savedmodel_texts_differing": differ, "savedmodel_max_score_difference": worst}],
        setup={"run": run, "keras": keras.__version__, "tensorflow": tf.__version__}, name="parity")
    if differ:
        raise SystemExit(1)


def cpu_reference():
    """The CPU run's dev and test F1 (percent) with the same settings: the newest
    ``bench/results/ner_conll2003`` row of kerasbert's MiniLM-BiLSTM-CRF in
    float32, with its file as ``source``; None when there is none."""
    found = None
    for path in sorted((RESULTS / "ner_conll2003").glob("*.json")):
        for row in json.loads(path.read_text(encoding="utf-8"))["rows"]:
            if row.get("system", "").startswith("kerasbert MiniLM-BiLSTM-CRF, float32") and "test F1" in row:
                found = {**row, "source": str(path.relative_to(ROOT))}
    return found


def first_sentences(path, count, target):
    """The first ``count`` sentences of the CoNLL file ``path`` (blank-line
    separated), written to ``target``; returns ``target``."""
    lines, seen = [], 0
    for line in Path(path).read_text(encoding="utf-8").splitlines():
        lines.append(line)
        if not line.strip() and lines[-2:-1] and lines[-2].strip() and not lines[-2].startswith("-DOCSTART-"):
            seen += 1
            if seen >= count:
                break
    Path(target).write_text("\n".join(lines) + "\n", encoding="utf-8")
    return target


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    p = commands.add_parser("prepare", help="write the bundle (needs TensorFlow)")
    p.add_argument("--bundle", required=True)
    p.add_argument("--checkpoint", default=str(MINILM), help="an official or Hugging Face layout BERT folder")
    p.add_argument("--max-train", type=int, default=0, help="only the first N training sentences (0: all)")
    p.add_argument("--max-dev", type=int, default=0, help="only the first N dev sentences (0: all)")
    p = commands.add_parser("train", help="the MiniLM CoNLL-2003 run (JAX)")
    p.add_argument("--bundle", required=True)
    p.add_argument("--out", required=True, help="where the weights parts and run.json go (e.g. $OUT)")
    p.add_argument("--workdir", default=os.path.join(tempfile.gettempdir(), "gpu_conll_run"), help="the run's output folder (replaced)")
    p.add_argument("--precision", default="float32", choices=PRECISIONS)
    p.add_argument("--strategy", default="default", choices=("default", "mirrored"),
                   help="mirrored: keras.distribution.DataParallel over the machine's devices")
    p.add_argument("--epochs", type=int, default=0, help="instead of the bundle's (3)")
    p.add_argument("--pad-to-multiple", type=int, default=LIBRARY_PAD,
                   help="round each batch's width up to a multiple of this (default: ner train's 8, up to 16 "
                        "widths, each one trace and compilation of the step; 32: 4 widths)")
    p.add_argument("--max-train", type=int, default=0, help="only the first N train and dev rows (a smoke run)")
    p.add_argument("--block-tensorflow", action="store_true", help="fail on any TensorFlow import (as on a host without it)")
    p = commands.add_parser("check", help="the weights back into a model folder; evaluate, export, parity (TensorFlow)")
    p.add_argument("--bundle", required=True)
    p.add_argument("--run", required=True, help="the folder of train's files (weights-*.npz, weights.json, run.json)")
    p.add_argument("--model-out", required=True, help="the model folder to write (must not exist)")
    p.add_argument("--max-examples", type=int, default=0,
                   help="score only the first N sentences of eng.testa/testb (a smoke run; 0: all)")
    args = parser.parse_args()
    {"prepare": prepare, "train": train, "check": check}[args.command](args)


if __name__ == "__main__":
    main()
