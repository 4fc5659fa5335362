"""Run settings declared once (kerasbert.settings): files, CLI options, the auto rule."""

import argparse
import json
import re

import pytest

from kerasbert_apps.ner.train import NerTrainSettings
from kerasbert_apps.triples.train import TriplesTrainSettings
from conftest import REPO_ROOT
from kerasbert.errors import KerasbertError
from kerasbert.settings import add_settings_options
from kerasbert.settings import help_text
from kerasbert.settings import load_settings
from kerasbert.settings import settings_from_args


def parse(cls, argv):
    parser = argparse.ArgumentParser()
    add_settings_options(parser, cls)
    return settings_from_args(cls, parser.parse_args(argv))


def test_defaults_then_file_then_options(tmp_path):
    path = tmp_path / "settings.toml"
    path.write_text('epochs = 7\nbatch_size = "auto"\nlstm = false\nlearning_rate = 2e-5\n', encoding="utf-8")
    settings = parse(NerTrainSettings, ["--settings", str(path), "--learning-rate", "3e-5", "--no-crf"])
    assert (settings.epochs, settings.batch_size, settings.lstm, settings.crf) == (7, "auto", False, False)
    assert settings.learning_rate == 3e-5  # the option beats the file
    assert settings.max_length == 128  # the default where neither says
    # A run's settings.json goes back in as it was written.
    (tmp_path / "run.json").write_text(json.dumps(vars(settings)), encoding="utf-8")
    assert load_settings(NerTrainSettings, tmp_path / "run.json") == settings


def test_auto_or_a_number(tmp_path, capsys):
    assert parse(NerTrainSettings, []).epochs == "auto"
    assert parse(NerTrainSettings, ["--epochs", "5", "--patience", "0"]).epochs == 5
    for bad in (["--epochs", "0"], ["--epochs", "many"], ["--batch-size", "2.5"], ["--patience", "-1"]):
        with pytest.raises(SystemExit):
            parse(NerTrainSettings, bad)
        assert "auto or an integer" in capsys.readouterr().err
    path = tmp_path / "bad.json"
    path.write_text('{"epochs": "lots"}', encoding="utf-8")
    with pytest.raises(KerasbertError, match=r"bad.json: setting epochs: expected auto or an integer >= 1, got 'lots'"):
        load_settings(NerTrainSettings, path)
    path.write_text('{"epoch": 3}', encoding="utf-8")
    with pytest.raises(KerasbertError, match=r"bad.json: unknown setting\(s\): epoch \(known: "):
        load_settings(NerTrainSettings, path)
    settings = NerTrainSettings(checkpoint="c", train="t", dev="d", output="o", batch_size=0)
    with pytest.raises(KerasbertError, match="batch_size: expected auto or an integer >= 1"):
        settings.check()


def test_help_texts_say_the_numbers_of_the_rule():
    import dataclasses

    for cls in (NerTrainSettings, TriplesTrainSettings):
        for field in dataclasses.fields(cls):
            assert "{" not in help_text(cls, field), field.name
    epochs = {f.name: f for f in dataclasses.fields(TriplesTrainSettings)}["epochs"]
    assert "at least 10" in help_text(TriplesTrainSettings, epochs)
    assert "at least 3" in help_text(NerTrainSettings, epochs)


@pytest.mark.parametrize("cls, rows, batch_size, epochs", [
    (NerTrainSettings, 14041, 32, 3),  # CoNLL-2003: as before the rule
    (NerTrainSettings, 1600, 32, 3),
    (NerTrainSettings, 1000, 16, 3),
    (NerTrainSettings, 400, 8, 3),
    (NerTrainSettings, 200, 8, 6),
    (NerTrainSettings, 100, 8, 12),
    (NerTrainSettings, 10, 8, 20),  # at most 20 epochs
    (TriplesTrainSettings, 5019, 16, 10),  # WebNLG: as before the rule
    (TriplesTrainSettings, 400, 8, 10),
    (TriplesTrainSettings, 100, 8, 12),
])
def test_auto_rule(cls, rows, batch_size, epochs):
    resolved = cls().resolve_auto(rows)
    assert (resolved.batch_size, resolved.epochs, resolved.patience) == (batch_size, epochs, 2)
    assert cls(epochs=4).resolve_auto(rows).patience == 0  # early stopping only comes with auto epochs
    assert cls(epochs=4, patience=3).resolve_auto(rows).patience == 3
    given = cls(batch_size=5, epochs=2).resolve_auto(rows)
    assert (given.batch_size, given.epochs) == (5, 2)  # numbers are used as they are


def test_docs_table_is_the_rule():
    """The NER page's table of what auto chooses is generated at build time (docs/hooks.py) and
    is what the rule computes."""
    import importlib.util

    assert "<!-- kerasbert:auto-rule -->" in (REPO_ROOT / "docs" / "ner.md").read_text(encoding="utf-8")
    spec = importlib.util.spec_from_file_location("kerasbert_docs_hooks", REPO_ROOT / "docs" / "hooks.py")
    hooks = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(hooks)
    text = hooks.auto_rule_table()
    rows = re.findall(r"^\| ([\d,]+) \| (\d+), (\d+) \(([\d,]+)\) \| (\d+), (\d+) \(([\d,]+)\) \|$", text, re.M)
    assert len(rows) >= 4
    for n, *numbers in rows:
        n = int(n.replace(",", ""))
        expected = []
        for cls in (NerTrainSettings, TriplesTrainSettings):
            resolved = cls().resolve_auto(n)
            steps = -(-n // resolved.batch_size)
            expected += [resolved.batch_size, resolved.epochs, steps * resolved.epochs]
        assert [int(x.replace(",", "")) for x in numbers] == expected, n
