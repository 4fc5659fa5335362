"""Training on several devices or machines.

:func:`make_strategy`: ``--strategy mirrored`` is TensorFlow's
``MirroredStrategy`` or, on JAX, ``keras.distribution.DataParallel``;
``--strategy multiworker`` is TensorFlow's ``MultiWorkerMirroredStrategy``
(:func:`worker_batches` gives each worker its share of every global batch;
only the chief writes OUTPUT, :func:`is_chief`). A model that computes its
own loss scales it with :func:`scale_loss_for_distribution` and its logs
with :func:`logs_for_distribution`.
"""

import json

import keras
from keras import ops

from kerasbert.errors import KerasbertError


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
    """``batches`` (:class:`kerasbert.training.batching.BucketedBatches` of the global batch size) as
    ``fit`` input under ``strategy``: for ``MultiWorkerMirroredStrategy``,
    each worker's own share of every global batch (rows ``i::n`` for worker
    ``i`` of ``n``, padded to the global batch's width), epoch after epoch
    with the same shuffling on every worker (the same seed), so ``n`` workers
    take the steps of one worker with the global batch; ``batches`` itself
    otherwise. Under both distributions every batch must split evenly
    (:meth:`kerasbert.training.batching.BucketedBatches.split_evenly`; rows left out are printed).
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
