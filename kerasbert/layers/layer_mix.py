"""Scalar mix of an encoder's layers (ELMo; BERT's feature-based approach).

:class:`LayerMix` takes the encoder's hidden states (its
``"hidden_states"`` output with ``output_hidden_states=True``: the embeddings
output, then each transformer layer's) and returns
``gamma * sum_k softmax(w)_k * h_k``, one learned scalar ``w_k`` per layer
(starting at 0: the plain mean) and one learned scale ``gamma`` (starting at 1).
With a frozen encoder (``--freeze-encoder``) this is what the head learns
from: which layers' features to use. ``keras.ops`` only (any backend).
"""

import keras
from keras import ops


@keras.saving.register_keras_serializable(package="kerasbert")
class LayerMix(keras.layers.Layer):
    """Softmax-weighted sum of same-shaped tensors, times a learned scale.

    ``call(hidden_states)``: a list of ``num_inputs`` tensors of one shape
    (e.g. ``[batch, len, H]``); returns one tensor of that shape. The weights
    are float32; the sum is computed in the layer's compute dtype.

    Args:
        num_inputs: how many tensors are mixed; None: taken from the list the
            layer is first built on.
    """

    def __init__(self, num_inputs=None, **kwargs):
        super().__init__(**kwargs)
        self.num_inputs = None if num_inputs is None else int(num_inputs)

    def build(self, input_shape):
        count = len(input_shape)
        if self.num_inputs is None:
            self.num_inputs = count
        elif self.num_inputs != count:
            raise ValueError(f"LayerMix was made for {self.num_inputs} inputs, got {count}")
        self.mix_weights = self.add_weight(shape=(self.num_inputs,), initializer="zeros", name="mix_weights")
        self.gamma = self.add_weight(shape=(), initializer="ones", name="gamma")

    def mix(self):
        """The layer weights ``softmax(w)`` (float32, they sum to 1)."""
        return ops.softmax(ops.cast(self.mix_weights, "float32"))

    def call(self, hidden_states):
        weights = ops.cast(self.mix(), self.compute_dtype)
        stacked = ops.stack([ops.cast(h, self.compute_dtype) for h in hidden_states], axis=0)
        weights = ops.reshape(weights, (-1,) + (1,) * (len(stacked.shape) - 1))
        return ops.cast(self.gamma, self.compute_dtype) * ops.sum(stacked * weights, axis=0)

    def compute_output_shape(self, input_shape):
        return tuple(input_shape[0])

    def get_config(self):
        return {**super().get_config(), "num_inputs": self.num_inputs}
