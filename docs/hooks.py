"""MkDocs hooks: the parts of pages that are generated from the code and the data at build time.

* ``<!-- kerasbert:bench-summary -->`` (Benchmarks page): the claims of ``bench/summary.toml``,
  each read from the record the selection rule picks (``docs/gen_bench.py``: ``select``);
* ``<!-- kerasbert:bench-page -->`` (the pages under ``benchmarks/``): the full records of the
  benches the ``[[group]]`` of that page names, and the figures they show copied into the site;
  ``<!-- kerasbert:bench-other -->``: those of the benches no group names;
  ``<!-- kerasbert:bench-results -->``: every bench's tables;
  ``<!-- kerasbert:bench-results NAME,NAME -->`` (any page): only those benches' tables;
* ``<!-- kerasbert:serving-choice -->``, ``<!-- kerasbert:training-choice -->`` (the guides):
  per machine class, the export or precision its newest records favour, with their figures;
  ``<!-- kerasbert:demo-run -->``: the newest demo record in a sentence;
* ``<!-- kerasbert:targets -->`` (any page): the targets of ``bench/summary.toml`` (``[[target]]``),
  each checked against its record (``gen_bench.targets_table``);
* ``<!-- kerasbert:bench-plot NAME -->`` (any page): a plot drawn from the records when the site
  is built (``gen_bench.PLOTS``: ``serving_latency``, ``heads_f1_time``, ``reliability``,
  ``pretraining_curve``);
* ``<!-- kerasbert:auto-rule -->`` (NER page): what each registered head declares its training
  needs, and the ``auto`` batch size / epochs rule it gives (``Task.resolve_auto``) for a few
  dataset sizes;
* ``<!-- kerasbert:tutorial NAME STEP -->`` (the tutorials): the command of step ``STEP`` of
  ``docs/tutorials/NAME.json`` and what it printed, as ``docs/gen_tutorials.py`` ran and recorded
  it (a step the file lacks fails the build); ``<!-- kerasbert:tutorial-run NAME -->``: when and
  with which versions it ran;
* ``<!-- kerasbert:settings NAME -->`` (API reference): the fields of a settings dataclass
  (``ner`` or ``triples``: ``NerTrainSettings``, ``TriplesTrainSettings``) with their defaults and
  help;
* ``<!-- kerasbert:rooms -->`` (Architecture page): the rooms of ``kerasbert/`` and
  ``kerasbert_apps/`` and the imports between them, drawn and tabled from the code's own imports
  (``docs/gen_rooms.py``, the reading ``tests/test_imports.py`` holds to no circle);
* the notebooks (``notebooks/*.ipynb``, outside ``docs/``) added to the site, where
  mkdocs-jupyter renders them with their committed outputs;
* ``--8<-- "FILE:SECTION"`` (the Contributing and Changelog pages): the part of the repository's
  ``FILE`` between ``<!-- --8<-- [start:SECTION] -->`` and ``<!-- --8<-- [end:SECTION] -->``, its
  links into ``docs/`` (right from the repository root, where the file lives) made relative to
  the site's pages;
* the docstrings' Sphinx roles (``:class:`~kerasbert.models.encoder.BertEncoder```), which mkdocstrings
  leaves as text, shown as the code names they stand for.

The site is the kit's own: a head of another package installed where it is built is not loaded
(``KERASBERT_NO_PLUGINS``, as ``docs/gen_cli.py`` does for the command-line reference).
"""

import importlib.util
import json
import os
import re
import sys
from pathlib import Path

os.environ["KERASBERT_NO_PLUGINS"] = "1"  # before anything imports the head registry

from mkdocs.plugins import event_priority
from mkdocs.structure.files import File

ROOT = Path(__file__).resolve().parent.parent
SUMMARY_MARK = "<!-- kerasbert:bench-summary -->"
PAGE_MARK = "<!-- kerasbert:bench-page -->"
OTHER_MARK = "<!-- kerasbert:bench-other -->"
SERVING_CHOICE_MARK = "<!-- kerasbert:serving-choice -->"
TRAINING_CHOICE_MARK = "<!-- kerasbert:training-choice -->"
DEMO_MARK = "<!-- kerasbert:demo-run -->"
TUTORIAL_RUN_MARK = re.compile(r"<!-- kerasbert:tutorial-run ([\w-]+) -->")
BENCH_MARK = "<!-- kerasbert:bench-results -->"
SOME_BENCHES = re.compile(r"<!-- kerasbert:bench-results ([\w,]+) -->")
PLOT_MARK = re.compile(r"<!-- kerasbert:bench-plot (\w+) -->")
AUTO_MARK = "<!-- kerasbert:auto-rule -->"
TARGETS_MARK = "<!-- kerasbert:targets -->"
ROOMS_MARK = "<!-- kerasbert:rooms -->"
ROOMS_PNG = "assets/rooms.png"
AUTO_SIZES = (100, 400, 800, 1000, 2000, 5019, 14041)
ROLE = re.compile(r":(?:class|func|meth|mod|attr|data|exc|obj):<code>(~?)([\w.]+)</code>")
SETTINGS_MARK = re.compile(r"<!-- kerasbert:settings (ner|triples) -->")
TUTORIAL_MARK = re.compile(r"<!-- kerasbert:tutorial ([\w-]+) ([\w-]+) -->")
ROOT_SECTION = re.compile(r'^--8<-- "([\w.-]+):([\w-]+)"[ \t]*$', re.M)
_PLOTS = {}


def _module(name):
    spec = importlib.util.spec_from_file_location(f"kerasbert_docs_{name}", Path(__file__).with_name(f"{name}.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _gen_bench():
    return _module("gen_bench")


@event_priority(100)  # before mkdocs-jupyter's on_files, which makes the notebooks pages
def on_files(files, config):
    for path in sorted((ROOT / "notebooks").glob("*.ipynb")):
        uri = f"notebooks/{path.name}"
        if files.get_file_from_path(uri) is None:
            # a File whose src_dir is the repository (not a generated one: mkdocs-jupyter's wrapper
            # finds the source through src_dir)
            files.append(File(uri, src_dir=str(ROOT), dest_dir=config["site_dir"],
                              use_directory_urls=config["use_directory_urls"]))
    gen = _gen_bench()
    records = gen.load_records()
    for path in sorted(set(gen.figures(records))):
        if files.get_file_from_path(path) is None:
            files.append(File.generated(config, path, abs_src_path=str(ROOT / path)))
    files.append(File.generated(config, ROOMS_PNG, content=_module("gen_rooms").rooms_png()))
    _PLOTS.clear()
    _PLOTS.update(gen.plots(records))
    for name, (png, _) in _PLOTS.items():
        files.append(File.generated(config, f"{gen.PLOT_DIR}/{name}.png", content=png))
    return files


def auto_rule_table():
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    from kerasbert_apps.base import heads
    from kerasbert_apps.ner.train import NER
    from kerasbert_apps.triples.train import TRIPLES
    from kerasbert.training import settings

    runs = [(task, head, task.train_settings(head=head.name)) for task in (NER, TRIPLES) for head in heads.heads(task.name)]
    lines = [
        f"A head declares the optimizer steps its training aims for ({settings.AUTO_STEPS} if it declares none), "
        f"its learning rate ({settings.AUTO_HEAD_LEARNING_RATE:g}) and the fewest epochs; the app caps the batch "
        f"(NER {NER.train_settings.auto_batch_size}, triples {TRIPLES.train_settings.auto_batch_size}). The "
        f"epochs are the fewest (from that minimum to {settings.AUTO_MAX_EPOCHS}) in which batches of "
        f"{settings.AUTO_MIN_BATCH_SIZE} or more still give those steps, the batch the largest with which they "
        "do (`RunSettings.resolve_auto`); with auto epochs, training stops after "
        f"{settings.AUTO_PATIENCE} epochs without a better dev F1 (once it is above 0).",
        "",
        "| head | steps | fewest epochs | head learning rate |",
        "|---|---:|---:|---:|",
    ]
    for task, head, s in runs:
        r = s.resolve_auto(1, **head.training_defaults())
        lines.append(f"| {task.name} `{head.name}` | {head.auto_steps or settings.AUTO_STEPS:,} | "
                     f"{head.auto_min_epochs or s.auto_min_epochs} | {r.head_learning_rate:g} |")
    lines += ["", "Batch size, epochs (optimizer steps) for a few numbers of training sequences:", "",
              "| training sequences | " + " | ".join(f"`{head.name}`" for _, head, _ in runs) + " |",
              "|---:|" + "---|" * len(runs)]
    for rows in AUTO_SIZES:
        cells = []
        for task, head, s in runs:
            r = s.resolve_auto(rows, **head.training_defaults())
            steps = -(-rows // r.batch_size) * r.epochs
            cells.append(f"{r.batch_size}, {r.epochs} ({steps:,})")
        lines.append(f"| {rows:,} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def settings_table(match):
    """The fields of ``NerTrainSettings`` or ``TriplesTrainSettings``: the option, the Python
    field, its default, its choices and its help, as ``kerasbert APP train --help`` prints them
    (the fields are made by ``kerasbert_apps.base.heads.train_settings_class``: the task's, then
    ``head``, then each registered head's)."""
    import dataclasses

    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    from kerasbert.training.settings import help_text

    if match.group(1) == "ner":
        from kerasbert_apps.ner.train import NerTrainSettings as cls
    else:
        from kerasbert_apps.triples.train import TriplesTrainSettings as cls
    lines = ["| option / field | default | help |", "|---|---|---|"]
    for field in dataclasses.fields(cls):
        choices = field.metadata.get("choices")
        help_ = help_text(cls, field) + (f" Choices: {', '.join(f'`{c}`' for c in choices)}." if choices else "")
        required = " **(required)**" if field.name in cls.required else ""
        cell = f"`--{field.name.replace('_', '-')}`<br>`{field.name}`{required}"
        lines.append(f"| {cell} | `{field.default!r}` | {help_.replace('|', '&#124;')} |")
    return "\n".join(lines) + "\n"


def root_section(match):
    """The section a ``--8<-- "FILE:SECTION"`` line names, its ``](docs/...)`` links made
    relative to the site (the file is written to be read from the repository root)."""
    name, section = match.groups()
    text = (ROOT / name).read_text(encoding="utf-8")
    start, end = f"<!-- --8<-- [start:{section}] -->", f"<!-- --8<-- [end:{section}] -->"
    if start not in text or end not in text:
        raise ValueError(f"{name} has no section {section!r} ({start} ... {end})")
    body = text.split(start, 1)[1].split(end, 1)[0]
    return re.sub(r"\]\(docs/", "](", body)


def _plot(match, page):
    gen = _gen_bench()
    name = match.group(1)
    if name not in gen.PLOTS:
        raise ValueError(f"{page.file.src_uri}: no plot named {name!r} (known: {', '.join(gen.PLOTS)})")
    if name not in _PLOTS:
        return f"*(no record to draw {name} from yet)*\n"
    prefix = "../" * page.file.src_uri.count("/")
    return gen.plot_markdown(name, _PLOTS[name][1], prefix)


def shown_command(command, width=88):
    """A long shell command over several lines (``\\`` before each option past the first line)."""
    if len(command) <= width or "\n" in command:
        return command
    lines, line = [], ""
    for part in re.split(r" (?=--)", command):
        if line and len(line) + len(part) + 1 > width:
            lines.append(line + " \\")
            line = "    " + part
        else:
            line = f"{line} {part}" if line else part
    return "\n".join(lines + [line])


def tutorial_step(match):
    """The Markdown of ``<!-- kerasbert:tutorial NAME STEP -->``: the command and its output."""
    name, step_id = match.groups()
    path = ROOT / "docs" / "tutorials" / f"{name}.json"
    steps = {step["id"]: step for step in json.loads(path.read_text(encoding="utf-8"))["steps"]}
    if step_id not in steps:
        raise ValueError(f"{path.name} has no step {step_id!r} (python docs/gen_tutorials.py {name} writes it)")
    step = steps[step_id]
    language = "python" if step["kind"] == "python" else "bash"
    out = f"```{language}\n{shown_command(step['command']).rstrip()}\n```\n"
    if step["output"]:
        output_language = "json" if step["output"].lstrip().startswith("{") and step["kind"] == "show" else "text"
        title = "reply" if step["kind"] == "show" else "output"
        out += f'\n```{output_language} title="{title}"\n{step["output"]}\n```\n'
    return out


def tutorial_run(match):
    """The Markdown of ``<!-- kerasbert:tutorial-run NAME -->``: when the recorded outputs were
    made, on what, with which versions (``docs/gen_tutorials.py`` writes them with the steps)."""
    name = match.group(1)
    path = ROOT / "docs" / "tutorials" / f"{name}.json"
    ran = json.loads(path.read_text(encoding="utf-8")).get("ran")
    if not ran:
        raise ValueError(f"{path.name} does not say when it ran (python docs/gen_tutorials.py {name} writes it)")
    versions = ", ".join(f"{package} {version}" for package, version in ran["versions"].items())
    text = (f"The outputs below are from a run of {ran['date']} on {ran['platform']}, with {versions}; "
            "durations are masked as `…`.")
    if ran.get("note"):
        text += f" {ran['note']}"
    return text + "\n"


def on_page_markdown(markdown, page, config, files):
    markdown = ROOT_SECTION.sub(root_section, markdown)
    markdown = TUTORIAL_MARK.sub(tutorial_step, markdown)
    markdown = TUTORIAL_RUN_MARK.sub(tutorial_run, markdown)
    markdown = SETTINGS_MARK.sub(settings_table, markdown)
    prefix = "../" * page.file.src_uri.count("/")
    if SUMMARY_MARK in markdown:
        gen = _gen_bench()
        markdown = markdown.replace(SUMMARY_MARK, gen.summary_table(gen.load_summary(), gen.load_records(), prefix))
    if TARGETS_MARK in markdown:
        gen = _gen_bench()
        markdown = markdown.replace(TARGETS_MARK, gen.targets_table(gen.load_summary(), gen.load_records()))
    if PAGE_MARK in markdown:
        gen = _gen_bench()
        benches = gen.page_benches(gen.load_summary(), page.file.src_uri)
        if not benches:
            raise ValueError(f"{page.file.src_uri}: no [[group]] of bench/summary.toml names this page")
        markdown = markdown.replace(PAGE_MARK, gen.render(heading="##", only=benches, prefix=prefix))
    if OTHER_MARK in markdown:
        gen = _gen_bench()
        other = gen.unlisted_benches(gen.load_summary(), gen.load_records())
        markdown = markdown.replace(OTHER_MARK, gen.render(heading="###", only=other, prefix=prefix) if other
                                    else "*(none: every bench is on one of the pages above)*\n")
    if SERVING_CHOICE_MARK in markdown:
        gen = _gen_bench()
        markdown = markdown.replace(SERVING_CHOICE_MARK, gen.serving_choice_table(gen.load_records()))
    if TRAINING_CHOICE_MARK in markdown:
        gen = _gen_bench()
        markdown = markdown.replace(TRAINING_CHOICE_MARK, gen.training_choice_table(gen.load_records()))
    if DEMO_MARK in markdown:
        gen = _gen_bench()
        markdown = markdown.replace(DEMO_MARK, gen.demo_sentence(gen.load_records()))
    if BENCH_MARK in markdown:
        markdown = markdown.replace(BENCH_MARK, _gen_bench().render(prefix=prefix))
    markdown = SOME_BENCHES.sub(lambda m: _gen_bench().render(heading="###", only=m.group(1).split(","), prefix=prefix),
                                markdown)
    markdown = PLOT_MARK.sub(lambda m: _plot(m, page), markdown)
    if AUTO_MARK in markdown:
        markdown = markdown.replace(AUTO_MARK, auto_rule_table())
    if ROOMS_MARK in markdown:
        markdown = markdown.replace(ROOMS_MARK, _module("gen_rooms").rooms_markdown(prefix + ROOMS_PNG))
    return markdown


def on_page_content(html, page, config, files):
    return ROLE.sub(lambda m: f"<code>{m.group(2).rsplit('.', 1)[-1] if m.group(1) else m.group(2)}</code>", html)
