"""NER readers for token-per-line and token/tag files: CoNLL columns, character-per-line Chinese, parallel files.

Every reader returns an :class:`kerasbert_apps.ner.examples.ReadResult`; tags are read
by :mod:`kerasbert_apps.ner.tags` (schemes detected, repairs counted). gzip-compressed
files are read transparently (the gzip magic bytes are detected whatever the
file name).

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
"""

from __future__ import annotations

import re
from pathlib import Path

from kerasbert_apps.ner.examples import Example
from kerasbert_apps.ner.examples import Entity
from kerasbert_apps.ner.examples import ReadReport
from kerasbert_apps.ner.examples import ReadResult
from kerasbert_apps.ner.examples import finish_entities
from kerasbert_apps.ner.examples import finish_report
from kerasbert_apps.ner.tags import check_scheme_tags
from kerasbert_apps.ner.tags import decode_tags
from kerasbert_apps.ner.tags import detect_scheme
from kerasbert_apps.ner.tags import first_tag_of
from kerasbert_apps.ner.tags import mixed_scheme
from kerasbert_apps.ner.tags import parse_tag
from kerasbert_apps.ner.tags import scheme_name
from kerasbert_apps.ner.tags import sentence_schemes
from kerasbert.files.data import read_text as _read_text
from kerasbert.files.data import split_lines as _lines
from kerasbert.errors import InputDataError

_COLUMN_SPLIT = re.compile(r"[ \t]+")


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


def _build_examples(path, report, sentences, scheme, join, tag_path=None):
    """Examples from ``sentences`` = list of (tokens, tags, tag line numbers, token source).

    Shared by :func:`read_conll` and :func:`read_parallel`.
    """
    tag_path = path if tag_path is None else tag_path
    parsed = [[parse_tag(tag_path, line, tag) for tag, line in zip(tags, lines)]
              for _, tags, lines, _ in sentences]
    tag_lines = [lines for _, _, lines, _ in sentences]
    scheme = scheme_name(path, scheme)
    per_sentence = None
    if scheme == "auto":
        scheme, reason = detect_scheme(parsed)
        per_sentence = sentence_schemes(parsed) if scheme == "bioes" else None
    else:
        reason = "given"
        check_scheme_tags(tag_path, scheme, parsed, tag_lines)
    if per_sentence is not None:  # BIOES sentences in a BIO file, or BIO sentences in a BIOES file
        scheme, reason = mixed_scheme(per_sentence)
    report.scheme, report.scheme_reason = scheme, reason

    all_tokens = [token for tokens, _, _, _ in sentences for token in tokens]
    if join == "auto":
        join = _auto_join(all_tokens)
    report.join = join
    report.tokens = len(all_tokens)

    examples = []
    for number, ((tokens, _, lines, source), tags) in enumerate(zip(sentences, parsed)):
        words, position = [], 0
        for token in tokens:
            words.append((position, position + len(token)))
            position += len(token) + len(join)
        text = join.join(tokens)
        locations = [f"{tag_path}:{line}" for line in lines]
        own = (per_sentence[number] if per_sentence is not None else "") or scheme
        if own != scheme:  # a sentence that differs from its file: pointed at, read in its own scheme
            report.violation(f"sentence tagged {own.upper()} in a {scheme.upper()} file (read as {own.upper()})",
                             locations[first_tag_of(tags, own)])
        chunks = decode_tags(tags, own, report, locations)
        spans = [Entity(words[first][0], words[last - 1][1], type_) for first, last, type_ in chunks]
        entities = finish_entities(spans, text, source, report)
        examples.append(Example(text, entities, source, words))
    return finish_report(path, report, examples)


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
