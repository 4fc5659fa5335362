"""What every app's Keras model shares: an encoder, a head, a loss.

:class:`TaskModel` is a functional ``keras.Model`` (``keras.ops`` only, so it
trains on TensorFlow and JAX) over a kerasbert encoder. A subclass builds its
head layers and its functional graph, lists its constructor arguments in
:meth:`TaskModel.head_config` and writes its loss in :meth:`TaskModel.task_loss`;
this class adds the rest once: the regularization losses, the scaling for
``tf.distribute`` (:func:`kerasbert.training.distribution.scale_loss_for_distribution`),
``get_config``/``from_config`` (the encoder serialized inside), the
frozen pooler (no task here trains it) and, with ``layer_mix=True``
(``--freeze-encoder``), the head's input: a learned softmax-weighted mix of all
the encoder's hidden states (:class:`kerasbert.layers.layer_mix.LayerMix`) instead of
its last layer's output.
"""

import keras
from keras import ops

import kerasbert.models.encoder  # noqa: F401  (registers the encoder classes for loading saved models)
from kerasbert_apps.base.pipeline import ENCODER_INPUTS
from kerasbert.layers.activations import CompiledActivationsTraining
from kerasbert.layers.layer_mix import LayerMix
from kerasbert.training.distribution import logs_for_distribution
from kerasbert.training.distribution import scale_loss_for_distribution


def encoder_inputs():
    """The three int32 ``keras.Input`` of an encoder, by name."""
    return {name: keras.Input(shape=(None,), dtype="int32", name=name) for name in ENCODER_INPUTS}


class TaskModel(CompiledActivationsTraining, keras.Model):
    """Base class of the apps' models (see the module docstring).

    ``compute_loss`` returns ``task_loss(x, y, y_pred)`` plus the layers'
    regularization losses, scaled for the number of replicas, so plain
    ``model.fit(x, y)`` trains it on any backend. On TensorFlow its training
    step runs the encoder's GELU compiled (:mod:`kerasbert.layers.activations`).
    """

    @staticmethod
    def freeze_pooler(encoder):
        """Token-level heads give the pooler no gradient: freeze it (its
        weights stay as loaded, and weight decay does not shrink them)."""
        if getattr(encoder, "pooled_dense", None) is not None:
            encoder.pooled_dense.trainable = False

    def make_layer_mix(self, encoder, layer_mix, head_prefix):
        """With ``layer_mix``, the :class:`LayerMix` (named
        ``HEAD_PREFIX + "layer_mix"``, so it learns at the head's rate) that
        :meth:`encoded` feeds the head with; the encoder must output its
        hidden states (``output_hidden_states=True``). Call it first in the
        subclass's constructor."""
        self.layer_mix = bool(layer_mix)
        self.mix = None
        if self.layer_mix:
            if not getattr(encoder, "output_hidden_states", False):
                raise ValueError("layer_mix=True needs an encoder built with output_hidden_states=True")
            self.mix = LayerMix(encoder.num_layers + 1, name=head_prefix + "layer_mix")

    def encoded(self, encoder_outputs):
        """What the head reads from the encoder's outputs: the last layer's
        ``"sequence_output"``, or the mix of all ``"hidden_states"``."""
        if self.mix is None:
            return encoder_outputs["sequence_output"]
        return self.mix(list(encoder_outputs["hidden_states"]))

    #: Distillation (``kerasbert APP distill``): the weight of the soft loss
    #: (the student's outputs against the teacher's); the gold loss gets
    #: ``1 - soft_weight``. Set on the student before it is compiled.
    soft_weight = 0.5

    def task_loss(self, x, y, y_pred):
        raise NotImplementedError

    def distillation_loss(self, x, y, y_pred):
        """The loss of a student: ``y`` holds the gold labels, ``"teacher"``
        (the teacher's outputs for the row) and ``"gold"`` (1 on each token of
        a row with gold labels, 0 for unlabeled texts)."""
        raise NotImplementedError(f"{type(self).__name__} cannot be distilled")

    def compute_loss(self, x=None, y=None, y_pred=None, sample_weight=None, training=True):
        distilling = isinstance(y, dict) and "teacher" in y
        loss = self.distillation_loss(x, y, y_pred) if distilling else self.task_loss(x, y, y_pred)
        if self.losses:
            loss = loss + ops.sum(self.losses)
        return scale_loss_for_distribution(loss)

    def compute_metrics(self, x, y, y_pred, sample_weight=None):
        return logs_for_distribution(super().compute_metrics(x, y, y_pred, sample_weight=sample_weight))

    def _maybe_symbolic_build(self, iterator=None, data_batch=None):
        # Keras's TensorFlow trainer, under a tf.distribute strategy, takes the
        # first batch of the training iterator and averages it over the
        # replicas with strategy.reduce to build the model symbolically.
        # MultiWorkerMirroredStrategy cannot reduce a dict of inputs (it
        # fails), and with steps_per_epoch (multiworker) that batch would be
        # lost to training. Our models and their optimizers are built before
        # fit (kerasbert.training.fit.compile_for_training): nothing to build.
        if self.built and (self.optimizer is None or self.optimizer.built):
            return None
        return super()._maybe_symbolic_build(iterator=iterator, data_batch=data_batch)

    def head_config(self):
        """The constructor arguments other than ``encoder`` and ``name``."""
        raise NotImplementedError

    def get_config(self):
        return {"encoder": keras.saving.serialize_keras_object(self.encoder), **self.head_config(), "name": self.name}

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        config["encoder"] = keras.saving.deserialize_keras_object(config["encoder"])
        return cls(**config)
