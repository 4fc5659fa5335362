"""Triple data readers: every supported file becomes a list of :class:`TripleExample`.

Internal form
-------------
A :class:`TripleExample` holds ``text``, its ``triples`` (:class:`Triple`:
``subject`` and ``object`` are :class:`Span` with character offsets into
``text``, ``end`` exclusive, and ``Span.text == text[start:end]``; ``predicate``
a string), ``source`` (``"file:line"``) and ``unlocated``: the annotated
``(subject, predicate, object)`` strings that could not be found in the text
(kept so that evaluation counts them as gold triples the model must miss,
instead of silently making the task easier).

Every reader returns a :class:`TripleReadResult`: the examples and a
:class:`TripleReadReport` that counts what was read and everything that was
skipped, repaired or ignored, by reason; callers print ``report.summary()``.

Supported files (gzip is detected from the magic bytes, whatever the name;
UTF-8 with or without BOM; one JSON array, or one JSON object per line)
-------------------------------------------------------------------------
* ``casrel``: ``{"text", "triple_list": [[subject, predicate, object], ...]}``
  (CasRel / PRGC / TPLinker NYT, NYT*, WebNLG, WebNLG*).
* ``duie``: ``{"text", "spo_list": [{"subject", "predicate", "object",
  ...}]}`` (LIC2019 / DuIE 1.0), and DuIE 2.0 / CMeIE where ``object`` (and
  ``object_type``) is ``{"@value": ..., other slots...}``: ``@value`` is the
  object; the other slots of DuIE 2.0's complex objects (``inWork``,
  ``onDate``, ...) are ignored and counted per slot name. Other keys of an SPO
  (``subject_type``, ``Combined``, ...) are not used.

The format is detected per file from the first record with a ``triple_list``
or ``spo_list``; every record must agree. A record with neither key is kept
with no triples and counted as ``unannotated``.

Locating entities
-----------------
The files give entity *strings*; their positions are found by string search
in the original text:

1. **all occurrences** of the exact string are found. Occurrences whose edges
   fall at a word boundary (no Latin/Greek/Cyrillic letter or digit on both
   sides of an edge; CJK characters are always boundaries) are preferred, so
   that ``"an"`` is not located inside ``"Bananaman"``; if every occurrence is
   inside a word they are all used (counted as ``inside a word``).
2. If the exact string does not occur, it is searched again with accents and
   case folded (character by character, so offsets stay true): NYT writes
   ``Medellín`` in triples and ``Medellin`` in the text. Counted as
   ``found after folding accents/case``; the span's text is what the text
   says (``Medellin``), and gold/predicted triples are compared on that.
3. **Pairing rule**: among all subject occurrences x all object occurrences,
   pairs whose two spans do not overlap come first (in WebNLG, ``A.C. Cesena
   ground Cesena`` means the standalone ``Cesena``, not the one inside the
   club's name), then the pair whose spans are closest (the gap between
   them; 0 when they touch); ties go to the earliest (subject start, object
   start). Overlapping spans are chosen only when no other pair exists.
   Triples where the subject or the object occurs more than once are counted
   as ``ambiguous`` (the rule above decided), and the total number of
   occurrences is reported.
4. A triple whose subject or object string is not found even after folding is
   **not dropped silently**: it is counted by reason (subject / object /
   both not found), the first few ``file:line`` are listed, and it is kept in
   ``TripleExample.unlocated``.

Exact duplicate triples (same spans and predicate) in a sentence are kept once
and counted.

Schemas (:func:`read_schema`)
-----------------------------
* LIC2019 ``all_50_schemas`` / CMeIE ``53_schemas.json``: one
  ``{"subject_type", "predicate", "object_type"}`` per line (DuIE 2.0 writes
  ``object_type`` as ``{"@value": ...}``); a predicate listed with several type
  pairs is one predicate;
* CasRel-style ``rel2id.json``: ``[id2rel, rel2id]``, ``[rel2id]``, a
  ``{rel: id}`` object or a list of names.
"""

from __future__ import annotations

import collections
import json
import unicodedata
from dataclasses import dataclass, field

from kerasbert_apps.base.report import Report
# gzip/BOM/strict UTF-8 with the failing line, and JSON lines / JSON arrays
# with line numbers for every record.
from kerasbert.files.data import json_records as _json_records
from kerasbert.files.data import read_text as _read_text
from kerasbert.files.data import records_flavour
from kerasbert.errors import InputDataError

__all__ = [
    "Span",
    "Triple",
    "TripleExample",
    "TripleReadReport",
    "TripleReadResult",
    "Schema",
    "read_triples_file",
    "read_schema",
    "locate",
    "write_jsonl",
]

FORMATS = ("casrel", "duie")


@dataclass(frozen=True)
class Span:
    """``text[start:end]`` (end exclusive) and that text."""

    start: int
    end: int
    text: str


@dataclass(frozen=True)
class Triple:
    subject: Span
    predicate: str
    object: Span

    def key(self):
        """``(subject text, predicate, object text)``: what exact-match scoring compares."""
        return (self.subject.text, self.predicate, self.object.text)


@dataclass
class TripleExample:
    """One sentence with its located triples (see the module doc)."""

    text: str
    triples: list[Triple]
    source: str = ""
    unlocated: list[tuple[str, str, str]] = field(default_factory=list)


@dataclass
class TripleReadReport(Report):
    """What a reader read, located, skipped and ignored.

    ``triples_read == triples + duplicates + sum(unfound.values())``.
    """

    path: str = ""
    format: str = ""
    examples: int = 0
    triples_read: int = 0
    triples: int = 0
    predicates: dict[str, int] = field(default_factory=dict)
    unfound: dict[str, int] = field(default_factory=dict)
    unfound_locations: list[str] = field(default_factory=list)
    duplicates: int = 0
    ambiguous: int = 0
    occurrences: int = 0
    folded: int = 0
    inside_word: int = 0
    unannotated: int = 0
    empty: int = 0
    ignored: dict[str, int] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    LINES = (
        ("unfound", "  NOT LOCATED {n} triples: {key} in the text (kept as unlocated gold; they count as misses in evaluation)"),
        ("unfound_locations", "  first not located at {n:items}"),
        ("duplicates", "  {n} duplicate triples in a sentence kept once"),
        ("ambiguous", "  {n} triples have a subject or object occurring more than once "
                      "({report.occurrences} occurrences of their entities); the closest pair, non-overlapping first, was chosen"),
        ("folded", "  {n} entities found only after folding accents/case (spans hold the text's spelling)"),
        ("inside_word", "  {n} entities found only inside a word"),
        ("empty", "  {n} examples have an empty triple list"),
        ("unannotated", "  {n} records had no triple_list/spo_list (kept with no triples)"),
        ("ignored", "  ignored {n} x {key}"),
        ("notes", "  note: {key}"),
    )

    @property
    def unfound_triples(self) -> int:
        return sum(self.unfound.values())

    def headline(self):
        return (f"{self.path} [{self.format}]: {self.examples} examples, "
                f"{self.triples} triples located of {self.triples_read} read, {len(self.predicates)} predicates")


@dataclass
class TripleReadResult:
    examples: list[TripleExample]
    report: TripleReadReport


# ---------------------------------------------------------------------------
# Locating entity strings


def _is_word_char(char: str) -> bool:
    """Letters and digits of alphabetic scripts: two of them side by side are inside one word."""
    return char.isalnum() and ord(char) < 0x2E80


def _at_boundaries(text: str, start: int, end: int) -> bool:
    left = start == 0 or not (_is_word_char(text[start - 1]) and _is_word_char(text[start]))
    right = end == len(text) or not (_is_word_char(text[end - 1]) and _is_word_char(text[end]))
    return left and right


def _fold_char(char: str) -> str:
    """One character without accents, lower-cased, if that stays one character."""
    base = "".join(c for c in unicodedata.normalize("NFD", char) if not unicodedata.combining(c))
    base = base.lower()
    return base if len(base) == 1 else char


def _fold(text: str) -> str:
    return "".join(_fold_char(c) for c in text)


def _find_all(haystack: str, needle: str) -> list[int]:
    out, i = [], haystack.find(needle)
    while i >= 0:
        out.append(i)
        i = haystack.find(needle, i + 1)
    return out


def locate(text: str, entity: str, folded_text: str | None = None):
    """All occurrences of ``entity`` in ``text`` as ``(starts, how)``.

    ``how`` is ``"exact"``, ``"folded"`` (accents/case folded), ``"inside word"``
    (only occurrences inside words; with ``"folded "`` in front when both) or
    ``None`` when not found (``starts`` empty). See the module doc.
    """
    if not entity:
        return [], None
    starts, how = _find_all(text, entity), "exact"
    if not starts:
        folded_text = _fold(text) if folded_text is None else folded_text
        starts, how = _find_all(folded_text, _fold(entity)), "folded"
        if not starts:
            return [], None
    good = [s for s in starts if _at_boundaries(text, s, s + len(entity))]
    if good:
        return good, how
    return starts, ("inside word" if how == "exact" else "folded inside word")


def _gap(a: tuple[int, int], b: tuple[int, int]) -> int:
    return max(0, max(a[0], b[0]) - min(a[1], b[1]))


def _overlap(a: tuple[int, int], b: tuple[int, int]) -> bool:
    return max(a[0], b[0]) < min(a[1], b[1])


def pair_closest(subject_starts, subject_len, object_starts, object_len):
    """``(subject start, object start)``: the pairing rule of the module doc."""
    def rank(pair):
        subject, obj = (pair[0], pair[0] + subject_len), (pair[1], pair[1] + object_len)
        return _overlap(subject, obj), _gap(subject, obj), pair

    return min(((s, o) for s in subject_starts for o in object_starts), key=rank)


# ---------------------------------------------------------------------------
# Records


def _raw_triples(path, line, record, flavour, report):
    """``[(subject, predicate, object) strings]`` of a record, or None if it has no annotation key."""
    if flavour == "casrel":
        if "triple_list" not in record:
            return None
        items = record["triple_list"]
        if not isinstance(items, list):
            raise InputDataError(path, line, f'"triple_list" must be an array, not {type(items).__name__}')
        out = []
        for item in items:
            if not (isinstance(item, (list, tuple)) and len(item) == 3):
                raise InputDataError(path, line, f"each triple must be a 3-item list [subject, predicate, object], not {item!r}")
            if not all(isinstance(x, str) and x for x in item):
                raise InputDataError(path, line, f"triple items must be non-empty strings, not {item!r}")
            out.append(tuple(item))
        return out
    if "spo_list" not in record:
        return None
    items = record["spo_list"]
    if not isinstance(items, list):
        raise InputDataError(path, line, f'"spo_list" must be an array, not {type(items).__name__}')
    out = []
    for item in items:
        if not isinstance(item, dict):
            raise InputDataError(path, line, f'each "spo_list" item must be an object, not {item!r}')
        missing = [k for k in ("subject", "predicate", "object") if k not in item]
        if missing:
            raise InputDataError(path, line, f'an "spo_list" item has no {", ".join(repr(k) for k in missing)}: {item!r}')
        obj = item["object"]
        if isinstance(obj, dict):
            if "@value" not in obj:
                raise InputDataError(path, line, f'object {obj!r} has no "@value"')
            for slot in obj:
                if slot != "@value":
                    report.count("ignored", f"object slot {slot!r} (DuIE 2.0 complex object; only @value is used)")
            obj = obj["@value"]
        subject, predicate = item["subject"], item["predicate"]
        for name, value in (("subject", subject), ("predicate", predicate), ("object", obj)):
            if not isinstance(value, str) or not value:
                raise InputDataError(path, line, f"{name} must be a non-empty string, not {value!r}")
        out.append((subject, predicate, obj))
    return out


def _detect(record) -> str | None:
    if "triple_list" in record:
        return "casrel"
    if "spo_list" in record:
        return "duie"
    return None


def _locate_triples(text, raw, source, report):
    """Located triples and unlocated raw triples of one example; updates the report."""
    triples, seen, unlocated = [], set(), []
    folded_text = None
    cache = {}
    for subject, predicate, obj in raw:
        report.triples_read += 1
        found = []
        for entity in (subject, obj):
            if entity not in cache:
                if folded_text is None and entity not in text:
                    folded_text = _fold(text)
                cache[entity] = locate(text, entity, folded_text)
            found.append(cache[entity])
        (s_starts, s_how), (o_starts, o_how) = found
        if not s_starts or not o_starts:
            reason = ("subject and object not found" if not s_starts and not o_starts
                      else "subject not found" if not s_starts else "object not found")
            report.count("unfound", reason)
            report.locate("unfound_locations", source)
            unlocated.append((subject, predicate, obj))
            continue
        for how in (s_how, o_how):
            if how.startswith("folded"):
                report.folded += 1
            if how.endswith("inside word"):
                report.inside_word += 1
        if len(s_starts) > 1 or len(o_starts) > 1:
            report.ambiguous += 1
            report.occurrences += len(s_starts) + len(o_starts)
        s, o = pair_closest(s_starts, len(subject), o_starts, len(obj))
        triple = Triple(Span(s, s + len(subject), text[s : s + len(subject)]), predicate,
                        Span(o, o + len(obj), text[o : o + len(obj)]))
        if triple in seen:
            report.duplicates += 1
            continue
        seen.add(triple)
        triples.append(triple)
        report.triples += 1
        report.count("predicates", predicate)
    return triples, unlocated


def read_triples_file(path, format: str = "auto", text_key: str = "text") -> TripleReadResult:
    """Read a CasRel / DuIE / DuIE 2.0 / CMeIE file into examples.

    Args:
        path: the file (may be gzip-compressed).
        format: ``"auto"``, ``"casrel"`` or ``"duie"`` (module doc).
        text_key: key of the text.

    Raises:
        InputDataError: unreadable or non-UTF-8 file, invalid JSON, a record
            that is not an object, missing or non-string text, a triple that
            is not a 3-item list of strings, an SPO without subject, predicate
            or object, records of another format, no examples.
    """
    if format not in ("auto",) + FORMATS:
        raise InputDataError(path, None, f"unknown triple format {format!r}: use auto, casrel or duie")
    records = _json_records(path, _read_text(path))
    flavour = records_flavour(path, records, _detect, format)
    report = TripleReadReport(str(path), format=flavour or "casrel")
    if flavour is None:
        report.notes.append("no record has a triple_list or spo_list")
        flavour = "casrel"
    examples = []
    for line, record in records:
        if text_key not in record:
            raise InputDataError(path, line, f'missing "{text_key}" key')
        text = record[text_key]
        if not isinstance(text, str):
            raise InputDataError(path, line, f'"{text_key}" must be a string, not {type(text).__name__}')
        source = f"{path}:{line}"
        raw = _raw_triples(path, line, record, flavour, report)
        if raw is None:
            report.unannotated += 1
            raw = []
        elif not raw:
            report.empty += 1
        triples, unlocated = _locate_triples(text, raw, source, report)
        examples.append(TripleExample(text, triples, source, unlocated))
    if not examples:
        raise InputDataError(path, None, "no examples in the file (empty)")
    report.examples = len(examples)
    report.predicates = dict(sorted(report.predicates.items()))
    return TripleReadResult(examples, report)


def write_jsonl(examples, path) -> None:
    """Write examples as CasRel-style JSON lines (``text``, ``triple_list`` of
    strings; unlocated triples included), readable by :func:`read_triples_file`."""
    with open(path, "w", encoding="utf-8") as f:
        for ex in examples:
            record = {
                "text": ex.text,
                "triple_list": [[t.subject.text, t.predicate, t.object.text] for t in ex.triples]
                + [list(u) for u in ex.unlocated],
            }
            f.write(json.dumps(record, ensure_ascii=False) + "\n")


# ---------------------------------------------------------------------------
# Schemas


@dataclass
class Schema:
    """The predicates of a task (ordered; index = predicate id) and, when the
    file gives them, the ``(subject_type, object_type)`` pairs of each."""

    predicates: list[str]
    types: dict[str, list[tuple[str, str]]] = field(default_factory=dict)
    path: str = ""
    format: str = ""

    def summary(self) -> str:
        pairs = sum(len(v) for v in self.types.values())
        extra = f", {pairs} (subject type, object type) pairs" if pairs else ""
        return f"{self.path} [{self.format}]: {len(self.predicates)} predicates{extra}"


def _value(v):
    return v.get("@value") if isinstance(v, dict) else v


def read_schema(path) -> Schema:
    """Read a schema or rel2id file (module doc) into a :class:`Schema`."""
    text = _read_text(path)
    stripped = text.strip()
    if not stripped:
        raise InputDataError(path, None, "empty schema file")
    whole = None
    try:
        whole = json.loads(stripped)
    except json.JSONDecodeError:
        pass  # JSON lines (or broken: reported with its line below)
    if isinstance(whole, dict) and "predicate" not in whole:
        return _rel2id(path, whole)
    if isinstance(whole, list):
        if whole and all(isinstance(x, str) for x in whole):
            return Schema(list(dict.fromkeys(whole)), path=str(path), format="list")
        dicts = [d for d in whole if isinstance(d, dict)]
        if len(dicts) != len(whole) or not dicts:
            raise InputDataError(path, None, "a JSON array schema must hold predicate names or rel2id objects")
        if "predicate" in dicts[0]:
            return _schema_rows(path, list(enumerate(dicts, 1)))
        return _rel2id(path, dicts[-1] if len(dicts) == 2 else dicts[0], id2rel=dicts[0] if len(dicts) == 2 else None)
    return _schema_rows(path, _json_records(path, text))


def _rel2id(path, rel2id, id2rel=None) -> Schema:
    try:
        items = sorted((int(i), str(r)) for r, i in rel2id.items())
    except (TypeError, ValueError):
        raise InputDataError(path, None, "rel2id must map relation names to integer ids") from None
    ids = [i for i, _ in items]
    if ids != list(range(len(ids))):
        raise InputDataError(path, None, f"relation ids must be 0..{len(ids) - 1} without gaps")
    if id2rel is not None:
        for i, r in items:
            if str(id2rel.get(str(i), id2rel.get(i, r))) != r:
                raise InputDataError(path, None, f"id2rel and rel2id disagree on id {i}")
    return Schema([r for _, r in items], path=str(path), format="rel2id")


def _schema_rows(path, records) -> Schema:
    predicates, types = [], collections.defaultdict(list)
    for line, row in records:
        if not isinstance(row, dict) or "predicate" not in row:
            raise InputDataError(path, line, 'each schema line must be an object with "predicate"')
        predicate = row["predicate"]
        if not isinstance(predicate, str) or not predicate:
            raise InputDataError(path, line, f"predicate must be a non-empty string, not {predicate!r}")
        if predicate not in types:
            predicates.append(predicate)
        pair = (_value(row.get("subject_type")), _value(row.get("object_type")))
        if pair != (None, None) and pair not in types[predicate]:
            types[predicate].append(pair)
        types.setdefault(predicate, [])
    if not predicates:
        raise InputDataError(path, None, "no predicates in the schema file")
    return Schema(predicates, dict(types), path=str(path), format="schema")


def predicates_of(examples) -> list[str]:
    """Sorted predicates of examples (located and unlocated triples)."""
    found = {t.predicate for ex in examples for t in ex.triples}
    found |= {u[1] for ex in examples for u in ex.unlocated}
    return sorted(found)
