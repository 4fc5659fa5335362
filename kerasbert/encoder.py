"""The BERT encoder: a Keras 3 functional model built from keras-hub layers.

``BertEncoder`` is keras-hub's ``BertBackbone`` with two things that backbone
cannot express, and nothing else changed:

* ``hidden_act``: ``BertBackbone`` hard-codes the tanh-approximated GELU. That is
  right for Google's checkpoints, but a Hugging Face ``"gelu"`` model uses the
  exact (erf) GELU, and on the shared MiniLM checkpoint the two differ by 4e-3:
  reproducing HF models exactly needs the choice.
* ``output_hidden_states``: every layer's output (embeddings first), for
  feature-based use; ``BertBackbone`` returns only the last layer.

The layers, their names and therefore the variable layout are exactly
``BertBackbone``'s (same keras-hub ``ReversibleEmbedding``, ``PositionEmbedding``,
``TransformerEncoder``), so weights move between the two with ``set_weights``
and speed is the same (``bench/encoder_throughput.py`` measures it).

Inputs: ``{"token_ids", "segment_ids", "padding_mask"}`` (int32, [batch, len]).
Outputs: ``{"sequence_output": [batch, len, hidden], "pooled_output":
[batch, hidden]}`` plus ``"hidden_states"`` (a list of ``num_layers + 1``
tensors) when ``output_hidden_states=True``.

Use :func:`load_encoder` to get one with pretrained weights from a checkpoint
folder (official Google layout or Hugging Face layout).
"""

import keras
from keras_hub.layers import PositionEmbedding
from keras_hub.layers import ReversibleEmbedding
from keras_hub.layers import TransformerEncoder
from keras_hub.models import Backbone


@keras.saving.register_keras_serializable(package="kerasbert")
def gelu_tanh(x):
    """GELU, tanh approximation (google-research/bert ``gelu``; HF ``gelu_new``)."""
    return keras.activations.gelu(x, approximate=True)


@keras.saving.register_keras_serializable(package="kerasbert")
def gelu_erf(x):
    """Exact GELU, ``x * Phi(x)`` (Hugging Face ``gelu``)."""
    return keras.activations.gelu(x, approximate=False)


ACTIVATIONS = {
    "gelu_tanh": gelu_tanh,
    "gelu_erf": gelu_erf,
    "relu": "relu",
    "tanh": "tanh",
    "linear": "linear",
}


def _initializer():
    return keras.initializers.TruncatedNormal(stddev=0.02)


@keras.saving.register_keras_serializable(package="kerasbert")
class BertEncoder(Backbone):
    """BERT encoder (embeddings, transformer layers, pooler).

    Args:
        vocabulary_size: number of token ids.
        num_layers: transformer layers.
        num_heads: attention heads per layer.
        hidden_dim: hidden size.
        intermediate_dim: feed-forward inner size.
        hidden_act: ``"gelu_tanh"`` (official BERT), ``"gelu_erf"`` (HF
            ``"gelu"``), ``"relu"``, ``"tanh"`` or ``"linear"``.
        dropout: dropout rate for embeddings, attention and feed-forward.
        max_sequence_length: number of position embeddings.
        num_segments: number of segment (token type) ids.
        layer_norm_epsilon: LayerNorm epsilon (BERT: 1e-12).
        output_hidden_states: also return ``"hidden_states"``, the embeddings
            output followed by each transformer layer's output.
        dtype: a Keras dtype policy (e.g. ``"mixed_bfloat16"``); the global
            policy when None.
    """

    def __init__(
        self,
        vocabulary_size,
        num_layers,
        num_heads,
        hidden_dim,
        intermediate_dim,
        hidden_act="gelu_tanh",
        dropout=0.1,
        max_sequence_length=512,
        num_segments=2,
        layer_norm_epsilon=1e-12,
        output_hidden_states=False,
        dtype=None,
        **kwargs,
    ):
        if hidden_act not in ACTIVATIONS:
            raise ValueError(
                f"hidden_act must be one of {sorted(ACTIVATIONS)}, got {hidden_act!r}"
            )
        # === Layers ===
        self.token_embedding = ReversibleEmbedding(
            input_dim=vocabulary_size,
            output_dim=hidden_dim,
            embeddings_initializer=_initializer(),
            dtype=dtype,
            name="token_embedding",
        )
        self.position_embedding = PositionEmbedding(
            initializer=_initializer(),
            sequence_length=max_sequence_length,
            dtype=dtype,
            name="position_embedding",
        )
        self.segment_embedding = keras.layers.Embedding(
            input_dim=num_segments,
            output_dim=hidden_dim,
            embeddings_initializer=_initializer(),
            dtype=dtype,
            name="segment_embedding",
        )
        self.embeddings_add = keras.layers.Add(dtype=dtype, name="embeddings_add")
        self.embeddings_layer_norm = keras.layers.LayerNormalization(
            axis=-1,
            epsilon=layer_norm_epsilon,
            dtype=dtype,
            name="embeddings_layer_norm",
        )
        self.embeddings_dropout = keras.layers.Dropout(
            dropout, dtype=dtype, name="embeddings_dropout"
        )
        self.transformer_layers = [
            TransformerEncoder(
                num_heads=num_heads,
                intermediate_dim=intermediate_dim,
                activation=ACTIVATIONS[hidden_act],
                dropout=dropout,
                layer_norm_epsilon=layer_norm_epsilon,
                kernel_initializer=_initializer(),
                dtype=dtype,
                name=f"transformer_layer_{i}",
            )
            for i in range(num_layers)
        ]
        self.pooled_dense = keras.layers.Dense(
            hidden_dim,
            kernel_initializer=_initializer(),
            activation="tanh",
            dtype=dtype,
            name="pooled_dense",
        )

        # === Functional Model ===
        token_ids = keras.Input(shape=(None,), dtype="int32", name="token_ids")
        segment_ids = keras.Input(shape=(None,), dtype="int32", name="segment_ids")
        padding_mask = keras.Input(shape=(None,), dtype="int32", name="padding_mask")
        tokens = self.token_embedding(token_ids)
        positions = self.position_embedding(tokens)
        segments = self.segment_embedding(segment_ids)
        x = self.embeddings_add((tokens, positions, segments))
        x = self.embeddings_layer_norm(x)
        x = self.embeddings_dropout(x)
        hidden_states = [x]
        for transformer_layer in self.transformer_layers:
            x = transformer_layer(x, padding_mask=padding_mask)
            hidden_states.append(x)
        outputs = {
            "sequence_output": x,
            "pooled_output": self.pooled_dense(x[:, 0, :]),
        }
        if output_hidden_states:
            outputs["hidden_states"] = hidden_states
        super().__init__(
            inputs={
                "token_ids": token_ids,
                "segment_ids": segment_ids,
                "padding_mask": padding_mask,
            },
            outputs=outputs,
            dtype=dtype,
            **kwargs,
        )

        # === Config ===
        self.vocabulary_size = vocabulary_size
        self.num_layers = num_layers
        self.num_heads = num_heads
        self.hidden_dim = hidden_dim
        self.intermediate_dim = intermediate_dim
        self.hidden_act = hidden_act
        self.dropout = dropout
        self.max_sequence_length = max_sequence_length
        self.num_segments = num_segments
        self.layer_norm_epsilon = layer_norm_epsilon
        self.output_hidden_states = output_hidden_states

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "vocabulary_size": self.vocabulary_size,
                "num_layers": self.num_layers,
                "num_heads": self.num_heads,
                "hidden_dim": self.hidden_dim,
                "intermediate_dim": self.intermediate_dim,
                "hidden_act": self.hidden_act,
                "dropout": self.dropout,
                "max_sequence_length": self.max_sequence_length,
                "num_segments": self.num_segments,
                "layer_norm_epsilon": self.layer_norm_epsilon,
                "output_hidden_states": self.output_hidden_states,
            }
        )
        return config
