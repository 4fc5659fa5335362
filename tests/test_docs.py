"""The documentation: the site builds with warnings as errors, its generated parts are current,
and what the pages quote from the code (commands, options, error messages, public names, the
README's example) is still what the code has."""

import argparse
import ast
import importlib.util
import json
import os
import re
import shlex
import subprocess
import sys

import pytest
from conftest import REPO_ROOT
from conftest import require_starter

DOCS = REPO_ROOT / "docs"
README = REPO_ROOT / "README.md"


def _module(name):
    spec = importlib.util.spec_from_file_location(f"kerasbert_docs_{name}", DOCS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _pages():
    """The Markdown a reader sees: the docs pages (the generated CLI reference aside), the README
    and the guide."""
    pages = [p for p in sorted(DOCS.rglob("*.md")) if p.relative_to(DOCS).as_posix() != "reference/cli.md"]
    return pages + [README, REPO_ROOT / "CONTRIBUTING.md"]


def _blocks(text, language):
    return re.findall(rf"```{language}\n(.*?)```", text, re.S)


def _require_mkdocs():
    if importlib.util.find_spec("mkdocs") is None or importlib.util.find_spec("mkdocstrings") is None:
        message = 'needs the docs extra: pip install -e ".[docs]" (the README\'s test command installs it)'
        if os.environ.get("CI"):
            pytest.fail(message, pytrace=False)
        pytest.skip(message)


# --- README -------------------------------------------------------------------------------


def test_readme_is_short_and_points_to_the_docs():
    text = README.read_text(encoding="utf-8")
    assert len(text) < 12_000, f"README.md is {len(text)} characters; details belong in docs/"
    for page in ("docs/ner.md", "docs/serving.md", "docs/serving-speed.md", "docs/benchmarks.md",
                 "docs/reference/cli.md", "docs/reference/api.md"):
        assert f"]({page}" in text, page
        assert (REPO_ROOT / page).exists(), page
    assert "Apache-2.0" in text


def test_readme_python_example_runs_on_the_starter_encoder():
    """The README's example up to training (tokenizer and encoder on the starter checkpoint)."""
    require_starter()
    code = _blocks(README.read_text(encoding="utf-8"), "python")[0]
    cheap = code.split("\ntrain(")[0]
    assert "load_encoder" in cheap and "load_tokenizer" in cheap
    namespace = {}
    exec(compile(cheap + "\n_out = encoder(batch.inputs)['sequence_output']\n", "README.md", "exec"), namespace)
    batch = namespace["batch"]
    text = "Peter Blackburn visited Paris."
    starts, ends = batch.offsets[0][1:3, 0], batch.offsets[0][1:3, 1]
    assert text[starts[0]:ends[0]].lower() == "peter"
    assert tuple(namespace["_out"].shape)[:2] == tuple(batch.token_ids.shape)


# --- the site ------------------------------------------------------------------------------


def test_site_builds_strict(tmp_path):
    """mkdocs build --strict: a broken link or anchor, a page missing from the nav, a name the API
    reference cannot find or a docstring it cannot parse fails the build."""
    _require_mkdocs()
    site = tmp_path / "site"
    env = dict(os.environ, NO_MKDOCS_2_WARNING="1", TF_CPP_MIN_LOG_LEVEL="3")
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-q", "-d", str(site)],
                          cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    benchmarks = (site / "benchmarks" / "index.html").read_text(encoding="utf-8")
    for folder in sorted(p for p in (REPO_ROOT / "bench" / "results").iterdir() if p.is_dir()):
        assert f'id="{folder.name.replace("_", "_")}"' in benchmarks, folder.name
    assert benchmarks.count("<table>") >= len(list((REPO_ROOT / "bench" / "results").glob("*/*.json"))) // 2
    for figure in re.findall(r'src="([^"]+\.png)"', benchmarks):
        assert (site / "benchmarks" / figure).resolve().exists(), figure
    api = (site / "reference" / "api" / "index.html").read_text(encoding="utf-8")
    for name in ("load_encoder", "BertTokenizer", "Pipeline", "predict_request"):
        assert name in api, name
    ner = (site / "ner" / "index.html").read_text(encoding="utf-8")
    assert "kerasbert:auto-rule" not in ner and "training sequences" in ner


def test_home_page_leads_to_training_serving_and_the_export_choice():
    home = (DOCS / "index.md").read_text(encoding="utf-8")
    for page in ("ner.md", "triples.md", "serving.md", "serving-speed.md", "benchmarks.md", "troubleshooting.md"):
        assert f"]({page})" in home, page
    nav = (REPO_ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    for page in ("serving-speed.md", "training-speed.md", "gpu.md"):
        assert page in nav and (DOCS / page).exists(), page


# --- generated references -------------------------------------------------------------------


def test_cli_reference_is_current():
    gen = _module("gen_cli")
    committed = (DOCS / "reference" / "cli.md").read_text(encoding="utf-8")
    assert committed == gen.render(), "docs/reference/cli.md is stale: run python docs/gen_cli.py"


def test_cli_reference_has_every_command_and_option():
    from kerasbert.cli import build_parser
    from kerasbert_apps.base import heads

    # the kit's reference: the options of heads of other packages installed here are not in it
    plugin_options = {flag for task in heads.TASKS for head in heads.heads(task) if not heads.is_builtin(head)
                      for flag in heads.option_flags(head)}
    gen = _module("gen_cli")
    text = (DOCS / "reference" / "cli.md").read_text(encoding="utf-8")
    sections = dict(re.findall(r"^#+ `(kerasbert[^`]*)`\n(.*?)(?=^#+ `kerasbert|\Z)", text, re.S | re.M))
    commands = list(gen.walk(build_parser()))
    assert {"kerasbert ner train", "kerasbert triples tune", "kerasbert pretrain"} <= {
        " ".join(("kerasbert",) + path) for path, _ in commands}
    for path, parser in commands:
        name = " ".join(("kerasbert",) + path)
        assert name in sections, name
        for action in parser._actions:
            if action.help == argparse.SUPPRESS:
                continue  # hidden aliases are not documented on purpose
            for option in action.option_strings:
                if option not in ("-h", "--help") and option not in plugin_options:
                    assert f"`{option}`" in sections[name], (name, option)


def test_api_reference_covers_the_public_names():
    import kerasbert

    api = (DOCS / "reference" / "api.md").read_text(encoding="utf-8")
    documented = set(re.findall(r"^::: [\w.]+\.(\w+)$", api, re.M))
    missing = sorted(set(kerasbert.__all__) - documented)
    assert not missing, f"public names missing from docs/reference/api.md: {missing}"


# --- benchmark results ----------------------------------------------------------------------


def test_bench_results_are_records():
    files = sorted((REPO_ROOT / "bench" / "results").glob("*/*.json"))
    assert files
    for path in files:
        record = json.loads(path.read_text(encoding="utf-8"))
        assert record["bench"] == path.parent.name, path
        assert re.match(r"\d{4}-\d{2}-\d{2}", record["date"]), path
        assert isinstance(record["command"], str) and record["command"], path
        assert "model" in record["cpu"] and "flags" in record["cpu"], path
        assert record["rows"] and all(isinstance(row, dict) and row for row in record["rows"]), path
        for item in record.get("figures", []):
            figure = item if isinstance(item, str) else item[0]
            assert (REPO_ROOT / figure).exists(), (path, figure)


def test_bench_page_handles_any_bench_folder(tmp_path):
    """A new bench needs no change in the generator: the newest run is the table (the union of its
    rows' keys), the older runs are folded below it, parts are kept apart."""
    gen = _module("gen_bench")
    folder = tmp_path / "results" / "brand_new"
    folder.mkdir(parents=True)

    def record(date, rows, part=None):
        data = {"bench": "brand_new", "date": date, "command": "brand_new.py", "setup": {"texts": 3},
                "cpu": {"model": "Test CPU", "flags": ["avx2"], "cores": 2}, "versions": {"tensorflow": "9"},
                "rows": rows}
        return data | ({"part": part} if part else {})

    (folder / "2026-01-01T0000-a.json").write_text(json.dumps(record("2026-01-01 10:00 UTC", [{"system": "old", "x": 1}])))
    (folder / "2026-01-02T0000-b.json").write_text(json.dumps(
        record("2026-01-02 10:00 UTC", [{"system": "ours", "speed": 123.456789}, {"system": "peer", "memory GB": 2,
                                                                                   "stages": {"a": 1.0, "b": 2}}])))
    (folder / "2026-01-03T0000-c.json").write_text(json.dumps(record("2026-01-03", [{"f1": 0.5}], part="other data")))
    (folder / "2026-01-04T0000-d.json").write_text(json.dumps(record("2026-01-04", [{"part": "rows' part", "g": 1}])))
    text = gen.render(results=tmp_path / "results", bench_dir=tmp_path)
    assert "## brand_new" in text and "### brand_new: other data" in text
    newest = text.index("| system | speed | memory GB | stages |")
    assert "| ours | 123.5 |  |  |" in text and "| peer |  | 2 | a: 1.0; b: 2 |" in text
    older = text.index('??? note "Older runs (1)"')
    assert newest < older and "    | system | x |" in text[older:]
    assert "Test CPU; flags: avx2; 2 cores; tensorflow 9" in text
    assert "| f1 |" in text
    assert "### brand_new: rows' part" in text and "| g |" in text  # the rows' common "part" names the part


# --- what the pages quote from the code -----------------------------------------------------


def _command_lines():
    for page in _pages():
        for block in _blocks(page.read_text(encoding="utf-8"), "bash"):
            for line in block.replace("\\\n", " ").splitlines():
                for segment in re.split(r"\s*(?:\||&&|>)\s*", line):
                    if segment.startswith("kerasbert ") and "[" not in segment:
                        yield page.name, shlex.split(segment, comments=True)


def test_commands_in_the_pages_parse():
    """Every ``kerasbert ...`` line of every page names a real command with real options."""
    from kerasbert.cli import build_parser

    parser = build_parser()
    seen = 0
    for page, words in _command_lines():
        try:
            args = parser.parse_args(words[1:])
        except SystemExit as stop:
            pytest.fail(f"{page}: {' '.join(words)} does not parse (exit {stop.code})")
        assert getattr(args, "func", None), (page, words)
        seen += 1
    assert seen >= 20


def test_python_snippets_in_the_pages_compile_and_import():
    """Every Python block parses, and its imports (of kerasbert, the apps and their dependencies) work."""
    imports = set()
    for page in _pages():
        for block in _blocks(page.read_text(encoding="utf-8"), "python"):
            tree = ast.parse(block, filename=page.name)
            for node in ast.walk(tree):
                if isinstance(node, (ast.Import, ast.ImportFrom)):
                    imports.add(ast.unparse(node))
    assert any("kerasbert_apps.ner" in line for line in imports)
    for line in sorted(imports):
        exec(line, {})


def _normalized_source():
    """The code's text with adjacent string literals joined, so a message split over lines reads whole."""
    text = ""
    for folder in ("kerasbert", "apps"):
        for path in sorted((REPO_ROOT / folder).rglob("*.py")):
            text += path.read_text(encoding="utf-8") + "\n"
    return re.sub(r"""["']\s*\n\s*(?:\+\s*)?[rfbuRFBU]{0,2}["']""", "", text)


def test_troubleshooting_quotes_messages_the_code_prints():
    page = (DOCS / "troubleshooting.md").read_text(encoding="utf-8")
    messages = [b.strip() for b in _blocks(page, "text") if b.startswith("kerasbert: error: ")]
    assert len(messages) >= 15
    source = _normalized_source()
    assert 'print(f"kerasbert: error: {e}"' in source
    for message in messages:
        body = message[len("kerasbert: error: "):]
        for piece in re.split(r"<[^>]*>", body):
            piece = piece.strip(" .,;:()")
            if len(piece) >= 6:
                assert piece in source, f"troubleshooting.md quotes a message the code no longer has: {piece!r}"


def test_no_measured_figures_in_the_prose():
    """Speeds, sizes and scores live in bench/results/ and the generated Benchmarks page, where
    they keep their date, machine and peer; a page that quotes one goes stale with the next run."""
    exempt = set()
    figure = re.compile(r"\b\d[\d,.]*\s?(?:ms|s/it|tokens/s|sent/s|sentences/s|GB|MB|x faster|x slower)\b"
                        r"|\bF1\s+(?:of\s+)?\d|\bECE\s+\d")
    for page in [p for p in _pages() if p not in exempt] + [REPO_ROOT / "CHANGELOG.md"]:
        text = re.sub(r"```.*?```", "", page.read_text(encoding="utf-8"), flags=re.S)
        found = figure.findall(text)
        assert not found, f"{page.relative_to(REPO_ROOT)} quotes measured figures {found}: put them in a bench result"
