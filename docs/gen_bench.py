"""The Benchmarks page, generated from the JSON records under ``bench/results/``.

Each benchmark run writes one record (``bench/common.py``: ``write_result``) to
``bench/results/<bench>/<date>-<name>.json``: the bench, the date, the command, the CPU (model,
vector / bfloat16 flags, cores), the versions, a ``setup`` dict and ``rows`` (a list of dicts,
one per system measured in that run, the peer included). Optional keys: ``part`` (a bench that
measures several things, e.g. one dataset each, keeps one newest record per part; rows that all
carry the same ``"part"`` value make their record that part), ``columns`` (the row keys to show, in
order), ``figures`` (``[[path, caption], ...]``, paths from the repository root), ``source``,
``date_note``, ``summary`` (a dict of headline figures, e.g. the targets and how far the run got,
shown as a two-column table above the rows) and ``notes`` (a list of lines shown below the
setup, e.g. what a run left unmeasured and why).

The page opens with the summary table chosen by hand in ``bench/summary.toml`` (each row: a
record, the row of ours and of the peer in the same run, the field), then the plots drawn from
the records (:func:`plots`), then each bench under its heading in words (``[section.<bench>]``
of the same file; a bench it does not name gets its folder name): for each part, the newest
record as a table, with its setup in a few lines; older records of the same bench and part are
folded below it. In a table the columns a record chooses come first, then the key columns
(system, head, ...), then figures, lists and dicts last; a value that is the same in every row is
said once above the table instead of filling a column. Any folder under ``bench/results/`` is
shown, so a new benchmark needs no change here.

The ``[[target]]`` items of the same file are a project's targets checked against the records
(:func:`targets_table`: each target, the bar it sets, the figure its record's row reached and
whether it holds), for the pages that say which targets hold and why.

The site's build runs this through ``docs/hooks.py``; ``python docs/gen_bench.py`` prints the
Markdown.
"""

import ast
import io
import json
import re
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results"
BENCH = ROOT / "bench"
SUMMARY = BENCH / "summary.toml"
#: A dict or list in a cell shows this many items (the record has them all).
MAX_ITEMS = 6
#: The part shown first where a bench has several; the others follow, newest first.
MAIN_PART = {
    "ner_conll2003": "CoNLL-2003", "ner_heads": "CoNLL-2003", "finetuning_strategies": "CoNLL-2003",
    "triples_webnlg": "WebNLG",
}
#: Columns that say which system or setting a row is: first in a table (after a record's own ``columns``).
KEY_COLUMNS = ("system", "head", "name", "dataset", "settings", "strategy", "task", "precision", "encoder", "shape",
               "mode", "stage", "scores", "bins", "labelled", "seed", "batch")
#: Where the plots go in the site (generated at build time; see :func:`plots`).
PLOT_DIR = "assets/bench"


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


def load_summary(path=SUMMARY):
    """``bench/summary.toml`` as a dict (``{}`` without one)."""
    path = Path(path)
    return tomllib.loads(path.read_text(encoding="utf-8")) if path.exists() else {}


def describe(bench, bench_dir=BENCH):
    """The first paragraph of ``bench/<bench>.py``'s docstring, or ``""``."""
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
    return str(value).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace("|", "&#124;").replace("\n", " ")


def is_number(value):
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def columns_of(rows):
    columns = []
    for row in rows:
        for key in row:
            if key not in columns:
                columns.append(key)
    return columns


def ordered_columns(rows, first=()):
    """The rows' keys: ``first`` (those present), then the key columns, then the rest in the order
    they appear, with lists and dicts last (they are the widest cells)."""
    found = columns_of(rows)
    head = [c for c in first if c in found]
    keys = [c for c in found if c in KEY_COLUMNS and c not in head]
    rest = [c for c in found if c not in head and c not in keys]
    wide = [c for c in rest if any(isinstance(r.get(c), (dict, list)) for r in rows)]
    return head + keys + [c for c in rest if c not in wide] + wide


def constant_columns(rows, columns):
    """The columns whose value is the same (and present) in every row of a table of several rows."""
    if len(rows) < 2:
        return []
    return [c for c in columns if all(c in r for r in rows) and all(r[c] == rows[0][c] for r in rows[1:])
            and rows[0][c] not in (None, "") and c not in KEY_COLUMNS[:3]]


def table(rows, indent="", columns=None):
    """A Markdown table of ``rows`` (``columns``: the keys, in order; default: all of them)."""
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


def record_table(record, indent="", first=()):
    """A record's rows as a table: its ``columns`` (or ``first``) first, then the key columns,
    lists and dicts last; a value the same in every row said once above the table."""
    rows = record.get("rows") or []
    columns = ordered_columns(rows, record.get("columns") or first)
    same = constant_columns(rows, columns)
    lines = []
    if same:
        lines += [indent + "- **Every row:** " + "; ".join(f"{fmt(c)}: {fmt(rows[0][c])}" for c in same), ""]
    return lines + table(rows, indent=indent, columns=[c for c in columns if c not in same])


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


# --- the summary table ---------------------------------------------------------------------


def _find_row(record, where, what):
    rows = [r for r in record.get("rows") or [] if all(r.get(k) == v for k, v in where.items())]
    if len(rows) != 1:
        raise ValueError(f"bench/summary.toml: {what} {where} matches {len(rows)} rows of its record, not 1")
    return rows[0]


def _cell(row, fields, bold, form=None):
    values = []
    for i, field in enumerate(fields):
        if row.get(field) is None:
            raise ValueError(f"bench/summary.toml: the row has no {field!r}")
        text = form.format(row[field]) if form and is_number(row[field]) else fmt(row[field])
        values.append((f"**{text}**" if bold and i == 0 else text) + ("" if i == 0 else f" {field}"))
    return " · ".join(values)


def compare(ours, peer, how):
    """``ours`` against ``peer`` in words: ``"difference"`` (+1.49), ``"higher"`` (more is
    better: 5.61x the peer's) or ``"lower"`` (a time: 1.05x faster, 1.72x slower)."""
    if how == "difference":
        return f"{ours - peer:+.4g}"
    if how == "higher":
        return f"{ours / peer:.2f}x the peer's"
    return f"{peer / ours:.2f}x faster" if ours <= peer else f"{ours / peer:.2f}x slower"


#: CPU flags that change the speed figures, in the words of the summary table.
FLAG_WORDS = (("amx_bf16", "AMX"), ("avx512_bf16", "AVX512-BF16"), ("avx512f", "AVX-512"), ("avx2", "AVX2"))


def short_machine(record):
    """``model, N cores, FLAGS`` of a record's CPU, short enough for a table cell (the bfloat16
    and vector flags that change the speed figures; every flag is in the record)."""
    cpu = record.get("cpu") or {}
    flags = set(cpu.get("flags") or ())
    words = [word for flag, word in FLAG_WORDS if flag in flags]
    if "AVX512-BF16" in words or "AMX" in words:
        words = [w for w in words if w not in ("AVX-512", "AVX2")]
    elif "AVX-512" in words:
        words = [w for w in words if w != "AVX2"]
    text = str(cpu.get("model") or "unknown machine").replace("(R)", "")
    return text + (f", {cpu['cores']} cores" if cpu.get("cores") else "") + (f", {' + '.join(words)}" if words else "")


def summary_table(summary, records):
    """The Markdown table of ``summary["summary"]`` rows, each read from its record."""
    by_path = {Path(path).relative_to(Path(path).parents[1]).as_posix(): record for path, record in records}
    lines = ["| What | kerasbert | Peer, same run | kerasbert vs peer | Data, encoder | Machine, date |",
             "|---|---|---|---|---|---|"]
    for item in summary.get("summary") or []:
        record = by_path.get(item["record"])
        if record is None:
            raise ValueError(f"bench/summary.toml: no record bench/results/{item['record']}")
        fields = [item["field"]] if isinstance(item["field"], str) else list(item["field"])
        ours_row = _find_row(record, item["ours"], "ours")
        ours = _cell(ours_row, fields, bold=True, form=item.get("format"))
        peer, versus = "", ""
        if item.get("peer"):
            peer_row = _find_row(record, item["peer"], "peer")
            peer = _cell(peer_row, fields, bold=False, form=item.get("format"))
            if item.get("compare"):
                versus = compare(ours_row[fields[0]], peer_row[fields[0]], item["compare"])
        what = f"[{item['task']}](#{record['bench']})" + (f"<br><small>{item['unit']}</small>" if item.get("unit") else "")
        data = item.get("data", "") + (f" ({item['note']})" if item.get("note") else "")
        if item.get("encoder"):
            data += f"; {item['encoder']}"
        cells = [what, f"{ours}<br><small>{item.get('ours_name', '')}</small>",
                 peer + ("<br>" if peer else "") + (f"<small>{item['peer_name']}</small>" if item.get("peer_name") else ""),
                 versus,
                 f"<small>{data}</small>", f"<small>{short_machine(record)}; {str(record.get('date', ''))[:10]}</small>"]
        lines.append("| " + " | ".join(c.replace("|", "&#124;") for c in cells) + " |")
    return "\n".join(lines) + "\n"


# --- the targets table ------------------------------------------------------------------------


def _bar(record, item, field, by_path=None):
    """``(op, bar, words)`` of a target: ``at_least`` or ``at_most``, a number or a row
    (``key = value`` pairs: that row's ``field``) of the same record, or of ``bar_record``
    when the target names one; ``minus`` (a number) is taken off a row's figure ("within 2
    points of")."""
    ops = [(key, op) for key, op in (("at_least", "≥"), ("at_most", "≤")) if key in item]
    if len(ops) != 1:
        raise ValueError(f"bench/summary.toml: target {item.get('target')!r} needs one of at_least or at_most")
    key, op = ops[0]
    bar = item[key]
    if isinstance(bar, dict):
        if item.get("bar_record"):
            record = (by_path or {}).get(item["bar_record"])
            if record is None:
                raise ValueError(f"bench/summary.toml: no record bench/results/{item['bar_record']}")
        row = _find_row(record, bar, f"target {item.get('target')!r}: {key}")
        if not is_number(row.get(field)):
            raise ValueError(f"bench/summary.toml: the row {bar} has no number {field!r}")
        words = ", ".join(f"{k} {v}" for k, v in bar.items())
        if item.get("bar_record"):
            words += f", `{item['bar_record']}`"
        minus = item.get("minus", 0)
        if minus:
            return op, row[field] - minus, f"{field} {op} {fmt(row[field])} − {fmt(minus)} ({fmt(words)})"
        return op, row[field], f"{field} {op} {fmt(row[field])} ({fmt(words)})"
    if "minus" in item or "bar_record" in item:
        raise ValueError(f"bench/summary.toml: target {item.get('target')!r}: minus and bar_record go with a row")
    return op, bar, f"{field} {op} {fmt(bar)}"


def targets_table(summary, records):
    """The Markdown table of ``summary["target"]`` items: each target in words, its bar, the
    figure its record's row reached and whether it holds, and the record (its machine, date)."""
    by_path = {Path(path).relative_to(Path(path).parents[1]).as_posix(): record for path, record in records}
    lines = ["| Target | Needs | Reached | Holds | Record |", "|---|---|---:|---|---|"]
    for item in summary.get("target") or []:
        record = by_path.get(item["record"])
        if record is None:
            raise ValueError(f"bench/summary.toml: no record bench/results/{item['record']}")
        field = item["field"]
        row = _find_row(record, item["row"], f"target {item.get('target')!r}: row")
        if not is_number(row.get(field)):
            raise ValueError(f"bench/summary.toml: target {item.get('target')!r}: the row has no number {field!r}")
        op, bar, needs = _bar(record, item, field, by_path)
        holds = row[field] >= bar if op == "≥" else row[field] <= bar
        where = (f"`bench/results/{item['record']}`<br><small>{short_machine(record)}; "
                 f"{str(record.get('date', ''))[:10]}</small>")
        cells = [fmt(item.get("target", "")), needs, fmt(row[field]), "yes" if holds else "**no**", where]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


# --- plots -----------------------------------------------------------------------------------


def _newest(records, bench, test=lambda record: True):
    found = [(str(r.get("date", "")), p.name, r) for p, r in records if r["bench"] == bench and test(r)]
    return max(found, key=lambda item: item[:2])[2] if found else None


def _figure(width=7.5, height=3.4, panels=1):
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    figure = Figure(figsize=(width, height), dpi=110)
    FigureCanvasAgg(figure)
    return figure, figure.subplots(1, panels)


def _png(figure):
    buffer = io.BytesIO()
    figure.tight_layout()
    figure.savefig(buffer, format="png", metadata={"Software": None})
    return buffer.getvalue()


def _run_line(record):
    return f"{str(record.get('date', ''))[:10]}; {short_machine(record)}"


def plot_serving(records):
    """Median latency of one sentence and batch-64 throughput of each export against the Hugging
    Face pipeline, from the newest serving_throughput record that has both."""
    record = _newest(records, "serving_throughput",
                     lambda r: any(row.get("name") == "hf" for row in r.get("rows") or [])
                     and all("p50_ms" in row for row in r.get("rows") or []))
    if record is None:
        return None
    rows = record["rows"]
    figure, (latency, throughput) = _figure(9, 3.6, panels=2)
    names = ["Hugging Face pipeline" if row["name"] == "hf" else row["name"] for row in rows]
    colors = ["tab:orange" if row["name"] == "hf" else "tab:blue" for row in rows]
    latency.barh(names, [row["p50_ms"] for row in rows], color=colors)
    latency.set_xlabel("median latency, one sentence (ms; lower is better)")
    latency.invert_yaxis()
    throughput.barh(names, [row.get("batch_64_sent_per_s") or 0 for row in rows], color=colors)
    throughput.set_xlabel("sentences/s in batches of 64 (higher is better)")
    throughput.invert_yaxis()
    throughput.set_yticklabels([])
    figure.suptitle("Serving: each export (blue) and the Hugging Face pipeline (orange), one run", fontsize=9)
    caption = ("Serving latency and throughput per export against the Hugging Face pipeline, one run "
               f"({_run_line(record)}); <code>-bf16</code>: <code>--precision bfloat16</code>, <code>-head-</code>: "
               "<code>--jit-compile head</code>, <code>student</code>: a 3-layer distilled student.")
    return _png(figure), caption


def heads_points(records):
    """part -> head -> (train seconds, test F1, record): the newest row of each NER head with
    its defaults that records its training seconds (rows of a variant, which name their
    ``options``, are left out)."""
    newest = {}
    for path, record in sorted(records, key=lambda item: (str(item[1].get("date", "")), item[0].name)):
        if record["bench"] != "ner_heads":
            continue
        for row in record.get("rows") or []:
            f1 = row.get("test F1", row.get("F1"))
            if row.get("head") and row.get("train seconds") and f1 is not None and not row.get("options"):
                newest.setdefault(record.get("part") or "", {})[row["head"]] = (row["train seconds"], f1, record)
    return newest


def plot_heads(records):
    """Test F1 against training time of each NER head with its defaults, per dataset (:func:`heads_points`)."""
    newest = heads_points(records)
    if not newest:
        return None
    parts = sorted(newest)
    figure, axes = _figure(4.2 * len(parts), 3.4, panels=len(parts))
    axes = axes if len(parts) > 1 else [axes]
    names = sorted({head for heads in newest.values() for head in heads})
    colors = {head: f"C{i}" for i, head in enumerate(names)}
    for axis, part in zip(axes, parts):
        for head, (seconds, f1, _) in sorted(newest[part].items()):
            axis.scatter([seconds], [f1], s=40, color=colors[head])
            axis.annotate(head, (seconds, f1), textcoords="offset points", xytext=(5, 4), fontsize=8)
        axis.set_title(part, fontsize=9)
        axis.set_xlabel("training time (s)")
        axis.set_ylabel("test F1")
        axis.margins(0.25)
    runs = sorted({_run_line(r) for heads in newest.values() for _, _, r in heads.values()})
    caption = ("Test F1 against training time of each NER head with its defaults (the newest run of each; "
               f"{'; '.join(runs)}). F1 as each record gives it: CoNLL-2003 in %, GENIA as a fraction.")
    return _png(figure), caption


def plot_reliability(records):
    """The reliability diagram of the newest entity_calibration record: accuracy against mean
    score per bin, for each set of scores it measured (calibrated, and T = 1)."""
    record = _newest(records, "entity_calibration",
                     lambda r: sum("mean score" in row for row in r.get("rows") or []) >= 3)
    if record is None:
        return None
    figure, axis = _figure(4.6, 4.2)
    axis.plot([0, 1], [0, 1], linestyle="--", color="grey", label="perfectly calibrated")
    groups = {}
    for row in record["rows"]:
        if "mean score" in row:
            groups.setdefault(row.get("scores", "scores"), []).append(row)
    eces = {row.get("scores", "scores"): row.get("ECE") for row in record["rows"] if row.get("ECE") is not None}
    for label, rows in groups.items():
        rows = sorted(rows, key=lambda r: r["mean score"])
        ece = f", ECE {eces[label]:.3f}" if label in eces else ""
        axis.plot([r["mean score"] for r in rows], [r["accuracy"] for r in rows], "o-", label=f"{label}{ece}")
    axis.set_xlim(0, 1)
    axis.set_ylim(0, 1)
    axis.set_xlabel("mean entity score in the bin")
    axis.set_ylabel("fraction exactly right")
    axis.legend(fontsize=7, loc="upper left")
    setup = record.get("setup") or {}
    caption = (f"Reliability diagram of the entity scores ({setup.get('head', 'NER')} head; "
               f"{_run_line(record)}): per score bin, the share of predicted entities that are exactly right "
               "against their mean score.")
    return _png(figure), caption


PLOTS = {"serving_latency": plot_serving, "heads_f1_time": plot_heads, "reliability": plot_reliability}


def plots(records):
    """``{name: (png bytes, caption)}`` of the plots the records allow (needs matplotlib)."""
    found = {}
    for name, draw in PLOTS.items():
        drawn = draw(records)
        if drawn is not None:
            found[name] = drawn
    return found


def plot_markdown(name, caption, prefix=""):
    """The figure of plot ``name`` (``prefix``: the way from the page to the site's root)."""
    alt = re.sub(r"<[^>]+>", "", caption)
    return (f'<figure markdown="span">\n  ![{fmt(alt)}]({prefix}{PLOT_DIR}/{name}.png)\n'
            f"  <figcaption>{caption}</figcaption>\n</figure>\n")


# --- the bench sections ----------------------------------------------------------------------


def _ordered_parts(bench, parts):
    """The bench's main part (or the unnamed one) first, then the others, newest first."""
    newest = {p: max(str(r.get("date", "")) for _, r in parts[p]) for p in parts}
    main = MAIN_PART.get(bench, "")
    rest = sorted((p for p in parts if p != main), key=lambda p: (newest[p], p), reverse=True)
    return ([main] if main in parts else []) + rest


def bench_lines(bench, parts, section, heading, bench_dir):
    """The Markdown of one bench: heading, what it measures, and each part's tables."""
    title = section.get("title") or bench
    out = [f"{heading} {title} {{#{bench}}}", ""]
    about = section.get("about") or describe(bench, bench_dir)
    if about:
        out += [about, ""]
    first = section.get("columns") or ()
    for part in _ordered_parts(bench, parts):
        runs = sorted(parts[part], key=lambda item: (str(item[1].get("date", "")), item[0].name))
        path, newest = runs[-1]
        if part:
            out += [f"{heading}# {part} {{#{bench}-{_slug(part)}}}", ""]
        out += setup_lines(newest) + [""]
        out += summary_lines(newest)
        out += record_table(newest, first=first) + [""]
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
                out += record_table(old, indent="    ", first=first) + [""]
    return out


def _slug(text):
    return "".join(c if c.isalnum() else "-" for c in text.lower()).strip("-").replace("--", "-")


def render(results=RESULTS, bench_dir=BENCH, heading="##", only=None, summary=None):
    """The Markdown of every bench's tables, in the groups of ``bench/summary.toml`` (``only``:
    just these benches, in this order). ``summary``: the parsed ``bench/summary.toml`` (default:
    read it). The summary table is :func:`summary_table`, the plots :func:`plots`."""
    summary = load_summary() if summary is None else summary
    records = load_records(results)
    groups = {}
    for path, record in records:
        if only is None or record["bench"] in only:
            groups.setdefault(record["bench"], {}).setdefault(record.get("part") or "", []).append((path, record))
    sections = summary.get("section") or {}
    out = []
    if only is not None:
        for bench in [b for b in only if b in groups]:
            out += bench_lines(bench, groups[bench], sections.get(bench, {}), heading, bench_dir)
        return "\n".join(out).rstrip() + "\n"
    shown = set()
    page_groups = [(g["title"], [b for b in g["benches"] if b in groups]) for g in summary.get("group") or []]
    listed = {b for _, benches in page_groups for b in benches}
    page_groups.append(("Other benchmarks", sorted(b for b in groups if b not in listed)))
    for title, benches in page_groups:
        if not benches:
            continue
        out += [f"{heading} {title}", ""]
        for bench in benches:
            if bench not in shown:
                shown.add(bench)
                out += bench_lines(bench, groups[bench], sections.get(bench, {}), heading + "#", bench_dir)
    return "\n".join(out).rstrip() + "\n"


if __name__ == "__main__":
    sys.stdout.write(summary_table(load_summary(), load_records()) + "\n" + render())
