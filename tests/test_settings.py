"""Run settings declared once (kerasbert.training.settings): files, CLI options, the auto rule."""

import argparse
import dataclasses
import json
import os
import re

import pytest

from kerasbert_apps.ner.train import NerTrainSettings
from kerasbert_apps.triples.train import TriplesTrainSettings
from conftest import REPO_ROOT
from kerasbert.errors import KerasbertError
from kerasbert.training.settings import AUTO_HEAD_LEARNING_RATE
from kerasbert.training.settings import add_settings_options
from kerasbert.training.settings import help_text
from kerasbert.training.settings import load_settings
from kerasbert.training.settings import settings_from_args


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
    # a head that declares nothing: 300 steps, at least 3 epochs (NER) or 10 (triples)
    (NerTrainSettings, 14041, 32, 3),  # CoNLL-2003: as before the rule
    (NerTrainSettings, 3200, 32, 3),
    (NerTrainSettings, 2000, 20, 3),
    (NerTrainSettings, 1000, 10, 3),
    (NerTrainSettings, 800, 8, 3),  # the old rule jumped here: 294 steps at 784 rows, 150 at 800
    (NerTrainSettings, 784, 10, 4),
    (NerTrainSettings, 400, 8, 6),
    (NerTrainSettings, 100, 8, 20),  # at most 20 epochs
    (TriplesTrainSettings, 5019, 16, 10),  # WebNLG: as before the rule
    (TriplesTrainSettings, 400, 13, 10),
    (TriplesTrainSettings, 100, 8, 20),
])
def test_auto_rule(cls, rows, batch_size, epochs):
    resolved = cls().resolve_auto(rows)
    assert (resolved.batch_size, resolved.epochs, resolved.patience) == (batch_size, epochs, 2)
    assert resolved.head_learning_rate == AUTO_HEAD_LEARNING_RATE
    assert cls(epochs=4).resolve_auto(rows).patience == 0  # early stopping only comes with auto epochs
    assert cls(epochs=4, patience=3).resolve_auto(rows).patience == 3
    given = cls(batch_size=5, epochs=2, head_learning_rate=2e-3).resolve_auto(rows, head_learning_rate=7e-3)
    assert (given.batch_size, given.epochs, given.head_learning_rate) == (5, 2, 2e-3)  # numbers are used as they are


def steps_of(settings, rows, **declared):
    resolved = settings.resolve_auto(rows, **declared)
    return resolved, -(-rows // resolved.batch_size) * resolved.epochs


@pytest.mark.parametrize("task", ["ner", "triples"])
def test_auto_steps_are_continuous_for_every_head(task):
    """For every registered head: the steps never fall below what the head aims for (unless the
    epochs cap stops a tiny dataset), overshoot it by at most a seventh (integer batches) plus
    one step per epoch, and grow without a jump (the old rule halved them where the batch went
    from 8 to 16)."""
    from kerasbert_apps.base import heads
    from kerasbert.training import settings as rule

    cls = {"ner": NerTrainSettings, "triples": TriplesTrainSettings}[task]
    for head in heads.heads(task):
        declared = head.training_defaults()
        target = declared["steps"] or rule.AUTO_STEPS
        last = 0
        for rows in [*range(1, 4001), *range(4001, 20001, 37)]:
            resolved, steps = steps_of(cls(head=head.name), rows, **declared)
            if resolved.epochs < rule.AUTO_MAX_EPOCHS:
                assert steps >= target, (head.name, rows, steps)
            large = resolved.epochs * -(-rows // cls.auto_batch_size)  # large data: the fewest epochs, largest batch
            assert steps <= max(target * 8 / 7 + resolved.epochs, large), (head.name, rows, steps)
            assert steps >= last * 6 / 7 - resolved.epochs, (head.name, rows, last, steps)
            last = steps


def test_a_head_declares_what_its_training_needs():
    """Task.resolve_auto reads the run's head's registration; an option given wins."""
    from kerasbert_apps.base.heads import Head
    from kerasbert_apps.ner.train import NER

    head = Head(name="slow-learner", task="ner", pipeline="some.module:Pipeline", settings_file="x.json",
                head_learning_rate=4e-3, auto_steps=900, auto_min_epochs=5)
    settings = NerTrainSettings()
    resolved = settings.resolve_auto(14041, **head.training_defaults())
    assert (resolved.batch_size, resolved.epochs, resolved.head_learning_rate) == (32, 5, 4e-3)
    resolved, steps = steps_of(settings, 600, **head.training_defaults())
    assert (resolved.batch_size, resolved.epochs, steps) == (8, 12, 900)
    assert NerTrainSettings(head_learning_rate=1e-4).resolve_auto(600, **head.training_defaults()).head_learning_rate == 1e-4
    for name in ("crf", "global-pointer", "biaffine"):  # the registered heads' declarations are what a run gets
        registered = NER.head(NerTrainSettings(head=name))
        expected = settings.resolve_auto(500, **registered.training_defaults())
        assert NER.resolve_auto(NerTrainSettings(head=name), 500, name) == dataclasses.replace(expected, head=name)


def test_docs_table_is_the_rule(monkeypatch):
    """The NER page's table of what auto chooses is generated at build time (docs/hooks.py) and
    is what the rule computes."""
    import importlib.util

    # docs/hooks.py sets KERASBERT_NO_PLUGINS for the site's build: not for the tests after this one
    monkeypatch.setenv("KERASBERT_NO_PLUGINS", os.environ.get("KERASBERT_NO_PLUGINS", ""))

    assert "<!-- kerasbert:auto-rule -->" in (REPO_ROOT / "docs" / "ner.md").read_text(encoding="utf-8")
    spec = importlib.util.spec_from_file_location("kerasbert_docs_hooks", REPO_ROOT / "docs" / "hooks.py")
    hooks = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(hooks)
    text = hooks.auto_rule_table()
    from kerasbert_apps.base import heads
    from kerasbert_apps.ner.train import NER
    from kerasbert_apps.triples.train import TRIPLES

    runs = [(task, head) for task in (NER, TRIPLES) for head in heads.heads(task.name)]
    header = next(line for line in text.splitlines() if line.startswith("| training sequences |"))
    assert header.count("`") == 2 * len(runs)
    rows = [line.strip("|").split("|") for line in text.splitlines() if re.match(r"^\| [\d,]+ \| \d", line)]
    assert len(rows) >= 4
    for n, *cells in rows:
        n = int(n.replace(",", ""))
        expected = []
        for task, head in runs:
            resolved = task.train_settings(head=head.name).resolve_auto(n, **head.training_defaults())
            steps = -(-n // resolved.batch_size)
            expected.append(f"{resolved.batch_size}, {resolved.epochs} ({steps * resolved.epochs:,})")
        assert [c.strip() for c in cells] == expected, n
