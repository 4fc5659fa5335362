"""Model folders written before the head registry still load and predict the same.

tests/data/heads_33d6836/ holds one tiny folder per head, written by the code
of commit 33d6836 (tests/data/heads_33d6836/make.py: untrained heads on the
tiny test checkpoint, short windows so that the window merge runs) with what
that code's ``predict`` gave. Their settings files record no ``"head"``
(but ``gplinker.json``):
:func:`kerasbert_apps.base.heads.head_of` tells the head by the settings
file's name (legacy sniffing), and a folder saved again records it.
"""

import json
import re
import shutil
from pathlib import Path

import pytest

from conftest import same_results
from kerasbert_apps.base import heads
from kerasbert_apps.ner.train import NER
from kerasbert_apps.triples.train import TRIPLES
from kerasbert.errors import KerasbertError

DATA = Path(__file__).parent / "data" / "heads_33d6836"
TASKS = {"crf": NER, "softmax": NER, "global-pointer": NER, "casrel": TRIPLES, "gplinker": TRIPLES}
TEXTS = ["all work and no play makes jack a dull boy", "jack", "", "dull dull jack boy play work all and no makes"]


@pytest.mark.parametrize("name", list(TASKS))
def test_a_folder_written_before_the_registry_loads_and_predicts_the_same(name, tmp_path):
    folder = tmp_path / name
    shutil.copytree(DATA / name, folder)
    task = TASKS[name]
    head = heads.head_of(task.name, folder)
    settings_file = head.settings_file
    # the old format: no "head" (gplinker.json alone had one)
    assert ("head" in json.loads((folder / settings_file).read_text())) == (name == "gplinker")
    # crf and softmax share tagger.json: the folder is loaded by the first (the same pipeline class)
    assert head.pipeline_class() is heads.get(task.name, name).pipeline_class()
    pipeline = task.load(folder)
    assert pipeline.head_name == name
    expected = json.loads((folder / "expected.json").read_text())
    assert sum(len(r.get("entities", r.get("triples", []))) for r in expected) > 0  # a check that could fail
    same_results(pipeline.predict(TEXTS), expected)

    # saved again, the folder records its head (the settings file rewritten
    # alone, as calibrate and tune do)
    pipeline.save_settings(folder)
    assert json.loads((folder / settings_file).read_text())["head"] == name
    assert heads.head_of(task.name, folder).name == name
    assert task.load(folder).head_name == name


def test_an_unknown_recorded_head_is_a_one_line_error(tmp_path):
    folder = tmp_path / "model"
    shutil.copytree(DATA / "casrel", folder)
    settings = json.loads((folder / "extractor.json").read_text())
    (folder / "extractor.json").write_text(json.dumps({**settings, "head": "nope"}))
    with pytest.raises(KerasbertError, match=rf"^{re.escape(str(folder / 'extractor.json'))}: \"head\": unknown "
                                             r"triples head 'nope'; the heads are: casrel, gplinker"):
        TRIPLES.load(folder)
