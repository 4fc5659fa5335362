"""``--lora-rank``: Keras's own LoRA adapters on the encoder's attention and
feed-forward kernels, the checkpoint frozen. The encoder here is a small
random BERT written as an official checkpoint (the toy checkpoint is too
small for the folder sizes to mean anything)."""

import json
import shutil
from pathlib import Path

import keras
import numpy as np
import pytest

from kerasbert_apps.ner.heads.bio.model import NerModel
from kerasbert_apps.ner.heads.bio.pipeline import Tagger
from kerasbert_apps.ner.tags import bio_tags
from kerasbert_apps.ner.train import NerTrainSettings
from kerasbert_apps.ner.train import train
from conftest import conll_slice
from conftest import require_shared
from conftest import same_results
from kerasbert.models.encoder import BertEncoder
from kerasbert.checkpoints.loader import load_encoder
from kerasbert.checkpoints.loader import save_encoder
from kerasbert.layers.lora import LORA_LAYERS
from kerasbert.layers.lora import enable_lora
from kerasbert.layers.lora import lora_layers

SPECIAL = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("lora_data")
    return conll_slice(tmp, "train.conll", 0, 48), conll_slice(tmp, "dev.conll", 48, 16)


@pytest.fixture(scope="module")
def checkpoint(data, tmp_path_factory):
    """A random 2-layer BERT (hidden 64) whose vocabulary is the data's words, lowercased."""
    words = set()
    for path in data:
        for line in path.read_text(encoding="utf-8").splitlines():
            if line.strip():
                words.add(line.split()[0].lower())
    vocab = SPECIAL + sorted(w for w in words if w.isalpha())
    keras.utils.set_random_seed(3)
    encoder = BertEncoder(vocabulary_size=len(vocab), num_layers=2, num_heads=4, hidden_dim=64,
                          intermediate_dim=256, max_sequence_length=32)
    folder = tmp_path_factory.mktemp("lora_ckpt")
    save_encoder(encoder, folder, vocab)
    return folder


def _settings(tmp_path, data, checkpoint, name, **overrides):
    settings = dict(checkpoint=str(checkpoint), train=str(data[0]), dev=str(data[1]), output=str(tmp_path / name),
                    epochs=1, batch_size=8, max_length=24, lstm_units=8, seed=7, learning_rate=1e-3,
                    calibrate=False)  # the score temperature is tested elsewhere
    settings.update(overrides)
    return NerTrainSettings(**settings)


class KeepModel(keras.callbacks.Callback):
    """Keeps the trained in-memory model."""

    def on_train_end(self, logs=None):
        self.trained = self.model


def _folder_bytes(folder):
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())


def _entities(results):
    return [[(e["start"], e["end"], e["type"], e["text"]) for e in r["entities"]] for r in results]


def _scores(results):
    return [e["score"] for r in results for e in r["entities"]]


@pytest.fixture(scope="module")
def runs(data, checkpoint, tmp_path_factory):
    """One epoch with --lora-rank 4; the trained model saved again as a full
    (plain, adapters merged) folder, for the sizes."""
    tmp = tmp_path_factory.mktemp("lora_runs")
    keep = KeepModel()
    train(_settings(tmp, data, checkpoint, "lora", lora_rank=4), callbacks=[keep])
    Tagger.load(tmp / "lora" / "model").merged().save(tmp / "full")
    return tmp / "lora" / "model", tmp / "full", keep.trained


@pytest.fixture(scope="module")
def loaded(runs):
    """The LoRA run's tagger loaded from its folder (shared: its serving function is traced once)."""
    return Tagger.load(runs[0])


def test_only_adapters_and_head_train(checkpoint):
    encoder = load_encoder(checkpoint)
    model = NerModel(encoder, 9, lstm_units=8)
    layers = enable_lora(encoder, 4)
    assert sorted({layer.name for layer in layers}) == sorted(LORA_LAYERS)
    assert len(layers) == len(LORA_LAYERS) * 2  # two transformer layers
    adapters = {id(v) for layer in layers for v in (layer.lora_kernel_a, layer.lora_kernel_b)}
    inside = {id(v) for v in encoder.weights}
    for v in model.trainable_variables:
        assert id(v) in adapters or id(v) not in inside, v.path  # an adapter or a head weight
    assert {id(v) for v in encoder.trainable_variables} == adapters
    for layer in layers:  # the original kernels (and biases) are frozen
        assert not layer._kernel.trainable and not layer.bias.trainable
    assert not encoder.token_embedding.trainable_weights
    count = lambda vs: sum(int(np.prod(v.shape)) for v in vs)  # noqa: E731
    share = count(model.trainable_variables) / count(model.weights)
    print(f"trainable: {count(model.trainable_variables)} of {count(model.weights)} ({share:.1%}); "
          f"adapters {count(encoder.trainable_variables)} of the encoder's {count(encoder.weights)}")
    assert count(encoder.trainable_variables) < 0.1 * count(encoder.weights)


def test_resume_backup_keeps_adapters_and_frozen_kernels_apart(checkpoint, tmp_path):
    """Keras's BackupAndRestore alone would restore merged kernels and zero
    adapters; kerasbert.training.callbacks.Backup restores both as they were."""
    from kerasbert.training.callbacks import Backup

    def lora_model(seed):
        model = NerModel(load_encoder(checkpoint), 9, lstm_units=8)
        ids = np.array([[2, 7, 9, 11, 3, 0]], "int32")
        inputs = {"token_ids": ids, "segment_ids": np.zeros_like(ids), "padding_mask": (ids > 0).astype("int32")}
        model(inputs)
        layers = enable_lora(model.encoder, 4)
        rng = np.random.default_rng(seed)
        for layer in layers:  # trained adapters: b is no longer zero
            layer.lora_kernel_a.assign(rng.normal(0, 0.1, layer.lora_kernel_a.shape))
            layer.lora_kernel_b.assign(rng.normal(0, 0.1, layer.lora_kernel_b.shape))
        model.compile(optimizer=keras.optimizers.Adam())
        return model, layers, inputs

    model, layers, inputs = lora_model(0)
    original = [np.array(layer._kernel) for layer in layers]
    adapters = [np.array(layer.lora_kernel_b) for layer in layers]
    backup = Backup(backup_dir=str(tmp_path / "backup"))
    backup.set_model(model)
    backup._save_model()
    assert (tmp_path / "backup" / Backup.ADAPTERS_FILE).exists()

    resumed, resumed_layers, _ = lora_model(1)  # other adapters, as a fresh process would not have them
    restore = Backup(backup_dir=str(tmp_path / "backup"))
    restore.set_model(resumed)
    restore.on_train_begin()
    assert len(resumed_layers) == len(original) == len(LORA_LAYERS) * 2
    for layer, kernel, b in zip(resumed_layers, original, adapters):
        np.testing.assert_allclose(np.array(layer._kernel), kernel, atol=1e-5)  # the checkpoint's, frozen
        np.testing.assert_allclose(np.array(layer.lora_kernel_b), b)
        assert np.abs(b).max() > 0.01
    before, after = model(inputs), resumed(inputs)
    for key in before:
        np.testing.assert_allclose(np.array(after[key]), np.array(before[key]), atol=1e-4)


def test_both_apps_offer_lora_rank():
    import dataclasses

    from kerasbert_apps.triples.train import TriplesTrainSettings

    for cls in (NerTrainSettings, TriplesTrainSettings):
        assert {f.name: f.default for f in dataclasses.fields(cls)}["lora_rank"] == 0


def test_lora_folder_holds_adapters_and_head_and_loads_back(runs, loaded, data, checkpoint):
    lora_dir, full_dir, trained = runs
    settings = json.loads((lora_dir / "tagger.json").read_text(encoding="utf-8"))
    assert settings["lora"] == {"rank": 4, "checkpoint": str(checkpoint.resolve())}
    assert not (lora_dir / "model.keras").exists() and (lora_dir / "encoder.lora.h5").exists()
    assert (full_dir / "model.keras").exists() and "lora" not in json.loads((full_dir / "tagger.json").read_text())
    lora_size, full_size = _folder_bytes(lora_dir), _folder_bytes(full_dir)
    print(f"LoRA folder {lora_size:,} bytes, full folder {full_size:,} bytes ({lora_size / full_size:.1%})")
    assert lora_size < 0.3 * full_size

    # the adapters trained (b starts at zero), and loading puts them back
    assert all(np.abs(np.asarray(layer.lora_kernel_b)).max() > 0 for layer in lora_layers(trained))
    in_memory = Tagger(trained, loaded.tokenizer, loaded.tags, max_length=loaded.max_length, temperature=loaded.temperature)
    texts = [line for line in data[1].read_text(encoding="utf-8").split("\n\n") if line.strip()]
    texts = [" ".join(row.split()[0] for row in block.splitlines()) for block in texts]
    ours, theirs = loaded.predict(texts), in_memory.predict(texts)
    assert _entities(ours) == _entities(theirs)
    assert sum(len(e) for e in _entities(ours)) >= 20  # something to compare
    np.testing.assert_allclose(_scores(ours), _scores(theirs), atol=1e-5)
    assert len(loaded.model.weights) == len(trained.weights)
    for a, b in zip(loaded.model.weights, trained.weights):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), atol=1e-6, err_msg=a.path)


def test_a_lora_folder_without_its_checkpoint_is_a_clear_error(runs, tmp_path):
    import shutil

    from kerasbert.errors import KerasbertError

    lora_dir, _, _ = runs
    moved = tmp_path / "model"
    shutil.copytree(lora_dir, moved)
    settings = json.loads((moved / "tagger.json").read_text(encoding="utf-8"))
    settings["lora"]["checkpoint"] = str(tmp_path / "gone")
    (moved / "tagger.json").write_text(json.dumps(settings), encoding="utf-8")
    with pytest.raises(KerasbertError, match="cannot load the encoder checkpoint"):
        Tagger.load(moved)


def test_export_merges_the_adapters_and_gives_what_predict_gives(loaded, data, tmp_path):
    """(Last in the file: it changes the shared tagger's weights.)"""
    import tensorflow as tf

    tagger = loaded
    # Adapters and tag scores large enough to change many entities.
    rng = np.random.default_rng(0)
    for layer in lora_layers(tagger.model):
        layer.lora_kernel_b.assign(rng.normal(0, 0.3, layer.lora_kernel_b.shape))
    kernel, bias = tagger.model.emissions.get_weights()
    tagger.model.emissions.set_weights([rng.normal(0, 2.0, kernel.shape), bias + np.array([-1.0] + [0.5] * (len(bias) - 1))])
    texts = [line for line in data[0].read_text(encoding="utf-8").split("\n\n") if line.strip()]
    texts = [" ".join(row.split()[0] for row in block.splitlines()) for block in texts] + ["", "jack plays"]

    version = tagger.export(tmp_path / "ner")
    loaded = tf.saved_model.load(str(version))
    names = [v.name for v in loaded.variables] if hasattr(loaded, "variables") else []
    assert not any("lora" in name for name in names), names  # merged, no adapters in the graph
    serve = loaded.signatures["serving_default"]
    got = serve(text=tf.constant(texts))
    served = [
        {"entities": [{"start": int(got["start"][i, k]), "end": int(got["end"][i, k]),
                       "type": got["type"][i, k].numpy().decode(), "text": got["mention"][i, k].numpy().decode(),
                       "score": float(got["score"][i, k])} for k in range(int(got["count"][i]))]}
        for i in range(len(texts))
    ]
    predicted = tagger.predict(texts)
    assert _entities(served) == _entities(predicted)
    assert sum(len(e) for e in _entities(served)) > 20
    np.testing.assert_allclose(_scores(served), _scores(predicted), atol=2e-4)
    # the merge changes the kernels: without the adapters, the entities differ
    for layer in lora_layers(tagger.model):
        layer.lora_kernel_b.assign(np.zeros(layer.lora_kernel_b.shape))
    assert _entities(tagger.predict(texts)) != _entities(predicted)


PREVIOUS_FORMAT = Path(__file__).parent / "data" / "lora_b1718a2"


@pytest.mark.parametrize("head", ["crf", "casrel"])
def test_a_lora_folder_of_the_previous_format_loads_without_its_training_state(head, tmp_path):
    """tests/data/lora_b1718a2/ (its README): LoRA folders as a ``--lora-rank``
    run wrote them before ``model.json`` left out the run's compile settings
    (its optimizer and schedule, classes that a fresh ``predict`` process has
    not imported). They load without them and predict what that code predicted."""
    from kerasbert_apps.base import heads
    from kerasbert_apps.ner.train import NER
    from kerasbert_apps.triples.train import TRIPLES

    task = NER if head == "crf" else TRIPLES
    folder = tmp_path / head
    shutil.copytree(PREVIOUS_FORMAT / head, folder)
    settings_path = folder / heads.get(task.name, head).settings_file
    settings = json.loads(settings_path.read_text(encoding="utf-8"))
    assert settings["lora"]["checkpoint"] == "keras_bert_test_checkpoint"  # the toy checkpoint, here
    settings["lora"]["checkpoint"] = str(require_shared("data", "models", "keras_bert_test_checkpoint"))
    settings_path.write_text(json.dumps(settings), encoding="utf-8")
    config = json.loads((folder / "model.json").read_text(encoding="utf-8"))
    assert config["compile_config"]["optimizer"]["class_name"] == "GroupedAdamW"  # the previous format
    pipeline = task.load(folder)
    assert getattr(pipeline.model, "optimizer", None) is None and not pipeline.model.compiled
    expected = json.loads((folder / "expected.json").read_text(encoding="utf-8"))
    key = "entities" if head == "crf" else "triples"
    assert sum(len(row[key]) for row in expected) > 0  # a check that could fail
    same_results(pipeline.predict([row["text"] for row in expected]), expected)


def test_a_lora_folder_carries_no_training_state(runs):
    """The run's ``model.json`` has the model's config and no compile settings."""
    config = json.loads((runs[0] / "model.json").read_text(encoding="utf-8"))
    assert config["class_name"] == "NerModel" and "compile_config" not in config
