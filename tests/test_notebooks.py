"""The notebooks in notebooks/ run top to bottom (SMALL mode: about a minute each).

Each notebook is executed with nbclient in a fresh ``python3`` kernel, in a
temporary working directory, with ``KERASBERT_NOTEBOOK_SMALL=1`` (one short
epoch on a slice of the shipped samples, starter encoder; notebook 03 exports
the model notebook 01 trained when 01 ran first); any cell error fails the
test. Then the executed outputs are checked for what each notebook
is meant to show.

The notebooks are committed WITH the outputs of a run at their full settings
(``python notebooks/execute.py``), so that a reader sees them on GitHub: a
test checks those outputs are there, and the small-mode runs here execute an
in-memory copy with its outputs cleared and never write the file.
"""

import json
from pathlib import Path

import pytest

from conftest import REPO_ROOT
from conftest import require_module
from conftest import require_starter

nbformat = require_module("nbformat")
nbclient = require_module("nbclient")
require_module("ipykernel")
require_module("matplotlib")

NOTEBOOKS = REPO_ROOT / "notebooks"
CELL_TIMEOUT = 600


#: The NER model notebook 01 trained in this session (notebook 03 reuses it
#: through its KERASBERT_NER_MODEL parameter instead of training another).
TRAINED = {}


def execute(name, tmp_path, monkeypatch, ner_model=None):
    """Run ``notebooks/<name>.ipynb`` in SMALL mode; returns the executed notebook."""
    require_starter()
    monkeypatch.setenv("KERASBERT_NOTEBOOK_SMALL", "1")
    monkeypatch.setenv("TF_CPP_MIN_LOG_LEVEL", "3")
    monkeypatch.setenv("TMPDIR", str(tmp_path))  # the notebook's mkdtemp() OUTPUT lands in pytest's tmp_path
    monkeypatch.setenv("MPLBACKEND", "module://matplotlib_inline.backend_inline")
    for variable in ("KERASBERT_CHECKPOINT", "KERASBERT_NER_MODEL"):
        monkeypatch.delenv(variable, raising=False)  # only the shipped samples and the starter encoder
    if ner_model is not None:
        monkeypatch.setenv("KERASBERT_NER_MODEL", str(ner_model))
    workdir = tmp_path / "cwd"
    workdir.mkdir()
    path = NOTEBOOKS / f"{name}.ipynb"
    committed = path.read_bytes()
    nb = nbformat.reads(committed.decode("utf-8"), as_version=4)
    for cell in nb.cells:  # the checks below see this run's outputs only, never the committed ones
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
    client = nbclient.NotebookClient(nb, timeout=CELL_TIMEOUT, kernel_name="python3",
                                     resources={"metadata": {"path": str(workdir)}})
    client.execute()  # raises CellExecutionError on the first failing cell
    assert not (workdir / "notebook-output").exists()  # SMALL mode writes under the temporary folder only
    assert path.read_bytes() == committed  # the committed copy, with its full-run outputs, is untouched
    return nb


def outputs(nb, kind=None):
    """Every output of every code cell (optionally of one ``output_type``)."""
    return [out for cell in nb.cells if cell.cell_type == "code" for out in cell.get("outputs", [])
            if kind is None or out.output_type == kind]


def text_of(nb):
    """All stream and text/plain output, concatenated."""
    parts = []
    for out in outputs(nb):
        if out.output_type == "stream":
            parts.append(out.text)
        elif "data" in out and "text/plain" in out.data:
            parts.append(out.data["text/plain"])
    return "\n".join(parts)


def data_of(nb, mime):
    return [out.data[mime] for out in outputs(nb) if "data" in out and mime in out.data]


NAMES = ["01_ner_custom_data", "02_triple_extraction", "03_serving"]

#: What the committed full-run outputs of each notebook must show.
SHOWN = {
    "01_ner_custom_data": {"png": 2, "html": ["<mark", 'class="kerasbert-errors"'],
                           "text": ["status:     OK", "epoch 1: dev f1", "micro   P", "[labelstudio]"]},
    "02_triple_extraction": {"png": 2, "html": ['class="kerasbert-triples"'],
                             "text": ["epoch 1: dev f1", "per predicate", "threshold 0.3:"]},
    "03_serving": {"png": 0, "html": ["<mark"],
                   "text": ["same entities as Tagger.predict on the host: True", '"signature_name": "serving_default"']},
}


@pytest.mark.parametrize("name", NAMES)
def test_notebook_is_committed_with_full_run_outputs(name):
    """GitHub shows the committed copy: it must hold the outputs of one run,
    top to bottom, at the full settings (``python notebooks/execute.py``)."""
    nb = nbformat.read(NOTEBOOKS / f"{name}.ipynb", as_version=4)
    nbformat.validate(nb)
    code = [cell for cell in nb.cells if cell.cell_type == "code"]
    assert [cell.execution_count for cell in code] == list(range(1, len(code) + 1)), \
        "run the whole notebook once, top to bottom: python notebooks/execute.py " + name
    assert not outputs(nb, "error")
    first = code[0].source
    assert 'SMALL = os.environ.get("KERASBERT_NOTEBOOK_SMALL") == "1"' in first
    assert 'CHECKPOINT = os.environ.get("KERASBERT_CHECKPOINT", "starter")' in first and "OUTPUT =" in first
    assert "SMALL=False  CHECKPOINT='starter'" in "".join(out.text for out in code[0].outputs if out.output_type == "stream")
    sources = "\n".join(cell.source for cell in nb.cells)
    assert "../shared" not in sources and "KERASBERT_SHARED" not in sources  # only the shipped samples
    assert sum(cell.cell_type == "markdown" for cell in nb.cells) >= 5
    shown = SHOWN[name]
    assert len(data_of(nb, "image/png")) >= shown["png"]
    html, text = "\n".join(data_of(nb, "text/html")), text_of(nb)
    for needle in shown["html"]:
        assert needle in html, needle
    for needle in shown["text"]:
        assert needle in text, needle


@pytest.mark.slow
def test_01_ner_custom_data(tmp_path, monkeypatch):
    nb = execute("01_ner_custom_data", tmp_path, monkeypatch)
    text = text_of(nb)
    assert "status:     OK" in text  # the checkpoint inspection
    assert "[CLS]" in text and "'Kraków'" in text  # tokens with offsets into the original string
    assert "examples, " in text and "entities kept" in text  # read reports
    assert "epoch 1: dev f1" in text  # trained (Keras fit + dev evaluation)
    assert "micro   P" in text and "strict" in text  # test scores
    assert len(data_of(nb, "image/png")) >= 2  # learning curves, per-type F1
    html = "\n".join(data_of(nb, "text/html"))
    assert "<mark" in html
    assert 'class="kerasbert-errors"' in html
    for fmt in ("conll", "doccano", "labelstudio"):
        assert f"[{fmt}]" in text
    (model,) = tmp_path.glob("kerasbert-notebook-*/01_ner_custom_data/run/model")
    TRAINED["ner"] = model


@pytest.mark.slow
def test_02_triple_extraction(tmp_path, monkeypatch):
    nb = execute("02_triple_extraction", tmp_path, monkeypatch)
    text = text_of(nb)
    assert "epoch 1: dev f1" in text
    assert "exact" in text and "partial" in text and "per predicate" in text  # format_scores
    assert "threshold 0.3:" in text
    html = "\n".join(data_of(nb, "text/html"))
    assert 'class="kerasbert-triples"' in html and "<b>capital_of</b>" in html  # the gold table at least
    assert len(data_of(nb, "image/png")) >= 2  # history.png, the triple graphs


@pytest.mark.slow
def test_03_serving(tmp_path, monkeypatch):
    """Exports notebook 01's model when 01 ran before in this session (its
    ``KERASBERT_NER_MODEL`` path); run alone, it trains its own."""
    reused = TRAINED.get("ner")
    nb = execute("03_serving", tmp_path, monkeypatch, ner_model=reused)
    text = text_of(nb)
    assert (f"reusing {reused}" in text) if reused else ("epoch 1: dev f1" in text)
    assert '"instances"' in text and '"signature_name": "serving_default"' in text  # the REST body
    assert "same entities as Tagger.predict on the host: True" in text
    assert "text 1 (0 characters): 0 entities" in text  # the empty string
    assert "model_spec" in text and 'name: "ner"' in text  # the gRPC PredictRequest
    assert "TensorSpec" in text  # the signature
    markdown = "\n".join(data_of(nb, "text/markdown"))
    assert "docker run" in markdown and "curl" in markdown and ":predict" in markdown
    exports = list(tmp_path.glob("kerasbert-notebook-*/03_serving/export/1/saved_model.pb"))
    assert len(exports) == 1
    description = json.loads((exports[0].parent / "assets.extra" / "kerasbert.json").read_text(encoding="utf-8"))
    assert description["task"] == "ner" and description["input_mode"] == "text"
    assert Path(exports[0]).stat().st_size > 0
