"""Triples training from the CLI on the toy checkpoint with --freeze-encoder
and with --layer-lr-decay (mechanics, not accuracy; the layer mix and the
multipliers themselves: tests/test_layer_mix.py)."""

import json

import numpy as np
import pytest

from kerasbert_apps.triples.heads.casrel.pipeline import Extractor
from conftest import require_shared
from conftest import webnlg_slice
from kerasbert.cli import main
from kerasbert.checkpoints.loader import load_encoder


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    return webnlg_slice(tmp_path_factory.mktemp("triples_data"), 16, 4)


def _train(data, output, *options):
    toy = require_shared("data", "models", "keras_bert_test_checkpoint")
    status = main(["triples", "train", "--checkpoint", str(toy), "--train", str(data[0]), "--dev", str(data[1]),
                   "--output", str(output), "--epochs", "1", "--batch-size", "8", "--max-length", "16",
                   "--seed", "7", *options])
    assert status == 0
    return toy


def test_freeze_encoder_trains_the_mix_and_the_head_only(data, tmp_path, capsys):
    toy = _train(data, tmp_path / "run", "--freeze-encoder", "--head-learning-rate", "1e-2")
    assert "encoder frozen; the head reads a learned mix of its 3 layer outputs" in capsys.readouterr().out
    assert json.loads((tmp_path / "run" / "settings.json").read_text())["freeze_encoder"] is True
    extractor = Extractor.load(tmp_path / "run" / "model")
    model = extractor.model
    assert model.layer_mix and not np.allclose(model.mix.mix_weights.numpy(), 0.0) and model.encoder.dropout == 0.0
    original = load_encoder(toy)
    assert len(model.encoder.weights) == len(original.weights) > 0
    for v, w in zip(model.encoder.weights, original.weights):
        np.testing.assert_array_equal(v.numpy(), w.numpy())
    assert len(extractor.predict(["Alan Bean was born in Wheeler, Texas."])) == 1


def test_layer_lr_decay_trains_every_layer(data, tmp_path, capsys):
    toy = _train(data, tmp_path / "run", "--layer-lr-decay", "0.5")
    assert "layer-wise learning-rate decay 0.5: top encoder layer x1, embeddings x0.25" in capsys.readouterr().out
    model = Extractor.load(tmp_path / "run" / "model").model
    assert not model.layer_mix
    # (the pooler is frozen; a key bias gets no gradient: the softmax ignores a shift)
    moved = [not np.allclose(v.numpy(), w.numpy()) for v, w in zip(model.encoder.weights, load_encoder(toy).weights)
             if "pooled_dense" not in v.path and "key/bias" not in v.path]
    assert moved and all(moved)  # the embeddings too, at 0.25 x the top layer's rate
