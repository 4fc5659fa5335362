"""BertEncoder: the contract (inputs/outputs), dtype policies, saving, backends."""

import json
import os
import subprocess
import sys

import keras
import keras_hub
import numpy as np
import pytest

import kerasbert
from kerasbert.models.encoder import BertEncoder
from conftest import REPO_ROOT
from conftest import require_shared


def _inputs(batch=2, length=7, vocab=15, seed=0):
    rng = np.random.default_rng(seed)
    mask = np.ones((batch, length), np.int32)
    mask[1, length - 2:] = 0
    return {
        "token_ids": rng.integers(0, vocab, (batch, length)).astype(np.int32),
        "segment_ids": np.zeros((batch, length), np.int32),
        "padding_mask": mask,
    }


@pytest.fixture(scope="module")
def toy_dir():
    return require_shared("data", "models", "keras_bert_test_checkpoint")


def test_same_variables_and_outputs_as_keras_hub_bert_backbone():
    kwargs = dict(vocabulary_size=15, num_layers=2, num_heads=2, hidden_dim=8, intermediate_dim=16, max_sequence_length=16)
    ours = BertEncoder(**kwargs)
    theirs = keras_hub.models.BertBackbone(**kwargs)
    assert [v.path for v in ours.weights] == [v.path for v in theirs.weights]
    ours.set_weights(theirs.get_weights())
    x = _inputs()
    a, b = ours.predict(x, verbose=0), theirs.predict(x, verbose=0)
    np.testing.assert_allclose(a["sequence_output"], b["sequence_output"], atol=1e-6)
    np.testing.assert_allclose(a["pooled_output"], b["pooled_output"], atol=1e-6)


def test_hidden_states_on_request(toy_dir):
    encoder = kerasbert.load_encoder(toy_dir, output_hidden_states=True)
    out = encoder.predict(_inputs(), verbose=0)
    assert len(out["hidden_states"]) == encoder.num_layers + 1
    np.testing.assert_array_equal(out["hidden_states"][-1], out["sequence_output"])
    assert "hidden_states" not in kerasbert.load_encoder(toy_dir).output


def test_frozen_and_trainable(toy_dir):
    assert len(kerasbert.load_encoder(toy_dir, trainable=False).trainable_weights) == 0
    assert len(kerasbert.load_encoder(toy_dir).trainable_weights) == 39  # 2 layers x 16 + 7


def test_usable_as_a_layer_inside_a_functional_model_and_trains(toy_dir, tmp_path):
    encoder = kerasbert.load_encoder(toy_dir)
    inputs = {k: keras.Input(shape=(None,), dtype="int32", name=k) for k in encoder.input}
    hidden = encoder(inputs)["sequence_output"]
    logits = keras.layers.Dense(3, name="tagger")(hidden)
    model = keras.Model(inputs, logits)
    model.compile(optimizer=keras.optimizers.Adam(1e-2), loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    x = _inputs(batch=8)
    y = x["token_ids"] % 3
    before = encoder.get_layer("token_embedding").embeddings.numpy().copy()
    history = model.fit(x, y, epochs=3, verbose=0)
    assert history.history["loss"][-1] < history.history["loss"][0]
    assert not np.allclose(before, encoder.get_layer("token_embedding").embeddings.numpy())
    # .keras round trip of the whole model, without safe_mode=False.
    path = tmp_path / "tagger.keras"
    model.save(path)
    loaded = keras.saving.load_model(path)
    np.testing.assert_allclose(loaded.predict(x, verbose=0), model.predict(x, verbose=0), atol=1e-6)


def test_keras_round_trip_of_the_encoder(minilm_dir, tmp_path):
    encoder = kerasbert.load_encoder(minilm_dir, output_hidden_states=True)
    path = tmp_path / "encoder.keras"
    encoder.save(path)
    loaded = keras.saving.load_model(path)
    assert isinstance(loaded, BertEncoder)
    assert loaded.get_config() == encoder.get_config()
    x = _inputs(vocab=30522, length=12)
    a, b = encoder.predict(x, verbose=0), loaded.predict(x, verbose=0)
    np.testing.assert_array_equal(a["sequence_output"], b["sequence_output"])
    assert len(b["hidden_states"]) == 7


#: unit roundoff of each reduced-precision type (half its machine epsilon: 8 and 11 bits of mantissa)
UNIT_ROUNDOFF = {"bfloat16": 2.0 ** -9, "float16": 2.0 ** -12}


@pytest.mark.parametrize("policy", ["mixed_bfloat16", "mixed_float16"])
def test_dtype_policies(minilm_dir, policy):
    """Each token's vector within 4 x depth unit roundoffs (relative L2) of
    the float32 reference, and the median token at least 2 of them off: the
    whole stack computed in the reduced type, not float32 rounded at the end
    (under one unit roundoff). A 1% noise on the weights (bfloat16), 0.2%
    (float16), breaks the first bound."""
    reference = np.load(minilm_dir / "reference_outputs.npz")
    tokenizer = kerasbert.load_tokenizer(minilm_dir)
    batch = tokenizer(list(reference["sentences"]))
    encoder = kerasbert.load_encoder(minilm_dir, dtype=policy)
    assert encoder.dtype_policy.name == policy
    layers = [layer for layer in encoder._flatten_layers() if not isinstance(layer, keras.layers.InputLayer)]
    assert {layer.dtype_policy.name for layer in layers} == {policy}  # no layer left in float32
    assert all(v.dtype == "float32" for v in encoder.weights)  # variables stay float32
    out = encoder.predict(batch.inputs, verbose=0)
    compute = policy.split("_")[1]
    assert str(out["sequence_output"].dtype) == compute
    mask = batch.padding_mask.astype(bool)
    got = out["sequence_output"].astype(np.float32)[mask]
    want = reference["sequence_output_tanh_gelu"][:, :mask.shape[1]][mask]
    error = np.linalg.norm(got - want, axis=-1) / np.linalg.norm(want, axis=-1)  # one per token
    u = UNIT_ROUNDOFF[compute]
    print(f"{policy}: token relative error median {np.median(error) / u:.1f} u, max {error.max() / u:.1f} u")
    assert error.max() <= 4 * encoder.num_layers * u
    assert np.median(error) >= 2 * u


def test_global_policy_is_respected(toy_dir):
    keras.mixed_precision.set_global_policy("mixed_bfloat16")
    try:
        encoder = kerasbert.load_encoder(toy_dir)
        assert encoder.dtype_policy.name == "mixed_bfloat16"
    finally:
        keras.mixed_precision.set_global_policy("float32")


def test_jax_backend_reproduces_the_reference(minilm_dir):
    """The encoder is keras.ops only: the same parity on KERAS_BACKEND=jax."""
    script = f"""
import json, numpy as np, keras, kerasbert
assert keras.backend.backend() == "jax"
d = {str(minilm_dir)!r}
r = np.load(d + "/reference_outputs.npz")
batch = kerasbert.load_tokenizer(d)(list(r["sentences"]))
out = kerasbert.load_encoder(d)(batch.inputs)
seq = np.asarray(out["sequence_output"]); m = batch.padding_mask.astype(bool)
err = np.abs(seq - r["sequence_output_tanh_gelu"][:, :seq.shape[1]])[m].max()
perr = np.abs(np.asarray(out["pooled_output"]) - r["pooled_output_tanh_gelu"]).max()
print(json.dumps({{"seq": float(err), "pooled": float(perr)}}))
"""
    env = dict(os.environ, KERAS_BACKEND="jax", TF_CPP_MIN_LOG_LEVEL="3", JAX_PLATFORMS="cpu")
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, cwd=REPO_ROOT)
    assert result.returncode == 0, result.stderr[-3000:]
    errors = json.loads(result.stdout.strip().splitlines()[-1])
    print("JAX backend parity:", errors)
    assert errors["seq"] < 2e-4 and errors["pooled"] < 2e-4
