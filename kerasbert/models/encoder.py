"""BERT-family encoders: Keras 3 functional models built from keras-hub layers.

* :class:`BertEncoder` -- BERT (also RoBERTa-wwm-ext / RBT3);
* :class:`AlbertEncoder` -- ALBERT, Google's layout or brightmart's albert_zh;
* :class:`ElectraEncoder` -- an ELECTRA discriminator.

All three take the same inputs and give the same outputs, so the apps take any
of them. ALBERT and ELECTRA mirror keras-hub's ``AlbertBackbone`` and
``ElectraBackbone`` layer for layer (weights move between them with
``set_weights``; ``tests/test_families.py`` checks equal outputs), adding what
those cannot express: ``hidden_act`` and ``layer_norm_epsilon`` (both hard-code
tanh GELU and 1e-12, but a Hugging Face ``"gelu"`` ELECTRA uses the exact erf
GELU), ``output_hidden_states``, brightmart's token-only factorization, and, for
ELECTRA, no untrained pooler (``ElectraBackbone`` adds a randomly initialized
one; ELECTRA has none).

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

Use :func:`load_encoder` to get the right one, with pretrained weights, from a
checkpoint folder (official layout or Hugging Face layout).
"""

import keras
from keras_hub.layers import PositionEmbedding
from keras_hub.layers import ReversibleEmbedding
from keras_hub.layers import TransformerEncoder
from keras_hub.models import Backbone

from kerasbert.layers import activations
from kerasbert.models.fused_encoder import graph_call


@keras.saving.register_keras_serializable(package="kerasbert")
def gelu_tanh(x):
    """GELU, tanh approximation (google-research/bert ``gelu``; HF ``gelu_new``)."""
    return activations.gelu(x, approximate=True)


@keras.saving.register_keras_serializable(package="kerasbert")
def gelu_erf(x):
    """Exact GELU, ``x * Phi(x)`` (Hugging Face ``gelu``)."""
    return activations.gelu(x, approximate=False)


ACTIVATIONS = {
    "gelu_tanh": gelu_tanh,
    "gelu_erf": gelu_erf,
    "relu": "relu",
    "tanh": "tanh",
    "linear": "linear",
}


def _initializer():
    return keras.initializers.TruncatedNormal(stddev=0.02)


# === Shared construction (the three encoders differ only in embeddings and
# which transformer layer runs at which depth) ===


def _check_activation(hidden_act):
    if hidden_act not in ACTIVATIONS:
        raise ValueError(f"hidden_act must be one of {sorted(ACTIVATIONS)}, got {hidden_act!r}")


def _transformer_layer(name, num_heads, intermediate_dim, hidden_act, dropout, layer_norm_epsilon, dtype):
    return TransformerEncoder(
        num_heads=num_heads,
        intermediate_dim=intermediate_dim,
        activation=ACTIVATIONS[hidden_act],
        dropout=dropout,
        layer_norm_epsilon=layer_norm_epsilon,
        kernel_initializer=_initializer(),
        dtype=dtype,
        name=name,
    )


def _projection(hidden_dim, use_bias, dtype):
    return keras.layers.Dense(
        hidden_dim,
        use_bias=use_bias,
        kernel_initializer=_initializer(),
        dtype=dtype,
        name="embedding_projection",
    )


def _inputs():
    return {
        "token_ids": keras.Input(shape=(None,), dtype="int32", name="token_ids"),
        "segment_ids": keras.Input(shape=(None,), dtype="int32", name="segment_ids"),
        "padding_mask": keras.Input(shape=(None,), dtype="int32", name="padding_mask"),
    }


def _encode(x, schedule, padding_mask, pooled_dense, output_hidden_states):
    """Run the transformer layers in ``schedule`` order (a shared layer appears
    several times) and build the outputs dict."""
    hidden_states = [x]
    for transformer_layer in schedule:
        x = transformer_layer(x, padding_mask=padding_mask)
        hidden_states.append(x)
    first = x[:, 0, :]
    outputs = {
        "sequence_output": x,
        "pooled_output": pooled_dense(first) if pooled_dense is not None else first,
    }
    if output_hidden_states:
        outputs["hidden_states"] = hidden_states
    return outputs


def _albert_schedule(groups, num_layers):
    """The transformer layer each of ALBERT's ``num_layers`` calls runs (Google's routing: group ``i * len(groups) // num_layers``)."""
    calls_per_group = num_layers // len(groups)
    return [layer for group in groups for _ in range(calls_per_group) for layer in group]


def _pooler(hidden_dim, dtype):
    return keras.layers.Dense(
        hidden_dim, kernel_initializer=_initializer(), activation="tanh", dtype=dtype, name="pooled_dense"
    )


class _Encoder(Backbone):
    """What every family shares: the embeddings block, the config attributes
    and ``get_config``."""

    family = None
    _config_keys = (
        "vocabulary_size", "num_layers", "num_heads", "hidden_dim", "intermediate_dim",
        "hidden_act", "dropout", "max_sequence_length", "num_segments",
        "layer_norm_epsilon", "output_hidden_states",
    )

    def _build_embeddings(self, vocabulary_size, token_dim, other_dim, max_sequence_length,
                          num_segments, layer_norm_epsilon, dropout, dtype):
        """Token embeddings ``token_dim`` wide; position and segment embeddings and
        the LayerNorm ``other_dim`` wide (the two differ only for brightmart)."""
        self.token_embedding = ReversibleEmbedding(
            input_dim=vocabulary_size,
            output_dim=token_dim,
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
            output_dim=other_dim,
            embeddings_initializer=_initializer(),
            dtype=dtype,
            name="segment_embedding",
        )
        self.embeddings_add = keras.layers.Add(dtype=dtype, name="embeddings_add")
        self.embeddings_layer_norm = keras.layers.LayerNormalization(
            axis=-1, epsilon=layer_norm_epsilon, dtype=dtype, name="embeddings_layer_norm"
        )
        self.embeddings_dropout = keras.layers.Dropout(dropout, dtype=dtype, name="embeddings_dropout")

    def _embed(self, inputs, project_tokens=None, project_sum=None):
        """The embeddings block; ``project_tokens`` (brightmart) maps token
        embeddings to the hidden width before the sum, ``project_sum`` (ALBERT,
        ELECTRA) maps the normalized sum."""
        tokens = self.token_embedding(inputs["token_ids"])
        if project_tokens is not None:
            tokens = project_tokens(tokens)
        positions = self.position_embedding(tokens)
        segments = self.segment_embedding(inputs["segment_ids"])
        x = self.embeddings_add((tokens, positions, segments))
        x = self.embeddings_layer_norm(x)
        x = self.embeddings_dropout(x)
        if project_sum is not None:
            x = project_sum(x)
        return x

    @property
    def schedule(self):
        """The transformer layers in the order the encoder runs them (a shared
        ALBERT layer appears once per call)."""
        return list(self.transformer_layers)

    def embeddings(self, inputs):
        """The embeddings block's output for ``inputs``: what the first
        transformer layer reads (:mod:`kerasbert.models.fused_encoder` runs the
        layers from there)."""
        return self._embed(inputs)

    def call(self, inputs, training=None, mask=None):
        """The functional graph; inside a serving graph
        (:func:`kerasbert.models.fused_encoder.serving_graph`) the same function
        written with ops that oneDNN fuses."""
        fused = graph_call(self, inputs, training)
        if fused is not None:
            return fused
        return super().call(inputs, training=training, mask=mask)

    def _set_config(self, **config):
        for key, value in config.items():
            setattr(self, key, value)

    def get_config(self):
        config = super().get_config()
        config.update({key: getattr(self, key) for key in self._config_keys})
        return config


@keras.saving.register_keras_serializable(package="kerasbert")
class BertEncoder(_Encoder):
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

    family = "bert"

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
        _check_activation(hidden_act)
        # === Layers ===
        self._build_embeddings(vocabulary_size, hidden_dim, hidden_dim, max_sequence_length,
                               num_segments, layer_norm_epsilon, dropout, dtype)
        self.transformer_layers = [
            _transformer_layer(f"transformer_layer_{i}", num_heads, intermediate_dim, hidden_act,
                               dropout, layer_norm_epsilon, dtype)
            for i in range(num_layers)
        ]
        self.pooled_dense = _pooler(hidden_dim, dtype)

        # === Functional Model ===
        inputs = _inputs()
        x = self._embed(inputs)
        outputs = _encode(x, self.transformer_layers, inputs["padding_mask"], self.pooled_dense,
                          output_hidden_states)
        super().__init__(inputs=inputs, outputs=outputs, dtype=dtype, **kwargs)

        # === Config ===
        self._set_config(
            vocabulary_size=vocabulary_size, num_layers=num_layers, num_heads=num_heads,
            hidden_dim=hidden_dim, intermediate_dim=intermediate_dim, hidden_act=hidden_act,
            dropout=dropout, max_sequence_length=max_sequence_length, num_segments=num_segments,
            layer_norm_epsilon=layer_norm_epsilon, output_hidden_states=output_hidden_states,
        )


@keras.saving.register_keras_serializable(package="kerasbert")
class AlbertEncoder(_Encoder):
    """ALBERT encoder: factorized embeddings and layers shared across depth.

    Mirrors keras-hub's ``AlbertBackbone`` (same layers, names and weight
    order when ``factorization="embeddings"``), plus ``hidden_act``,
    ``layer_norm_epsilon``, ``output_hidden_states`` and brightmart's layout.

    Args:
        vocabulary_size, num_layers, num_heads, hidden_dim, intermediate_dim,
        hidden_act, dropout, max_sequence_length, num_segments,
        layer_norm_epsilon, output_hidden_states, dtype: as for
            :class:`BertEncoder`. ``num_layers`` counts layer *calls*.
        embedding_dim: width of the token embeddings (ALBERT's ``E``).
        num_groups: distinct groups of layers; call ``i`` of ``num_layers``
            uses group ``i * num_groups // num_layers`` (Google's routing).
        num_inner_repetitions: distinct layers inside a group, run in turn
            (Google's ``inner_group_num``).
        factorization: ``"embeddings"`` (Google's ALBERT and Hugging Face
            ``AlbertModel``: token, position and segment embeddings are
            ``embedding_dim`` wide, normalized, then projected to
            ``hidden_dim``), or ``"tokens"`` (brightmart's albert_zh: only
            token embeddings are ``embedding_dim`` wide, projected without bias
            by ``word_embeddings_2`` before the sum; positions, segments and
            the LayerNorm are ``hidden_dim`` wide).
    """

    _config_keys = _Encoder._config_keys + (
        "embedding_dim", "num_groups", "num_inner_repetitions", "factorization",
    )

    @property
    def family(self):
        return "albert_brightmart" if self.factorization == "tokens" else "albert"

    @property
    def schedule(self):
        return _albert_schedule(self.transformer_layers, self.num_layers)

    def embeddings(self, inputs):
        if self.factorization == "tokens":
            return self._embed(inputs, project_tokens=self.embeddings_projection)
        return self._embed(inputs, project_sum=self.embeddings_projection)

    def __init__(
        self,
        vocabulary_size,
        num_layers,
        num_heads,
        embedding_dim,
        hidden_dim,
        intermediate_dim,
        num_groups=1,
        num_inner_repetitions=1,
        factorization="embeddings",
        hidden_act="gelu_tanh",
        dropout=0.0,
        max_sequence_length=512,
        num_segments=2,
        layer_norm_epsilon=1e-12,
        output_hidden_states=False,
        dtype=None,
        **kwargs,
    ):
        _check_activation(hidden_act)
        if num_layers % num_groups:
            raise ValueError(f"num_layers ({num_layers}) must be divisible by num_groups ({num_groups})")
        if factorization not in ("embeddings", "tokens"):
            raise ValueError(f"factorization must be 'embeddings' or 'tokens', got {factorization!r}")
        brightmart = factorization == "tokens"
        # === Layers ===
        self._build_embeddings(vocabulary_size, embedding_dim, hidden_dim if brightmart else embedding_dim,
                               max_sequence_length, num_segments, layer_norm_epsilon, dropout, dtype)
        self.embeddings_projection = _projection(hidden_dim, use_bias=not brightmart, dtype=dtype)
        self.transformer_layers = [
            [
                _transformer_layer(f"group_{g}_inner_layer_{j}", num_heads, intermediate_dim, hidden_act,
                                   dropout, layer_norm_epsilon, dtype)
                for j in range(num_inner_repetitions)
            ]
            for g in range(num_groups)
        ]
        self.pooled_dense = _pooler(hidden_dim, dtype)

        # === Functional Model ===
        inputs = _inputs()
        if brightmart:
            x = self._embed(inputs, project_tokens=self.embeddings_projection)
        else:
            x = self._embed(inputs, project_sum=self.embeddings_projection)
        schedule = _albert_schedule(self.transformer_layers, num_layers)
        outputs = _encode(x, schedule, inputs["padding_mask"], self.pooled_dense, output_hidden_states)
        super().__init__(inputs=inputs, outputs=outputs, dtype=dtype, **kwargs)

        # === Config ===
        self._set_config(
            vocabulary_size=vocabulary_size, num_layers=num_layers, num_heads=num_heads,
            embedding_dim=embedding_dim, hidden_dim=hidden_dim, intermediate_dim=intermediate_dim,
            num_groups=num_groups, num_inner_repetitions=num_inner_repetitions,
            factorization=factorization, hidden_act=hidden_act, dropout=dropout,
            max_sequence_length=max_sequence_length, num_segments=num_segments,
            layer_norm_epsilon=layer_norm_epsilon, output_hidden_states=output_hidden_states,
        )


@keras.saving.register_keras_serializable(package="kerasbert")
class ElectraEncoder(_Encoder):
    """ELECTRA discriminator encoder.

    Mirrors keras-hub's ``ElectraBackbone`` (same layers, names and order)
    without its pooler: ELECTRA was trained with none, so ``"pooled_output"``
    here is the ``[CLS]`` hidden state itself, not a randomly initialized
    ``tanh`` layer of it.

    Args: as :class:`BertEncoder`, plus ``embedding_dim`` (the embedding width;
        when it differs from ``hidden_dim`` the normalized embeddings are
        projected, Google's ``embeddings_project``).
    """

    family = "electra"
    _config_keys = _Encoder._config_keys + ("embedding_dim",)

    def embeddings(self, inputs):
        return self._embed(inputs, project_sum=self.embeddings_projection)

    def __init__(
        self,
        vocabulary_size,
        num_layers,
        num_heads,
        hidden_dim,
        embedding_dim,
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
        _check_activation(hidden_act)
        # === Layers ===
        self._build_embeddings(vocabulary_size, embedding_dim, embedding_dim, max_sequence_length,
                               num_segments, layer_norm_epsilon, dropout, dtype)
        self.embeddings_projection = (
            _projection(hidden_dim, use_bias=True, dtype=dtype) if embedding_dim != hidden_dim else None
        )
        self.transformer_layers = [
            _transformer_layer(f"transformer_layer_{i}", num_heads, intermediate_dim, hidden_act,
                               dropout, layer_norm_epsilon, dtype)
            for i in range(num_layers)
        ]

        # === Functional Model ===
        inputs = _inputs()
        x = self._embed(inputs, project_sum=self.embeddings_projection)
        outputs = _encode(x, self.transformer_layers, inputs["padding_mask"], None, output_hidden_states)
        super().__init__(inputs=inputs, outputs=outputs, dtype=dtype, **kwargs)

        # === Config ===
        self._set_config(
            vocabulary_size=vocabulary_size, num_layers=num_layers, num_heads=num_heads,
            hidden_dim=hidden_dim, embedding_dim=embedding_dim, intermediate_dim=intermediate_dim,
            hidden_act=hidden_act, dropout=dropout, max_sequence_length=max_sequence_length,
            num_segments=num_segments, layer_norm_epsilon=layer_norm_epsilon,
            output_hidden_states=output_hidden_states,
        )
