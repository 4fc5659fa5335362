"""``predict`` keeps what each input carries: a JSON line comes back with every field it had
(``id``, ``meta``, ...) and the results added, a plain-text line with its ``"line"`` number; one
output row per input, in order, whatever the inputs (empty texts, repeats, long texts). The
Python API takes records (dicts with a ``"text"``) as well as strings.

The models are tiny and untrained (the toy checkpoint): what is checked is what comes back
around the results, not the results."""

import json

import pytest

from conftest import untrained_tiny_folders
from kerasbert.cli import main

LONG = " ".join(["Peter lives in Paris"] * 150)  # 3,000 characters: many windows of 16 tokens


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    """Untrained tiny NER (crf) and triples (casrel) model folders on the toy checkpoint."""
    return untrained_tiny_folders(tmp_path_factory.mktemp("records"))


def records(count):
    """``count`` JSON records with ids of several kinds and more fields, some with empty texts,
    repeated records and texts, and 3,000-character texts."""
    found = []
    for i in range(count):
        text = ["Peter lives in Paris.", "", "Anna saw Berlin.", f"Text number {i % 97}", "   ", LONG][i % 6 if i % 500 else 5]
        record = {"id": f"doc-{i}" if i % 3 else i, "text": text}
        if i % 4 == 0:
            record["meta"] = {"source": "batch", "tags": [i, None, True]}
        if i % 7 == 0:  # a field before the text, and gold entities (the results replace them)
            record = {"before": "a field before the text", **record, "entities": [[0, 5, "PER"]]}
        found.append(record)
    found[10:10] = [dict(found[5]), dict(found[5])]  # the same record three times
    return found


def run(capsys, *argv):
    capsys.readouterr()
    status = main([str(a) for a in argv])
    captured = capsys.readouterr()
    assert status == 0, captured.err[-3000:]
    return captured.out


def test_every_jsonl_record_comes_back_with_all_its_fields_in_order(models, tmp_path, capsys):
    given = records(5000)
    path = tmp_path / "records.jsonl"
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in given), encoding="utf-8")
    rows = [json.loads(line) for line in run(capsys, "ner", "predict", "--model", models / "ner", path).splitlines()]
    assert len(rows) == len(given) == 5002
    for record, row in zip(given, rows):
        assert row["text"] == record["text"]
        kept = {k: v for k, v in record.items() if k != "entities"}
        assert {k: v for k, v in row.items() if k != "entities"} == kept  # every field, as it was
        assert list(row) == list({**record, "entities": None})  # in its order, the results after
        assert row["entities"] != [[0, 5, "PER"]] and all(isinstance(e, dict) for e in row["entities"])
    assert any(row["entities"] for row in rows)  # the model predicts: results came with the fields


def test_a_plain_text_line_comes_back_with_its_line_number(models, tmp_path, capsys):
    lines = ["Peter lives in Paris.", "", "Peter lives in Paris.", LONG, "   ", "Anna saw Berlin."]
    path = tmp_path / "texts.txt"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    for app, result in (("ner", "entities"), ("triples", "triples")):
        rows = [json.loads(line) for line in run(capsys, app, "predict", "--model", models / app, path).splitlines()]
        assert [(row["line"], row["text"]) for row in rows] == list(enumerate(lines, 1)), app
        assert all(list(row) == ["line", "text", result] for row in rows), app


def test_triples_predict_keeps_the_fields_too(models, tmp_path, capsys):
    given = records(60)
    path = tmp_path / "records.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in given), encoding="utf-8")
    rows = [json.loads(line) for line in run(capsys, "triples", "predict", "--model", models / "triples",
                                             path).splitlines()]
    assert [{k: v for k, v in row.items() if k != "triples"} for row in rows] == given


def test_the_annotation_tool_formats_keep_the_fields_where_the_tools_keep_them(models, tmp_path, capsys):
    path = tmp_path / "records.jsonl"
    path.write_text('{"id": 7, "text": "Peter lives in Paris."}\nAnna saw Berlin.\n', encoding="utf-8")
    tasks = json.loads(run(capsys, "ner", "predict", "--model", models / "ner", "--output-format", "label-studio",
                           path))
    assert [task["data"] for task in tasks] == [{"id": 7, "text": "Peter lives in Paris."},
                                                {"line": 2, "text": "Anna saw Berlin."}]  # a task's data
    lines = run(capsys, "ner", "predict", "--model", models / "ner", "--output-format", "doccano", path)
    doccano = [json.loads(line) for line in lines.splitlines()]
    assert [(row.get("id"), row.get("line"), row["text"]) for row in doccano] == [
        (7, None, "Peter lives in Paris."), (None, 2, "Anna saw Berlin.")]  # doccano keeps other keys as metadata
    assert all("label" in row for row in doccano)


def test_the_python_api_takes_records_and_strings(models):
    import kerasbert_apps.ner

    tagger = kerasbert_apps.ner.load(models / "ner")
    texts = ["Peter lives in Paris.", "", LONG, "Peter lives in Paris."]
    plain = tagger.predict(texts)
    given = [{"id": i, "text": t, "entities": "replaced"} for i, t in enumerate(texts)]
    back = tagger.predict(given)
    assert back == [{"id": i, **result} for i, result in enumerate(plain)]
    assert given[0]["entities"] == "replaced"  # the caller's records are left as they were
    mixed = tagger.predict([texts[0], {"text": texts[1], "id": "x"}])
    assert mixed == [plain[0], {"text": texts[1], "id": "x", "entities": plain[1]["entities"]}]
    with pytest.raises(TypeError, match=r'texts\[1\] is a record without a string "text"'):
        tagger.predict(["fine", {"id": 3}])
    with pytest.raises(TypeError, match=r"texts\[0\] is of type int"):
        tagger.predict([5])
    with pytest.raises(TypeError, match="pass a list of texts"):
        tagger.predict({"text": "one record, not a list"})
