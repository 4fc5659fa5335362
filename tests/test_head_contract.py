"""The head contract's own machinery (:mod:`kerasbert_apps.testing`): what it trains once, and how
it compares answers. The contract's checks run over the kit's heads in tests/test_heads_ner.py and
tests/test_heads_triples.py."""

import pytest

from kerasbert_apps.testing import trained
from kerasbert_apps.testing.compare import same_answers


def test_a_head_is_trained_once_per_set_of_training_options(monkeypatch, tmp_path_factory):
    """Two classes that train the same head with other ``train_options`` get runs of their own;
    the same options (in any order) share one."""
    runs = []
    monkeypatch.setattr(trained, "_SESSION", {})
    monkeypatch.setattr(trained, "_train", lambda task, name, factory, options: runs.append(options) or len(runs))
    first = trained.trained_head("ner", "crf", tmp_path_factory, {"lstm_units": 4, "dropout": 0.2})
    assert trained.trained_head("ner", "crf", tmp_path_factory, {"dropout": 0.2, "lstm_units": 4}) == first
    assert trained.trained_head("ner", "crf", tmp_path_factory, {"lstm_units": 8}) != first
    assert trained.trained_head("ner", "crf", tmp_path_factory) not in (first, 2)
    assert runs == [{"lstm_units": 4, "dropout": 0.2}, {"lstm_units": 8}, {}]


def test_answers_are_compared_offsets_and_all():
    want = [{"text": "dull jack", "entities": [{"start": 5, "end": 9, "type": "PER", "score": 0.9}]}]
    same_answers([{"text": "dull jack", "entities": [{"start": 5, "end": 9, "type": "PER", "score": 0.9001}]}],
                 want, 2e-4)
    for wrong, message in ((("start", 4), "start"), (("type", "THING"), "type"), (("score", 0.8), "score")):
        got = [{"text": "dull jack", "entities": [{**want[0]["entities"][0], wrong[0]: wrong[1]}]}]
        with pytest.raises(AssertionError, match=message):
            same_answers(got, want, 2e-4)
    with pytest.raises(AssertionError, match="entities"):
        same_answers([{"text": "dull jack", "entities": []}], want, 2e-4)
