"""Training machinery shared by the apps (NER, triples): one trainer, not two.

* :class:`GroupedAdamW` -- AdamW with a learning-rate multiplier per group of
  variables (e.g. a head that learns 100x faster than the encoder), weight
  decay off for biases and LayerNorm;
* :class:`WarmupLinearDecay` -- linear warm-up then linear decay to zero;
* :class:`BucketedBatches` -- a ``keras.utils.PyDataset`` of batches of similar
  length, padded only to the longest in the batch (not to ``max_length``);
* :class:`EpochEvaluator` -- evaluates on dev after each epoch, keeps the best
  model (saved atomically), writes ``history.jsonl`` and stops early;
* a run's steps, in the order an app's train command takes them:
  :func:`start_run` (output folder, ``settings.json``, precision),
  :func:`open_encoder_checkpoint` (the checkpoint, opened once),
  :func:`resolve_auto` (the ``auto`` batch size, epochs and patience for the
  data's size), :func:`compile_for_training` (grouped AdamW, schedule, loss scaling) and
  :func:`fit_and_select` (``fit`` with the dev evaluation, best model kept,
  progress bar or one line per epoch, TensorBoard, resume after an
  interruption).

Distribution (:func:`make_strategy`): ``--strategy mirrored`` is
TensorFlow's ``MirroredStrategy`` or, on JAX, ``keras.distribution.DataParallel``;
``--strategy multiworker`` is TensorFlow's ``MultiWorkerMirroredStrategy``
(:func:`worker_batches` gives each worker its share of every global batch;
only the chief writes OUTPUT, :func:`is_chief`). TensorBoard logs need the
TensorFlow backend; everything else is backend-agnostic Keras.
"""

import json
import math
from pathlib import Path

import keras
import numpy as np
from keras import ops

from kerasbert.errors import KerasbertError
from kerasbert.files import atomic_append_text
from kerasbert.files import atomic_write_bytes
from kerasbert.files import atomic_write_dir
from kerasbert.files import atomic_write_text


# =============================================================================
# Optimizer and schedule
# =============================================================================


@keras.saving.register_keras_serializable(package="kerasbert")
class WarmupLinearDecay(keras.optimizers.schedules.LearningRateSchedule):
    """``peak * step / warmup`` for ``step < warmup``, then linear to 0 at ``total``."""

    def __init__(self, peak, total_steps, warmup_steps):
        self.peak = float(peak)
        self.total_steps = int(total_steps)
        self.warmup_steps = int(warmup_steps)

    def __call__(self, step):
        step = ops.cast(step, "float32")
        warm = self.peak * step / max(self.warmup_steps, 1)
        decay = self.peak * ops.maximum(0.0, (self.total_steps - step) / max(self.total_steps - self.warmup_steps, 1))
        return ops.where(step < self.warmup_steps, warm, decay)

    def get_config(self):
        return {"peak": self.peak, "total_steps": self.total_steps, "warmup_steps": self.warmup_steps}


@keras.saving.register_keras_serializable(package="kerasbert")
class GroupedAdamW(keras.optimizers.AdamW):
    """AdamW with per-group learning-rate multipliers.

    Args:
        lr_multipliers: dict, variable path or path prefix -> multiplier
            of the (scheduled) learning rate; a variable's exact path wins over
            prefixes (e.g. :func:`layer_lr_multipliers`). Variables matching
            nothing use 1.
            Weight decay is scaled the same way.
        **kwargs: ``keras.optimizers.AdamW`` arguments.

    Biases, LayerNorm ``gamma``/``beta`` and the CRF transitions are excluded
    from weight decay, as in BERT's own optimizer.
    """

    def __init__(self, lr_multipliers=None, **kwargs):
        super().__init__(**kwargs)
        self.lr_multipliers = dict(lr_multipliers or {})
        self.exclude_from_weight_decay(var_names=["bias", "gamma", "beta", "transitions"])

    def build(self, var_list):
        super().build(var_list)
        # Variable paths are known here; inside update_step TensorFlow passes
        # raw tf.Variables, so look the factor up by the optimizer's own index.
        self._lr_factors = [self._factor_for(v.path) for v in var_list]

    def _factor_for(self, path):
        if path in self.lr_multipliers:  # a variable's own path first, then prefixes
            return float(self.lr_multipliers[path])
        for prefix, factor in self.lr_multipliers.items():
            if path.startswith(prefix):
                return float(factor)
        return 1.0

    def update_step(self, gradient, variable, learning_rate):
        factor = self._lr_factors[self._get_variable_index(variable)]
        if factor != 1.0:
            learning_rate = ops.multiply(learning_rate, factor)
        return super().update_step(gradient, variable, learning_rate)

    def get_config(self):
        config = super().get_config()
        config["lr_multipliers"] = self.lr_multipliers
        return config


def scale_loss_for_distribution(loss):
    """Divide a per-replica loss by the number of replicas.

    Under ``tf.distribute`` the gradients of the replicas are summed, so each
    replica's loss must be divided by their number. Keras does this for the
    losses it computes itself (compiled losses and ``add_loss``, in
    ``keras.src.losses.loss.scale_loss_for_distribution``), but it exports no
    public function for it, and a model that overrides ``compute_loss`` --
    ours must: the CRF's likelihood needs the padding mask from ``x`` and the
    model's transition weights, which a compiled ``Loss(y_true, y_pred)``
    never sees -- gets no scaling. So these few lines repeat Keras's private
    ones (checked by the MirroredStrategy tests: an unscaled loss is 100% off).
    A no-op on one device and on other backends."""
    if keras.backend.backend() == "tensorflow":
        import tensorflow as tf

        replicas = tf.distribute.get_strategy().num_replicas_in_sync
        if replicas > 1:
            loss = ops.multiply(loss, ops.cast(1.0 / replicas, loss.dtype))
    return loss


def logs_for_distribution(logs):
    """Under ``MultiWorkerMirroredStrategy``, each scalar of a training
    step's logs as a 1-element vector; ``logs`` as they are otherwise.
    Keras averages a step's logs over the workers with
    ``strategy.reduce("MEAN", value, axis=0)``, which fails on a scalar
    ("Invalid reduction dimension 0 for input with 0 dimensions"); over
    1-element vectors it is the mean of the workers' values, a scalar again."""
    if keras.backend.backend() != "tensorflow":
        return logs
    import tensorflow as tf

    if not isinstance(tf.distribute.get_strategy(), tf.distribute.MultiWorkerMirroredStrategy):
        return logs
    return {key: ops.reshape(value, (1,)) if len(ops.shape(value)) == 0 else value for key, value in logs.items()}


# =============================================================================
# Data
# =============================================================================


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


def padded_length(n, multiple=8, cap=None):
    """``n`` rounded up to a multiple of ``multiple``, but never beyond ``cap``
    (and never below ``n``). Every batch is padded this way, so a model's
    compiled step sees few distinct shapes and is traced a few times only."""
    rounded = int(math.ceil(n / multiple) * multiple)
    return max(int(n), min(rounded, cap)) if cap else rounded


class BucketedBatches(keras.utils.PyDataset):
    """Batches of examples of similar length, padded to the batch's longest.

    Args:
        features: dict name -> list of arrays (one per example; all names
            share lengths, the first dimension), e.g. ``token_ids``,
            ``segment_ids``, ``padding_mask``, ``tags`` (int, batched as
            int32) or a teacher's scores ``[length, tags]`` (float, batched in
            their own dtype).
        batch_size: examples per batch.
        targets: names of the features that are targets (``y``), the rest are
            inputs (``x``).
        shuffle: shuffle within length buckets and the batch order, anew each
            epoch (seeded).
        pad_to_multiple: round each batch's length up to a multiple of this,
            to limit the number of distinct shapes (each one compiles once).
        seed: shuffling seed.
        pad_values: dict name -> padding value (default 0).
        max_width: never round a batch's length up beyond this (e.g. the
            model's number of position embeddings).
    """

    def __init__(self, features, batch_size, targets=(), shuffle=True, pad_to_multiple=8, seed=0, pad_values=None,
                 max_width=None, **kwargs):
        super().__init__(**kwargs)
        self.features = features
        self.names = list(features)
        self.targets = list(targets)
        self.batch_size = int(batch_size)
        self.shuffle = shuffle
        self.pad_to_multiple = int(pad_to_multiple)
        self.pad_values = dict(pad_values or {})
        self.max_width = max_width
        self.lengths = np.array([len(a) for a in features[self.names[0]]])
        self.rng = np.random.default_rng(seed)
        self._epoch = 0
        self.row_multiple = 1
        self._make_batches()

    def split_evenly(self, parts):
        """Make every batch's row count a multiple of ``parts`` (devices or
        replicas that each take an equal share of a batch): the rows of the
        short batch beyond a multiple are left out of each epoch, chosen
        anew each epoch. Returns how many rows an epoch leaves out."""
        self.row_multiple = int(parts)
        if len(self.lengths) % self.batch_size % self.row_multiple:  # else the batches already split evenly
            self._make_batches()
        return self.left_out

    def _make_batches(self):
        n = len(self.lengths)
        rows = np.arange(n)
        # Every batch a multiple of row_multiple rows: leave out (random) rows.
        self.left_out = n % self.batch_size % self.row_multiple
        if self.left_out:
            rows = np.sort(self.rng.choice(n, n - self.left_out, replace=False) if self.shuffle else rows[: -self.left_out])
        if self.shuffle:
            # Sort by length with random tie-breaking, chunk, shuffle the chunks.
            order = rows[np.lexsort((self.rng.random(len(rows)), self.lengths[rows]))]
        else:
            order = rows[np.argsort(self.lengths[rows], kind="stable")]
        batches = [order[i : i + self.batch_size] for i in range(0, len(order), self.batch_size)]
        if self.shuffle:
            self.rng.shuffle(batches)
        self.batches = self._expose_shapes(batches)

    def _expose_shapes(self, batches):
        """Keras builds a PyDataset's ``tf.data`` signature from its first two
        batches and rejects any later batch of another shape. Put first the
        smallest batch (the short last one, if any) and second a batch of
        another width (if any), so the signature leaves every varying
        dimension open. The rest keep their order."""
        if len(batches) < 3:
            return batches
        first = min(range(len(batches)), key=lambda i: len(batches[i]))
        width = self._width(batches[first])
        second = next((i for i in range(len(batches)) if i != first and self._width(batches[i]) != width), None)
        front = [first] + ([second] if second is not None else [])
        return [batches[i] for i in front] + [b for i, b in enumerate(batches) if i not in front]

    def _width(self, rows):
        return padded_length(int(self.lengths[rows].max()), self.pad_to_multiple, self.max_width)

    def __len__(self):
        return len(self.batches)

    def __getitem__(self, index):
        return self.batch(index)

    def batch(self, index, share=(0, 1)):
        """Batch ``index``; with ``share=(i, n)`` only its rows ``i::n`` (one
        worker's share of a global batch, see :func:`worker_batches`), padded
        to the whole batch's width."""
        rows = self.batches[index]
        width = self._width(rows)
        rows = rows[share[0] :: share[1]]
        x, y = {}, {}
        for name in self.names:
            first = np.asarray(self.features[name][rows[0]])
            dtype = first.dtype if first.dtype.kind == "f" else np.int32
            array = np.full((len(rows), width) + first.shape[1:], self.pad_values.get(name, 0), dtype=dtype)
            for i, row in enumerate(rows):
                value = self.features[name][row]
                array[i, : len(value)] = value
            (y if name in self.targets else x)[name] = array
        if not self.targets:
            return x
        if len(self.targets) == 1:
            return x, y[self.targets[0]]
        return x, y

    def on_epoch_end(self):
        if self.shuffle:
            self._make_batches()


# =============================================================================
# Callbacks
# =============================================================================


class EpochEvaluator(keras.callbacks.Callback):
    """After each epoch: evaluate on dev, log ``val_<metric>``, keep the best.

    Args:
        evaluate: function(model) -> dict of dev metrics (must contain
            ``metric``), e.g. entity F1 computed with seqeval.
        save_best: function(directory) writing everything needed to predict;
            called through :func:`atomic_write_dir` into ``best_dir`` when the
            metric improves.
        best_dir: where the best model lives.
        history_path: ``history.jsonl``, one line per epoch (appended, so a
            resumed run continues it).
        metric: the key to maximise.
        patience: stop after this many epochs without improvement (None: never).
        write: save the best model and append to the history (False: a
            worker other than the chief, which evaluates -- every worker must
            stop at the same epoch -- and writes nothing).
    """

    def __init__(self, evaluate, save_best, best_dir, history_path, metric="f1", patience=None, write=True):
        super().__init__()
        self.write = write
        self.evaluate = evaluate
        self.save_best = save_best
        self.best_dir = Path(best_dir)
        self.history_path = Path(history_path)
        self.metric = metric
        self.patience = patience
        self.best, self.best_epoch = -math.inf, None
        for record in read_history(self.history_path):
            if record.get(f"val_{metric}", -math.inf) > self.best:
                self.best, self.best_epoch = record[f"val_{metric}"], record["epoch"]

    def on_epoch_end(self, epoch, logs=None):
        logs = logs if logs is not None else {}
        scores = self.evaluate(self.model)
        for key, value in scores.items():
            logs[f"val_{key}"] = value
        value = scores[self.metric]
        improved = value > self.best
        if improved:
            self.best, self.best_epoch = value, epoch + 1
            if self.write:
                atomic_write_dir(self.best_dir, self.save_best)
        record = {"epoch": epoch + 1, **{k: _plain(v) for k, v in logs.items()}, "best": improved}
        if self.write:
            atomic_append_text(self.history_path, json.dumps(record) + "\n")
        # Keras's progress bar is still on its line (it redraws with "\r" and
        # ends the line after the callbacks): start a new one.
        print(
            f"\nepoch {epoch + 1}: dev {self.metric} {value:.4f}"
            + (" (best" + (", saved to " + str(self.best_dir) if self.write else "") + ")" if improved else f" (best {self.best:.4f} at epoch {self.best_epoch})")
        )
        if self.patience is not None and self.best_epoch is not None and epoch + 1 - self.best_epoch >= self.patience:
            print(f"early stopping: no improvement in dev {self.metric} for {self.patience} epochs")
            self.model.stop_training = True


class TrainingSpeed(keras.callbacks.Callback):
    """Pure training time per epoch (first batch start to last batch end, so
    dev evaluation and saving are not counted); ``tokens_per_epoch`` real
    (unpadded) tokens turn it into tokens/s, logged as ``train_tokens_per_s``.
    The first epoch includes graph tracing."""

    def __init__(self, tokens_per_epoch):
        super().__init__()
        self.tokens_per_epoch = int(tokens_per_epoch)
        self.epoch_seconds = []

    def on_epoch_begin(self, epoch, logs=None):
        import time

        self._start = time.perf_counter()
        self._last = self._start

    def on_train_batch_end(self, batch, logs=None):
        import time

        self._last = time.perf_counter()

    def on_epoch_end(self, epoch, logs=None):
        seconds = self._last - self._start
        self.epoch_seconds.append(seconds)
        if logs is not None and seconds > 0:
            logs["train_tokens_per_s"] = self.tokens_per_epoch / seconds


def _plain(value):
    try:
        return float(value)
    except (TypeError, ValueError):
        return str(value)


def read_history(path):
    """The records of ``history.jsonl`` (one JSON object a line); a damaged
    line (a run's history edited or cut short) raises an error naming it."""
    from kerasbert.errors import InputDataError

    path = Path(path)
    if not path.exists():
        return []
    records = []
    for number, line in enumerate(path.read_text(encoding="utf-8", errors="replace").splitlines(), 1):
        if line.strip():
            try:
                record = json.loads(line)
            except json.JSONDecodeError as e:
                raise InputDataError(path, number, f"damaged: not valid JSON ({e.msg}); the history of a run "
                                     "has one JSON object a line")
            if not isinstance(record, dict):
                raise InputDataError(path, number, "damaged: not a JSON object")
            records.append(record)
    return records


def plot_history(history_path, png_path, metric="f1"):
    """Write a PNG of training loss and dev ``metric`` per epoch. Returns the
    path, or None (with a message) when matplotlib is not installed."""
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError:
        print("note: no training plot (matplotlib is not installed: pip install 'kerasbert[plots]')")
        return None
    records = read_history(history_path)
    if not records:
        return None
    epochs = [r["epoch"] for r in records]
    # A Figure of its own (no pyplot): the global backend of a notebook is left alone.
    fig = Figure(figsize=(9, 3.2))
    FigureCanvasAgg(fig)
    a, b = fig.subplots(1, 2)
    a.plot(epochs, [r.get("loss") for r in records], marker="o")
    a.set_title("training loss")
    a.set_xlabel("epoch")
    b.plot(epochs, [r.get(f"val_{metric}") for r in records], marker="o", color="tab:green")
    b.set_title(f"dev {metric}")
    b.set_xlabel("epoch")
    fig.tight_layout()
    import io

    buffer = io.BytesIO()
    fig.savefig(buffer, dpi=100, format="png")
    return atomic_write_bytes(Path(png_path), buffer.getvalue())  # whole, or the previous plot kept


# =============================================================================
# Driver
# =============================================================================


def set_precision(precision):
    """Set the global Keras dtype policy: float32, mixed_bfloat16 or mixed_float16."""
    allowed = ("float32", "mixed_bfloat16", "mixed_float16")
    if precision not in allowed:
        raise KerasbertError(f"precision must be one of {', '.join(allowed)}, got {precision!r}")
    keras.mixed_precision.set_global_policy(precision)


_STRATEGIES = {}


def make_strategy(strategy):
    """The distribution engine of ``strategy`` (created once per process,
    then reused), or None for ``"default"``:

    * ``"mirrored"`` (this machine's devices): on TensorFlow,
      ``MirroredStrategy`` over the GPUs, or the logical CPU devices when
      there are none; on JAX, ``keras.distribution.DataParallel`` over
      ``keras.distribution.list_devices()`` (set as Keras's global
      distribution: every batch is split over the devices);
    * ``"multiworker"`` (TensorFlow): ``MultiWorkerMirroredStrategy``, its
      cluster and this process's place in it read from the ``TF_CONFIG``
      environment variable (``{"cluster": {"worker": ["host:port", ...]},
      "task": {"type": "worker", "index": i}}``). TensorFlow must not have
      run anything before it is created: :meth:`kerasbert_apps.base.task.Task.train`
      creates it first.
    """
    if strategy in (None, "default"):
        return None
    if strategy not in ("mirrored", "multiworker"):
        raise KerasbertError(f"strategy must be 'default', 'mirrored' or 'multiworker', got {strategy!r}")
    backend = keras.backend.backend()
    if strategy not in _STRATEGIES:
        if backend == "jax" and strategy == "mirrored":
            devices = keras.distribution.list_devices()
            _STRATEGIES[strategy] = keras.distribution.DataParallel(devices=devices)
            keras.distribution.set_distribution(_STRATEGIES[strategy])
            print(f"DataParallel (keras.distribution, JAX) over {len(devices)} devices: {', '.join(devices)}")
        elif backend != "tensorflow":
            raise KerasbertError(f"--strategy {strategy} needs the TensorFlow backend (KERAS_BACKEND=tensorflow)"
                                 + ("; on JAX, --strategy mirrored splits batches over this machine's devices"
                                    if backend == "jax" else ""))
        elif strategy == "mirrored":
            import tensorflow as tf

            # MirroredStrategy() alone takes GPUs, or just CPU:0 when there are
            # none; name the devices so logical CPU devices are used too.
            devices = tf.config.list_logical_devices("GPU") or tf.config.list_logical_devices("CPU")
            names = [d.name for d in devices]
            print(f"MirroredStrategy over {len(names)} devices: {', '.join(names)}")
            _STRATEGIES[strategy] = tf.distribute.MirroredStrategy(names)
        else:
            _STRATEGIES[strategy] = multi_worker_strategy()
    return _STRATEGIES[strategy]


def multi_worker_strategy():
    """``MultiWorkerMirroredStrategy`` for the cluster of ``TF_CONFIG``
    (checked first, so a missing or malformed one is a clear error rather
    than a one-worker run or a hang)."""
    import os

    import tensorflow as tf

    text = os.environ.get("TF_CONFIG", "")
    if not text:
        raise KerasbertError("--strategy multiworker needs the TF_CONFIG environment variable, e.g. "
                             '{"cluster": {"worker": ["host1:12345", "host2:12345"]}, "task": {"type": "worker", '
                             '"index": 0}} (the same cluster on every machine, each its own index)')
    try:
        config = json.loads(text)
        cluster, task = config["cluster"], config["task"]
        workers = list(cluster.get("chief", [])) + list(cluster["worker"])
        kind, index = task["type"], int(task["index"])
    except (ValueError, KeyError, TypeError) as error:
        raise KerasbertError(f"TF_CONFIG: expected {{'cluster': {{'worker': [...]}}, 'task': {{'type': ..., "
                             f"'index': ...}}}}, got {text!r} ({error})") from None
    if kind not in cluster or not 0 <= index < len(cluster[kind]):
        raise KerasbertError(f"TF_CONFIG: task {kind} {index} is not in the cluster {cluster}")
    strategy = tf.distribute.MultiWorkerMirroredStrategy()
    print(f"MultiWorkerMirroredStrategy: {len(workers)} workers, this is {kind} {index}"
          + (" (the chief: it writes OUTPUT)" if is_chief(strategy) else " (writes nothing in OUTPUT)"))
    return strategy


def distribution_scope(strategy):
    """A context manager for building the model under ``strategy`` (see
    :func:`make_strategy`); a no-op for ``"default"``."""
    import contextlib

    made = make_strategy(strategy)
    if made is None or isinstance(made, keras.distribution.DataParallel):  # JAX: set globally, for fit too
        return contextlib.nullcontext()
    return made.scope()


def is_chief(strategy=None):
    """Whether this process writes the run's files: always, except for a
    worker other than the chief under ``MultiWorkerMirroredStrategy``."""
    if strategy is None:
        strategy = _STRATEGIES.get("multiworker")
    return strategy is None or bool(strategy.extended.should_checkpoint)


def worker_batches(batches, strategy):
    """``batches`` (:class:`BucketedBatches` of the global batch size) as
    ``fit`` input under ``strategy``: for ``MultiWorkerMirroredStrategy``,
    each worker's own share of every global batch (rows ``i::n`` for worker
    ``i`` of ``n``, padded to the global batch's width), epoch after epoch
    with the same shuffling on every worker (the same seed), so ``n`` workers
    take the steps of one worker with the global batch; ``batches`` itself
    otherwise. Under both distributions every batch must split evenly
    (:meth:`BucketedBatches.split_evenly`; rows left out are printed).
    Returns ``(fit input, steps per epoch or None)``."""
    if isinstance(strategy, keras.distribution.DataParallel):
        parts, what = len(strategy.device_mesh.devices.ravel()), "devices"
    elif strategy is not None and strategy is _STRATEGIES.get("multiworker"):
        parts, what = strategy.num_replicas_in_sync, "replicas"
    else:
        return batches, None
    if batches.batch_size % parts:
        raise KerasbertError(f"the batch size ({batches.batch_size}) must divide by the {parts} {what} that split "
                             "every batch: choose another --batch-size")
    left_out = batches.split_evenly(parts)
    if left_out:
        print(f"every batch is split over {parts} {what}: {left_out} of {len(batches.lengths)} training rows are left "
              "out of each epoch (others each epoch), so that the short last batch splits evenly")
    if isinstance(strategy, keras.distribution.DataParallel):
        return batches, None
    import tensorflow as tf

    def spec(value):
        if isinstance(value, dict):
            return {k: spec(v) for k, v in value.items()}
        if isinstance(value, tuple):
            return tuple(spec(v) for v in value)
        return tf.TensorSpec((None,) * value.ndim, tf.as_dtype(value.dtype))

    signature = spec(batches[0])

    def dataset(context):
        # Consecutive elements of a worker's dataset go to its replicas in turn.
        local = parts // context.num_input_pipelines
        first = context.input_pipeline_id * local

        def epochs():
            while True:
                for index in range(len(batches)):
                    for replica in range(first, first + local):
                        yield batches.batch(index, (replica, parts))
                batches.on_epoch_end()

        return tf.data.Dataset.from_generator(epochs, output_signature=signature).prefetch(2)

    return strategy.distribute_datasets_from_function(dataset), len(batches)


def layer_lr_multipliers(encoder, decay):
    """Layer-wise learning-rate decay (ULMFiT, ELECTRA): ``{variable path:
    multiplier}`` for every weight of ``encoder``: the top transformer layer
    ``decay ** 0``, the one below ``decay ** 1``, ..., the bottom one
    ``decay ** (L - 1)``, and everything else (the embeddings; the pooler)
    ``decay ** L`` for ``L`` layers. An ALBERT whose layers share weights has
    no per-layer weights to decay: refused."""
    layers = list(encoder.transformer_layers)
    if len(layers) != encoder.num_layers or not all(isinstance(layer, keras.layers.Layer) for layer in layers):
        raise KerasbertError(f"layer_lr_decay needs one set of weights per encoder layer; this "
                             f"{type(encoder).__name__} shares its {encoder.num_layers} layers' weights")
    count = len(layers)
    multipliers = {v.path: float(decay) ** count for v in encoder.weights}
    for index, layer in enumerate(layers):
        for v in layer.weights:
            multipliers[v.path] = float(decay) ** (count - 1 - index)
    return multipliers


def make_optimizer(total_steps, learning_rate, head_learning_rate, head_prefix, warmup_ratio=0.1, weight_decay=0.01,
                   precision="float32", encoder_multipliers=None):
    """GroupedAdamW with warm-up + linear decay; the head (variables whose path
    starts with ``head_prefix``) learns at ``head_learning_rate``;
    ``encoder_multipliers`` (``{variable path: multiplier}``, e.g.
    :func:`layer_lr_multipliers`) scale ``learning_rate`` for those
    variables. Wrapped in a loss-scale optimizer for ``mixed_float16``."""
    schedule = WarmupLinearDecay(learning_rate, total_steps, int(warmup_ratio * total_steps))
    multipliers = {head_prefix: head_learning_rate / learning_rate}
    multipliers.update({path: factor for path, factor in (encoder_multipliers or {}).items() if factor != 1.0})
    optimizer = GroupedAdamW(
        learning_rate=schedule,
        weight_decay=weight_decay,
        lr_multipliers=multipliers,
        epsilon=1e-6,
        clipnorm=1.0,
    )
    if precision == "mixed_float16":
        optimizer = keras.optimizers.LossScaleOptimizer(optimizer)
    return optimizer


class Backup(keras.callbacks.BackupAndRestore):
    """Keras's ``BackupAndRestore``, also right for a model with LoRA
    adapters (``--lora-rank``): Keras saves a LoRA layer's kernel with the
    adapters merged in and zeroes the adapters when it loads, which would
    resume training on merged kernels and leave adapters that no longer fit
    the checkpoint. Beside the weights the adapters are saved
    (``lora_adapters.npz``, atomically); after Keras's restore they are put
    back and taken out of the kernels again (kernel = merged - adapters'
    delta), so the frozen kernels are the checkpoint's again."""

    ADAPTERS_FILE = "lora_adapters.npz"

    def __init__(self, backup_dir, write=True, **kwargs):
        super().__init__(backup_dir, **kwargs)
        # A worker other than the chief restores from the chief's backup (a
        # folder every worker sees) and never writes or deletes it.
        self.write = write

    def on_train_end(self, logs=None):
        if self.write:
            super().on_train_end(logs)

    def _save_model(self):
        """Keras's backup, written so that an interrupted or failed write
        (a full disk) never replaces the last good one: the weights
        (:func:`weights_h5_bytes`) go to a temporary file renamed over
        ``latest.weights.h5``, the epoch and batch (``training_metadata.json``)
        are written atomically after them."""
        if not self.write:
            return
        atomic_write_bytes(self._weights_path, weights_h5_bytes(self.model))
        atomic_write_text(self._training_metadata_path,
                          json.dumps({"epoch": self._current_epoch, "batch": self._last_batch_seen}))
        from kerasbert.lora import lora_layers

        layers = lora_layers(self.model)
        if layers:
            import io

            buffer = io.BytesIO()
            np.savez(buffer, *[np.asarray(v) for layer in layers for v in (layer.lora_kernel_a, layer.lora_kernel_b)])
            atomic_write_bytes(Path(self.backup_dir) / self.ADAPTERS_FILE, buffer.getvalue())

    def _load_model(self):
        from kerasbert.files import check_file
        from kerasbert.files import read_json

        if Path(self._weights_path).exists():  # damaged: one line, not Keras's traceback
            check_file(self._weights_path, "hdf5", "the backup for --resume")
        if Path(self._training_metadata_path).exists():
            metadata = read_json(self._training_metadata_path)
            if not isinstance(metadata, dict) or not isinstance(metadata.get("epoch"), int):
                raise KerasbertError(f"{self._training_metadata_path}: damaged: no epoch number")
        super()._load_model()
        from kerasbert.lora import lora_layers

        layers = lora_layers(self.model)
        path = Path(self.backup_dir) / self.ADAPTERS_FILE
        if not layers or not path.exists():
            return
        with np.load(path) as saved:
            values = [saved[f"arr_{i}"] for i in range(len(saved.files))]
        if len(values) != 2 * len(layers):
            raise KerasbertError(f"{path}: {len(values) // 2} LoRA adapters saved, the model has {len(layers)}")
        for i, layer in enumerate(layers):
            layer.lora_kernel_a.assign(values[2 * i])
            layer.lora_kernel_b.assign(values[2 * i + 1])
            # Keras restored the kernel with the adapters merged in; layer.kernel
            # is _kernel + the adapters' delta.
            delta = layer.kernel - layer._kernel
            layer._kernel.assign(layer._kernel - delta)


def weights_h5_bytes(model):
    """``model.save_weights``' ``.weights.h5`` content (optimizer state
    included), made in memory: h5py writing straight to a file that hits a
    full disk fails while closing it and can crash the process (seen with a
    file-size limit), while bytes in memory are written by
    :func:`~kerasbert.files.atomic_write_bytes`, whose failure is one clean
    error. Keras's own H5 store, which also takes a BytesIO."""
    import io

    from keras.src.saving import saving_lib

    buffer = io.BytesIO()
    store = saving_lib.H5IOStore(buffer, mode="w")
    saving_lib._save_state(model, weights_store=store, assets_store=None, inner_path="", visited_saveables=set())
    store.close()
    return buffer.getvalue()


def training_callbacks(output_dir, evaluator, backup_every_steps=None, tensorboard=True):
    """Resume-after-interruption (``BackupAndRestore``), the dev evaluator and
    TensorBoard logs under ``output_dir`` (a worker other than the chief
    writes none of them, see :func:`is_chief`)."""
    output_dir = Path(output_dir)
    chief = is_chief()
    callbacks = [
        Backup(
            backup_dir=str(output_dir / "backup"),
            write=chief,
            save_freq=backup_every_steps or "epoch",
            delete_checkpoint=True,
        ),
        evaluator,
    ]
    if tensorboard and chief and keras.backend.backend() == "tensorflow":
        callbacks.append(keras.callbacks.TensorBoard(log_dir=str(output_dir / "logs"), update_freq=50))
    return callbacks


# =============================================================================
# A run, start to end (used by every app's train())
# =============================================================================


SETTINGS_FILE = "settings.json"


def start_run(settings):
    """Refuse to overwrite an earlier run in ``settings.output`` unless
    ``settings.resume``; write the filled-in settings to
    ``OUTPUT/settings.json``; seed everything; set the precision policy.
    Returns the output folder."""
    import dataclasses

    output = Path(settings.output)
    if not settings.resume and ((output / "history.jsonl").exists() or (output / "backup").exists()):
        raise KerasbertError(
            f"{output} already holds a training run; pass --resume to continue it, or choose another --output"
        )
    if is_chief():  # under MultiWorkerMirroredStrategy the other workers write nothing in OUTPUT
        try:
            output.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            from kerasbert.errors import WriteError

            raise WriteError(f"{output}: cannot create the output folder ({e.strerror or e}"
                             + (f": {e.filename}" if e.filename and str(e.filename) != str(output) else "") + ")")
        atomic_write_text(output / SETTINGS_FILE, json.dumps(dataclasses.asdict(settings), indent=2, ensure_ascii=False) + "\n")
    keras.utils.set_random_seed(settings.seed)
    set_precision(settings.precision)
    return output


def open_encoder_checkpoint(settings):
    """``(checkpoint folder, tokenizer)`` for ``settings.checkpoint``
    (``"starter"`` resolved), opened once for the whole run, with
    ``settings.max_length`` checked against the encoder's position embeddings.
    Pass the folder to :func:`kerasbert.load_encoder`."""
    from kerasbert.loader import load_tokenizer
    from kerasbert.loader import open_checkpoint

    folder = open_checkpoint(settings.checkpoint)
    positions = folder.config.max_position_embeddings
    if settings.max_length > positions:
        raise KerasbertError(
            f"max_length {settings.max_length} is longer than the encoder's {positions} position embeddings"
        )
    return folder, load_tokenizer(folder, max_length=settings.max_length)


def resolve_auto(settings, rows):
    """``settings`` with the ``auto`` batch size, epochs and patience turned
    into numbers for ``rows`` training rows
    (:meth:`kerasbert.settings.TrainSettings.resolve_auto`); prints what was
    chosen when anything was auto."""
    resolved = settings.resolve_auto(rows)
    auto = [key for key in ("batch_size", "epochs", "patience") if getattr(settings, key, None) == "auto"]
    if auto:
        steps = math.ceil(rows / resolved.batch_size)
        print(f"auto ({', '.join(auto)}): {rows} training rows -> batch size {resolved.batch_size}, {steps} steps "
              f"per epoch, {resolved.epochs} epochs ({steps * resolved.epochs} steps)"
              + (f", early stopping after {resolved.patience} epochs without a better dev F1" if resolved.patience else ""))
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
    """Compile ``model`` with :func:`make_optimizer` for ``settings.epochs``
    (with ``settings.layer_lr_decay`` below 1, the encoder's layers get
    :func:`layer_lr_multipliers`)."""
    decay = getattr(settings, "layer_lr_decay", 1.0)
    encoder_multipliers = layer_lr_multipliers(model.encoder, decay) if decay != 1.0 else None
    if encoder_multipliers:
        print(f"layer-wise learning-rate decay {decay}: top encoder layer x1, embeddings "
              f"x{decay ** model.encoder.num_layers:.3g}")
    optimizer = make_optimizer(
        steps_per_epoch * settings.epochs, settings.learning_rate, settings.head_learning_rate, head_prefix,
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
    """Write ``OUTPUT/metrics.json`` (atomically; by the chief only, see :func:`is_chief`)."""
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
        "patience": settings.patience,
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
