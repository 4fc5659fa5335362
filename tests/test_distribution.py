"""Distributed training, beyond the MirroredStrategy and MultiWorkerMirroredStrategy
runs of tests/test_ner_train.py: on the JAX backend (training steps always
jitted), one device and
``--strategy mirrored`` (``keras.distribution.DataParallel``) over 2 virtual CPU
devices (``XLA_FLAGS=--xla_force_host_platform_device_count=2``), both apps,
the same losses and dev scores, and the model folder a JAX run writes exports
through TensorFlow as usual; batches split evenly over devices; a worker that
is not the chief restores from the chief's backup and writes none."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from conftest import REPO_ROOT
from conftest import conll_slice
from conftest import require_module
from conftest import require_shared
from conftest import webnlg_slice

SCRIPT = r"""
import json, sys
import keras
assert keras.backend.backend() == "jax", keras.backend.backend()
import jax
from kerasbert_apps.ner.train import NerTrainSettings, train as train_ner
from kerasbert_apps.triples.train import TriplesTrainSettings, train as train_triples

ner, triples, devices = json.loads(sys.argv[1]), json.loads(sys.argv[2]), int(sys.argv[3])
assert len(jax.devices()) == devices, jax.devices()
# The training steps are jitted on JAX even with jit_compile off (the
# default): unjitted, Keras runs them op by op, many times slower.
from kerasbert.training.fit import compile_for_training

probe = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1, name="triples_head_probe")])
compile_for_training(probe, 4, TriplesTrainSettings(**triples), "triples_head_")
assert TriplesTrainSettings(**triples).jit_compile is False and probe.jit_compile is True, probe.jit_compile
for settings, train in ((NerTrainSettings(**ner), train_ner), (TriplesTrainSettings(**triples), train_triples)):
    train(settings)
    print("RESULT", open(settings.output + "/history.jsonl").read().replace("\n", "|"))
"""


def _run_on_jax(tmp_path, data, devices):
    toy = str(require_shared("data", "models", "keras_bert_test_checkpoint"))
    strategy = "mirrored" if devices > 1 else "default"
    common = dict(checkpoint=toy, epochs=1, batch_size=8, max_length=16, seed=7, dropout=0.0, strategy=strategy)
    # CRF head without the BiLSTM: XLA on CPU takes most of this test's time
    # compiling, and the BiLSTM's scan doubled it
    ner = dict(common, train=str(data["ner"][0]), dev=str(data["ner"][1]), output=str(tmp_path / f"ner{devices}"),
               lstm=False, calibrate=False)
    triples = dict(common, train=str(data["triples"][0]), dev=str(data["triples"][1]),
                   output=str(tmp_path / f"triples{devices}"))
    env = dict(os.environ, KERAS_BACKEND="jax", JAX_PLATFORMS="cpu", TF_CPP_MIN_LOG_LEVEL="3",
               XLA_FLAGS=f"{os.environ.get('XLA_FLAGS', '')} --xla_force_host_platform_device_count={devices}".strip())
    run = subprocess.run([sys.executable, "-c", SCRIPT, json.dumps(ner), json.dumps(triples), str(devices)],
                         capture_output=True, text=True, env=env, cwd=REPO_ROOT, timeout=900)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-3000:]
    histories = [[json.loads(r) for r in line[len("RESULT "):].split("|") if r.strip()]
                 for line in run.stdout.splitlines() if line.startswith("RESULT ")]
    return run.stdout, histories


def _one_width(records, text_of, count, toy):
    """The first ``count`` records whose text is 7 to 14 WordPiece tokens of
    the toy vocabulary: one window each, every batch padded to width 16 (a
    multiple of 8), so JAX compiles each step function once, not per width."""
    from kerasbert.checkpoints.loader import load_tokenizer

    tokenizer = load_tokenizer(toy)
    chosen = [r for r in records if 7 <= len(tokenizer.tokenize(text_of(r))) <= 14][:count]
    assert len(chosen) == count
    return chosen


def _data(tmp):
    """16 training and 8 dev texts of one width for each app."""
    toy = require_shared("data", "models", "keras_bert_test_checkpoint")
    sentences = conll_slice(tmp, "all.conll", 0, 400).read_text(encoding="utf-8").split("\n\n")
    sentences = _one_width(sentences, lambda s: " ".join(line.split()[0] for line in s.splitlines() if line), 24, toy)
    (tmp / "train.conll").write_text("\n\n".join(sentences[:16]) + "\n", encoding="utf-8")
    (tmp / "dev.conll").write_text("\n\n".join(sentences[16:]) + "\n", encoding="utf-8")
    train, _ = webnlg_slice(tmp, 2000, 0)
    records = _one_width(json.loads(train.read_text(encoding="utf-8")), lambda r: r["text"], 24, toy)
    train.write_text(json.dumps(records[:16]), encoding="utf-8")
    (tmp / "dev.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records[16:]), encoding="utf-8")
    return {"ner": (tmp / "train.conll", tmp / "dev.conll"), "triples": (train, tmp / "dev.jsonl")}


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    require_module("jax")
    tmp = tmp_path_factory.mktemp("jax_runs")
    data = _data(tmp)
    return tmp, _run_on_jax(tmp, data, 1), _run_on_jax(tmp, data, 2)


def test_data_parallel_on_two_devices_agrees_with_one(runs):
    _, (_, one), (stdout, two) = runs
    assert "DataParallel (keras.distribution, JAX) over 2 devices" in stdout
    assert len(one) == len(two) == 2  # NER, triples
    assert one[0][0]["val_f1"] > 0  # the NER model predicts entities: its dev F1 compares something
    for app_one, app_two in zip(one, two):
        assert [h["epoch"] for h in app_one] == [h["epoch"] for h in app_two] == [1]
        for a, b in zip(app_one, app_two):
            # one program over the whole batch, split by XLA: equal up to the
            # order of the reductions
            assert b["loss"] == pytest.approx(a["loss"], rel=1e-3)
            assert b["val_f1"] == pytest.approx(a["val_f1"], abs=1e-6)


def test_a_model_folder_trained_on_jax_exports_through_tensorflow(runs, tmp_path):
    import tensorflow as tf

    from kerasbert_apps.ner.heads.bio.pipeline import Tagger

    folder = runs[0] / "ner2" / "model"
    texts = ["EU rejects German call to boycott British lamb .", "Peter Blackburn", "BRUSSELS 1996-08-22", ""]
    tagger = Tagger.load(folder)
    export = tagger.export(tmp_path / "export")
    serve = tf.saved_model.load(str(export)).signatures["serving_default"]
    got = serve(text=tf.constant(texts))
    predicted = tagger.predict(texts)
    assert len(predicted) == len(texts) == got["count"].shape[0]
    assert sum(len(result["entities"]) for result in predicted) >= 3, predicted  # something to compare
    for i, result in enumerate(predicted):
        n = int(got["count"][i])
        assert [(e["start"], e["end"], e["type"]) for e in result["entities"]] == \
               [(int(got["start"][i, k]), int(got["end"][i, k]), got["type"][i, k].numpy().decode()) for k in range(n)]
        np.testing.assert_allclose([e["score"] for e in result["entities"]], got["score"][i, :n].numpy(), atol=2e-4)


def test_batches_split_evenly_over_devices_leave_out_counted_rows():
    from kerasbert.training.batching import BucketedBatches

    features = {"token_ids": [np.arange(1 + i % 7) for i in range(163)]}
    batches = BucketedBatches(features, 8)
    assert sorted(len(b) for b in batches.batches)[0] == 3  # 163 = 20 x 8 + 3
    assert batches.split_evenly(2) == 1 and len(batches) == 21
    assert all(len(b) % 2 == 0 for b in batches.batches)
    kept = [set(np.concatenate(batches.batches))]
    for _ in range(5):
        batches.on_epoch_end()
        assert sum(len(b) for b in batches.batches) == 162
        kept.append(set(np.concatenate(batches.batches)))
    assert len(set.union(*kept)) == 163  # a different row is left out from epoch to epoch
    already_even = BucketedBatches({"token_ids": features["token_ids"][:160]}, 8)
    order = [list(b) for b in already_even.batches]
    assert already_even.split_evenly(2) == 0 and [list(b) for b in already_even.batches] == order  # untouched


def test_a_worker_that_is_not_the_chief_restores_the_backup_and_writes_none(tmp_path):
    import keras

    from kerasbert.training.callbacks import Backup

    x, y = np.random.default_rng(0).normal(size=(32, 4)), np.zeros((32, 1))

    def model():
        m = keras.Sequential([keras.Input((4,)), keras.layers.Dense(1)])
        m.compile(optimizer="sgd", loss="mse")
        return m

    class Epochs(keras.callbacks.Callback):
        def __init__(self):
            super().__init__()
            self.seen = []

        def on_epoch_begin(self, epoch, logs=None):
            self.seen.append(epoch)

    backup = tmp_path / "backup"
    model().fit(x, y, epochs=1, verbose=0, callbacks=[Backup(str(backup), write=False)])
    assert not backup.exists()  # the worker wrote nothing
    chief = model()
    chief.fit(x, y, epochs=1, verbose=0, callbacks=[Backup(str(backup), delete_checkpoint=False)])
    files = {p.name: p.stat().st_mtime_ns for p in backup.rglob("*")}
    assert files  # the chief's backup after epoch 1 (as if interrupted in epoch 2)
    worker, epochs = model(), Epochs()
    worker.fit(x, y, epochs=2, verbose=0, callbacks=[Backup(str(backup), write=False), epochs])
    assert epochs.seen == [1]  # resumed after the chief's epoch 1
    assert {p.name: p.stat().st_mtime_ns for p in backup.rglob("*")} == files  # neither rewritten nor deleted
