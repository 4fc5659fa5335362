"""Tag schemes: token tags <-> character spans, the one place for both directions.

* reading: :func:`parse_tag`, :func:`detect_scheme` and :func:`decode_tags`
  turn the tags of CoNLL-style files into entity chunks (the readers in
  :mod:`kerasbert_apps.ner.readers`);
* writing: :func:`spans_to_tags` turns entities into the tags of a scheme
  (CoNLL export), :func:`bio_tags` lists the BIO tags a tagger predicts, and
  :func:`spans_to_unit_tags` writes IOB2 tags over an example's units for
  seqeval (:mod:`kerasbert_apps.ner.evaluate`).

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

A file that mixes the two (sentences with E-/S- tags beside sentences whose
entities are tagged B-/I- only, :func:`sentence_schemes`) is read sentence by
sentence, each in its own scheme; its scheme is the majority's, and each
sentence of the other scheme is reported where it shows it.

Decoding is lenient but never silent: a tag sequence that breaks the scheme
(BIO ``I-X`` with no ``B-X`` before it, IOB1 ``B-X`` not after X, a BIOES
entity not closed by ``E-``/``S-`` ...) is decoded the conlleval way (the tag
starts a new entity; an unclosed entity ends where the next one begins) and
counted in ``report.tag_violations`` with the first few locations.
"""

from __future__ import annotations

import re

import numpy as np

from kerasbert_apps.base.scores import field
from kerasbert.errors import InputDataError

_SCHEME_ALIASES = {
    "iob1": "iob1",
    "bio": "bio",
    "iob2": "bio",
    "bioes": "bioes",
    "iobes": "bioes",
    "bilou": "bioes",
    "bmes": "bioes",
}
#: What ``--scheme`` accepts.
SCHEMES = ("auto",) + tuple(_SCHEME_ALIASES)

_TAG_RE = re.compile(r"([BIESLUM])-(\S+)")
# BILOU and BMES prefixes mapped onto BIOES.
_PREFIX_ALIASES = {"L": "E", "U": "S", "M": "I"}


def bio_tags(types):
    """``["O", "B-T1", "I-T1", "B-T2", ...]`` for the sorted entity types."""
    tags = ["O"]
    for t in sorted(types):
        tags += [f"B-{t}", f"I-{t}"]
    return tags


def scheme_name(path, scheme: str) -> str:
    name = _SCHEME_ALIASES.get(str(scheme).lower()) if scheme != "auto" else "auto"
    if name is None:
        raise InputDataError(
            path, None,
            f"unknown tag scheme {scheme!r}: use auto, iob1, bio (iob2), bioes (iobes, bilou, bmes)",
        )
    return name


def parse_tag(path, line: int, tag: str) -> tuple[str, str]:
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


def sentence_schemes(sentences: list[list[tuple[str, str]]]):
    """For a file detected as ``bioes`` (it has E-, S-, L-, U- or M- tags)
    whose sentences mix schemes -- some with those tags, others with entities
    tagged B-/I- only (BIO: entities no E- or S- closes) --, the scheme of
    each sentence: ``"bioes"`` for the first kind, ``"bio"`` for the second,
    ``""`` for a sentence with no entity. None when the file does not mix them.
    Reading each sentence in its own scheme gives the same entities as the
    lenient BIOES reading, and lets the report point at the sentences in the
    minority scheme (those that differ from the file) instead of counting
    every entity of the others as a repair."""
    marked = [any(prefix in "ESLUM" for prefix, _ in sentence if prefix != "O") for sentence in sentences]
    bio = [not m and any(prefix != "O" for prefix, _ in sentence) for sentence, m in zip(sentences, marked)]
    if not any(marked) or not any(bio):
        return None
    return ["bioes" if m else "bio" if b else "" for m, b in zip(marked, bio)]


def mixed_scheme(per_sentence: list[str]) -> tuple[str, str]:
    """``(scheme, reason)`` of a file whose sentences mix schemes
    (:func:`sentence_schemes`): the scheme of most of its sentences with
    entities."""
    bio, bioes = per_sentence.count("bio"), per_sentence.count("bioes")
    return ("bio" if bio >= bioes else "bioes",
            f"mixed: {bio} sentences B-/I- tagged (BIO), {bioes} with E-/S- tags (BIOES); each read in its own scheme")


def first_tag_of(tags: list[tuple[str, str]], scheme: str) -> int:
    """The token where a sentence shows its scheme: its first E-, S-, L-, U-
    or M- tag for ``"bioes"``, its first entity tag for ``"bio"``."""
    return next(i for i, (prefix, _) in enumerate(tags) if prefix != "O" and (scheme == "bio" or prefix in "ESLUM"))


def check_scheme_tags(path, scheme: str, parsed, lines) -> None:
    """Raise on the first tag whose prefix the (explicit) scheme does not allow."""
    if scheme == "bioes":
        return
    for sentence, sentence_lines in zip(parsed, lines):
        for (prefix, type_), line in zip(sentence, sentence_lines):
            if prefix not in "BIO":
                raise InputDataError(
                    path, line, f"tag '{prefix}-{type_}' is not valid in the {scheme.upper()} scheme"
                )


def decode_tags(tags: list[tuple[str, str]], scheme: str, report, locations: list[str]):
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
                report.violation("BIOES entity not closed by E-/S- (ended at the next tag)", locations[i])
                close(i)
            if prefix == "O":
                continue
            if prefix in "IE" and open_type is None:
                report.violation(f"BIOES {raw_prefix}- tag without B- (starts an entity)", locations[i])
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
                    report.violation("BIO I- tag without B- (starts an entity)", locations[i])
                if scheme == "iob1" and prefix == "B" and type_ != open_type:
                    report.violation("IOB1 B- tag not after its own type", locations[i])
                close(i)
                start, open_type = i, type_
    if open_type is not None and scheme == "bioes":
        report.violation("BIOES entity not closed by E-/S- (ended at the next tag)", locations[-1])
    close(len(tags))
    return chunks


def spans_to_tags(words: list[tuple[int, int]], entities: list, scheme: str = "bio") -> list[str]:
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


def spans_to_unit_tags(units, spans):
    """IOB2 tags over ``units`` for ``spans`` (dicts or objects with start,
    end, type). Earlier spans win where two overlap a unit."""
    tags = ["O"] * len(units)
    starts = np.array([u[0] for u in units]) if units else np.zeros(0)
    ends = np.array([u[1] for u in units]) if units else np.zeros(0)
    for span in spans:
        start, end, kind = field(span, "start"), field(span, "end"), field(span, "type")
        hit = np.nonzero((ends > start) & (starts < end))[0]
        hit = [k for k in hit if tags[k] == "O"]
        for n, k in enumerate(hit):
            tags[k] = ("B-" if n == 0 else "I-") + kind
    return tags

