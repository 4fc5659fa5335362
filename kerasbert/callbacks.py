"""The Keras callbacks of a training run.

* :class:`EpochEvaluator` -- evaluates on dev after each epoch, keeps the best
  model (saved atomically), writes ``history.jsonl`` and stops early;
* :class:`TrainingSpeed` -- pure training time and tokens/s per epoch;
* :class:`Backup` -- resume after an interruption (Keras's
  ``BackupAndRestore``, written atomically, LoRA adapters kept);
* :func:`training_callbacks` -- the backup, the evaluator and TensorBoard
  logs, as :func:`kerasbert.fit.fit_and_select` uses them.
"""

import json
import math
from pathlib import Path

import keras
import numpy as np

from kerasbert.distribution import is_chief
from kerasbert.errors import KerasbertError
from kerasbert.files import atomic_append_text
from kerasbert.files import atomic_write_bytes
from kerasbert.files import atomic_write_dir
from kerasbert.files import atomic_write_text
from kerasbert.history import read_history


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

    def __init__(self, backup_dir, write=True, **kwargs):
        super().__init__(backup_dir, **kwargs)
        # A worker other than the chief restores from the chief's backup (a
        # folder every worker sees) and never writes or deletes it.
        self.write = write
        # Backing up once per epoch, its batch-end hook does nothing: Keras need
        # not wait for every step's results because of it (see TrainingSpeed).
        # Backing up every N steps, it saves the variables there, which must
        # not run beside the next step.
        self.async_safe = self.save_freq == "epoch"

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
    writes none of them, see :func:`kerasbert.distribution.is_chief`)."""
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
