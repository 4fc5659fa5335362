"""--freeze-encoder (a frozen encoder, the head on a learned mix of all its
layers: kerasbert.layers.layer_mix.LayerMix) and --layer-lr-decay (per-layer
learning rates through GroupedAdamW's multipliers), both apps. An NER
training run with --freeze-encoder: tests/test_freeze_encoder_run.py; the
export of a mixed tagger: tests/test_freeze_encoder_export.py; triples CLI
runs: tests/test_triples_options.py. The layer's config round trip, saving, dtype policies
and JAX rebuild: the layer harness (tests/test_layers.py)."""

import dataclasses

import keras
import numpy as np
import pytest

from kerasbert_apps.ner.heads.bio.model import NerModel
from kerasbert_apps.ner.train import NerTrainSettings
from kerasbert_apps.triples.heads.casrel.model import TripleModel
from kerasbert.models.encoder import BertEncoder
from kerasbert.errors import KerasbertError
from kerasbert.training.fit import compile_for_training
from kerasbert.layers.layer_mix import LayerMix
from kerasbert.training.optimizer import GroupedAdamW
from kerasbert.training.optimizer import layer_lr_multipliers
from kerasbert.training.optimizer import make_optimizer


def _tiny_encoder(num_layers=3, output_hidden_states=False):
    keras.utils.set_random_seed(3)
    return BertEncoder(vocabulary_size=50, num_layers=num_layers, num_heads=2, hidden_dim=8, intermediate_dim=16,
                       max_sequence_length=32, output_hidden_states=output_hidden_states)


def _rows(batch=2, length=7, vocabulary=50):
    rng = np.random.default_rng(0)
    mask = np.ones((batch, length), "int32")
    mask[1, 5:] = 0
    return {"token_ids": rng.integers(1, vocabulary, (batch, length)).astype("int32"),
            "segment_ids": np.zeros((batch, length), "int32"), "padding_mask": mask}


# --------------------------------------------------------------- LayerMix


def test_layer_mix_is_gamma_times_the_softmax_weighted_sum():
    rng = np.random.default_rng(1)
    states = [rng.normal(size=(2, 5, 4)).astype("float32") for _ in range(3)]
    mix = LayerMix(name="mix")
    np.testing.assert_allclose(mix(states), np.mean(states, axis=0), atol=1e-6)  # starts as the plain mean
    mix.mix_weights.assign([0.5, -1.0, 2.0])
    mix.gamma.assign(1.7)
    w = np.exp([0.5, -1.0, 2.0]) / np.sum(np.exp([0.5, -1.0, 2.0]))
    np.testing.assert_allclose(mix(states), 1.7 * sum(wi * s for wi, s in zip(w, states)), atol=1e-5)
    np.testing.assert_allclose(np.sum(mix.mix()), 1.0, atol=1e-6)
    assert LayerMix.from_config(mix.get_config()).num_inputs == 3  # the count learned when built is in the config
    with pytest.raises(ValueError, match="3 inputs, got 2"):
        LayerMix(3)(states[:2])


def test_a_model_with_the_mix_needs_the_hidden_states():
    with pytest.raises(ValueError, match="output_hidden_states"):
        NerModel(_tiny_encoder(), 5, layer_mix=True)


def test_frozen_mixed_triples_model_saves_loads_and_trains_only_the_head(tmp_path):
    """(The NER model: tests/test_freeze_encoder_run.py, a toy training run.)"""
    encoder = _tiny_encoder(output_hidden_states=True)
    encoder.trainable = False
    model = TripleModel(encoder, 3, layer_mix=True)
    assert model.mix.num_inputs == 4  # embeddings + 3 layers
    trainable = {id(v) for v in model.trainable_variables}
    assert not any(id(v) in trainable for v in encoder.weights)
    assert {id(v) for v in model.mix.weights} <= trainable
    model.mix.mix_weights.assign([0.1, 2.0, -0.5, 0.3])
    x = dict(_rows(), subject_span=np.array([[1, 2], [0, 0]], "int32"))
    before = model.predict(x, verbose=0)
    path = tmp_path / "model.keras"
    model.save(path)
    loaded = keras.saving.load_model(path)
    assert loaded.layer_mix and loaded.get_config()["layer_mix"] is True and not loaded.encoder.trainable
    after = loaded.predict(x, verbose=0)
    for key in before:
        np.testing.assert_allclose(after[key], before[key], atol=1e-5)
    np.testing.assert_allclose(loaded.mix.mix_weights.numpy(), [0.1, 2.0, -0.5, 0.3])
    # the decoders (what predict and export use) read the mix too
    encode, _ = model.decoders()
    np.testing.assert_allclose(encode.predict(_rows(), verbose=0)["subject_start"],
                               1 / (1 + np.exp(-before["subject_start"])), atol=1e-5)

    # one training step: the encoder's weights stay, the mix moves
    encoder_before = [v.numpy().copy() for v in encoder.weights]
    model.compile(optimizer=make_optimizer(10, 1e-3, 1e-2, "triples_head_", warmup_ratio=0.0))  # no warm-up
    targets = {name: np.zeros((2, 7), "float32") for name in ("subject_start", "subject_end")}
    targets.update({name: np.zeros((2, 7, 3), "float32") for name in ("object_start", "object_end")})
    model.fit(x, targets, epochs=1, verbose=0)
    for v, old in zip(encoder.weights, encoder_before):
        np.testing.assert_array_equal(v.numpy(), old)
    assert not np.allclose(model.mix.mix_weights.numpy(), [0.1, 2.0, -0.5, 0.3])


def test_frozen_mixed_gplinker_model_saves_and_loads_with_only_the_head_trainable(tmp_path):
    """``triples train --head gplinker --freeze-encoder``: the GPLinker model
    with the layer mix saves and loads back (mix weights, outputs) and only
    the head and the mix train."""
    from kerasbert_apps.triples.heads.gplinker.model import GPLinkerModel

    encoder = _tiny_encoder(output_hidden_states=True)
    encoder.trainable = False
    model = GPLinkerModel(encoder, 3, head_size=8, layer_mix=True)
    assert model.mix.num_inputs == 4
    trainable = {id(v) for v in model.trainable_variables}
    assert not any(id(v) in trainable for v in encoder.weights)
    assert {id(v) for v in model.mix.weights} <= trainable
    model.mix.mix_weights.assign([0.1, 2.0, -0.5, 0.3])
    before = model.predict(_rows(), verbose=0)
    model.save(tmp_path / "model.keras")
    loaded = keras.saving.load_model(tmp_path / "model.keras")
    assert loaded.layer_mix and not loaded.encoder.trainable
    np.testing.assert_allclose(loaded.mix.mix_weights.numpy(), [0.1, 2.0, -0.5, 0.3])
    after = loaded.predict(_rows(), verbose=0)
    for key in before:
        np.testing.assert_allclose(after[key], before[key], atol=1e-4, err_msg=key)


# ---------------------------------------------------------- layer lr decay


def test_layer_lr_multipliers_decay_from_the_top_layer_down():
    encoder = _tiny_encoder(num_layers=3)
    decay = 0.8
    multipliers = layer_lr_multipliers(encoder, decay)
    assert set(multipliers) == {v.path for v in encoder.weights}
    for k, layer in enumerate(encoder.transformer_layers, start=1):  # layer k of L=3
        assert layer.weights and all(multipliers[v.path] == pytest.approx(decay ** (3 - k)) for v in layer.weights)
    for layer in (encoder.token_embedding, encoder.position_embedding, encoder.segment_embedding,
                  encoder.embeddings_layer_norm):
        assert all(multipliers[v.path] == pytest.approx(decay ** 3) for v in layer.weights)

    # as the optimizer sees them in a model: exact paths, the head at its own rate
    model = NerModel(encoder, 5, lstm_units=4)
    optimizer = make_optimizer(10, 1e-4, 1e-3, "ner_head_", encoder_multipliers=multipliers)
    optimizer.build(model.trainable_variables)
    factors = {v.path: f for v, f in zip(model.trainable_variables, optimizer._lr_factors)}
    assert factors["transformer_layer_2/self_attention_layer/query/kernel"] == pytest.approx(1.0)
    assert factors["transformer_layer_1/self_attention_layer/query/kernel"] == pytest.approx(0.8)
    assert factors["transformer_layer_0/self_attention_layer/query/kernel"] == pytest.approx(0.64)
    assert factors["token_embedding/embeddings"] == pytest.approx(0.512)
    assert all(f == pytest.approx(10.0) for p, f in factors.items() if p.startswith("ner_head_"))


def test_decay_one_changes_nothing():
    model = NerModel(_tiny_encoder(), 5, lstm_units=4)
    settings = NerTrainSettings(epochs=1, layer_lr_decay=1.0)
    compile_for_training(model, 4, settings, "ner_head_")
    assert model.optimizer.lr_multipliers == {"ner_head_": pytest.approx(1e-3 / 5e-5)}
    factors = model.optimizer._lr_factors
    plain = make_optimizer(4, 5e-5, 1e-3, "ner_head_")
    plain.build(model.trainable_variables)
    assert factors == plain._lr_factors
    # and a decay below 1 goes through compile_for_training
    decayed = NerModel(_tiny_encoder(), 5, lstm_units=4)
    compile_for_training(decayed, 4, dataclasses.replace(settings, layer_lr_decay=0.5), "ner_head_")
    assert min(decayed.optimizer._lr_factors) == pytest.approx(0.5 ** 3)


def test_exact_path_wins_over_prefix():
    optimizer = GroupedAdamW(lr_multipliers={"a/": 3.0, "a/b": 0.5})
    assert optimizer._factor_for("a/b") == 0.5 and optimizer._factor_for("a/c") == 3.0
    assert optimizer._factor_for("z") == 1.0


def test_settings_are_checked():
    base = dict(checkpoint="c", train="t", dev="d", output="o")
    for bad in (0.0, -0.5, 1.5):
        with pytest.raises(KerasbertError, match="layer_lr_decay must be in"):
            NerTrainSettings(**base, layer_lr_decay=bad).check()
    with pytest.raises(KerasbertError, match="exclude each other"):
        NerTrainSettings(**base, freeze_encoder=True, lora_rank=4).check()
    with pytest.raises(KerasbertError, match="nothing to decay"):
        NerTrainSettings(**base, freeze_encoder=True, layer_lr_decay=0.9).check()
    NerTrainSettings(**base, layer_lr_decay=0.9).check()
    NerTrainSettings(**base, freeze_encoder=True).check()


def test_a_mixed_tagger_is_rebuilt_with_all_layers_but_not_distilled():
    import kerasbert
    from kerasbert_apps.ner.heads.bio.pipeline import Tagger
    from kerasbert_apps.ner.tags import bio_tags
    from conftest import require_shared

    toy = require_shared("data", "models", "keras_bert_test_checkpoint")
    encoder = kerasbert.load_encoder(toy, trainable=False, output_hidden_states=True)
    tags = bio_tags(["PER"])
    model = NerModel(encoder, len(tags), lstm_units=4, layer_mix=True)
    model.mix.mix_weights.assign([1.0, -1.0, 0.5])
    tagger = Tagger(model, kerasbert.load_tokenizer(toy), tags, max_length=16)
    rebuilt = tagger.rebuilt()  # what with_precision (a bfloat16 export) does, in float32 here
    assert rebuilt.model.layer_mix
    np.testing.assert_allclose(rebuilt.model.mix.mix_weights.numpy(), [1.0, -1.0, 0.5])
    with pytest.raises(KerasbertError, match="cannot be given fewer encoder layers"):
        tagger.student([0])
