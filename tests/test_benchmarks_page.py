"""The Benchmarks summary (docs/benchmarks.md) held to the records under bench/results/: every
figure it shows is read from the record on disk, that record is the newest default run of its
machine class (the rule ``docs/gen_bench.py``'s ``select`` applies), the table fits on two
screens, and the pages show F1 in one unit with every zero explained."""

import importlib.util
import json
import re
import shutil

import pytest
from conftest import REPO_ROOT

DOCS = REPO_ROOT / "docs"
RESULTS = REPO_ROOT / "bench" / "results"
#: The summary fits on two screens.
MAX_ROWS = 25


def _gen():
    spec = importlib.util.spec_from_file_location("kerasbert_docs_gen_bench_page", DOCS / "gen_bench.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def problems(gen, summary, results, rows=None):
    """What makes the summary of ``summary`` untrue to the records under ``results``: a figure that
    is not its record's (read again from the file), a record that is not the newest default run of
    its machine class with the claim's row, a comparison not computed from the two figures, a
    number in a figure cell that no record gives, a peer that is neither of the same run nor said
    to be apart. ``rows``: the claims as read before (default: read them now)."""
    records = gen.load_records(results)
    found = []
    table = gen.summary_table(summary, records).splitlines()[2:]
    rows = rows or gen.claim_rows(summary, records)
    assert len(table) == len(rows)
    for row, line in zip(rows, table):
        item, path = row["item"], row["path"]
        where = f"{item['claim']} ({path.name})"
        on_disk = json.loads(path.read_text(encoding="utf-8"))
        loaded = dict(on_disk, rows=row["record"]["rows"])  # a record whose rows name their part loses the column
        for text, column, index in row["figures"]:
            value = on_disk["rows"][index][column]
            if text != gen.fmt(gen.shown_value(loaded, column, value, tuple(item.get("percent", ())))):
                found.append(f"{where}: {text} is not the record's {column} ({value})")
        # the rule: no default run of the same bench, parts and class with the row is newer
        for other_path, other in records:
            if (other["bench"] == item["bench"] and (other.get("part") or "") in item.get("parts", [item.get("part", "")])
                    and (not item.get("per_class") or gen.machine_class(other) == row["machine"])
                    and gen.is_default_run(other, item.get("variant", ()))
                    and gen.ours_row(other, item) is not None
                    and gen.record_key(other_path) > gen.record_key(path)):
                found.append(f"{where}: {other_path.name} is newer, of the same class")
        cells = [cell.strip() for cell in line.strip("|").split(" | ")]
        shown = {text for text, _, _ in row["figures"]}
        for cell in cells[1:3]:
            bare = re.sub(r"<small>.*?</small>|\(.*?\)", "", cell)  # names and by-design words aside
            for column in item.get("also") or ():
                bare = bare.replace((item.get("labels") or {}).get(column, column), "")
            for number in re.findall(r"\d[\d,]*(?:\.\d+)?", bare):
                if number not in shown:
                    found.append(f"{where}: {number} in {cell!r} is no figure of the record")
        if item.get("peer") and "same run" not in cells[2] and "not the same run" not in cells[2]:
            found.append(f"{where}: the peer says neither 'same run' nor why not")
        if item.get("compare") and row["versus"] and len(row["figures"]) > 1 + len(item.get("also") or ()):
            ours, peer = row["figures"][0], row["figures"][1 + len(item.get("also") or ())]
            values = [gen.shown_value(loaded, column, on_disk["rows"][index][column], tuple(item.get("percent", ())))
                      for _, column, index in (ours, peer)]
            if gen.compare(values[0], values[1], item["compare"]) not in row["versus"]:
                found.append(f"{where}: {row['versus']!r} is not {item['compare']} of {values}")
    return found


def test_the_summary_is_read_from_the_newest_records():
    gen = _gen()
    summary = gen.load_summary()
    found = problems(gen, summary, RESULTS)
    assert not found, "\n".join(found)
    rows = gen.claim_rows(summary, gen.load_records())
    assert 0 < len(rows) <= MAX_ROWS, f"{len(rows)} rows: the summary is to fit on two screens ({MAX_ROWS} at most)"
    classes = {row["machine"] for row in rows if row["item"].get("per_class")}
    assert {"AMX, 2 cores", "AVX-512 + bf16, 2 cores", "AVX2 only, 2 cores"} <= classes  # each CPU class it has


def test_a_doctored_record_or_a_newer_run_is_caught(tmp_path):
    """The check fails on a figure changed in the record after the table was read, and the rule
    moves to a newer default run of the same class (not to a variant of it)."""
    gen = _gen()
    results = tmp_path / "results"
    shutil.copytree(RESULTS / "serving_throughput", results / "serving_throughput")
    summary = {"summary": [item for item in gen.load_summary()["summary"] if item["bench"] == "serving_throughput"]}
    assert problems(gen, summary, results) == []
    newest = results / "serving_throughput" / "2026-11-26T0732-run.json"
    rows = gen.claim_rows(summary, gen.load_records(results))
    assert any(row["path"].name == newest.name for row in rows)
    # a newer run of the AMX class: the claims move to it
    record = json.loads(newest.read_text(encoding="utf-8"))
    for row in record["rows"]:
        row["p50_ms"] = row["p50_ms"] * 2
    (results / "serving_throughput" / "2026-12-01T0000-run.json").write_text(json.dumps(record), encoding="utf-8")
    moved = gen.claim_rows(summary, gen.load_records(results))
    assert {row["path"].name for row in moved if row["machine"] == "AMX, 2 cores"} == {"2026-12-01T0000-run.json"}
    # ... but not to a variant (a run of older code)
    record["command"] += " (run from a worktree of commit 0000000)"
    (results / "serving_throughput" / "2026-12-02T0000-run.json").write_text(json.dumps(record), encoding="utf-8")
    assert "2026-12-02T0000-run.json" not in {row["path"].name for row in gen.claim_rows(summary, gen.load_records(results))}
    # a figure changed in the file after the table was read: caught
    rows = gen.claim_rows(summary, gen.load_records(results))
    picked = rows[0]["path"]
    data = json.loads(picked.read_text(encoding="utf-8"))
    _, column, index = rows[0]["figures"][0]
    data["rows"][index][column] += 1
    picked.write_text(json.dumps(data), encoding="utf-8")
    assert any("is not the record's" in p for p in problems(gen, summary, results, rows=rows)), "a doctored figure passed"


def test_one_unit_for_f1_on_every_page():
    """F1, precision and recall in percent in every table the pages show: a record's F1-like
    figures, as shown, are all 0 or reach above 1 (a table of fractions would stay within 0 to 1),
    the summary's included."""
    gen = _gen()
    summary = gen.load_summary()
    for path, record in gen.load_records():
        section = (summary.get("section") or {}).get(record["bench"], {})
        extra = tuple(section.get("percent", ()))
        shown = [number for row in gen.shown_rows(record, extra) for column, value in row.items()
                 if gen.is_f1_column(column, extra) for number in gen._numbers(value)]
        assert not shown or max(shown) > 1 or max(shown) == 0, (path.name, shown[:8])
    for row in gen.claim_rows(summary, gen.load_records()):
        for text, column, _ in row["figures"]:
            if gen.is_f1_column(column, tuple(row["item"].get("percent", ()))):
                assert not 0 < float(text.replace(",", "")) < 1, (row["item"]["claim"], column, text)
    assert gen.percent("0.5557-0.6160") == "55.57-61.6" and gen.percent([0.5, 1]) == [50.0, 100]


def test_every_zero_in_a_table_is_explained():
    """A 0 in a table of the pages is a by-design zero its bench's section explains (``zeros``),
    said under the table."""
    gen = _gen()
    summary = gen.load_summary()
    sections = summary.get("section") or {}
    unexplained = []
    for path, record in gen.load_records():
        section = sections.get(record["bench"], {})
        for _, column in gen.zero_cells(record, section):
            if column not in (section.get("zeros") or {}):
                unexplained.append(f"{path.relative_to(RESULTS)}: {column}")
    assert not unexplained, sorted(set(unexplained))
    genia = next(r for p, r in gen.load_records() if p.name == "2026-11-27T1903-genia.json")
    assert "by design" in gen.zero_note(genia, sections["ner_heads"])


def test_the_guides_advice_is_read_from_the_records():
    """The serving guide's choice per CPU class is the export the class's newest run found
    fastest; where bfloat16 lost for batches (a CPU with AVX-512 + bf16), it is not advised."""
    gen = _gen()
    records = gen.load_records()
    table = gen.serving_choice_table(records)
    for label, path, record, picks in gen.serving_choice(records):
        line = next(line for line in table.splitlines() if line.startswith(f"| {label} |"))
        for what, (row, _, _, names) in picks.items():
            assert f"**{gen.export_words(row)}**" in line, (label, what)
        batches = picks["batches"][0]
        name = next(n for n in picks["batches"][3] if isinstance(batches.get(n), (int, float)))
        assert all(batches[name] >= r.get(name, 0) for r in record["rows"]
                   if str(r.get("name") or r.get("system") or "").startswith("kerasbert")
                   and "Keras layers" not in str(r.get("system"))), label
    avx512 = next(picks for label, _, _, picks in gen.serving_choice(records) if label.startswith("AVX-512 + bf16"))
    assert "bfloat16" not in gen.export_words(avx512["batches"][0])
    page = (DOCS / "serving-speed.md").read_text(encoding="utf-8")
    assert "<!-- kerasbert:serving-choice -->" in page
    assert "Serve `--precision bfloat16`" not in page  # the advice is the table's, per class


@pytest.mark.parametrize("page", ["benchmarks/ner.md", "benchmarks/triples.md", "benchmarks/serving.md",
                                  "benchmarks/training.md", "benchmarks/gpu.md"])
def test_each_benchmarks_page_has_its_group(page):
    gen = _gen()
    summary = gen.load_summary()
    assert gen.page_benches(summary, page), page
    assert "<!-- kerasbert:bench-page -->" in (DOCS / page).read_text(encoding="utf-8")
    sections = summary.get("section") or {}
    for bench in gen.page_benches(summary, page):  # a sentence says what each table measures
        assert sections.get(bench, {}).get("about"), bench
