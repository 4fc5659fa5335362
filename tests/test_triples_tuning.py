"""Threshold tuning (``kerasbert triples tune``, :mod:`kerasbert_apps.triples.tuning`)
on a made-up extractor whose F1 is a known function of its two thresholds:
the grid scored, the best pair chosen, ties kept nearest the defaults. The
command itself runs on the toy models in test_triples_train.py (casrel) and
test_triples_gplinker.py (gplinker)."""

import pytest

from kerasbert_apps.triples.tuning import format_tuning
from kerasbert_apps.triples.tuning import tune_thresholds
from kerasbert.cli import main


class MadeUp:
    """Stands for a CasRel extractor: ``predict`` returns its thresholds, and
    :func:`f1_of` turns them into a score."""

    head_name, threshold_options = "casrel", ("start", "end")

    def __init__(self, thresholds=(0.5, 0.5)):
        self.thresholds = thresholds

    def with_threshold_options(self, given):
        return type(self)((given["start"], given["end"]))

    def predict(self, texts, batch_size=32):
        return [self.thresholds] * len(texts)

    def live_copy(self):  # the tuning grid predicts through a live copy, as TriplePipeline.live_copy
        return self

    def live_threshold_options(self, given):
        return self.with_threshold_options(given)


def scorer(f1_of):
    def score(examples, predictions):
        f1 = f1_of(*predictions[0])
        return {"precision": f1, "recall": f1, "f1": f1}

    return score


def test_the_best_pair_of_the_grid_is_chosen():
    examples = [type("E", (), {"text": "a"})()] * 3
    lines = []
    result = tune_thresholds(MadeUp(), examples, scorer(lambda s, e: 1 - (s - 0.3) ** 2 - (e - 0.6) ** 2),
                             values=(0.3, 0.6), log=lines.append)
    assert result["head"] == "casrel" and result["names"] == ["start", "end"]
    assert [e["thresholds"] for e in result["grid"]] == [[a, b] for a in (0.3, 0.5, 0.6) for b in (0.3, 0.5, 0.6)]
    assert len(lines) == 9 and lines[0].startswith("  start 0.60  end 0.60:")  # the strictest first
    assert result["best"]["thresholds"] == [0.3, 0.6] and result["best"]["f1"] == pytest.approx(1.0)
    assert result["default"]["thresholds"] == [0.5, 0.5]
    assert result["default"]["f1"] == pytest.approx(1 - 0.04 - 0.01)
    assert "best: --threshold-start 0.3  --threshold-end 0.6: " in format_tuning(result, "dev.json")


class Counted(MadeUp):
    """Predicts more triples the lower its thresholds: ``(1 - start) * (1 - end) * 1000`` of them."""


def counted(f1_of, gold=10):
    def score(examples, predictions):
        start, end = predictions[0]
        predicted = round((1 - start) * (1 - end) * 1000)
        f1 = f1_of(start, end)
        return {"mode": "exact", "precision": f1, "recall": f1, "f1": f1,
                "exact": {"predicted": predicted, "gold": gold}}

    return score


def test_pairs_that_cannot_beat_the_best_are_skipped_not_scored():
    examples = [type("E", (), {"text": "a"})()]
    seen = []

    def f1_of(s, e):
        seen.append((s, e))
        return 0.5 if (s, e) == (0.6, 0.6) else 0.01

    # at 0.6 / 0.6: 160 triples for 10 gold, so every pair below it scores F1 <= 2 * 10 / 170 < 0.5
    result = tune_thresholds(Counted(), examples, counted(f1_of), values=(0.1, 0.6), log=None)
    assert seen == [(0.6, 0.6), (0.5, 0.5)]  # every pair below the best skipped, but the default
    assert result["skipped"] == [[a, b] for a in (0.1, 0.5, 0.6) for b in (0.1, 0.5, 0.6)
                                 if (a, b) not in ((0.6, 0.6), (0.5, 0.5))]
    assert result["best"]["thresholds"] == [0.6, 0.6]
    assert "(2 pairs (7 more skipped))" in format_tuning(result, "dev.json", tuned_here=True)
    # nothing beats F1 0: only a flood of triples (over 50 per gold one) is skipped then
    seen.clear()
    flood = tune_thresholds(Counted(), examples, counted(lambda s, e: seen.append((s, e)) or 0.0, gold=2),
                            values=(0.1, 0.9), log=None)
    # 0.5 / 0.5 (the default, scored) predicts 250 for 2 gold: the pairs below it are skipped
    assert flood["skipped"] == [[0.1, 0.1], [0.1, 0.5], [0.5, 0.1]] and (0.1, 0.1) not in seen
    assert len(flood["grid"]) == 6 and flood["best"]["thresholds"] == [0.5, 0.5]


def test_ties_keep_the_pair_nearest_the_defaults():
    examples = [type("E", (), {"text": "a"})()]
    flat = tune_thresholds(MadeUp(), examples, scorer(lambda s, e: 0.0), values=(0.1, 0.9), log=None)
    assert flat["best"]["thresholds"] == [0.5, 0.5]
    # two pairs tie at the top: the one nearer 0.5 / 0.5 wins
    step = tune_thresholds(MadeUp(), examples, scorer(lambda s, e: float(e <= 0.4)), values=(0.1, 0.4, 0.9), log=None)
    assert step["best"]["thresholds"] == [0.5, 0.4]


@pytest.mark.parametrize("values, problem", [("0.3,x", "comma-separated numbers"), ("0.3,1.0", "in (0, 1)"),
                                             (",", "in (0, 1)")])
def test_bad_values_are_a_clear_error(tmp_path, capsys, values, problem):
    assert main(["triples", "tune", "--model", str(tmp_path), "--data", str(tmp_path / "dev.json"),
                 "--values", values]) == 2
    err = capsys.readouterr().err
    assert problem in err and "Traceback" not in err


def test_the_command_writes_the_best_pair_unless_dry_run(tmp_path, capsys, monkeypatch):
    from kerasbert_apps.triples.train import TRIPLES

    saved = []

    class Folder(MadeUp):
        settings_file, kind = "extractor.json", "triples model"

        def save_settings(self, directory):
            saved.append((directory, self.thresholds))

    (tmp_path / "extractor.json").write_text("{}")
    monkeypatch.setattr(TRIPLES, "read", lambda path, settings, what: [type("E", (), {"text": "a"})()])
    monkeypatch.setattr(TRIPLES, "load", lambda model, verbose=False: Folder())
    monkeypatch.setattr(TRIPLES, "score", lambda ex, pred, settings: scorer(lambda s, e: s * (1 - e))(ex, pred))
    command = ["triples", "tune", "--model", str(tmp_path), "--data", "dev.json", "--values", "0.2,0.9"]
    assert main(command + ["--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "best: --threshold-start 0.9  --threshold-end 0.2: " in out and "model folder is unchanged" in out
    assert saved == []
    assert main(command) == 0
    assert saved == [(tmp_path, (0.9, 0.2))] and f"written: {tmp_path / 'extractor.json'}" in capsys.readouterr().out
