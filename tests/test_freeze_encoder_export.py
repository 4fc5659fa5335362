"""The text-in SavedModel of a --freeze-encoder tagger (its head on the layer
mix; the serving graph: the mix, then the fused BiLSTM) gives what predict
gives, after a save and Tagger.load. Random emission weights biased towards
entity tags (as in tests/test_ner_export.py) give entities to compare."""

import numpy as np
import tensorflow as tf

import kerasbert
from kerasbert_apps.ner.heads.bio.model import NerModel
from kerasbert_apps.ner.heads.bio.pipeline import Tagger
from kerasbert_apps.ner.tags import bio_tags
from conftest import require_shared


def test_export_of_a_mixed_tagger_gives_what_predict_gives(tmp_path):
    toy = require_shared("data", "models", "keras_bert_test_checkpoint")
    encoder = kerasbert.load_encoder(toy, trainable=False, output_hidden_states=True)
    tags = bio_tags(["LOC", "ORG", "PER"])
    model = NerModel(encoder, len(tags), lstm_units=8, layer_mix=True)
    model.mix.mix_weights.assign([1.0, -0.5, 0.3])
    Tagger(model, kerasbert.load_tokenizer(toy), tags, max_length=16).save(tmp_path / "model")
    tagger = Tagger.load(tmp_path / "model")
    model = tagger.model
    assert model.layer_mix
    np.testing.assert_allclose(model.mix.mix_weights.numpy(), [1.0, -0.5, 0.3])
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
