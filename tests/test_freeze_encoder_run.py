"""A toy NER training run with --freeze-encoder: only the head and the layer
mix train, the model folder loads (Tagger.load) and its text-in SavedModel
gives predict's entities. (The mix itself, --layer-lr-decay and the triples
model: tests/test_layer_mix.py.)"""

import numpy as np
import tensorflow as tf

from apps.ner.tagger import Tagger
from apps.ner.train import NerTrainSettings
from apps.ner.train import train
from conftest import conll_slice
from conftest import require_shared
from kerasbert.loader import load_encoder


def test_frozen_run_saves_loads_and_exports_with_predicts_results(tmp_path, capsys):
    toy = require_shared("data", "models", "keras_bert_test_checkpoint")
    train_file = conll_slice(tmp_path, "train.conll", 0, 24)
    dev_file = conll_slice(tmp_path, "dev.conll", 24, 8)
    settings = NerTrainSettings(checkpoint=str(toy), train=str(train_file), dev=str(dev_file),
                                output=str(tmp_path / "run"), epochs=1, batch_size=8, max_length=16,
                                lstm_units=8, seed=7, freeze_encoder=True, head_learning_rate=1e-2)
    train(settings)
    out = capsys.readouterr().out
    assert "encoder frozen; the head reads a learned mix of its 3 layer outputs" in out
    tagger = Tagger.load(tmp_path / "run" / "model")
    model = tagger.model
    assert model.layer_mix and not model.encoder.trainable and model.mix.num_inputs == 3
    assert not any(id(v) in {id(w) for w in model.trainable_variables} for v in model.encoder.weights)
    assert not np.allclose(model.mix.mix_weights.numpy(), 0.0)  # the mix learned something
    original = load_encoder(toy)
    for v, w in zip(model.encoder.weights, original.weights):  # the encoder is the checkpoint's, untouched
        np.testing.assert_array_equal(v.numpy(), w.numpy())


    # The export (the serving graph: the mix, then the fused BiLSTM) gives
    # predict's entities. A few training steps on the toy encoder mostly say
    # O: random emission weights biased towards entity tags (as in
    # test_ner_export.py) give many entities to compare.
    kernel, bias = model.emissions.get_weights()
    rng = np.random.default_rng(0)
    model.emissions.set_weights([rng.normal(0, 2.0, kernel.shape), bias + np.array([-1.0] + [0.5] * (len(bias) - 1))])
    texts = ["EU rejects German call to boycott British lamb .", "Peter Blackburn in Brussels", "",
             "the of and a in " * 12]
    predicted = tagger.predict(texts)
    assert sum(len(p["entities"]) for p in predicted) >= 2  # the toy vocabulary (15 tokens) says [UNK] to most words
    serve = tf.saved_model.load(str(tagger.export(tmp_path / "export"))).signatures["serving_default"]
    got = serve(text=tf.constant(texts))
    for i, ours in enumerate(predicted):
        n = int(got["count"][i])
        theirs = [(int(got["start"][i, k]), int(got["end"][i, k]), got["type"][i, k].numpy().decode()) for k in range(n)]
        assert [(e["start"], e["end"], e["type"]) for e in ours["entities"]] == theirs, texts[i]
        np.testing.assert_allclose([e["score"] for e in ours["entities"]], got["score"][i, :n].numpy(), atol=2e-4)
