"""kerasbert.models.fused_encoder: the serving graph's encoder computes what the Keras layers compute."""

import numpy as np
import pytest
import tensorflow as tf

from kerasbert.models.encoder import AlbertEncoder
from kerasbert.models.encoder import BertEncoder
from kerasbert.models.encoder import ElectraEncoder
from kerasbert.models.fused_encoder import fused_encoder
from kerasbert.models.fused_encoder import serving_graph

COMMON = dict(vocabulary_size=100, num_heads=2, intermediate_dim=48, max_sequence_length=32)
ENCODERS = {
    "bert_gelu_erf": lambda dtype: BertEncoder(num_layers=2, hidden_dim=32, hidden_act="gelu_erf", dtype=dtype, **COMMON),
    "bert_gelu_tanh_hidden_states": lambda dtype: BertEncoder(num_layers=2, hidden_dim=32, hidden_act="gelu_tanh",
                                                              output_hidden_states=True, dtype=dtype, **COMMON),
    "albert_shared_groups": lambda dtype: AlbertEncoder(num_layers=4, hidden_dim=32, embedding_dim=16, num_groups=2,
                                                        dtype=dtype, **COMMON),
    "albert_brightmart": lambda dtype: AlbertEncoder(num_layers=2, hidden_dim=32, embedding_dim=16,
                                                     factorization="tokens", dtype=dtype, **COMMON),
    "electra_relu": lambda dtype: ElectraEncoder(num_layers=2, hidden_dim=32, embedding_dim=16, hidden_act="relu",
                                                 dtype=dtype, **COMMON),
}
#: unit roundoff of each type (half its machine epsilon). The two paths round in different orders:
#: each token's vector (each pooled row) is within BOUND x depth unit roundoffs, relative L2.
UNIT_ROUNDOFF = {"float32": 2.0 ** -24, "bfloat16": 2.0 ** -9}
BOUND = 4


def _inputs():
    rng = np.random.default_rng(0)
    return {
        "token_ids": tf.constant(rng.integers(1, 100, [3, 9]), tf.int32),
        "segment_ids": tf.constant(rng.integers(0, 2, [3, 9]), tf.int32),
        "padding_mask": tf.constant([[1] * 9, [1] * 5 + [0] * 4, [1] * 2 + [0] * 7], tf.int32),
    }


def _randomized(encoder):
    """Non-trivial biases and LayerNorm parameters (initial ones are 0 and 1, which hide mistakes)."""
    rng = np.random.default_rng(1)
    for weight in encoder.weights:
        weight.assign(tf.cast(rng.normal(0, 0.3, weight.shape), weight.dtype))
    return encoder


def _real(x, mask):
    return np.asarray(tf.cast(x, tf.float32))[mask]


def _error(a, b, mask):
    """One relative L2 error of ``a`` against ``b`` per real token (per row for the pooled output)."""
    a, b = (np.asarray(tf.cast(t, tf.float32)) for t in (a, b))
    if a.ndim == 3:
        a, b = a[mask], b[mask]
    return np.linalg.norm(a - b, axis=-1) / np.linalg.norm(b, axis=-1)


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("name", sorted(ENCODERS))
def test_fused_encoder_computes_the_keras_layers(name, dtype):
    encoder = _randomized(ENCODERS[name](dtype))
    x = _inputs()
    mask = x["padding_mask"].numpy().astype(bool)
    expected = encoder(x, training=False)
    fused = fused_encoder(encoder)
    assert fused is not None
    got = tf.function(fused)(x)
    u, depth = UNIT_ROUNDOFF[dtype], encoder.num_layers
    errors = {"sequence": _error(got["sequence_output"], expected["sequence_output"], mask),
              "pooled": _error(got["pooled_output"], expected["pooled_output"], mask)}
    if encoder.output_hidden_states:
        assert len(got["hidden_states"]) == len(expected["hidden_states"]) == depth + 1
        for i, (a, b) in enumerate(zip(got["hidden_states"], expected["hidden_states"])):
            errors[f"hidden {i}"] = _error(a, b, mask)
    print(name, dtype, {key: f"{value.max() / u:.1f} u" for key, value in errors.items()})
    for key, value in errors.items():
        assert value.max() <= BOUND * depth * u, (key, value.max() / u)


def test_serving_graph_routes_the_encoder_call_and_nothing_else():
    """Inside serving_graph() a traced inference call runs the fused ops (its
    name scope is in the graph) with the same outputs; outside it, or when
    training, or eagerly, the Keras layers run."""
    encoder = _randomized(ENCODERS["bert_gelu_erf"]("float32"))
    x = _inputs()

    def traced(training):
        fn = tf.function(lambda inputs: encoder(inputs, training=training)["sequence_output"])
        return fn.get_concrete_function(x).graph

    def has_fused(graph):
        return any("fused_encoder" in op.name for op in graph.get_operations())

    assert not has_fused(traced(False))
    with serving_graph():
        assert has_fused(traced(False))
        assert not has_fused(traced(True))
        eager = encoder(x, training=False)["sequence_output"]  # eager: Keras layers
        graph = tf.function(lambda inputs: encoder(inputs, training=False)["sequence_output"])(x)
    mask = x["padding_mask"].numpy().astype(bool)
    assert np.abs(_real(graph, mask) - _real(eager, mask)).max() < 2e-5
    assert not has_fused(traced(False))  # the context is left as it was


def test_unsupported_encoders_fall_back_to_the_keras_layers():
    encoder = ENCODERS["bert_gelu_erf"]("float32")
    encoder.transformer_layers[0].normalize_first = True  # a pre-norm layer: not what the fused graph writes
    assert fused_encoder(encoder) is None


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_constant_weights_put_the_kernels_in_the_graph_and_keep_the_outputs(dtype):
    """Under constant_weights() (what exports trace under) every projection
    kernel is a constant of the graph, its value when traced, and no matmul
    reads a variable; outside it they are read from the variables."""
    from kerasbert.models.fused_encoder import constant_weights

    encoder = _randomized(ENCODERS["bert_gelu_erf"](dtype))
    x = _inputs()
    fused = fused_encoder(encoder)
    plain = tf.function(lambda inputs: fused(inputs)["sequence_output"]).get_concrete_function(x)
    with constant_weights():
        frozen = tf.function(lambda inputs: fused(inputs)["sequence_output"]).get_concrete_function(x)

    def matmul_weights(graph):  # what feeds each MatMul's kernel input (through reshapes)
        out = []
        for op in graph.get_operations():
            if op.type == "MatMul":
                source = op.inputs[1].op
                while source.type in ("Reshape", "Identity"):
                    source = source.inputs[0].op
                out.append(source.type)
        return out

    # 2 layers x 6 projections, and the pooler's Keras Dense (pruned when nothing reads it)
    assert sorted(matmul_weights(plain.graph)) == ["ReadVariableOp"] * 13
    assert sorted(matmul_weights(frozen.graph)) == ["Const"] * 12 + ["ReadVariableOp"]
    mask = x["padding_mask"].numpy().astype(bool)
    before = frozen(x)
    # the same function; oneDNN may pick another kernel for a constant (a few units in the last place)
    assert _error(before, plain(x), mask).max() <= BOUND * encoder.num_layers * UNIT_ROUNDOFF[dtype]
    before = _real(before, mask)
    kernel = encoder.transformer_layers[0]._feedforward_intermediate_dense.kernel
    kernel.assign(kernel * 2)  # a graph traced with constants keeps the values it was traced with
    assert np.array_equal(_real(frozen(x), mask), before) and not np.array_equal(_real(plain(x), mask), before)
