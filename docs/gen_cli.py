"""Write docs/reference/cli.md from the ``kerasbert`` command's argparse parsers.

Every command and subcommand (the library's own and those the apps register
through the ``kerasbert.commands`` entry points), with its usage line, its
description, an example (:data:`EXAMPLES`; a test parses each) and every
option with the help text ``--help`` prints (defaults included; required
options marked, also those a settings file may give). The kit's own: heads of
other packages installed here (the ``kerasbert.heads`` entry points) are left
out, by rendering in a process with ``KERASBERT_NO_PLUGINS=1``. Run it after
changing a command or an option:

    python docs/gen_cli.py            # rewrite docs/reference/cli.md
    python docs/gen_cli.py --check    # exit 1 if the committed file is stale

``tests/test_docs.py`` runs the check.
"""

import argparse
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TARGET = ROOT / "docs" / "reference" / "cli.md"
WIDTH = "80"  # argparse wraps the usage line to $COLUMNS: fixed, so the output does not depend on the terminal


#: One example per command (a test checks that each parses, and that every command has one), on what a
#: clone ships (the tutorials' data, the starter encoder) and the tutorials' runs (``runs/conll``,
#: ``runs/triples``: tests/test_page_commands.py checks what each reads).
EXAMPLES = {
    (): "kerasbert ner --help",
    ("inspect",): "kerasbert inspect starter",
    ("pretrain",): "kerasbert pretrain --checkpoint starter --text docs/tutorials/data/text/sentences.txt "
                   "--output runs/pretrain --epochs 1",
    ("heads",): "kerasbert heads",
    ("ner",): "kerasbert ner train --help",
    ("ner", "train"): "kerasbert ner train --checkpoint starter --train docs/tutorials/data/conll/train.conll "
                      "--dev docs/tutorials/data/conll/dev.conll --output runs/conll --epochs 3",
    ("ner", "distill"): "kerasbert ner distill --teacher runs/conll --train docs/tutorials/data/conll/train.conll "
                        "--dev docs/tutorials/data/conll/dev.conll --output runs/conll-student --student-layers 3",
    ("ner", "evaluate"): "kerasbert ner evaluate --model runs/conll --data docs/tutorials/data/conll/test.conll "
                         "--output runs/conll/test_scores.json",
    ("ner", "predict"): "echo 'Maria Sanchez flew from Lisbon to Berlin for Siemens.' "
                        "| kerasbert ner predict --model runs/conll -",
    ("ner", "export"): "kerasbert ner export --model runs/conll --output exports/conll",
    ("ner", "calibrate"): "kerasbert ner calibrate --model runs/conll --data docs/tutorials/data/conll/dev.conll",
    ("ner", "demo"): "kerasbert ner demo",
    ("ner", "select"): "kerasbert ner select --model runs/conll --pool docs/tutorials/data/text/sentences.txt "
                       "--budget 20 --output to_label.json",
    ("triples",): "kerasbert triples train --help",
    ("triples", "train"): "kerasbert triples train --checkpoint starter --train docs/tutorials/data/triples/train.json "
                          "--dev docs/tutorials/data/triples/dev.json --output runs/triples --epochs 8",
    ("triples", "evaluate"): "kerasbert triples evaluate --model runs/triples "
                             "--data docs/tutorials/data/triples/test.json --output runs/triples/test_scores.json",
    ("triples", "predict"): "echo 'Anna Weber, the founder of Lumen Labs, was born in Vienna.' "
                            "| kerasbert triples predict --model runs/triples -",
    ("triples", "export"): "kerasbert triples export --model runs/triples --output exports/triples",
    ("triples", "tune"): "kerasbert triples tune --model runs/triples --data docs/tutorials/data/triples/dev.json",
}
#: Examples that train, or read what a training run writes and a tutorial's test does not run on
#: it: marked long on the page (``<!-- kerasbert:commands long -->``), not run by the pages' test.
LONG = {("pretrain",), ("ner", "distill"), ("ner", "calibrate"), ("ner", "select"), ("triples", "export")}


def subcommands(parser):
    """``[(name, parser)]`` of a parser's subcommands, in the order they were added."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return list(action.choices.items())
    return []


def walk(parser, path=()):
    yield path, parser
    for name, child in subcommands(parser):
        yield from walk(child, path + (name,))


def cell(text):
    return " ".join(text.split()).replace("\\", "&#92;").replace("|", "&#124;")


def option_rows(parser):
    formatter = parser._get_formatter()
    rows = []
    for action in parser._actions:
        if isinstance(action, (argparse._HelpAction, argparse._SubParsersAction)) or action.help == argparse.SUPPRESS:
            continue
        if action.option_strings:
            names = ", ".join(f"`{s}`" for s in action.option_strings)
            if action.nargs != 0:
                metavar = formatter._format_args(action, formatter._get_default_metavar_for_optional(action))
                names += f" `{metavar}`"
        else:
            names = f"`{formatter._format_args(action, formatter._get_default_metavar_for_positional(action))}`"
        help_text = formatter._expand_help(action) if action.help else ""
        if action.choices is not None and not isinstance(action, argparse._SubParsersAction):
            help_text += " Choices: " + ", ".join(f"`{c}`" for c in action.choices) + "."
        if getattr(action, "settings_required", False):
            from kerasbert.training.settings import REQUIRED_NOTE

            help_text = "**Required** (here or in `--settings FILE`). " + help_text.replace(REQUIRED_NOTE, "")
        elif action.required:
            help_text = "**Required.** " + help_text
        rows.append((names, cell(help_text)))
    return rows


def render():
    from importlib.metadata import entry_points

    if os.environ.get("KERASBERT_NO_PLUGINS") != "1" and entry_points(group="kerasbert.heads"):
        # a head of another package is installed: the kit's reference comes from a process that loads none
        return subprocess.run([sys.executable, __file__, "--stdout"], capture_output=True, text=True, check=True,
                              env=dict(os.environ, KERASBERT_NO_PLUGINS="1")).stdout
    os.environ["COLUMNS"] = WIDTH
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    from kerasbert.cli import build_parser

    parser = build_parser()
    out = [
        "# Command line",
        "",
        "<!-- Generated by docs/gen_cli.py from the argparse parsers; do not edit by hand. -->",
        "",
        "Every `kerasbert` command with every option, as `--help` prints them. The library adds "
        "`inspect` and `pretrain`; the apps add `ner` and `triples` through the `kerasbert.commands` "
        "entry points. Settings options of `train`, `distill` and `pretrain` can also come from "
        "`--settings FILE` (JSON or TOML, the same keys with `_` for `-`).",
        "",
    ]
    for path, command in walk(parser):
        name = " ".join(("kerasbert",) + path)
        level = "#" * min(2 + max(len(path) - 1, 0), 4)
        out += [f"{level} `{name}`", ""]
        description = command.description or ""
        if path:
            parent = parser
            for word in path[:-1]:
                parent = dict(subcommands(parent))[word]
            for action in parent._actions:
                if isinstance(action, argparse._SubParsersAction):
                    helps = {a.dest: a.help for a in action._choices_actions}
                    if not description and helps.get(path[-1]):
                        description = helps[path[-1]][0].upper() + helps[path[-1]][1:] + "."
        if description:
            out += [cell(description), ""]
        usage = command.format_usage().strip()
        out += ["```text", usage, "```", ""]
        if path in EXAMPLES:
            out += ["Example:", ""] + (["<!-- kerasbert:commands long -->"] if path in LONG else [])
            out += ["```bash", EXAMPLES[path], "```", ""]
        children = subcommands(command)
        if children:
            out += ["| Command | What it does |", "|---|---|"]
            for child_name, _ in children:
                for action in command._actions:
                    if isinstance(action, argparse._SubParsersAction):
                        helps = {a.dest: a.help for a in action._choices_actions}
                anchor = "kerasbert-" + "-".join(path + (child_name,))
                out.append(f"| [`{child_name}`](#{anchor}) | {cell(helps.get(child_name) or '')} |")
            out.append("")
        rows = option_rows(command)
        if rows:
            out += ["| Option | Description |", "|---|---|"]
            out += [f"| {names} | {text} |" for names, text in rows]
            out.append("")
    return "\n".join(out).rstrip() + "\n"


def main(argv=None):
    argv = argv if argv is not None else sys.argv[1:]
    check = "--check" in argv
    text = render()
    if "--stdout" in argv:
        sys.stdout.write(text)
        return 0
    if check:
        current = TARGET.read_text(encoding="utf-8") if TARGET.exists() else ""
        if current != text:
            print(f"{TARGET.relative_to(ROOT)} is stale: run python docs/gen_cli.py", file=sys.stderr)
            return 1
        return 0
    TARGET.parent.mkdir(parents=True, exist_ok=True)
    TARGET.write_text(text, encoding="utf-8")
    print(f"written: {TARGET.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
