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
import textwrap
from pathlib import Path

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
    """The code blocks of ``language`` (dedented: a block inside an admonition is indented)."""
    return [textwrap.dedent(block) for block in re.findall(rf"```{language}\n(.*?)```", text, re.S)]


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


def test_targets_table_reads_each_target_from_its_record(tmp_path):
    """A target of bench/summary.toml is checked against its record's row: the bar a number or
    another row of the same run, the figure and whether it holds read from the record; a row it
    cannot find fails."""
    gen = _module("gen_bench")
    folder = tmp_path / "results" / "heads"
    folder.mkdir(parents=True)
    (folder / "2026-01-01T0000-a.json").write_text(json.dumps({
        "bench": "heads", "date": "2026-01-01 10:00 UTC", "command": "heads.py", "setup": {},
        "cpu": {"model": "Test CPU", "flags": ["avx2"], "cores": 2},
        "rows": [{"head": "flat", "F1": 0.6, "seconds": 100}, {"head": "span", "F1": 0.62, "seconds": 500}]}))
    records = gen.load_records(tmp_path / "results")
    summary = {"target": [
        {"target": "span beats flat", "record": "heads/2026-01-01T0000-a.json", "row": {"head": "span"},
         "field": "F1", "at_least": {"head": "flat"}},
        {"target": "span in 6 minutes", "record": "heads/2026-01-01T0000-a.json", "row": {"head": "span"},
         "field": "seconds", "at_most": 360},
        {"target": "flat reaches 0.7", "record": "heads/2026-01-01T0000-a.json", "row": {"head": "flat"},
         "field": "F1", "at_least": 0.7}]}
    table = gen.targets_table(summary, records)
    # F1 kept as fractions in the record: shown (figure and bar) in percent, as on every page
    assert "| span beats flat | F1 ≥ 60.0 (head flat) | 62.0 | yes |" in table
    assert "| span in 6 minutes | seconds ≤ 360 | 500 | **no** |" in table
    assert "| flat reaches 0.7 | F1 ≥ 70.0 | 60.0 | **no** |" in table
    assert "`bench/results/heads/2026-01-01T0000-a.json`" in table and "AVX2 only, 2 cores" in table
    (folder / "2026-01-02T0000-b.json").write_text(json.dumps({
        "bench": "heads", "date": "2026-01-02 10:00 UTC", "command": "heads.py", "setup": {},
        "cpu": {"model": "Test CPU", "flags": ["avx2"], "cores": 2}, "rows": [{"head": "other", "F1": 0.615}]}))
    records = gen.load_records(tmp_path / "results")
    within = {"target": [  # a row of another record, within some points of it
        {"target": "other within 0.01 of span", "record": "heads/2026-01-02T0000-b.json", "row": {"head": "other"},
         "field": "F1", "at_least": {"head": "span"}, "bar_record": "heads/2026-01-01T0000-a.json", "minus": 0.01},
        {"target": "other within 0.001 of span", "record": "heads/2026-01-02T0000-b.json",
         "row": {"head": "other"}, "field": "F1", "at_least": {"head": "span"},
         "bar_record": "heads/2026-01-01T0000-a.json", "minus": 0.001}]}
    table = gen.targets_table(within, records)
    assert ("| other within 0.01 of span | F1 ≥ 62.0 − 1.0 (head span, `heads/2026-01-01T0000-a.json`) | "
            "61.5 | yes |") in table
    assert "| other within 0.001 of span | F1 ≥ 62.0 − 0.1 (head span, " in table and "61.5 | **no** |" in table
    summary["target"][0]["at_least"] = {"head": "nobody"}
    with pytest.raises(ValueError, match="matches 0 rows"):
        gen.targets_table(summary, records)
    with pytest.raises(ValueError, match="at_least or at_most"):
        gen.targets_table({"target": [{"target": "t", "record": "heads/2026-01-01T0000-a.json",
                                       "row": {"head": "span"}, "field": "F1"}]}, records)


def test_site_builds_strict(tmp_path):
    """mkdocs build --strict: a broken link or anchor, a page missing from the nav, a name the API
    reference cannot find or a docstring it cannot parse fails the build."""
    _require_mkdocs()
    site = tmp_path / "site"
    env = dict(os.environ, NO_MKDOCS_2_WARNING="1", TF_CPP_MIN_LOG_LEVEL="3")
    # not -q: with -q MkDocs does not count warnings, and --strict then passes whatever they say
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-d", str(site)],
                          cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=300)
    log = done.stdout + done.stderr
    assert done.returncode == 0, log
    warnings = [line for line in log.splitlines() if re.match(r"(?:\x1b\[[\d;]*m)?(WARNING|ERROR)\b", line)]
    assert not warnings, "\n".join(warnings)
    gen = _module("gen_bench")
    summary = gen.load_summary()
    summary_page = (site / "benchmarks" / "index.html").read_text(encoding="utf-8")
    table = summary_page[summary_page.index("<table>"):].split("</table>")[0]
    assert 0 < table.count("<tr>") - 1 <= 25, "the summary is to fit on two screens"  # the heading row aside
    first_row = table.split("<tbody>")[1].split("</tr>")[0]
    assert "CoNLL-2003" in first_row and "Hugging Face" in first_row
    pages = {group["page"]: (site / group["page"].removesuffix(".md") / "index.html").read_text(encoding="utf-8")
             for group in summary["group"]}
    shown = summary_page + "".join(pages.values())
    records = sorted((REPO_ROOT / "bench" / "results").glob("*/*.json"))
    for folder in sorted({path.parent for path in records}):
        assert f'id="{folder.name}"' in shown, folder.name  # each bench under its own anchor
    for path in records:  # every record on a page, as a table of its own
        assert path.relative_to(REPO_ROOT).as_posix() in shown, path
    assert sum(page.count("<table>") for page in pages.values()) >= len(records)
    for plot, page in (("serving_latency", "benchmarks/serving.md"), ("heads_f1_time", "benchmarks/ner.md"),
                       ("reliability", "benchmarks/ner.md")):
        assert f"assets/bench/{plot}.png" in pages[page], plot
    assert "training time" not in shown  # a wall time on a shared machine is said to be one
    for page, html in pages.items():
        for figure in re.findall(r'src="([^"]+\.png)"', html):
            assert (site / page.removesuffix(".md") / figure).resolve().exists(), (page, figure)
    for page in ("01_ner_custom_data", "02_triple_extraction", "03_serving"):  # with their outputs
        notebook = (site / "notebooks" / page / "index.html").read_text(encoding="utf-8")
        assert "data:image/png;base64" in notebook or page == "03_serving", page
    assert '<mark class="entity"' in (site / "notebooks" / "01_ner_custom_data" / "index.html").read_text(encoding="utf-8")
    for tutorial in ("conll-to-serving", "chinese-char-per-line", "triples-from-json"):
        html = (site / "tutorials" / tutorial / "index.html").read_text(encoding="utf-8")
        assert "kerasbert:tutorial" not in html and html.count("<pre") >= 5, tutorial
    api = (site / "reference" / "api" / "index.html").read_text(encoding="utf-8")
    for name in ("load_encoder", "BertTokenizer", "Pipeline", "predict_request", "lstm_units", "TaskModel"):
        assert name in api, name
    ner = (site / "ner" / "index.html").read_text(encoding="utf-8")
    assert "kerasbert:auto-rule" not in ner and "training sequences" in ner
    found = [f"{page.relative_to(site)}: {word}" for page in sorted(site.rglob("*.html"))
             for word in workplace_words(page.read_text(encoding="utf-8"))]
    assert not found, found


# --- what the project says of itself ---------------------------------------------------------

#: Paths of the machines the project is built on, and words about how GPU machines are lent to
#: it or files carried to them, and issue numbers: none of it belongs in the project
#: (history goes to the changelog, in words).
WORKPLACE = re.compile(
    r"/work/|/\.device\b|(?<![\w.~$-])/tmp/|/root/|/home/\w"
    r"|\blent\b|lent[- ]machine|device tool|carried wheels|files_at|CARRY_LIMIT"
    r"|README before docs move"
    r"|\bissues? #?\d+|\bissue \d+'s",
    re.IGNORECASE)
def workplace_words(text):
    return sorted({m.group(0) for m in WORKPLACE.finditer(text)})


def _tracked_text_files():
    listed = subprocess.run(["git", "ls-files", "-z"], cwd=REPO_ROOT, capture_output=True, check=True).stdout
    for name in sorted(filter(None, listed.decode().split("\0"))):
        path = REPO_ROOT / name
        if name.startswith("tests/data/") and not name.endswith((".py", ".md")) or not path.is_file():
            continue
        try:
            yield name, path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue


def test_the_project_speaks_of_itself_only():
    """No path of a build machine, word of lent machines or carried files, or issue number in a
    tracked file (code, docs, tests, benches, records, notebooks); this file names the patterns."""
    this = Path(__file__).relative_to(REPO_ROOT).as_posix()
    found = [f"{name}: {word}" for name, text in _tracked_text_files()
             if name != this for word in workplace_words(text)]
    assert not found, found
    assert workplace_words("see issue 42; /tmp/x; the lent GPU; cd /work/main") == [
        "/tmp/", "/work/", "issue 42", "lent"]


def test_no_chinese_results_from_an_english_vocabulary():
    """A Chinese corpus scored with MiniLM (English vocabulary: most characters [UNK]) is not a
    result: no record may hold one."""
    chinese = ("CLUENER", "CMeIE", "Weibo", "MSRA", "DuIE", "People's Daily")
    for path in sorted((REPO_ROOT / "bench" / "results").glob("*/*.json")):
        text = path.read_text(encoding="utf-8")
        if any(name.lower() in text.lower() for name in chinese):
            assert not re.search(r"minilm|starter", text, re.I), path


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


def test_cli_reference_has_an_example_per_command_that_parses(capsys):
    from kerasbert.cli import build_parser

    gen = _module("gen_cli")
    parser = build_parser()
    commands = [path for path, _ in gen.walk(parser)]
    assert sorted(gen.EXAMPLES) == sorted(commands)
    for path, line in gen.EXAMPLES.items():
        words = shlex.split(line.split(" | ")[-1])
        assert words[:len(path) + 1] == ["kerasbert", *path], line
        try:
            args = parser.parse_args(words[1:])
        except SystemExit as stop:  # --help prints and exits 0
            assert stop.code == 0 and "--help" in words, line
            continue
        assert getattr(args, "func", None), line
    reference = (DOCS / "reference" / "cli.md").read_text(encoding="utf-8")
    assert reference.count("Example:") == len(commands)
    assert "| `--checkpoint` `CHECKPOINT` | **Required**" in reference


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
    (folder / "2026-01-05T0000-e.json").write_text(json.dumps(record("2026-01-05", [
        {"system": "a", "threads": 1, "ms": 2.0}, {"system": "b", "threads": 1, "ms": 3.0, "by_op": {"x": 1}}],
        part="threads")))
    text = gen.render(results=tmp_path / "results", bench_dir=tmp_path, summary={})
    assert "## Other benchmarks" in text and "### brand_new {#brand_new}" in text
    assert "#### other data {#brand_new-other-data}" in text
    newest = text.index("| system | speed | memory GB | stages |")
    assert "| ours | 123.5 |  |  |" in text and "| peer |  | 2 | a: 1.0; b: 2 |" in text
    older = text.index('??? note "Older runs (1)"')
    assert newest < older and "    | system | x |" in text[older:]
    assert "AVX2 only, 2 cores (Test CPU; flags: avx2; 2 cores); tensorflow 9" in text
    assert "| f1 |" in text
    assert "#### rows' part" in text and "| g |" in text  # the rows' common "part" names the part
    # a value the same in every row is said once; the key column first, dicts last
    assert "- **Every row:** threads: 1" in text and "| system | ms | by_op |" in text
    # the summary: ours and the peer read from the newest default run of each machine class, compared
    summary = {"summary": [{"claim": "Speed", "bench": "brand_new", "part": "threads", "per_class": True,
                            "field": "ms", "ours": {"system": "a"}, "peer": {"system": "b"}, "compare": "lower",
                            "unit": "ms", "ours_name": "ours", "peer_name": "theirs"}],
               "section": {"brand_new": {"title": "A brand new bench"}},
               "group": [{"title": "Speed", "page": "benchmarks/speed.md", "benches": ["brand_new"]}]}
    records = gen.load_records(tmp_path / "results")
    table = gen.summary_table(summary, records)
    assert ("| [Speed](benchmarks/speed.md#brand_new)<br><small>ms</small> | **2.0**<br><small>ours</small> | "
            "3.0<br><small>theirs, same run</small> | 1.50x faster | <small>AVX2 only, 2 cores<br>2026-01-05</small> |") in table
    assert "## Speed\n\n### A brand new bench {#brand_new}" in gen.render(tmp_path / "results", tmp_path, summary=summary)
    summary["summary"][0]["peer"] = {"system": "nobody"}
    assert "no peer in this run" in gen.summary_table(summary, records)
    summary["summary"][0]["ours"] = {"system": "nobody"}
    with pytest.raises(ValueError, match="no default run of brand_new"):
        gen.summary_table(summary, records)


def test_heads_plot_shows_the_defaults_only():
    """A variant's rows (they name their ``options``) never stand for a head's defaults in the plot."""
    gen = _module("gen_bench")

    def record(date, part, rows):
        return Path(f"{date}.json"), {"bench": "ner_heads", "date": date, "part": part, "rows": rows}

    records = [record("2026-01-01", "CoNLL-2003", [{"head": "crf", "test F1": 80.0, "train seconds": 9},
                                                   {"head": "biaffine", "test F1": 70.0, "train seconds": 9}]),
               record("2026-01-02", "CoNLL-2003", [{"head": "biaffine", "test F1": 75.0, "train seconds": 8,
                                                    "options": "--biaffine-entity-weight 1"}]),
               record("2026-01-03", "CoNLL-2003 (--biaffine-entity-weight 1)",
                      [{"head": "biaffine", "test F1": 76.0, "train seconds": 8,
                        "options": "--biaffine-entity-weight 1"}])]
    points = gen.heads_points(records)
    assert list(points) == ["CoNLL-2003"]
    assert {head: f1 for head, (_, f1, _) in points["CoNLL-2003"].items()} == {"crf": 80.0, "biaffine": 70.0}


def test_plots_are_drawn_from_the_records():
    gen = _module("gen_bench")
    drawn = gen.plots(gen.load_records())
    assert set(drawn) == set(gen.PLOTS)
    for name, (png, caption) in drawn.items():
        assert png.startswith(b"\x89PNG") and len(png) > 5000 and caption, name


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
    for folder in ("kerasbert", "kerasbert_apps"):
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
