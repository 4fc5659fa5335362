"""kerasbert_apps.base.serving_cache: ``predict`` keeps a model folder's export and runs it next time.

Every ``predict`` here runs in this process through the CLI's ``main`` with
its own cache folder (``KERASBERT_CACHE``), with either engine of the cache
(``--engine auto``: an ONNX entry, the suite having ONNX Runtime and
tf2onnx; ``--engine savedmodel``: a SavedModel entry); the model is an
untrained tagger on the toy checkpoint, shaken so that it predicts entities."""

import json
import os
from pathlib import Path

import pytest

from conftest import require_shared
from conftest import same_results
from kerasbert.cli import main

TEXTS = ["Peter lives in Paris.", "Anna saw Berlin and Rome.", "", "Élodie vit à Zürich."]
#: ``--engine`` of each kind of entry, and the file a damaged entry is cut short in.
ENGINES = {"auto": "model.onnx", "savedmodel": "saved_model.pb"}


@pytest.fixture(scope="module")
def tagger(tmp_path_factory):
    """An untrained BIO tagger folder on the toy checkpoint whose weights are
    shaken so that it predicts entities, and the input file."""
    import numpy as np

    from kerasbert.checkpoints.loader import load_encoder
    from kerasbert.checkpoints.loader import load_tokenizer
    from kerasbert_apps.ner.heads.bio.model import NerModel
    from kerasbert_apps.ner.heads.bio.pipeline import Tagger
    from kerasbert_apps.ner.tags import bio_tags

    checkpoint = require_shared("data", "models", "keras_bert_test_checkpoint")
    tmp = tmp_path_factory.mktemp("serving_cache")
    tags = bio_tags(["LOC", "PER"])
    model = NerModel(load_encoder(checkpoint), len(tags), lstm_units=4, use_crf=False)
    rng = np.random.default_rng(0)
    model.set_weights([w + rng.normal(0, 0.5, w.shape).astype(w.dtype) for w in model.get_weights()])
    Tagger(model, load_tokenizer(checkpoint, max_length=16), tags, max_length=16).save(tmp / "ner")
    (tmp / "in.txt").write_text("\n".join(TEXTS) + "\n", encoding="utf-8")
    return tmp / "ner", tmp / "in.txt"


def predict(capsys, monkeypatch, cache, folder, source, *options, switch=None):
    """``kerasbert ner predict`` in this process: ``(results, stderr)`` (read
    from ``capsys``, or, with None, from the streams themselves), with
    ``KERASBERT_SERVING_CACHE`` set to ``switch`` (None: unset)."""
    import contextlib
    import io

    monkeypatch.setenv("KERASBERT_CACHE", str(cache))
    if switch is None:
        monkeypatch.delenv("KERASBERT_SERVING_CACHE", raising=False)  # the suite turns it off (conftest)
    else:
        monkeypatch.setenv("KERASBERT_SERVING_CACHE", switch)
    if capsys is None:
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            assert main(["ner", "predict", "--model", str(folder), str(source), *options]) == 0
        return [json.loads(line) for line in out.getvalue().splitlines()], err.getvalue()
    capsys.readouterr()
    assert main(["ner", "predict", "--model", str(folder), str(source), *options]) == 0
    captured = capsys.readouterr()
    return [json.loads(line) for line in captured.out.splitlines()], captured.err


def entries(cache):
    folder = cache / "serving"
    return sorted(p.name for p in folder.iterdir() if not p.name.startswith(".")) if folder.is_dir() else []


def no_model_built(monkeypatch):
    """Building the Keras model or tracing the serving function fails the test."""
    from kerasbert.checkpoints import saving
    from kerasbert_apps.base.pipeline import Pipeline

    def refused(*args, **kwargs):
        raise AssertionError("the model was built or traced: the serving cache was not used")

    monkeypatch.setattr(saving, "_load_keras_model", refused)
    monkeypatch.setattr(Pipeline, "serving_function_of", refused)


@pytest.fixture(scope="module", params=list(ENGINES))
def kept(request, tagger, tmp_path_factory):
    """A cache holding the tagger's entry of one engine, written by its first ``predict``:
    ``(cache, results without the cache, results of the first predict, its stderr, the engine's options)``."""
    folder, source = tagger
    options = ("--engine", request.param)
    cache = tmp_path_factory.mktemp("cache")
    with pytest.MonkeyPatch.context() as patch:
        plain, _ = predict(None, patch, cache, folder, source, "--no-cache", *options)
        assert entries(cache) == []  # --no-cache writes nothing
        off, err = predict(None, patch, cache, folder, source, *options, switch="0")
        assert entries(cache) == [] and "serving cache" not in err  # nor does KERASBERT_SERVING_CACHE=0
        same_results(off, plain)
        first, err = predict(None, patch, cache, folder, source, *options)
    return cache, plain, first, err, options


def copied(kept, tmp_path):
    """A copy of the kept cache (for a test that changes it)."""
    import shutil

    return Path(shutil.copytree(kept[0], tmp_path / "cache"))


def test_the_first_predict_keeps_the_function_and_the_next_loads_it_with_the_same_results(
        kept, tagger, capsys, monkeypatch):
    folder, source = tagger
    cache, plain, first, err, options = kept
    assert sum(len(r["entities"]) for r in plain) > 0  # the shaken model predicts: there is something to compare
    [entry] = entries(cache)
    assert (cache / "serving" / entry / "1" / ENGINES[options[1]]).is_file()
    assert f"is kept in the serving cache, {cache / 'serving'} (" in err
    same_results(first, plain)
    with monkeypatch.context() as patched:
        no_model_built(patched)
        second, err = predict(capsys, monkeypatch, cache, folder, source, *options)
    assert "kept" not in err and "damaged" not in err
    same_results(second, plain)
    assert entries(cache) == [entry]


@pytest.mark.parametrize("kept", ["auto"], indirect=True)
def test_an_onnx_entry_answers_without_tensorflow(kept, tagger):
    """A ``predict`` from an ONNX entry, in a fresh process, imports neither TensorFlow nor Keras."""
    import subprocess
    import sys

    cache, plain, _, _, _ = kept
    folder, source = tagger
    code = ("import json, sys; from kerasbert.cli import main; assert main(sys.argv[1:]) == 0; "
            "print(json.dumps(sorted(m for m in ('tensorflow', 'keras') if m in sys.modules)))")
    env = dict(os.environ, KERASBERT_CACHE=str(cache))
    env.pop("KERASBERT_SERVING_CACHE", None)
    done = subprocess.run([sys.executable, "-c", code, "ner", "predict", "--model", str(folder), str(source)],
                          capture_output=True, text=True, env=env, check=True)
    *lines, imported = done.stdout.splitlines()
    assert json.loads(imported) == [], done.stderr
    assert "kept" not in done.stderr
    same_results([json.loads(line) for line in lines], plain)


@pytest.mark.parametrize("kept", ["auto"], indirect=True)  # the entry's key and writing: one engine
def test_an_edited_folder_gets_a_new_entry_and_its_old_one_is_removed(kept, tagger, tmp_path, capsys, monkeypatch):
    folder, source = tagger
    cache = copied(kept, tmp_path)
    [old] = entries(cache)
    settings = folder / "tagger.json"
    stat = settings.stat()
    try:
        os.utime(settings, ns=(stat.st_atime_ns, stat.st_mtime_ns + 10**9))  # the folder changed on disk
        after, err = predict(capsys, monkeypatch, cache, folder, source, *kept[4])
        [new] = entries(cache)
        assert new != old and "is kept in" in err
        same_results(after, kept[1])
    finally:
        os.utime(settings, ns=(stat.st_atime_ns, stat.st_mtime_ns))


def test_an_entry_is_named_by_the_options_too(tagger):
    from kerasbert_apps.base.serving_cache import entry_engine
    from kerasbert_apps.base.serving_cache import entry_of
    from kerasbert_apps.base.serving_cache import made_from
    from kerasbert_apps.ner.train import NER

    folder, _ = tagger
    light = NER.load(folder, with_model=False)
    assert light.model is None
    plain = entry_of(made_from(light, folder, "float32"))
    assert entry_of(made_from(light, folder, "float32")) == plain
    assert entry_of(made_from(light, folder, "bfloat16")) != plain
    assert entry_of(made_from(light, folder, "float32", "onnx")) != plain
    assert entry_engine(light, "float32") == "onnx"  # the suite has onnxruntime and tf2onnx
    assert entry_engine(light, "float32", "savedmodel") == "savedmodel"
    assert entry_engine(light, "bfloat16") == "savedmodel"  # an ONNX export is float32
    light.no_onnx_export = "its decoding has no ONNX ops"  # a head that declares it cannot be converted
    assert entry_engine(light, "float32") == "savedmodel"
    del light.no_onnx_export
    light.set_temperature(2.0)  # a setting of the serving graph (a calibrated folder's)
    assert entry_of(made_from(light, folder, "float32")) != plain


def test_a_damaged_entry_is_rebuilt_with_one_note(kept, tagger, tmp_path, capsys, monkeypatch):
    folder, source = tagger
    options = kept[4]
    cache = copied(kept, tmp_path)
    [entry] = entries(cache)
    saved = cache / "serving" / entry / "1" / ENGINES[options[1]]
    saved.write_bytes(saved.read_bytes()[:100])  # cut short
    after, err = predict(capsys, monkeypatch, cache, folder, source, *options)
    notes = [line for line in err.splitlines() if "damaged serving cache entry" in line]
    assert len(notes) == 1 and str(cache / "serving" / entry) in notes[0], err
    same_results(after, kept[1])
    with monkeypatch.context() as patched:  # rebuilt whole: the next predict loads it
        no_model_built(patched)
        again, err = predict(capsys, monkeypatch, cache, folder, source, *options)
    assert "damaged" not in err
    same_results(again, kept[1])


@pytest.mark.parametrize("kept", ["auto"], indirect=True)  # the entry's key and writing: one engine
def test_a_cache_that_cannot_be_written_is_skipped(kept, tagger, tmp_path, capsys, monkeypatch):
    folder, source = tagger
    blocked = tmp_path / "a file"
    blocked.write_text("not a folder", encoding="utf-8")
    got, err = predict(capsys, monkeypatch, blocked, folder, source, *kept[4])
    assert "kept" not in err and "Traceback" not in err
    same_results(got, kept[1])


@pytest.mark.parametrize("kept", ["auto"], indirect=True)
def test_a_model_the_onnx_export_refuses_gets_a_savedmodel_entry_and_one_note(kept, tagger, tmp_path, capsys,
                                                                              monkeypatch):
    """The ONNX export's failure is said once and kept: later ``predict``s
    run the SavedModel entry without trying the conversion again."""
    import kerasbert_apps.base.onnx_export as onnx_export
    from kerasbert.errors import KerasbertError

    folder, source = tagger

    def refused(*args, **kwargs):
        raise KerasbertError("the ONNX conversion failed: no ONNX op for SomeOp")

    cache = tmp_path / "cache"
    with monkeypatch.context() as patched:
        patched.setattr(onnx_export, "export_onnx", refused)
        got, err = predict(capsys, monkeypatch, cache, folder, source)
    notes = [line for line in err.splitlines() if line.startswith("note:")]
    assert len(notes) == 2 and "no ONNX entry" in notes[0] and "SomeOp" in notes[0], err
    assert "is kept in the serving cache" in notes[1]
    same_results(got, kept[1])
    assert len(entries(cache)) == 2  # the failure, kept, and the SavedModel entry
    assert sum((cache / "serving" / e / "1" / "saved_model.pb").is_file() for e in entries(cache)) == 1

    def tried(*args, **kwargs):
        raise AssertionError("the ONNX conversion was tried again")

    with monkeypatch.context() as patched:
        no_model_built(patched)
        patched.setattr(onnx_export, "export_onnx", tried)
        again, err = predict(capsys, monkeypatch, cache, folder, source)
    assert "note:" not in err, err
    same_results(again, kept[1])
