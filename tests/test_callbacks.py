"""The training callbacks let Keras dispatch steps ahead (asynchronously).

Keras waits for every training step's results before dispatching the next
one when any callback has a batch-end hook it does not know to be
``async_safe`` (``keras.callbacks.CallbackList``): on a GPU the host's work
for the next batch then never overlaps the device's step. The callbacks
``fit_and_select`` trains with must not make it wait, unless a backup every
N steps must (it saves the variables in that hook)."""

import keras
import pytest
from keras.src.callbacks import callback_list

from kerasbert.training.callbacks import EpochEvaluator
from kerasbert.training.callbacks import TrainingSpeed
from kerasbert.training.callbacks import training_callbacks


@pytest.fixture(autouse=True)
def thread_safe_backend(monkeypatch):
    # Keras dispatches ahead only on a backend it marks thread-safe (JAX, not
    # TensorFlow): the decision on the callbacks is the same on every backend.
    monkeypatch.setattr(callback_list.backend, "IS_THREAD_SAFE", True)


def _callback_list(tmp_path, backup_every_steps=None):
    evaluator = EpochEvaluator(lambda: {"f1": 0.0}, lambda path: None, tmp_path / "best", tmp_path / "history.jsonl")
    callbacks = [TrainingSpeed(1000)] + training_callbacks(tmp_path, evaluator, backup_every_steps, tensorboard=False)
    return keras.callbacks.CallbackList(callbacks)


def test_training_callbacks_let_keras_dispatch_ahead(tmp_path):
    assert _callback_list(tmp_path)._async_train


def test_a_backup_every_n_steps_makes_keras_wait(tmp_path):
    assert not _callback_list(tmp_path, backup_every_steps=5)._async_train


def test_patience_counts_from_the_first_epoch_that_found_anything(tmp_path):
    """Early stopping waits until the dev score has left 0: a head whose first epochs find nothing
    (the gplinker head on a few hundred sentences) has not started to learn, and stopping it
    would keep an empty model."""
    import types

    scores = iter([0.0, 0.0, 0.0, 0.2, 0.3, 0.25, 0.28, 0.9])
    evaluator = EpochEvaluator(lambda model: {"f1": next(scores)}, lambda path: None, tmp_path / "best",
                               tmp_path / "history.jsonl", patience=2, write=False)
    model = types.SimpleNamespace(stop_training=False)
    evaluator.set_model(model)
    stopped = None
    for epoch in range(8):
        evaluator.on_epoch_end(epoch, {})
        if model.stop_training:
            stopped = epoch + 1
            break
    assert stopped == 7 and evaluator.best_epoch == 5  # two epochs after its best, not after the first 0
