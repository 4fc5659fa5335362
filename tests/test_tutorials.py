"""The tutorials (docs/tutorials/): their pages show every step ``docs/gen_tutorials.py`` runs,
their data is what the generator writes from the shipped samples, and their recorded outputs are
what the commands print today.

The first tests run each tutorial's commands again, as the page shows them (each a fresh
``kerasbert`` process: training on the starter encoder and the toy checkpoint, evaluate, predict,
export, the SavedModel's reply), and compare the outputs with the recorded ones: the same text,
every number within the generator's tolerance (``TOLERANCE`` for a score, ``RELATIVE_TOLERANCE``
for other figures), so a score that falls fails: the longest tests of this file (minutes). When
one fails, ``python docs/gen_tutorials.py`` rewrites the records (and the diff shows what moved).
"""

import importlib.util
import json
import re
import tempfile

import pytest

from conftest import REPO_ROOT
from conftest import require_shared
from conftest import require_starter

DOCS = REPO_ROOT / "docs"
MARK = re.compile(r"<!-- kerasbert:tutorial ([\w-]+) ([\w-]+) -->")


def _gen():
    spec = importlib.util.spec_from_file_location("kerasbert_docs_gen_tutorials", DOCS / "gen_tutorials.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("name", list(_gen().TUTORIALS))
def test_recorded_outputs_are_current(name):
    """Runs a tutorial's commands again and compares what they print with the records (numbers
    within the tolerance: a trained model's figures move a little with the CPU's arithmetic, a
    broken one's by more). One test per tutorial, first in this file, so that the two workers
    share them."""
    require_starter()
    require_shared("data", "models", "keras_bert_test_checkpoint")
    require_shared("data", "models", "albert_tiny_zh_google_INDEX_ONLY")
    require_shared("data", "people_daily_ner_partial")
    gen = _gen()
    assert gen.main(["--check", name]) == 0, f"stale tutorial outputs (see above): python docs/gen_tutorials.py {name}"


def test_records_say_when_and_with_what_they_ran():
    """Each record names its date, platform and the versions of Python and the packages that make
    its outputs, and its page shows them (``<!-- kerasbert:tutorial-run NAME -->``)."""
    gen = _gen()
    for name in gen.TUTORIALS:
        ran = json.loads(gen.record_path(name).read_text(encoding="utf-8"))["ran"]
        assert re.fullmatch(r"\d{4}-\d\d-\d\d", ran["date"]) and ran["platform"], name
        assert set(ran["versions"]) == {"python", *gen.PACKAGES}, name
        page = (DOCS / "tutorials" / f"{name}.md").read_text(encoding="utf-8")
        assert page.count(f"<!-- kerasbert:tutorial-run {name} -->") == 1, name
        assert "ran when this page was built" not in page, name


def test_a_score_that_falls_makes_the_record_stale():
    """The check compares numbers, not only the text around them: the CoNLL tutorial's test F1
    recorded higher (or lower) than the run by more than the tolerance is stale; within it, current."""
    gen = _gen()
    steps = json.loads(gen.record_path("conll-to-serving").read_text(encoding="utf-8"))["steps"]
    assert gen.differences(steps, steps) == []
    evaluate = next(step for step in steps if step["id"] == "evaluate")
    f1 = re.search(r"micro .* F1 (\d\.\d{4})", evaluate["output"]).group(1)

    def doctored(value):
        changed = [dict(step) for step in steps]
        step = next(step for step in changed if step["id"] == "evaluate")
        step["output"] = step["output"].replace(f"F1 {f1}", f"F1 {value:.4f}", 1)
        assert step["output"] != evaluate["output"]
        return changed

    # the run (steps) printed f1; the record said more by twice the tolerance: stale
    found = gen.differences(doctored(float(f1) + 2 * gen.TOLERANCE), steps)
    assert found and "evaluate: numbers out of tolerance" in found[0] and f1 in found[0]
    assert gen.differences(steps, doctored(0.0))  # a score that fell to zero
    assert gen.differences(doctored(float(f1) + gen.TOLERANCE / 2), steps) == []
    assert gen.close("400", "400") and not gen.close("400", "200") and gen.close("19.39", "21.0")


def test_pages_show_the_steps_the_generator_runs():
    """Each page's markers name exactly its tutorial's steps, in order, and the recorded
    commands are the generator's (a step added, removed or edited needs the records rewritten)."""
    gen = _gen()
    assert set(gen.TUTORIALS) == {p.stem for p in (DOCS / "tutorials").glob("*.md")}
    for name, steps in gen.TUTORIALS.items():
        page = (DOCS / "tutorials" / f"{name}.md").read_text(encoding="utf-8")
        marks = MARK.findall(page)
        assert {n for n, _ in marks} == {name}, name
        assert [s for _, s in marks] == [step["id"] for step in steps], name
        recorded = json.loads(gen.record_path(name).read_text(encoding="utf-8"))["steps"]
        shown = [step.get("run") or step.get("python") or step["show"] for step in steps]
        assert [(s["id"], s["command"]) for s in recorded] == list(zip([step["id"] for step in steps], shown)), (
            f"{name}: the recorded steps are not the generator's: python docs/gen_tutorials.py {name}")
        for step in recorded:  # what ran printed something; nothing of this machine shows
            assert step["output"] or step["kind"] == "show", (name, step["id"])
            assert str(REPO_ROOT) not in step["output"] and tempfile.gettempdir() not in step["output"], (name, step["id"])


def test_tutorial_data_is_the_generators(tmp_path):
    """docs/tutorials/data/ holds what ``write_data`` writes (from kerasbert_apps/samples), no more."""
    gen = _gen()
    written = gen.write_data(tmp_path)
    committed = {p.relative_to(gen.DATA).as_posix() for p in gen.DATA.rglob("*") if p.is_file()}
    assert committed == set(written)
    for name, text in written.items():
        assert (gen.DATA / name).read_text(encoding="utf-8") == text, name
    conll = (gen.DATA / "conll" / "train.conll").read_text(encoding="utf-8")
    assert "B-PER" in conll and conll.count("\n\n") >= 399


def test_masking_keeps_what_a_command_prints():
    gen = _gen()
    text = ("I0000 00:00:1795735169.522071   19824 cudart_stub.cc:31] Could not find cuda drivers\n"
            "Epoch 1/3\n50/50 - 12s - 240ms/step - loss: 3.1\nmodel: /x/y/runs/ner/model\n")
    shown = gen.mask(text, "/x/y")
    assert shown == "Epoch 1/3\n50/50 - …s - … - loss: 3.1\nmodel: $PWD/runs/ner/model"
    assert gen.shape("F1 0.8731 at epoch 3") == gen.shape("F1 0.9 at epoch 12") != gen.shape("F1 at epoch")
