"""MkDocs hooks: the parts of pages that are generated from the code and the data at build time.

* ``<!-- kerasbert:bench-results -->`` (Benchmarks page): the tables of ``bench/results/``
  (``docs/gen_bench.py``), and the figures they show copied into the site;
  ``<!-- kerasbert:bench-results NAME,NAME -->`` (any page): only those benches' tables;
* ``<!-- kerasbert:auto-rule -->`` (NER page): what each registered head declares its training
  needs, and the ``auto`` batch size / epochs rule it gives (``Task.resolve_auto``) for a few
  dataset sizes;
* the docstrings' Sphinx roles (``:class:`~kerasbert.encoder.BertEncoder```), which mkdocstrings
  leaves as text, shown as the code names they stand for.
"""

import importlib.util
import re
import sys
from pathlib import Path

from mkdocs.structure.files import File

ROOT = Path(__file__).resolve().parent.parent
BENCH_MARK = "<!-- kerasbert:bench-results -->"
AUTO_MARK = "<!-- kerasbert:auto-rule -->"
AUTO_SIZES = (100, 400, 800, 1000, 2000, 5019, 14041)
ROLE = re.compile(r":(?:class|func|meth|mod|attr|data|exc|obj):<code>(~?)([\w.]+)</code>")


def _gen_bench():
    spec = importlib.util.spec_from_file_location("kerasbert_gen_bench", Path(__file__).with_name("gen_bench.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def on_files(files, config):
    gen = _gen_bench()
    for path in sorted(set(gen.figures(gen.load_records()))):
        if files.get_file_from_path(path) is None:
            files.append(File.generated(config, path, abs_src_path=str(ROOT / path)))
    return files


def auto_rule_table():
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    from kerasbert_apps.base import heads
    from kerasbert_apps.ner.train import NER
    from kerasbert_apps.triples.train import TRIPLES
    from kerasbert import settings

    runs = [(task, head, task.train_settings(head=head.name)) for task in (NER, TRIPLES) for head in heads.heads(task.name)]
    lines = [
        f"A head declares the optimizer steps its training aims for ({settings.AUTO_STEPS} if it declares none), "
        f"its learning rate ({settings.AUTO_HEAD_LEARNING_RATE:g}) and the fewest epochs; the app caps the batch "
        f"(NER {NER.train_settings.auto_batch_size}, triples {TRIPLES.train_settings.auto_batch_size}). The "
        f"epochs are the fewest (from that minimum to {settings.AUTO_MAX_EPOCHS}) in which batches of "
        f"{settings.AUTO_MIN_BATCH_SIZE} or more still give those steps, the batch the largest with which they "
        "do (`RunSettings.resolve_auto`); with auto epochs, training stops after "
        f"{settings.AUTO_PATIENCE} epochs without a better dev F1.",
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


SOME_BENCHES = re.compile(r"<!-- kerasbert:bench-results ([\w,]+) -->")


def on_page_markdown(markdown, page, config, files):
    if BENCH_MARK in markdown:
        markdown = markdown.replace(BENCH_MARK, _gen_bench().render())
    markdown = SOME_BENCHES.sub(lambda m: _gen_bench().render(heading="###", only=m.group(1).split(",")), markdown)
    if AUTO_MARK in markdown:
        markdown = markdown.replace(AUTO_MARK, auto_rule_table())
    return markdown


def on_page_content(html, page, config, files):
    return ROLE.sub(lambda m: f"<code>{m.group(2).rsplit('.', 1)[-1] if m.group(1) else m.group(2)}</code>", html)
