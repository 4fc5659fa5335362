"""Every command on the pages runs from a clone of the repository: each ``kerasbert`` command of a
page's ``bash`` blocks reads only what the clone ships (``docs/tutorials/data``,
``kerasbert_apps/samples``, the starter encoder), what an earlier command of the page or a tutorial
wrote, or a download the page names with its address and licence; a ``python -m bench.NAME`` names
a bench that exists. The short commands run here; the others are run by the tutorials' tests (the
same command as a tutorial step), by the test this module names for them, or are marked long on the
page (``<!-- kerasbert:commands long -->`` before their block: training, downloads, benches, a
GPU, and the commands on a model such a block trains), and are checked for what they read."""

import contextlib
import importlib.util
import io
import re
import shlex
import subprocess
import textwrap

from conftest import REPO_ROOT
from conftest import require_starter

DOCS = REPO_ROOT / "docs"
LONG = "<!-- kerasbert:commands long -->"
#: Long commands another test runs as a user runs them.
COVERED_BY = {"kerasbert ner demo": "tests/test_demo.py"}
#: Commands that set up or reach outside the kit (an environment, a server, a download): not run.
SETUP = {"pip", "python3", ".", "source", "export", "cd", "git", "mkdocs", "docker", "curl", "unzip",
         "tensorflow_model_server", "saved_model_cli"}
#: Plain shell commands that only read (run as they are, in the short blocks).
SHELL = {"echo", "head", "ls", "cat", "grep", "sort"}
#: Options of ``kerasbert`` commands that name a file or folder to read.
READS = {"--checkpoint", "--train", "--dev", "--data", "--model", "--teacher", "--text", "--pool", "--unlabeled",
         "--settings", "--schema"}


def _gen_tutorials():
    spec = importlib.util.spec_from_file_location("kerasbert_docs_gen_tutorials_cmds", DOCS / "gen_tutorials.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def pages():
    """Every page of the site (``docs/reference/cli.md`` too: its examples come from
    ``docs/gen_cli.py``) and the README."""
    return sorted(DOCS.rglob("*.md")) + [REPO_ROOT / "README.md"]


def blocks(text):
    """``(long, block)`` of each ``bash`` block of a page (dedented), long when the marker comes
    right before it."""
    out = []
    for match in re.finditer(r"^([ \t]*)```bash\n(.*?)^\1```", text, re.S | re.M):
        before = text[:match.start()].rstrip().splitlines()[-1:] or [""]
        out.append((before[0].strip() == LONG, textwrap.dedent(match.group(2))))
    return out


def commands(block):
    """The commands of a block: ``(line, words)`` per command (pipes, ``&&`` and redirections
    split; comments and environment assignments dropped; a line that starts with an option
    continues the one before), and the files its comments (``-> FILE``) or redirections write."""
    found, writes = [], []
    for line in block.replace("\\\n", " ").splitlines():
        writes += re.findall(r"->\s*(\S+)", line)
        if line.strip().startswith("-"):
            continue
        command, target = [], False
        for word in shlex.split(line, comments=True) + ["|"]:
            if target:
                writes.append(word)
                target = False
            elif word in ("|", "&&", ";", ">", ">>"):
                while command and re.fullmatch(r"[A-Za-z_]+=\S*", command[0]):
                    command = command[1:]
                if command:
                    found.append((line.split(" #")[0].strip(), command))
                command, target = [], word in (">", ">>")
            else:
                command.append(word)
    return found, writes


def tutorial_commands():
    """Each tutorial step's command (whitespace normalized), and the folders the steps write."""
    gen = _gen_tutorials()
    steps = [step.get("run") for steps in gen.TUTORIALS.values() for step in steps if step.get("run")]
    outputs = [w for step in steps for w in re.findall(r"--output (\S+)", step) + commands(step)[1]]
    return {" ".join(step.split()) for step in steps}, outputs


def downloads(text):
    """The names a page gives with an address and a licence (a paragraph or table naming the
    name, an ``http`` address and a licence)."""
    named = set()
    for paragraph in re.split(r"\n\s*\n", text):
        if "http" in paragraph and re.search(r"licen[cs]e|Apache|MIT|CC BY", paragraph, re.I):
            named |= set(re.findall(r"`([^`\s]+)`", paragraph)) | set(re.findall(r"/([\w.-]+)\.zip\b", paragraph))
    return {name.rstrip("/") for name in named}


def check_page(path, covered, tutorial_outputs):
    """``(problems, short commands to run)`` of one page."""
    from kerasbert.cli import build_parser

    parser = build_parser()
    text = path.read_text(encoding="utf-8")
    named = downloads(text)
    written = list(tutorial_outputs)
    problems, short = [], []
    page = path.relative_to(REPO_ROOT).as_posix() if path.is_relative_to(REPO_ROOT) else path.name
    for long, block in blocks(text):
        found, writes = commands(block)
        written += writes
        for line, words in found:
            name = words[0]
            if name == "kerasbert":
                try:
                    with contextlib.redirect_stdout(io.StringIO()):
                        args = parser.parse_args(words[1:])
                except SystemExit as stop:
                    if stop.code == 0 and {"-h", "--help"} & set(words):  # prints the help: runs
                        short.append(line)
                    else:
                        problems.append(f"{page}: {line}: does not parse")
                    continue
                reads = [words[i + 1] for i, w in enumerate(words[:-1]) if w in READS]
                if words[1:2] == ["inspect"]:
                    reads += [w for w in words[2:] if not w.startswith("-")]
                for value in reads:
                    first = value.split("/")[0]
                    if (value in ("starter", "-") or list(REPO_ROOT.glob(value)) or first in named
                            or value in named or any(value == w or value.startswith(w.rstrip("/") + "/") for w in written)
                            or any(value.startswith(n + "/") for n in named if "/" in n)):
                        continue
                    problems.append(f"{page}: {line}: reads {value}, which the clone does not have, no earlier "
                                    "command writes, and the page names no download for")
                written += [words[i + 1] for i, w in enumerate(words[:-1]) if w == "--output"]
                if getattr(args, "output", None):
                    written.append(args.output)
                whole = " ".join(line.split())
                if whole in covered or " ".join(words) in COVERED_BY or long:
                    continue
                short.append(line)
            elif name in ("python", "python3") and words[1:2] == ["-m"]:
                module = words[2]
                if module.startswith("bench."):
                    if not (REPO_ROOT / "bench" / f"{module.split('.', 1)[1]}.py").exists():
                        problems.append(f"{page}: {line}: no module {module}")
                    elif not long:
                        problems.append(f"{page}: {line}: a bench is long: mark its block ({LONG})")
            elif name in ("python", "python3"):
                script = next((w for w in words[1:] if w.endswith(".py")), None)
                if script and not (REPO_ROOT / script).exists():
                    problems.append(f"{page}: {line}: no {script}")
            elif name in SETUP:
                if name == "unzip":
                    written.append(words[-1].removesuffix(".zip"))
            elif name in SHELL:
                if not long and " ".join(line.split()) not in covered and line not in short:
                    short.append(line)
            else:
                problems.append(f"{page}: {line}: {name} is neither the kit's, a setup nor a shell command "
                                "(tests/test_page_commands.py lists them)")
    return problems, short


def test_every_command_reads_what_the_clone_has_or_the_page_names():
    covered, outputs = tutorial_commands()
    problems, shorts = [], []
    for path in pages():
        found, short = check_page(path, covered, outputs)
        problems += found
        shorts += short
    assert not problems, "\n".join(problems)
    assert shorts, "no short command found to run"


def test_tutorial_steps_name_their_downloads():
    """A tutorial step that reads a checkpoint under ``checkpoints/`` or a corpus under
    ``corpora/`` (which the clone does not have) runs on a page that names its download with an
    address and a licence."""
    gen = _gen_tutorials()
    for name, steps in gen.TUTORIALS.items():
        named = downloads((DOCS / "tutorials" / f"{name}.md").read_text(encoding="utf-8"))
        for step in steps:
            for kind, folder in re.findall(r"(checkpoints|corpora)/([\w-]+)", step.get("run") or step.get("python") or ""):
                assert f"{kind}/{folder}" in named or folder in named, (name, step["id"], folder)
                assert folder in (gen.CHECKPOINTS if kind == "checkpoints" else gen.CORPORA), (name, folder)


def test_the_check_finds_a_file_the_clone_lacks(tmp_path):
    """Seen failing: a command that reads a file no one ships, writes or names; a bench outside a
    long block; an option the command does not have (an optional one in brackets); a file an
    earlier command wrote passes, and a ``--help`` is a short command."""
    covered, outputs = tutorial_commands()
    page = tmp_path / "page.md"
    page.write_text("```bash\nkerasbert ner train --checkpoint starter --train train.conll --dev dev.conll "
                    "--output runs/x\nkerasbert ner evaluate --model runs/x --data docs/tutorials/data/conll/test.conll\n"
                    "python -m bench.serving_throughput\nkerasbert ner train --help\n"
                    "kerasbert triples tune --model runs/x --data docs/tutorials/data/triples/dev.json [--schema s.json]\n"
                    "```\n", encoding="utf-8")
    problems, short = check_page(page, covered, outputs)
    assert len(problems) == 4, problems
    assert "reads train.conll" in problems[0] and "reads dev.conll" in problems[1] and "mark its block" in problems[2]
    assert problems[3].endswith("[--schema s.json]: does not parse"), problems[3]
    assert short == ["kerasbert ner train --checkpoint starter --train train.conll --dev dev.conll --output runs/x",
                     "kerasbert ner evaluate --model runs/x --data docs/tutorials/data/conll/test.conll",
                     "kerasbert ner train --help"]


def test_short_commands_run():
    """The short commands of the pages (not long, not a tutorial step), run from the repository's
    root as a reader runs them from a clone: each exits 0."""
    require_starter()
    covered, outputs = tutorial_commands()
    for path in pages():
        _, short = check_page(path, covered, outputs)
        for line in short:
            done = subprocess.run(["bash", "-c", line], cwd=REPO_ROOT, capture_output=True, text=True, timeout=300)
            assert done.returncode == 0, f"{path.name}: {line}\n{done.stdout[-2000:]}{done.stderr[-2000:]}"
