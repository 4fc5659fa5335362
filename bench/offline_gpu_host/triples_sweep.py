"""GPLinker on WebNLG (exact) on a GPU host without TensorFlow: a settings sweep.

Our tooling, not a benchmark a user runs (on a machine with TensorFlow, each
settings line is ``python -m bench.triples_webnlg --head gplinker --datasets
webnlg_exact`` with those options). For a GPU host that has JAX but no
TensorFlow (the library's tokenizer and decoding are TensorFlow ops), the
work is split between the preparing machine (with TensorFlow) and the GPU host:

1. ``prepare`` (preparing machine, TensorFlow): the training rows exactly as
   ``kerasbert triples train --head gplinker`` makes them
   (:meth:`GPLinkerExtractor.features`), the dev and test windows, the
   predicate list and the dev/test files go to BUNDLE, with the starter
   checkpoint (Hugging Face layout) whose word embeddings keep only the
   token ids these rows use (ids renumbered; nothing else changes, since an
   unused row is never looked up): about 50 MB, to copy to the GPU host
   with the wheels of keras, keras-hub, namex and optree.
2. ``sweep`` (GPU host, ``KERAS_BACKEND=jax``): for each settings dict of a
   plan, the library's own training path (``start_run``, ``load_encoder``,
   ``build_model``, ``BucketedBatches``, ``compile_for_training``,
   ``fit_and_select``), every batch padded to ``max_length`` (one shape,
   one XLA compilation), and after every epoch dev AND test decoded at the
   default thresholds by :func:`decode_rows` (numpy) and scored by the
   library's scorer. The test F1 reported is the one of the best dev epoch.
   Each line of the plan runs in its own process, all at once (a MiniLM
   leaves most of an H100 idle).
3. ``check`` (preparing machine): :func:`decode_rows` against the library's decoding
   (``predict``) of a trained model folder: the same triples for every text.

::

    python -m bench.offline_gpu_host.triples_sweep prepare --bundle .gpu/bundle
    python -m bench.offline_gpu_host.triples_sweep check --model RUN/model
    # on the GPU host, after installing those wheels:
    XLA_FLAGS=--xla_gpu_enable_triton_gemm=false KERAS_BACKEND=jax \\
        python -m bench.offline_gpu_host.triples_sweep sweep --bundle .gpu/bundle --out OUT --plan plan.jsonl

The sweep's parent writes its rows (one per settings dict, the best dev
epoch's scores) as a ``bench.common`` record under ``OUT/results/``
(``triples_gpu_sweep/<date>-<name>.json``: the GPU machine's CPU, versions,
the devices in ``setup``); copy it back where the bench's records live::

    cp OUT/results/triples_gpu_sweep/*.json bench/results/triples_gpu_sweep/

``--smoke`` runs name their record ``smoke``: not a result.

A plan line is a JSON list of settings dicts (``TriplesTrainSettings``
fields plus ``name``; float32 unless one names a ``precision``), run one
after the other by one process. With jax 0.11.2 on an H100, XLA aborted
compiling the training step in its Triton GEMM tiling (``Check failed:
subdim_size_accumulator == dim_size (8192 vs. 128)``);
``--xla_gpu_enable_triton_gemm=false`` avoids it.
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from bench.common import ROOT
from bench.common import SHARED as DATA
from bench.common import flags_line
from bench.common import write_result

SHARED = DATA / "webnlg_exact"
MAX_LENGTH = 128
INFER_BATCH = 64
SPLITS = {"dev": "val_triples.json", "test": "test_triples.json"}


# =============================================================================
# prepare (TensorFlow)
# =============================================================================


def prepare(args):
    from safetensors.numpy import load_file
    from safetensors.numpy import save_file

    from kerasbert_apps.triples.data import predicates_of
    from kerasbert_apps.triples.data import read_triples_file
    from kerasbert_apps.triples.heads.gplinker.pipeline import GPLinkerExtractor
    from kerasbert.checkpoints.loader import load_tokenizer
    from kerasbert.checkpoints.loader import open_checkpoint
    from kerasbert.checkpoints.loader import resolve_checkpoint

    hf = Path(resolve_checkpoint(args.checkpoint))
    out = Path(args.bundle)
    shutil.rmtree(out, ignore_errors=True)
    (out / "encoder").mkdir(parents=True)
    train = read_triples_file(SHARED / "train_triples.json.gz").examples
    predicates = predicates_of(train)
    tokenizer = load_tokenizer(open_checkpoint(str(hf)), max_length=MAX_LENGTH)
    pipeline = GPLinkerExtractor(None, tokenizer, predicates, max_length=MAX_LENGTH)
    rows, report = pipeline.features(train)
    print("train features: " + report.summary())
    windows = {s: pipeline.windows_numpy([e.text for e in read_triples_file(SHARED / f).examples])
               for s, f in SPLITS.items()}

    used = {0, tokenizer.cls_id, tokenizer.sep_id, tokenizer.token_to_id("[UNK]")}
    for ids in rows["token_ids"]:
        used.update(ids.tolist())
    for w in windows.values():
        used.update(np.unique(w["token_ids"]).tolist())
    kept = np.array(sorted(used))
    renumber = np.full(tokenizer.vocabulary_size, -1, np.int64)
    renumber[kept] = np.arange(len(kept))
    print(f"vocabulary: {len(kept)} of {tokenizer.vocabulary_size} tokens used, the others' embeddings left out")

    arrays = {}
    for name, values in rows.items():
        values = [renumber[v] if name == "token_ids" else v for v in values]
        arrays[f"train/{name}/lengths"] = np.array([len(v) for v in values])
        arrays[f"train/{name}/widths"] = np.array([v.shape[1] if v.ndim == 2 else 0 for v in values])
        arrays[f"train/{name}/flat"] = np.concatenate([v.reshape(-1) for v in values]).astype(np.int32)
    for split, w in windows.items():
        for key, value in w.items():
            arrays[f"{split}/{key}"] = renumber[value].astype(np.int32) if key == "token_ids" else value
    np.savez_compressed(out / "data.npz", **arrays)
    for name in SPLITS.values():
        shutil.copy(SHARED / name, out / name)
    (out / "predicates.json").write_text(json.dumps(predicates))

    weights = load_file(hf / "model.safetensors")
    for name in [k for k in weights if k.endswith("embeddings.position_ids")]:  # a buffer, not a weight
        weights.pop(name)
    (key,) = [k for k in weights if k.endswith("embeddings.word_embeddings.weight")]  # with or without "bert."
    weights[key] = np.ascontiguousarray(weights[key][kept])
    save_file(weights, out / "encoder" / "model.safetensors")
    config = json.loads((hf / "config.json").read_text())
    config["vocab_size"] = len(kept)
    (out / "encoder" / "config.json").write_text(json.dumps(config, indent=2))
    (out / "encoder" / "vocab.txt").write_text("".join(tokenizer.id_to_token(int(i)) + "\n" for i in kept))
    (out / "encoder" / "tokenizer_config.json").write_text(json.dumps({"do_lower_case": tokenizer.lowercase}))
    size = sum(p.stat().st_size for p in out.rglob("*") if p.is_file())
    print(f"{out}: {size / 2**20:.1f} MiB")


# =============================================================================
# the bundle and the numpy decoding (no TensorFlow)
# =============================================================================


def padded_windows(windows):
    """``windows`` (``windows_numpy``) with ``token_ids`` and ``offsets``
    padded to MAX_LENGTH positions: one shape, one compilation."""
    pad = MAX_LENGTH - windows["token_ids"].shape[1]
    return {**windows, "token_ids": np.pad(windows["token_ids"], [(0, 0), (0, pad)]),
            "offsets": np.pad(windows["offsets"], [(0, 0), (0, pad), (0, 0)])}


def load_bundle(bundle, smoke=0):
    """``(train rows, dev/test windows padded to MAX_LENGTH, dev/test
    examples, predicates)``; ``smoke``: only the first N rows and texts."""
    from kerasbert_apps.triples.data import read_triples_file

    bundle = Path(bundle)
    data = np.load(bundle / "data.npz")
    rows = {}
    for name in sorted({k.split("/")[1] for k in data.files if k.startswith("train/")}):
        lengths, widths, flat = (data[f"train/{name}/{x}"] for x in ("lengths", "widths", "flat"))
        parts = np.split(flat, np.cumsum(lengths * np.maximum(widths, 1))[:-1])
        rows[name] = [p.reshape(n, w) if w else p for p, n, w in zip(parts, lengths, widths)]
    windows = {s: padded_windows({k.split("/")[1]: data[k] for k in data.files if k.startswith(s + "/")})
               for s in SPLITS}
    examples = {s: read_triples_file(bundle / f).examples for s, f in SPLITS.items()}
    if smoke:
        rows = {k: v[:smoke] for k, v in rows.items()}
        for s, w in windows.items():
            keep = w["text_index"] < smoke
            windows[s] = {k: (v[:smoke] if k == "num_tokens" else v[keep]) for k, v in w.items()}
            examples[s] = examples[s][:smoke]
    return rows, windows, examples, json.loads((bundle / "predicates.json").read_text())


def _forward(model):
    """inputs -> ``(entities, heads, tails)`` logits above 0 as numpy bools (jitted on JAX)."""
    import keras

    if keras.backend.backend() != "jax":
        return lambda inputs: tuple(np.asarray(out) > 0 for out in
                                    (model.predict_on_batch(inputs)[k] for k in ("entities", "heads", "tails")))
    if not hasattr(model, "_sweep_forward"):  # one jitted function per model, traced once (one shape)
        import jax

        @jax.jit
        def forward(trainable, non_trainable, inputs):
            out, _ = model.stateless_call(trainable, non_trainable, inputs, training=False)
            return out["entities"] > 0, out["heads"] > 0, out["tails"] > 0

        model._sweep_forward = forward
    trainable = [v.value for v in model.trainable_variables]
    non_trainable = [v.value for v in model.non_trainable_variables]
    return lambda inputs: tuple(np.asarray(x) for x in model._sweep_forward(trainable, non_trainable, inputs))


def decode_rows(model, windows, examples, predicates):
    """The extractor's output dicts for ``examples`` (their ``windows``) at the
    default thresholds (every logit above 0), by the rule of
    :mod:`kerasbert_apps.triples.heads.gplinker.decode` (spans ``i <= j`` of real tokens;
    a subject and an object linked by predicate ``p`` when both their head
    and their tail links are; a triple found in several windows once), in
    numpy; ``score`` is not computed (1.0). ``check`` compares it with the library's decoding."""
    forward = _forward(model)
    found = [set() for _ in examples]
    n_rows, width = windows["token_ids"].shape
    for begin in range(0, n_rows, INFER_BATCH):
        ids = windows["token_ids"][begin : begin + INFER_BATCH]
        pad = [(0, INFER_BATCH - len(ids)), (0, 0)]
        inputs = {"token_ids": np.pad(ids, pad), "segment_ids": np.zeros((INFER_BATCH, width), np.int32),
                  "padding_mask": np.pad((ids != 0).astype(np.int32), pad)}
        entities, heads, tails = forward(inputs)
        for k in range(len(ids)):
            row = begin + k
            n = int(windows["token_end"][row] - windows["token_start"][row])
            spans = np.triu(entities[k, 1 : n + 1, 1 : n + 1].transpose(2, 0, 1))  # [2, n, n]: i <= j
            offsets, text = windows["offsets"][row], int(windows["text_index"][row])
            for si, sj in np.argwhere(spans[0]) + 1:
                for oi, oj in np.argwhere(spans[1]) + 1:
                    for p in np.nonzero(heads[k, si, oi] & tails[k, sj, oj])[0]:
                        found[text].add((int(offsets[si, 0]), int(offsets[sj, 1]), int(p),
                                         int(offsets[oi, 0]), int(offsets[oj, 1])))
    return [{"text": ex.text, "triples": [
        {"subject": {"start": a, "end": b, "text": ex.text[a:b]}, "predicate": predicates[p],
         "object": {"start": c, "end": d, "text": ex.text[c:d]}, "score": 1.0} for a, b, p, c, d in sorted(triples)]}
        for ex, triples in zip(examples, found)]


# =============================================================================
# check (TensorFlow): decode_rows against the library's decoding
# =============================================================================


def check(args):
    from kerasbert_apps.triples.data import read_triples_file
    from kerasbert_apps.triples.evaluate import score
    from kerasbert_apps.triples.train import TRIPLES

    extractor = TRIPLES.load(args.model)
    test = read_triples_file(SHARED / SPLITS["test"]).examples
    windows = padded_windows(extractor.windows_numpy([e.text for e in test]))
    mine = decode_rows(extractor.model, windows, test, extractor.predicates)
    library = extractor.predict([e.text for e in test], batch_size=32)

    def keys(prediction):
        return sorted((t["subject"]["start"], t["subject"]["end"], t["predicate"], t["object"]["start"],
                       t["object"]["end"]) for t in prediction["triples"])

    differ = sum(keys(a) != keys(b) for a, b in zip(mine, library))
    print(f"{args.model} on {len(test)} test texts: {differ} differ; exact F1 decode_rows "
          f"{score(test, mine)['exact']['f1']:.4f}, library {score(test, library)['exact']['f1']:.4f}")
    if differ:
        raise SystemExit(1)


# =============================================================================
# sweep (JAX, no TensorFlow)
# =============================================================================


def run_settings(settings_dict, bundle, out, data):
    from kerasbert_apps.triples.evaluate import score
    from kerasbert_apps.triples.heads.gplinker.pipeline import GPLinkerExtractor
    from kerasbert_apps.triples.heads.gplinker.model import CODES
    from kerasbert_apps.triples.heads.gplinker.model import OUTPUTS
    from kerasbert_apps.triples.train import TriplesTrainSettings
    from kerasbert.training.batching import BucketedBatches
    from kerasbert.training.fit import compile_for_training
    from kerasbert.training.fit import fit_and_select
    from kerasbert.training.fit import open_encoder_checkpoint
    from kerasbert.training.fit import resolve_auto
    from kerasbert.training.fit import start_run
    from kerasbert.checkpoints.loader import load_encoder

    rows, windows, examples, predicates = data
    given = dict(settings_dict)
    name = given.pop("name")
    dev_file = str(Path(bundle) / SPLITS["dev"])
    settings = TriplesTrainSettings(checkpoint=str(Path(bundle) / "encoder"), train=dev_file, dev=dev_file,
                                    output=str(Path(out) / name), head="gplinker", eval_mode="exact",
                                    max_length=MAX_LENGTH, **{"precision": "float32", **given})
    start_run(settings)
    checkpoint, tokenizer = open_encoder_checkpoint(settings)
    model = GPLinkerExtractor.build_model(load_encoder(checkpoint), predicates, settings)
    settings = resolve_auto(settings, len(rows["token_ids"]))
    batches = BucketedBatches(rows, settings.batch_size, targets=tuple(CODES[k] for k in OUTPUTS),
                              seed=settings.seed, max_width=MAX_LENGTH, pad_to_multiple=MAX_LENGTH)
    compile_for_training(model, len(batches), settings, GPLinkerExtractor.head_prefix)
    epochs = []

    def dev_scores():
        got = {s: score(examples[s], decode_rows(model, windows[s], examples[s], predicates), mode="exact")
               for s in SPLITS}
        epochs.append({"dev": got["dev"]["f1"], "test": got["test"]["f1"], "test_precision": got["test"]["precision"],
                       "test_recall": got["test"]["recall"],
                       "test_by_overlap": {k: v["f1"] for k, v in got["test"]["by_overlap"].items()}})
        print(f"  {name} epoch {len(epochs)}: dev {got['dev']['f1']:.4f} test {got['test']['f1']:.4f}", flush=True)
        return {k: got["dev"][k] for k in ("f1", "precision", "recall")}

    started = time.perf_counter()
    metrics = fit_and_select(model, batches, settings, dev_scores=dev_scores,
                             save_pipeline=lambda directory: None, format_scores=str)
    best = metrics["best_epoch"]
    return {"name": name, **given, "best_epoch": best, **epochs[best - 1],
            "seconds": time.perf_counter() - started, "train_tokens_per_s": metrics["train_tokens_per_s_after_first_epoch"],
            "dev_test_by_epoch": [(round(e["dev"], 4), round(e["test"], 4)) for e in epochs]}


def sweep(args):
    import jax
    import keras

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    if args.settings is None:  # the parent: one child process per plan line, all at once
        print(f"devices: {jax.devices()}; keras {keras.__version__}, jax {jax.__version__}, "
              f"backend {keras.backend.backend()}; XLA_FLAGS={os.environ.get('XLA_FLAGS', '')!r}", flush=True)
        lines = [line for line in Path(args.plan).read_text().splitlines() if line.strip()]
        env = dict(os.environ, XLA_PYTHON_CLIENT_PREALLOCATE="false", PYTHONUNBUFFERED="1")
        logs = [open(out / f"p{i}.log", "w") for i in range(len(lines))]
        children = [subprocess.Popen([sys.executable, "-m", "bench.offline_gpu_host.triples_sweep", "sweep",
                                      "--bundle", args.bundle, "--out",
                                      str(out / f"p{i}"), "--settings", line, "--smoke", str(args.smoke)],
                                     stdout=log, stderr=subprocess.STDOUT, env=env, cwd=ROOT)
                    for i, (line, log) in enumerate(zip(lines, logs))]
        deadline = time.monotonic() + args.time_limit
        while any(c.poll() is None for c in children) and time.monotonic() < deadline:
            time.sleep(5)
        for c, log in zip(children, logs):
            if c.poll() is None:
                c.kill()
                c.wait()
            log.close()
        results = [json.loads(line) for i in range(len(lines)) if (out / f"p{i}" / "results.jsonl").exists()
                   for line in (out / f"p{i}" / "results.jsonl").read_text().splitlines()]
        print("| settings | best epoch | dev F1 | test exact F1 | P | R | normal / SEO / EPO | train tokens/s |")
        print("|---|---:|---:|---:|---:|---:|---:|---:|")
        for r in results:
            o = r["test_by_overlap"]
            print(f"| {r['name']} | {r['best_epoch']} | {r['dev'] * 100:.1f} | {r['test'] * 100:.1f} | "
                  f"{r['test_precision'] * 100:.1f} | {r['test_recall'] * 100:.1f} | {o['normal'] * 100:.1f} / "
                  f"{o['SEO'] * 100:.1f} / {o['EPO'] * 100:.1f} | {r['train_tokens_per_s'] or 0:.0f} |")
        print(f"{len(results)} finished; per-epoch dev and test F1 in {out}/p*.log")
        if results:
            write_sweep_result(args, results, out, lines)
        return
    data = load_bundle(args.bundle, smoke=args.smoke)
    for settings_dict in json.loads(args.settings):
        result = run_settings(settings_dict, args.bundle, out, data)
        print("RESULT " + json.dumps(result), flush=True)
        with open(out / "results.jsonl", "a") as handle:
            handle.write(json.dumps(result) + "\n")


def write_sweep_result(args, results, out, lines):
    """The sweep's rows as a ``bench.common`` record under ``out/results/`` (copied into bench/results/ later)."""
    import jax


    print(flags_line())
    rows = []
    for r in results:
        given = {k: v for k, v in r.items() if k not in (
            "name", "best_epoch", "dev", "test", "test_precision", "test_recall", "test_by_overlap", "seconds",
            "train_tokens_per_s", "dev_test_by_epoch")}
        o = r["test_by_overlap"]
        rows.append({
            "settings": r["name"] + (" (" + ", ".join(f"{k} {v}" for k, v in given.items()) + ")" if given else ""),
            "best epoch": r["best_epoch"], "dev F1": round(r["dev"] * 100, 1), "test exact F1": round(r["test"] * 100, 1),
            "P / R": f"{r['test_precision'] * 100:.1f} / {r['test_recall'] * 100:.1f}",
            "normal / SEO / EPO": " / ".join(f"{o[k] * 100:.1f}" for k in ("normal", "SEO", "EPO")),
            "train tokens/s": round(r["train_tokens_per_s"]) if r["train_tokens_per_s"] else None,
            "seconds": round(r["seconds"])})
    devices = jax.devices()
    write_result("triples_gpu_sweep", rows, root=out / "results", name="smoke" if args.smoke else None, setup={
        "devices": f"{len(devices)} x {devices[0].device_kind}" if devices else "none",
        "data": f"WebNLG exact, the rows 'kerasbert triples train --head gplinker' makes, every batch padded to "
                f"{MAX_LENGTH}" + (f"; smoke: the first {args.smoke} rows and texts only" if args.smoke else ""),
        "training": f"GPLinker, the settings of each row (float32 and TriplesTrainSettings defaults otherwise); "
                    f"{len(lines)} plan lines side by side, one process each; dev and test scored after every epoch "
                    "at the default thresholds, test read at the best dev epoch",
        "note": "decoded with the bench's numpy copy of the GPLinker rule (checked against the library by "
                f"'check'); XLA_FLAGS={os.environ.get('XLA_FLAGS', '')!r}",
    })


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    p = commands.add_parser("prepare", help="write the bundle (needs TensorFlow)")
    p.add_argument("--bundle", required=True)
    p.add_argument("--checkpoint", default="starter", help="a Hugging Face layout BERT folder (default: the starter)")
    p = commands.add_parser("check", help="decode_rows against the library's decoding (needs TensorFlow)")
    p.add_argument("--model", required=True, help="a trained GPLinker model folder (python -m bench.triples_webnlg --head gplinker)")
    p = commands.add_parser("sweep", help="train and score the plan's settings (JAX)")
    p.add_argument("--bundle", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--plan", help="a file: one JSON list of settings dicts per line, each line its own process")
    p.add_argument("--settings", help=argparse.SUPPRESS)  # a child's plan line
    p.add_argument("--time-limit", type=float, default=540, help="seconds before unfinished children are stopped")
    p.add_argument("--smoke", type=int, default=0, help="only the first N rows and texts (a plumbing check)")
    args = parser.parse_args()
    if args.command == "sweep" and not (args.plan or args.settings):
        parser.error("sweep needs --plan")
    {"prepare": prepare, "check": check, "sweep": sweep}[args.command](args)


if __name__ == "__main__":
    main()
