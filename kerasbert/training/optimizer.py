"""The optimizer of every training run: AdamW with a learning rate per group
of variables, and its schedule.

* :class:`GroupedAdamW` -- AdamW with a learning-rate multiplier per group of
  variables (e.g. a head that learns 100x faster than the encoder), weight
  decay off for biases and LayerNorm;
* :class:`WarmupLinearDecay` -- linear warm-up then linear decay to zero;
* :func:`layer_lr_multipliers` -- layer-wise learning-rate decay
  (``--layer-lr-decay``);
* :func:`make_optimizer` -- the two together, as a run compiles them
  (:func:`kerasbert.training.fit.compile_for_training`).

Both classes are registered Keras serializables (``kerasbert>GroupedAdamW``,
``kerasbert>WarmupLinearDecay``): the names are kept whatever module holds them.
"""

import keras
from keras import ops

from kerasbert.errors import KerasbertError


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
            nothing use 1. Weight decay is not scaled: as in Keras's
            AdamW, it uses the scheduled learning rate.
        **kwargs: ``keras.optimizers.AdamW`` arguments.

    Biases, LayerNorm ``gamma``/``beta`` and the CRF transitions are excluded
    from weight decay, as in BERT's own optimizer. On the TensorFlow backend
    the Adam update of each variable is TensorFlow's fused kernel
    (:meth:`_fused_update`); on JAX it is Keras's own.
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
        index = self._get_variable_index(variable)
        factor = self._lr_factors[index]
        if factor != 1.0:
            learning_rate = ops.multiply(learning_rate, factor)
        if keras.backend.backend() == "tensorflow" and not self.amsgrad:
            return self._fused_update(gradient, variable, learning_rate, index)
        return super().update_step(gradient, variable, learning_rate)

    def _fused_update(self, gradient, variable, learning_rate, index):
        """Keras's Adam update (``keras.optimizers.Adam.update_step``: the
        same moments, bias correction and epsilon) as TensorFlow's fused
        kernel, ``ResourceApplyAdam``: one op per variable that updates the
        moments and the variable in place. Keras writes it as a dozen
        elementwise ops, each a pass over the variable with a temporary; for
        the word embeddings (a dense gradient of the whole table every step)
        that was the optimizer's largest share of a step."""
        import tensorflow as tf

        dtype = variable.dtype
        step = tf.cast(self.iterations + 1, dtype)
        gradient = tf.convert_to_tensor(gradient)
        return tf.raw_ops.ResourceApplyAdam(
            var=variable.handle, m=self._momentums[index].handle, v=self._velocities[index].handle,
            beta1_power=tf.pow(tf.cast(self.beta_1, dtype), step), beta2_power=tf.pow(tf.cast(self.beta_2, dtype), step),
            lr=tf.cast(learning_rate, dtype), beta1=tf.cast(self.beta_1, dtype), beta2=tf.cast(self.beta_2, dtype),
            epsilon=tf.cast(self.epsilon, dtype), grad=tf.cast(gradient, dtype), use_locking=False)

    def get_config(self):
        config = super().get_config()
        config["lr_multipliers"] = self.lr_multipliers
        return config


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
