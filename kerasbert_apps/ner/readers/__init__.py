"""NER readers: every supported file becomes a list of :class:`~kerasbert_apps.ner.examples.Example`.

One family of formats per module: :mod:`kerasbert_apps.ner.readers.columns` (CoNLL
columns, character-per-line Chinese, ``sentences.txt``/``tags.txt``) and
:mod:`kerasbert_apps.ner.readers.jsonl` (doccano, Label Studio, CLUENER, kerasbert JSON
lines or arrays; and :func:`prediction_record`, predictions written in the
formats of these tools, which read back to the same entities). :func:`read_ner_file` picks one by :func:`detect_format`.
Every reader returns a :class:`~kerasbert_apps.ner.examples.ReadResult` whose report
counts everything skipped, repaired or ignored (``report.summary()``).
"""

from __future__ import annotations

import json
from pathlib import Path

from kerasbert_apps.ner.examples import ReadResult
from kerasbert_apps.ner.readers.columns import read_conll
from kerasbert_apps.ner.readers.columns import read_parallel
from kerasbert_apps.ner.readers.jsonl import JSON_FLAVOURS
from kerasbert_apps.ner.readers.jsonl import OUTPUT_FORMATS
from kerasbert_apps.ner.readers.jsonl import prediction_record
from kerasbert_apps.ner.readers.jsonl import read_jsonl
from kerasbert_apps.ner.readers.jsonl import write_jsonl
from kerasbert.files.data import read_text as _read_text
from kerasbert.errors import InputDataError

__all__ = [
    "FORMATS",
    "JSON_FLAVOURS",
    "OUTPUT_FORMATS",
    "detect_format",
    "prediction_record",
    "read_conll",
    "read_jsonl",
    "read_ner_file",
    "read_parallel",
    "write_jsonl",
]

#: What ``--format`` accepts.
FORMATS = ("auto", "conll", "parallel", "jsonl") + JSON_FLAVOURS


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
