"""The Benchmarks pages, generated from the JSON records under ``bench/results/``.

Each benchmark run writes one record (``bench/common.py``: ``write_result``) to
``bench/results/<bench>/<date>-<name>.json``: the bench, the date, the command, the CPU (model,
vector / bfloat16 flags, cores), the versions, a ``setup`` dict and ``rows`` (a list of dicts,
one per system measured in that run, the peer included). Optional keys: ``part`` (a bench that
measures several things, e.g. one dataset each, keeps one newest record per part; rows that all
carry the same ``"part"`` value make their record that part), ``columns`` (the row keys to show, in
order), ``figures`` (``[[path, caption], ...]``, paths from the repository root), ``source``,
``date_note``, ``summary`` (a dict of headline figures, shown as a two-column table above the rows)
and ``notes`` (a list of lines shown below the setup).

**The summary** (``docs/benchmarks.md``, ``<!-- kerasbert:bench-summary -->``) is one table of
claims, ``[[summary]]`` in ``bench/summary.toml``. Which record a claim is read from is not chosen
by hand: :func:`select` applies the one rule, :func:`is_default_run` and :func:`machine_class`
say what it rests on. *A claim is read from the newest default run of its bench (and part) that
has the claim's row: of each machine class for a speed claim, of any machine for an accuracy
claim* (accuracy does not depend on the CPU). A default run is one of the bench's own settings:
not a variant (rows that name their ``options``, a part named with options in parentheses, a run
of older code, or a command with one of the claim's ``variant`` words). The machine class is the
GPU for a GPU run, else the CPU's class from the record's flags (``AMX``, ``AVX-512 + bf16``,
``AVX-512``, ``AVX2 only``) and its cores. The peer is the peer's row of the same record, or the
cell says that run had none (or that the record's peer ran apart, ``peer_note``); a claim with a
target says whether the figure met it.

**The full records** go on the pages of ``[[group]]`` (``docs/benchmarks/*.md``,
``<!-- kerasbert:bench-page -->``): each bench under its heading in words, for each part the
newest record as a table with one sentence saying what it measures (``[section.<bench>]``:
``about``, ``parts``), only the columns a reader needs (``columns``; the record keeps the rest),
its setup in a few lines, and the older records of the same bench and part folded below it. A
value the same in every row is said once above the table. Zeros that are zero by design are
explained under their table (``zeros``). A bench that no group names is shown under "Other
benchmarks" on the summary page, so a new benchmark needs no change here.

**One unit for F1.** Precision, recall and F1 are shown in percent everywhere: a record that
keeps them as fractions (every F1-like figure of it within 0 to 1, :func:`fraction_record`) is
shown times 100 (:func:`shown_value`).

The ``[[target]]`` items of the same file are targets checked against the records
(:func:`targets_table`), for the pages that say which targets hold.

The site's build runs this through ``docs/hooks.py``; ``python docs/gen_bench.py`` prints the
summary.
"""

import ast
import fnmatch
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
#: A column of precision, recall or F1 (shown in percent): "F1", "test P", "dev_f1", "nested R at it", ...
F1_COLUMN = re.compile(r"(?i)(?:^|[\s_(])(?:f1|p|r|precision|recall)(?=$|[\s_)])")
#: A text cell of fractions ("0.5557-0.6160", "0.41 / 0.32"), shown in percent in a percent column.
FRACTIONS = re.compile(r"^\s*(?:0|1)\.\d+(?:\s*(?:-|/|,)\s*(?:0|1)\.\d+)*\s*$")
#: What a command says of a run of other code than the checkout's (not a default run).
OTHER_CODE = ("worktree of commit",)


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


# --- one unit for F1 ---------------------------------------------------------------------------


def is_f1_column(name, extra=()):
    """Whether a column holds precision, recall or F1 (or is named in ``extra``, e.g. the curves of
    a strategy)."""
    return name in extra or bool(F1_COLUMN.search(str(name)))


def _numbers(value):
    if is_number(value):
        yield value
    elif isinstance(value, list):
        for item in value:
            yield from _numbers(item)


def fraction_record(record, extra=()):
    """Whether a record keeps precision, recall and F1 as fractions: it has such a figure, and
    every one of them is within 0 to 1 (a record in percent has F1s above 1)."""
    found = [n for row in record.get("rows") or [] for key, value in row.items()
             if is_f1_column(key, extra) for n in _numbers(value)]
    return bool(found) and all(0 <= n <= 1 for n in found)


def percent(value):
    """A fraction (or a list of them, or a text of them such as ``"0.5557-0.6160"``) in percent."""
    if is_number(value):
        return round(value * 100, 2)
    if isinstance(value, list):
        return [percent(v) for v in value]
    if isinstance(value, str) and FRACTIONS.match(value):
        return re.sub(r"[01]\.\d+", lambda m: fmt(round(float(m.group(0)) * 100, 2)), value)
    return value


def shown_value(record, column, value, extra=()):
    """``value`` as the pages show it: in percent when it is an F1-like figure of a record of
    fractions, else as the record has it."""
    if is_f1_column(column, extra) and fraction_record(record, extra):
        return percent(value)
    return value


# --- machine classes and the default runs ------------------------------------------------------


def gpu_of(record):
    """The GPU a record measured on (its rows' or setup's ``device``, or a ``GPU: ...`` machine),
    or ``None`` for a CPU run."""
    setup = record.get("setup") or {}
    devices = [row.get("device") for row in record.get("rows") or []] + [setup.get("device")]
    for device in devices:
        if isinstance(device, str) and device and device.lower() != "cpu":
            return device
    model = str((record.get("cpu") or {}).get("model") or "")
    if model.lower().startswith("gpu"):
        return re.sub(r"\s*\(.*\)$", "", model.split(":", 1)[-1]).strip().removeprefix("one ")
    return None


def cpu_class(record):
    """The CPU's class from the record's flags: ``AMX``, ``AVX-512 + bf16``, ``AVX-512``,
    ``AVX2 only``, ``no AVX2`` (or ``flags not recorded``); a run capped to a lower instruction
    set (``bench --cpu-cap``) is its own class, named with the CPU it ran on: ``AVX2 only (capped,
    on AVX-512 + bf16)``."""
    cpu = record.get("cpu") or {}
    flags = cpu.get("flags")
    if flags is None:
        return "flags not recorded"
    flags = set(flags)
    word = "no AVX2"
    for flag, name in (("amx_bf16", "AMX"), ("avx512_bf16", "AVX-512 + bf16"), ("avx512f", "AVX-512"),
                       ("avx2", "AVX2 only")):
        if flag in flags:
            word = name
            break
    if cpu.get("cap") == "avx2":
        return f"AVX2 only (capped, on {word})"
    if cpu.get("cap"):
        raise ValueError(f"a record of {record.get('bench')} names an instruction-set cap this page does not know: "
                         f"{cpu['cap']!r}")
    return word


def machine_class(record):
    """What a speed figure depends on: ``GPU NAME``, or the CPU's class and its cores
    (``AMX, 2 cores``)."""
    gpu = gpu_of(record)
    if gpu:
        return f"GPU {gpu}"
    cores = (record.get("cpu") or {}).get("cores")
    return cpu_class(record) + (f", {cores} cores" if cores else "")


def is_default_run(record, variant=()):
    """Whether a record is a run of its bench's own settings: no row names its ``options``, its part
    is not named with options in parentheses, it ran the checkout's code (no ``code`` in its setup,
    no worktree of another commit in its command), and its command has none of the ``variant``
    words (e.g. ``--seed``)."""
    rows = record.get("rows") or []
    command = str(record.get("command") or "")
    return not (any(row.get("options") for row in rows)
                or "(--" in str(record.get("part") or "")
                or "code" in (record.get("setup") or {})
                or any(word in command for word in OTHER_CODE + tuple(variant)))


def record_key(path):
    """The records' order in time: the date their file name starts with, then the name."""
    return Path(path).name


def row_matches(row, spec):
    """Whether a row has every ``key = value`` of ``spec`` (a text value may end in ``*``: a prefix)."""
    for key, want in spec.items():
        have = row.get(key)
        if isinstance(want, str) and want.endswith("*"):
            if not (isinstance(have, str) and fnmatch.fnmatchcase(have, want)):
                return False
        elif have != want:
            return False
    return True


def _rows(record, specs):
    specs = specs if isinstance(specs, list) else [specs]
    return [row for row in record.get("rows") or [] if any(row_matches(row, spec) for spec in specs)]


def _field(row, item):
    """The name of the claim's figure in this row (``field``, or one of its ``aliases``)."""
    for name in [item["field"]] + list(item.get("aliases") or ()):
        if is_number(row.get(name)):
            return name
    return None


def ours_row(record, item):
    """The row of ours a claim reads: the one row its ``ours`` names, or with ``best`` (``lowest``
    or ``highest``) the best of the rows it names; ``None`` if the record has none."""
    rows = [row for row in _rows(record, item["ours"]) if _field(row, item)]
    if not rows:
        return None
    if item.get("best"):
        pick = min if item["best"] == "lowest" else max
        return pick(rows, key=lambda row: row[_field(row, item)])
    if len(rows) != 1:
        raise ValueError(f"bench/summary.toml: claim {item['claim']!r}: {item['ours']} matches {len(rows)} rows, not 1")
    return rows[0]


def candidates(records, item):
    """The records a claim may be read from, ``[(path, record)]``: its bench (and parts), default
    runs, with its row of ours."""
    parts = item.get("parts", [item.get("part", "")])
    found = []
    for path, record in records:
        if record["bench"] != item["bench"] or (record.get("part") or "") not in parts:
            continue
        if is_default_run(record, item.get("variant", ())) and ours_row(record, item) is not None:
            found.append((path, record))
    return found


def select(records, item):
    """The rule, applied: ``[(machine class, path, record)]``, the newest candidate
    (:func:`candidates`) of each machine class for a speed claim (``per_class = true``), or the
    newest of all for an accuracy claim."""
    newest = {}
    for path, record in sorted(candidates(records, item), key=lambda found: record_key(found[0])):
        newest[machine_class(record) if item.get("per_class") else ""] = (path, record)
    return sorted(((machine_class(record), path, record) for path, record in newest.values()),
                  key=lambda found: (found[0] != item.get("first_class"), found[0]))


# --- the summary -------------------------------------------------------------------------------


def _figure(record, row, column, extra=()):
    """``(text, value shown)`` of one figure of a row, in the pages' units."""
    value = shown_value(record, column, row[column], extra)
    return fmt(value), value


def compare(ours, peer, how):
    """``ours`` against ``peer`` in words: ``"difference"`` (+1.49 points), ``"higher"`` (more is
    better: 5.61x the peer's) or ``"lower"`` (a time: 1.05x faster, 1.72x slower)."""
    if how == "difference":
        return f"{ours - peer:+.2f} points"
    if how == "difference-fraction":
        return f"{ours - peer:+.4f}"
    if how == "higher":
        return f"{ours / peer:.2f}x the peer's"
    return f"{peer / ours:.2f}x faster" if ours <= peer else f"{ours / peer:.2f}x slower"


def export_words(row):
    """What a row of ours is, in the words of its options (an export's precision and compile, or
    the system the record names)."""
    if row.get("export") == "onnx":  # export --format onnx, run by ONNX Runtime (predict --engine onnx)
        precision = row.get("precision", "float32")
        words = "export --format onnx" + (f" --precision {precision}" if precision != "float32" else "")
        f1, reference = row.get("test_f1"), (row.get("agreement") or {}).get("float32_test_f1")
        if precision != "float32" and f1 is not None and reference is not None:  # answers change: F1 beside
            return f"{words} (ONNX Runtime; test F1 {100 * f1:.2f}, float32's {100 * reference:.2f})"
        return f"{words} (ONNX Runtime)"
    if "precision" in row and "jit_compile" in row:
        words = []
        if row["precision"] != "float32":
            words.append(f"--precision {row['precision']}")
        if row["jit_compile"] is True:
            words.append("--jit-compile")
        elif row["jit_compile"]:
            words.append(f"--jit-compile {row['jit_compile']}")
        return "export " + " ".join(words) if words else "float32 export"
    name = str(row.get("system") or row.get("name") or row.get("head") or "")
    if name == "kerasbert export, 6 layers":  # the float32 export, as the older records name it
        return "float32 export"
    return re.sub(r"^kerasbert export\b,?\s*", "export ", name).strip()


def claim_rows(summary, records):
    """The summary's rows, each a dict: the claim's words, the record it is read from (``path``,
    ``record``, ``machine``), ``ours`` and ``peer`` (their cells), ``figures`` (every figure the
    row shows, ``(text, column, row index)`` of the record, for the test that holds the summary to
    the records) and ``versus``."""
    out = []
    for item in summary.get("summary") or []:
        picks = select(records, item)
        if not picks:
            raise ValueError(f"bench/summary.toml: claim {item['claim']!r}: no default run of {item['bench']} "
                             f"has the row {item['ours']}")
        for machine, path, record in picks:
            extra = tuple(item.get("percent", ()))
            rows = record.get("rows") or []
            ours = ours_row(record, item)
            figures, ours_cells = [], []
            fields = [_field(ours, item)] + list(item.get("also") or ())
            labels = item.get("labels") or {}
            for column in fields:
                text, _ = _figure(record, ours, column, extra)
                figures.append((text, column, rows.index(ours)))
                ours_cells.append(text if column == fields[0] else f"{labels.get(column, column)} {text}")
            peer_cell, versus = "", ""
            peer_rows = _rows(record, item["peer"]) if item.get("peer") else []
            if len(peer_rows) > 1:
                raise ValueError(f"bench/summary.toml: claim {item['claim']!r}: the peer matches {len(peer_rows)} rows")
            if peer_rows:
                peer = peer_rows[0]
                cells = []
                peer_fields = [item.get("peer_field") or _field(peer, item)] + fields[1:]
                for column in peer_fields:
                    if column not in peer:
                        continue
                    text, _ = _figure(record, peer, column, extra)
                    figures.append((text, column, rows.index(peer)))
                    by_design = (item.get("peer_zero") or {}).get(column) if peer[column] == 0 else None
                    cells.append((text if column == peer_fields[0] else f"{labels.get(column, column)} {text}")
                                 + (f" ({by_design})" if by_design else ""))
                note = item.get("peer_note")
                note = note.get(record.get("part") or "") if isinstance(note, dict) else note
                peer_cell = " · ".join(cells) + f"<br><small>{item.get('peer_name', '')}"
                peer_cell += f"; not the same run: {note}</small>" if note else ", same run</small>"
                if item.get("compare"):
                    a = shown_value(record, fields[0], ours[fields[0]], extra)
                    b = shown_value(record, peer_fields[0], peer[peer_fields[0]], extra)
                    versus = compare(a, b, item["compare"])
            else:
                peer_cell = f"<small>{item.get('peer_none', 'no peer in this run')}</small>"
            if "target" in item:
                column = item.get("target_field") or fields[0]
                value = shown_value(record, column, ours[column], extra)
                met = value >= item["target"]
                versus = (versus + "<br>" if versus else "") + (
                    f"target {labels.get(column, column)} ≥ {fmt(item['target'])}: " + ("met" if met else "**missed**"))
            name = item.get("ours_name") or f"<code>{export_words(ours)}</code>"
            out.append({"item": item, "path": path, "record": record, "machine": machine, "figures": figures,
                        "ours": " · ".join(ours_cells) + f"<br><small>{name}</small>", "peer": peer_cell,
                        "versus": versus})
    return out


def summary_table(summary, records, prefix=""):
    """The Markdown table of the claims (:func:`claim_rows`); ``prefix`` leads from the page to
    the site's root (the links to the full tables)."""
    lines = ["| Claim | kerasbert | Peer | kerasbert vs peer | Run |", "|---|---|---|---|---|"]
    for row in claim_rows(summary, records):
        item, record = row["item"], row["record"]
        page = page_of(summary, record["bench"]).removesuffix(".md")
        data = item.get("data")
        data = data.get(record.get("part") or "") if isinstance(data, dict) else data
        words = "; ".join(w for w in (data, item.get("unit")) if w)
        what = f"[{item['claim']}]({prefix}{page}.md#{record['bench']})" + (f"<br><small>{words}</small>" if words else "")
        run = f"<small>{row['machine']}<br>{str(record.get('date', ''))[:10]}</small>"
        ours = row["ours"].replace("**", "")
        first, _, rest = ours.partition("<br>")
        cells = [what, f"**{first}**<br>{rest}" if rest else f"**{first}**", row["peer"], row["versus"], run]
        lines.append("| " + " | ".join(c.replace("|", "&#124;") for c in cells) + " |")
    return "\n".join(lines) + "\n"


# --- the targets table ------------------------------------------------------------------------


def _find_row(record, where, what):
    rows = [r for r in record.get("rows") or [] if row_matches(r, where)]
    if len(rows) != 1:
        raise ValueError(f"bench/summary.toml: {what} {where} matches {len(rows)} rows of its record, not 1")
    return rows[0]


def _bar(record, item, field, by_path=None):
    """``(op, bar, words)`` of a target, in the pages' units: ``at_least`` or ``at_most``, a number
    (in the record's units) or a row (``key = value`` pairs: that row's ``field``) of the same
    record, or of ``bar_record`` when the target names one; ``minus`` (a number, in the record's
    units) is taken off a row's figure ("within 2 points of"), ``plus`` added to it ("3 points
    above")."""
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
        figure = shown_value(record, field, row[field])
        minus = shown_value(record, field, item.get("minus", 0))
        if minus:
            return op, figure - minus, f"{field} {op} {fmt(figure)} − {fmt(minus)} ({fmt(words)})"
        plus = shown_value(record, field, item.get("plus", 0))
        if plus:
            return op, figure + plus, f"{field} {op} {fmt(figure)} + {fmt(plus)} ({fmt(words)})"
        return op, figure, f"{field} {op} {fmt(figure)} ({fmt(words)})"
    if "minus" in item or "plus" in item or "bar_record" in item:
        raise ValueError(f"bench/summary.toml: target {item.get('target')!r}: minus, plus and bar_record go with a row")
    bar = shown_value(record, field, bar)
    return op, bar, f"{field} {op} {fmt(bar)}"


def targets_table(summary, records):
    """The Markdown table of ``summary["target"]`` items: each target in words, its bar, the
    figure its record's row reached and whether it holds, and the record (its machine, date);
    precision, recall and F1 in percent."""
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
        reached = shown_value(record, field, row[field])
        holds = reached >= bar - 1e-9 if op == "≥" else reached <= bar + 1e-9
        where = (f"`bench/results/{item['record']}`<br><small>{machine_class(record)}; "
                 f"{str(record.get('date', ''))[:10]}</small>")
        cells = [fmt(item.get("target", "")), needs, fmt(reached), "yes" if holds else "**no**", where]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


# --- the record tables -------------------------------------------------------------------------


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


def table(rows, indent="", columns=None, labels=None):
    """A Markdown table of ``rows`` (``columns``: the keys, in order; default: all of them;
    ``labels``: a heading in words for a key)."""
    if not rows:
        return [indent + "*(no rows)*"]
    columns = columns or columns_of(rows)
    labels = labels or {}
    numeric = [all(is_number(r.get(c)) for r in rows if r.get(c) not in (None, "")) for c in columns]
    lines = [
        indent + "| " + " | ".join(fmt(labels.get(c, c)) for c in columns) + " |",
        indent + "|" + "|".join("---:" if n else "---" for n in numeric) + "|",
    ]
    for row in rows:
        lines.append(indent + "| " + " | ".join(fmt(row.get(c)) for c in columns) + " |")
    return lines


def shown_rows(record, extra=()):
    """The record's rows as the pages show them (F1-like figures in percent)."""
    fractions = fraction_record(record, extra)
    return [{key: percent(value) if fractions and is_f1_column(key, extra) else value for key, value in row.items()}
            for row in record.get("rows") or []]


def record_columns(record, section):
    """The columns a table of this record shows: the section's ``columns`` (those the record has;
    the record keeps the rest), else the record's own ``columns`` first and then every other key."""
    rows = record.get("rows") or []
    if section.get("columns"):
        found = columns_of(rows)
        chosen = [c for c in section["columns"] if c in found]
        if chosen:
            return chosen
    return ordered_columns(rows, record.get("columns") or ())


def record_table(record, indent="", section=None):
    """A record's rows as a table: the columns :func:`record_columns` chooses, a value the same in
    every row said once above the table, F1-like figures in percent."""
    section = section or {}
    rows = shown_rows(record, tuple(section.get("percent", ())))
    columns = record_columns(record, section)
    same = constant_columns(rows, columns)
    labels = section.get("labels") or {}
    lines = []
    if same:
        lines += [indent + "- **Every row:** " + "; ".join(f"{fmt(labels.get(c, c))}: {fmt(rows[0][c])}" for c in same), ""]
    return lines + table(rows, indent=indent, columns=[c for c in columns if c not in same], labels=labels)


def zero_cells(record, section=None):
    """``[(row index, column)]`` of the shown cells that are 0 (a table's zeros, which the section
    explains or the test finds)."""
    section = section or {}
    rows = shown_rows(record, tuple(section.get("percent", ())))
    columns = record_columns(record, section)
    return [(i, c) for i, row in enumerate(rows) for c in columns
            if c not in KEY_COLUMNS and is_number(row.get(c)) and row.get(c) == 0]


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
    lines = [f"{indent}- **Run:** {record.get('date', 'undated')}; {machine_class(record)} ({machine(record)})"
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


def figure_lines(record, indent="", prefix=""):
    lines = []
    for item in record.get("figures") or []:
        path, caption = (item, Path(item).stem) if isinstance(item, str) else item
        lines += [f'{indent}<figure markdown="span">', f'{indent}  ![{fmt(caption)}]({prefix}{path}){{ width="520" }}',
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


# --- plots -----------------------------------------------------------------------------------


def _newest(records, bench, test=lambda record: True):
    found = [(p.name, r) for p, r in records if r["bench"] == bench and test(r)]
    return max(found, key=lambda item: item[0])[1] if found else None


def _plot_figure(width=7.5, height=3.4, panels=1, rows=1):
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    figure = Figure(figsize=(width, height), dpi=110)
    FigureCanvasAgg(figure)
    return figure, figure.subplots(rows, panels, squeeze=False)


def _png(figure):
    buffer = io.BytesIO()
    figure.tight_layout()
    figure.savefig(buffer, format="png", metadata={"Software": None})
    return buffer.getvalue()


def _run_line(record):
    return f"{str(record.get('date', ''))[:10]}, {machine_class(record)}"


def serving_runs(records):
    """The newest serving_throughput record of each machine class with the Hugging Face pipeline
    beside our exports (``name`` ``hf``) and every row timed one sentence at a time:
    ``{machine class: record}``."""
    newest = {}
    for path, record in sorted(records, key=lambda found: record_key(found[0])):
        rows = record.get("rows") or []
        if (record["bench"] == "serving_throughput" and any(row.get("name") == "hf" for row in rows)
                and all("p50_ms" in row for row in rows)):
            newest[machine_class(record)] = record
    return newest


def plot_serving(records):
    """Median latency of one sentence and batch-64 throughput of each export against the Hugging
    Face pipeline, one row of panels per machine class (its newest run: :func:`serving_runs`)."""
    runs = serving_runs(records)
    if not runs:
        return None
    figure, axes = _plot_figure(9, 2.9 * len(runs), panels=2, rows=len(runs))
    for (latency, throughput), (label, record) in zip(axes, sorted(runs.items())):
        rows = record["rows"]
        names = ["Hugging Face pipeline" if row["name"] == "hf" else row["name"] for row in rows]
        colors = ["tab:orange" if row["name"] == "hf" else "tab:blue" for row in rows]
        latency.barh(names, [row["p50_ms"] for row in rows], color=colors)
        latency.set_xlabel("median latency, one sentence (ms; lower is better)")
        latency.invert_yaxis()
        latency.set_title(_run_line(record), fontsize=9, loc="left")
        throughput.barh(names, [row.get("batch_64_sent_per_s") or 0 for row in rows], color=colors)
        throughput.set_xlabel("sentences/s in batches of 64 (higher is better)")
        throughput.invert_yaxis()
        throughput.set_yticklabels([])
    caption = ("Serving latency and throughput of each export (blue) against the Hugging Face pipeline (orange), "
               "the newest run of each machine class (" + "; ".join(_run_line(r) for _, r in sorted(runs.items()))
               + "); <code>-bf16</code>: <code>--precision bfloat16</code>, <code>-head-</code>: "
               "<code>--jit-compile head</code>, <code>-jit</code>: <code>--jit-compile</code>, "
               "<code>student</code>: a 3-layer distilled student.")
    return _png(figure), caption


def heads_points(records):
    """part -> head -> (wall seconds of training, test F1 in %, record): the newest row of each NER
    head with its defaults that records its training's wall time (rows of a variant, which name
    their ``options``, are left out)."""
    newest = {}
    for path, record in sorted(records, key=lambda item: record_key(item[0])):
        if record["bench"] != "ner_heads":
            continue
        for row in record.get("rows") or []:
            column = "test F1" if "test F1" in row else "F1"
            f1 = row.get(column)
            if row.get("head") and row.get("train seconds") and f1 is not None and not row.get("options"):
                f1 = shown_value(record, column, f1)
                newest.setdefault(record.get("part") or "", {})[row["head"]] = (row["train seconds"], f1, record)
    return newest


def plot_heads(records):
    """Test F1 against the training run's wall time of each NER head with its defaults, per dataset
    (:func:`heads_points`)."""
    newest = heads_points(records)
    if not newest:
        return None
    parts = sorted(newest)
    figure, axes = _plot_figure(4.2 * len(parts), 3.4, panels=len(parts))
    axes = axes[0]
    names = sorted({head for heads in newest.values() for head in heads})
    colors = {head: f"C{i}" for i, head in enumerate(names)}
    for axis, part in zip(axes, parts):
        for head, (seconds, f1, _) in sorted(newest[part].items()):
            axis.scatter([seconds], [f1], s=40, color=colors[head])
            axis.annotate(head, (seconds, f1), textcoords="offset points", xytext=(5, 4), fontsize=8)
        axis.set_title(part, fontsize=9)
        axis.set_xlabel("wall time of the training run (s)")
        axis.set_ylabel("test F1 (%)")
        axis.margins(0.25)
    runs = sorted({_run_line(r) for heads in newest.values() for _, _, r in heads.values()})
    caption = ("Test F1 (%) against the wall time of the training run, each NER head with its defaults (the newest "
               f"run of each; {'; '.join(runs)}). The wall time is of a run on a shared machine, with other jobs "
               "beside it: not a timing, and the runs did not all train the same number of steps.")
    return _png(figure), caption


def plot_reliability(records):
    """The reliability diagram of the newest entity_calibration record: accuracy against mean
    score per bin, for each set of scores it measured (calibrated, and T = 1)."""
    record = _newest(records, "entity_calibration",
                     lambda r: sum("mean score" in row for row in r.get("rows") or []) >= 3)
    if record is None:
        return None
    figure, axes = _plot_figure(4.6, 4.2)
    axis = axes[0][0]
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


def plot_pretraining(records):
    """The newest chinese_encoder curve (dev F1 by pretraining steps) beside the held-out
    masked-token accuracy by step of the pretraining run it fine-tuned (the newest pretraining
    record up to the curve's date)."""
    curve = _newest(records, "chinese_encoder", lambda r: any("pretraining steps" in row for row in r["rows"]))
    if curve is None:
        return None
    pretraining = _newest(records, "chinese_encoder", lambda r: str(r.get("date")) <= str(curve.get("date")) and any(
        "held-out masked-token accuracy" in row for row in r["rows"]))
    figure, axes = _plot_figure(9, 3.2, panels=2)
    accuracy, f1 = axes[0]
    if pretraining is not None:
        rows = pretraining["rows"]
        accuracy.plot([r["step"] for r in rows], [r["held-out masked-token accuracy"] for r in rows], "o-", ms=3)
    accuracy.set_xlabel("pretraining steps")
    accuracy.set_ylabel("held-out masked-token accuracy (%)")
    rows = sorted(curve["rows"], key=lambda r: r["pretraining steps"])
    f1.plot([r["pretraining steps"] for r in rows], [r["dev F1"] for r in rows], "o-", color="tab:green")
    for anchor in curve.get("anchors") or []:
        f1.axhline(anchor["test F1"], linestyle="--", color="grey", linewidth=0.8)
        f1.annotate(f"{anchor['system']}: {anchor['test F1']:g} (test)", (0, anchor["test F1"]), fontsize=7,
                    textcoords="offset points", xytext=(2, -9))
    f1.set_xlabel("pretraining steps")
    f1.set_ylabel(f"{str(curve.get('part') or rows[0].get('part') or '').split(' by ')[0]} dev F1 (%)".strip())
    caption = (f"Left: the held-out masked-token accuracy of the Chinese encoder by pretraining step; right: "
               f"CLUENER2020 dev F1 fine-tuned on the encoders one run kept, step 0 the random start ({_run_line(curve)}"
               "). Dashed: published test-set figures of other setups, for scale.")
    return _png(figure), caption


PLOTS = {"serving_latency": plot_serving, "heads_f1_time": plot_heads, "reliability": plot_reliability,
         "pretraining_curve": plot_pretraining}


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


# --- the advice of the guides: which export, which precision, per machine class ---------------


def serving_choice(records):
    """Per machine class, from its newest serving_throughput run with the Hugging Face pipeline
    (:func:`serving_runs`), and the older published runs of classes that have no such run: the
    export of ours (not a student) with the lowest median latency and the one with the most
    sentences/s in batches of 64, each against the float32 export and the pipeline of the same run.
    ``[(machine class, path, record, {"latency": (row, float32 row, peer row), "batches": ...})]``."""
    newest = {}
    for path, record in sorted(records, key=lambda found: record_key(found[0])):
        if record["bench"] != "serving_throughput":
            continue
        rows = record.get("rows") or []
        ours = [r for r in rows if str(r.get("name") or r.get("system") or "").startswith("kerasbert")
                and "Keras layers" not in str(r.get("system"))]
        peer = [r for r in rows if r.get("name") == "hf" or str(r.get("system", "")).startswith("HF pipeline")]
        if ours and len(peer) == 1 and not any(r.get("run") for r in rows):
            newest[machine_class(record)] = (path, record, ours, peer[0])
    out = []
    for label, (path, record, ours, peer) in sorted(newest.items()):
        def value(row, *names):
            return next((row[n] for n in names if is_number(row.get(n))), None)

        float32 = next((r for r in ours if r.get("name") == "kerasbert" or r.get("system") == "kerasbert export, 6 layers"),
                       None)
        picks = {}
        for what, names, best in (("latency", ("p50_ms", "p50 ms"), min), ("batches", ("batch_64_sent_per_s", "batch 64 sent/s"), max)):
            timed = [r for r in ours if value(r, *names) is not None]
            row = best(timed, key=lambda r: value(r, *names))
            picks[what] = (row, float32, peer, names)
        out.append((label, path, record, picks))
    return out


def serving_choice_table(records):
    """The Markdown table of :func:`serving_choice`: per machine class, the export to serve one
    request at a time and the one for batches, with their figures and the run's date."""
    lines = ["| CPU class | one request at a time (median latency) | batches of 64 (sentences/s) | run |",
             "|---|---|---|---|"]
    for label, path, record, picks in serving_choice(records):
        cells = []
        for what in ("latency", "batches"):
            row, float32, peer, names = picks[what]
            name = next(n for n in names if is_number(row.get(n)))
            unit = " ms" if what == "latency" else ""
            text = f"**{export_words(row)}**: {fmt(row[name])}{unit}"
            if float32 is not None and float32 is not row:
                text += f"; float32 export {fmt(float32[name])}{unit}"
            peer_name = next((n for n in names if is_number(peer.get(n))), None)
            if peer_name:
                text += f"; Hugging Face pipeline {fmt(peer[peer_name])}{unit}"
            cells.append(text)
        model = str((record.get("setup") or {}).get("model") or (record.get("setup") or {}).get("models") or "")
        note = " (untrained head: speed only)" if "untrained" in model else ""
        cells.append(f"{str(record.get('date', ''))[:10]}{note}, `{shown_path(path)}`")
        lines.append(f"| {label} | " + " | ".join(c.replace("|", "&#124;") for c in cells) + " |")
    measured = {label for label, _, _, _ in serving_choice(records)}
    for label in cpu_classes(records) - measured:
        lines.append(f"| {label} | no serving record on this class yet | no serving record on this class yet | |")
    return "\n".join(lines) + "\n"


def training_choice(records):
    """Per machine class, the newest training-speed run of ``ner_conll2003`` (any part) and of
    ``training_profile``: ``[(machine class, bench, path, record)]``."""
    newest = {}
    for path, record in sorted(records, key=lambda found: record_key(found[0])):
        if record["bench"] in ("ner_conll2003", "training_profile") and is_default_run(record):
            rows = record.get("rows") or []
            if any("train tokens/s" in r or "tokens_per_s" in r for r in rows):
                newest[(machine_class(record), record["bench"])] = (path, record)
    return [(label, bench, path, record) for (label, bench), (path, record) in sorted(newest.items())]


def training_choice_table(records):
    """The Markdown table of :func:`training_choice`: per machine class, training tokens/s in
    float32, in mixed_bfloat16 and with ``--precision auto`` (what it chose there), and the Hugging
    Face recipe's, where the run had them."""
    lines = ["| CPU class | float32 | mixed_bfloat16 | `--precision auto` | Hugging Face recipe | what ran | run |",
             "|---|---:|---:|---:|---:|---|---|"]
    for label, bench, path, record in training_choice(records):
        rows = record["rows"]
        auto = None
        if bench == "ner_conll2003":
            by = {r.get("id") or ("hf" if str(r.get("system", "")).startswith("HF") else "ours"): r for r in rows}
            f32, bf16, hf = (by.get(k, {}).get("train tokens/s") for k in ("ours", "ours_bf16", "hf"))
            if is_number(by.get("ours_auto", {}).get("train tokens/s")):
                auto = f"{fmt(by['ours_auto']['train tokens/s'])} ({by['ours_auto'].get('trained in')})"
            what = "train tokens/s, end to end (`ner_conll2003`" + (f", {record['part']}" if record.get("part") else "") + ")"
            if record.get("part") == "CoNLL-2003":
                what += "; the two systems ran on different days"
        else:
            peer = [r for r in rows if str(r.get("system", "")).startswith("Hugging Face")]
            by = {r.get("precision"): r for r in rows if r not in peer}
            f32, bf16 = (by.get(k, {}).get("tokens_per_s") for k in ("float32", "mixed_bfloat16"))
            hf = peer[0].get("tokens_per_s") if peer else None
            what = "tokens/s of one profiled step, batch 32 x 128 (`training_profile`)"
        cells = [fmt(v) if v is not None else "not measured" for v in (f32, bf16)] + [auto or "not measured"]
        cells.append(fmt(hf) if hf is not None else "not measured")
        lines.append(f"| {label} | " + " | ".join(cells) + f" | {what} | {str(record.get('date', ''))[:10]}, "
                     f"`{shown_path(path)}` |")
    measured = {label for label, _, _, _ in training_choice(records)}
    for label in cpu_classes(records) - measured:
        lines.append(f"| {label} | no record | no record | no record | no record | no training-speed run on this class yet | |")
    return "\n".join(lines) + "\n"


def cpu_classes(records):
    """The machine classes of every CPU run on record (GPU runs aside)."""
    return {machine_class(record) for _, record in records if not gpu_of(record) and (record.get("cpu") or {}).get("flags")}


# --- the bench sections ----------------------------------------------------------------------


def _ordered_parts(bench, parts):
    """The bench's main part (or the unnamed one) first, then the others, newest first."""
    newest = {p: max(record_key(path) for path, _ in parts[p]) for p in parts}
    main = MAIN_PART.get(bench, "")
    rest = sorted((p for p in parts if p != main), key=lambda p: (newest[p], p), reverse=True)
    return ([main] if main in parts else []) + rest


def zero_note(record, section):
    """The section's words for the zeros of this record's table (``zeros``: column -> why), or ``""``."""
    columns = sorted({column for _, column in zero_cells(record, section)})
    why = section.get("zeros") or {}
    said = [f"{column}: {why[column]}" for column in columns if column in why]
    return ("**A 0 in this table:** " + "; ".join(said) + ".") if said else ""


def bench_lines(bench, parts, section, heading, bench_dir, prefix=""):
    """The Markdown of one bench: heading, what it measures, and each part's tables."""
    title = section.get("title") or bench
    out = [f"{heading} {title} {{#{bench}}}", ""]
    about = section.get("about") or describe(bench, bench_dir)
    if about:
        out += [about, ""]
    for part in _ordered_parts(bench, parts):
        runs = sorted(parts[part], key=lambda item: record_key(item[0]))
        path, newest = runs[-1]
        if part:
            out += [f"{heading}# {part} {{#{bench}-{_slug(part)}}}", ""]
        sentence = (section.get("parts") or {}).get(part)
        if sentence:
            out += [sentence, ""]
        merged = newest_rows(runs, section)
        if merged:
            out += merged + [""]
            out += [f'??? note "Every run ({len(runs)})"', ""]
            for old_path, old in reversed(runs):
                out += [f"    **{old.get('date', 'undated')}**, `{shown_path(old_path)}`", ""]
                out += setup_lines(old, indent="    ") + [""]
                out += record_table(old, indent="    ", section=section) + [""]
            continue
        out += setup_lines(newest) + [""]
        out += summary_lines(newest)
        out += record_table(newest, section=section) + [""]
        note = zero_note(newest, section)
        if note:
            out += [note, ""]
        out += figure_lines(newest, prefix=prefix)
        out.append(f"<small>Record: `{shown_path(path)}`</small>")
        out.append("")
        older = runs[:-1]
        if older:
            out += [f'??? note "Older runs ({len(older)})"', ""]
            for old_path, old in reversed(older):
                out += [f"    **{old.get('date', 'undated')}**, `{shown_path(old_path)}`", ""]
                out += setup_lines(old, indent="    ") + [""]
                out += summary_lines(old, indent="    ")
                out += record_table(old, indent="    ", section=section) + [""]
                note = zero_note(old, section)
                if note:
                    out += ["    " + note, ""]
    return out


def newest_rows(runs, section):
    """With a section's ``newest_row_by`` (e.g. ``head``) and several runs of a part: one table of
    the newest default run's row of each value of that key (each row naming its run), and the runs
    it was read from; else ``[]``."""
    key = section.get("newest_row_by")
    if not key or len(runs) < 2:
        return []
    rows, used = {}, {}
    for path, record in runs:
        if not is_default_run(record):
            continue
        for row in shown_rows(record):
            if re.fullmatch(r"[\w-]+", str(row.get(key, ""))):  # a name (not "crf, temperature fitted ...")
                rows[row[key]] = dict(row, run=f"{str(record.get('date', ''))[:16]}")
                used[row[key]] = (path, record)
    if not rows:
        return []
    merged = {"rows": list(rows.values())}
    columns = [c for c in record_columns(merged, section) if c != "run"]
    lines = ["The newest default run of each " + key + ", each row from its run:", ""]
    for path, record in sorted({p: r for p, r in used.values()}.items(), key=lambda item: record_key(item[0])):
        lines.append(f"- **Run** `{shown_path(path)}`: {record.get('date', 'undated')}; {machine_class(record)} "
                     f"({machine(record)}); `{record.get('command', '')}`")
    return lines + [""] + table(merged["rows"], columns=columns + ["run"], labels=section.get("labels"))


def _slug(text):
    return "".join(c if c.isalnum() else "-" for c in text.lower()).strip("-").replace("--", "-")


def _groups(records, only):
    groups = {}
    for path, record in records:
        if only is None or record["bench"] in only:
            groups.setdefault(record["bench"], {}).setdefault(record.get("part") or "", []).append((path, record))
    return groups


def render(results=RESULTS, bench_dir=BENCH, heading="##", only=None, summary=None, prefix=""):
    """The Markdown of the benches' tables. ``only``: just these benches, in this order; else every
    bench, in the groups of ``bench/summary.toml`` (under their titles), then those of no group
    under "Other benchmarks". ``summary``: the parsed ``bench/summary.toml`` (default: read it).
    ``prefix``: the way from the page to the site's root (for a record's figures)."""
    summary = load_summary() if summary is None else summary
    groups = _groups(load_records(results), only)
    sections = summary.get("section") or {}
    out = []
    if only is not None:
        for bench in [b for b in only if b in groups]:
            out += bench_lines(bench, groups[bench], sections.get(bench, {}), heading, bench_dir, prefix)
        return "\n".join(out).rstrip() + "\n"
    page_groups = [(g["title"], [b for b in g["benches"] if b in groups]) for g in summary.get("group") or []]
    listed = {b for _, benches in page_groups for b in benches}
    page_groups.append(("Other benchmarks", sorted(b for b in groups if b not in listed)))
    for title, benches in page_groups:
        if not benches:
            continue
        out += [f"{heading} {title}", ""]
        for bench in benches:
            out += bench_lines(bench, groups[bench], sections.get(bench, {}), heading + "#", bench_dir, prefix)
    return "\n".join(out).rstrip() + "\n"


def page_of(summary, bench):
    """The page (under ``docs/``) of a bench's full records: its ``[[group]]``'s, else the summary's."""
    return next((g["page"] for g in summary.get("group") or [] if bench in g["benches"] and g.get("page")),
                "benchmarks.md")


def page_benches(summary, page):
    """The benches the ``[[group]]`` items put on ``page`` (a path under ``docs/``), in order."""
    return [bench for group in summary.get("group") or [] if group.get("page") == page for bench in group["benches"]]


def unlisted_benches(summary, records):
    """The benches of the records that no ``[[group]]`` puts on a page."""
    listed = {bench for group in summary.get("group") or [] for bench in group["benches"]}
    return sorted({record["bench"] for _, record in records} - listed)


def demo_sentence(records):
    """One sentence of the newest ``demo`` record: its wall time, test F1 (in %), machine and date."""
    found = sorted(((path, record) for path, record in records if record["bench"] == "demo"),
                   key=lambda item: record_key(item[0]))
    if not found:
        return "*(no record of the demo yet)*"
    path, record = found[-1]
    row = record["rows"][0]
    f1 = fmt(shown_value(record, "test F1", row["test F1"]))
    return (f"Measured: {fmt(row['wall time s'])} s from start to end (wall time) and test F1 {f1} % on the sample "
            f"test split, on {(record.get('cpu') or {}).get('model')} ({machine_class(record)}), "
            f"{str(record.get('date', ''))[:10]} (`{shown_path(path)}`).")


if __name__ == "__main__":
    sys.stdout.write(summary_table(load_summary(), load_records()))
