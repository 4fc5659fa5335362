"""Imports: no circle anywhere in ``kerasbert`` and ``kerasbert_apps``, and a
lean serving import.

* Every import of every module of ``kerasbert/`` and ``kerasbert_apps/`` is
  read with :mod:`ast` (nothing is imported), a function's own included, and
  together they must form no cycle. A function-level import cannot fail at
  import time, but a circle through one is still two modules that each need
  the other: neither can be read, tested or moved alone. (Only ``if
  TYPE_CHECKING:`` blocks are left out: they never run.) The module-level
  imports alone (what runs when the module is imported: the module's body,
  its classes' bodies, ``if``/``try``/``with`` blocks) are what
  :func:`module_level_imports` returns. Relative imports are resolved; ``from a
  import b`` points at the module ``a.b`` when there is one, else at ``a``.
  Importing ``a.b`` also runs ``a/__init__.py`` first, but Python finishes a
  package's ``__init__`` before its submodules need it unless the
  ``__init__`` itself imports them back: an edge is counted only where the
  code names the module.
* Loading a model folder for prediction (``kerasbert ner predict`` and
  ``kerasbert triples predict``: the apps' load path) imports neither seqeval
  (evaluation) nor matplotlib (plots): checked in a fresh process, through
  ``sys.modules`` and every import statement our modules run (Keras itself
  imports matplotlib when it is installed: only what comes after it counts).
"""

import ast
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from conftest import REPO_ROOT
from conftest import require_shared


def _gen_rooms():
    """``docs/gen_rooms.py``: the import reader the architecture page draws with."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("kerasbert_docs_gen_rooms", REPO_ROOT / "docs" / "gen_rooms.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_rooms = _gen_rooms()
PACKAGES = _rooms.PACKAGES
package_modules = _rooms.package_modules
module_level_imports = _rooms.module_level_imports
import_graph = _rooms.import_graph
import_cycles = _rooms.import_cycles
describe_cycle = _rooms.describe_cycle
room_graph = _rooms.room_graph


def test_no_import_cycle_in_kerasbert_or_its_apps():
    """No circle, counting the imports inside functions."""
    modules = package_modules(PACKAGES)
    assert "kerasbert.training.fit" in modules and "kerasbert_apps.ner.evaluate" in modules  # the walk finds both trees
    graph = import_graph(modules)
    cycles = import_cycles(graph)
    assert not cycles, f"{len(cycles)} import cycle(s):\n" + "\n".join(
        describe_cycle(cycle, graph, modules) for cycle in cycles)


#: The house's size: entries at the library's top level, lines of one module.
TOP_LEVEL_ENTRIES, MODULE_LINES = 12, 600


def test_the_rooms_stay_few_and_the_modules_short():
    """The library's top level holds at most TOP_LEVEL_ENTRIES files and rooms; no
    module of the library or its apps is over MODULE_LINES lines (a longer one is
    two concepts: split it)."""
    top = sorted(p.name for p in (REPO_ROOT / "kerasbert").iterdir() if p.name != "__pycache__")
    assert len(top) <= TOP_LEVEL_ENTRIES, f"kerasbert/ has {len(top)} entries: {', '.join(top)}"
    long = {str(path.relative_to(REPO_ROOT)): n for package in ("kerasbert", "kerasbert_apps")
            for path in (REPO_ROOT / package).rglob("*.py")
            if (n := len(path.read_text(encoding="utf-8").splitlines())) > MODULE_LINES}
    assert not long, f"modules over {MODULE_LINES} lines: {long}"


def test_no_circle_between_rooms():
    """The rooms (``kerasbert.checkpoints``, ``kerasbert.models``, ...,
    ``kerasbert_apps.ner``) stand in layers: no room imports, through any of
    its modules, a room that imports it back. A module circle is a room
    circle too, but a room circle can hold no module circle (the tokenizer
    reading a vocabulary from the checkpoints room, which loads tokenizers)."""
    modules = package_modules(PACKAGES)
    rooms = room_graph(import_graph(modules), modules)
    assert {"kerasbert.checkpoints", "kerasbert.tokenizers", "kerasbert_apps.ner"} <= set(rooms)
    cycles = import_cycles(rooms)
    assert not cycles, "rooms that import each other: " + "; ".join(
        " -> ".join(cycle) + " (" + ", ".join(rooms[a][b] for a, b in zip(cycle, cycle[1:])) + ")" for cycle in cycles)


def _write_package(root, files):
    for relative, text in files.items():
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text), encoding="utf-8")


def test_the_cycle_finder_finds_cycles_through_relative_and_nested_imports(tmp_path):
    _write_package(tmp_path / "pkg", {
        "__init__.py": "",
        "a.py": "from .sub import b\n",  # a -> pkg.sub.b (a module)
        "sub/__init__.py": "",
        "sub/b.py": "import os\ntry:\n    from ..c import thing\nexcept ImportError:\n    pass\n",  # b -> pkg.c
        "c.py": "class C:\n    from pkg.a import x\n",  # a class body runs at import: c -> a
        "d.py": "def f():\n    from pkg import e\n\nimport pkg.e.inner\n",  # only the module-level one counts
        "e.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg import d\nimport pkg.e\n",
    })
    modules = package_modules({"pkg": tmp_path / "pkg"})
    graph = import_graph(modules, functions=False)
    assert graph["pkg.a"] == {"pkg.sub.b": 1}
    assert graph["pkg.sub.b"] == {"pkg.c": 3}
    assert graph["pkg.d"] == {"pkg.e": 4}  # pkg.e.inner is no module: its module pkg.e
    assert "pkg.d" not in graph["pkg.e"]  # TYPE_CHECKING imports never run
    cycles = import_cycles(graph)
    assert cycles == [["pkg.a", "pkg.sub.b", "pkg.c", "pkg.a"], ["pkg.e", "pkg.e"]]
    text = describe_cycle(cycles[0], graph, modules)
    assert "pkg.sub.b -> pkg.c" in text and "line 3" in text
    # Without the class-body import there is no cycle left but e's own.
    (tmp_path / "pkg" / "c.py").write_text("def g():\n    from pkg.a import x\n", encoding="utf-8")
    assert import_cycles(import_graph(package_modules({"pkg": tmp_path / "pkg"}), functions=False)) == [["pkg.e", "pkg.e"]]
    # Counting the imports inside functions, c -> a is back (and d -> e, which makes no new circle).
    graph = import_graph(package_modules({"pkg": tmp_path / "pkg"}))
    assert graph["pkg.c"] == {"pkg.a": 2} and graph["pkg.d"] == {"pkg.e": 2}
    assert import_cycles(graph) == [["pkg.a", "pkg.sub.b", "pkg.c", "pkg.a"], ["pkg.e", "pkg.e"]]


def test_the_cycle_finder_counts_a_circle_through_a_function_level_import(tmp_path):
    """Two modules that import each other, one of them inside a function (the
    shape that the module-level reading missed)."""
    _write_package(tmp_path / "pkg", {
        "__init__.py": "",
        "encoder.py": "from pkg.fused import graph_call\n",
        "fused.py": "def supported(x):\n    from pkg.encoder import Encoder\n    return isinstance(x, Encoder)\n",
    })
    modules = package_modules({"pkg": tmp_path / "pkg"})
    assert import_cycles(import_graph(modules, functions=False)) == []
    assert import_cycles(import_graph(modules)) == [["pkg.encoder", "pkg.fused", "pkg.encoder"]]


SERVING_SCRIPT = r"""
import builtins, importlib, json, sys

# Every import statement (and importlib.import_module call) made by a module
# of kerasbert or kerasbert_apps, recorded when it names seqeval or matplotlib.
# A check of sys.modules alone cannot see matplotlib: Keras 3 imports
# matplotlib.pyplot itself when it is installed (keras.src.visualization).
OURS = ("kerasbert", "kerasbert_apps")
WATCHED = ("seqeval", "matplotlib")
caught = []
plain_import, plain_import_module = builtins.__import__, importlib.import_module

def record(name, level, frame):
    importer = frame.f_globals.get("__name__", "") if frame else ""
    if not level and name.split(".")[0] in WATCHED and importer.split(".")[0] in OURS:
        caught.append(f"{importer} (line {frame.f_lineno}) imports {name}")

def watched_import(name, globals=None, locals=None, fromlist=(), level=0):
    record(name, level, sys._getframe(1))
    return plain_import(name, globals, locals, fromlist, level)

def watched_import_module(name, package=None):
    record(name, 0, sys._getframe(1))
    return plain_import_module(name, package)

builtins.__import__, importlib.import_module = watched_import, watched_import_module
import keras
with_keras = {m for m in sys.modules if m.split(".")[0] in WATCHED}
"""

SERVING_RUN = r"""
from kerasbert.cli import main

ner, triples, texts = sys.argv[1:4]
assert main(["ner", "predict", "--model", ner, texts]) == 0
assert main(["triples", "predict", "--model", triples, texts]) == 0
later = sorted(m for m in sys.modules if m.split(".")[0] in WATCHED and m not in with_keras)
print("CAUGHT", json.dumps({"imports": caught, "modules after keras": later}))
"""


def _first_found(*places):
    """The object at the first importable ``"module:name"`` of ``places``
    (the heads' classes are moving into one folder per head)."""
    import importlib

    for place in places:
        module, _, name = place.partition(":")
        try:
            return getattr(importlib.import_module(module), name)
        except ModuleNotFoundError:
            continue
    raise ModuleNotFoundError(f"none of {places}")


@pytest.fixture(scope="module")
def serving_folders(tmp_path_factory):
    """A saved tagger and a saved triples extractor on the tiny test
    checkpoint (random weights: loading and predicting is what is checked,
    not what they find; windows as long as its 16 positions), and a file of
    texts."""
    import keras

    import kerasbert
    from kerasbert_apps.ner.tags import bio_tags

    NerModel = _first_found("kerasbert_apps.ner.heads.bio.model:NerModel", "kerasbert_apps.ner.heads.bio.model:NerModel")
    Tagger = _first_found("kerasbert_apps.ner.heads.bio.pipeline:Tagger", "kerasbert_apps.ner.heads.bio.pipeline:Tagger")
    TripleModel = _first_found("kerasbert_apps.triples.heads.casrel.model:TripleModel",
                               "kerasbert_apps.triples.heads.casrel.model:TripleModel")
    Extractor = _first_found("kerasbert_apps.triples.heads.casrel.pipeline:Extractor",
                             "kerasbert_apps.triples.heads.casrel.pipeline:Extractor")
    checkpoint = require_shared("data", "models", "keras_bert_test_checkpoint")
    tokenizer = kerasbert.load_tokenizer(checkpoint)
    root = tmp_path_factory.mktemp("serving")
    keras.utils.set_random_seed(0)
    tags = bio_tags(["LOC", "ORG", "PER"])
    Tagger(NerModel(kerasbert.load_encoder(checkpoint), len(tags), lstm_units=4), tokenizer, tags,
           max_length=16).save(root / "ner")
    predicates = ["born_in", "works_for"]
    Extractor(TripleModel(kerasbert.load_encoder(checkpoint), len(predicates)), tokenizer, predicates,
              max_length=16).save(root / "triples")
    texts = root / "texts.txt"
    texts.write_text("Peter Blackburn works for Acme Corp in Paris.\nLondon.\n", encoding="utf-8")
    return root / "ner", root / "triples", texts


def test_predicting_with_a_model_folder_imports_neither_seqeval_nor_matplotlib(serving_folders):
    """``kerasbert ner predict`` and ``kerasbert triples predict`` (the
    model folders loaded through the apps' load path), in one fresh process,
    with the serving cache on (a folder of its own): each writes its folder's
    entry and predicts with what it loads back."""
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", KERASBERT_CACHE=str(serving_folders[0].parent / "cache"))
    env.pop("KERASBERT_SERVING_CACHE", None)
    run = subprocess.run([sys.executable, "-c", SERVING_SCRIPT + SERVING_RUN, *map(str, serving_folders)],
                         capture_output=True, text=True, cwd=REPO_ROOT, env=env)
    assert run.stderr.count("is kept in the serving cache") == 2, run.stderr[-3000:]
    assert run.returncode == 0, run.stderr[-3000:]
    lines = run.stdout.splitlines()
    assert sum('"entities"' in line for line in lines) == 2 and sum('"triples"' in line for line in lines) == 2, lines
    caught = json.loads(next(l for l in lines if l.startswith("CAUGHT "))[len("CAUGHT "):])
    assert caught == {"imports": [], "modules after keras": []}, (
        f"predicting with a tagger and an extractor imported: {caught}")


def test_the_serving_check_sees_an_import_of_seqeval():
    """The watcher of the script above catches a kerasbert_apps module that
    imports seqeval (here the scorer, which must)."""
    script = SERVING_SCRIPT + textwrap.dedent("""
        from kerasbert_apps.ner import evaluate

        try:
            evaluate.score([], [])
        except Exception:
            pass
        print("CAUGHT", json.dumps(caught), "seqeval" in sys.modules)
    """)
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=REPO_ROOT,
                         env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"))
    assert run.returncode == 0, run.stderr[-3000:]
    line = next(l for l in run.stdout.splitlines() if l.startswith("CAUGHT "))
    assert "kerasbert_apps.ner.evaluate (line" in line and "imports seqeval.metrics" in line and line.endswith("True")
