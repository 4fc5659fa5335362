"""Triples end to end on the toy checkpoint (mechanics, not accuracy): train /
evaluate / predict from the CLI, artifacts, true offsets, mixed precision,
resume, and bad input at the CLI."""

import json
from pathlib import Path

import keras
import numpy as np
import pytest

from kerasbert_apps.triples.data import read_triples_file
from kerasbert_apps.triples.evaluate import score
from kerasbert_apps.triples.heads.casrel.pipeline import Extractor
from kerasbert_apps.triples.train import TriplesTrainSettings
from kerasbert_apps.triples.train import train
from conftest import interrupt_then_resume
from conftest import require_shared
from conftest import seen_precision
from conftest import webnlg_slice
from conftest import train_on_two_logical_cpus
from kerasbert.cli import main


def toy():
    return require_shared("data", "models", "keras_bert_test_checkpoint")


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    """64 WebNLG training sentences (a JSON array) and 16 dev sentences (JSON lines)."""
    return webnlg_slice(tmp_path_factory.mktemp("triples_data"), 64, 16)


@pytest.fixture(scope="module")
def trained(data, tmp_path_factory):
    output = tmp_path_factory.mktemp("triples_run")
    status = main([
        "triples", "train", "--checkpoint", str(toy()), "--train", str(data[0]), "--dev", str(data[1]),
        "--output", str(output), "--epochs", "2", "--batch-size", "8", "--max-length", "16", "--seed", "7",
    ])
    assert status == 0
    return output


def test_training_lowers_the_loss_and_writes_artifacts(trained, data):
    history = [json.loads(line) for line in (trained / "history.jsonl").read_text().splitlines()]
    assert [h["epoch"] for h in history] == [1, 2]
    assert history[1]["loss"] < history[0]["loss"]
    assert all("val_f1" in h for h in history)
    assert (trained / "history.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"  # the CLI's training plot
    for name in ("model.keras", "vocab.txt", "extractor.json", "dev_scores.json"):
        assert (trained / "model" / name).exists()
    config = json.loads((trained / "model" / "extractor.json").read_text())
    assert config["max_length"] == 16 and config["thresholds"]["subject_start"] == 0.5
    assert config["predicates"] == sorted(read_triples_file(data[0]).report.predicates)
    metrics = json.loads((trained / "metrics.json").read_text())
    assert metrics["best_epoch"] in (1, 2) and "by_overlap" in metrics["dev"]
    assert json.loads((trained / "settings.json").read_text())["epochs"] == 2
    assert not (trained / "backup").exists()
    assert list((trained / "logs").iterdir())  # TensorBoard


@pytest.mark.usefixtures("one_load_per_model_folder")  # one load of the run's model
def test_predict_cli_offsets_are_true(trained, tmp_path, capsys):
    texts = ["Bananaman was created by Steve Bright and starred Tim Brooke-Taylor .",
             "Alan Bean ( born in Wheeler , Texas ) was a test pilot ."]
    inp = tmp_path / "in.txt"
    inp.write_text(json.dumps({"text": texts[0]}) + "\n" + texts[1] + "\n" + json.dumps({"text": texts[0]}) + "\n")
    # Thresholds 0: every pointer fires, so the untrained toy model outputs many triples to check.
    assert main(["triples", "predict", "--model", str(trained / "model"), str(inp),
                 "--threshold-start", "0", "--threshold-end", "0"]) == 0
    results = [json.loads(line) for line in capsys.readouterr().out.splitlines() if line.startswith("{")]
    assert [r["text"] for r in results] == [texts[0], texts[1], texts[0]]
    predicates = set(json.loads((trained / "model" / "extractor.json").read_text())["predicates"])
    assert all(r["triples"] for r in results)
    for result in results:
        for t in result["triples"]:
            for part in ("subject", "object"):
                span = t[part]
                assert result["text"][span["start"] : span["end"]] == span["text"] != ""
            assert t["predicate"] in predicates and 0 <= t["score"] <= 1
    assert results[0]["triples"] == results[2]["triples"]
    # default thresholds: a valid (possibly empty) answer
    assert main(["triples", "predict", "--model", str(trained / "model"), str(inp)]) == 0
    assert len([l for l in capsys.readouterr().out.splitlines() if l.startswith("{")]) == 3


@pytest.mark.usefixtures("one_load_per_model_folder")  # one load of the run's model
def test_evaluate_cli_prints_and_writes_json(trained, data, tmp_path, capsys):
    beside = sorted(Path(data[1]).parent.iterdir())
    assert main(["triples", "evaluate", "--model", str(trained / "model"), "--data", str(data[1])]) == 0
    printed = capsys.readouterr().out
    assert "exact" in printed and "partial" in printed and "scores written" not in printed
    assert sorted(Path(data[1]).parent.iterdir()) == beside  # without --output nothing is written
    out = tmp_path / "scores.json"
    assert main(["triples", "evaluate", "--model", str(trained / "model"), "--data", str(data[1]),
                 "--output", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "exact" in printed and "partial" in printed and "SEO" in printed
    assert f"scores written to {out}" in printed
    scores = json.loads(out.read_text())
    expected = json.loads((trained / "model" / "dev_scores.json").read_text())
    assert scores["exact"] == expected["exact"]  # same model, same data, same thresholds
    assert scores["exact"]["gold"] == sum(len({t.key() for t in e.triples}) for e in read_triples_file(data[1]).examples)
    # with thresholds 0 the CLI agrees with the Python API on a non-trivial answer
    assert main(["triples", "evaluate", "--model", str(trained / "model"), "--data", str(data[1]), "--output", str(out),
                 "--mode", "partial", "--threshold-start", "0", "--threshold-end", "0"]) == 0
    scores = json.loads(out.read_text())
    extractor = Extractor.load(trained / "model").with_thresholds((0.0, 0.0))
    examples = read_triples_file(data[1]).examples
    again = score(examples, extractor.predict([e.text for e in examples]), mode="partial")
    assert scores["mode"] == "partial" and scores["exact"]["predicted"] > 0
    assert scores["exact"] == again["exact"] and scores["partial"] == again["partial"]


def _toy_settings(tmp_path, data, **overrides):
    config = dict(checkpoint=str(toy()), train=str(data[0]), dev=str(data[1]), output=str(tmp_path / "run"),
                  epochs=1, batch_size=8, max_length=16, max_train_examples=32, max_dev_examples=8, seed=3)
    config.update(overrides)
    return TriplesTrainSettings(**config)


def test_mixed_bfloat16_trains_and_decodes_with_a_schema(tmp_path, data):
    schema = require_shared("data", "webnlg_exact", "rel2id.json")
    seen = seen_precision()
    try:
        train(_toy_settings(tmp_path, data, precision="mixed_bfloat16", schema=str(schema)), callbacks=[seen])
        extractor = Extractor.load(tmp_path / "run" / "model").with_thresholds((0.0, 0.0))
        (result,) = extractor.predict(["Alan Bean was born in Wheeler , Texas ."])
    finally:
        keras.mixed_precision.set_global_policy("float32")
    assert "bfloat16" in seen.compute_dtypes, vars(seen)
    assert len(extractor.predicates) == 216  # the schema's, not only the training data's
    history = [json.loads(line) for line in (tmp_path / "run" / "history.jsonl").read_text().splitlines()]
    assert np.isfinite(history[0]["loss"])
    assert result["triples"] and all(
        result["text"][t["object"]["start"] : t["object"]["end"]] == t["object"]["text"] for t in result["triples"])


def test_resume_continues_an_interrupted_run(tmp_path, data):
    settings = _toy_settings(tmp_path, data, epochs=2, backup_every_steps=2)
    history = interrupt_then_resume(train, settings, _toy_settings(tmp_path, data, epochs=2), epoch=1, batch=2)
    assert [h["epoch"] for h in history] == [1, 2]


def test_mirrored_on_two_logical_devices_agrees_with_one_device(tmp_path, data):
    """The same run in this process (one device) and in a process with two
    logical CPUs under MirroredStrategy (devices must be set before TensorFlow starts)."""
    configs = {strategy: _toy_settings(tmp_path, data, strategy=strategy, output=str(tmp_path / strategy), dropout=0.0,
                                     epochs=2)
               for strategy in ("default", "mirrored")}
    two = train_on_two_logical_cpus(configs["mirrored"], "kerasbert_apps.triples.train")
    train(configs["default"])
    one = [json.loads(l) for l in (tmp_path / "default" / "history.jsonl").read_text().splitlines()]
    assert len(one) == len(two) == 2
    for a, b in zip(one, two):  # measured 0.1% apart; a wrong loss scaling is 100% off
        assert b["loss"] == pytest.approx(a["loss"], rel=1e-2)


@pytest.mark.parametrize(
    "name, content, problem",
    [
        ("bad.jsonl", '{"text": "a b", "triple_list": [["a", "r", "b"]]}\n{"text": oops}\n', "bad.jsonl, line 2: invalid JSON"),
        ("bad.json", '[\n {"text": "a b", "triple_list": [["a", "r", "b"]]},\n {"text": "a b", "triple_list": [["a", "r"]]}\n]\n',
         "bad.json, record 2 (line 3): each triple must be a 3-item list"),
        ("bad.json", '{"sentence": "a b", "triple_list": []}\n', 'bad.json, line 1: missing "text"'),
        ("bad.json", "", "bad.json: no examples in the file (empty)"),
        ("bad.json", b'{"text": "caf\xe9", "triple_list": []}\n', "bad.json, line 1: not UTF-8"),
    ],
)
def test_bad_data_at_the_cli_is_a_clear_error(tmp_path, data, capsys, name, content, problem):
    bad = tmp_path / name
    if isinstance(content, bytes):
        bad.write_bytes(content)
    else:
        bad.write_text(content)
    status = main(["triples", "train", "--checkpoint", "x", "--train", str(bad), "--dev", str(data[1]),
                   "--output", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert status == 2
    assert problem in err and "Traceback" not in err
    assert not (tmp_path / "out").exists()  # nothing written for bad data
    status = main(["triples", "evaluate", "--model", str(tmp_path / "nomodel"), "--data", str(bad)])
    err = capsys.readouterr().err
    assert status == 2 and problem in err and "Traceback" not in err


def test_missing_model_or_input_is_a_clear_error(tmp_path, data, trained, capsys):
    assert main(["triples", "evaluate", "--model", str(tmp_path), "--data", str(data[1])]) == 2
    assert "not a kerasbert triples model folder" in capsys.readouterr().err
    assert main(["triples", "predict", "--model", str(trained / "model"), str(tmp_path / "missing.txt")]) == 2
    err = capsys.readouterr().err
    assert "missing.txt: cannot open" in err and "Traceback" not in err
    # --output where no one can write, root included: under a file.
    (tmp_path / "a_file").write_text("")
    status = main(["triples", "evaluate", "--model", str(trained / "model"), "--data", str(data[1]),
                   "--output", str(tmp_path / "a_file" / "scores.json")])
    err = capsys.readouterr().err
    assert status == 2 and "choose another --output" in err and "Traceback" not in err
