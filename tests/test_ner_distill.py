"""Distillation (``kerasbert ner distill``) on the toy checkpoint: the student
encoder's initialisation, the loss, and a CLI run whose student is an
ordinary model folder and whose encoder saves to the official layout."""

import json

import keras
import numpy as np
import pytest

from kerasbert_apps.ner.heads.bio.pipeline import Tagger
from kerasbert_apps.ner.train import NerTrainSettings
from kerasbert_apps.ner.train import train
from conftest import conll_slice
from conftest import require_shared
from kerasbert.cli import main
from kerasbert.training.distill import every_other_layer
from kerasbert.training.distill import student_encoder
from kerasbert.errors import KerasbertError
from kerasbert.checkpoints.loader import load_encoder
from kerasbert.checkpoints.loader import save_encoder


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("distill_data")
    return conll_slice(tmp, "train.conll", 0, 200), conll_slice(tmp, "dev.conll", 300, 40)


@pytest.fixture(scope="module")
def teacher(data, tmp_path_factory):
    """A toy tagger (2 encoder layers, 4 wide) trained for one epoch."""
    output = tmp_path_factory.mktemp("teacher") / "run"
    train(NerTrainSettings(
        checkpoint=str(require_shared("data", "models", "keras_bert_test_checkpoint")), train=str(data[0]),
        dev=str(data[1]), output=str(output), epochs=1, batch_size=8, max_length=16, max_train_examples=64,
        lstm_units=8, seed=7, learning_rate=1e-3, calibrate=False,
    ))
    return Tagger.load(output)


def _inputs(tagger, texts):
    w = tagger.windows_numpy(texts)
    return {k: w[k] for k in ("token_ids", "segment_ids", "padding_mask")}


def test_every_other_layer_spreads_the_students_layers_over_the_teacher():
    assert every_other_layer(6, 3) == [0, 2, 4]
    assert every_other_layer(12, 6) == [0, 2, 4, 6, 8, 10]
    assert every_other_layer(6, 4) == [0, 1, 3, 4]
    assert every_other_layer(6, 6) == list(range(6))
    for bad in (0, 7):
        with pytest.raises(KerasbertError, match="between 1 and the teacher's 6"):
            every_other_layer(6, bad)


def test_student_encoder_copies_the_chosen_layers(teacher, tmp_path):
    encoder = teacher.model.encoder
    student = student_encoder(encoder, [1])
    assert student.num_layers == 1 and type(student) is type(encoder)
    for name, source in [("transformer_layer_0", "transformer_layer_1")] + [
            (name, name) for name in ("token_embedding", "position_embedding", "embeddings_layer_norm", "pooled_dense")]:
        assert len(student.get_layer(name).weights) == len(encoder.get_layer(source).weights) > 0, name
        for a, b in zip(student.get_layer(name).weights, encoder.get_layer(source).weights):
            np.testing.assert_array_equal(a.numpy(), b.numpy())
    # All the teacher's layers, in order: the same encoder.
    x = _inputs(teacher, ["EU rejects German call", "Peter Blackburn"])
    same = student_encoder(encoder, [0, 1])(x)["sequence_output"]
    np.testing.assert_allclose(same, encoder(x)["sequence_output"], atol=1e-6)
    with pytest.raises(KerasbertError, match="between 0 and 1"):
        student_encoder(encoder, [2])
    # The student saves to the official layout and loads back like any encoder.
    save_encoder(student, tmp_path / "official", teacher.tokenizer)
    assert (tmp_path / "official" / "bert_config.json").exists()
    assert json.loads((tmp_path / "official" / "bert_config.json").read_text())["num_hidden_layers"] == 1
    loaded = load_encoder(tmp_path / "official")
    np.testing.assert_allclose(loaded(x)["sequence_output"], student(x)["sequence_output"], atol=1e-6)


def test_distillation_loss(teacher):
    model = teacher.student([0, 1]).model  # the teacher's own layers: a copy of it
    x = _inputs(teacher, ["EU rejects German call to boycott British lamb .", "Peter Blackburn", "BRUSSELS 1996-08-22"])
    y_pred = model(x)
    tags = np.asarray(y_pred["tags"])
    own = np.asarray(y_pred["potentials"])
    ones = np.ones_like(tags)
    model.soft_weight = 1.0
    assert float(model.distillation_loss(x, {"tags": tags, "teacher": own, "gold": ones}, y_pred)) == pytest.approx(0.0, abs=1e-9)
    assert float(model.distillation_loss(x, {"tags": tags, "teacher": own + 1.0, "gold": ones}, y_pred)) > 1.0
    model.soft_weight = 0.0
    other = (tags + 1) % len(teacher.tags)
    full = float(model.distillation_loss(x, {"tags": other, "teacher": own, "gold": ones}, y_pred))
    assert full == pytest.approx(float(model.task_loss(x, other, y_pred)), rel=1e-6)
    # A row without gold labels (an --unlabeled text) adds nothing to the gold loss.
    gold = ones.copy()
    gold[1] = 0
    masked = float(model.distillation_loss(x, {"tags": other, "teacher": own, "gold": gold}, y_pred))
    keep = [0, 2]
    kept = {k: v[keep] for k, v in x.items()}
    expected = float(model.task_loss(kept, other[keep], {k: np.asarray(v)[keep] for k, v in y_pred.items()}))
    assert masked == pytest.approx(expected, rel=1e-5)


def test_distill_cli_gives_an_ordinary_model_that_learns_its_teachers_scores(teacher, data, tmp_path, capsys):
    unlabeled = tmp_path / "more.txt"
    unlabeled.write_text("Germany beat Italy in Rome .\n\nJohn Smith works for Reuters .\n", encoding="utf-8")
    teacher_dir = tmp_path / "teacher"
    teacher.set_temperature(3.0)  # the teacher's score temperature is not the student's
    teacher.save(teacher_dir)
    teacher.set_temperature(1.0)

    def distill(name, soft_weight, *more):
        code = main(["ner", "distill", "--teacher", str(teacher_dir), "--train", str(data[0]), "--dev", str(data[1]),
                     "--student-layers", "1", "--soft-weight", soft_weight, "--output", str(tmp_path / name),
                     "--epochs", "2", "--batch-size", "8", "--max-train-examples", "64", "--learning-rate", "1e-3",
                     *more])
        assert code == 0
        return Tagger.load(tmp_path / name), capsys.readouterr().out

    student, printed = distill("soft", "1.0", "--unlabeled", str(unlabeled), "--teacher-layers", "1", "--save-encoder")
    assert "student: 1 of the teacher's 2 encoder layers, initialised from teacher layers 1" in printed
    assert "2 texts; 1 empty lines skipped" in printed
    assert "unlabeled features: 2 examples -> 2 sequences" in printed
    assert "teacher on dev" in printed
    metrics = json.loads((tmp_path / "soft" / "metrics.json").read_text())
    assert metrics["teacher_layers"] == [1] and "f1" in metrics["teacher_dev"]
    assert student.model.encoder.num_layers == 1 and student.tags == teacher.tags
    assert student.temperature == metrics["score_temperature"]["temperature"] != 3.0  # fitted on dev (--calibrate)

    # Trained on the teacher's scores alone, the student is closer to them
    # than the same student trained on the gold labels alone.
    gold_only, printed = distill("gold", "0.0", "--no-calibrate")
    assert "initialised from teacher layers 0" in printed
    assert gold_only.temperature == 1.0 and "score_temperature" not in json.loads(
        (tmp_path / "gold" / "metrics.json").read_text())
    x = _inputs(teacher, ["EU rejects German call to boycott British lamb .", "Peter Blackburn in BRUSSELS"])
    target = np.asarray(teacher.model(x)["potentials"])
    mask = x["padding_mask"][..., None]

    def distance(tagger):
        return float(np.sum((np.asarray(tagger.model(x)["potentials"]) - target) ** 2 * mask))

    print(f"squared distance to the teacher's scores: soft {distance(student):.5f}, gold {distance(gold_only):.5f}")
    assert distance(student) < 0.5 * distance(gold_only)

    # An ordinary model folder: predict; its encoder in the official layout.
    assert [r["text"] for r in student.predict(["Peter Blackburn in Brussels", ""])] == ["Peter Blackburn in Brussels", ""]
    encoder = load_encoder(tmp_path / "soft" / "encoder")
    np.testing.assert_allclose(encoder(x)["sequence_output"], student.model.encoder(x)["sequence_output"], atol=1e-6)
    keras.backend.clear_session()


def test_distill_refuses_bad_settings(teacher, data, tmp_path, capsys):
    base = ["ner", "distill", "--teacher", str(tmp_path), "--train", str(data[0]), "--dev", str(data[1]),
            "--output", str(tmp_path / "o")]
    assert main(base + ["--student-layers", "2", "--teacher-layers", "0"]) == 2
    assert "teacher_layers names 1 layers but student_layers is 2" in capsys.readouterr().err
    assert main(base + ["--soft-weight", "1.5"]) == 2
    assert "soft_weight must be between 0 and 1" in capsys.readouterr().err
    assert main(["ner", "distill", "--train", str(data[0])]) == 2
    assert "teacher (--teacher)" in capsys.readouterr().err
