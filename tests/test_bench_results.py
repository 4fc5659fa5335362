"""Benchmark results as data: what ``bench/common.py`` writes is a record the docs' Benchmarks page
(``docs/gen_bench.py``) renders, and every bench writes one; every bench is a module run as
``python -m bench.NAME``."""

import ast
import importlib.util
import json
import re

from conftest import REPO_ROOT

BENCH = REPO_ROOT / "bench"


def _load(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_write_result_makes_a_record_the_page_renders(tmp_path):
    results = _load(BENCH / "common.py", "kerasbert_bench_common")
    gen = _load(REPO_ROOT / "docs" / "gen_bench.py", "kerasbert_docs_gen_bench_for_results")
    rows = [{"part": "Tiny data", "system": "ours", "test F1": 87.5, "train tokens/s": 1234.5},
            {"part": "Tiny data", "system": "peer", "test F1": 85.25, "train tokens/s": 1000.0}]
    path = results.write_result("tiny_bench", rows, setup={"sentences": 3}, name="tiny", root=tmp_path)
    assert path.parent == tmp_path / "tiny_bench" and path.name.endswith("-tiny.json")
    assert not list(tmp_path.rglob("*.partial"))
    record = json.loads(path.read_text(encoding="utf-8"))
    assert record["bench"] == "tiny_bench" and record["rows"] == rows and record["setup"] == {"sentences": 3}
    assert re.match(r"\d{4}-\d{2}-\d{2} \d{2}:\d{2} UTC$", record["date"])
    assert {"model", "flags", "cores"} <= set(record["cpu"]) and "python" in record["versions"]
    assert record["command"]
    text = gen.render(results=tmp_path, bench_dir=tmp_path)
    # the rows' common part names the record's part, under the bench's heading
    assert re.search(r"^### tiny_bench\b[^\n]*\n(?:.*\n)*?#### Tiny data\b", text, re.M)
    assert "| system | test F1 | train tokens/s |" in text
    assert "| ours | 87.5 | 1,234 |" in text or "| ours | 87.5 | 1,235 |" in text
    assert "| peer | 85.25 | 1,000 |" in text


def test_flags_line_names_the_cpu():
    results = _load(BENCH / "common.py", "kerasbert_bench_common_flags")
    line = results.flags_line()
    assert line.startswith("CPU: ") and "flags: " in line and "cores" in line


def benches():
    """The benchmark modules: ``bench/*.py`` but the shared module and the package's."""
    return [p for p in sorted(BENCH.glob("*.py")) if p.name not in ("common.py", "__init__.py")]


def test_every_bench_writes_its_result():
    """A bench script that measures something writes it with write_result (the Benchmarks page is
    generated from bench/results/, not from stdout)."""
    missing = [p.name for p in benches() if "write_result(" not in p.read_text(encoding="utf-8")]
    assert not missing, f"benches that do not call write_result: {missing}"


def test_every_bench_runs_as_a_module():
    """Each bench's docstring says how to run it, ``python -m bench.NAME`` (from the repository root);
    no file under bench/ patches ``sys.path`` to find the others, and no file calls another by its path."""
    tools = [p for p in sorted((BENCH / "offline_gpu_host").glob("*.py")) if p.name != "__init__.py"]
    assert benches() and tools
    for path in benches() + tools:
        module = ".".join(path.relative_to(REPO_ROOT).with_suffix("").parts)
        doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or ""
        assert f"python -m {module}" in doc, f"{path.name}: its docstring does not say python -m {module}"
        assert not re.search(r"python3? bench/\S+\.py", doc), path.name
    for path in sorted(BENCH.rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        assert "sys.path" not in text and "__file__, " not in text, path.relative_to(REPO_ROOT)
