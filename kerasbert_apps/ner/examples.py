"""NER examples and what reading them did: the internal form every reader returns.

Internal form
-------------
An :class:`Example` holds ``text``, its ``entities`` (:class:`Entity` with
character offsets into ``text``, ``end`` exclusive), ``source`` (``"file:line"``
where the example starts) and ``words``: the character spans of the original
tokens when the source was tokenized (CoNLL, character-per-line, parallel
files), else ``None``. Entities are sorted by ``(start, end)`` and never
overlap, unless read with ``keep_overlaps`` (below).

Every reader returns a :class:`ReadResult`: the examples plus a
:class:`ReadReport` that counts what was read and everything that was skipped,
repaired or ignored, by reason. Nothing is dropped silently; callers print
``report.summary()``.

Overlapping or nested spans (JSON flavours)
-------------------------------------------
Exact duplicates (same start, end and type) are dropped and counted as
``duplicate span``. Among overlapping spans the rule is: keep the longest
span; on equal length the earliest start; then the one listed first. A span
is kept only if it overlaps no span kept before it in that order; every
dropped span is counted (``overlapping span``, and by kind: same span with
another type / nested / crossing) and the ``file:line`` of the first few
examples is listed in the report.

With ``keep_overlaps`` (the JSON readers, for a head whose registration
keeps them: one that represents nested and overlapping entities) no span is
dropped for an overlap: duplicates are still dropped, and the kept
overlapping spans are counted by the same kinds (a span inside another
counts as nested, before crossing). The other heads (the BIO taggers) read
with the rule above.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from kerasbert_apps.base.report import Report
from kerasbert.errors import InputDataError


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
        entities: entities sorted by ``(start, end)``; non-overlapping unless
            read with ``keep_overlaps``.
        source: ``"file:line"`` where the example starts.
        words: character spans of the source's tokens when the source was
            tokenized (CoNLL, character-per-line, parallel files), else None.
    """

    text: str
    entities: list[Entity]
    source: str
    words: list[tuple[int, int]] | None = None


@dataclass
class ReadReport(Report):
    """What a reader read, skipped, repaired and ignored. See :meth:`summary`.

    ``entities_read`` always equals ``entities + sum(skipped.values())``.
    """

    path: str = ""
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
    overlaps_kept: int = 0
    kept_overlap_kinds: dict[str, int] = field(default_factory=dict)
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
    from_predictions: int = 0
    ignored: dict[str, int] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    LINES = (
        ("types", "  types: {report.types:items}"),
        ("scheme", "  tag scheme: {report.scheme} ({report.scheme_reason})"),
        ("join", "  tokens: {report.tokens}, joined with {report.join!r}{report.strip_digit_note}"),
        ("separators", "  -DOCSTART- lines: {report.docstarts}, blank lines: {report.blank_lines}"),
        ("skipped", "  SKIPPED {n} entity spans: {key}"),
        ("overlaps", "  overlaps resolved: {n} spans dropped ({report.overlap_kinds:items}); "
                     "first at {report.overlap_locations:items}"),
        ("overlaps_kept", "  overlapping spans kept: {n} ({report.kept_overlap_kinds:items})"),
        ("trimmed", "  {n} spans trimmed of leading/trailing whitespace"),
        ("tag_violations", "  REPAIRED {n} x {key}"),
        ("violation_locations", "  first repairs at {n:items}"),
        ("unannotated", "  {n} records had no annotations (kept with no entities)"),
        ("from_predictions", "  {n} Label Studio tasks with no annotation read from their predictions (pre-annotations)"),
        ("ignored", "  ignored {n} x {key}"),
        ("notes", "  note: {key}"),
    )

    def headline(self):
        return f"{self.path} [{self.format}]: {self.examples} examples, {self.entities} entities kept of {self.entities_read} read"

    @property
    def strip_digit_note(self):
        return "" if self.strip_digit is None else f", segmentation digit stripped: {self.strip_digit}"

    @property
    def separators(self):
        return self.docstarts + self.blank_lines

    def violation(self, problem: str, location: str) -> None:
        """Count a repaired tag sequence and remember where."""
        self.count("tag_violations", problem)
        self.locate("violation_locations", location)


@dataclass
class ReadResult:
    """A reader's output: the examples and the report on how they were read."""

    examples: list[Example]
    report: ReadReport


# ---------------------------------------------------------------------------
# Finishing examples (shared by all readers)


def finish_entities(spans: list[Entity], text: str, source: str, report: ReadReport,
                     trim: bool = False, keep_overlaps: bool = False) -> list[Entity]:
    """Trim, deduplicate and resolve overlaps (rule in the module doc; with
    ``keep_overlaps`` overlapping spans are kept and counted); count everything."""
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
                report.count("skipped", "whitespace-only span")
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
            report.count("skipped", "duplicate span")
        else:
            seen.add(entity)
            unique.append(entity)
    if keep_overlaps:
        for entity in unique:
            kind = overlap_kind(entity, unique)
            if kind:
                report.overlaps_kept += 1
                report.count("kept_overlap_kinds", kind)
        unique.sort(key=lambda e: (e.start, e.end, e.type))
        report.entities += len(unique)
        for entity in unique:
            report.count("types", entity.type)
        return unique
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
        report.count("overlap_kinds", kind)
    if dropped:
        report.overlaps += dropped
        report.count("skipped", "overlapping span", dropped)
        report.locate("overlap_locations", source)
    kept.sort(key=lambda e: (e.start, e.end))
    report.entities += len(kept)
    for entity in kept:
        report.count("types", entity.type)
    return kept


def overlap_kind(entity: Entity, entities: list[Entity]) -> str | None:
    """How ``entity`` overlaps the others of ``entities``: ``"nested"`` (it
    lies inside another, not the same span), else ``"same span, other
    type"``, else ``"crossing"``; None when it overlaps none."""
    others = [o for o in entities if o != entity and o.start < entity.end and entity.start < o.end]
    if any(o.start <= entity.start and entity.end <= o.end and (o.start, o.end) != (entity.start, entity.end)
           for o in others):
        return "nested"
    if any((o.start, o.end) == (entity.start, entity.end) for o in others):
        return "same span, other type"
    if any(not (entity.start <= o.start and o.end <= entity.end) for o in others):
        return "crossing"
    return None


def finish_report(path, report: ReadReport, examples: list[Example]) -> ReadResult:
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


def entity_types(train_examples, dev_examples, train_path):
    """The sorted entity types of a training run's examples (the labels of a
    span head; a BIO head makes its tags of them). Raises when the training
    data (``train_path``) has no entity; prints a note for types only dev has."""
    from kerasbert.errors import KerasbertError

    types = sorted({e.type for ex in train_examples for e in ex.entities})
    if not types:
        raise KerasbertError(f"{train_path}: no entities in the training data; nothing to learn")
    dev_only = sorted({e.type for ex in dev_examples for e in ex.entities} - set(types))
    if dev_only:
        print(f"note: entity type(s) {', '.join(dev_only)} occur in dev but not in train; "
              f"they cannot be predicted and count as misses in dev scores")
    return types
