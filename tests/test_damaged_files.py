"""A damaged or missing file in a model folder or a checkpoint folder: one
line naming the file and what is wrong, exit status 2 (``inspect``: 1), no
traceback, from every command that reads one.

Each kind of file is damaged the way it happens (a copy cut short, an empty
file, a file that is not what its name says, a file removed) in a copy of a
small model folder written here once as a training run writes it (toy
checkpoint, untrained: an NER tagger, an NER tagger with LoRA adapters, a
triples extractor)."""

import json
import shutil
from pathlib import Path

import pytest

from conftest import conll_slice
from conftest import require_shared
from conftest import webnlg_slice
from kerasbert.cli import main


def toy_checkpoint():
    return require_shared("data", "models", "keras_bert_test_checkpoint")


def saved_untrained(task, output, data, **options):
    """``output/model`` as a training run on ``data`` writes it (its labels,
    head, settings, LoRA adapters), without the training: the files are what
    these tests damage, and untrained weights load alike."""
    from kerasbert.training import fit
    from kerasbert.checkpoints.loader import load_encoder
    from kerasbert_apps.base.task import start_lora

    settings = task.train_settings(checkpoint=str(toy_checkpoint()), train=str(data[0]), dev=str(data[1]),
                                   output=str(output), max_length=16, **options)
    train_examples, dev_examples = task.read_run_data(settings)
    head = task.pipeline_class(settings)
    labels = head.training_labels(train_examples, dev_examples, settings)
    checkpoint, tokenizer = fit.open_encoder_checkpoint(settings)
    model = head.build_model(load_encoder(checkpoint), labels, settings)
    pipeline = head.for_training(model, tokenizer, labels, settings)
    if settings.lora_rank:
        pipeline.lora = start_lora(model, checkpoint, settings)
    pipeline.save(Path(output) / "model")


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Three model folders (``ner``, ``ner_lora``, ``triples``) and their data."""
    from kerasbert_apps.ner.train import NER
    from kerasbert_apps.triples.train import TRIPLES

    tmp = tmp_path_factory.mktemp("damaged_runs")
    ner_data = conll_slice(tmp, "train.conll", 0, 24), conll_slice(tmp, "dev.conll", 24, 8)
    triples_data = webnlg_slice(tmp, 12, 4)
    saved_untrained(NER, tmp / "ner", ner_data, lstm_units=4)
    saved_untrained(NER, tmp / "ner_lora", ner_data, lstm_units=4, lora_rank=2)
    saved_untrained(TRIPLES, tmp / "triples", triples_data)
    texts = tmp / "texts.txt"
    texts.write_text("Peter lives in Paris.\nAlan Bean was born in Wheeler, Texas.\n", encoding="utf-8")
    return {"dir": tmp, "ner_data": ner_data, "triples_data": triples_data, "texts": texts}


def truncate(path, size=1000):
    """Cut ``path`` to its first ``size`` bytes (a copy interrupted, a full disk)."""
    path = Path(path)
    path.write_bytes(path.read_bytes()[:size])


def damaged_copy(runs, name, tmp_path, damage):
    """A copy of run ``name`` whose model folder gets ``damage(model_folder)``; returns the run folder."""
    run = tmp_path / name
    shutil.copytree(runs["dir"] / name, run)
    damage(run / "model")
    return run


def run_cli(capsys, *argv):
    """``kerasbert ARGV`` in this process: ``(status, the last line of standard error, all of it)``."""
    capsys.readouterr()
    status = main([str(a) for a in argv])
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.strip()]
    return status, (lines[-1] if lines else ""), err


def assert_one_line(status, last, err, message, code=2):
    assert status == code, err
    assert "Traceback" not in err
    assert last == f"kerasbert: error: {message}", err


# --- each kind of file, through `predict` -------------------------------------

NER_CASES = {
    # name: (run, damage, file, message after "<file>: ")
    "keras archive cut short": ("ner", lambda m: truncate(m / "model.keras"), "model.keras",
                                "damaged: not a complete .keras archive (1,000 of at least"),
    "keras archive missing": ("ner", lambda m: (m / "model.keras").unlink(), "model.keras",
                              "missing (the Keras model)"),
    "keras archive not a zip": ("ner", lambda m: (m / "model.keras").write_bytes(b"<html>502</html>" * 10),
                                "model.keras", "damaged: not a .keras archive (it does not start as a zip archive"),
    "keras archive with a bad entry": ("ner", lambda m: corrupt_middle(m / "model.keras"), "model.keras", "damaged:"),
    "settings JSON cut short": ("ner", lambda m: truncate(m / "tagger.json", 40), "tagger.json",
                                None),  # names its line: checked below
    "settings JSON empty": ("ner", lambda m: truncate(m / "tagger.json", 0), "tagger.json", "damaged: empty (0 bytes)"),
    "settings JSON of another shape": ("ner", lambda m: (m / "tagger.json").write_text("[1, 2]\n"), "tagger.json",
                                       "damaged: not the settings of a kerasbert NER model"),
    "settings without labels": ("ner", lambda m: drop_key(m / "tagger.json", "tags"), "tagger.json",
                                "damaged: its settings do not fit a NER model"),
    "vocabulary missing": ("ner", lambda m: (m / "vocab.txt").unlink(), "vocab.txt", "missing (the vocabulary)"),
    "vocabulary empty": ("ner", lambda m: truncate(m / "vocab.txt", 0), "vocab.txt", "damaged: empty (0 bytes)"),
    "vocabulary not UTF-8": ("ner", lambda m: (m / "vocab.txt").write_bytes(b"[PAD]\n[UNK]\n\xff\xfe\n"),
                             "vocab.txt, line 3", "not UTF-8 (byte 0xff at offset 12)"),
    "LoRA adapters cut short": ("ner_lora", lambda m: truncate(m / "encoder.lora.h5"), "encoder.lora.h5",
                                "damaged: not a complete HDF5 file (1,000 of"),
    "LoRA adapters not HDF5": ("ner_lora", lambda m: (m / "encoder.lora.h5").write_bytes(b"x" * 100),
                               "encoder.lora.h5", "damaged: not an HDF5 file (no HDF5 signature; 100 bytes)"),
    "LoRA adapters missing": ("ner_lora", lambda m: (m / "encoder.lora.h5").unlink(), "encoder.lora.h5",
                              "missing (the LoRA adapters)"),
    "head weights cut short": ("ner_lora", lambda m: truncate(m / "head.weights.npz"), "head.weights.npz",
                               "damaged: not a complete .npz archive"),
    "head weights missing": ("ner_lora", lambda m: (m / "head.weights.npz").unlink(), "head.weights.npz",
                             "missing (the head's weights)"),
    "LoRA model config cut short": ("ner_lora", lambda m: truncate(m / "model.json", 200), "model.json", None),
}


def corrupt_middle(path):
    """Flip bytes in the middle of a file, keeping its size (a bad disk, a bad copy)."""
    data = bytearray(Path(path).read_bytes())
    middle = len(data) // 2
    data[middle : middle + 64] = bytes(b ^ 0xFF for b in data[middle : middle + 64])
    Path(path).write_bytes(bytes(data))


def drop_key(path, key):
    settings = json.loads(Path(path).read_text(encoding="utf-8"))
    del settings[key]
    Path(path).write_text(json.dumps(settings), encoding="utf-8")


@pytest.mark.parametrize("case", list(NER_CASES))
def test_each_kind_of_damaged_file_is_one_line_naming_it(runs, tmp_path, capsys, case):
    name, damage, file, message = NER_CASES[case]
    run = damaged_copy(runs, name, tmp_path, damage)
    status, last, err = run_cli(capsys, "ner", "predict", "--model", run, runs["texts"])
    path = run / "model" / file
    if message is None:  # a JSON file cut short: its line, and that it ends early
        assert status == 2 and "Traceback" not in err
        assert last.startswith(f"kerasbert: error: {path}, line "), err
        assert ": damaged: not valid JSON (" in last and "cut short?" in last, err
    else:
        assert status == 2 and "Traceback" not in err, err
        assert last.startswith(f"kerasbert: error: {path}: {message}"), err
    assert "missing" not in last or "missing" in case  # damaged is never reported as missing


def test_triples_settings_and_archive(runs, tmp_path, capsys):
    run = damaged_copy(runs, "triples", tmp_path, lambda m: truncate(m / "model.keras"))
    status, last, err = run_cli(capsys, "triples", "predict", "--model", run, runs["texts"])
    assert status == 2 and "Traceback" not in err
    assert last.startswith(f"kerasbert: error: {run / 'model' / 'model.keras'}: damaged: not a complete .keras archive")
    run = damaged_copy(runs, "triples", tmp_path / "json", lambda m: truncate(m / "extractor.json", 0))
    status, last, err = run_cli(capsys, "triples", "predict", "--model", run, runs["texts"])
    assert_one_line(status, last, err, f"{run / 'model' / 'extractor.json'}: damaged: empty (0 bytes)")


# --- a model config naming a class this process cannot load: not damaged -------


def renamed_class(config, name, new_name, new_module):
    """``config`` (a serialized Keras model) with the class ``name`` renamed
    ``new_name`` of the module ``new_module``, wherever it appears."""
    if isinstance(config, list):
        return [renamed_class(item, name, new_name, new_module) for item in config]
    if not isinstance(config, dict):
        return config
    config = {key: renamed_class(value, name, new_name, new_module) for key, value in config.items()}
    if config.get("class_name") == name:
        config.update(class_name=new_name, module=new_module, registered_name=f"{new_module.split('.')[0]}>{new_name}")
    return config


def rename_in_model_json(model, *renaming):
    path = model / "model.json"
    path.write_text(json.dumps(renamed_class(json.loads(path.read_text(encoding="utf-8")), *renaming)), encoding="utf-8")


def rename_in_model_keras(model, *renaming):
    """The same in the ``config.json`` of ``model.keras`` (the archive rewritten whole)."""
    import zipfile

    path = model / "model.keras"
    with zipfile.ZipFile(path) as archive:
        entries = {name: archive.read(name) for name in archive.namelist()}
    entries["config.json"] = json.dumps(renamed_class(json.loads(entries["config.json"]), *renaming)).encode()
    with zipfile.ZipFile(path, "w") as archive:
        for name, data in entries.items():
            archive.writestr(name, data)


UNKNOWN_CLASS_CASES = {
    # name: (run, file, renaming (class, new name, new module), message after "<file>: ")
    "LoRA config, a package not installed": (
        "ner_lora", "model.json", ("NerModel", "PluginTagger", "kerasbert_plugin_heads.tagger"),
        "the model uses the Keras class PluginTagger of the module kerasbert_plugin_heads.tagger, which is not "
        "installed: install the package that provides kerasbert_plugin_heads (e.g. a head from another package), "
        "then load the model again"),
    "Keras archive, a package not installed": (
        "ner", "model.keras", ("BertEncoder", "PluginEncoder", "kerasbert_plugin_heads.encoder"),
        "the model uses the Keras class PluginEncoder of the module kerasbert_plugin_heads.encoder, which is not "
        "installed: install the package that provides kerasbert_plugin_heads (e.g. a head from another package), "
        "then load the model again"),
    "Keras archive, a module of another kerasbert version": (
        "ner", "model.keras", ("BertEncoder", "NewEncoder", "kerasbert.new_encoder"),
        "the model uses the Keras class NewEncoder of the module kerasbert.new_encoder, which this version of kerasbert "
        "does not have: the folder was written with another version of kerasbert; load it with that one"),
    "LoRA config, a class its module does not have": (
        "ner_lora", "model.json", ("NerModel", "RenamedModel", "kerasbert_apps.ner.heads.bio.model"),
        "the model uses the Keras class RenamedModel of the module kerasbert_apps.ner.heads.bio.model, which this "
        "version of kerasbert does not have"),
}


@pytest.mark.parametrize("case", list(UNKNOWN_CLASS_CASES))
def test_a_class_this_process_cannot_load_is_named_not_damaged(runs, tmp_path, capsys, case):
    """A config naming a class that cannot be located (a head's package not
    installed, a folder of another version): one line naming the class, its
    module and what to install or use; the file is not called damaged."""
    name, file, renaming, message = UNKNOWN_CLASS_CASES[case]
    rename = rename_in_model_json if file == "model.json" else rename_in_model_keras
    run = damaged_copy(runs, name, tmp_path, lambda m: rename(m, *renaming))
    status, last, err = run_cli(capsys, "ner", "predict", "--model", run, runs["texts"])
    assert status == 2 and "Traceback" not in err, err
    assert last.startswith(f"kerasbert: error: {run / 'model' / file}: {message}"), err
    assert "damaged" not in last


# --- every command that reads a model folder ----------------------------------


def test_every_command_reports_a_damaged_model_folder(runs, tmp_path, capsys):
    ner = damaged_copy(runs, "ner", tmp_path, lambda m: truncate(m / "model.keras"))
    triples = damaged_copy(runs, "triples", tmp_path, lambda m: truncate(m / "model.keras"))
    ner_train, ner_dev = runs["ner_data"]
    triples_train, triples_dev = runs["triples_data"]
    commands = [
        (ner, ["ner", "predict", "--model", ner, runs["texts"]]),
        (ner, ["ner", "evaluate", "--model", ner, "--data", ner_dev, "--output", tmp_path / "scores.json"]),
        (ner, ["ner", "export", "--model", ner, "--output", tmp_path / "export"]),
        (ner, ["ner", "calibrate", "--model", ner, "--data", ner_dev]),
        (ner, ["ner", "distill", "--teacher", ner, "--train", ner_train, "--dev", ner_dev, "--output",
               tmp_path / "student", "--student-layers", "1"]),
        (triples, ["triples", "predict", "--model", triples, runs["texts"]]),
        (triples, ["triples", "evaluate", "--model", triples, "--data", triples_dev, "--output",
                   tmp_path / "scores2.json"]),
        (triples, ["triples", "export", "--model", triples, "--output", tmp_path / "export2"]),
        (triples, ["triples", "tune", "--model", triples, "--data", triples_dev, "--values", "0.4"]),
    ]
    for run, argv in commands:
        status, last, err = run_cli(capsys, *argv)
        assert status == 2 and "Traceback" not in err, argv
        assert last.startswith(f"kerasbert: error: {run / 'model' / 'model.keras'}: damaged: not a complete .keras "
                               "archive (1,000 of at least"), (argv, err)
    assert not (tmp_path / "export").exists() and not (tmp_path / "export2").exists()
    assert not (tmp_path / "student" / "model").exists()


# --- checkpoint folders: inspect, train, and a LoRA model's checkpoint ---------

CHECKPOINT_CASES = {
    "data shard cut short": (lambda c: truncate(c / "bert_model.ckpt.data-00000-of-00001"),
                             "bert_model.ckpt.data-00000-of-00001",
                             "damaged: truncated (1,000 of the 8,420 bytes its index needs)"),
    "data shard missing": (lambda c: (c / "bert_model.ckpt.data-00000-of-00001").unlink(),
                           "bert_model.ckpt.data-00000-of-00001", "missing (the .index file is here"),
    "index cut short": (lambda c: truncate(c / "bert_model.ckpt.index"), "bert_model.ckpt.index",
                        "damaged: not a readable checkpoint index ("),
    "index missing": (lambda c: (c / "bert_model.ckpt.index").unlink(), "bert_model.ckpt.index",
                      "missing (the checkpoint's data file bert_model.ckpt.data-00000-of-00001 is here"),
    "config cut short": (lambda c: truncate(c / "bert_config.json", 30), "bert_config.json, line",
                         None),
    "config empty": (lambda c: truncate(c / "bert_config.json", 0), "bert_config.json", "damaged: empty (0 bytes)"),
    "vocabulary missing": (lambda c: (c / "vocab.txt").unlink(), "vocab.txt", "missing (the WordPiece vocabulary)"),
    "vocabulary empty": (lambda c: truncate(c / "vocab.txt", 0), "vocab.txt", "damaged: empty (0 bytes"),
}


def damaged_checkpoint(tmp_path, damage):
    folder = tmp_path / "checkpoint"
    shutil.copytree(toy_checkpoint(), folder)
    for file in folder.iterdir():
        file.chmod(0o644)
    damage(folder)
    return folder


@pytest.mark.parametrize("case", list(CHECKPOINT_CASES))
def test_each_damaged_checkpoint_file_in_inspect_and_train(runs, tmp_path, capsys, case):
    damage, file, message = CHECKPOINT_CASES[case]
    folder = damaged_checkpoint(tmp_path, damage)
    expected = f"{folder / file}: {message}" if message else f"{folder / file} "
    capsys.readouterr()
    status = main(["inspect", str(folder)])
    out = capsys.readouterr().out
    assert status == 1
    problems = out.split("PROBLEMS (1):\n", 1)[1].strip()
    assert problems.startswith(expected.rstrip()) and "\n" not in problems, out
    if message is None:
        assert "damaged: not valid JSON" in problems and "cut short?" in problems
    train, dev = runs["ner_data"]
    status, last, err = run_cli(capsys, "ner", "train", "--checkpoint", folder, "--train", train, "--dev", dev,
                                "--output", tmp_path / "run", "--epochs", "1", "--max-length", "16")
    assert status == 2 and "Traceback" not in err
    assert last == f"kerasbert: error: {problems}", err


def test_a_lora_models_damaged_checkpoint_is_named(runs, tmp_path, capsys):
    run = tmp_path / "ner_lora"
    shutil.copytree(runs["dir"] / "ner_lora", run)
    folder = damaged_checkpoint(tmp_path, lambda c: truncate(c / "bert_model.ckpt.data-00000-of-00001"))
    settings_path = run / "model" / "tagger.json"
    settings = json.loads(settings_path.read_text(encoding="utf-8"))
    settings["lora"]["checkpoint"] = str(folder)
    settings_path.write_text(json.dumps(settings), encoding="utf-8")
    status, last, err = run_cli(capsys, "ner", "predict", "--model", run, runs["texts"])
    assert status == 2 and "Traceback" not in err
    assert f"cannot load the encoder checkpoint {str(folder)!r} that the LoRA adapters go on" in last
    assert f"{folder / 'bert_model.ckpt.data-00000-of-00001'}: damaged: truncated" in last


# --- a training run's own files on --resume ------------------------------------


def test_a_damaged_backup_or_history_on_resume_is_named(runs, tmp_path, capsys):
    from kerasbert.files.atomic import atomic_write_text

    train, dev = runs["ner_data"]
    output = tmp_path / "run"
    argv = ["ner", "train", "--checkpoint", toy_checkpoint(), "--train", train, "--dev", dev, "--output", output,
            "--epochs", "1", "--batch-size", "8", "--max-length", "16", "--lstm-units", "4", "--no-calibrate",
            "--resume"]
    (output / "backup").mkdir(parents=True)
    (output / "settings.json").write_text(json.dumps({"output": str(output), "resume": False}))  # as a run wrote it
    (output / "backup" / "latest.weights.h5").write_bytes(b"\x89HDF\r\n\x1a\n" + b"\0" * 100)
    status, last, err = run_cli(capsys, *argv)
    assert status == 2 and "Traceback" not in err
    assert last.startswith(f"kerasbert: error: {output / 'backup' / 'latest.weights.h5'}: damaged: "), err
    shutil.rmtree(output / "backup")
    atomic_write_text(output / "history.jsonl", '{"epoch": 1, "val_f1": 0.5}\n{"epoch": 2, "val_f')
    status, last, err = run_cli(capsys, *argv)
    assert status == 2 and "Traceback" not in err
    assert last.startswith(f"kerasbert: error: {output / 'history.jsonl'}, line 2: damaged: not valid JSON"), err


# --- settings that disagree with the weights ------------------------------------


def edit_settings(path, edit):
    settings = json.loads(Path(path).read_text(encoding="utf-8"))
    edit(settings)
    Path(path).write_text(json.dumps(settings), encoding="utf-8")


SETTINGS_CASES = {
    # name: (run, settings file, edit, message after "<settings file>: ")
    "a tag list one short": ("ner", "tagger.json", lambda s: s["tags"].pop(),
                             '"tags" lists 8 labels, but the model (model.keras) scores 9: the settings do not belong '
                             "to these weights"),
    "a tag list two short": ("ner", "tagger.json", lambda s: s.update(tags=s["tags"][:-2]),
                             '"tags" lists 7 labels, but the model (model.keras) scores 9'),
    "a LoRA model's tag list one long": ("ner_lora", "tagger.json", lambda s: s["tags"].append("B-NEW"),
                                         '"tags" lists 10 labels, but the model (model.json) scores 9'),
    "a predicate list one short": ("triples", "extractor.json", lambda s: s["predicates"].pop(),
                                   '"predicates" lists '),
    "max_length beyond the position table": ("ner", "tagger.json", lambda s: s.update(max_length=10_000),
                                             '"max_length" 10000 is longer than the encoder\'s '),
    "an unknown head": ("ner", "tagger.json", lambda s: s.update(head="no-such-head"),
                        "\"head\": unknown ner head 'no-such-head'; the heads are: "),
}


@pytest.mark.parametrize("case", list(SETTINGS_CASES))
def test_settings_that_do_not_fit_the_weights_are_refused_naming_the_file_and_field(runs, tmp_path, capsys, case):
    """A settings file edited by hand (or copied from another model): a tag
    list one entry short used to predict silently different scores, two
    short to crash mid-stream, a max_length beyond the encoder's positions
    to fail on the first long text; an unknown head's message did not name
    the file."""
    name, settings_file, edit, message = SETTINGS_CASES[case]
    run = damaged_copy(runs, name, tmp_path, lambda m: edit_settings(m / settings_file, edit))
    task = "ner" if name.startswith("ner") else "triples"
    status, last, err = run_cli(capsys, task, "predict", "--model", run, runs["texts"])
    assert status == 2 and "Traceback" not in err, err
    assert last.startswith(f"kerasbert: error: {run / 'model' / settings_file}: {message}"), err
