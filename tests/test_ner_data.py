"""Tests for the NER readers (kerasbert_apps/ner/readers), examples and tag schemes, on hand-written files and the shared corpora."""

import gzip
import json
import re
import tempfile
from pathlib import Path

import pytest
from conftest import require_shared
from hypothesis import given, settings
from hypothesis import strategies as st

from kerasbert_apps.ner.examples import Entity
from kerasbert_apps.ner.examples import Example
from kerasbert_apps.ner.readers import OUTPUT_FORMATS
from kerasbert_apps.ner.readers import detect_format
from kerasbert_apps.ner.readers import prediction_record
from kerasbert_apps.ner.readers import read_conll
from kerasbert_apps.ner.readers import read_jsonl
from kerasbert_apps.ner.readers import read_ner_file
from kerasbert_apps.ner.readers import read_parallel
from kerasbert_apps.ner.readers import write_jsonl
from kerasbert_apps.ner.tags import spans_to_tags
from kerasbert.errors import InputDataError


def write(tmp_path, name, content, encoding="utf-8"):
    path = tmp_path / name
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_bytes(content.encode(encoding))
    return path


def spans(example):
    """The entities of an example as (surface text, type) pairs."""
    return [(example.text[e.start:e.end], e.type) for e in example.entities]


def check_invariants(result):
    report = result.report
    assert report.entities_read == report.entities + sum(report.skipped.values())
    assert report.entities == sum(len(ex.entities) for ex in result.examples)
    assert report.examples == len(result.examples)
    for example in result.examples:
        previous_end = 0
        for entity in example.entities:
            assert 0 <= entity.start < entity.end <= len(example.text)
            assert entity.start >= previous_end  # sorted, no overlaps
            previous_end = entity.end


def assert_error(call, path, line, pattern=None):
    """``call()`` raises InputDataError naming ``path`` and ``line`` (None: no line)."""
    with pytest.raises(InputDataError) as info:
        call()
    message = str(info.value)
    assert Path(path).name in message
    if line is None:
        assert info.value.line is None
        assert ", line " not in message
    else:
        assert info.value.line == line
        assert re.search(rf", (line {line}|record \d+ \(line {line}\)):", message), message
    if pattern:
        assert re.search(pattern, message), message
    return info.value


# ---------------------------------------------------------------------------
# CoNLL


CONLL_IOB1 = """\
-DOCSTART- -X- -X- O

EU NNP I-NP I-ORG
rejects VBZ I-VP O
German JJ I-NP I-MISC
call NN I-NP O
. . O O

Peter NNP I-NP I-PER
Blackburn NNP I-NP I-PER
met VBD I-VP O
Germany NNP I-NP I-LOC
France NNP I-NP B-LOC
and CC O O
Paris NNP I-NP I-LOC

-DOCSTART- -X- -X- O

BRUSSELS NNP I-NP I-LOC
"""


def test_conll_iob1_conll2003_style(tmp_path):
    path = write(tmp_path, "eng.mini", CONLL_IOB1)
    result = read_conll(path)
    check_invariants(result)
    report = result.report
    assert report.scheme == "iob1"
    assert report.format == "conll"
    assert report.docstarts == 2
    assert report.blank_lines == 4
    assert report.tag_violations == {}
    examples = result.examples
    assert [ex.text for ex in examples] == [
        "EU rejects German call .",
        "Peter Blackburn met Germany France and Paris",
        "BRUSSELS",
    ]
    assert spans(examples[0]) == [("EU", "ORG"), ("German", "MISC")]
    # B-LOC separates two adjacent LOC entities; I-LOC after O starts one.
    assert spans(examples[1]) == [("Peter Blackburn", "PER"), ("Germany", "LOC"), ("France", "LOC"),
                                  ("Paris", "LOC")]
    assert examples[0].words == [(0, 2), (3, 10), (11, 17), (18, 22), (23, 24)]
    assert examples[0].source == f"{path}:3"
    assert examples[1].source == f"{path}:9"
    assert examples[2].source == f"{path}:19"
    assert report.types == {"LOC": 4, "MISC": 1, "ORG": 1, "PER": 1}
    assert "iob1" in report.summary()


def test_conll_iob1_explicit_flags_b_after_o(tmp_path):
    path = write(tmp_path, "a.conll", "x B-PER\ny O\nz B-PER\nw I-PER\n")
    result = read_conll(path, scheme="iob1")
    assert result.report.tag_violations == {"IOB1 B- tag not after its own type": 2}
    assert result.report.violation_locations == [f"{path}:1", f"{path}:3"]
    assert spans(result.examples[0]) == [("x", "PER"), ("z w", "PER")]
    # Auto-detection calls this BIO and finds nothing to repair.
    auto = read_conll(path)
    assert auto.report.scheme == "bio" and auto.report.tag_violations == {}


BIO_3COL = """\
John B-PER NNP
Smith I-PER NNP
visited O VBD
New B-LOC NNP
York I-LOC NNP
City I-LOC NNP

Acme B-ORG NNP
Corp I-ORG NNP
Acme B-ORG NNP
"""


def test_conll_bio_with_tag_column(tmp_path):
    path = write(tmp_path, "bio.txt", BIO_3COL)
    result = read_conll(path, tag_column=1)
    check_invariants(result)
    assert result.report.scheme == "bio"
    assert spans(result.examples[0]) == [("John Smith", "PER"), ("New York City", "LOC")]
    assert spans(result.examples[1]) == [("Acme Corp", "ORG"), ("Acme", "ORG")]
    assert read_conll(path, tag_column=-2).examples == result.examples
    # The default (last column) holds POS tags, which are not tags of any scheme.
    assert_error(lambda: read_conll(path), path, 1, "invalid tag 'NNP'")


def test_conll_bio_repairs_stray_i_and_counts_it(tmp_path):
    path = write(tmp_path, "stray.bio", "a B-PER\nb O\nc I-LOC\nd I-LOC\ne B-LOC\n")
    result = read_conll(path)
    assert result.report.scheme == "bio"
    assert spans(result.examples[0]) == [("a", "PER"), ("c d", "LOC"), ("e", "LOC")]
    assert result.report.tag_violations == {"BIO I- tag without B- (starts an entity)": 1}
    assert result.report.violation_locations == [f"{path}:3"]
    assert "REPAIRED 1" in result.report.summary()


BIOES = """\
John B-PER
Smith E-PER
visited O
Paris S-LOC
and O
New B-LOC
York I-LOC
City E-LOC
"""


def test_conll_bioes_and_bilou(tmp_path):
    bioes = read_conll(write(tmp_path, "a.bioes", BIOES))
    bilou_text = BIOES.replace("E-", "L-").replace("S-", "U-")
    bilou = read_conll(write(tmp_path, "a.bilou", bilou_text))
    for result in (bioes, bilou):
        check_invariants(result)
        assert result.report.scheme == "bioes"
        assert result.report.tag_violations == {}
        assert spans(result.examples[0]) == [("John Smith", "PER"), ("Paris", "LOC"), ("New York City", "LOC")]
    assert bioes.examples[0].entities == bilou.examples[0].entities


def test_conll_bioes_violations_are_counted(tmp_path):
    path = write(tmp_path, "bad.bioes", "a B-PER\nb O\nc E-LOC\nd S-PER\ne B-ORG\n")
    result = read_conll(path)
    assert spans(result.examples[0]) == [("a", "PER"), ("c", "LOC"), ("d", "PER"), ("e", "ORG")]
    assert result.report.tag_violations == {
        "BIOES entity not closed by E-/S- (ended at the next tag)": 2,
        "BIOES E- tag without B- (starts an entity)": 1,
    }


MIXED = """\
John B-PER
Smith I-PER
lives O
in O
Paris B-LOC

Mary B-PER
went O
home O

Bob S-PER
and O
Ann B-PER
Lee E-PER

Berlin B-LOC
is O
big O
"""


def test_bioes_sentences_in_a_bio_file_are_read_and_the_report_points_at_them(tmp_path):
    """A BIO file with one sentence in BIOES: every entity read as meant, and
    the report points at that sentence (line 11), not at the valid BIO lines
    (it used to report 4 unclosed BIOES entities at lines 3, 5, 8 and 17)."""
    path = write(tmp_path, "mixed.conll", MIXED)
    result = read_conll(path)
    check_invariants(result)
    assert [spans(e) for e in result.examples] == [
        [("John Smith", "PER"), ("Paris", "LOC")], [("Mary", "PER")], [("Bob", "PER"), ("Ann Lee", "PER")],
        [("Berlin", "LOC")]]
    assert result.report.violation_locations == [f"{path}:11"]
    assert result.report.tag_violations == {"sentence tagged BIOES in a BIO file (read as BIOES)": 1}
    assert result.report.scheme == "bio"
    bioes = MIXED.replace("Smith I-PER", "Smith E-PER").replace("Paris B-LOC", "Paris S-LOC").replace(
        "Berlin B-LOC", "Berlin S-LOC")  # now the BIO sentence is the one that differs
    result = read_conll(write(tmp_path, "mixed.bioes", bioes))
    assert result.report.scheme == "bioes"
    assert result.report.tag_violations == {"sentence tagged BIO in a BIOES file (read as BIO)": 1}
    assert result.report.violation_locations == [f"{tmp_path / 'mixed.bioes'}:7"]
    assert [("Mary", "PER")] == spans(result.examples[1])


def test_conll_bom_crlf_and_gzip(tmp_path):
    plain = read_conll(write(tmp_path, "plain.conll", CONLL_IOB1))
    raw = b"\xef\xbb\xbf" + CONLL_IOB1.replace("\n", "\r\n").encode("utf-8")
    bom_crlf = read_conll(write(tmp_path, "bom.conll", raw))
    gz = read_conll(write(tmp_path, "plain.conll.gz", gzip.compress(raw)))
    for result in (bom_crlf, gz):
        assert [(ex.text, ex.entities, ex.words) for ex in result.examples] == \
               [(ex.text, ex.entities, ex.words) for ex in plain.examples]
        assert [ex.source.rsplit(":", 1)[1] for ex in result.examples] == ["3", "9", "19"]
        assert "\ufeff" not in result.examples[0].text


def test_conll_chinese_characters_joined_without_spaces(tmp_path):
    content = "我 O\n爱 O\n北 B-LOC\n京 I-LOC\n天 I-LOC\n安 I-LOC\n门 I-LOC\n\n张 B-PER\n三 I-PER\n说 O\n， O\n"
    path = write(tmp_path, "zh.char", content)
    result = read_conll(path)
    assert result.report.join == ""
    assert result.report.strip_digit is False
    assert result.examples[0].text == "我爱北京天安门"
    assert spans(result.examples[0]) == [("北京天安门", "LOC")]
    assert result.examples[0].words[2:4] == [(2, 3), (3, 4)]
    assert spans(result.examples[1]) == [("张三", "PER")]
    spaced = read_conll(path, join=" ")
    assert spaced.examples[0].text == "我 爱 北 京 天 安 门"
    assert spans(spaced.examples[0]) == [("北 京 天 安 门", "LOC")]


def test_conll_weibo_segmentation_digits(tmp_path):
    content = "科0\tO\n技1\tO\n张0\tB-PER.NAM\n三1\tI-PER.NAM\n是0\tO\n记0\tB-PER.NOM\n者1\tI-PER.NOM\n\n"
    path = write(tmp_path, "weibo.dev", content)
    result = read_conll(path)
    assert result.report.strip_digit is True
    assert result.report.join == ""
    assert result.examples[0].text == "科技张三是记者"
    assert spans(result.examples[0]) == [("张三", "PER.NAM"), ("记者", "PER.NOM")]
    # Kept digits make two-character tokens, so join="auto" falls back to spaces.
    assert read_conll(path, strip_digit=False).examples[0].text == "科0 技1 张0 三1 是0 记0 者1"
    assert read_conll(path, strip_digit=False, join="").examples[0].text == "科0技1张0三1是0记0者1"
    plain = write(tmp_path, "plain.char", "科 O\n技 O\n")
    assert_error(lambda: read_conll(plain, strip_digit=True), plain, 1, "segmentation digit")


def test_parallel_files_and_dispatch(tmp_path):
    folder = tmp_path / "val"
    folder.mkdir()
    write(folder, "sentences.txt", "我 爱 北 京\n\n张 三\n")
    write(folder, "tags.txt", "O O B-LOC I-LOC\n\nB-PER I-PER\n")
    result = read_parallel(folder)
    check_invariants(result)
    assert result.report.format == "parallel"
    assert result.report.blank_lines == 1
    assert [ex.text for ex in result.examples] == ["我爱北京", "张三"]
    assert spans(result.examples[0]) == [("北京", "LOC")]
    assert result.examples[1].source == f"{folder / 'sentences.txt'}:3"
    assert detect_format(folder) == "parallel"
    assert detect_format(folder / "sentences.txt") == "parallel"
    assert read_ner_file(folder).examples == result.examples

    write(folder, "tags.txt", "O O B-LOC I-LOC\n")
    assert_error(lambda: read_parallel(folder), folder / "sentences.txt", None, "3 lines but .*tags.txt has 1")
    write(folder, "tags.txt", "O O B-LOC\n\nB-PER I-PER\n")
    assert_error(lambda: read_parallel(folder), folder / "sentences.txt", 1, "4 tokens but 3 tags")
    write(folder, "tags.txt", "O O B-LOC I-LOC\n\nB-PER X-PER\n")
    assert_error(lambda: read_parallel(folder), folder / "tags.txt", 3, "invalid tag 'X-PER'")


# ---------------------------------------------------------------------------
# JSON flavours


def test_cluener_inclusive_ends(tmp_path):
    lines = [
        {"text": "浙商银行企业信贷部叶老桂博士", "label": {"name": {"叶老桂": [[9, 11]]},
                                                  "company": {"浙商银行": [[0, 3]]}}},
        {"text": "没有实体", "label": {}},
        {"id": 7, "text": "无标注"},
    ]
    path = write(tmp_path, "dev.json", "\n".join(json.dumps(x, ensure_ascii=False) for x in lines) + "\n")
    result = read_jsonl(path)
    check_invariants(result)
    assert result.report.format == "cluener"
    assert result.examples[0].entities == [Entity(0, 4, "company"), Entity(9, 12, "name")]
    assert spans(result.examples[0]) == [("浙商银行", "company"), ("叶老桂", "name")]
    assert result.examples[1].entities == [] and result.examples[2].entities == []
    assert result.report.unannotated == 1
    assert result.examples[2].source == f"{path}:3"
    assert result.examples[0].words is None
    assert read_ner_file(path).examples == result.examples

    lines[1] = {"text": "没有实体", "label": {"name": {"叶老桂": [[0, 2]]}}}
    path = write(tmp_path, "bad.json", "\n".join(json.dumps(x, ensure_ascii=False) for x in lines) + "\n")
    assert_error(lambda: read_jsonl(path), path, 2, "mention '叶老桂' at \\[0, 2\\]")


def test_doccano_both_flavours(tmp_path):
    old = [
        {"id": 1, "text": "Alice lives in Paris.", "label": [[15, 20, "LOC"], [0, 5, "PER"]]},
        {"id": 2, "text": "Nothing here.", "label": []},
    ]
    new = [
        {"id": 1, "text": "Alice lives in Paris.",
         "entities": [{"id": 3, "label": "LOC", "start_offset": 15, "end_offset": 20},
                      {"id": 4, "label": "PER", "start_offset": 0, "end_offset": 5}],
         "relations": [{"id": 1, "from_id": 4, "to_id": 3, "type": "lives_in"}]},
        {"id": 2, "text": "Nothing here.", "entities": [], "relations": []},
    ]
    old_path = write(tmp_path, "old.jsonl", "".join(json.dumps(x) + "\n" for x in old))
    new_path = write(tmp_path, "new.jsonl", "".join(json.dumps(x) + "\n" for x in new))
    a, b = read_jsonl(old_path), read_jsonl(new_path)
    for result in (a, b):
        check_invariants(result)
        assert result.report.format == "doccano"
        assert spans(result.examples[0]) == [("Alice", "PER"), ("Paris", "LOC")]
        assert result.examples[1].entities == []
        assert result.report.unannotated == 0
    assert b.report.ignored == {"doccano relations": 1}
    assert detect_format(old_path) == "jsonl"
    doccano_1x = write(tmp_path, "v1.jsonl", json.dumps({"id": 1, "data": "Alice lives in Paris.",
                                                        "label": [[0, 5, "PER"], [15, 20, "LOC"]]}) + "\n")
    assert read_jsonl(doccano_1x).examples[0].entities == a.examples[0].entities
    assert read_ner_file(new_path, format="doccano").examples == b.examples


LABEL_STUDIO = [
    {"id": 1, "data": {"text": "Barack Obama visited Berlin."},
     "annotations": [
         {"was_cancelled": True, "result": []},
         {"result": [
             {"value": {"start": 0, "end": 12, "text": "Barack Obama", "labels": ["PER"]},
              "from_name": "label", "to_name": "text", "type": "labels"},
             {"value": {"start": 21, "end": 27, "text": "Berlin", "labels": ["LOC"]},
              "from_name": "label", "to_name": "text", "type": "labels"},
             {"value": {"choices": ["news"]}, "from_name": "c", "to_name": "text", "type": "choices"},
         ]},
         {"result": []},
     ],
     "predictions": [{"result": []}]},
    {"id": 2, "data": {"text": "Not annotated yet."}, "annotations": []},
]


def test_label_studio_export(tmp_path):
    path = write(tmp_path, "export.json", json.dumps(LABEL_STUDIO, indent=2))
    assert detect_format(path) == "jsonl"
    result = read_ner_file(path)
    check_invariants(result)
    assert result.report.format == "labelstudio"
    assert spans(result.examples[0]) == [("Barack Obama", "PER"), ("Berlin", "LOC")]
    assert result.examples[1].entities == []
    assert result.report.unannotated == 1
    assert result.report.ignored == {
        "Label Studio predictions (the task has an annotation)": 1,
        "cancelled Label Studio annotations": 1,
        "extra Label Studio annotations (the first is used)": 1,
        "Label Studio results of type 'choices'": 1,
    }
    # Sources give the line where each task starts in the pretty-printed array.
    lines = path.read_text().split("\n")
    for example in result.examples:
        line = int(example.source.rsplit(":", 1)[1])
        assert lines[line - 1].strip() == "{"
    assert int(result.examples[1].source.rsplit(":", 1)[1]) > int(result.examples[0].source.rsplit(":", 1)[1])


def test_label_studio_bad_span_names_task_line(tmp_path):
    tasks = json.loads(json.dumps(LABEL_STUDIO))
    tasks[1]["annotations"] = [{"result": [
        {"value": {"start": 4, "end": 40, "labels": ["X"]}, "type": "labels"}]}]
    path = write(tmp_path, "export.json", "[\n" + ",\n".join(json.dumps(t) for t in tasks) + "\n]\n")
    assert_error(lambda: read_jsonl(path), path, 3, "outside the text")


def test_overlap_rule_nested_and_crossing(tmp_path):
    text = "New York City Hall is big"
    record = {"text": text, "label": [
        [0, 8, "LOC"],        # "New York": nested in the longest span -> dropped
        [0, 18, "FAC"],       # "New York City Hall": longest -> kept
        [9, 13, "LOC"],       # "City": nested -> dropped
        [14, 21, "MISC"],     # "Hall is": crosses the kept span -> dropped
        [19, 25, "X"],        # "is big": crosses only "Hall is", which was dropped -> kept
        [0, 18, "ORG"],       # same span, other type: equal length and start, listed later -> dropped
        [19, 25, "X"],        # exact duplicate -> dropped as a duplicate
    ]}
    tie = {"text": "abcdef", "label": [[2, 5, "B"], [1, 4, "A"], [3, 6, "C"]]}  # equal length: earliest start wins
    path = write(tmp_path, "overlap.jsonl", json.dumps(record) + "\n" + json.dumps(tie) + "\n")
    result = read_jsonl(path)
    check_invariants(result)
    report = result.report
    assert spans(result.examples[0]) == [("New York City Hall", "FAC"), ("is big", "X")]
    assert spans(result.examples[1]) == [("bcd", "A")]
    assert report.entities_read == 10
    assert report.entities == 3
    assert report.overlaps == 6
    assert report.skipped == {"overlapping span": 6, "duplicate span": 1}
    assert report.overlap_kinds == {"nested": 2, "crossing": 3, "same span, other type": 1}
    assert report.overlap_locations == [f"{path}:1", f"{path}:2"]
    summary = report.summary()
    assert "overlaps resolved: 6" in summary and "SKIPPED 1 entity spans: duplicate span" in summary


def test_whitespace_is_trimmed_and_counted(tmp_path):
    record = {"text": "Hi  Alice  and   Bob", "label": [[3, 11, "PER"], [14, 17, "PER"], [17, 20, "PER"]]}
    path = write(tmp_path, "ws.jsonl", json.dumps(record) + "\n")
    result = read_jsonl(path)
    check_invariants(result)
    assert spans(result.examples[0]) == [("Alice", "PER"), ("Bob", "PER")]
    assert result.report.trimmed == 1
    assert result.report.skipped == {"whitespace-only span": 1}


def test_write_jsonl_round_trip(tmp_path):
    conll = read_conll(write(tmp_path, "eng.mini", CONLL_IOB1))
    cluener = read_jsonl(write(tmp_path, "c.json", json.dumps(
        {"text": "浙商银行 x", "label": {"company": {"浙商银行": [[0, 3]]}}}, ensure_ascii=False) + "\n"))
    examples = conll.examples + cluener.examples + [Example("empty", [], "here:1")]
    for name in ("out.jsonl", "out.jsonl.gz"):
        path = tmp_path / name
        write_jsonl(examples, path)
        back = read_jsonl(path)
        assert back.report.format == "kerasbert"
        assert [(ex.text, ex.entities, ex.words) for ex in back.examples] == \
               [(ex.text, ex.entities, ex.words) for ex in examples]
        assert back.examples[0].source == f"{path}:1"
        assert read_ner_file(path).examples == back.examples
    assert "浙商银行" in (tmp_path / "out.jsonl").read_text(encoding="utf-8")  # not ASCII-escaped


def test_detect_format(tmp_path):
    assert detect_format(write(tmp_path, "a.txt", CONLL_IOB1)) == "conll"
    assert detect_format(write(tmp_path, "b.txt", '{"text": "x", "label": []}\n')) == "jsonl"
    assert detect_format(write(tmp_path, "c.txt", "[\n]\n")) == "jsonl"
    assert detect_format(write(tmp_path, "d.conll", "{ O\n} O\n")) == "conll"
    assert detect_format(write(tmp_path, "e.json", "not json")) == "jsonl"
    gz = write(tmp_path, "f.jsonl.gz", gzip.compress(b'{"text": "x"}\n'))
    assert detect_format(gz) == "jsonl"


# ---------------------------------------------------------------------------
# Malformed input


def test_error_too_few_columns_for_tag_column(tmp_path):
    path = write(tmp_path, "cols.conll", "\n\nEU NNP I-ORG\n")
    assert_error(lambda: read_conll(path, tag_column=3), path, 3, "tag_column=3")
    one = write(tmp_path, "one.conll", "EU\nrejects\n")
    assert_error(lambda: read_conll(one), one, 1, "1 column")


def test_error_inconsistent_column_count(tmp_path):
    path = write(tmp_path, "cols.conll", "-DOCSTART- -X- O\n\nEU NNP I-ORG\nrejects VBZ O\n\nGerman I-MISC\n")
    assert_error(lambda: read_conll(path), path, 6, "2 columns, but line 3 has 3")
    crlf = write(tmp_path, "crlf.conll", b"\xef\xbb\xbfa O\r\nb O\r\n\r\nc d O\r\n")
    assert_error(lambda: read_conll(crlf), crlf, 4, "3 columns")


@pytest.mark.parametrize("bad_tag", ["X-PER", "B-", "B_PER", "PER", "o"])
def test_error_invalid_tag(tmp_path, bad_tag):
    path = write(tmp_path, "tags.conll", f"a O\nb B-PER\n\nc {bad_tag}\n")
    assert_error(lambda: read_conll(path), path, 4, f"invalid tag '{re.escape(bad_tag)}'")


def test_error_tag_not_in_explicit_scheme_and_unknown_scheme(tmp_path):
    path = write(tmp_path, "s.conll", "a B-PER\nb E-PER\n\nc S-LOC\n")
    assert_error(lambda: read_conll(path, scheme="bio"), path, 2, "'E-PER' is not valid in the BIO scheme")
    assert read_conll(path, scheme="bilou").report.scheme == "bioes"
    assert_error(lambda: read_conll(path, scheme="bieo"), path, None, "unknown tag scheme 'bieo'")


def test_error_empty_files(tmp_path):
    for name, content in [("empty.conll", ""), ("blank.conll", "\n\r\n  \n"),
                          ("docstart.conll", "-DOCSTART- -X- -X- O\n\n")]:
        path = write(tmp_path, name, content)
        assert_error(lambda: read_conll(path), path, None, "no examples")
    path = write(tmp_path, "empty.jsonl", "\n\n")
    assert_error(lambda: read_jsonl(path), path, None, "no examples")
    path = write(tmp_path, "empty.json", "[]")
    assert_error(lambda: read_jsonl(path), path, None, "no examples")


def test_error_invalid_json(tmp_path):
    path = write(tmp_path, "bad.jsonl", '{"text": "a", "label": []}\n\n{"text": "b", "label": [}\n')
    assert_error(lambda: read_jsonl(path), path, 3, "invalid JSON")
    array = write(tmp_path, "bad.json", '[\n  {"text": "a"},\n  {"text": "b",,}\n]\n')
    assert_error(lambda: read_jsonl(array), array, 3, "invalid JSON")
    unclosed = write(tmp_path, "unclosed.json", '[\n  {"text": "a"}\n')
    assert_error(lambda: read_jsonl(unclosed), unclosed, 2, "not closed")
    no_comma = write(tmp_path, "nocomma.json", '[\n  {"text": "a"}\n  {"text": "b"}\n]\n')
    assert_error(lambda: read_jsonl(no_comma), no_comma, 3, "expected , or ]")
    trailing = write(tmp_path, "trailing.json", '[\n  {"text": "a"},\n]\n')
    assert_error(lambda: read_jsonl(trailing), trailing, 3, "invalid JSON")
    extra = write(tmp_path, "extra.json", '[{"text": "a"}]\n\n{"text": "b"}\n')
    assert_error(lambda: read_jsonl(extra), extra, 3, "extra data after the array")
    not_object = write(tmp_path, "list.jsonl", '{"text": "a"}\n[1, 2]\n')
    assert_error(lambda: read_jsonl(not_object), not_object, 2, "expected a JSON object")


@pytest.mark.parametrize("label, pattern", [
    ([[0, 99, "PER"]], r"\[0, 99\) for 'PER' is outside the text \(length 5\)"),
    ([[-1, 2, "PER"]], "outside the text"),
    ([[3, 3, "PER"]], "start >= end"),
    ([[4, 2, "PER"]], "start >= end"),
    ([[0, 2, ""]], "non-empty string"),
    ([[0, 2.0, "PER"]], "integers"),
    ([[0, 2]], r"\[start, end, \"TYPE\"\]"),
])
def test_error_bad_spans(tmp_path, label, pattern):
    path = write(tmp_path, "spans.jsonl", '{"text": "hello", "label": []}\n' +
                 json.dumps({"text": "hello", "label": label}) + "\n")
    assert_error(lambda: read_jsonl(path, format="doccano"), path, 2, pattern)


def test_error_bad_spans_other_flavours(tmp_path):
    cluener = write(tmp_path, "c.json", json.dumps({"text": "abc", "label": {"name": {"bc": [[1, 3]]}}}) + "\n")
    assert_error(lambda: read_jsonl(cluener), cluener, 1, "outside the text")
    new = write(tmp_path, "n.jsonl", json.dumps({"text": "abc", "entities": [
        {"start_offset": 2, "end_offset": 1, "label": "X"}]}) + "\n")
    assert_error(lambda: read_jsonl(new), new, 1, "start >= end")


def test_error_missing_text_key(tmp_path):
    path = write(tmp_path, "notext.jsonl", '{"text": "a", "label": []}\n{"content": "b", "label": []}\n')
    assert_error(lambda: read_jsonl(path), path, 2, 'missing "text" key')
    tasks = [{"data": {"text": "a"}, "annotations": []}, {"data": {"sentence": "b"}, "annotations": []}]
    ls = write(tmp_path, "ls.json", json.dumps(tasks, indent=1))
    assert_error(lambda: read_jsonl(ls), ls, 8, 'missing "text" key in "data"')


def test_error_mixed_flavours(tmp_path):
    path = write(tmp_path, "mixed.jsonl", '{"text": "ab", "label": [[0, 1, "X"]]}\n'
                 '{"text": "ab", "label": {"X": {"a": [[0, 0]]}}}\n')
    assert_error(lambda: read_jsonl(path), path, 2, "looks like cluener but line 1 says doccano")
    assert_error(lambda: read_jsonl(path, format="cluener"), path, 1, "looks like doccano")


def test_error_non_utf8_line_and_offset(tmp_path):
    content = "a O\nb O\n\nc\xe9 B-PER\n".encode("latin-1")
    path = write(tmp_path, "latin1.conll", content)
    error = assert_error(lambda: read_conll(path), path, 4, "byte 0xe9 at byte offset 10")
    assert "UTF-8" in str(error)
    bom = write(tmp_path, "bom.jsonl", b'\xef\xbb\xbf{"text": "a"}\r\n{"text": "\xff"}\r\n')
    assert_error(lambda: read_jsonl(bom), bom, 2, "byte 0xff at byte offset 28")
    gz = write(tmp_path, "latin1.conll.gz", gzip.compress(content))
    assert_error(lambda: read_conll(gz), gz, 4, "offset 10 of the decompressed data")


# ---------------------------------------------------------------------------
# Property: spans -> tags -> CoNLL file -> spans


@st.composite
def tagged_sentences(draw):
    """Tokens, their spans joined by single spaces, and non-overlapping entities on token boundaries."""
    n = draw(st.integers(1, 12))
    tokens = draw(st.lists(st.text(alphabet="abcXYZ,.1é北", min_size=1, max_size=4), min_size=n, max_size=n))
    words, position = [], 0
    for token in tokens:
        words.append((position, position + len(token)))
        position += len(token) + 1
    entities, i = [], 0
    while i < n:
        if draw(st.booleans()):
            length = draw(st.integers(1, min(4, n - i)))
            type_ = draw(st.sampled_from(["PER", "LOC", "ORG.NAM"]))
            entities.append(Entity(words[i][0], words[i + length - 1][1], type_))
            i += length
        else:
            i += 1
    return tokens, words, entities


@settings(max_examples=60, deadline=None)
@given(sentences=st.lists(tagged_sentences(), min_size=1, max_size=4),
       scheme=st.sampled_from(["bio", "bioes", "bilou", "iob1"]),
       auto=st.booleans())
def test_property_spans_to_tags_round_trip(sentences, scheme, auto):
    lines = []
    for tokens, words, entities in sentences:
        tags = spans_to_tags(words, entities, scheme)
        lines.extend(f"{token} {tag}" for token, tag in zip(tokens, tags))
        lines.append("")
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "prop.conll"
        path.write_text("\n".join(lines), encoding="utf-8")
        has_entities = any(entities for _, _, entities in sentences)
        result = read_conll(path, scheme="auto" if auto else scheme, join=" ", strip_digit=False)
    assert result.report.tag_violations == {}
    if auto and has_entities:
        assert result.report.scheme == {"bilou": "bioes"}.get(scheme, scheme)
    assert [ex.entities for ex in result.examples] == [entities for _, _, entities in sentences]
    assert [ex.words for ex in result.examples] == [words for _, words, _ in sentences]


def test_spans_to_tags_examples_and_errors():
    words = [(0, 4), (5, 10), (11, 18), (19, 24)]  # "John Smith visited Paris"
    entities = [Entity(0, 10, "PER"), Entity(19, 24, "LOC")]
    assert spans_to_tags(words, entities, "bio") == ["B-PER", "I-PER", "O", "B-LOC"]
    assert spans_to_tags(words, entities, "bioes") == ["B-PER", "E-PER", "O", "S-LOC"]
    assert spans_to_tags(words, entities, "bilou") == ["B-PER", "L-PER", "O", "U-LOC"]
    assert spans_to_tags(words, entities, "iob1") == ["I-PER", "I-PER", "O", "I-LOC"]
    adjacent = [Entity(0, 4, "PER"), Entity(5, 10, "PER")]
    assert spans_to_tags(words, adjacent, "iob1") == ["I-PER", "B-PER", "O", "O"]
    with pytest.raises(ValueError, match="token boundaries"):
        spans_to_tags(words, [Entity(1, 4, "PER")])
    with pytest.raises(ValueError, match="overlaps"):
        spans_to_tags(words, [Entity(0, 10, "PER"), Entity(5, 10, "LOC")])
    with pytest.raises(ValueError, match="unknown tag scheme"):
        spans_to_tags(words, entities, "bmewo")


# ---------------------------------------------------------------------------
# The shared corpora (figures from their README.txt files unless noted)


def check_slices(examples):
    for example in examples:
        for entity in example.entities:
            surface = example.text[entity.start:entity.end]
            assert surface and surface == surface.strip(), (example.source, entity)


def iob1_to_iob2(tags):
    """Reference conversion, independent of the reader: I-X starts an entity unless after X."""
    out, previous = [], "O"
    for tag in tags:
        if tag.startswith("I-") and previous[2:] != tag[2:]:
            tag = "B-" + tag[2:]
        out.append(tag)
        previous = tag
    return out


def test_shared_conll2003_testa():
    path = require_shared("data", "conll2003", "eng.testa")
    result = read_ner_file(path)
    check_invariants(result)
    report = result.report
    # README: testa 3250 sentences / 216 documents / 51362 tokens, IOB1, 4 B- tags.
    assert (report.examples, report.docstarts, report.tokens) == (3250, 216, 51362)
    assert report.scheme == "iob1" and report.join == " " and report.tag_violations == {}
    # Measured here (the standard CoNLL-2003 dev figures).
    assert report.entities == 5942
    assert report.types == {"LOC": 1837, "MISC": 922, "ORG": 1341, "PER": 1842}
    assert report.skipped == {} and report.overlaps == 0
    check_slices(result.examples)

    # Re-tagging the spans as IOB2 reproduces the file's tags converted to IOB2.
    sentences, current = [], []
    for line in path.read_text(encoding="utf-8").split("\n"):
        columns = line.split()
        if not columns or columns[0] == "-DOCSTART-":
            if current:
                sentences.append(current)
            current = []
        else:
            current.append((columns[0], columns[-1]))
    if current:
        sentences.append(current)
    assert len(sentences) == len(result.examples)
    b_tags = 0
    for example, sentence in zip(result.examples, sentences):
        tokens = [token for token, _ in sentence]
        tags = [tag for _, tag in sentence]
        b_tags += sum(tag.startswith("B-") for tag in tags)
        assert [example.text[s:e] for s, e in example.words] == tokens
        assert spans_to_tags(example.words, example.entities, "bio") == iob1_to_iob2(tags)
    assert b_tags == 4


def test_shared_conll2003_train_gz():
    path = require_shared("data", "conll2003", "eng.train.gz")
    report = read_ner_file(path).report
    # README: train 14041 sentences / 946 documents / 203621 tokens.
    assert (report.examples, report.docstarts, report.tokens) == (14041, 946, 203621)
    assert report.entities == 23499  # measured here (the standard figure)


def test_shared_cluener_dev_and_test():
    dev = read_ner_file(require_shared("data", "cluener2020", "dev.json"))
    check_invariants(dev)
    report = dev.report
    assert report.format == "cluener"
    assert report.examples == 1343 and report.entities == 3072  # README
    assert len(report.types) == 10
    assert report.skipped == {} and report.trimmed == 0 and report.unannotated == 0
    check_slices(dev.examples)

    test = read_ner_file(require_shared("data", "cluener2020", "test.json"))
    assert test.report.examples == 1345 and test.report.unannotated == 1345  # README: unlabeled
    assert test.report.entities == 0


def test_shared_cluener_train_overlaps():
    result = read_ner_file(require_shared("data", "cluener2020", "train.json.gz"))
    check_invariants(result)
    report = result.report
    assert report.examples == 10748 and report.entities_read == 23971  # README
    # Measured: two company names nested inside a book title (line 1507) are dropped.
    assert report.overlaps == 2 and report.overlap_kinds == {"nested": 2}
    assert report.entities == 23969 and report.types["company"] == 2978
    assert report.overlap_locations[0].endswith("train.json.gz:1507")


def test_shared_weibo_dev():
    path = require_shared("data", "weibo_ner", "weiboNER_2nd_conll.dev")
    result = read_ner_file(path)
    check_invariants(result)
    report = result.report
    # README: dev 270 sentences / 14509 characters / 389 entities.
    assert (report.examples, report.tokens, report.entities) == (270, 14509, 389)
    assert report.strip_digit is True and report.join == "" and report.scheme == "bio"
    assert report.tag_violations == {}
    assert set(report.types) == {f"{t}.{k}" for t in ("PER", "ORG", "LOC", "GPE") for k in ("NAM", "NOM")}
    assert sum(len(ex.words) for ex in result.examples) == 14509
    first_sentence = path.read_text(encoding="utf-8").split("\n\n")[0].split("\n")
    assert result.examples[0].text == "".join(line.split("\t")[0][:-1] for line in first_sentence)
    check_slices(result.examples)


def test_shared_msra_val():
    result = read_ner_file(require_shared("data", "msra_ner_partial", "val"))
    check_invariants(result)
    report = result.report
    assert report.format == "parallel" and report.join == ""
    assert report.examples == 3000  # README
    assert report.types == {"LOC": 2414, "ORG": 1394, "PER": 1203}  # README
    assert report.tag_violations == {}
    check_slices(result.examples)


def test_shared_people_daily_dev():
    result = read_ner_file(require_shared("data", "people_daily_ner_partial", "example.dev"))
    check_invariants(result)
    report = result.report
    assert (report.examples, report.tokens) == (2318, 109870)  # README
    assert report.types == {"LOC": 1951, "ORG": 984, "PER": 884}  # README
    assert report.join == "" and report.strip_digit is False and report.scheme == "bio"
    check_slices(result.examples)


def test_errors_in_a_json_array_name_the_record(tmp_path):
    """A Label Studio export is one JSON array: errors name the record too."""
    task = {"data": {"text": "Alice visited Oslo."}, "annotations": [{"result": [
        {"type": "labels", "value": {"start": 14, "end": 18, "labels": ["LOC"]}}]}]}
    bad = {"data": {"text": "Bob"}, "annotations": [{"result": [
        {"type": "labels", "value": {"start": 0, "end": 9, "labels": ["PER"]}}]}]}
    path = tmp_path / "project.json"
    path.write_text(json.dumps([task, task, bad]), encoding="utf-8")
    with pytest.raises(InputDataError, match=r"project\.json, record 3 \(line 1\): span \[0, 9\) .* outside the text"):
        read_ner_file(path)


def test_spacy_style_records(tmp_path):
    """spaCy v2's training format: "entities" as [start, end, "TYPE"] lists, ends exclusive."""
    path = tmp_path / "spacy.jsonl"
    records = [{"text": "Alice visited Oslo.", "entities": [[0, 5, "PER"], [14, 18, "LOC"]]},
               {"text": "Nothing here.", "entities": []}]
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    result = read_ner_file(path)
    assert result.report.format == "spacy"
    assert [(e.start, e.end, e.type) for e in result.examples[0].entities] == [(0, 5, "PER"), (14, 18, "LOC")]
    assert result.examples[1].entities == []
    path.write_text(json.dumps({"text": "Bob", "entities": [[0, 4, "PER"]]}) + "\n", encoding="utf-8")
    with pytest.raises(InputDataError, match=r"spacy\.jsonl, line 1: span \[0, 4\) for 'PER' is outside the text"):
        read_ner_file(path)
    path.write_text(json.dumps({"text": "Bob", "entities": [[0, 3]]}) + "\n", encoding="utf-8")
    with pytest.raises(InputDataError, match=r'line 1: each "entities" item must be \[start, end, "TYPE"\]'):
        read_ner_file(path)
    # doccano's "entities" objects are still doccano
    path.write_text(json.dumps({"text": "Bob", "entities": [{"start_offset": 0, "end_offset": 3, "label": "PER"}]})
                    + "\n", encoding="utf-8")
    assert read_ner_file(path).report.format == "doccano"


PREDICTED = [
    {"text": "Angela Merkel met Emmanuel Macron in Berlin.", "entities": [
        {"start": 0, "end": 13, "type": "PER", "text": "Angela Merkel", "score": 0.91},
        {"start": 18, "end": 33, "type": "PER", "text": "Emmanuel Macron", "score": 0.42},
        {"start": 37, "end": 43, "type": "LOC", "text": "Berlin", "score": 0.97}]},
    {"text": "Nothing here.", "entities": []},
    {"text": "李白是唐朝诗人。", "entities": [{"start": 0, "end": 2, "type": "PER", "text": "李白", "score": 0.8}]},
]


def _write_predictions(tmp_path, fmt, results):
    records = [prediction_record(r, fmt) for r in results]
    path = tmp_path / f"predicted.{fmt}.json"
    if OUTPUT_FORMATS[fmt]:
        path.write_text(json.dumps(records, ensure_ascii=False), encoding="utf-8")
    else:
        path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records), encoding="utf-8")
    return path


@pytest.mark.parametrize("fmt, flavour", [("jsonl", "kerasbert"), ("doccano", "doccano"), ("label-studio", "labelstudio")])
def test_predictions_in_annotation_tool_formats_read_back_to_the_same_entities(tmp_path, fmt, flavour):
    path = _write_predictions(tmp_path, fmt, PREDICTED)
    result = read_ner_file(path, use_predictions=True)
    check_invariants(result)
    assert result.report.format == flavour
    assert [e.text for e in result.examples] == [r["text"] for r in PREDICTED]
    for example, predicted in zip(result.examples, PREDICTED):
        assert [(e.start, e.end, e.type) for e in example.entities] == [
            (e["start"], e["end"], e["type"]) for e in predicted["entities"]]
    assert result.report.skipped == {} and result.report.trimmed == 0


def test_label_studio_predictions_shape_and_opt_in(tmp_path):
    (task, empty, _) = [prediction_record(r, "label-studio") for r in PREDICTED]
    assert task["data"] == {"text": PREDICTED[0]["text"]}
    (prediction,) = task["predictions"]
    assert prediction["score"] == 0.42  # the least sure entity: Label Studio sorts tasks by it
    region = prediction["result"][1]
    assert {k: region[k] for k in ("from_name", "to_name", "type", "score")} == {
        "from_name": "label", "to_name": "text", "type": "labels", "score": 0.42}
    assert region["value"] == {"start": 18, "end": 33, "text": "Emmanuel Macron", "labels": ["PER"]}
    assert len({r["id"] for r in prediction["result"]}) == 3
    assert empty["predictions"] == [{"model_version": "kerasbert", "result": []}]
    # Without use_predictions, tasks that only have predictions are unannotated (counted, not silently read).
    path = _write_predictions(tmp_path, "label-studio", PREDICTED)
    result = read_ner_file(path)
    assert all(e.entities == [] for e in result.examples)
    assert result.report.unannotated == 3 and result.report.from_predictions == 0
    assert result.report.ignored == {
        "Label Studio predictions of tasks with no annotation (--use-predictions reads them)": 3}
    # With it, an annotated task keeps its annotation (a person corrected it) and ignores its prediction.
    tasks = json.loads(path.read_text(encoding="utf-8"))
    tasks[0]["annotations"] = [{"result": [
        {"type": "labels", "value": {"start": 37, "end": 43, "text": "Berlin", "labels": ["GPE"]}}]}]
    path.write_text(json.dumps(tasks, ensure_ascii=False), encoding="utf-8")
    result = read_ner_file(path, use_predictions=True)
    assert [(e.start, e.end, e.type) for e in result.examples[0].entities] == [(37, 43, "GPE")]
    assert result.report.from_predictions == 2 and result.report.unannotated == 0
    assert result.report.ignored == {"Label Studio predictions (the task has an annotation)": 1}
    assert "2 Label Studio tasks with no annotation read from their predictions" in result.report.summary()
