"""A training run, start to end: the steps an app's train command takes
(used by every app's ``train()``), in order:

* :func:`start_run` (the output folder taken for the run:
  :mod:`kerasbert.training.runs`; ``settings.json``, seed, precision:
  :func:`set_precision`);
* :func:`open_encoder_checkpoint` (the checkpoint, opened once);
* :func:`resolve_auto` (the ``auto`` batch size, epochs and patience for the
  data's size);
* :func:`compile_for_training` (grouped AdamW, schedule, loss scaling:
  :mod:`kerasbert.training.optimizer`; :func:`step_jit_compile`);
* :func:`fit_and_select` (``fit`` with the dev evaluation, best model kept,
  progress bar or one line per epoch (:func:`progress_verbosity`),
  TensorBoard, resume after an interruption: :mod:`kerasbert.training.callbacks`),
  then :func:`write_metrics`.

TensorBoard logs need the TensorFlow backend; everything else is
backend-agnostic Keras.
"""

import json
import math
from pathlib import Path

import keras
import numpy as np

from kerasbert.training.callbacks import EpochEvaluator
from kerasbert.training.callbacks import TrainingSpeed
from kerasbert.training.callbacks import training_callbacks
from kerasbert.training.distribution import is_chief
from kerasbert.training.distribution import make_strategy
from kerasbert.training.distribution import worker_batches
from kerasbert.errors import KerasbertError
from kerasbert.files.atomic import atomic_write_text
from kerasbert.training.history import plot_history
from kerasbert.training.optimizer import layer_lr_multipliers
from kerasbert.training.optimizer import make_optimizer


def progress_verbosity(stream=None):
    """Keras ``verbose`` for ``fit``: the progress bar (1) on a terminal and in
    a notebook; one line per epoch (2) when standard output is a file or a
    pipe (``> train.log``, ``nohup``, CI), where the bar's updates would pile
    up as hundreds of lines of escape codes."""
    import sys

    stream = sys.stdout if stream is None else stream
    ipython = sys.modules.get("IPython")
    in_notebook = ipython is not None and ipython.get_ipython() is not None
    is_terminal = getattr(stream, "isatty", lambda: False)()
    return 1 if is_terminal or in_notebook else 2


def resolve_precision(precision, jit_compile=False):
    """``precision`` for this hardware: float32, mixed_bfloat16 or
    mixed_float16 as given, or ``"auto"``: the one this hardware trains
    fastest (:func:`kerasbert.training.precision.choose_training_precision`,
    told whether the step is XLA-compiled: on JAX, or ``jit_compile``). Prints
    a bfloat16 choice, and a line when an explicit choice will be slower here."""
    from kerasbert.training.precision import choose_training_precision
    from kerasbert.training.settings import PRECISIONS

    if precision not in PRECISIONS:
        raise KerasbertError(f"precision must be one of {', '.join(PRECISIONS)}, got {precision!r}")
    precision, line = choose_training_precision(precision, xla=jit_compile or keras.backend.backend() == "jax")
    if line:
        print(line)
    return precision


def set_precision(precision, jit_compile=False):
    """Set the global Keras dtype policy to :func:`resolve_precision`'s
    choice; returns it."""
    precision = resolve_precision(precision, jit_compile)
    keras.mixed_precision.set_global_policy(precision)
    return precision


SETTINGS_FILE = "settings.json"


def start_run(settings, command=None):
    """Take ``settings.output`` for this run (:func:`kerasbert.training.runs.claim`:
    a new or empty folder, or an earlier run of the same ``command``, e.g.
    ``"ner train"``, continued with ``settings.resume`` or replaced with
    ``settings.overwrite``; anything else is refused; the folder stays locked
    until the run ends), write its marker and the filled-in settings to
    ``OUTPUT/settings.json`` (a resume: once its backup is restored); seed
    everything; set the precision policy (``"auto"`` resolved, and written
    resolved). ``command`` defaults to the
    settings' class name. Returns the output folder."""
    import dataclasses

    from kerasbert.training.runs import claim

    output = Path(settings.output)
    # "auto" resolved before the settings are written: settings.json (and the caller's settings)
    # say what the run trains in; the policy is set once the folder is taken.
    settings.precision = resolve_precision(settings.precision, getattr(settings, "jit_compile", False))
    if is_chief():  # under MultiWorkerMirroredStrategy the other workers write nothing in OUTPUT
        claim(output, command or type(settings).__name__,
              json.dumps(dataclasses.asdict(settings), indent=2, ensure_ascii=False) + "\n",
              resume=settings.resume, overwrite=getattr(settings, "overwrite", False))
    keras.utils.set_random_seed(settings.seed)
    keras.mixed_precision.set_global_policy(settings.precision)
    return output


def open_encoder_checkpoint(settings):
    """``(checkpoint folder, tokenizer)`` for ``settings.checkpoint``
    (``"starter"`` resolved), opened once for the whole run, with
    ``settings.max_length`` checked against the encoder's position embeddings.
    Pass the folder to :func:`kerasbert.load_encoder`."""
    from kerasbert.checkpoints.loader import load_tokenizer
    from kerasbert.checkpoints.loader import open_checkpoint

    folder = open_checkpoint(settings.checkpoint)
    positions = folder.config.max_position_embeddings
    if settings.max_length > positions:
        raise KerasbertError(
            f"max_length {settings.max_length} is longer than the encoder's {positions} position embeddings"
        )
    return folder, load_tokenizer(folder, max_length=settings.max_length)


def resolve_auto(settings, rows, steps=None, min_epochs=None, head_learning_rate=None):
    """``settings`` with the ``auto`` batch size, epochs, patience and head
    learning rate turned into numbers for ``rows`` training rows and for
    what the run's head declares it needs (``steps``, ``min_epochs``,
    ``head_learning_rate``: :meth:`kerasbert.training.settings.RunSettings.resolve_auto`);
    prints what was chosen when anything was auto."""
    resolved = settings.resolve_auto(rows, steps=steps, min_epochs=min_epochs, head_learning_rate=head_learning_rate)
    auto = [key for key in ("batch_size", "epochs", "patience", "head_learning_rate")
            if getattr(settings, key, None) == "auto"]
    if auto:
        per_epoch = math.ceil(rows / resolved.batch_size)
        print(f"auto ({', '.join(auto)}): {rows} training rows -> batch size {resolved.batch_size}, {per_epoch} steps "
              f"per epoch, {resolved.epochs} epochs ({per_epoch * resolved.epochs} steps)"
              + (f", early stopping after {resolved.patience} epochs without a better dev F1" if resolved.patience else "")
              + (f", head learning rate {resolved.head_learning_rate:g}" if "head_learning_rate" in auto else ""))
    return resolved


def step_jit_compile(jit_compile):
    """The ``jit_compile`` to give ``model.compile``: ``jit_compile`` (the
    setting) on TensorFlow, where a step that is not compiled by XLA still
    runs as one ``tf.function`` graph; always True on JAX, where Keras runs a
    step that is not jitted op by op, each op dispatched (and compiled) on
    its own, many times slower (on a GPU, hundreds of small launches and
    compilations per step)."""
    return bool(jit_compile) or keras.backend.backend() == "jax"


def compile_for_training(model, steps_per_epoch, settings, head_prefix):
    """Compile ``model`` with :func:`kerasbert.training.optimizer.make_optimizer` for ``settings.epochs``
    (with ``settings.layer_lr_decay`` below 1, the encoder's layers get
    :func:`kerasbert.training.optimizer.layer_lr_multipliers`); the head (variables
    under ``head_prefix``) at ``settings.head_learning_rate``, resolved by
    :func:`resolve_auto` (still ``"auto"``: ``AUTO_HEAD_LEARNING_RATE``)."""
    from kerasbert.training.settings import AUTO_HEAD_LEARNING_RATE

    decay = getattr(settings, "layer_lr_decay", 1.0)
    encoder_multipliers = layer_lr_multipliers(model.encoder, decay) if decay != 1.0 else None
    if encoder_multipliers:
        print(f"layer-wise learning-rate decay {decay}: top encoder layer x1, embeddings "
              f"x{decay ** model.encoder.num_layers:.3g}")
    head_rate = settings.head_learning_rate  # "auto" where resolve_auto did not run: a head that declares none
    optimizer = make_optimizer(
        steps_per_epoch * settings.epochs, settings.learning_rate,
        AUTO_HEAD_LEARNING_RATE if head_rate == "auto" else head_rate, head_prefix,
        warmup_ratio=settings.warmup_ratio, weight_decay=settings.weight_decay, precision=settings.precision,
        encoder_multipliers=encoder_multipliers,
    )
    model.compile(optimizer=optimizer, jit_compile=step_jit_compile(settings.jit_compile))
    # Create the optimizer's variables now. Left to the first training step,
    # they are created while TensorFlow traces it, and a tf.function whose
    # first call creates variables is traced a second time (measured: the
    # first epoch of a small MiniLM tagger run 53 s -> 39 s, same results).
    optimizer.build(model.trainable_variables)


def write_metrics(output, metrics):
    """Write ``OUTPUT/metrics.json`` (atomically; by the chief only, see :func:`kerasbert.training.distribution.is_chief`)."""
    if not is_chief():
        return
    atomic_write_text(Path(output) / "metrics.json", json.dumps(metrics, indent=2, ensure_ascii=False) + "\n")


def best_dev_scores(output, scores):
    """The best epoch's dev scores: ``OUTPUT/model/dev_scores.json`` (its
    epoch may be from before a ``--resume``), or, on a worker that cannot see
    the chief's files, ``scores`` (this process's, None if the best epoch
    was before a resume)."""
    path = Path(output) / "model" / "dev_scores.json"
    if path.exists():
        return json.loads(path.read_text(encoding="utf-8"))
    return scores or None


def fit_and_select(model, batches, settings, dev_scores, save_pipeline, format_scores, callbacks=()):
    """Train ``model`` on ``batches``; after each epoch score dev with
    ``dev_scores()`` (a dict with ``f1``, ``precision``, ``recall``), keep the
    best pipeline (``save_pipeline(directory)``) in ``OUTPUT/model`` with its
    ``dev_scores.json``; write ``metrics.json``, ``history.jsonl`` and the
    plot; print where everything went. Returns the metrics dict."""
    import time

    output = Path(settings.output)
    history_path = output / "history.jsonl"
    last = {}

    best = {}  # the best epoch's scores in this process (a worker that is not the chief reports them)

    def evaluate(_model):
        last.clear()
        last.update(dev_scores())
        if last["f1"] > evaluator.best:
            best.clear()
            best.update(last)
        return {key: last[key] for key in ("f1", "precision", "recall")}

    def save_best(directory):
        save_pipeline(directory)
        (Path(directory) / "dev_scores.json").write_text(
            json.dumps(last, indent=2, ensure_ascii=False) + "\n", encoding="utf-8"
        )

    chief = is_chief()
    evaluator = EpochEvaluator(evaluate, save_best, output / "model", history_path, metric="f1",
                               patience=settings.patience or None, write=chief)
    tokens = int(sum(int(np.sum(mask)) for mask in batches.features["padding_mask"]))
    speed = TrainingSpeed(tokens)
    all_callbacks = [speed] + training_callbacks(output, evaluator, settings.backup_every_steps or None) + list(callbacks)
    started = time.perf_counter()
    data, steps = worker_batches(batches, make_strategy(settings.strategy))
    model.fit(data, epochs=settings.epochs, steps_per_epoch=steps, shuffle=steps is None, callbacks=all_callbacks,
              verbose=progress_verbosity())
    later = speed.epoch_seconds[1:]
    metrics = {
        "best_epoch": evaluator.best_epoch,
        "batch_size": settings.batch_size,
        "epochs": settings.epochs,
        "steps_per_epoch": len(batches),
        "patience": settings.patience,
        "head_learning_rate": settings.head_learning_rate,
        "dev": best_dev_scores(output, best),
        "train_tokens_per_epoch": tokens,
        "train_seconds": time.perf_counter() - started,
        "train_epoch_seconds": speed.epoch_seconds,
        "train_tokens_per_s_after_first_epoch": tokens * len(later) / sum(later) if later else None,
    }
    write_metrics(output, metrics)
    if not chief:
        print(f"\nbest dev scores (epoch {evaluator.best_epoch}; the chief writes the run):\n"
              + (format_scores(metrics["dev"]) if metrics["dev"] else "(from before the resume)"))
        return metrics
    png = plot_history(history_path, output / "history.png")
    print(f"\nbest dev scores (epoch {evaluator.best_epoch}):\n" + format_scores(metrics["dev"]))
    print(f"\nmodel:   {output / 'model'}\nmetrics: {output / 'metrics.json'}\nhistory: {history_path}"
          + (f"\nplot:    {png}" if png else "") + f"\nlogs:    {output / 'logs'}")
    return metrics
