"""The Benchmarks page's tables, generated from the JSON records under ``bench/results/``.

Each benchmark run writes one record (``bench/results.py``: ``write_result``) to
``bench/results/<bench>/<date>-<name>.json``: the bench, the date, the command, the CPU (model,
vector / bfloat16 flags, cores), the versions, a ``setup`` dict and ``rows`` (a list of dicts,
one per system measured in that run, the peer included). Optional keys: ``part`` (a bench that
measures several things, e.g. one dataset each, keeps one newest record per part; rows that all
carry the same ``"part"`` value make their record that part), ``columns`` (the row keys to show, in
order; default: all of them), ``figures``
(``[[path, caption], ...]``, paths from the repository root), ``source``, ``date_note``, ``summary``
(a dict of headline figures, e.g. the targets and how far the run got, shown as a two-column
table above the rows) and ``notes`` (a list of lines shown below the setup, e.g. what a run
left unmeasured and why).

For each bench (and part), the newest record is shown as a table (the columns: the union of the
rows' keys, in the order they first appear), with its setup in a few lines; older records of the
same bench and part are listed, folded, below it. Any folder under ``bench/results/`` is shown,
so a new benchmark needs no change here.

The site's build runs this through ``docs/hooks.py``; ``python docs/gen_bench.py`` prints the
Markdown.
"""

import ast
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results"
BENCH = ROOT / "bench"
#: The order on the page (accuracy first, then speed); benches not named here follow by name.
ORDER = (
    "demo", "ner_conll2003", "ner_heads", "entity_calibration", "finetuning_strategies", "triples_webnlg",
    "triples_gpu_sweep", "gpu_training", "encoder_throughput", "serving_throughput", "serving_profile",
    "int8_encoder",
)
#: A dict or list in a cell shows this many items (the record has them all).
MAX_ITEMS = 6
#: The part shown first where a bench has several; the others follow, newest first.
MAIN_PART = {
    "ner_conll2003": "CoNLL-2003", "ner_heads": "CoNLL-2003", "finetuning_strategies": "CoNLL-2003",
    "triples_webnlg": "WebNLG",
}


def load_records(results=RESULTS):
    """``[(path, record)]`` of every ``*.json`` under ``results`` (one folder per bench)."""
    found = []
    for path in sorted(Path(results).glob("*/*.json")):
        record = json.loads(path.read_text(encoding="utf-8"))
        record.setdefault("bench", path.parent.name)
        rows = record.get("rows") or []
        parts = {row.get("part") for row in rows if isinstance(row, dict)}
        if not record.get("part") and len(parts) == 1 and None not in parts:
            # rows that all say which part of the bench they measured (e.g. {"part": "genia", ...}):
            # the record is that part, and the column goes
            record["part"] = parts.pop()
            record["rows"] = [{k: v for k, v in row.items() if k != "part"} for row in rows]
        found.append((path, record))
    return found


def describe(bench, bench_dir=BENCH):
    """The first line of ``bench/<bench>.py``'s docstring, or ``""``."""
    script = Path(bench_dir) / f"{bench}.py"
    if not script.exists():
        return ""
    doc = ast.get_docstring(ast.parse(script.read_text(encoding="utf-8"))) or ""
    return doc.strip().split("\n\n")[0].replace("\n", " ")


def fmt(value):
    if value is None:
        return ""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        # four significant digits are plenty for a table; the record keeps every digit
        return f"{value:,.0f}" if abs(value) >= 1000 else repr(float(f"{value:.4g}"))
    if isinstance(value, dict):
        items = [f"{k}: {fmt(v)}" for k, v in value.items()]
        value = "; ".join(items[:MAX_ITEMS]) + (f"; ... ({len(items) - MAX_ITEMS} more)" if len(items) > MAX_ITEMS else "")
    elif isinstance(value, list):
        items = [fmt(v) for v in value]
        value = ", ".join(items[:MAX_ITEMS]) + (f", ... ({len(items) - MAX_ITEMS} more)" if len(items) > MAX_ITEMS else "")
    return str(value).replace("|", "&#124;").replace("\n", " ")


def is_number(value):
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def columns_of(rows):
    columns = []
    for row in rows:
        for key in row:
            if key not in columns:
                columns.append(key)
    return columns


def table(rows, indent="", columns=None):
    if not rows:
        return [indent + "*(no rows)*"]
    columns = columns or columns_of(rows)
    numeric = [all(is_number(r.get(c)) for r in rows if r.get(c) not in (None, "")) for c in columns]
    lines = [
        indent + "| " + " | ".join(fmt(c) for c in columns) + " |",
        indent + "|" + "|".join("---:" if n else "---" for n in numeric) + "|",
    ]
    for row in rows:
        lines.append(indent + "| " + " | ".join(fmt(row.get(c)) for c in columns) + " |")
    return lines


def machine(record):
    cpu = record.get("cpu") or {}
    parts = [str(cpu.get("model") or "unknown machine")]
    flags = cpu.get("flags")
    if flags is not None:
        parts.append("flags: " + (", ".join(flags) if flags else "none of the bf16/AVX-512 ones"))
    if cpu.get("cores"):
        parts.append(f"{cpu['cores']} cores")
    return "; ".join(parts)


def versions(record):
    found = record.get("versions") or {}
    return ", ".join(f"{name} {version}" for name, version in found.items())


def setup_lines(record, indent=""):
    lines = [f"{indent}- **Run:** {record.get('date', 'undated')}; {machine(record)}"
             + (f"; {versions(record)}" if versions(record) else "")]
    if record.get("command"):
        lines.append(f"{indent}- **Command:** `{record['command']}`")
    for key, value in (record.get("setup") or {}).items():
        lines.append(f"{indent}- **{fmt(key)}:** {fmt(value)}")
    notes = [record[k] for k in ("source", "date_note") if record.get(k)]
    if notes:
        lines.append(f"{indent}- *{'; '.join(fmt(n) for n in notes)}*")
    for note in record.get("notes") or []:
        lines.append(f"{indent}- {fmt(note)}")
    return lines


def summary_lines(record, indent=""):
    """The record's ``summary`` (headline figures by name) as a two-column table, or nothing."""
    summary = record.get("summary") or {}
    if not summary:
        return []
    lines = [indent + "| figure | value |", indent + "|---|---:|"]
    lines += [f"{indent}| {fmt(name)} | {fmt(value) if value is not None else 'not measured'} |"
              for name, value in summary.items()]
    return lines + [""]


def figure_lines(record, indent=""):
    lines = []
    for item in record.get("figures") or []:
        path, caption = (item, Path(item).stem) if isinstance(item, str) else item
        lines += [f'{indent}<figure markdown="span">', f'{indent}  ![{fmt(caption)}]({path}){{ width="520" }}',
                  f"{indent}  <figcaption>{fmt(caption)}</figcaption>", f"{indent}</figure>", ""]
    return lines


def figures(records):
    """Repository paths of every figure the records show (the site copies them)."""
    found = []
    for _, record in records:
        for item in record.get("figures") or []:
            found.append(item if isinstance(item, str) else item[0])
    return found


def shown_path(path):
    """A record's path from the repository root (or from its results folder's parent)."""
    path = Path(path).resolve()
    try:
        return path.relative_to(ROOT).as_posix()
    except ValueError:
        return path.relative_to(path.parents[2]).as_posix()


def bench_key(bench):
    return (ORDER.index(bench) if bench in ORDER else len(ORDER), bench)


def _ordered_parts(bench, parts):
    """The bench's main part (or the unnamed one) first, then the others, newest first."""
    newest = {p: max(str(r.get("date", "")) for _, r in parts[p]) for p in parts}
    main = MAIN_PART.get(bench, "")
    rest = sorted((p for p in parts if p != main), key=lambda p: (newest[p], p), reverse=True)
    return ([main] if main in parts else []) + rest


def render(results=RESULTS, bench_dir=BENCH, heading="##", only=None):
    """The Markdown of every bench's tables (``only``: just these benches, in this order)."""
    records = [(path, record) for path, record in load_records(results) if only is None or record["bench"] in only]
    groups = {}
    for path, record in records:
        groups.setdefault(record["bench"], {}).setdefault(record.get("part") or "", []).append((path, record))
    out = []
    for bench in (sorted(groups, key=bench_key) if only is None else [b for b in only if b in groups]):
        out += [f"{heading} {bench}", ""]
        what = describe(bench, bench_dir)
        if what:
            out += [what + (f" (`bench/{bench}.py`)" if (Path(bench_dir) / f"{bench}.py").exists() else ""), ""]
        parts = groups[bench]
        for part in _ordered_parts(bench, parts):
            runs = sorted(parts[part], key=lambda item: (str(item[1].get("date", "")), item[0].name))
            path, newest = runs[-1]
            if part:
                out += [f"{heading}# {bench}: {part}", ""]
            out += setup_lines(newest) + [""]
            out += summary_lines(newest)
            out += table(newest.get("rows") or [], columns=newest.get("columns")) + [""]
            out += figure_lines(newest)
            out.append(f"<small>Record: `{shown_path(path)}`</small>")
            out.append("")
            older = runs[:-1]
            if older:
                out += [f'??? note "Older runs ({len(older)})"', ""]
                for old_path, old in reversed(older):
                    out += [f"    **{old.get('date', 'undated')}**, `{shown_path(old_path)}`", ""]
                    out += setup_lines(old, indent="    ") + [""]
                    out += summary_lines(old, indent="    ")
                    out += table(old.get("rows") or [], indent="    ", columns=old.get("columns")) + [""]
    return "\n".join(out).rstrip() + "\n"


if __name__ == "__main__":
    sys.stdout.write(render())
