"""What users' files really hold, thrown at every command:
byte-order marks, Latin-1 and UTF-16 files, CRLF and CR line endings,
control characters and NUL bytes, extremely long texts, empty files and
empty lines, label names with spaces and non-ASCII letters, files cut short.

Each either reads correctly -- the same examples, texts and offsets as the
clean file -- or fails with one line naming the file, the line (and record)
and the problem, exit status 2, no traceback. The models are tiny (the toy
checkpoint; the NER tagger untrained, the triples extractor one epoch), so
the module runs in about a minute."""

import json
import shutil

import pytest

from conftest import require_shared
from kerasbert.cli import main

CONLL = "Peter NNP B-NP B-PER\nlives VBZ B-VP O\nin IN B-PP O\nParis NNP B-NP B-LOC\n. . O O\n\n" \
        "Anna NNP B-NP B-PER\nsaw VBD B-VP O\nBerlin NNP B-NP B-LOC\n. . O O\n"
TEXTS = ["Peter lives in Paris.", "Anna saw Berlin.", "", "Élodie vit à Zürich."]

# These tests are about what the commands read and write, not about loading:
# each model folder is loaded once (conftest.one_load_per_model_folder).
pytestmark = pytest.mark.usefixtures("one_load_per_model_folder")


def toy_checkpoint():
    return require_shared("data", "models", "keras_bert_test_checkpoint")


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    """An NER model folder (untrained tagger on the toy encoder) and a
    triples model folder (one epoch on four sentences)."""
    from kerasbert_apps.ner.heads.bio.model import NerModel
    from kerasbert_apps.ner.heads.bio.pipeline import Tagger
    from kerasbert_apps.ner.tags import bio_tags
    from kerasbert.checkpoints.loader import load_encoder
    from kerasbert.checkpoints.loader import load_tokenizer

    tmp = tmp_path_factory.mktemp("hostile")
    tags = bio_tags(["LOC", "MISC", "ORG", "PER"])
    tokenizer = load_tokenizer(toy_checkpoint(), max_length=16)
    Tagger(NerModel(load_encoder(toy_checkpoint()), len(tags), lstm_units=4), tokenizer, tags,
           max_length=16).save(tmp / "ner")
    records = [{"text": "Alan Bean was born in Wheeler, Texas.", "triple_list": [["Alan Bean", "birthPlace",
                                                                                    "Wheeler, Texas"]]},
               {"text": "Texas is in the United States.", "triple_list": [["Texas", "country", "United States"]]}]
    (tmp / "train.json").write_text(json.dumps(records), encoding="utf-8")
    status = main(["triples", "train", "--checkpoint", str(toy_checkpoint()), "--train", str(tmp / "train.json"),
                   "--dev", str(tmp / "train.json"), "--output", str(tmp / "triples"), "--epochs", "1",
                   "--batch-size", "2", "--max-length", "16"])
    assert status == 0
    return {"ner": tmp / "ner", "triples": tmp / "triples", "triples_data": tmp / "train.json"}


def cli(capsys, *argv):
    """``kerasbert ARGV`` in this process: ``(status, stdout, the last line of stderr, stderr)``."""
    capsys.readouterr()
    status = main([str(a) for a in argv])
    captured = capsys.readouterr()
    lines = [line for line in captured.err.splitlines() if line.strip()]
    return status, captured.out, (lines[-1] if lines else ""), captured.err


def one_line_error(capsys, argv, expected):
    status, _, last, err = cli(capsys, *argv)
    assert status == 2 and "Traceback" not in err, err
    assert last == f"kerasbert: error: {expected}", err


# --- encodings and line endings: the same content, however it is stored ----------

SAME_CONTENT = {
    "utf-8": lambda text: text.encode("utf-8"),
    "utf-8 with BOM": lambda text: b"\xef\xbb\xbf" + text.encode("utf-8"),
    "CRLF": lambda text: text.replace("\n", "\r\n").encode("utf-8"),
    "CR only": lambda text: text.replace("\n", "\r").encode("utf-8"),
    "BOM and CRLF": lambda text: b"\xef\xbb\xbf" + text.replace("\n", "\r\n").encode("utf-8"),
}


@pytest.mark.parametrize("storage", list(SAME_CONTENT))
def test_predict_reads_every_storage_of_the_same_texts_alike(models, tmp_path, capsys, storage):
    """Plain lines and JSON lines: one result per input line, the texts
    exactly as given (no BOM, no CR), in order."""
    for name, text in (("plain.txt", "\n".join(TEXTS) + "\n"),
                       ("lines.jsonl", "".join(json.dumps({"text": t}, ensure_ascii=False) + "\n" for t in TEXTS))):
        path = tmp_path / name
        path.write_bytes(SAME_CONTENT[storage](text))
        status, out, _, err = cli(capsys, "ner", "predict", "--model", models["ner"], path)
        assert status == 0, err
        assert [json.loads(line)["text"] for line in out.splitlines()] == TEXTS, (storage, name)


@pytest.mark.parametrize("storage", list(SAME_CONTENT))
def test_training_data_reads_alike_in_every_storage(tmp_path, capsys, storage):
    """CoNLL, JSON lines and a JSON array (NER and triples): the same examples."""
    from kerasbert_apps.ner.readers import read_ner_file
    from kerasbert_apps.triples.data import read_triples_file

    spans = [{"text": "Peter lives in Paris.", "entities": [[0, 5, "PER"], [15, 20, "LOC"]]}]
    triples = [{"text": "Alan Bean was born in Wheeler.", "triple_list": [["Alan Bean", "birthPlace", "Wheeler"]]}]
    cases = [
        ("data.conll", CONLL, lambda p: read_ner_file(p, tag_column=-1)),
        ("data.jsonl", "".join(json.dumps(r) + "\n" for r in spans), lambda p: read_ner_file(p)),
        ("triples.json", json.dumps(triples, indent=1) + "\n", lambda p: read_triples_file(p)),
    ]
    for name, text, read in cases:
        clean, hostile = tmp_path / ("clean-" + name), tmp_path / name
        clean.write_text(text, encoding="utf-8")
        hostile.write_bytes(SAME_CONTENT[storage](text))
        def content(examples):
            return [{k: v for k, v in vars(e).items() if k != "source"} for e in examples]

        want = content(read(clean).examples)
        assert want and content(read(hostile).examples) == want, (storage, name)


BAD_ENCODINGS = {
    # name: (bytes of the file, the problem named)
    "Latin-1": ("Peter lives in Paris.\nÉlodie vit à Zürich.\n".encode("latin-1"), "line 2", "byte 0xc9"),
    "UTF-16": ("Peter lives in Paris.\n".encode("utf-16"), "line 1", "UTF-16"),
}


@pytest.mark.parametrize("encoding", list(BAD_ENCODINGS))
def test_files_in_another_encoding_name_the_line_and_byte(models, tmp_path, capsys, encoding):
    data, line, problem = BAD_ENCODINGS[encoding]
    path = tmp_path / "texts.txt"
    path.write_bytes(data)
    conll = tmp_path / "train.conll"
    conll.write_bytes(CONLL.replace("Paris", "Pärïs").encode("latin-1") if encoding == "Latin-1" else
                      CONLL.encode("utf-16"))
    conll_line = "line 4" if encoding == "Latin-1" else "line 1"
    commands = [
        (["ner", "predict", "--model", models["ner"], path], path, line),
        (["ner", "evaluate", "--model", models["ner"], "--data", conll, "--tag-column", "-1"], conll, conll_line),
        (["ner", "calibrate", "--model", models["ner"], "--data", conll, "--tag-column", "-1"], conll, conll_line),
        (["ner", "train", "--checkpoint", toy_checkpoint(), "--train", conll, "--dev", conll, "--output",
          tmp_path / "run", "--tag-column", "-1"], conll, conll_line),
        (["ner", "distill", "--teacher", models["ner"], "--train", conll, "--dev", conll, "--output",
          tmp_path / "student", "--tag-column", "-1"], conll, conll_line),
        (["ner", "distill", "--teacher", models["ner"], "--train", models["ner"] / ".." / "missing.conll", "--dev",
          conll, "--output", tmp_path / "student"], None, None),
        (["triples", "predict", "--model", models["triples"], path], path, line),
        (["pretrain", "--checkpoint", toy_checkpoint(), "--text", path, "--output", tmp_path / "pt", "--max-length",
          "16"], path, line),
    ]
    for argv, file, where in commands:
        status, _, last, err = cli(capsys, *argv)
        assert status == 2 and "Traceback" not in err, (argv, err)
        if file is None:
            assert "missing.conll" in last
            continue
        assert last.startswith(f"kerasbert: error: {file}, {where}: not UTF-8"), (argv, last)
        assert problem in last if file == path else True, (argv, last)
    assert not (tmp_path / "run").exists() and not (tmp_path / "pt").exists()  # refused before anything is written


# --- control characters, NUL bytes, very long and empty texts ---------------------


def test_control_characters_nul_bytes_and_long_texts_predict_with_true_offsets(models, tmp_path, capsys):
    texts = ["Peter\x00lives in Paris.", "tab\there\x0bvertical\x0cfeed", "zero\u200bwidth\u2028line sep",
             "\x1b[31mred\x1b[0m", "x" * 3000, " ".join(["Paris"] * 2000), "   ", "\ufeffBOM inside a line"]
    path = tmp_path / "texts.jsonl"
    path.write_text("".join(json.dumps({"text": t}) + "\n" for t in texts), encoding="utf-8")
    # thresholds 0: the barely trained triples model then predicts triples, so their spans are checked
    for app, options in (("ner", ()), ("triples", ("--threshold-start", "0", "--threshold-end", "0"))):
        status, out, _, err = cli(capsys, app, "predict", "--model", models[app], *options, path)
        assert status == 0, err
        results = [json.loads(line) for line in out.split("\n") if line]  # (not splitlines: U+2028 is in a text)
        assert [r["text"] for r in results] == texts
        spans = [(result["text"], span) for result in results
                 for span in (result["entities"] if app == "ner" else
                              [t[part] for t in result["triples"] for part in ("subject", "object")])]
        assert spans, f"{app}: nothing predicted, nothing checked"
        for text, span in spans:  # every span points into its own text
            assert text[span["start"]:span["end"]] == span["text"], (app, span)


def test_a_lone_surrogate_escape_is_repaired_and_named_and_its_chunk_predicted(models, tmp_path, capsys):
    """"\\ud800" is valid JSON but no Unicode text: it becomes U+FFFD (offsets
    unchanged), a note names the file and line, and every other line of its
    chunk still gets its output (the chunk used to fail whole with a
    TensorFlow ValueError). A surrogate pair's escapes are one character."""
    lines = ['{"text": "Peter lives in Paris."}', '{"text": "Anna \\ud800 saw Berlin."}',
             '{"text": "smile \\ud83d\\ude00 Paris"}', '{"text": "cut \\udc00"}']
    path = tmp_path / "texts.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    for app in ("ner", "triples"):
        status, out, last, err = cli(capsys, app, "predict", "--model", models[app], path)
        assert status == 0, err
        assert [json.loads(line)["text"] for line in out.splitlines()] == [
            "Peter lives in Paris.", "Anna \ufffd saw Berlin.", "smile \U0001f600 Paris", "cut \ufffd"]
        assert last == (f"note: {path}: 2 text(s) held a lone surrogate (a \\ud800-\\udfff escape that is no "
                        "character), replaced with U+FFFD: line 2, 4"), err


def test_the_lines_before_a_bad_line_get_their_output(models, tmp_path, capsys):
    """A line that cannot be read stops predict with its one-line error, after
    the lines read before it in its chunk got their output."""
    path = tmp_path / "texts.txt"
    path.write_bytes(b"Peter lives in Paris.\nAnna saw Berlin.\nZ\xfcrich\n")
    status, out, last, err = cli(capsys, "ner", "predict", "--model", models["ner"], path)
    assert status == 2 and last.startswith(f"kerasbert: error: {path}, line 3: not UTF-8"), err
    assert [json.loads(line)["text"] for line in out.splitlines()] == ["Peter lives in Paris.", "Anna saw Berlin."]


def test_empty_inputs(models, tmp_path, capsys):
    empty = tmp_path / "empty.txt"
    empty.write_bytes(b"")
    status, out, _, err = cli(capsys, "ner", "predict", "--model", models["ner"], empty)
    assert status == 0 and out == "", err  # nothing in, nothing out
    blank = tmp_path / "blank.txt"
    blank.write_text("\n\n\n", encoding="utf-8")
    status, out, _, err = cli(capsys, "ner", "predict", "--model", models["ner"], blank)
    assert status == 0 and [json.loads(line)["text"] for line in out.splitlines()] == ["", "", ""]
    one_line_error(capsys, ["ner", "evaluate", "--model", models["ner"], "--data", empty, "--format", "conll"],
                   f"{empty}: no examples in the file (empty)")
    one_line_error(capsys, ["triples", "evaluate", "--model", models["triples"], "--data", empty],
                   f"{empty}: no examples in the file (empty)")
    one_line_error(capsys, ["pretrain", "--checkpoint", toy_checkpoint(), "--text", empty, "--output",
                            tmp_path / "pt", "--max-length", "16"], "the text has no sequences beyond the 256 held out; give more text or "
                                              "a smaller --held-out")


# --- files cut short -------------------------------------------------------------


def test_files_cut_short_name_their_last_line(models, tmp_path, capsys):
    jsonl = tmp_path / "cut.jsonl"
    jsonl.write_text('{"text": "Peter lives in Paris.", "entities": [[0, 5, "PER"]]}\n{"text": "Anna sa', encoding="utf-8")
    array = tmp_path / "cut.json"
    array.write_text(json.dumps([{"text": "Alan Bean", "triple_list": []}] * 3, indent=1)[:-30], encoding="utf-8")
    texts = tmp_path / "cut-texts.jsonl"
    texts.write_text('{"text": "Peter"}\n{"text": "Pa', encoding="utf-8")
    status, _, last, err = cli(capsys, "ner", "evaluate", "--model", models["ner"], "--data", jsonl)
    assert status == 2 and "Traceback" not in err and last.startswith(f"kerasbert: error: {jsonl}, line 2: invalid JSON")
    status, _, last, err = cli(capsys, "triples", "tune", "--model", models["triples"], "--data", array)
    assert status == 2 and "Traceback" not in err and last.startswith(f"kerasbert: error: {array}, record 3 (line ")
    status, _, last, err = cli(capsys, "ner", "predict", "--model", models["ner"], texts)
    assert status == 2 and "Traceback" not in err and last.startswith(f"kerasbert: error: {texts}, line 2: invalid JSON")
    settings = tmp_path / "settings.json"
    settings.write_text('{"epochs": 2, "batch_si', encoding="utf-8")
    status, _, last, err = cli(capsys, "ner", "train", "--settings", settings, "--train", jsonl, "--dev", jsonl,
                               "--output", tmp_path / "run", "--checkpoint", toy_checkpoint())
    assert status == 2 and "Traceback" not in err and last.startswith(f"kerasbert: error: {settings}"), err
    assert not (tmp_path / "run").exists()


# --- label names, export and inspect ----------------------------------------------


def test_label_names_with_spaces_and_non_ascii_letters_train_and_export(tmp_path, capsys):
    records = [{"text": "Peter lives in Paris.", "entities": [[0, 5, "Person name"], [15, 20, "地名"]]},
               {"text": "Anna saw Berlin.", "entities": [[0, 4, "Person name"], [9, 15, "地名"]]}] * 4
    data = tmp_path / "data.jsonl"
    data.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records), encoding="utf-8")
    run = tmp_path / "run"
    status, out, _, err = cli(capsys, "ner", "train", "--checkpoint", toy_checkpoint(), "--train", data, "--dev", data,
                              "--output", run, "--epochs", "1", "--batch-size", "4", "--max-length", "16",
                              "--lstm-units", "4", "--no-calibrate")
    assert status == 0, err
    labels = json.loads((run / "model" / "tagger.json").read_text(encoding="utf-8"))["tags"]
    assert "B-Person name" in labels and "I-地名" in labels
    beside = sorted(tmp_path.iterdir())
    status, out, _, err = cli(capsys, "ner", "evaluate", "--model", run, "--data", data)
    assert status == 0, err
    assert "f1" in out.lower() and sorted(tmp_path.iterdir()) == beside  # printed; nothing written beside the data
    status, out, _, err = cli(capsys, "ner", "evaluate", "--model", run, "--data", data, "--output",
                              tmp_path / "scores.json")
    assert status == 0, err
    assert set(json.loads((tmp_path / "scores.json").read_text(encoding="utf-8"))["per_type"]) == \
        {"Person name", "地名"}  # both gold types are scored by their names
    status, out, _, err = cli(capsys, "ner", "export", "--model", run, "--output", tmp_path / "export")
    assert status == 0, err


def test_inspect_reads_a_checkpoint_written_by_windows_tools(tmp_path, capsys):
    """A config and vocabulary saved with a BOM and CRLF line endings."""
    folder = tmp_path / "checkpoint"
    shutil.copytree(toy_checkpoint(), folder)
    for name in ("bert_config.json", "vocab.txt"):
        (folder / name).chmod(0o644)
        text = (folder / name).read_text(encoding="utf-8")
        (folder / name).write_bytes(b"\xef\xbb\xbf" + text.replace("\n", "\r\n").encode("utf-8"))
    status, out, _, err = cli(capsys, "inspect", folder)
    assert status == 0, out
    assert "status:     OK" in out
