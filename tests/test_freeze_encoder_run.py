"""A toy NER training run with --freeze-encoder: only the head and the layer
mix train and the model folder loads (Tagger.load). (The mix itself,
--layer-lr-decay and the triples model: tests/test_layer_mix.py; the export:
tests/test_freeze_encoder_export.py.)"""

import numpy as np

from kerasbert_apps.ner.heads.bio.pipeline import Tagger
from kerasbert_apps.ner.train import NerTrainSettings
from kerasbert_apps.ner.train import train
from conftest import conll_slice
from conftest import require_shared
from kerasbert.checkpoints.loader import load_encoder


def test_frozen_run_trains_the_head_and_the_mix_only_and_loads(tmp_path, capsys):
    toy = require_shared("data", "models", "keras_bert_test_checkpoint")
    train_file = conll_slice(tmp_path, "train.conll", 0, 24)
    dev_file = conll_slice(tmp_path, "dev.conll", 24, 8)
    settings = NerTrainSettings(checkpoint=str(toy), train=str(train_file), dev=str(dev_file),
                                output=str(tmp_path / "run"), epochs=1, batch_size=8, max_length=16,
                                lstm_units=8, seed=7, freeze_encoder=True, head_learning_rate=1e-2,
                                calibrate=False)
    train(settings)
    out = capsys.readouterr().out
    assert "encoder frozen; the head reads a learned mix of its 3 layer outputs" in out
    tagger = Tagger.load(tmp_path / "run" / "model")
    model = tagger.model
    assert model.layer_mix and not model.encoder.trainable and model.mix.num_inputs == 3
    assert model.encoder.dropout == 0.0  # fixed features
    assert not any(id(v) in {id(w) for w in model.trainable_variables} for v in model.encoder.weights)
    assert not np.allclose(model.mix.mix_weights.numpy(), 0.0)  # the mix learned something
    original = load_encoder(toy)
    assert len(model.encoder.weights) == len(original.weights) > 0
    for v, w in zip(model.encoder.weights, original.weights):  # the encoder is the checkpoint's, untouched
        np.testing.assert_array_equal(v.numpy(), w.numpy())
