"""The README's first command, ``kerasbert ner demo`` on the shipped sample
corpus and the starter encoder, run exactly as a user runs it (the installed
console script, a fresh process, default settings: :func:`conftest.demo_run`);
then the NER CLI on the real tagger it trained: evaluate (also with the run
folder and reader options), predict with true offsets, and predictions in
annotation-tool formats read back by the kit's readers. These tests share the
one demo run, so they live in this one file (``--dist loadfile``)."""

import json
import re
from pathlib import Path

import pytest

from conftest import conll_slice
from kerasbert.cli import main


@pytest.mark.slow
def test_starter_demo_trains_evaluates_predicts_and_exports(demo_run):
    out = demo_run.stdout
    print(f"demo: {demo_run.seconds:.0f} s\n" + out[out.index("== 2/4"):])

    demo = demo_run.folder
    for artifact in ("run/model/model.keras", "run/history.jsonl", "run/history.png", "run/metrics.json",
                     "test_scores.json", "export/1/saved_model.pb", "export/1/assets.extra/tf_serving_warmup_requests"):
        assert (demo / artifact).exists(), artifact
        assert str(Path("kerasbert-demo") / Path(artifact).parts[0]) in out or artifact.startswith("run/model/")
    scores = json.loads((demo / "test_scores.json").read_text())
    assert scores["f1"] >= 0.6, scores["f1"]  # real learning: measured 0.87 on 2 cores (an untrained head gets ~0)
    f1_printed = float(re.search(r"Test F1 ([0-9]+\.[0-9]+)", out).group(1))
    assert abs(f1_printed - scores["f1"]) < 1e-3
    prediction = json.loads(out[out.index("== 3/4 predict") :].splitlines()[1])
    assert prediction["entities"] and all(prediction["text"][e["start"]:e["end"]] == e["text"] for e in prediction["entities"])
    assert "entities from the graph" in out


@pytest.fixture(autouse=True)
def _one_load(one_load_per_model_folder):
    """The CLI tests below call ``main`` a dozen times on the same model
    folders (:func:`conftest.one_load_per_model_folder`): the model is loaded
    once per folder, the file's biggest cost after the demo otherwise."""


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    """100 CoNLL-2003 dev sentences: data the tagger was not trained on."""
    return conll_slice(tmp_path_factory.mktemp("ner_data"), "dev.conll", 300, 100)


@pytest.fixture(scope="module")
def trained(demo_run):
    """A real run shared with the demo test: ``kerasbert ner demo`` trains a
    MiniLM tagger on the shipped sample corpus (4 epochs) in a fresh process;
    this is its training output folder."""
    return demo_run.run


def test_training_learns_and_writes_artifacts(trained):
    history = [json.loads(line) for line in (trained / "history.jsonl").read_text().splitlines()]
    assert [h["epoch"] for h in history] == [1, 2, 3, 4]
    assert history[-1]["loss"] < history[0]["loss"]
    metrics = json.loads((trained / "metrics.json").read_text())
    print("demo run, dev F1:", metrics["dev"]["f1"])
    assert metrics["dev"]["f1"] > 0.5  # it learned something real (an untrained head gets ~0)
    fitted = metrics["score_temperature"]  # --calibrate (the default): T fitted on dev, in the model folder
    assert json.loads((trained / "model" / "tagger.json").read_text())["temperature"] == fitted["temperature"]
    assert fitted["entities"] > 0 and (fitted["temperature"] != 1.0 or fitted["correct"] == fitted["entities"])
    for name in ("model.keras", "vocab.txt", "tagger.json", "dev_scores.json"):
        assert (trained / "model" / name).exists()
    assert not (trained / "backup").exists()  # removed after a finished run
    assert (trained / "history.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"  # the training plot
    assert json.loads((trained / "settings.json").read_text())["epochs"] == 4
    assert list((trained / "logs").iterdir())  # TensorBoard


def test_evaluate_cli_prints_and_writes_json(trained, capsys, tmp_path):
    """The model's own dev split, scored by the CLI, gives the dev scores saved with the model."""
    out = tmp_path / "scores.json"
    dev = json.loads((trained / "settings.json").read_text())["dev"]
    assert main(["ner", "evaluate", "--model", str(trained / "model"), "--data", dev, "--output", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "strict" in printed and "PER" in printed
    assert "calibration: ECE" in printed and "10 equal-width score bins" in printed
    scores = json.loads(out.read_text())
    calibration = scores["calibration"]
    assert 0 <= calibration["ece"] <= 1 and calibration["entities"] == scores["predicted_entities"]
    expected = json.loads((trained / "model" / "dev_scores.json").read_text())
    assert scores["f1"] == pytest.approx(expected["f1"])  # same model, same data


def test_evaluate_takes_the_run_folder_and_the_reader_options(trained, data, capsys, tmp_path):
    """``--model OUTPUT`` (the training output folder) uses OUTPUT/model and
    says so; ``evaluate`` takes the reader options ``train`` takes: the same
    data with the tags in the second of four columns scores the same."""
    moved = tmp_path / "moved.conll"
    rows = []
    for line in data.read_text(encoding="utf-8").splitlines():
        cells = line.split()
        rows.append(" ".join([cells[0], cells[-1]] + cells[1:-1]) if cells else "")
    moved.write_text("\n".join(rows) + "\n", encoding="utf-8")
    original, out = tmp_path / "original.json", tmp_path / "scores.json"
    assert main(["ner", "evaluate", "--model", str(trained / "model"), "--data", str(data), "--output", str(original)]) == 0
    assert main(["ner", "evaluate", "--model", str(trained), "--data", str(moved), "--tag-column", "1",
                 "--scheme", "iob1", "--format", "conll", "--output", str(out)]) == 0
    assert f"model: {trained / 'model'}" in capsys.readouterr().err
    expected = json.loads(original.read_text())
    assert expected["f1"] > 0  # the sample-trained tagger finds CoNLL entities too
    assert json.loads(out.read_text())["f1"] == pytest.approx(expected["f1"])


def test_predict_cli_offsets_are_true(trained, tmp_path, capsys):
    texts = ["EU rejects German call to boycott British lamb .", "Peter Blackburn visited Paris in March 1996 ."]
    inp = tmp_path / "in.jsonl"
    inp.write_text("\n".join(json.dumps({"text": t}) for t in texts) + "\n" + texts[0] + "\n")
    assert main(["ner", "predict", "--model", str(trained / "model"), str(inp)]) == 0
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines() if line.startswith("{")]
    assert [r["text"] for r in lines] == texts + [texts[0]]
    assert any(lines[1]["entities"])
    for result in lines:
        for e in result["entities"]:
            assert result["text"][e["start"]:e["end"]] == e["text"]
            assert e["type"] in {"PER", "LOC", "ORG", "MISC"} and 0 <= e["score"] <= 1
    assert lines[0]["entities"] == lines[2]["entities"]


def test_predict_output_formats_round_trip_through_the_readers(trained, tmp_path, capsys):
    """``ner predict --output-format`` jsonl / label-studio / doccano: the
    kit's own readers read each back to the predicted entities, and the model
    scored against its own Label Studio pre-annotations (read with
    ``--use-predictions``) gets F1 1."""
    from kerasbert_apps.ner.readers import read_ner_file

    texts = ["Maria Sanchez joined Siemens in Munich after the Berlin Marathon.", "Nothing to see here.",
             "Angela Merkel met Emmanuel Macron in Berlin on Tuesday."]
    inp = tmp_path / "in.txt"
    inp.write_text("\n".join(texts) + "\n", encoding="utf-8")
    written = {}
    for fmt in ("jsonl", "label-studio", "doccano"):
        assert main(["ner", "predict", "--model", str(trained), str(inp), "--output-format", fmt]) == 0
        written[fmt] = tmp_path / f"out.{fmt}"
        written[fmt].write_text(capsys.readouterr().out, encoding="utf-8")
    predicted = [json.loads(line) for line in written["jsonl"].read_text(encoding="utf-8").splitlines()]
    expected = [[(e["start"], e["end"], e["type"]) for e in r["entities"]] for r in predicted]
    assert sum(map(len, expected)) >= 3
    tasks = json.loads(written["label-studio"].read_text(encoding="utf-8"))  # one JSON array
    assert [t["data"]["text"] for t in tasks] == texts
    for fmt, path in written.items():
        examples = read_ner_file(path, use_predictions=True).examples
        assert [e.text for e in examples] == texts, fmt
        assert [[(x.start, x.end, x.type) for x in e.entities] for e in examples] == expected, fmt
    out = tmp_path / "scores.json"
    assert main(["ner", "evaluate", "--model", str(trained), "--data", str(written["label-studio"]),
                 "--use-predictions", "--output", str(out)]) == 0
    assert json.loads(out.read_text())["f1"] == 1.0
    capsys.readouterr()
    assert main(["ner", "predict", "--model", str(trained), str(tmp_path / "empty.txt"), "--output-format",
                 "label-studio"]) == 2  # a missing input is an error, not an empty array
    (tmp_path / "empty.txt").write_text("")
    assert main(["ner", "predict", "--model", str(trained), str(tmp_path / "empty.txt"), "--output-format",
                 "label-studio"]) == 0
    assert json.loads(capsys.readouterr().out) == []
