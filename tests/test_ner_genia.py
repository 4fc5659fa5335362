"""The GENIA reader (--format genia; W2NER-style JSON with word-index entities
that may nest): hand-made records, errors, and the shared GENIA dev file."""

import json

import pytest

from kerasbert_apps.ner.examples import Entity
from kerasbert_apps.ner.readers import detect_format
from kerasbert_apps.ner.readers import read_ner_file
from conftest import require_shared
from kerasbert.errors import InputDataError

RECORDS = [
    {"sentence": ["IL-2", "gene", "expression", "in", "T", "cells"],
     "ner": [{"index": [0, 1], "type": "DNA"}, {"index": [0], "type": "protein"}, {"index": [4, 5], "type": "cell_type"},
             {"index": [0], "type": "protein"}]},
    {"sentence": ["No", "entity", "."], "ner": []},
]


def _write(tmp_path, records, name="g.json"):
    path = tmp_path / name
    path.write_text(json.dumps(records), encoding="utf-8")
    return path


def test_hand_made_records_nested_kept_or_resolved(tmp_path):
    path = _write(tmp_path, RECORDS)
    assert detect_format(path) == "jsonl"
    result = read_ner_file(path, keep_overlaps=True)  # auto: the flavour is recognised
    first = result.examples[0]
    assert result.report.format == "genia"
    assert first.text == "IL-2 gene expression in T cells"
    assert first.words == [(0, 4), (5, 9), (10, 20), (21, 23), (24, 25), (26, 31)]
    assert first.entities == [Entity(0, 4, "protein"), Entity(0, 9, "DNA"), Entity(24, 31, "cell_type")]
    assert [first.text[e.start:e.end] for e in first.entities] == ["IL-2", "IL-2 gene", "T cells"]
    assert result.examples[1].entities == [] and result.examples[1].text == "No entity ."
    report = result.report
    assert (report.entities_read, report.entities) == (4, 3)
    assert report.skipped == {"duplicate span": 1}
    assert report.overlaps_kept == 1 and report.kept_overlap_kinds == {"nested": 1}
    assert "overlapping spans kept: 1 (nested 1)" in report.summary()

    bio = read_ner_file(path, format="genia")  # the BIO heads: the overlap rule keeps the longest
    assert bio.examples[0].entities == [Entity(0, 9, "DNA"), Entity(24, 31, "cell_type")]
    assert bio.report.overlap_kinds == {"nested": 1} and bio.report.skipped["overlapping span"] == 1


@pytest.mark.parametrize("entity, problem", [
    ({"index": [0, 2], "type": "DNA"}, "not contiguous"),
    ({"index": [7], "type": "DNA"}, "must be word positions 0..2"),
    ({"index": [], "type": "DNA"}, "must be word positions"),
    ({"index": [1], "type": ""}, "entity type must be a non-empty string"),
])
def test_bad_records_name_the_record_and_the_problem(tmp_path, entity, problem):
    path = _write(tmp_path, [RECORDS[1], {"sentence": ["a", "b", "c"], "ner": [entity]}])
    with pytest.raises(InputDataError, match=problem) as error:
        read_ner_file(path, format="genia")
    assert "record 2" in str(error.value)


def test_shared_genia_dev_file(tmp_path):
    path = require_shared("data", "genia_nested_partial", "dev.json")
    result = read_ner_file(path, keep_overlaps=True)
    first = result.examples[0]
    assert first.text.startswith("IL-2 gene expression and NF-kappa B activation through CD28")
    assert [(first.text[e.start:e.end], e.type) for e in first.entities] == [
        ("IL-2 gene", "DNA"), ("NF-kappa B", "protein"), ("CD28", "protein"), ("5-lipoxygenase", "protein")]
    second = result.examples[1]
    assert [(second.text[e.start:e.end], e.type) for e in second.entities][:2] == [
        ("lipoxygenase", "protein"), ("lipoxygenase metabolites", "protein")]  # nested
    # the counts of the data's README: 1669 sentences, 5365 entities, 570 inside another
    report = result.report
    assert (report.examples, report.entities_read, report.entities) == (1669, 5365, 5365)
    assert report.kept_overlap_kinds == {"nested": 570}
    assert set(report.types) == {"DNA", "RNA", "cell_line", "cell_type", "protein"}
