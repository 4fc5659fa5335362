"""NER data readers: every supported file becomes a list of :class:`Example`.

Internal form
-------------
An :class:`Example` holds ``text``, its ``entities`` (:class:`Entity` with
character offsets into ``text``, ``end`` exclusive), ``source`` (``"file:line"``
where the example starts) and ``words``: the character spans of the original
tokens when the source was tokenized (CoNLL, character-per-line, parallel
files), else ``None``. Entities in an example never overlap and are sorted by
``(start, end)``.

Every reader returns a :class:`ReadResult`: the examples plus a
:class:`ReadReport` that counts what was read and everything that was skipped,
repaired or ignored, by reason. Nothing is dropped silently; callers print
``report.summary()``.

Supported files (gzip-compressed files are read transparently: the gzip magic
bytes are detected whatever the file name)
----------------------------------------------------------------------------
* **CoNLL column files** (:func:`read_conll`): one token per line, columns
  separated by runs of ASCII spaces/tabs (other Unicode spaces belong to the
  token), the token in the first column and the tag in ``tag_column``
  (default: last). Blank lines end sentences; ``-DOCSTART-`` lines end
  documents (counted; they are exempt from the column-count check). Every other
  line must have the same number of columns as the first token line. UTF-8
  with or without BOM, LF or CRLF line ends.
  The text is the tokens joined by ``join``: ``" "`` (single spaces) for
  tokenized text, ``""`` for Chinese character-per-line files (Weibo, MSRA,
  People's Daily). ``join="auto"`` picks ``""`` when at least 95% of the
  file's tokens are a single character and at least half of them are CJK
  characters (ideographs, CJK punctuation, full-width forms, kana), else
  ``" "``. ``words`` records each token's character span.
  Weibo NER writes each token as the character plus a one-digit word-segmentation
  position (``科0``, ``技1``). ``strip_digit="auto"`` removes that digit when
  every token of the file is at least two characters long and ends in an ASCII
  digit (no ordinary CoNLL file has this property); ``True`` requires and
  strips it, ``False`` keeps tokens as they are.
* **Parallel files** (:func:`read_parallel`): ``sentences.txt`` and
  ``tags.txt`` side by side (the MSRA layout of lemonhu/NER-BERT-pytorch):
  line *i* of each holds the space-separated tokens and the aligned tags.
* **JSON lines / JSON** (:func:`read_jsonl`); one object per line, or a JSON
  array of objects (a file whose first non-blank character is ``[``).
  Flavours, detected per file from the first record that carries annotations:

  - ``doccano``: ``{"text", "label": [[start, end, "TYPE"], ...]}`` (also
    ``"labels"``, and doccano 1.x's ``"data"`` string for the text) or the
    newer ``{"text", "entities": [{"start_offset", "end_offset", "label"},
    ...]}``; ends exclusive. ``relations`` are ignored and counted.
  - ``labelstudio`` (a JSON array of tasks, Label Studio's JSON export): a task ``{"data": {"text": ...}, "annotations":
    [{"result": [{"type": "labels", "value": {"start", "end", "labels":
    [TYPE]}}]}]}``; ends exclusive. The first annotation that is not
    cancelled is used; other annotations, predictions and results of other
    types are ignored and counted. A span with several labels gives one
    entity per label, so the overlap rule keeps the first label.
  - ``cluener``: ``{"text", "label": {TYPE: {mention: [[start, end], ...]}}}``
    with INCLUSIVE ends; ``text[start:end+1]`` must equal the mention.
  - ``kerasbert`` (what :func:`write_jsonl` writes): ``{"text", "entities":
    [{"start", "end", "type"}], "words": [[start, end], ...]?}``.

  A record with only a text (no annotation key, e.g. CLUENER's test.json) is
  kept with no entities and counted as ``unannotated``.
  Spans with leading/trailing whitespace are trimmed (counted as ``trimmed``);
  a span that is only whitespace is dropped (counted).

:func:`read_ner_file` dispatches by :func:`detect_format`.

Tag schemes and their detection
-------------------------------
Tags are ``O`` or ``P-TYPE`` with prefix ``P`` in B, I, E, S (BIOES), L, U
(BILOU: L = E, U = S) or M (BMES: M = I); anything else is an error.
Schemes: ``iob1`` (CoNLL-2003 original: ``I-`` starts an entity unless it
follows a token of the same type; ``B-`` only starts an entity directly after
an adjacent same-type entity), ``bio`` (= IOB2: every entity starts with
``B-``) and ``bioes`` (also BILOU/BMES). ``scheme="auto"`` decides per file:

1. any E-, S-, L-, U- or M- tag -> ``bioes``;
2. else, if some ``I-X`` starts an entity (first token of a sentence, after
   ``O`` or after another type) and every ``B-X`` follows a token of type X ->
   ``iob1``;
3. else ``bio`` (also for files with no entity tags at all).

Decoding is lenient but never silent: a tag sequence that breaks the scheme
(BIO ``I-X`` with no ``B-X`` before it, IOB1 ``B-X`` not after X, a BIOES
entity not closed by ``E-``/``S-`` ...) is decoded the conlleval way (the tag
starts a new entity; an unclosed entity ends where the next one begins) and
counted in ``report.tag_violations`` with the first few locations.

Overlapping or nested spans (JSON flavours)
-------------------------------------------
Exact duplicates (same start, end and type) are dropped and counted as
``duplicate span``. Among overlapping spans the rule is: keep the longest
span; on equal length the earliest start; then the one listed first. A span
is kept only if it overlaps no span kept before it in that order; every
dropped span is counted (``overlapping span``, and by kind: same span with
another type / nested / crossing) and the ``file:line`` of the first few
examples is listed in the report.
"""

from __future__ import annotations

import gzip
import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from kerasbert.datafiles import json_records as _json_records
from kerasbert.datafiles import read_text as _read_text
from kerasbert.datafiles import records_flavour
from kerasbert.datafiles import split_lines as _lines
from kerasbert.errors import InputDataError

__all__ = [
    "Entity",
    "Example",
    "ReadReport",
    "ReadResult",
    "read_conll",
    "read_parallel",
    "read_jsonl",
    "read_ner_file",
    "detect_format",
    "detect_scheme",
    "spans_to_tags",
    "label_set",
    "write_jsonl",
]

_SCHEME_ALIASES = {
    "iob1": "iob1",
    "bio": "bio",
    "iob2": "bio",
    "bioes": "bioes",
    "iobes": "bioes",
    "bilou": "bioes",
    "bmes": "bioes",
}
JSON_FLAVOURS = ("doccano", "labelstudio", "cluener", "kerasbert")
# How many file:line locations a report keeps per kind of problem.
MAX_LOCATIONS = 5

_TAG_RE = re.compile(r"([BIESLUM])-(\S+)")
# BILOU and BMES prefixes mapped onto BIOES.
_PREFIX_ALIASES = {"L": "E", "U": "S", "M": "I"}
_COLUMN_SPLIT = re.compile(r"[ \t]+")


@dataclass(frozen=True)
class Entity:
    """A typed character span: ``text[start:end]`` (end exclusive)."""

    start: int
    end: int
    type: str


@dataclass
class Example:
    """One sentence or document with its entities.

    Attributes:
        text: the text.
        entities: non-overlapping entities sorted by ``(start, end)``.
        source: ``"file:line"`` where the example starts.
        words: character spans of the source's tokens when the source was
            tokenized (CoNLL, character-per-line, parallel files), else None.
    """

    text: str
    entities: list[Entity]
    source: str
    words: list[tuple[int, int]] | None = None


@dataclass
class ReadReport:
    """What a reader read, skipped, repaired and ignored. See :meth:`summary`.

    ``entities_read`` always equals ``entities + sum(skipped.values())``.
    """

    path: str
    format: str = ""
    examples: int = 0
    tokens: int = 0
    entities_read: int = 0
    entities: int = 0
    types: dict[str, int] = field(default_factory=dict)
    skipped: dict[str, int] = field(default_factory=dict)
    overlaps: int = 0
    overlap_kinds: dict[str, int] = field(default_factory=dict)
    overlap_locations: list[str] = field(default_factory=list)
    trimmed: int = 0
    docstarts: int = 0
    blank_lines: int = 0
    scheme: str | None = None
    scheme_reason: str = ""
    join: str | None = None
    strip_digit: bool | None = None
    tag_violations: dict[str, int] = field(default_factory=dict)
    violation_locations: list[str] = field(default_factory=list)
    unannotated: int = 0
    ignored: dict[str, int] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    def summary(self) -> str:
        """Multi-line human-readable account, meant to be printed by callers."""
        lines = [
            f"{self.path} [{self.format}]: {self.examples} examples, "
            f"{self.entities} entities kept of {self.entities_read} read"
        ]
        if self.types:
            lines.append("  types: " + ", ".join(f"{t} {n}" for t, n in sorted(self.types.items())))
        if self.scheme:
            lines.append(f"  tag scheme: {self.scheme} ({self.scheme_reason})")
        if self.join is not None:
            lines.append(f"  tokens: {self.tokens}, joined with {self.join!r}"
                         + ("" if self.strip_digit is None else
                            f", segmentation digit stripped: {self.strip_digit}"))
        if self.docstarts or self.blank_lines:
            lines.append(f"  -DOCSTART- lines: {self.docstarts}, blank lines: {self.blank_lines}")
        for reason, n in sorted(self.skipped.items()):
            lines.append(f"  SKIPPED {n} entity spans: {reason}")
        if self.overlaps:
            kinds = ", ".join(f"{k} {n}" for k, n in sorted(self.overlap_kinds.items()))
            lines.append(f"  overlaps resolved: {self.overlaps} spans dropped ({kinds}); "
                         f"first at {', '.join(self.overlap_locations)}")
        if self.trimmed:
            lines.append(f"  {self.trimmed} spans trimmed of leading/trailing whitespace")
        for problem, n in sorted(self.tag_violations.items()):
            lines.append(f"  REPAIRED {n} x {problem}")
        if self.violation_locations:
            lines.append(f"  first repairs at {', '.join(self.violation_locations)}")
        if self.unannotated:
            lines.append(f"  {self.unannotated} records had no annotations (kept with no entities)")
        for what, n in sorted(self.ignored.items()):
            lines.append(f"  ignored {n} x {what}")
        lines.extend(f"  note: {note}" for note in self.notes)
        return "\n".join(lines)

    # Helpers used by the readers.
    def _skip(self, reason: str, n: int = 1) -> None:
        self.skipped[reason] = self.skipped.get(reason, 0) + n

    def _ignore(self, what: str, n: int = 1) -> None:
        self.ignored[what] = self.ignored.get(what, 0) + n

    def _violation(self, problem: str, location: str) -> None:
        self.tag_violations[problem] = self.tag_violations.get(problem, 0) + 1
        if len(self.violation_locations) < MAX_LOCATIONS:
            self.violation_locations.append(location)


@dataclass
class ReadResult:
    """A reader's output: the examples and the report on how they were read."""

    examples: list[Example]
    report: ReadReport


# ---------------------------------------------------------------------------
# Bytes and text


def _is_cjk(char: str) -> bool:
    code = ord(char)
    return (
        0x4E00 <= code <= 0x9FFF  # CJK unified ideographs
        or 0x3400 <= code <= 0x4DBF  # extension A
        or 0x20000 <= code <= 0x3FFFF  # extensions B and later
        or 0xF900 <= code <= 0xFAFF  # compatibility ideographs
        or 0x3000 <= code <= 0x30FF  # CJK punctuation, hiragana, katakana
        or 0xFF00 <= code <= 0xFFEF  # half-width and full-width forms
    )


def _auto_join(tokens: list[str]) -> str:
    """``""`` for character-per-line CJK text, ``" "`` otherwise (rule in the module doc)."""
    if not tokens:
        return " "
    single = sum(1 for t in tokens if len(t) == 1)
    cjk = sum(1 for t in tokens if len(t) == 1 and _is_cjk(t))
    return "" if single >= 0.95 * len(tokens) and cjk >= 0.5 * len(tokens) else " "


def _looks_like_weibo(tokens: list[str]) -> bool:
    return bool(tokens) and all(len(t) >= 2 and t[-1] in "0123456789" for t in tokens)


# ---------------------------------------------------------------------------
# Tags


def _scheme_name(path, scheme: str) -> str:
    name = _SCHEME_ALIASES.get(str(scheme).lower()) if scheme != "auto" else "auto"
    if name is None:
        raise InputDataError(
            path, None,
            f"unknown tag scheme {scheme!r}: use auto, iob1, bio (iob2), bioes (iobes, bilou, bmes)",
        )
    return name


def _parse_tag(path, line: int, tag: str) -> tuple[str, str]:
    """``(raw prefix, type)`` of a tag; ``("O", "")`` for O."""
    if tag == "O":
        return "O", ""
    match = _TAG_RE.fullmatch(tag)
    if match is None:
        raise InputDataError(
            path, line,
            f"invalid tag {tag!r}: expected O or B-, I-, E-, S-, L-, U- or M- followed by a type (e.g. B-PER)",
        )
    return match.group(1), match.group(2)


def detect_scheme(sentences: list[list[tuple[str, str]]]) -> tuple[str, str]:
    """Tag scheme of a file from its parsed tags, by the rule in the module doc.

    Args:
        sentences: per sentence, the ``(raw prefix, type)`` of each token.

    Returns:
        ``(scheme, reason)`` with scheme ``"iob1"``, ``"bio"`` or ``"bioes"``.
    """
    prefixes = {prefix for sentence in sentences for prefix, _ in sentence}
    extra = sorted(prefixes & set("ESLUM"))
    if extra:
        return "bioes", "found " + ", ".join(p + "- tags" for p in extra)
    i_starts = b_misplaced = False
    for sentence in sentences:
        previous = ""
        for prefix, type_ in sentence:
            if prefix == "I" and previous != type_:
                i_starts = True
            elif prefix == "B" and previous != type_:
                b_misplaced = True
            previous = type_
    if i_starts and not b_misplaced:
        return "iob1", "I- tags start entities and every B- tag follows its own type"
    if not prefixes - {"O"}:
        return "bio", "no entity tags"
    if i_starts:
        return "bio", "B- tags start entities (some I- tags also do: repaired)"
    return "bio", "entities start with B-"


def _check_scheme_tags(path, scheme: str, parsed, lines) -> None:
    """Raise on the first tag whose prefix the (explicit) scheme does not allow."""
    if scheme == "bioes":
        return
    for sentence, sentence_lines in zip(parsed, lines):
        for (prefix, type_), line in zip(sentence, sentence_lines):
            if prefix not in "BIO":
                raise InputDataError(
                    path, line, f"tag '{prefix}-{type_}' is not valid in the {scheme.upper()} scheme"
                )


def _decode(tags: list[tuple[str, str]], scheme: str, report: ReadReport, locations: list[str]):
    """Entities ``(first token, last token + 1, type)`` of one sentence's tags.

    Lenient decoding; every deviation from ``scheme`` is counted in ``report``.
    """
    chunks = []
    start = None  # first token of the open entity
    open_type = None

    def close(end):
        nonlocal start, open_type
        if open_type is not None:
            chunks.append((start, end, open_type))
        start = open_type = None

    for i, (raw_prefix, type_) in enumerate(tags):
        prefix = _PREFIX_ALIASES.get(raw_prefix, raw_prefix)
        if scheme == "bioes":
            if open_type is not None and not (prefix in "IE" and type_ == open_type):
                report._violation("BIOES entity not closed by E-/S- (ended at the next tag)", locations[i])
                close(i)
            if prefix == "O":
                continue
            if prefix in "IE" and open_type is None:
                report._violation(f"BIOES {raw_prefix}- tag without B- (starts an entity)", locations[i])
            if open_type is None:
                start, open_type = i, type_
            if prefix in "ES":
                close(i + 1)
        else:
            if prefix == "O":
                close(i)
                continue
            if prefix == "B" or type_ != open_type:
                if scheme == "bio" and prefix == "I":
                    report._violation("BIO I- tag without B- (starts an entity)", locations[i])
                if scheme == "iob1" and prefix == "B" and type_ != open_type:
                    report._violation("IOB1 B- tag not after its own type", locations[i])
                close(i)
                start, open_type = i, type_
    if open_type is not None and scheme == "bioes":
        report._violation("BIOES entity not closed by E-/S- (ended at the next tag)", locations[-1])
    close(len(tags))
    return chunks


def spans_to_tags(words: list[tuple[int, int]], entities: list[Entity], scheme: str = "bio") -> list[str]:
    """Tags for tokens with character spans ``words`` (e.g. for CoNLL export).

    Args:
        words: character spans of the tokens, in order (``Example.words``).
        entities: entities whose starts and ends fall on token boundaries.
        scheme: ``"bio"``/``"iob2"``, ``"iob1"``, ``"bioes"`` or ``"bilou"``.

    Raises:
        ValueError: unknown scheme, an entity not on token boundaries, or
            overlapping entities.
    """
    name = str(scheme).lower()
    if name not in ("bio", "iob2", "iob1", "bioes", "iobes", "bilou"):
        raise ValueError(f"unknown tag scheme {scheme!r}")
    starts = {span[0]: i for i, span in enumerate(words)}
    ends = {span[1]: i for i, span in enumerate(words)}
    tags = ["O"] * len(words)
    previous_end, previous_type = None, None  # token after the last entity, and its type
    for entity in sorted(entities, key=lambda e: (e.start, e.end)):
        if entity.start not in starts or entity.end not in ends or ends[entity.end] < starts[entity.start]:
            raise ValueError(f"{entity} does not start and end on token boundaries")
        first, last = starts[entity.start], ends[entity.end]
        if any(tag != "O" for tag in tags[first:last + 1]):
            raise ValueError(f"{entity} overlaps another entity")
        type_ = entity.type
        if name in ("bio", "iob2"):
            tags[first:last + 1] = [f"B-{type_}"] + [f"I-{type_}"] * (last - first)
        elif name == "iob1":
            begin = "B" if (previous_end == first and previous_type == type_) else "I"
            tags[first:last + 1] = [f"{begin}-{type_}"] + [f"I-{type_}"] * (last - first)
        else:
            single, end = ("U", "L") if name == "bilou" else ("S", "E")
            if first == last:
                tags[first] = f"{single}-{type_}"
            else:
                tags[first:last + 1] = [f"B-{type_}"] + [f"I-{type_}"] * (last - first - 1) + [f"{end}-{type_}"]
        previous_end, previous_type = last + 1, type_
    return tags


# ---------------------------------------------------------------------------
# Finishing examples (shared by all readers)


def _finish_entities(spans: list[Entity], text: str, source: str, report: ReadReport,
                     trim: bool = False) -> list[Entity]:
    """Trim, deduplicate and resolve overlaps (rule in the module doc); count everything."""
    report.entities_read += len(spans)
    if trim:
        trimmed = []
        for entity in spans:
            start, end = entity.start, entity.end
            while start < end and text[start].isspace():
                start += 1
            while end > start and text[end - 1].isspace():
                end -= 1
            if start == end:
                report._skip("whitespace-only span")
                continue
            if (start, end) != (entity.start, entity.end):
                report.trimmed += 1
                entity = Entity(start, end, entity.type)
            trimmed.append(entity)
        spans = trimmed
    unique = []
    seen = set()
    for entity in spans:
        if entity in seen:
            report._skip("duplicate span")
        else:
            seen.add(entity)
            unique.append(entity)
    order = sorted(range(len(unique)),
                   key=lambda i: (-(unique[i].end - unique[i].start), unique[i].start, i))
    kept: list[Entity] = []
    dropped = 0
    for i in order:
        entity = unique[i]
        clash = next((k for k in kept if k.start < entity.end and entity.start < k.end), None)
        if clash is None:
            kept.append(entity)
            continue
        dropped += 1
        if (clash.start, clash.end) == (entity.start, entity.end):
            kind = "same span, other type"
        elif clash.start <= entity.start and entity.end <= clash.end:
            kind = "nested"
        else:
            kind = "crossing"
        report.overlap_kinds[kind] = report.overlap_kinds.get(kind, 0) + 1
    if dropped:
        report.overlaps += dropped
        report._skip("overlapping span", dropped)
        if len(report.overlap_locations) < MAX_LOCATIONS:
            report.overlap_locations.append(source)
    kept.sort(key=lambda e: (e.start, e.end))
    report.entities += len(kept)
    for entity in kept:
        report.types[entity.type] = report.types.get(entity.type, 0) + 1
    return kept


def _finish_report(path, report: ReadReport, examples: list[Example]) -> ReadResult:
    if not examples:
        raise InputDataError(path, None, "no examples in the file (empty)")
    report.examples = len(examples)
    report.types = dict(sorted(report.types.items()))
    damaged = sum(1 for ex in examples if "\ufffd" in ex.text)
    if damaged:
        report.notes.append(
            f"{damaged} examples contain U+FFFD replacement characters (characters lost upstream, kept as-is)"
        )
    return ReadResult(examples, report)


# ---------------------------------------------------------------------------
# Token/tag files (CoNLL columns, parallel sentences/tags)


def _build_examples(path, report, sentences, scheme, join, tag_path=None):
    """Examples from ``sentences`` = list of (tokens, tags, tag line numbers, token source).

    Shared by :func:`read_conll` and :func:`read_parallel`.
    """
    tag_path = path if tag_path is None else tag_path
    parsed = [[_parse_tag(tag_path, line, tag) for tag, line in zip(tags, lines)]
              for _, tags, lines, _ in sentences]
    tag_lines = [lines for _, _, lines, _ in sentences]
    scheme = _scheme_name(path, scheme)
    if scheme == "auto":
        scheme, reason = detect_scheme(parsed)
    else:
        reason = "given"
        _check_scheme_tags(tag_path, scheme, parsed, tag_lines)
    report.scheme, report.scheme_reason = scheme, reason

    all_tokens = [token for tokens, _, _, _ in sentences for token in tokens]
    if join == "auto":
        join = _auto_join(all_tokens)
    report.join = join
    report.tokens = len(all_tokens)

    examples = []
    for (tokens, _, lines, source), tags in zip(sentences, parsed):
        words, position = [], 0
        for token in tokens:
            words.append((position, position + len(token)))
            position += len(token) + len(join)
        text = join.join(tokens)
        locations = [f"{tag_path}:{line}" for line in lines]
        chunks = _decode(tags, scheme, report, locations)
        spans = [Entity(words[first][0], words[last - 1][1], type_) for first, last, type_ in chunks]
        entities = _finish_entities(spans, text, source, report)
        examples.append(Example(text, entities, source, words))
    return _finish_report(path, report, examples)


def read_conll(path, tag_column: int = -1, scheme: str = "auto", join: str = "auto",
               strip_digit="auto") -> ReadResult:
    """Read a CoNLL-style column file (one token per line) into examples.

    Args:
        path: the file (may be gzip-compressed).
        tag_column: index of the tag column (negative counts from the end);
            the token is always column 0.
        scheme: ``"auto"``, ``"iob1"``, ``"bio"``/``"iob2"`` or
            ``"bioes"``/``"iobes"``/``"bilou"``/``"bmes"``. See the module doc
            for the detection rule.
        join: string placed between tokens to build the text, or ``"auto"``
            (``""`` for character-per-line CJK files, else ``" "``).
        strip_digit: remove the Weibo NER segmentation digit from each token:
            ``"auto"`` (when every token ends in one), ``True`` or ``False``.

    Raises:
        InputDataError: bad column counts, invalid tags, tags the explicit
            scheme does not allow, no examples, non-UTF-8 bytes.
    """
    text = _read_text(path)
    report = ReadReport(str(path), format="conll")
    sentences = []  # (tokens, tags, tag line numbers, source)
    tokens, tags, lines = [], [], []
    width = width_line = None

    def end_sentence():
        nonlocal tokens, tags, lines
        if tokens:
            sentences.append((tokens, tags, lines, f"{path}:{lines[0]}"))
        tokens, tags, lines = [], [], []

    for number, line in enumerate(_lines(text), start=1):
        stripped = line.strip(" \t")
        if not stripped:
            report.blank_lines += 1
            end_sentence()
            continue
        columns = _COLUMN_SPLIT.split(stripped)
        if columns[0] == "-DOCSTART-":
            report.docstarts += 1
            end_sentence()
            continue
        if width is None:
            width, width_line = len(columns), number
            needed = tag_column + 1 if tag_column >= 0 else -tag_column
            if width < 2 or width < needed or tag_column in (0, -width):
                raise InputDataError(
                    path, number,
                    f"{width} column(s) but tag_column={tag_column} needs a tag column "
                    f"other than the token column (column 0)",
                )
        elif len(columns) != width:
            raise InputDataError(
                path, number, f"{len(columns)} columns, but line {width_line} has {width}"
            )
        tokens.append(columns[0])
        tags.append(columns[tag_column])
        lines.append(number)
    end_sentence()
    if not sentences:
        raise InputDataError(path, None, "no examples in the file (empty)")

    all_tokens = [token for sentence in sentences for token in sentence[0]]
    if strip_digit == "auto":
        strip_digit = _looks_like_weibo(all_tokens)
    elif strip_digit not in (True, False):
        raise InputDataError(path, None, f"strip_digit must be 'auto', True or False, not {strip_digit!r}")
    if strip_digit:
        for sentence_tokens, _, sentence_lines, _ in sentences:
            for i, (token, line) in enumerate(zip(sentence_tokens, sentence_lines)):
                if len(token) < 2 or token[-1] not in "0123456789":
                    raise InputDataError(
                        path, line, f"token {token!r} has no trailing segmentation digit to strip"
                    )
                sentence_tokens[i] = token[:-1]
    report.strip_digit = strip_digit
    return _build_examples(path, report, sentences, scheme, join)


def read_parallel(sentences_path, tags_path=None, scheme: str = "auto", join: str = "auto") -> ReadResult:
    """Read a ``sentences.txt`` / ``tags.txt`` pair (MSRA layout) into examples.

    Line *i* of ``sentences_path`` holds space-separated tokens, line *i* of
    ``tags_path`` (default: ``tags.txt`` beside it) their tags. A line pair
    that is blank in both files is counted and skipped.

    Args:
        sentences_path: the sentences file, or a folder holding
            ``sentences.txt`` and ``tags.txt``.
        tags_path: the tags file; default ``tags.txt`` next to the sentences.
        scheme, join: as in :func:`read_conll`.

    Raises:
        InputDataError: different line or token counts, invalid tags, no
            examples, non-UTF-8 bytes.
    """
    sentences_path = Path(sentences_path)
    if sentences_path.is_dir():
        sentences_path = sentences_path / "sentences.txt"
    tags_path = Path(tags_path) if tags_path is not None else sentences_path.with_name("tags.txt")
    sentence_lines = _lines(_read_text(sentences_path))
    tag_lines = _lines(_read_text(tags_path))
    if len(sentence_lines) != len(tag_lines):
        raise InputDataError(
            sentences_path, None,
            f"{len(sentence_lines)} lines but {tags_path} has {len(tag_lines)}",
        )
    report = ReadReport(str(sentences_path), format="parallel")
    report.notes.append(f"tags from {tags_path}")
    sentences = []
    for number, (tokens_line, tags_line) in enumerate(zip(sentence_lines, tag_lines), start=1):
        tokens = _COLUMN_SPLIT.split(tokens_line.strip(" \t")) if tokens_line.strip(" \t") else []
        tags = _COLUMN_SPLIT.split(tags_line.strip(" \t")) if tags_line.strip(" \t") else []
        if len(tokens) != len(tags):
            raise InputDataError(
                sentences_path, number, f"{len(tokens)} tokens but {len(tags)} tags on line {number} of {tags_path}"
            )
        if not tokens:
            report.blank_lines += 1
            continue
        sentences.append((tokens, tags, [number] * len(tokens), f"{sentences_path}:{number}"))
    if not sentences:
        raise InputDataError(sentences_path, None, "no examples in the file (empty)")
    return _build_examples(sentences_path, report, sentences, scheme, join, tag_path=tags_path)


# ---------------------------------------------------------------------------
# JSON flavours


def _record_flavour(record) -> str | None:
    """The JSON flavour a record's annotations show, or None if it has none to show."""
    if isinstance(record.get("data"), dict):
        return "labelstudio"
    entities = record.get("entities")
    if isinstance(entities, list) and entities and isinstance(entities[0], dict):
        if "start_offset" in entities[0]:
            return "doccano"
        if "start" in entities[0]:
            return "kerasbert"
    label = record.get("label", record.get("labels"))
    if isinstance(label, dict) and label:
        return "cluener"
    if isinstance(label, list) and label:
        return "doccano"
    return None


def _is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _span(path, line, text, start, end, type_) -> Entity:
    """A checked entity (end exclusive)."""
    if not isinstance(type_, str) or not type_:
        raise InputDataError(path, line, f"entity type must be a non-empty string, not {type_!r}")
    if not _is_int(start) or not _is_int(end):
        raise InputDataError(path, line, f"span offsets must be integers, not {start!r}, {end!r} ({type_})")
    if start >= end:
        raise InputDataError(path, line, f"span [{start}, {end}) for {type_!r}: start >= end")
    if start < 0 or end > len(text):
        raise InputDataError(
            path, line, f"span [{start}, {end}) for {type_!r} is outside the text (length {len(text)})"
        )
    return Entity(start, end, type_)


def _expect(path, line, value, kind, what):
    """``value`` if it is a ``kind`` (dict or list), else an InputDataError."""
    if not isinstance(value, kind):
        expected = "an object" if kind is dict else "an array"
        raise InputDataError(path, line, f"{what} must be {expected}, not {type(value).__name__}")
    return value


def _parse_record(path, line, record, flavour, report, text_key):
    """``(text, spans)`` of one record; ``spans`` is None when it has no annotations."""
    if flavour == "labelstudio":
        data = _expect(path, line, record.get("data"), dict, '"data"')
        if text_key not in data:
            raise InputDataError(path, line, f'missing "{text_key}" key in "data"')
        text = data[text_key]
    elif text_key not in record and flavour == "doccano" and isinstance(record.get("data"), str):
        text = record["data"]  # doccano 1.x exports put the text under "data"
    else:
        if text_key not in record:
            raise InputDataError(path, line, f'missing "{text_key}" key')
        text = record[text_key]
    if not isinstance(text, str):
        raise InputDataError(path, line, f'"{text_key}" must be a string')

    spans = []
    if flavour == "labelstudio":
        if record.get("predictions"):
            report._ignore("Label Studio predictions", len(record["predictions"]))
        annotations = [a for a in _expect(path, line, record.get("annotations", []), list, '"annotations"')
                       if not (isinstance(a, dict) and a.get("was_cancelled"))]
        cancelled = len(record.get("annotations", [])) - len(annotations)
        if cancelled:
            report._ignore("cancelled Label Studio annotations", cancelled)
        if not annotations:
            return text, None
        if len(annotations) > 1:
            report._ignore("extra Label Studio annotations (the first is used)", len(annotations) - 1)
        annotation = _expect(path, line, annotations[0], dict, "an annotation")
        for result in _expect(path, line, annotation.get("result", []), list, '"result"'):
            result = _expect(path, line, result, dict, "a result")
            if result.get("type") != "labels":
                report._ignore(f"Label Studio results of type {result.get('type')!r}")
                continue
            value = _expect(path, line, result.get("value"), dict, '"value"')
            labels = _expect(path, line, value.get("labels"), list, '"labels"')
            for type_ in labels:
                entity = _span(path, line, text, value.get("start"), value.get("end"), type_)
                if "text" in value and value["text"] != text[entity.start:entity.end]:
                    raise InputDataError(
                        path, line,
                        f"span [{entity.start}, {entity.end}) says {value['text']!r} but the text there is "
                        f"{text[entity.start:entity.end]!r}",
                    )
                spans.append(entity)
        return text, spans

    if flavour == "cluener":
        label = record.get("label")
        if label is None:
            return text, None
        for type_, mentions in _expect(path, line, label, dict, '"label"').items():
            for mention, positions in _expect(path, line, mentions, dict, f'"label"["{type_}"]').items():
                for position in _expect(path, line, positions, list, f"positions of {mention!r}"):
                    if not (isinstance(position, list) and len(position) == 2):
                        raise InputDataError(path, line, f"position of {mention!r} must be [start, end]")
                    start, last = position
                    end = last + 1 if _is_int(last) else last
                    entity = _span(path, line, text, start, end, type_)
                    if text[start:end] != mention:
                        raise InputDataError(
                            path, line,
                            f"mention {mention!r} at [{start}, {last}] (inclusive) but the text there is "
                            f"{text[start:end]!r}",
                        )
                    spans.append(entity)
        return text, spans

    if flavour == "kerasbert":
        if "entities" not in record:
            return text, None
        for item in _expect(path, line, record["entities"], list, '"entities"'):
            item = _expect(path, line, item, dict, "an entity")
            spans.append(_span(path, line, text, item.get("start"), item.get("end"), item.get("type")))
        return text, spans

    # doccano: "entities" (new) or "label"/"labels" (old)
    if "entities" in record:
        for item in _expect(path, line, record["entities"], list, '"entities"'):
            item = _expect(path, line, item, dict, "an entity")
            spans.append(_span(path, line, text, item.get("start_offset"), item.get("end_offset"),
                               item.get("label")))
        if record.get("relations"):
            report._ignore("doccano relations", len(record["relations"]))
        return text, spans
    key = "label" if "label" in record else "labels" if "labels" in record else None
    if key is None:
        return text, None
    for item in _expect(path, line, record[key], list, f'"{key}"'):
        if not (isinstance(item, list) and len(item) == 3):
            raise InputDataError(path, line, f'each "{key}" item must be [start, end, "TYPE"], not {item!r}')
        spans.append(_span(path, line, text, *item))
    return text, spans


def _read_words(path, line, record, text):
    words = record.get("words")
    if words is None:
        return None
    spans = []
    for item in _expect(path, line, words, list, '"words"'):
        if not (isinstance(item, list) and len(item) == 2 and all(_is_int(x) for x in item)
                and 0 <= item[0] <= item[1] <= len(text)):
            raise InputDataError(path, line, f'"words" item {item!r} is not a [start, end] span inside the text')
        spans.append((item[0], item[1]))
    return spans


def read_jsonl(path, format: str = "auto", text_key: str = "text") -> ReadResult:
    """Read a JSON-lines (or JSON array) file with character spans into examples.

    Args:
        path: the file (may be gzip-compressed).
        format: ``"auto"`` or one of ``doccano``, ``labelstudio``, ``cluener``,
            ``kerasbert`` (see the module doc). ``auto`` takes the flavour of
            the first record with annotations; every record must agree.
        text_key: key of the text (in ``"data"`` for Label Studio).

    Raises:
        InputDataError: invalid JSON, missing text, spans outside the text or
            with start >= end, CLUENER mentions that differ from the text,
            records of another flavour, no examples, non-UTF-8 bytes.
    """
    if format != "auto" and format not in JSON_FLAVOURS:
        raise InputDataError(path, None, f"unknown JSON format {format!r}: use auto or one of {', '.join(JSON_FLAVOURS)}")
    records = _json_records(path, _read_text(path))
    flavour = records_flavour(path, records, _record_flavour, format)
    report = ReadReport(str(path), format=flavour or "jsonl")
    if flavour is None:  # text-only records (or empty annotations): any flavour reads them alike
        report.notes.append("no record has entity annotations")
        flavour = "kerasbert"
    examples = []
    for line, record in records:
        source = f"{path}:{line}"
        text, spans = _parse_record(path, line, record, flavour, report, text_key)
        if spans is None:
            report.unannotated += 1
            spans = []
        entities = _finish_entities(spans, text, source, report, trim=True)
        words = _read_words(path, line, record, text) if flavour == "kerasbert" else None
        examples.append(Example(text, entities, source, words))
    return _finish_report(path, report, examples)


# ---------------------------------------------------------------------------
# Dispatch and writing


def detect_format(path) -> str:
    """``"parallel"``, ``"jsonl"`` or ``"conll"`` for a path.

    Rules, in order: a folder holding ``sentences.txt`` and ``tags.txt``, or a
    file named ``sentences.txt`` with ``tags.txt`` beside it -> ``parallel``;
    text starting with ``{`` whose first line is a JSON object, or starting
    with ``[`` and ending with ``]``, or a ``.json``/``.jsonl`` name ->
    ``jsonl``; anything else -> ``conll``.
    """
    path = Path(path)
    if path.is_dir():
        if (path / "sentences.txt").is_file() and (path / "tags.txt").is_file():
            return "parallel"
        raise InputDataError(path, None, "a folder must hold sentences.txt and tags.txt")
    name = path.name[:-3] if path.name.endswith(".gz") else path.name
    if name == "sentences.txt" and path.with_name("tags.txt").is_file():
        return "parallel"
    text = _read_text(path).strip()
    if text.startswith("{"):
        try:
            if isinstance(json.loads(text.split("\n", 1)[0]), dict):
                return "jsonl"
        except json.JSONDecodeError:
            pass
    if text.startswith("[") and text.endswith("]"):
        return "jsonl"
    if name.endswith((".json", ".jsonl")):
        return "jsonl"
    return "conll"


def read_ner_file(path, format: str = "auto", **options) -> ReadResult:
    """Read any supported NER file (see the module doc).

    Args:
        path: file or folder.
        format: ``"auto"`` (:func:`detect_format`), ``"conll"``, ``"parallel"``,
            ``"jsonl"`` or a JSON flavour (``doccano``, ``labelstudio``,
            ``cluener``, ``kerasbert``).
        **options: passed to the reader (:func:`read_conll`,
            :func:`read_parallel`, :func:`read_jsonl`).
    """
    if format == "auto":
        format = detect_format(path)
    if format == "conll":
        return read_conll(path, **options)
    if format == "parallel":
        return read_parallel(path, **options)
    if format == "jsonl":
        return read_jsonl(path, **options)
    if format in JSON_FLAVOURS:
        return read_jsonl(path, format=format, **options)
    raise InputDataError(
        path, None, f"unknown format {format!r}: use auto, conll, parallel, jsonl, {', '.join(JSON_FLAVOURS)}"
    )


def label_set(examples: list[Example]) -> list[str]:
    """The sorted entity types used in ``examples``."""
    return sorted({entity.type for example in examples for entity in example.entities})


def write_jsonl(examples: list[Example], path) -> None:
    """Write ``examples`` as kerasbert JSON lines (gzip if the name ends in .gz).

    One object per line: ``{"text", "entities": [{"start", "end", "type"}]}``
    plus ``"words": [[start, end], ...]`` when the example has words. UTF-8,
    no ASCII escaping. :func:`read_jsonl` reads it back.
    """
    lines = []
    for example in examples:
        record = {
            "text": example.text,
            "entities": [{"start": e.start, "end": e.end, "type": e.type} for e in example.entities],
        }
        if example.words is not None:
            record["words"] = [list(span) for span in example.words]
        lines.append(json.dumps(record, ensure_ascii=False) + "\n")
    data = "".join(lines).encode("utf-8")
    path = os.fspath(path)
    if path.endswith(".gz"):
        data = gzip.compress(data, mtime=0)
    Path(path).write_bytes(data)
