"""Checkpoint families beyond BERT: ALBERT (Google and brightmart layouts),
ELECTRA, RoBERTa-wwm-ext / RBT3, each from official and Hugging Face layouts.

* Mapping: synthetic checkpoints with exactly the variable names and shapes of
  the real ALBERT-tiny-zh ``*_INDEX_ONLY`` folders in ``../shared`` (random
  values), and an ELECTRA checkpoint with Google's names; every value must land
  in the right Keras weight and round-trip back bit for bit.
* Parity (marker ``hf``): the same random weights through Hugging Face
  ``AlbertModel`` / ``ElectraModel`` / ``BertModel`` (PyTorch, the ``bench``
  extra, installed in CI) and through kerasbert, to 2e-4.
* keras-hub: ``AlbertEncoder`` / ``ElectraEncoder`` compute exactly what
  ``AlbertBackbone`` / ``ElectraBackbone`` compute on the same weights.
"""

import json
import os
import shutil
import zipfile

import keras
import numpy as np
import pytest

import kerasbert
from kerasbert.checkpoints.checkpoint import CheckpointFolder
from kerasbert.checkpoints.checkpoint import official_name_from_hf
from kerasbert.cli import main
from kerasbert.errors import CheckpointError
from kerasbert.checkpoints.weight_map import weight_map
from conftest import require_shared


def save_v2(prefix, variables):
    """Write a TF name-based checkpoint with exactly these names."""
    import tensorflow as tf

    names = sorted(variables)
    tf.raw_ops.SaveV2(
        prefix=str(prefix), tensor_names=names, shape_and_slices=[""] * len(names),
        tensors=[tf.constant(variables[n]) for n in names],
    )
    (prefix.parent / "checkpoint").write_text(f'model_checkpoint_path: "{prefix.name}"\n', encoding="utf-8")


def random_like(shapes, seed=0):
    rng = np.random.default_rng(seed)
    out = {}
    for name, (shape, dtype) in shapes.items():
        if dtype == np.int64:
            out[name] = np.array(1234, dtype=np.int64)
        else:
            out[name] = rng.normal(0.0, 0.2, size=shape).astype(np.float32)
    return out


def inputs_for(vocab_size, batch=2, length=9, seed=1):
    rng = np.random.default_rng(seed)
    token_ids = rng.integers(1, vocab_size, size=(batch, length)).astype("int32")
    padding_mask = np.ones((batch, length), "int32")
    padding_mask[1, 6:] = 0
    token_ids[1, 6:] = 0
    segment_ids = np.zeros((batch, length), "int32")
    segment_ids[:, 4:] = 1
    return {"token_ids": token_ids, "segment_ids": segment_ids, "padding_mask": padding_mask}


def keras_values(encoder):
    return {v.path: np.asarray(v.numpy()) for v in encoder.weights}


def assert_every_value_landed(encoder, folder_or_values, config):
    """Each mapped checkpoint variable equals its Keras weight (reshaped)."""
    values = keras_values(encoder)
    mapping = weight_map(config)
    for path, (name, shape) in mapping.items():
        stored = folder_or_values[name] if isinstance(folder_or_values, dict) else folder_or_values.read(name)
        np.testing.assert_array_equal(values[path].reshape(shape), stored, err_msg=f"{path} <- {name}")
    return mapping


# =============================================================================
# ALBERT: the real variable layouts of albert_tiny_zh (both releases)
# =============================================================================

ALBERT_FOLDERS = {
    "albert_tiny_zh_google_INDEX_ONLY": ("albert", "albert_config_tiny_g.json"),
    "albert_tiny_zh_brightmart_INDEX_ONLY": ("albert_brightmart", "albert_config_tiny.json"),
}


def synthetic_from_index(index_dir, out_dir, seed=0):
    """``out_dir``: the config and vocab of ``index_dir`` plus a checkpoint with
    exactly its variable names, shapes and dtypes (optimizer slots and
    ``global_step`` included), random values. Returns the values."""
    import tensorflow as tf

    reader = tf.train.load_checkpoint(str(index_dir / "albert_model.ckpt"))
    dtypes = reader.get_variable_to_dtype_map()
    shapes = {n: (tuple(s), dtypes[n].as_numpy_dtype) for n, s in reader.get_variable_to_shape_map().items()}
    values = random_like(shapes, seed)
    out_dir.mkdir(parents=True, exist_ok=True)
    for file in index_dir.iterdir():
        if file.suffix == ".json" or file.name == "vocab.txt":
            shutil.copy(file, out_dir / file.name)
    save_v2(out_dir / "albert_model.ckpt", values)
    return values


@pytest.fixture(scope="module", params=sorted(ALBERT_FOLDERS))
def albert_tiny(request, tmp_path_factory):
    index_dir = require_shared("data", "models", request.param)
    out = tmp_path_factory.mktemp(request.param.replace("_INDEX_ONLY", ""))
    values = synthetic_from_index(index_dir, out)
    return request.param, index_dir, out, values


def test_albert_index_only_names_are_all_mapped(albert_tiny):
    """Mapping test on the real index alone (no values read)."""
    from kerasbert.checkpoints.weight_map import check_mapping

    name, index_dir, _, _ = albert_tiny
    family, config_name = ALBERT_FOLDERS[name]
    folder = CheckpointFolder(index_dir)
    assert folder.config.family == family
    assert folder.config_path.name == config_name
    assert (folder.config.hidden_size, folder.config.embedding_size) == (312, 128)
    report = check_mapping(folder, weight_map(folder.config))
    assert report.ok, report.problems()
    model_vars = [n for n in folder.shapes if not n.startswith("cls/")]
    assert sorted(n for _, n, _, _ in report.assigned) == sorted(model_vars)
    info = kerasbert.inspect_checkpoint(index_dir)
    assert info["family"] == family and len(info["mapping"]) == len(model_vars)
    assert info["problems"] == [f"{index_dir / 'albert_model.ckpt'}.data-00000-of-00001: missing (the .index file "
                                f"is here but no albert_model.ckpt.data-* file; only names and shapes can be read)"]


def test_albert_values_land_and_round_trip(albert_tiny, tmp_path):
    name, _, folder_dir, values = albert_tiny
    family, _ = ALBERT_FOLDERS[name]
    encoder = kerasbert.load_encoder(folder_dir)
    assert isinstance(encoder, kerasbert.AlbertEncoder) and encoder.family == family
    config = kerasbert.open_checkpoint(folder_dir).config
    mapping = assert_every_value_landed(encoder, values, config)
    # Every non-head, non-slot variable of the real layout was used, once.
    wanted = {n for n in values if not n.startswith("cls/") and "adam_" not in n and n != "global_step"}
    assert {name for name, _ in mapping.values()} == wanted
    # One shared layer, called num_hidden_layers times.
    assert len(encoder.transformer_layers) == 1 and len(encoder.transformer_layers[0]) == 1
    hidden = kerasbert.load_encoder(folder_dir, output_hidden_states=True)
    outputs = hidden(inputs_for(config.vocab_size))
    assert len(outputs["hidden_states"]) == config.num_layers + 1
    assert outputs["sequence_output"].shape == (2, 9, 312)
    # Back to the official layout, under the same names, bit for bit.
    vocab = kerasbert.open_checkpoint(folder_dir).read_vocab()
    prefix = kerasbert.save_encoder(encoder, tmp_path / "saved", vocab)
    again = CheckpointFolder(prefix)
    assert again.config.family == family and again.config_path.name == "albert_config.json"
    for stored_name in wanted:
        np.testing.assert_array_equal(again.read(stored_name), values[stored_name], err_msg=stored_name)
    assert set(again.shapes) == wanted


def test_brightmart_tiny_zh_config_is_read_as_released():
    folder = CheckpointFolder(require_shared("data", "models", "albert_tiny_zh_brightmart_INDEX_ONLY"))
    c = folder.config
    assert (c.family, c.num_layers, c.num_heads, c.intermediate_size, c.vocab_size) == (
        "albert_brightmart", 4, 12, 1248, 21128,
    )
    assert c.hidden_act == "gelu_tanh" and c.hidden_dropout == 0.0


# =============================================================================
# ELECTRA with Google's names (and ymcui's config file)
# =============================================================================


def electra_google_variables(V=40, E=32, H=64, I=96, L=2, P=64, seed=0):
    """A discriminator + generator checkpoint as Google's ELECTRA writes it."""
    shapes = {
        "electra/embeddings/word_embeddings": (V, E),
        "electra/embeddings/position_embeddings": (P, E),
        "electra/embeddings/token_type_embeddings": (2, E),
        "electra/embeddings/LayerNorm/gamma": (E,),
        "electra/embeddings/LayerNorm/beta": (E,),
        "electra/embeddings_project/kernel": (E, H),
        "electra/embeddings_project/bias": (H,),
        "discriminator_predictions/dense/kernel": (H, H),
        "discriminator_predictions/dense/bias": (H,),
        "discriminator_predictions/dense_1/kernel": (H, 1),
        "discriminator_predictions/dense_1/bias": (1,),
        "generator/embeddings_project/kernel": (E, 16),
        "generator/encoder/layer_0/attention/self/query/kernel": (16, 16),
        "generator_predictions/output_bias": (V,),
    }
    for i in range(L):
        c = f"electra/encoder/layer_{i}/"
        for part in ("query", "key", "value"):
            shapes[f"{c}attention/self/{part}/kernel"] = (H, H)
            shapes[f"{c}attention/self/{part}/bias"] = (H,)
        shapes.update({
            f"{c}attention/output/dense/kernel": (H, H), f"{c}attention/output/dense/bias": (H,),
            f"{c}attention/output/LayerNorm/gamma": (H,), f"{c}attention/output/LayerNorm/beta": (H,),
            f"{c}intermediate/dense/kernel": (H, I), f"{c}intermediate/dense/bias": (I,),
            f"{c}output/dense/kernel": (I, H), f"{c}output/dense/bias": (H,),
            f"{c}output/LayerNorm/gamma": (H,), f"{c}output/LayerNorm/beta": (H,),
        })
    values = random_like({n: (s, np.float32) for n, s in shapes.items()}, seed)
    values["global_step"] = np.array(10, np.int64)
    values["electra/embeddings/word_embeddings/adam_m"] = values["electra/embeddings/word_embeddings"] * 0
    return values


def write_vocab(path, size):
    tokens = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + [f"w{i}" for i in range(size - 5)]
    path.write_text("".join(t + "\n" for t in tokens), encoding="utf-8")


def test_electra_google_layout_without_config_infers_it(tmp_path):
    values = electra_google_variables()
    save_v2(tmp_path / "electra_small", values)
    write_vocab(tmp_path / "vocab.txt", 40)
    folder = CheckpointFolder(tmp_path)
    c = folder.config
    assert folder.config_path is None and "inferred" in folder.config_source
    assert (c.family, c.vocab_size, c.embedding_size, c.hidden_size, c.num_heads, c.intermediate_size,
            c.num_layers, c.max_position_embeddings) == ("electra", 40, 32, 64, 1, 96, 2, 64)
    encoder = kerasbert.load_encoder(tmp_path)
    assert isinstance(encoder, kerasbert.ElectraEncoder)
    mapping = assert_every_value_landed(encoder, values, c)
    assert {n for n, _ in mapping.values()} == {n for n in values if n.startswith("electra/") and "adam" not in n}
    info = kerasbert.inspect_checkpoint(tmp_path)
    assert info["problems"] == [] and info["family"] == "electra"
    assert "ELECTRA generator (not used; the discriminator is the encoder)" in info["ignored"].values()
    # ELECTRA has no pooler: pooled_output is the [CLS] state itself.
    out = encoder(inputs_for(40))
    np.testing.assert_array_equal(np.asarray(out["pooled_output"]), np.asarray(out["sequence_output"])[:, 0])
    # Round trip: official names again, with a config file now.
    prefix = kerasbert.save_encoder(encoder, tmp_path / "saved", folder.read_vocab())
    again = CheckpointFolder(prefix)
    assert again.config_path.name == "discriminator_config.json"
    for name, _ in mapping.values():
        np.testing.assert_array_equal(again.read(name), values[name], err_msg=name)


def test_electra_config_file_sets_the_heads(tmp_path):
    """ymcui's Chinese-ELECTRA ships ``*_discriminator_config.json``: its head
    count wins over the inference (here 4 heads of 16, not 1 of 64)."""
    values = electra_google_variables()
    save_v2(tmp_path / "electra_small", values)
    write_vocab(tmp_path / "vocab.txt", 40)
    config = {"attention_probs_dropout_prob": 0.1, "embedding_size": 32, "hidden_act": "gelu",
              "hidden_dropout_prob": 0.1, "hidden_size": 64, "intermediate_size": 96,
              "max_position_embeddings": 64, "num_attention_heads": 4, "num_hidden_layers": 2,
              "type_vocab_size": 2, "vocab_size": 40}
    (tmp_path / "small_discriminator_config.json").write_text(json.dumps(config), encoding="utf-8")
    (tmp_path / "small_generator_config.json").write_text(json.dumps({**config, "hidden_size": 16}), encoding="utf-8")
    folder = CheckpointFolder(tmp_path)
    assert folder.config_path.name == "small_discriminator_config.json"
    assert (folder.config.num_heads, folder.config.hidden_act) == (4, "gelu_tanh")
    encoder = kerasbert.load_encoder(tmp_path)
    assert encoder.num_heads == 4


# =============================================================================
# RoBERTa-wwm-ext / RBT3: a BERT under a RoBERTa name
# =============================================================================


def test_rbt3_is_a_bert_and_needs_nothing_else(tmp_path):
    """ymcui's RBT3 folder: ``bert_config.json`` with extra keys
    (``directionality``, ``pooler_*``), 3 layers, BERT variable names."""
    toy = require_shared("data", "models", "keras_bert_test_checkpoint")
    base = kerasbert.load_encoder(toy)
    rbt3 = kerasbert.BertEncoder(**{**kerasbert.open_checkpoint(toy).config.encoder_kwargs(), "num_layers": 3})
    rbt3.set_weights([np.random.default_rng(3).normal(0, 0.2, w.shape).astype("float32") for w in rbt3.get_weights()])
    prefix = kerasbert.save_encoder(rbt3, tmp_path, kerasbert.open_checkpoint(toy).read_vocab())
    config = json.loads((tmp_path / "bert_config.json").read_text())
    config.update({"directionality": "bidi", "pooler_fc_size": 768, "pooler_num_attention_heads": 12,
                   "pooler_num_fc_layers": 3, "pooler_size_per_head": 128, "pooler_type": "first_token_transform"})
    (tmp_path / "bert_config.json").write_text(json.dumps(config), encoding="utf-8")
    folder = CheckpointFolder(prefix)
    assert folder.config.family == "bert" and folder.config.num_layers == 3
    loaded = kerasbert.load_encoder(tmp_path)
    assert type(loaded) is type(base) is kerasbert.BertEncoder
    x = inputs_for(15)
    np.testing.assert_array_equal(np.asarray(loaded(x)["sequence_output"]), np.asarray(rbt3(x)["sequence_output"]))


# =============================================================================
# Refusals, each with its reason
# =============================================================================


def test_sentencepiece_albert_is_refused_clearly(tmp_path):
    (tmp_path / "albert_config.json").write_text(json.dumps({
        "vocab_size": 30000, "hidden_size": 768, "num_hidden_layers": 12, "num_attention_heads": 12,
        "intermediate_size": 3072, "embedding_size": 128}), encoding="utf-8")
    save_v2(tmp_path / "model.ckpt-best", {"bert/encoder/embedding_hidden_mapping_in/kernel": np.zeros((2, 2), "float32")})
    (tmp_path / "30k-clean.model").write_bytes(b"\x00sentencepiece")
    with pytest.raises(CheckpointError, match=r"SentencePiece vocabulary \(30k-clean\.model\).*WordPiece only"):
        kerasbert.load_encoder(tmp_path)


@pytest.mark.parametrize("model_type, problem", [
    ("roberta", r"model_type 'roberta' is not supported.*RoBERTa-wwm-ext is model_type 'bert'"),
    ("gpt2", r"model_type 'gpt2' is not supported; kerasbert loads albert, bert, electra"),
])
def test_unsupported_hf_model_types_are_refused(tmp_path, model_type, problem):
    (tmp_path / "config.json").write_text(json.dumps({
        "model_type": model_type, "vocab_size": 10, "hidden_size": 8, "num_hidden_layers": 1,
        "num_attention_heads": 2, "intermediate_size": 16}), encoding="utf-8")
    with pytest.raises(CheckpointError, match=problem):
        CheckpointFolder(tmp_path)


def test_brightmart_preln_and_masked_lm_are_refused(albert_tiny, tmp_path):
    name, _, folder_dir, _ = albert_tiny
    with pytest.raises(CheckpointError, match=r"load_masked_lm supports BERT checkpoints only"):
        kerasbert.load_masked_lm(folder_dir)
    copy = tmp_path / "preln"
    shutil.copytree(folder_dir, copy)
    config_file = next(copy.glob("albert_config*.json"))
    config = json.loads(config_file.read_text())
    config["ln_type"] = "preln"
    config_file.write_text(json.dumps(config))
    with pytest.raises(CheckpointError, match=r"ln_type 'preln' \(pre-LayerNorm\) is not supported"):
        CheckpointFolder(copy)


def test_hf_names_translate_per_family():
    assert official_name_from_hf(
        "albert.encoder.albert_layer_groups.1.albert_layers.0.ffn_output.weight", "albert"
    ) == ("bert/encoder/transformer/group_1/inner_group_0/ffn_1/intermediate/output/dense/kernel", True, None)
    assert official_name_from_hf(
        "encoder.albert_layer_groups.0.albert_layers.2.attention.LayerNorm.bias", "albert"
    ) == ("bert/encoder/transformer/group_0/inner_group_2/LayerNorm/beta", False, None)
    assert official_name_from_hf("pooler.weight", "albert") == ("bert/pooler/dense/kernel", True, None)
    assert official_name_from_hf("embeddings_project.weight", "electra") == (
        "electra/embeddings_project/kernel", True, None)
    assert official_name_from_hf("electra.encoder.layer.1.output.LayerNorm.weight", "electra")[0] == (
        "electra/encoder/layer_1/output/LayerNorm/gamma")
    assert official_name_from_hf("discriminator_predictions.dense.weight", "electra")[0] is None
    assert official_name_from_hf("predictions.decoder.weight", "albert")[0] is None


def test_cli_inspect_names_the_family(albert_tiny, capsys):
    name, _, folder_dir, _ = albert_tiny
    assert main(["inspect", str(folder_dir)]) == 0
    out = capsys.readouterr().out
    expected = {"albert": "ALBERT (Google layout)", "albert_brightmart": "ALBERT (brightmart albert_zh layout)"}
    assert expected[ALBERT_FOLDERS[name][0]] in out
    assert "embeddings 128" in out and "shared layer(s)" in out and "status:     OK" in out


# =============================================================================
# Same computation as keras-hub's backbones
# =============================================================================


def _randomize(model, seed):
    rng = np.random.default_rng(seed)
    model.set_weights([rng.normal(0, 0.2, w.shape).astype("float32") for w in model.get_weights()])


def test_albert_encoder_matches_keras_hub_albert_backbone():
    import keras_hub

    kwargs = dict(vocabulary_size=30, num_layers=4, num_heads=2, embedding_dim=8, hidden_dim=16,
                  intermediate_dim=24, num_groups=2, num_inner_repetitions=2, max_sequence_length=16)
    ours = kerasbert.AlbertEncoder(**kwargs)
    theirs = keras_hub.models.AlbertBackbone(**kwargs)
    _randomize(ours, 4)
    theirs.set_weights(ours.get_weights())
    assert [w.shape for w in ours.weights] == [w.shape for w in theirs.weights]
    x = inputs_for(30)
    a, b = ours(x), theirs(x)
    for key in ("sequence_output", "pooled_output"):
        np.testing.assert_allclose(np.asarray(a[key]), np.asarray(b[key]), atol=1e-6)


def test_electra_encoder_matches_keras_hub_electra_backbone():
    import keras_hub

    kwargs = dict(num_layers=2, num_heads=2, embedding_dim=8, hidden_dim=16, intermediate_dim=24,
                  max_sequence_length=16)
    ours = kerasbert.ElectraEncoder(vocabulary_size=30, **kwargs)
    theirs = keras_hub.models.ElectraBackbone(vocab_size=30, **kwargs)
    _randomize(ours, 5)
    # ElectraBackbone's extra (untrained) pooler is its last two weights.
    theirs.set_weights(ours.get_weights() + theirs.get_weights()[-2:])
    x = inputs_for(30)
    np.testing.assert_allclose(
        np.asarray(ours(x)["sequence_output"]), np.asarray(theirs(x)["sequence_output"]), atol=1e-6
    )


def test_new_encoders_save_and_load_as_keras_files(tmp_path):
    for encoder in (
        kerasbert.AlbertEncoder(30, 2, 2, 8, 16, 24, factorization="tokens", hidden_act="gelu_erf"),
        kerasbert.ElectraEncoder(30, 2, 2, 16, 8, 24, max_sequence_length=16),
    ):
        _randomize(encoder, 6)
        path = tmp_path / f"{encoder.family}.keras"
        encoder.save(path)
        loaded = keras.saving.load_model(path)
        assert type(loaded) is type(encoder) and loaded.get_config() == encoder.get_config()
        x = inputs_for(30)
        np.testing.assert_array_equal(np.asarray(loaded(x)["sequence_output"]),
                                      np.asarray(encoder(x)["sequence_output"]))


# =============================================================================
# Hugging Face parity (PyTorch; the ``bench`` extra, which CI installs)
# =============================================================================


def require_torch():
    """torch, or skip (locally) / fail (CI) when the bench extra is missing."""
    import importlib.util

    if not all(importlib.util.find_spec(name) for name in ("torch", "transformers")):
        message = "needs torch and transformers: pip install -e '.[bench]'"
        if os.environ.get("CI"):
            pytest.fail(message + " (CI installs them)", pytrace=False)
        pytest.skip(message)
    import torch

    return torch


def _randomize_torch(model, seed):
    torch = require_torch()
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "LayerNorm" in name or "layer_norm" in name:
                p.copy_((1.0 if name.endswith("weight") else 0.0) + 0.1 * torch.randn(p.shape, generator=generator))
            else:
                p.copy_(0.2 * torch.randn(p.shape, generator=generator))
    return model.eval()


def _hf_outputs(model, x):
    torch = require_torch()
    with torch.no_grad():
        out = model(
            input_ids=torch.tensor(x["token_ids"], dtype=torch.long),
            token_type_ids=torch.tensor(x["segment_ids"], dtype=torch.long),
            attention_mask=torch.tensor(x["padding_mask"], dtype=torch.long),
        )
    return out.last_hidden_state.numpy(), getattr(out, "pooler_output", None)


def _max_error(ours, theirs, mask):
    keep = mask.astype(bool)
    return float(np.max(np.abs(np.asarray(ours)[keep] - theirs[keep])))


def _save_hf(model, directory, vocab_size):
    model.save_pretrained(directory, safe_serialization=True)
    write_vocab(directory / "vocab.txt", vocab_size)


@pytest.mark.hf
@pytest.mark.parametrize("groups, inner, act", [(1, 1, "gelu_new"), (2, 2, "gelu")])
def test_albert_parity_with_hugging_face(tmp_path, groups, inner, act):
    require_torch()
    import transformers

    config = transformers.AlbertConfig(
        vocab_size=60, embedding_size=16, hidden_size=48, num_hidden_layers=4, num_attention_heads=4,
        intermediate_size=72, num_hidden_groups=groups, inner_group_num=inner, hidden_act=act,
        max_position_embeddings=32, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
    )
    hf = _randomize_torch(transformers.AlbertModel(config), 7)
    _save_hf(hf, tmp_path / "hf", 60)
    x = inputs_for(60)
    ref_seq, ref_pooled = _hf_outputs(hf, x)
    encoder = kerasbert.load_encoder(tmp_path / "hf")
    assert encoder.family == "albert" and encoder.hidden_act == {"gelu_new": "gelu_tanh", "gelu": "gelu_erf"}[act]
    out = encoder(x)
    seq_err = _max_error(out["sequence_output"], ref_seq, x["padding_mask"])
    pooled_err = float(np.max(np.abs(np.asarray(out["pooled_output"]) - ref_pooled.numpy())))
    print(f"ALBERT HF parity (groups {groups}, inner {inner}, {act}): sequence {seq_err:.2e}, pooled {pooled_err:.2e}")
    assert seq_err < 2e-4 and pooled_err < 2e-4
    # The same weights written in Google's ALBERT layout load to the same outputs.
    kerasbert.save_encoder(encoder, tmp_path / "official", kerasbert.open_checkpoint(tmp_path / "hf").read_vocab())
    official = CheckpointFolder(tmp_path / "official")
    assert "bert/encoder/transformer/group_0/inner_group_0/attention_1/self/query/kernel" in official.shapes
    again = kerasbert.load_encoder(tmp_path / "official")(x)
    np.testing.assert_array_equal(np.asarray(again["sequence_output"]), np.asarray(out["sequence_output"]))


@pytest.mark.hf
@pytest.mark.parametrize("embedding_size", [16, 48])
def test_electra_parity_with_hugging_face(tmp_path, embedding_size):
    require_torch()
    import transformers

    config = transformers.ElectraConfig(
        vocab_size=60, embedding_size=embedding_size, hidden_size=48, num_hidden_layers=3,
        num_attention_heads=4, intermediate_size=72, max_position_embeddings=32,
        hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
    )
    assert config.hidden_act == "gelu"  # the exact GELU: what HF's ELECTRA configs say
    hf = _randomize_torch(transformers.ElectraModel(config), 8)
    _save_hf(hf, tmp_path / "hf", 60)
    x = inputs_for(60)
    ref_seq, _ = _hf_outputs(hf, x)
    encoder = kerasbert.load_encoder(tmp_path / "hf")
    assert encoder.family == "electra" and encoder.hidden_act == "gelu_erf"
    out = encoder(x)
    err = _max_error(out["sequence_output"], ref_seq, x["padding_mask"])
    print(f"ELECTRA HF parity (E={embedding_size}, H=48): sequence {err:.2e}")
    assert err < 2e-4
    kerasbert.save_encoder(encoder, tmp_path / "official", kerasbert.open_checkpoint(tmp_path / "hf").read_vocab())
    official = CheckpointFolder(tmp_path / "official")
    assert ("electra/embeddings_project/kernel" in official.shapes) == (embedding_size != 48)
    again = kerasbert.load_encoder(tmp_path / "official")(x)
    np.testing.assert_array_equal(np.asarray(again["sequence_output"]), np.asarray(out["sequence_output"]))


@pytest.mark.hf
def test_brightmart_albert_parity_with_an_equivalent_hf_bert(tmp_path):
    """brightmart's albert_zh has no HF class; its forward pass is a BERT whose
    word embeddings are ``word_embeddings @ word_embeddings_2`` and whose layers
    all share one set of weights, so that BertModel is the reference."""
    torch = require_torch()
    import transformers

    V, E, H, I, L, P = 60, 16, 48, 72, 4, 32
    rng = np.random.default_rng(9)
    shared = {}
    config = transformers.BertConfig(
        vocab_size=V, hidden_size=H, num_hidden_layers=L, num_attention_heads=4, intermediate_size=I,
        max_position_embeddings=P, hidden_act="gelu_new", hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0,
    )
    bert = _randomize_torch(transformers.BertModel(config), 9)
    state = {k: v.numpy().copy() for k, v in bert.state_dict().items()}
    layer0 = {k[len("encoder.layer.0."):]: v for k, v in state.items() if k.startswith("encoder.layer.0.")}
    word, word_2 = rng.normal(0, 0.5, (V, E)).astype("float32"), rng.normal(0, 0.5, (E, H)).astype("float32")
    state["embeddings.word_embeddings.weight"] = word @ word_2
    for i in range(L):
        for k, v in layer0.items():
            state[f"encoder.layer.{i}.{k}"] = v
    bert.load_state_dict({k: torch.tensor(v) for k, v in state.items()})
    # The same model in brightmart's names.
    bm = {"bert/embeddings/word_embeddings": word, "bert/embeddings/word_embeddings_2": word_2}
    for hf_name, value in state.items():
        official, transpose, _ = official_name_from_hf(hf_name, "bert")
        if official is None or "word_embeddings" in official or "/layer_" in official and "/layer_0/" not in official:
            continue
        shared[official.replace("/layer_0/", "/layer_shared/")] = value.T.copy() if transpose else value
    bm.update(shared)
    save_v2(tmp_path / "albert_model.ckpt", bm)
    write_vocab(tmp_path / "vocab.txt", V)
    (tmp_path / "albert_config_tiny.json").write_text(json.dumps({
        "hidden_act": "gelu", "hidden_size": H, "embedding_size": E, "intermediate_size": I,
        "max_position_embeddings": P, "num_attention_heads": 4, "num_hidden_layers": L,
        "type_vocab_size": 2, "vocab_size": V, "ln_type": "postln",
        "hidden_dropout_prob": 0.0, "attention_probs_dropout_prob": 0.0}), encoding="utf-8")
    encoder = kerasbert.load_encoder(tmp_path)
    assert encoder.family == "albert_brightmart"
    x = inputs_for(V)
    ref_seq, ref_pooled = _hf_outputs(bert, x)
    out = encoder(x)
    seq_err = _max_error(out["sequence_output"], ref_seq, x["padding_mask"])
    pooled_err = float(np.max(np.abs(np.asarray(out["pooled_output"]) - ref_pooled.numpy())))
    print(f"brightmart ALBERT parity vs equivalent HF BertModel: sequence {seq_err:.2e}, pooled {pooled_err:.2e}")
    assert seq_err < 2e-4 and pooled_err < 2e-4


# =============================================================================
# Both apps take any family via --checkpoint
# =============================================================================


def tiny_checkpoint(directory, encoder, vocab):
    _randomize(encoder, 11)
    kerasbert.save_encoder(encoder, directory, vocab)
    return directory


@pytest.mark.slow
def test_both_apps_train_and_predict_on_albert_and_electra(tmp_path, minilm_dir, capsys):
    """NER on a brightmart-layout ALBERT, triples on an ELECTRA with factorized
    embeddings: train from the CLI, reload, predict with true offsets."""
    from kerasbert_apps import samples

    vocab = kerasbert.open_checkpoint(minilm_dir).read_vocab()
    albert = tiny_checkpoint(tmp_path / "albert", kerasbert.AlbertEncoder(
        len(vocab), 2, 2, 16, 32, 48, factorization="tokens", max_sequence_length=64), vocab)
    electra = tiny_checkpoint(tmp_path / "electra", kerasbert.ElectraEncoder(
        len(vocab), 2, 2, 32, 16, 48, max_sequence_length=64), vocab)
    assert CheckpointFolder(albert).config.family == "albert_brightmart"
    assert CheckpointFolder(electra).config.family == "electra"
    text = "Grace Achieng visited Cairo on Thursday with Jade River Electronics."
    (tmp_path / "in.txt").write_text(text + "\n", encoding="utf-8")

    assert main(["ner", "train", "--checkpoint", str(albert), "--train", str(samples.path("ner", "train")),
                 "--dev", str(samples.path("ner", "dev")), "--output", str(tmp_path / "ner"),
                 "--epochs", "1", "--batch-size", "16", "--max-length", "32", "--max-train-examples", "64",
                 "--no-calibrate"]) == 0
    assert main(["triples", "train", "--checkpoint", str(electra), "--train",
                 str(samples.path("triples", "train")), "--dev", str(samples.path("triples", "dev")),
                 "--output", str(tmp_path / "triples"), "--epochs", "1", "--batch-size", "16",
                 "--max-length", "32", "--max-train-examples", "64"]) == 0
    capsys.readouterr()
    assert main(["ner", "predict", "--model", str(tmp_path / "ner" / "model"), str(tmp_path / "in.txt")]) == 0
    ner = [json.loads(line) for line in capsys.readouterr().out.splitlines() if line.startswith("{")]
    assert [r["text"] for r in ner] == [text]
    assert ner[0]["entities"], "nothing predicted, no offset checked"
    for e in ner[0]["entities"]:
        assert text[e["start"]:e["end"]] == e["text"]
    assert main(["triples", "predict", "--model", str(tmp_path / "triples" / "model"), str(tmp_path / "in.txt"),
                 "--threshold-start", "0", "--threshold-end", "0"]) == 0
    triples = [json.loads(line) for line in capsys.readouterr().out.splitlines() if line.startswith("{")]
    assert triples[0]["triples"], "thresholds 0 must fire pointers"
    for t in triples[0]["triples"]:
        assert text[t["subject"]["start"]:t["subject"]["end"]] == t["subject"]["text"]
    # The saved models hold the family's encoder class.
    for app, name in (("ner", "AlbertEncoder"), ("triples", "ElectraEncoder")):
        with zipfile.ZipFile(next((tmp_path / app / "model").glob("*.keras"))) as archive:
            assert f'"class_name": "{name}"' in archive.read("config.json").decode()
