"""The Keras callbacks of a training run.

* :class:`EpochEvaluator` -- evaluates on dev after each epoch, keeps the best
  model (saved atomically), writes ``history.jsonl`` and stops early
  (:class:`EpochRecords`: each epoch recorded once across resumes);
* :class:`TrainingSpeed` -- pure training time and tokens/s per epoch;
* :class:`Backup` -- resume after an interruption (Keras's
  ``BackupAndRestore``, written atomically, LoRA adapters kept);
* :func:`training_callbacks` -- the backup, the evaluator and TensorBoard
  logs, as :func:`kerasbert.training.fit.fit_and_select` uses them.
"""

import json
import math
from pathlib import Path

import keras
import numpy as np

from kerasbert.training.distribution import is_chief
from kerasbert.errors import KerasbertError
from kerasbert.files.atomic import atomic_append_text
from kerasbert.files.atomic import atomic_write_bytes
from kerasbert.files.atomic import atomic_write_dir
from kerasbert.files.atomic import atomic_write_text
from kerasbert.training.history import read_history


class EpochRecords(keras.callbacks.Callback):
    """What a callback that writes one record per epoch to ``history.jsonl``
    shares: each epoch is recorded exactly once, however often the run was
    interrupted and resumed.

    The :class:`Backup` of epoch N is written when epoch N's training ends,
    before it is scored (a dev evaluation can take long): a run interrupted
    between the two resumes from epoch N unscored. When the run resumes
    (after the backup is restored, :meth:`on_train_begin`), records of epochs
    after the backup's are dropped (they are trained again) and an epoch the
    backup holds but the history does not is scored now, from the restored
    weights (exactly that epoch's) and the training logs the backup kept.

    Subclasses write :meth:`on_epoch_end` with :meth:`append`.

    Args:
        history_path: ``history.jsonl``.
        write: append to the history (False: a worker other than the chief).
    """

    def __init__(self, history_path, write=True):
        super().__init__()
        self.history_path = Path(history_path)
        self.write = write
        #: The run's :class:`Backup` (set by :func:`training_callbacks`): it restores before
        #: :meth:`on_train_begin` and says which epoch it restored.
        self.backup = None
        self.read_records()

    def read_records(self):
        """(Re)read ``history.jsonl``; subclasses take what they need from ``records``."""
        self.records = read_history(self.history_path)

    def append(self, record):
        if self.write:
            atomic_append_text(self.history_path, json.dumps(record) + "\n")
        self.records.append(record)

    def on_train_begin(self, logs=None):
        restored = getattr(self.backup, "restored", None)
        if not restored:
            return
        epoch, epoch_logs = restored
        later = [r for r in self.records if r.get("epoch", 0) > epoch]
        if later:
            kept = [r for r in self.records if r.get("epoch", 0) <= epoch]
            if self.write:
                atomic_write_text(self.history_path, "".join(json.dumps(r) + "\n" for r in kept))
            print(f"note: the backup holds epoch {epoch}; the history's records of epoch "
                  f"{', '.join(str(r['epoch']) for r in later)} are dropped (trained again)")
            self.read_records()
        if epoch > 0 and not any(r.get("epoch") == epoch for r in self.records):
            print(f"note: epoch {epoch} was trained before the interruption but not scored: scoring it now")
            self.on_epoch_end(epoch - 1, dict(epoch_logs or {}))
            if self.model.stop_training:  # it was the last: no epoch is trained after it
                self.model._initial_epoch = self.params.get("epochs", epoch)


class EpochEvaluator(EpochRecords):
    """After each epoch: evaluate on dev, log ``val_<metric>``, keep the best.

    Args:
        evaluate: function(model) -> dict of dev metrics (must contain
            ``metric``), e.g. entity F1 computed with seqeval.
        save_best: function(directory) writing everything needed to predict;
            called through :func:`atomic_write_dir` into ``best_dir`` when the
            metric improves.
        best_dir: where the best model lives.
        history_path: ``history.jsonl``, one line per epoch (appended, so a
            resumed run continues it; each epoch once: :class:`EpochRecords`).
        metric: the key to maximise.
        patience: stop after this many epochs without improvement (None: never),
            counted once the metric has left 0: a model whose first epochs find
            nothing has not started to learn, and stopping it then keeps an
            empty model.
        write: save the best model and append to the history (False: a
            worker other than the chief, which evaluates -- every worker must
            stop at the same epoch -- and writes nothing).
    """

    def __init__(self, evaluate, save_best, best_dir, history_path, metric="f1", patience=None, write=True):
        self.metric = metric
        super().__init__(history_path, write=write)
        self.evaluate = evaluate
        self.save_best = save_best
        self.best_dir = Path(best_dir)
        self.patience = patience

    def read_records(self):
        super().read_records()
        self.best, self.best_epoch = -math.inf, None
        for record in self.records:
            if record.get(f"val_{self.metric}", -math.inf) > self.best:
                self.best, self.best_epoch = record[f"val_{self.metric}"], record["epoch"]

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
        self.append({"epoch": epoch + 1, **{k: _plain(v) for k, v in logs.items()}, "best": improved})
        # Keras's progress bar is still on its line (it redraws with "\r" and
        # ends the line after the callbacks): start a new one.
        print(
            f"\nepoch {epoch + 1}: dev {self.metric} {value:.4f}"
            + (" (best" + (", saved to " + str(self.best_dir) if self.write else "") + ")" if improved else f" (best {self.best:.4f} at epoch {self.best_epoch})")
        )
        if (self.patience is not None and self.best_epoch is not None and self.best > 0
                and epoch + 1 - self.best_epoch >= self.patience):
            print(f"early stopping: no improvement in dev {self.metric} for {self.patience} epochs")
            self.model.stop_training = True


class TrainingSpeed(keras.callbacks.Callback):
    """Pure training time per epoch (first batch start to last batch end, so
    dev evaluation and saving are not counted); ``tokens_per_epoch`` real
    (unpadded) tokens turn it into tokens/s, logged as ``train_tokens_per_s``.
    The first epoch includes graph tracing."""

    #: Keras waits for every step's results before the next step is dispatched
    #: when a callback has a batch-end hook that is not ``async_safe``: on a
    #: GPU the host's work for the next batch would then never overlap the
    #: device's. This hook only reads the clock, in Keras's callback thread,
    #: after that step's results are there (Keras converts them first).
    async_safe = True

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

        self._last = max(self._last, time.perf_counter())  # the hooks may run in more than one thread

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

    def __init__(self, backup_dir, write=True, on_restored=None, **kwargs):
        super().__init__(backup_dir, **kwargs)
        # A worker other than the chief restores from the chief's backup (a
        # folder every worker sees) and never writes or deletes it.
        self.write = write
        # Backing up once per epoch, its batch-end hook does nothing: Keras need
        # not wait for every step's results because of it (see TrainingSpeed).
        # Backing up every N steps, it saves the variables there, which must
        # not run beside the next step.
        self.async_safe = self.save_freq == "epoch"
        #: Called once the backup is restored into the model (or there was
        #: none): a resume writes into the run's folder only from then on
        #: (:func:`kerasbert.training.runs.commit`).
        self.on_restored = on_restored
        #: ``(epoch, that epoch's training logs)`` of the backup restored at
        #: the start of training, None when there was none
        #: (:class:`EpochRecords` scores an epoch the backup holds unscored).
        self.restored = None
        self._epoch_logs = {}

    def on_train_begin(self, logs=None):
        self.restored = None
        super().on_train_begin(logs)
        if self.on_restored is not None:
            self.on_restored()

    def on_epoch_end(self, epoch, logs=None):
        """The backup of the epoch just trained, whatever ``save_freq`` (with
        steps, the last save could be several steps before the epoch's end),
        with its training logs; written before the epoch is scored."""
        self._current_epoch = epoch + 1
        self._last_batch_seen = 0
        self._epoch_logs = {key: _plain(value) for key, value in (logs or {}).items()}
        self._save_model()

    def on_train_end(self, logs=None):
        if self.write:
            super().on_train_end(logs)

    def _save_model(self):
        """Keras's backup, written so that an interrupted or failed write
        (a full disk) never replaces the last good one: the weights
        (:func:`weights_h5_bytes`) go to a temporary file renamed over
        ``latest.weights.h5``, the epoch and batch (``training_metadata.json``,
        with the training logs of the last whole epoch) are written
        atomically after them."""
        if not self.write:
            return
        atomic_write_bytes(self._weights_path, weights_h5_bytes(self.model))
        atomic_write_text(self._training_metadata_path,
                          json.dumps({"epoch": self._current_epoch, "batch": self._last_batch_seen,
                                      "logs": self._epoch_logs}))
        from kerasbert.layers.lora import lora_layers

        layers = lora_layers(self.model)
        if layers:
            import io

            buffer = io.BytesIO()
            np.savez(buffer, *[np.asarray(v) for layer in layers for v in (layer.lora_kernel_a, layer.lora_kernel_b)])
            atomic_write_bytes(Path(self.backup_dir) / self.ADAPTERS_FILE, buffer.getvalue())

    def _load_model(self):
        from kerasbert.files.atomic import check_file
        from kerasbert.files.atomic import read_json

        if Path(self._weights_path).exists():  # damaged: one line, not Keras's traceback
            check_file(self._weights_path, "hdf5", "the backup for --resume")
        metadata = None
        if Path(self._training_metadata_path).exists():
            metadata = read_json(self._training_metadata_path)
            if not isinstance(metadata, dict) or not isinstance(metadata.get("epoch"), int):
                raise KerasbertError(f"{self._training_metadata_path}: damaged: no epoch number")
        try:
            super()._load_model()
        except (ValueError, KeyError, TypeError) as e:  # Keras's message prints the model's weight arrays
            raise KerasbertError(
                f"{self.backup_dir}: cannot resume: the backup's weights do not fit the model built from this call's "
                f"settings and data ({_misfit(e)}); resume with the interrupted run's settings and data (its "
                "settings.json), or pass --overwrite to start again") from None
        if metadata is not None:
            logs = metadata.get("logs") if isinstance(metadata.get("logs"), dict) else {}
            self.restored = (metadata["epoch"], logs)
            # Keras's own counter starts at 0 in every process: a backup written
            # by steps before the resumed epoch ends would say epoch 0, and a
            # second resume would start the run over.
            self._current_epoch, self._epoch_logs = metadata["epoch"], logs
        from kerasbert.layers.lora import lora_layers

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


def _misfit(error):
    """Where Keras's error for a backup that does not load into the model
    says they differ, in a few words, without the weight arrays it prints:
    ``"<variable>: <shape> in the backup, <shape> in the model"``."""
    import re

    message = str(error)
    found = re.search(r"variable\.shape=(\([^)]*\)), Received: value\.shape=(\([^)]*\))", message)
    where = re.search(r"Target variable: <Variable path=([^,>]+)", message)
    if found:
        shapes = f"{found.group(2)} in the backup, {found.group(1)} in the model"
        return f"{where.group(1)}: {shapes}" if where else shapes
    return next((line.strip() for line in message.splitlines() if line.strip()), type(error).__name__)[:200]


def weights_h5_bytes(model):
    """``model.save_weights``' ``.weights.h5`` content (optimizer state
    included), made in memory: h5py writing straight to a file that hits a
    full disk fails while closing it and can crash the process (seen with a
    file-size limit), while bytes in memory are written by
    :func:`~kerasbert.files.atomic.atomic_write_bytes`, whose failure is one clean
    error. Keras's own H5 store, which also takes a BytesIO."""
    import io

    from keras.src.saving import saving_lib

    buffer = io.BytesIO()
    store = saving_lib.H5IOStore(buffer, mode="w")
    saving_lib._save_state(model, weights_store=store, assets_store=None, inner_path="", visited_saveables=set())
    store.close()
    return buffer.getvalue()


def training_callbacks(output_dir, evaluator, backup_every_steps=None, tensorboard=True):
    """Resume-after-interruption (:class:`Backup`), the dev evaluator and
    TensorBoard logs under ``output_dir`` (a worker other than the chief
    writes none of them, see :func:`kerasbert.training.distribution.is_chief`).
    The backup is written when an epoch's training ends, then ``evaluator``
    (an :class:`EpochRecords`) scores the epoch; a resume scores an epoch
    that the backup holds and the history does not. The backup is removed
    when the run ends (:func:`kerasbert.training.runs.finish` for a command's run,
    whose backup stays until the whole command is done; else when ``fit``
    ends); nothing is written into ``output_dir`` before the backup is
    restored (:func:`kerasbert.training.runs.commit`)."""
    from kerasbert.training import runs

    output_dir = Path(output_dir)
    chief = is_chief()
    backup = Backup(
        backup_dir=str(output_dir / "backup"),
        write=chief,
        save_freq=backup_every_steps or "epoch",
        delete_checkpoint=not runs.is_managed(output_dir),
        on_restored=lambda: runs.commit(output_dir),
    )
    evaluator.backup = backup
    callbacks = [backup, evaluator]
    if tensorboard and chief and keras.backend.backend() == "tensorflow":
        callbacks.append(_TensorBoard(log_dir=str(output_dir / "logs"), update_freq=50))
    return callbacks


class _TensorBoard(keras.callbacks.TensorBoard):
    """Keras's TensorBoard callback, which writes nothing before training
    begins (Keras's writes the model's summary when it gets the model, before
    a resume's backup is restored: a failed ``--resume`` would leave a log)."""

    def set_model(self, model):
        self._pending_model = model

    def on_train_begin(self, logs=None):
        super().set_model(self._pending_model)
        super().on_train_begin(logs)


class KeptEncoders(keras.callbacks.Callback):
    """After every ``every`` epochs but the last (whose encoder is
    ``OUTPUT/encoder``), the encoder as it is, written atomically by
    ``write(directory)`` to ``root/step-S`` (S: the steps done), so the
    checkpoints of one run can be fine-tuned and compared (a resumed run
    writes those it had not)."""

    def __init__(self, every, epochs, steps_per_epoch, root, write):
        super().__init__()
        self.every, self.epochs, self.steps_per_epoch = every, epochs, steps_per_epoch
        self.root, self.write = Path(root), write

    def on_epoch_end(self, epoch, logs=None):
        from kerasbert.files.atomic import atomic_write_dir

        done = epoch + 1
        if done % self.every == 0 and done < self.epochs:
            atomic_write_dir(self.root / f"step-{done * self.steps_per_epoch}", self.write)
