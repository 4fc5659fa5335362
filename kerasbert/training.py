"""The names the training machinery had when it was one module, re-exported.

Training is split by concept; each name lives in the file named after it:

* :mod:`kerasbert.optimizer` -- :class:`~kerasbert.optimizer.GroupedAdamW`,
  :class:`~kerasbert.optimizer.WarmupLinearDecay`,
  :func:`~kerasbert.optimizer.layer_lr_multipliers`,
  :func:`~kerasbert.optimizer.make_optimizer`;
* :mod:`kerasbert.batching` -- :class:`~kerasbert.batching.BucketedBatches`,
  :func:`~kerasbert.batching.padded_length`;
* :mod:`kerasbert.callbacks` -- :class:`~kerasbert.callbacks.EpochEvaluator`,
  :class:`~kerasbert.callbacks.TrainingSpeed`, :class:`~kerasbert.callbacks.Backup`
  (resume after an interruption), :func:`~kerasbert.callbacks.weights_h5_bytes`,
  :func:`~kerasbert.callbacks.training_callbacks`;
* :mod:`kerasbert.history` -- ``history.jsonl``:
  :func:`~kerasbert.history.read_history`, :func:`~kerasbert.history.plot_history`;
* :mod:`kerasbert.distribution` -- :func:`~kerasbert.distribution.make_strategy`,
  :func:`~kerasbert.distribution.multi_worker_strategy`,
  :func:`~kerasbert.distribution.distribution_scope`,
  :func:`~kerasbert.distribution.is_chief`,
  :func:`~kerasbert.distribution.worker_batches`,
  :func:`~kerasbert.distribution.scale_loss_for_distribution`,
  :func:`~kerasbert.distribution.logs_for_distribution`;
* :mod:`kerasbert.fit` -- a run, start to end:
  :func:`~kerasbert.fit.start_run`, :func:`~kerasbert.fit.set_precision`,
  :func:`~kerasbert.fit.open_encoder_checkpoint`,
  :func:`~kerasbert.fit.resolve_auto`, :func:`~kerasbert.fit.step_jit_compile`,
  :func:`~kerasbert.fit.compile_for_training`,
  :func:`~kerasbert.fit.progress_verbosity`, :func:`~kerasbert.fit.fit_and_select`,
  :func:`~kerasbert.fit.write_metrics`, :func:`~kerasbert.fit.best_dev_scores`,
  ``SETTINGS_FILE``.

New code imports from those modules; this one keeps
``from kerasbert.training import ...`` (and ``training.start_run(...)``)
working for code written before the split.
"""

from kerasbert.batching import BucketedBatches
from kerasbert.batching import padded_length
from kerasbert.callbacks import Backup
from kerasbert.callbacks import EpochEvaluator
from kerasbert.callbacks import TrainingSpeed
from kerasbert.callbacks import training_callbacks
from kerasbert.callbacks import weights_h5_bytes
from kerasbert.distribution import distribution_scope
from kerasbert.distribution import is_chief
from kerasbert.distribution import logs_for_distribution
from kerasbert.distribution import make_strategy
from kerasbert.distribution import multi_worker_strategy
from kerasbert.distribution import scale_loss_for_distribution
from kerasbert.distribution import worker_batches
from kerasbert.fit import SETTINGS_FILE
from kerasbert.fit import best_dev_scores
from kerasbert.fit import compile_for_training
from kerasbert.fit import fit_and_select
from kerasbert.fit import open_encoder_checkpoint
from kerasbert.fit import progress_verbosity
from kerasbert.fit import resolve_auto
from kerasbert.fit import set_precision
from kerasbert.fit import start_run
from kerasbert.fit import step_jit_compile
from kerasbert.fit import write_metrics
from kerasbert.history import plot_history
from kerasbert.history import read_history
from kerasbert.optimizer import GroupedAdamW
from kerasbert.optimizer import WarmupLinearDecay
from kerasbert.optimizer import layer_lr_multipliers
from kerasbert.optimizer import make_optimizer

__all__ = [
    "Backup",
    "BucketedBatches",
    "EpochEvaluator",
    "GroupedAdamW",
    "SETTINGS_FILE",
    "TrainingSpeed",
    "WarmupLinearDecay",
    "best_dev_scores",
    "compile_for_training",
    "distribution_scope",
    "fit_and_select",
    "is_chief",
    "layer_lr_multipliers",
    "logs_for_distribution",
    "make_optimizer",
    "make_strategy",
    "multi_worker_strategy",
    "open_encoder_checkpoint",
    "padded_length",
    "plot_history",
    "progress_verbosity",
    "read_history",
    "resolve_auto",
    "scale_loss_for_distribution",
    "set_precision",
    "start_run",
    "step_jit_compile",
    "training_callbacks",
    "weights_h5_bytes",
    "worker_batches",
    "write_metrics",
]
