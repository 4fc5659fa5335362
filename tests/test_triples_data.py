"""Triple data readers: CasRel, DuIE, DuIE 2.0 / CMeIE, schemas, entity location,
malformed input, and the real shared corpora against their README counts."""

import gzip
import json

import pytest

from kerasbert_apps.triples.data import Span
from kerasbert_apps.triples.data import locate
from kerasbert_apps.triples.data import pair_closest
from kerasbert_apps.triples.data import predicates_of
from kerasbert_apps.triples.data import read_schema
from kerasbert_apps.triples.data import read_triples_file
from kerasbert_apps.triples.data import write_jsonl
from conftest import require_shared
from kerasbert.errors import InputDataError


def write(tmp_path, name, content, binary=False):
    path = tmp_path / name
    if binary:
        path.write_bytes(content)
    else:
        path.write_text(content, encoding="utf-8")
    return path


def lines(*records):
    return "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records)


# --------------------------------------------------------------------- formats


def test_casrel_json_array(tmp_path):
    text = "Tim Brooke-Taylor was the star of Bananaman , an STV series ."
    path = write(tmp_path, "a.json", json.dumps([
        {"text": text, "triple_list": [["Bananaman", "starring", "Brooke-Taylor"], ["Bananaman", "broadcastedBy", "STV"]]},
        {"text": "Nothing here ."},
    ], indent=2))
    result = read_triples_file(path)
    report = result.report
    assert report.format == "casrel" and report.examples == 2
    assert report.triples_read == report.triples == 2 and report.unannotated == 1
    first = result.examples[0]
    assert first.source == f"{path}:2"  # the line where the record starts
    for t in first.triples:
        for span in (t.subject, t.object):
            assert text[span.start : span.end] == span.text
    assert first.triples[0].subject == Span(34, 43, "Bananaman")
    assert first.triples[0].object == Span(4, 17, "Brooke-Taylor")
    assert result.examples[1].triples == []


def test_casrel_json_lines_and_gzip(tmp_path):
    content = lines({"text": "A B C", "triple_list": [["A", "r", "C"]]}, {"text": "D E", "triple_list": []})
    path = write(tmp_path, "data.txt", gzip.compress(content.encode()), binary=True)  # no .gz in the name
    result = read_triples_file(path)
    assert [len(e.triples) for e in result.examples] == [1, 0]
    assert result.report.empty == 1 and result.examples[1].source.endswith(":2")


def test_duie_lic2019(tmp_path):
    text = "《离开》是由张宇谱曲，演唱的歌曲"
    path = write(tmp_path, "train_data.json", lines({
        "postag": [{"word": "离开", "pos": "nw"}],
        "text": text,
        "spo_list": [
            {"predicate": "歌手", "object_type": "人物", "subject_type": "歌曲", "object": "张宇", "subject": "离开"},
            {"predicate": "作曲", "object_type": "人物", "subject_type": "歌曲", "object": "张宇", "subject": "离开"},
        ],
    }))
    result = read_triples_file(path)
    assert result.report.format == "duie" and result.report.triples == 2
    t = result.examples[0].triples[0]
    assert (t.subject, t.predicate, t.object) == (Span(1, 3, "离开"), "歌手", Span(6, 8, "张宇"))
    assert predicates_of(result.examples) == ["作曲", "歌手"]


def test_duie2_and_cmeie_object_values(tmp_path):
    text = "《小猪佩奇》是一部英国动画片，由张三配音"
    path = write(tmp_path, "duie2.json", lines({
        "text": text,
        "spo_list": [
            {"predicate": "配音", "subject": "张三", "subject_type": "人物",
             "object": {"@value": "佩奇", "inWork": "小猪佩奇"}, "object_type": {"@value": "人物", "inWork": "影视作品"}},
            {"predicate": "国籍", "subject": "小猪佩奇", "object": {"@value": "英国"}, "Combined": False},
        ],
    }))
    result = read_triples_file(path)
    assert [t.object.text for t in result.examples[0].triples] == ["佩奇", "英国"]
    assert result.report.ignored == {"object slot 'inWork' (DuIE 2.0 complex object; only @value is used)": 1}
    assert "inWork" in result.report.summary()


def test_format_can_be_forced_and_must_agree(tmp_path):
    path = write(tmp_path, "mixed.jsonl", lines(
        {"text": "a b", "triple_list": [["a", "r", "b"]]},
        {"text": "a b", "spo_list": [{"subject": "a", "predicate": "r", "object": "b"}]},
    ))
    with pytest.raises(InputDataError, match=r"mixed.jsonl, line 2: record looks like duie but line 1 says casrel"):
        read_triples_file(path)
    with pytest.raises(InputDataError, match="line 1: record looks like casrel but the format given says duie"):
        read_triples_file(path, format="duie")


# ------------------------------------------------------------ entity location


def test_pairing_rule_closest_occurrences_then_earliest():
    # "Paris" twice, "France" once: the Paris closest to France is chosen.
    text = "Paris is nice ; the capital of France is Paris ."
    result_s, how = locate(text, "Paris")
    assert result_s == [0, 41] and how == "exact"
    o, _ = locate(text, "France")
    s, o = pair_closest(result_s, 5, o, 6)
    assert (s, o) == (41, 31)
    # Equal distances: the earliest subject wins.
    assert pair_closest([0, 10], 1, [5], 1) == (0, 5)


def test_pairing_rule_prefers_spans_that_do_not_overlap(tmp_path):
    # The object "Cesena" also occurs inside the subject "A.C. Cesena": the
    # standalone one is chosen although the nested one is closer (gap 0).
    text = "A.C. Cesena , in the Serie B League , is located in Cesena ."
    path = tmp_path / "t.json"
    path.write_text(json.dumps([{"text": text, "triple_list": [["A.C. Cesena", "ground", "Cesena"]]}]))
    (triple,) = read_triples_file(path).examples[0].triples
    assert (triple.subject.start, triple.object.start) == (0, text.rindex("Cesena"))
    assert pair_closest([0], 11, [5, 52], 6) == (0, 52)
    # With no other occurrence the overlapping pair is still taken.
    assert pair_closest([0], 11, [5], 6) == (0, 5)


def test_word_boundaries_are_preferred_and_accents_folded(tmp_path):
    text = "Bananaman is an STV show about Medellin , COLOMBIA ."
    assert locate(text, "an")[0] == [13]  # not inside "Bananaman"
    assert locate(text, "nam") == ([4], "inside word")  # only inside a word: still found, flagged
    path = write(tmp_path, "nyt.json", json.dumps([{"text": text, "triple_list": [
        ["Colombia", "/location/location/contains", "Medellín"],
        ["Bananaman", "broadcastedBy", "STV"],
        ["Bananaman", "genre", "nam"],
    ]}]))
    result = read_triples_file(path)
    t = result.examples[0].triples[0]
    assert t.subject.text == "COLOMBIA" and t.object.text == "Medellin"  # the text's own spelling
    assert result.report.folded == 2 and result.report.inside_word == 1
    assert "folding accents/case" in result.report.summary()


def test_unfound_entities_are_reported_and_kept(tmp_path):
    path = write(tmp_path, "u.jsonl", lines(
        {"text": "Alice met Bob .", "triple_list": [["Alice", "met", "Bob"], ["Alice", "met", "Carol"]]},
        {"text": "Dave left .", "triple_list": [["Erin", "left", "Frank"], ["Erin", "met", "Dave"]]},
    ))
    result = read_triples_file(path)
    r = result.report
    assert r.triples_read == 4 and r.triples == 1
    assert r.unfound == {"object not found": 1, "subject and object not found": 1, "subject not found": 1}
    assert r.unfound_locations == [f"{path}:1", f"{path}:2", f"{path}:2"]
    assert result.examples[0].unlocated == [("Alice", "met", "Carol")]
    assert "NOT LOCATED 1 triples: object not found" in r.summary()
    assert r.triples_read == r.triples + r.duplicates + r.unfound_triples


def test_duplicates_and_ambiguity_are_counted(tmp_path):
    path = write(tmp_path, "d.jsonl", lines({"text": "A likes B and A likes B .",
                                             "triple_list": [["A", "likes", "B"], ["A", "likes", "B"]]}))
    r = read_triples_file(path).report
    assert (r.triples, r.duplicates, r.ambiguous, r.occurrences) == (1, 1, 2, 8)


def test_write_jsonl_round_trip(tmp_path):
    source = write(tmp_path, "s.jsonl", lines({"text": "Alice met Bob .", "triple_list": [["Alice", "met", "Bob"], ["Alice", "met", "Zed"]]}))
    examples = read_triples_file(source).examples
    write_jsonl(examples, tmp_path / "o.jsonl")
    again = read_triples_file(tmp_path / "o.jsonl").examples
    assert again[0].triples == examples[0].triples and again[0].unlocated == examples[0].unlocated


# ------------------------------------------------------------------ malformed


@pytest.mark.parametrize(
    "content, where, problem",
    [
        ('{"text": "a", "triple_list": []}\n{"text": oops}\n', "line 2", "invalid JSON"),
        ('[\n{"text": "a", "triple_list": []},\n{"text": "b" "triple_list": []}\n]\n', "line 3", "invalid JSON"),
        ('[\n{"text": "a", "triple_list": []}\n', "line 2", "not closed"),
        ('{"sentence": "a", "triple_list": []}\n', "line 1", 'missing "text"'),
        ('{"text": 5, "triple_list": []}\n', "line 1", '"text" must be a string'),
        ('{"text": "a b", "triple_list": [["a", "r"]]}\n', "line 1", "3-item list"),
        ('{"text": "a b", "triple_list": [["a", "r", 3]]}\n', "line 1", "non-empty strings"),
        ('{"text": "a b", "triple_list": "a r b"}\n', "line 1", "must be an array"),
        ('{"text": "a b", "spo_list": [{"subject": "a", "object": "b"}]}\n', "line 1", "'predicate'"),
        ('{"text": "a b", "spo_list": [{"subject": "a", "predicate": "r", "object": {"type": "b"}}]}\n', "line 1", "@value"),
        ('["text", "a"]\n', "line 1", "expected a JSON object"),
        ("", None, "no examples"),
        ("[]", None, "no examples"),
    ],
)
def test_malformed_input_names_file_and_line(tmp_path, content, where, problem):
    path = write(tmp_path, "bad.json", content)
    with pytest.raises(InputDataError) as err:
        read_triples_file(path)
    message = str(err.value)
    assert message.startswith(str(path)) and problem in message
    if where:
        assert where in message


def test_non_utf8_names_the_line(tmp_path):
    path = write(tmp_path, "latin1.jsonl", b'{"text": "a", "triple_list": []}\n{"text": "na\xefve"}\n', binary=True)
    with pytest.raises(InputDataError, match=r"latin1.jsonl, line 2: not UTF-8"):
        read_triples_file(path)


def test_unknown_format_is_an_error(tmp_path):
    path = write(tmp_path, "x.json", "[]")
    with pytest.raises(InputDataError, match="unknown triple format"):
        read_triples_file(path, format="tplinker")


# -------------------------------------------------------------------- schemas


def test_schema_formats(tmp_path):
    rows = write(tmp_path, "all_50_schemas", lines(
        {"object_type": "地点", "predicate": "祖籍", "subject_type": "人物"},
        {"object_type": "Date", "predicate": "成立日期", "subject_type": "机构"},
        {"object_type": "Date", "predicate": "成立日期", "subject_type": "企业"},
        {"object_type": {"@value": "人物"}, "predicate": "配音", "subject_type": "娱乐人物"},
    ))
    schema = read_schema(rows)
    assert schema.predicates == ["祖籍", "成立日期", "配音"]
    assert schema.types["成立日期"] == [("机构", "Date"), ("企业", "Date")]
    assert schema.types["配音"] == [("娱乐人物", "人物")]
    pair = write(tmp_path, "rel2id.json", json.dumps([{"0": "b", "1": "a"}, {"b": 0, "a": 1}]))
    assert read_schema(pair).predicates == ["b", "a"]
    single = write(tmp_path, "rel2id1.json", json.dumps([{"x": 1, "y": 0}]))
    assert read_schema(single).predicates == ["y", "x"]
    plain = write(tmp_path, "rels.json", json.dumps({"x": 0, "y": 1}))
    assert read_schema(plain).predicates == ["x", "y"]
    names = write(tmp_path, "names.json", json.dumps(["p", "q"]))
    assert read_schema(names).predicates == ["p", "q"]


@pytest.mark.parametrize(
    "content, problem",
    [
        ("", "empty schema"),
        ('{"predicate": "a"}\n{"subject_type": "x"}\n', "line 2"),
        (json.dumps([{"0": "a"}, {"a": "zero"}]), "integer ids"),
        (json.dumps({"a": 0, "b": 2}), "without gaps"),
        (json.dumps([{"0": "a", "1": "b"}, {"a": 1, "b": 0}]), "disagree"),
    ],
)
def test_bad_schema(tmp_path, content, problem):
    with pytest.raises(InputDataError, match=problem):
        read_schema(write(tmp_path, "schema.json", content))


# ------------------------------------------------------ the real shared files

SHARED = [
    # folder, file, sentences, triples (README), located, duplicates, unfound, predicates
    ("webnlg_casrel_star", "train_triples.json.gz", 5019, 11776, 11687, 89, 0, 170),
    ("webnlg_casrel_star", "val_triples.json", 500, 1118, 1113, 5, 0, 110),
    ("webnlg_casrel_star", "test_triples.json", 703, 1591, 1581, 10, 0, 125),
    ("webnlg_exact", "train_triples.json.gz", 5019, 11313, 11312, 1, 0, 211),
    ("webnlg_exact", "val_triples.json", 500, 1224, 1223, 1, 0, 144),
    ("webnlg_exact", "test_triples.json", 703, 1607, 1607, 0, 0, 149),
    ("nyt_casrel_star_partial", "val_triples.json.gz", 4999, 7976, 7976, 0, 0, 22),
    ("nyt_casrel_star_partial", "test_triples.json.gz", 5000, 8110, 8110, 0, 0, 22),
    ("nyt_exact_partial", "val_triples.json.gz", 5000, 8489, 7985, 504, 0, 22),
    ("nyt_exact_partial", "test_triples.json.gz", 5000, 8616, 8120, 496, 0, 22),
    ("cmeie", "val_triples.json.gz", 3585, 10626, 10613, 13, 0, 44),
]


@pytest.mark.parametrize("folder, name, sentences, triples, located, duplicates, unfound, predicates", SHARED,
                         ids=[f"{f}/{n}" for f, n, *_ in SHARED])
def test_shared_corpora_match_their_readme(folder, name, sentences, triples, located, duplicates, unfound, predicates):
    path = require_shared("data", folder, name)
    result = read_triples_file(path)
    r = result.report
    assert (r.examples, r.triples_read) == (sentences, triples)  # the README's counts
    assert (r.triples, r.duplicates, r.unfound_triples, len(r.predicates)) == (located, duplicates, unfound, predicates)
    assert r.triples_read == r.triples + r.duplicates + r.unfound_triples
    for example in result.examples[:300]:
        for t in example.triples:
            for span in (t.subject, t.object):
                assert example.text[span.start : span.end] == span.text


def test_nyt_exact_accents_are_found_by_folding():
    """NYT writes e.g. 'Medellín' in triples and 'Medellin' in the text: 47 + 44
    entities, all found after folding (none lost)."""
    for name, folded in (("val_triples.json.gz", 47), ("test_triples.json.gz", 44)):
        r = read_triples_file(require_shared("data", "nyt_exact_partial", name)).report
        assert r.folded == folded and r.unfound_triples == 0


def test_cmeie_is_duie2_style():
    r = read_triples_file(require_shared("data", "cmeie", "val_triples.json.gz")).report
    assert r.format == "duie" and r.inside_word == 5
    schema = read_schema(require_shared("data", "cmeie", "53_schemas.json"))
    rel2id = read_schema(require_shared("data", "cmeie", "rel2id.json"))
    assert len(schema.predicates) == 44 and sum(len(v) for v in schema.types.values()) == 53
    assert set(schema.predicates) == set(rel2id.predicates) == set(r.predicates)


@pytest.mark.parametrize("parts, count", [
    (("webnlg_casrel_star", "rel2id.json"), 171),
    (("webnlg_exact", "rel2id.json"), 216),
    (("nyt_exact_partial", "rel2id.json"), 24),
    (("nyt_casrel_star_partial", "rel2id.json"), 24),
    (("duie_schemas", "duie2.0", "rel2id.json"), 48),
    # 50 schema lines; 成立日期 is listed for two subject types, so 49 predicates.
    (("duie_schemas", "lic2019", "all_50_schemas"), 49),
])
def test_shared_schemas(parts, count):
    schema = read_schema(require_shared("data", *parts))
    assert len(schema.predicates) == count


def test_webnlg_data_predicates_are_in_their_rel2id():
    for folder in ("webnlg_exact", "webnlg_casrel_star"):
        rels = set(read_schema(require_shared("data", folder, "rel2id.json")).predicates)
        data = read_triples_file(require_shared("data", folder, "test_triples.json")).report.predicates
        assert set(data) <= rels


def test_errors_in_a_one_line_json_array_name_the_record(tmp_path):
    """CasRel's WebNLG/NYT files are one JSON array on one line: the line
    alone locates nothing, so errors name the record (1-based) too."""
    path = tmp_path / "train.json"
    path.write_text(json.dumps([{"text": "a b", "triple_list": [["a", "r", "b"]]},
                                {"text": "a b", "triple_list": [["a", "r"]]}]), encoding="utf-8")
    with pytest.raises(InputDataError, match=r"train\.json, record 2 \(line 1\): each triple must be a 3-item list"):
        read_triples_file(path)
    path.write_text('[{"text": "a b", "triple_list": []}, {"text": oops}]', encoding="utf-8")
    with pytest.raises(InputDataError, match=r"train\.json, record 2 \(line 1\): invalid JSON"):
        read_triples_file(path)
