"""Active learning on CoNLL-2003 on one GPU with JAX: the simulation of ``bench.active_learning`` in one call.

Our tooling, not a benchmark a user runs: ``python -m bench.active_learning``
runs the simulation as ``kerasbert`` CLI subprocesses: 63 trainings, hours on
a CPU. For a GPU host that has JAX but no TensorFlow, and a run of a few
minutes, this tool splits the work as ``conll`` does, between the preparing
machine (with TensorFlow) and the GPU host, and writes the same bench's
records and figure:

1. ``prepare`` (preparing machine, TensorFlow): ``conll prepare`` at max length
   64 (eng.train's and eng.testa's rows exactly as ``kerasbert ner train
   --max-length 64`` makes them, the tag list, the MiniLM weights trimmed to
   the vocabulary used and packed), plus ``al.npz``: how many rows (windows)
   each sentence of eng.train / eng.testa has, so that a sentence's rows can
   be found (a sentence longer than a window has several).
2. ``run`` (GPU host, ``KERAS_BACKEND=jax``; or any machine with tiny sizes): one
   process per curve or random seed, all at once on the one GPU, each
   appending its rows to ``OUT/rows.jsonl`` as it goes and stopping before
   ``--deadline`` (a cut training's row says ``complete: false``).
3. ``collect`` (preparing machine): the rows brought back -> ``bench.common``'s
   ``write_result("active_learning", ...)`` (a row per strategy, seed and
   labelled size, and the mean over seeds), the curves
   ``bench/figures/active_learning.png`` and the comparison the curves are for
   (:func:`target`).

What one training is (the CLI's, through the library's own path): the
MiniLM checkpoint's weights (the head initialised from the seed, as ``ner
train --seed S`` does: the model is built once per process and every
variable is reset to those values before each training), ``NerTrainSettings``
with the defaults (BiLSTM-CRF, ``auto`` batch size, epochs and patience
resolved by ``kerasbert.training.fit.resolve_auto`` on the training rows), float32,
``--max-length 64``, ``start_run``, ``BucketedBatches`` (padded to width 64: one batch
width, so one compiled step per batch shape), ``compile_for_training``,
``fit_and_select`` (early stopping and the best epoch by dev F1). The
optimizer is ``compile_for_training``'s, made once per process, with its
schedule's step counts turned into optimizer variables
(:func:`schedule_steps_as_variables`: the same learning rates); every later
training puts its variables back to their values before the first step
(zero moments, step 0) and sets its own step counts, so the jitted training
step is traced and compiled once per batch shape and process (JAX's
persistent compilation cache, shared by the processes, serves the shapes
another process compiled first). The dev
score is ``gpu_conll.py``'s: micro entity F1 over the BIO tags of
eng.testa's window rows (the model's Viterbi tags against the rows' gold
tags, entities chunked as conlleval), after every epoch; the best epoch's
weights are kept and score the pool.

Selection (the measures of ``kerasbert ner select``, :mod:`kerasbert_apps.ner.select`,
over the sentences of eng.train not yet labelled, repeated sentences counted
once as ``ner select`` skips them), score temperature 1 (``ner select`` uses
the model's fitted temperature; fitting it per round is left out):

* ``least-confident``: ``-log P(best labelling)`` from ``kerasbert_apps.ner.heads.bio.selection.crf_log_best``
  (the Viterbi path's score minus the CRF's ``log Z`` under the decoder's BIO
  constraints, float64), summed over a sentence's rows;
* ``entropy``: ``select.entity_entropy`` of the predicted entities' scores,
  each ``exp(crf_segment_log_probability)`` (:mod:`kerasbert.layers.crf`, the
  decoder's entity score) in its row (an entity in the overlap of two
  windows counts in both);
* then the diversity step of ``ner select``: the best ``budget x 4``
  candidates (ties broken by a seeded random number), taken best first by
  ``select.diverse_order`` at cosine 0.95 on the encoder mean vectors (the
  mean of the last ``sequence_output`` over the sentence's WordPiece tokens,
  ``[CLS]``/``[SEP]`` excluded);
* ``random``: a uniform sample without the diversity step, as ``ner select
  --strategy random --diversity 1``. It needs no model, so the random sets
  of a seed are nested prefixes of one permutation of the pool and each
  labelled size trains on its own (the largest sizes first, so that the
  comparison at 900 comes back even if time runs short).

Each curve, random included, trains its own first model on the seed's 100
sentences (the same sentences and seed; the runs differ only by the GPU's
non-deterministic reductions).

::

    python -m bench.offline_gpu_host.active_learning prepare --bundle .gpu/al
    # on the GPU host, with the wheels of `package` installed:
    KERAS_BACKEND=jax python -m bench.offline_gpu_host.active_learning run --bundle .gpu/al --out OUT --deadline 450
    # on the preparing machine, with OUT's files:
    python -m bench.offline_gpu_host.active_learning collect --run DIR
    # a CPU smoke test of the whole path (tiny checkpoint, tiny sizes):
    python -m bench.offline_gpu_host.active_learning prepare --bundle al-tiny --checkpoint TINY --max-train 300 --max-dev 60
    KERAS_BACKEND=jax python -m bench.offline_gpu_host.active_learning run --bundle al-tiny --out al-out --smoke
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

import numpy as np

from bench.common import FIGURES
from bench.common import ROOT
from bench.common import fail
from bench.common import write_result
from bench.offline_gpu_host import conll as gpu

MAX_LENGTH = 64
#: Rows per forward batch (dev scoring, pool scoring): one shape.
FORWARD_ROWS = 256
#: Entity segments per scoring call (padded): one shape.
SEGMENTS = 2048
STRATEGIES = ("least-confident", "entropy", "random")
DIVERSITY = 0.95
POOL_FACTOR = 4
FIGURE = FIGURES / "active_learning.png"
DEV_F1 = ("micro entity F1 over the BIO tags of eng.testa's window rows at max length 64 (the model's Viterbi "
          "tags against the rows' gold tags, entities chunked as conlleval; the conll tool's dev score), "
          "of the best epoch")


def ner_modules():
    """``(Tagger, NerTrainSettings)``: the BIO tagger of the CRF head's folder and the NER settings."""
    try:
        from kerasbert_apps.ner.heads.bio.pipeline import Tagger
        from kerasbert_apps.ner.train import NerTrainSettings
    except ModuleNotFoundError as e:
        fail(f"no kerasbert_apps.ner ({e}): is kerasbert installed (pip install -e . or its wheel)?")
    return Tagger, NerTrainSettings


# =============================================================================
# prepare (TensorFlow)
# =============================================================================


def prepare(args):
    args.max_length = MAX_LENGTH
    Tagger, _ = ner_modules()
    gpu.prepare(args)
    from kerasbert_apps.ner.train import NER
    from kerasbert.training.fit import open_encoder_checkpoint

    settings = gpu.conll_settings(args)
    train_examples, dev_examples = NER.read_run_data(settings)
    _, tokenizer = open_encoder_checkpoint(settings)
    pipeline = Tagger(None, tokenizer, ["O"], max_length=MAX_LENGTH)
    counts = {}
    for split, examples in (("train", train_examples), ("dev", dev_examples)):
        found = []
        for begin in range(0, len(examples), 1024):
            chunk = examples[begin : begin + 1024]
            windows = pipeline.windows_numpy([e.text for e in chunk])
            found.append(np.bincount(windows["text_index"], minlength=len(chunk)))
        counts[split] = np.concatenate(found).astype(np.int32)
    data = np.load(Path(args.bundle) / "data.npz")
    for split in ("train", "dev"):
        if counts[split].sum() != len(data[f"{split}/lengths"]):
            fail(f"{split}: {counts[split].sum()} windows counted, the bundle has {len(data[f'{split}/lengths'])} rows")
    np.savez_compressed(Path(args.bundle) / "al.npz", train_example_rows=counts["train"],
                        dev_example_rows=counts["dev"])
    print(f"al.npz: {len(counts['train'])} train sentences ({int((counts['train'] > 1).sum())} of several windows), "
          f"{len(counts['dev'])} dev sentences")


# =============================================================================
# the pieces without a model (numpy; tested)
# =============================================================================


def start_set(seed, sentences, start):
    """The seed's first labelled sentences: ``bench.active_learning``'s draw."""
    return random.Random(seed).sample(range(sentences), start)


def random_order(seed, pool):
    """The order in which random sampling labels ``pool`` (indices): one
    seeded permutation, so the labelled sets of a seed are nested."""
    return [int(i) for i in np.random.default_rng(seed).permutation(np.asarray(pool, np.int64))]


def distinct_sentences(rows, example_rows):
    """Indices of the sentences whose rows' token ids first occur there
    (``ner select`` skips a text repeating an earlier one)."""
    seen, keep = set(), []
    for i, (first, count) in enumerate(zip(row_starts(example_rows), example_rows)):
        key = b"".join(np.asarray(rows["token_ids"][r], np.int32).tobytes() + b"|" for r in range(first, first + count))
        if key not in seen:
            seen.add(key)
            keep.append(i)
    return keep


def row_starts(example_rows):
    return np.concatenate([[0], np.cumsum(example_rows)[:-1]]).astype(np.int64)


def choose(keys, vectors, budget, seed, diversity=DIVERSITY, pool_factor=POOL_FACTOR):
    """``ner select``'s choice among scored sentences: the ``budget x
    pool_factor`` best ``keys`` (higher = more informative; ties broken by a
    seeded random number), then ``select.diverse_order`` on their
    ``vectors``. Returns positions into ``keys``."""
    from kerasbert_apps.ner.select import diverse_order

    keys = np.asarray(keys, np.float64)
    ties = np.random.default_rng(seed).random(len(keys))
    order = np.lexsort((-ties, -keys))[: budget * pool_factor if diversity < 1.0 else budget]
    taken, _ = diverse_order(np.asarray(vectors)[order], budget, diversity)
    return [int(order[i]) for i in taken]


def mean_rows(rows):
    """One row per (strategy, labelled) with the mean, min and max dev F1 over seeds (complete rows only)."""
    done = [r for r in rows if r.get("complete", True) and r.get("seed") != "mean"]
    means = []
    for strategy in dict.fromkeys(r["strategy"] for r in done):
        for n in sorted({r["labelled"] for r in done if r["strategy"] == strategy}):
            f1s = [r["dev_f1"] for r in done if r["strategy"] == strategy and r["labelled"] == n]
            means.append({"strategy": strategy, "seed": "mean", "labelled": n, "dev_f1": round(statistics.mean(f1s), 4),
                          "min_f1": min(f1s), "max_f1": max(f1s), "seeds": len(f1s)})
    return means


def target(means, selected_at=600, random_at=900):
    """The comparison the curves are for: the best selection strategy's mean dev F1 at
    ``selected_at`` labelled sentences against random's at ``random_at``;
    None when a point is missing."""
    at = {(r["strategy"], r["labelled"]): r for r in means}
    if ("random", random_at) not in at:
        return None
    found = [(at[(s, selected_at)]["dev_f1"], s) for s in STRATEGIES if s != "random" and (s, selected_at) in at]
    if not found:
        return None
    best, strategy = max(found)
    random_f1 = at[("random", random_at)]["dev_f1"]
    return {"strategy": strategy, "selected_at": selected_at, "selected_f1": best, "random_at": random_at,
            "random_f1": random_f1, "difference": round(best - random_f1, 4), "holds": best >= random_f1,
            "seeds": min(at[(strategy, selected_at)]["seeds"], at[("random", random_at)]["seeds"])}


# =============================================================================
# the model side (JAX, no TensorFlow)
# =============================================================================


def bio_tables(names):
    """``(begin, inside)`` tag index of each entity type of the BIO ``names``."""
    return {n[2:]: (names.index(n), names.index("I-" + n[2:])) for n in names if n.startswith("B-")}


def entity_segments(tags, lengths, names):
    """The predicted entities of rows of Viterbi ``tags`` (BIO tag ids,
    ``lengths`` tokens each, ``[CLS]`` and ``[SEP]`` left out) as
    ``crf_segment_log_probability``'s arguments: a list of ``(row, start,
    end inclusive, begin tag, inside tag)``."""
    tables = bio_tables(names)
    found = []
    for k in range(len(lengths)):
        text_tags = np.asarray(tags[k])[1 : max(int(lengths[k]) - 1, 1)]
        for first, end, kind in sorted(gpu.bio_entities(text_tags, names)):
            found.append((k, first + 1, end, *tables[kind]))
    return found


class Scorer:
    """The model's outputs on rows of encoder inputs, jitted once per process
    (the variables' values are arguments, so every training reuses the
    compiled function): Viterbi tags, emission scores and the sum of the
    encoder's text-token vectors; and the decoder's entity scores
    (``crf_segment_log_probability`` under the CRF's constraints)."""

    def __init__(self, model):
        import jax
        import keras
        from keras import ops

        from kerasbert.layers.crf import crf_segment_log_probability

        self.model = model
        variables = list(model.variables)
        crf = model.crf

        def forward(values, token_ids, mask):
            with keras.StatelessScope(state_mapping=list(zip(variables, values))):
                inputs = {"token_ids": token_ids, "segment_ids": ops.zeros_like(token_ids), "padding_mask": mask}
                encoded = model.encoder(inputs, training=False)
                potentials, tags = model.head(model.encoded(encoded), mask, training=False)
                transitions = crf.transitions.value
            sequence = ops.cast(encoded["sequence_output"], "float32")
            lengths = ops.sum(mask, axis=1)
            positions = ops.arange(token_ids.shape[1])[None, :]
            text = ops.cast((positions >= 1) & (positions <= lengths[:, None] - 2), "float32")
            return {"tags": tags, "potentials": ops.cast(potentials, "float32"),
                    "vector": ops.sum(sequence * text[:, :, None], axis=1), "transitions": transitions}

        def segments(potentials, lengths, transitions, rows, starts, ends, begin, inside):
            return crf_segment_log_probability(potentials, lengths, transitions, rows, starts, ends, begin, inside,
                                               allowed=crf.allowed, allowed_start=crf.allowed_start)

        self.forward = jax.jit(forward)
        self.segments = jax.jit(segments)

    def lattice(self, transitions):
        """``(transitions, start)`` as the decoder sees them, temperature 1 (the BIO pipeline's ``selection_log_best``)."""
        from kerasbert.layers.crf import FORBIDDEN_SCORE

        crf = self.model.crf
        transitions = np.asarray(transitions, np.float64)
        if crf.allowed is not None:
            transitions = np.where(np.asarray(crf.allowed, bool), transitions, transitions + FORBIDDEN_SCORE)
        start = np.zeros(transitions.shape[0])
        if crf.allowed_start is not None:
            start = np.where(np.asarray(crf.allowed_start, bool), start, start + FORBIDDEN_SCORE)
        return transitions, start

    def run(self, token_ids, names=None, measures=False):
        """Over ``token_ids`` (a list of 1-D rows): ``tags`` (a list of the
        rows' tag arrays); with ``measures``, also per row ``log_best``,
        ``entity_scores`` (a list of arrays), ``vector`` and ``tokens``."""
        import keras

        from kerasbert_apps.ner.heads.bio.selection import crf_log_best

        values = [v.value for v in self.model.variables]
        count = len(token_ids)
        out = {"tags": [], "log_best": [], "entity_scores": [], "vector": [], "tokens": []}
        for begin in range(0, count, FORWARD_ROWS):
            chunk = token_ids[begin : begin + FORWARD_ROWS]
            ids = np.zeros((FORWARD_ROWS, MAX_LENGTH), np.int32)
            for i, row in enumerate(chunk):
                ids[i, : len(row)] = row
            lengths = np.array([len(r) for r in chunk] + [0] * (FORWARD_ROWS - len(chunk)), np.int32)
            mask = (np.arange(MAX_LENGTH)[None, :] < lengths[:, None]).astype(np.int32)
            mask[len(chunk) :, 0] = 1  # padding rows: one token, never read
            got = self.forward(values, ids, mask)
            tags = np.asarray(got["tags"])
            out["tags"] += [tags[k, : lengths[k]] for k in range(len(chunk))]
            if not measures:
                continue
            potentials = np.asarray(got["potentials"])[: len(chunk)]
            transitions, start = self.lattice(np.asarray(got["transitions"]))
            out["log_best"] += crf_log_best(potentials, lengths[: len(chunk)], tags[: len(chunk)], transitions,
                                            start).tolist()
            vectors = np.asarray(got["vector"])
            out["vector"] += [vectors[k] for k in range(len(chunk))]
            out["tokens"] += [max(int(lengths[k]) - 2, 0) for k in range(len(chunk))]
            found = entity_segments(tags[: len(chunk)], lengths[: len(chunk)], names)
            scores = np.zeros(len(found))
            for s in range(0, len(found), SEGMENTS):
                part = np.array(found[s : s + SEGMENTS], np.int32).reshape(-1, 5)
                padded = np.zeros((SEGMENTS, 5), np.int32)
                padded[:, 1:3] = 1 if lengths[0] > 1 else 0
                padded[:, 3:5] = part[0, 3:5]
                padded[: len(part)] = part
                logp = self.segments(got["potentials"], np.maximum(lengths, 1), got["transitions"],
                                     *[padded[:, j] for j in range(5)])
                scores[s : s + len(part)] = np.exp(np.asarray(keras.ops.convert_to_numpy(logp), np.float64))[: len(part)]
            per_row = [[] for _ in chunk]
            for (k, *_), score in zip(found, scores):
                per_row[k].append(score)
            out["entity_scores"] += [np.array(v) for v in per_row]
        return out


def schedule_steps_as_variables(optimizer):
    """Give ``optimizer`` (as ``compile_for_training`` made it) a learning-rate
    schedule with the same values as its ``WarmupLinearDecay`` whose step
    counts are optimizer variables instead of constants: the compiled
    training step is then the same program for every training of a batch
    shape, whatever its number of steps, and JAX's persistent compilation
    cache serves it (the constants would make each training compile anew).
    Returns the new schedule."""
    import keras
    from keras import ops

    old = optimizer._learning_rate
    if not all(hasattr(old, k) for k in ("peak", "total_steps", "warmup_steps")):
        fail(f"the optimizer's schedule is a {type(old).__name__}, not the WarmupLinearDecay this bench knows")

    class VariableSteps(keras.optimizers.schedules.LearningRateSchedule):
        def __init__(self):
            self.peak = old.peak
            self.total = optimizer.add_variable((), initializer=keras.initializers.Constant(float(old.total_steps)),
                                                dtype="float32", name="schedule_total_steps")
            self.warmup = optimizer.add_variable((), initializer=keras.initializers.Constant(float(old.warmup_steps)),
                                                 dtype="float32", name="schedule_warmup_steps")

        def __call__(self, step):  # WarmupLinearDecay.__call__, with the counts read from the variables
            step = ops.cast(step, "float32")
            total, warmup = ops.cast(self.total, "float32"), ops.cast(self.warmup, "float32")
            warm = self.peak * step / ops.maximum(warmup, 1.0)
            decay = self.peak * ops.maximum(0.0, (total - step) / ops.maximum(total - warmup, 1.0))
            return ops.where(step < warmup, warm, decay)

    optimizer._learning_rate = VariableSteps()
    return optimizer._learning_rate


def configure_jax(cache):
    import jax

    if cache:
        jax.config.update("jax_compilation_cache_dir", cache)
        jax.config.update("jax_persistent_cache_min_compile_time_secs", 0)
        jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)


def worker(args):
    """One process: a job of ``--config`` (a curve of a selection strategy,
    or random sampling's sizes of one seed), rows appended to ``--rows``."""
    config = json.loads(args.config)
    if args.block_tensorflow:  # as on the GPU machine: no TensorFlow, TensorFlow-Text or kagglehub
        gpu.block_tensorflow()
        sys.modules["tensorflow_text"] = sys.modules["kagglehub"] = None
    configure_jax(config.get("cache"))
    deadline = config["deadline"]
    meta, rows, dev = gpu.load_bundle(config["bundle"])
    counts = np.load(Path(config["bundle"]) / "al.npz")
    example_rows = counts["train_example_rows"]
    first_row = row_starts(example_rows)
    import jax
    import keras

    from kerasbert.training.batching import BucketedBatches
    from kerasbert.training.fit import compile_for_training
    from kerasbert.training.fit import fit_and_select
    from kerasbert.training.fit import resolve_auto
    from kerasbert.training.fit import start_run
    from kerasbert.checkpoints.loader import load_encoder

    Tagger, NerTrainSettings = ner_modules()
    names = meta["tags"]
    seed, strategy = config["seed"], config["strategy"]
    work = Path(config["work"]) / f"{strategy}-{seed}"
    shutil.rmtree(work, ignore_errors=True)
    # ner train's defaults (BiLSTM-CRF, auto batch size, epochs and patience), --max-length 64 --seed S, float32
    base = NerTrainSettings(checkpoint=config["checkpoint"], train="(bundle)", dev="(bundle)", precision="float32",
                            output=str(work / "build"), max_length=MAX_LENGTH, seed=seed,
                            epochs=config.get("epochs", "auto"))
    base.check()
    device = jax.devices()[0]
    import kerasbert_apps

    log_row = {"kind": "setup", "strategy": strategy, "seed": seed, "device": device.device_kind,
               "platform": device.platform, "jax": jax.__version__, "keras": keras.__version__,
               "xla_flags": os.environ.get("XLA_FLAGS", ""), "kerasbert_apps": kerasbert_apps.__file__,
               "tagger": Tagger.__module__}
    write_row(config["rows"], log_row)
    start_run(base)
    model = Tagger.build_model(load_encoder(config["checkpoint"]), names, base)
    initial = [np.array(keras.ops.convert_to_numpy(v.value)) for v in model.variables]
    scorer = Scorer(model)
    dev_ids, dev_tags = dev["token_ids"], dev["tags"]
    compiled = {}

    class Deadline(keras.callbacks.Callback):
        cut = False

        def on_train_batch_end(self, batch, logs=None):
            if time.time() > deadline:
                self.model.stop_training = True
                Deadline.cut = True

    def train(labelled, tag):
        """Train on the sentences ``labelled``; returns ``(row, best weights)``."""
        started = time.perf_counter()
        picked = np.concatenate([np.arange(first_row[i], first_row[i] + example_rows[i]) for i in labelled])
        train_rows = {k: [v[r] for r in picked] for k, v in rows.items()}
        settings = NerTrainSettings(**{**dataclasses_asdict(base), "output": str(work / tag)})
        start_run(settings)
        for variable, value in zip(model.variables, initial):
            variable.assign(value)
        settings = resolve_auto(settings, len(picked))
        batches = BucketedBatches(train_rows, settings.batch_size, targets=("tags",), seed=settings.seed,
                                  max_width=MAX_LENGTH, pad_to_multiple=MAX_LENGTH)
        if not compiled:  # once per process: the optimizer of compile_for_training, its step counts variables
            compile_for_training(model, len(batches), settings, Tagger.head_prefix)
            compiled["schedule"] = schedule_steps_as_variables(model.optimizer)
            compiled["fresh"] = [np.array(keras.ops.convert_to_numpy(v.value)) for v in model.optimizer.variables]
            compiled["rates"] = (settings.learning_rate, settings.head_learning_rate, settings.weight_decay)
        if compiled["rates"] != (settings.learning_rate, settings.head_learning_rate, settings.weight_decay):
            fail("the learning rates differ between trainings: the optimizer cannot be reused")
        # Every later training: the optimizer as compile_for_training leaves it (zero moments, step 0), with
        # this training's step counts (make_optimizer's), so the jitted training step is reused as it is.
        for variable, value in zip(model.optimizer.variables, compiled["fresh"]):
            variable.assign(value)
        total = len(batches) * settings.epochs
        compiled["schedule"].total.assign(float(total))
        compiled["schedule"].warmup.assign(float(int(settings.warmup_ratio * total)))
        best, dev_seconds = {}, []

        def dev_scores():
            t = time.perf_counter()
            scores = gpu.row_entity_f1(scorer.run(dev_ids)["tags"], dev_tags, names)
            dev_seconds.append(time.perf_counter() - t)
            return scores

        def save_weights(directory):
            best["values"] = [np.array(keras.ops.convert_to_numpy(v.value)) for v in model.variables]

        Deadline.cut = False
        metrics = fit_and_select(model, batches, settings, dev_scores=dev_scores, save_pipeline=save_weights,
                                 format_scores=lambda s: f"dev F1 {s['f1']:.4f}", callbacks=[Deadline()])
        if best:
            for variable, value in zip(model.variables, best["values"]):
                variable.assign(value)
        epochs = metrics["train_epoch_seconds"]
        row = {"kind": "row", "strategy": strategy, "seed": seed, "labelled": len(labelled), "rows": int(len(picked)),
               "dev_f1": round(float((metrics["dev"] or {}).get("f1", 0.0)), 4),
               "precision": round(float((metrics["dev"] or {}).get("precision", 0.0)), 4),
               "recall": round(float((metrics["dev"] or {}).get("recall", 0.0)), 4),
               "best_epoch": metrics["best_epoch"], "epochs_run": len(epochs), "batch_size": settings.batch_size,
               "epochs": settings.epochs, "patience": settings.patience, "steps_per_epoch": len(batches),
               "train_seconds": round(time.perf_counter() - started, 1),
               "epoch_seconds": [round(s, 2) for s in epochs],
               "dev_seconds": round(float(np.median(dev_seconds)), 3) if dev_seconds else None,
               "complete": not Deadline.cut}
        shutil.rmtree(work / tag, ignore_errors=True)
        return row

    distinct = distinct_sentences(rows, example_rows)
    start = start_set(seed, len(example_rows), config["start"])
    if strategy == "random":
        taken = set(start)
        order = random_order(seed, [i for i in distinct if i not in taken])
        for size in config["sizes"]:
            if time.time() > deadline:
                break
            row = train(start + order[: size - len(start)], f"n{size}")
            row["select_seconds"] = 0.0
            write_row(config["rows"], row)
            if not row["complete"]:
                break
        return
    labelled = list(start)
    while time.time() < deadline:
        row = train(labelled, f"n{len(labelled)}")
        if not row["complete"] or len(labelled) + config["step"] > config["max"]:
            write_row(config["rows"], row)
            return
        t = time.perf_counter()
        taken = set(labelled)
        pool = [i for i in distinct if i not in taken][: config.get("pool_size") or None]
        pool_rows = np.concatenate([np.arange(first_row[i], first_row[i] + example_rows[i]) for i in pool])
        got = scorer.run([rows["token_ids"][r] for r in pool_rows], names, measures=True)
        owner = np.repeat(np.arange(len(pool)), example_rows[pool])
        dim = len(got["vector"][0])
        vectors, tokens = np.zeros((len(pool), dim)), np.zeros(len(pool))
        np.add.at(vectors, owner, np.array(got["vector"]))
        np.add.at(tokens, owner, np.array(got["tokens"], np.float64))
        vectors /= np.maximum(tokens, 1)[:, None]
        if strategy == "least-confident":
            keys = np.zeros(len(pool))
            np.add.at(keys, owner, -np.array(got["log_best"]))
        else:
            from kerasbert_apps.ner.select import entity_entropy

            scores = [[] for _ in pool]
            for k, values in zip(owner, got["entity_scores"]):
                scores[k] += list(values)
            keys = np.array([entity_entropy(v) for v in scores])
        picked = choose(keys, vectors, config["step"], seed)
        row["select_seconds"] = round(time.perf_counter() - t, 1)
        row["pool"] = len(pool)
        row["chosen_score_median"] = round(float(np.median(keys[picked])), 4) if picked else None
        write_row(config["rows"], row)
        labelled += [pool[i] for i in picked]


def dataclasses_asdict(settings):
    import dataclasses

    return dataclasses.asdict(settings)


def write_row(path, row):
    """Append one JSON line (one ``write`` of a line opened for appending: the processes' lines never interleave)."""
    with open(path, "a", encoding="utf-8") as f:
        f.write(json.dumps(row) + "\n")


# =============================================================================
# run: the jobs, one process each, all at once
# =============================================================================


def jobs(args):
    """The processes' jobs: a curve per (selection strategy, seed), and per
    seed random sampling's sizes (largest first, then the start)."""
    seeds = [int(s) for s in args.seeds.split(",")]
    strategies = args.strategies.split(",")
    unknown = [s for s in strategies if s not in STRATEGIES]
    if unknown:
        fail(f"unknown strategy(s) {', '.join(unknown)}; known: {', '.join(STRATEGIES)}")
    out = []
    for seed in seeds:
        for strategy in strategies:
            job = {"strategy": strategy, "seed": seed, "start": args.start, "step": args.step}
            if strategy == "random":
                sizes = list(range(args.start, args.max_random + 1, args.step))
                first = list(dict.fromkeys(s for s in (args.max_random, args.max_selected) if s in sizes))
                job["sizes"] = first + [s for s in sizes if s not in first]
            else:
                job["max"] = args.max_selected
            out.append(job)
    return out


def run(args):
    if os.environ.get("KERAS_BACKEND") != "jax":
        fail(f"run needs KERAS_BACKEND=jax (it is {os.environ.get('KERAS_BACKEND', 'unset')!r})")
    if not (Path(args.bundle) / "al.npz").exists():
        fail(f"{args.bundle}: no al.npz; write the bundle with: python -m bench.offline_gpu_host.active_learning prepare "
             f"--bundle {args.bundle}")
    if args.smoke:
        args.start, args.step, args.max_selected, args.max_random = 20, 20, 40, 40
        args.seeds, args.pool_size = "0", 200
        args.epochs = "1" if args.epochs == "auto" else args.epochs
    began = time.time()
    deadline = began + args.deadline
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    rows_path = out / "rows.jsonl"
    rows_path.unlink(missing_ok=True)
    work = Path(args.work)
    shutil.rmtree(work, ignore_errors=True)
    (work / "logs").mkdir(parents=True)
    checkpoint = gpu.unpacked_encoder(args.bundle)  # once, before the processes read it
    env = dict(os.environ, PYTHONUNBUFFERED="1", XLA_PYTHON_CLIENT_PREALLOCATE="false",
               XLA_PYTHON_CLIENT_MEM_FRACTION=os.environ.get("XLA_PYTHON_CLIENT_MEM_FRACTION", "0.1"),
               OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", MKL_NUM_THREADS="1")
    todo = jobs(args)
    print(f"{len(todo)} processes at once; deadline in {args.deadline:.0f} s; XLA_FLAGS="
          f"{os.environ.get('XLA_FLAGS', '')!r}", flush=True)
    running = []
    for i, job in enumerate(todo):
        config = {**job, "bundle": str(args.bundle), "checkpoint": checkpoint, "rows": str(rows_path.resolve()),
                  "work": str(work), "deadline": deadline, "cache": args.cache, "pool_size": args.pool_size}
        if args.epochs != "auto":
            config["epochs"] = int(args.epochs)
        log = open(work / "logs" / f"{i}-{job['strategy']}-{job['seed']}.log", "w")
        command = [sys.executable, "-m", "bench.offline_gpu_host.active_learning", "worker", "--config", json.dumps(config)]
        command += ["--block-tensorflow"] if args.block_tensorflow else []
        running.append((job, subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env,
                                                        cwd=ROOT), log))
    shown = 0
    while any(p.poll() is None for _, p, _ in running) and time.time() < deadline + args.grace:
        time.sleep(5)
        lines = rows_path.read_text().splitlines() if rows_path.exists() else []
        for line in lines[shown:]:
            row = json.loads(line)
            if row.get("kind") == "row":
                print(f"[{time.time() - began:5.0f} s] {row['strategy']:>15} seed {row['seed']} {row['labelled']:4d}: "
                      f"dev F1 {row['dev_f1']:.4f} (epoch {row['best_epoch']}/{row['epochs_run']}, batch "
                      f"{row['batch_size']}, {row['train_seconds']} s train, {row.get('select_seconds')} s select"
                      + ("" if row["complete"] else ", CUT") + ")", flush=True)
        shown = len(lines)
    status = []
    for job, process, log in running:
        if process.poll() is None:
            process.kill()
        process.wait()
        log.close()
        status.append(process.returncode)
    with open(out / "workers.log", "w") as combined:  # one file: the tool brings back 8
        for path in sorted((work / "logs").iterdir()):
            text = path.read_text(errors="replace")
            combined.write(f"===== {path.name}\n" + (text[-60000:] if len(text) > 60000 else text) + "\n")
    rows = [json.loads(line) for line in rows_path.read_text().splitlines()] if rows_path.exists() else []
    done = [r for r in rows if r.get("kind") == "row"]
    print(f"\n{len(done)} trainings ({sum(not r['complete'] for r in done)} cut by the deadline) in "
          f"{time.time() - began:.0f} s; process exit statuses {status}")
    print_table(mean_rows(done))
    if any(status) and not done:
        raise SystemExit(1)


def print_table(means):
    sizes = sorted({r["labelled"] for r in means})
    strategies = list(dict.fromkeys(r["strategy"] for r in means))
    at = {(r["strategy"], r["labelled"]): r for r in means}
    print("| labelled | " + " | ".join(strategies) + " |")
    print("|---:|" + "---:|" * len(strategies))
    for n in sizes:
        cells = [f"{at[(s, n)]['dev_f1']:.4f} ({at[(s, n)]['seeds']})" if (s, n) in at else "" for s in strategies]
        print(f"| {n} | " + " | ".join(cells) + " |")


# =============================================================================
# collect (preparing machine): the rows into bench/results, the figure
# =============================================================================


def collect(args):
    from bench.active_learning import plot

    run_dir = Path(args.run)
    if not (run_dir / "rows.jsonl").exists():
        fail(f"{run_dir}: no rows.jsonl (what `run --out` writes)")
    lines = (run_dir / "rows.jsonl").read_text().splitlines()
    every = [json.loads(line) for line in lines if line.strip()]
    rows = [{k: v for k, v in r.items() if k != "kind"} for r in every if r.get("kind") == "row"]
    setup_rows = [r for r in every if r.get("kind") == "setup"]
    if not rows:
        fail(f"{run_dir / 'rows.jsonl'}: no training rows")
    order = {s: i for i, s in enumerate(STRATEGIES)}
    rows.sort(key=lambda r: (order.get(r["strategy"], 9), r["seed"], r["labelled"]))
    complete = [r for r in rows if r["complete"]]
    means = mean_rows(complete)
    figure = Path(args.figure)
    path = plot([{**r, "dev_f1": r["dev_f1"]} for r in complete], figure)
    first = setup_rows[0] if setup_rows else {}
    check = target(means)
    setup = {
        "device": first.get("device"), "platform": first.get("platform"),
        "versions": {"jax": first.get("jax"), "keras": first.get("keras")}, "xla_flags": first.get("xla_flags"),
        "runner": "python -m bench.offline_gpu_host.active_learning run: one process per curve (random: per seed), all at once on the "
                  "one device, through the library's Tagger.build_model, BucketedBatches (width 64), "
                  "compile_for_training and fit_and_select (KERAS_BACKEND=jax)",
        "data": "CoNLL-2003: pool eng.train (14041 sentences, repeats counted once), dev eng.testa",
        "dev_f1": DEV_F1, "checkpoint": "MiniLM-L6-H384 uncased", "head": "BiLSTM-CRF (ner train's default)",
        "max_length": MAX_LENGTH, "start": min(r["labelled"] for r in rows),
        "step": args.step, "max_selected": max((r["labelled"] for r in rows if r["strategy"] != "random"), default=None),
        "max_random": max((r["labelled"] for r in rows if r["strategy"] == "random"), default=None),
        "seeds": sorted({r["seed"] for r in rows}),
        "settings": "float32; ner train defaults: batch size, epochs and patience auto (training.resolve_auto "
                    "on the training rows), learning rates, BiLSTM-CRF with constrained decoding",
        "selection": "ner select's measures (heads.bio.selection.crf_log_best; select.entity_entropy of "
                     "exp(crf_segment_log_probability)); diversity 0.95 with pool factor 4 for least-confident "
                     "and entropy, none for random; score temperature 1 (not fitted)",
        "trainings": len(rows), "cut_by_deadline": len(rows) - len(complete),
        "target": check, "figure": str(path.relative_to(ROOT)) if path and path.is_relative_to(ROOT) else str(path),
    }
    if args.dry_run:
        print(json.dumps(setup, indent=1))
        print_table(means)
        return
    sizes = sorted({r["labelled"] for r in means})
    strategies = [s for s in STRATEGIES if any(r["strategy"] == s for r in means)]
    at = {(r["strategy"], r["labelled"]): r for r in means}
    table = [{"labelled": n,  # no part: the bench's main table
              **{s: at[(s, n)]["dev_f1"] if (s, n) in at else None for s in strategies},
              **{f"{s} min-max": f"{at[(s, n)]['min_f1']:.4f}-{at[(s, n)]['max_f1']:.4f}" if (s, n) in at else None
                 for s in strategies},
              "seeds": min((at[(s, n)]["seeds"] for s in strategies if (s, n) in at), default=0)}
             for n in sizes]
    written = write_result("active_learning", table, setup, name=args.name, root=args.root)
    record = json.loads(written.read_text(encoding="utf-8"))
    record["source"] = (f"trained on the device named in the setup ({first.get('device')}); the run line names "
                        "the machine that collected the rows")
    if path:  # the curves beside the table (docs/gen_bench.py shows a record's figures)
        record["figures"] = [[str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path),
                              "CoNLL-2003, MiniLM, max length 64: mean dev F1 (eng.testa) over seeds, min-max shaded"]]
    written.write_text(json.dumps(record, indent=1, default=str) + "\n", encoding="utf-8")
    per_seed = [{"part": "per seed", **{k: r.get(k) for k in (
        "strategy", "seed", "labelled", "rows", "dev_f1", "precision", "recall", "best_epoch", "epochs_run",
        "batch_size", "epochs", "steps_per_epoch", "train_seconds", "select_seconds")}} for r in complete]
    write_result("active_learning", per_seed, {"see": f"{written.name} (the same run)", "dev_f1": DEV_F1},
                         name=f"{args.name}-per-seed", root=args.root)
    print_table(means)
    if check:
        print(f"target: {check['strategy']} at {check['selected_at']}: {check['selected_f1']:.4f}, random at "
              f"{check['random_at']}: {check['random_f1']:.4f}, difference {check['difference']:+.4f}: "
              + ("holds" if check["holds"] else "does not hold"))
    else:
        print("target: a point is missing (no complete row of a selection strategy at 600 or of random at 900)")


# =============================================================================
# package (preparing machine): the project's wheel, to install on the GPU host
# =============================================================================


def package(args):
    """Build the project's wheel from a copy of the working tree as it is
    (tracked files and untracked ones git does not ignore, so the bench on the
    GPU host and the installed package agree) into ``--wheels``, replacing an
    older one; print the sizes of what goes to the GPU host (the tree, the
    bundle and the wheels)."""
    listed = subprocess.run(["git", "ls-files", "-z", "-co", "--exclude-standard"], cwd=ROOT, capture_output=True,
                            check=True).stdout.decode().split("\0")
    files = [f for f in listed if f and (ROOT / f).is_file()]
    wheels = Path(args.wheels)
    wheels.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        copy = Path(tmp) / "tree"
        for name in files:
            (copy / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, copy / name)
        built = Path(tmp) / "wheel"
        subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w",
                        str(built), str(copy)], check=True)
        (wheel,) = built.glob("kerasbert-*.whl")
        for old in wheels.glob("kerasbert-*.whl"):
            old.unlink()
        shutil.copy(wheel, wheels / wheel.name)
    sizes = {"working tree": sum((ROOT / f).stat().st_size for f in files)}
    for folder in (Path(args.bundle), wheels):
        sizes[str(folder)] = sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())
    print(f"wheel: {wheels / wheel.name}")
    print("for the GPU host: " + ", ".join(f"{k} {v / 2**20:.1f} MiB" for k, v in sizes.items())
          + f"; {sum(sizes.values()) / 2**20:.1f} MiB in all")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    p = commands.add_parser("prepare", help="write the bundle (needs TensorFlow)")
    p.add_argument("--bundle", required=True)
    p.add_argument("--checkpoint", default=str(gpu.MINILM))
    p.add_argument("--max-train", type=int, default=0, help="only the first N training sentences (0: all)")
    p.add_argument("--max-dev", type=int, default=0, help="only the first N dev sentences (0: all)")
    p = commands.add_parser("run", help="the simulation, one process per curve (JAX)")
    p.add_argument("--bundle", required=True)
    p.add_argument("--out", required=True, help="where rows.jsonl and workers.log go (e.g. $OUT)")
    p.add_argument("--work", default=os.path.join(tempfile.gettempdir(), "active_learning_gpu"),
                   help="the runs' folders and logs (replaced)")
    p.add_argument("--deadline", type=float, default=450, help="seconds from now: no training goes on after this")
    p.add_argument("--grace", type=float, default=30, help="seconds after the deadline before processes are killed")
    p.add_argument("--cache", default=os.path.join(tempfile.gettempdir(), "active_learning_gpu_jax_cache"),
                   help="JAX's persistent compilation cache")
    p.add_argument("--strategies", default=",".join(STRATEGIES))
    p.add_argument("--seeds", default="0,1,2")
    p.add_argument("--start", type=int, default=100)
    p.add_argument("--step", type=int, default=100)
    p.add_argument("--max-selected", type=int, default=600)
    p.add_argument("--max-random", type=int, default=900)
    p.add_argument("--epochs", default="auto", help="instead of the auto rule (a smoke run)")
    p.add_argument("--pool-size", type=int, default=0, help="only the first N unlabelled sentences (0: all)")
    p.add_argument("--smoke", action="store_true", help="20 sentences +20 to 40, 1 seed, 1 epoch, a pool of 200")
    p.add_argument("--block-tensorflow", action="store_true", help="fail on any TensorFlow import (as on a host without it)")
    p = commands.add_parser("worker", help=argparse.SUPPRESS)
    p.add_argument("--config", required=True)
    p.add_argument("--block-tensorflow", action="store_true")
    p = commands.add_parser("collect", help="the rows brought back -> bench/results/active_learning, the figure")
    p.add_argument("--run", required=True, help="the folder holding rows.jsonl")
    p.add_argument("--figure", default=str(FIGURE))
    p.add_argument("--step", type=int, default=100)
    p.add_argument("--name", default="gpu", help="the result file's part name")
    p.add_argument("--dry-run", action="store_true", help="print, write nothing to bench/results")
    p.add_argument("--root", help="write the records under this folder instead of bench/results (a smoke run)")
    p = commands.add_parser("package", help="the project's wheel into --wheels, for the GPU host")
    p.add_argument("--bundle", default=str(ROOT / ".gpu" / "al"))
    p.add_argument("--wheels", default=str(ROOT / ".whl"))
    args = parser.parse_args()
    {"prepare": prepare, "run": run, "worker": worker, "collect": collect, "package": package}[args.command](args)


if __name__ == "__main__":
    main()
