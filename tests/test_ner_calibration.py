"""Calibration of NER entity scores (kerasbert_apps.ner.calibration): hand-made outcomes."""

import numpy as np
import pytest
from conftest import require_module

from kerasbert_apps.ner.calibration import calibration
from kerasbert_apps.ner.calibration import entity_outcomes
from kerasbert_apps.ner.calibration import expected_calibration_error
from kerasbert_apps.ner.calibration import fit_temperature
from kerasbert_apps.ner.calibration import format_calibration
from kerasbert_apps.ner.calibration import reliability_figure
from kerasbert_apps.ner.calibration import reliability_table
from kerasbert_apps.ner.calibration import score_logits
from kerasbert_apps.ner.calibration import sigmoid_scores
from kerasbert_apps.ner.evaluate import format_scores
from kerasbert_apps.ner.evaluate import score
from kerasbert_apps.ner.examples import Entity
from kerasbert_apps.ner.examples import Example


def test_ece_of_hand_made_outcomes():
    scores = [0.05, 0.15, 0.15, 0.95, 0.95, 0.95, 1.0, 0.95]
    correct = [False, True, False, True, True, False, True, True]
    # bin [0, .1): 1 outcome, |0 - .05|; bin [.1, .2): 2, |.5 - .15|; bin [.9, 1]: 5, |.8 - .96|
    want = (1 * 0.05 + 2 * 0.35 + 5 * 0.16) / 8
    assert expected_calibration_error(scores, correct) == pytest.approx(want, abs=1e-12)
    table = reliability_table(scores, correct)
    assert [row["count"] for row in table] == [1, 1 + 1, 0, 0, 0, 0, 0, 0, 0, 5]
    assert table[9]["mean_score"] == pytest.approx(0.96) and table[9]["accuracy"] == pytest.approx(0.8)
    assert table[2]["mean_score"] is None and table[2]["accuracy"] is None
    assert (table[0]["low"], table[0]["high"], table[9]["high"]) == (0.0, 0.1, 1.0)


def test_ece_bins_edges_and_bad_input():
    # A score on an edge goes to the bin above; 1.0 to the last; 0.0 to the first.
    table = reliability_table([0.0, 0.1, 0.5, 0.9999, 1.0], [True] * 5)
    assert [row["count"] for row in table] == [1, 1, 0, 0, 0, 1, 0, 0, 0, 2]
    # Perfect calibration: each bin's accuracy is its mean score.
    assert expected_calibration_error([0.25] * 4 + [0.75] * 4, [True, False, False, False] + [True] * 3 + [False]) == 0
    assert expected_calibration_error([1.0, 1.0], [True, True]) == 0
    assert expected_calibration_error([0.5] * 4, [True] * 4) == pytest.approx(0.5)
    assert expected_calibration_error([], []) is None
    assert expected_calibration_error([0.3, 0.8], [True, True], bins=2) == pytest.approx((0.7 + 0.2) / 2)
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        reliability_table([0.5, 1.5], [True, False])
    with pytest.raises(ValueError, match="1 do not, e.g. nan"):
        reliability_table([float("nan")], [True])


def test_entity_outcomes_match_gold_entities_exactly_on_words():
    text = "Peter Blackburn visited New York today"
    words = [(0, 5), (6, 15), (16, 23), (24, 27), (28, 32), (33, 38)]
    gold = [Entity(0, 15, "PER"), Entity(24, 32, "LOC")]
    example = Example(text, gold, "t:1", words)
    prediction = {"entities": [
        {"start": 0, "end": 15, "type": "PER", "score": 0.9},   # exact
        {"start": 24, "end": 27, "type": "LOC", "score": 0.6},  # part of New York: wrong
        {"start": 28, "end": 32, "type": "LOC", "score": 0.2},  # the rest: wrong
        {"start": 16, "end": 23, "type": "ORG", "score": 0.1},  # spurious
    ]}
    widened = {"entities": [{"start": 1, "end": 15, "type": "PER", "score": 0.7},  # inside a word: widened, right
                            {"start": 24, "end": 32, "type": "ORG", "score": 0.8}]}  # right span, wrong type
    scores, correct, unscored = entity_outcomes([example, example], [prediction, widened])
    np.testing.assert_allclose(scores, [0.9, 0.6, 0.2, 0.1, 0.7, 0.8])
    assert correct.tolist() == [True, False, False, False, True, False] and unscored == 0

    result = score([example, example], [prediction, widened])["calibration"]
    assert (result["entities"], result["correct"], result["bins"]) == (6, 2, 10)
    assert result["ece"] == pytest.approx(expected_calibration_error(scores, correct))
    assert "calibration: ECE" in format_scores(score([example], [prediction]))
    lines = format_calibration(result).splitlines()
    assert "10 equal-width score bins [0, 0.1) ... [0.9, 1]" in lines[0]
    assert len(lines) == 2 + sum(row["count"] > 0 for row in result["table"])
    assert calibration([example], [{"entities": []}])["ece"] is None
    assert format_calibration(calibration([example], [{"entities": []}])) == \
        "calibration: no predicted entities with a score"
    # Entities without a score (hand-made predictions) are counted and left out.
    no_score = {"entities": [{"start": 0, "end": 15, "type": "PER"}, {"start": 24, "end": 32, "type": "LOC"}]}
    result = calibration([example, example], [no_score, prediction])
    assert (result["entities"], result["unscored"], result["correct"]) == (4, 2, 1)
    assert "(2 predicted entities without a score left out)" in format_calibration(result)
    assert score([example], [no_score])["f1"] == 1.0


def test_reliability_figure_is_written_without_pyplot(tmp_path):
    require_module("matplotlib")
    result = {"bins": 10, "entities": 8, "correct": 5, "ece": 0.19,
              "table": reliability_table([0.05, 0.15, 0.15, 0.95, 0.95, 0.95, 1.0, 0.95],
                                         [False, True, False, True, True, False, True, True])}
    figure = reliability_figure(result, title="hand-made")
    figure.savefig(tmp_path / "reliability.png")
    assert (tmp_path / "reliability.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_fit_temperature_recovers_the_temperature_the_outcomes_were_drawn_with():
    rng = np.random.default_rng(0)
    logits = rng.normal(2.0, 4.0, 20000)
    for truth in (0.5, 1.0, 2.5):
        correct = rng.random(logits.size) < 1 / (1 + np.exp(-logits / truth))
        assert fit_temperature(sigmoid_scores(logits), correct) == pytest.approx(truth, rel=0.08)
        scores = 1 / (1 + np.exp(-logits / truth))
        fitted = 1 / (1 + np.exp(-logits / fit_temperature(sigmoid_scores(logits), correct)))
        # over-confident scores (T = 1 when the truth is 2.5) are far off; the fitted ones are not
        if truth == 2.5:
            assert expected_calibration_error(1 / (1 + np.exp(-logits)), correct) > 0.1
        assert expected_calibration_error(fitted, correct) < 0.02
        assert expected_calibration_error(scores, correct) < 0.02
    # nothing to fit: every entity right, or none
    two = sigmoid_scores([1.0, 3.0])
    assert fit_temperature(two, [True, True]) == 1.0 == fit_temperature(two, [False, False])
    with pytest.raises(ValueError, match="3 scores but 2 outcomes"):
        fit_temperature(sigmoid_scores([1.0, 2.0, 3.0]), [True, False])


def test_score_logits_invert_the_sigmoid_and_clip_saturated_scores():
    logits = np.array([-5.0, -0.3, 0.0, 2.0, 9.0])
    for temperature in (1.0, 2.0):
        scores = 1 / (1 + np.exp(-logits / temperature))
        np.testing.assert_allclose(score_logits(scores, temperature), logits, atol=1e-9)
    assert np.isfinite(score_logits([0.0, 1.0])).all() and score_logits([1.0])[0] == pytest.approx(16.1, abs=0.1)
