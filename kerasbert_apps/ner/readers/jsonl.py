"""NER readers for JSON lines and JSON arrays: doccano, Label Studio, CLUENER, kerasbert, spaCy, GENIA.

Records are read by :func:`kerasbert.files.data.json_records` (gzip, strict
UTF-8, the line of every record); every reader returns an
:class:`kerasbert_apps.ner.examples.ReadResult`.

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
    types are ignored and counted. With ``use_predictions`` a task with no
    annotation takes its first prediction (``"predictions"``, the same
    ``result`` lists: what Label Studio imports as pre-annotations, and what
    :func:`prediction_record` writes). A span with several labels gives one
    entity per label, so the overlap rule keeps the first label.
  - ``cluener``: ``{"text", "label": {TYPE: {mention: [[start, end], ...]}}}``
    with INCLUSIVE ends; ``text[start:end+1]`` must equal the mention.
  - ``kerasbert`` (what :func:`write_jsonl` writes): ``{"text", "entities":
    [{"start", "end", "type"}], "words": [[start, end], ...]?}``.
  - ``spacy`` (spaCy v2's training format, which many converters write):
    ``{"text", "entities": [[start, end, "TYPE"], ...]}``; ends exclusive.

  - ``genia`` (the W2NER-style JSON of GENIA and other nested corpora; a
    JSON array): ``{"sentence": [word, ...], "ner": [{"index": [word
    positions], "type"}, ...]}``. The text is the words joined by single
    spaces (``words`` are their spans); an entity covers its words, from the
    first word's start to the last word's end. Positions are 0-based and
    must be contiguous (a discontinuous entity is an error naming its line).

  A record with only a text (no annotation key, e.g. CLUENER's test.json) is
  kept with no entities and counted as ``unannotated``.
  Spans with leading/trailing whitespace are trimmed (counted as ``trimmed``);
  a span that is only whitespace is dropped (counted). Overlapping spans are
  resolved by the rule of :mod:`kerasbert_apps.ner.examples` (for the BIO heads), or
  all kept with ``keep_overlaps`` (the span heads); counted either way.
"""

from __future__ import annotations

import gzip
import json
import os
from pathlib import Path

from kerasbert_apps.ner.examples import Entity
from kerasbert_apps.ner.examples import Example
from kerasbert_apps.ner.examples import ReadReport
from kerasbert_apps.ner.examples import ReadResult
from kerasbert_apps.ner.examples import finish_entities
from kerasbert_apps.ner.examples import finish_report
from kerasbert.files.data import json_records as _json_records
from kerasbert.files.data import read_text as _read_text
from kerasbert.files.data import records_flavour
from kerasbert.errors import InputDataError

JSON_FLAVOURS = ("doccano", "labelstudio", "cluener", "kerasbert", "spacy", "genia")


def _record_flavour(record) -> str | None:
    """The JSON flavour a record's annotations show, or None if it has none to show."""
    if isinstance(record.get("sentence"), list) and "ner" in record:
        return "genia"
    if isinstance(record.get("data"), dict):
        return "labelstudio"
    entities = record.get("entities")
    if isinstance(entities, list) and entities and isinstance(entities[0], list):
        return "spacy"
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


def _check_mention(path, line, text, entity, mention, said):
    """An error unless the text under ``entity`` is ``mention`` (``said``: what the record says)."""
    if text[entity.start:entity.end] != mention:
        raise InputDataError(path, line, f"{said} but the text there is {text[entity.start:entity.end]!r}")


def _label_studio_spans(path, line, text, record, report, use_predictions):
    """The spans of a Label Studio task: its first annotation that is not
    cancelled; with ``use_predictions``, a task with no such annotation takes
    its first prediction (pre-annotations). None when it has neither."""
    annotations = [a for a in _expect(path, line, record.get("annotations", []), list, '"annotations"')
                   if not (isinstance(a, dict) and a.get("was_cancelled"))]
    predictions = _expect(path, line, record.get("predictions") or [], list, '"predictions"')
    cancelled = len(record.get("annotations", [])) - len(annotations)
    if cancelled:
        report.count("ignored", "cancelled Label Studio annotations", cancelled)
    if annotations:
        chosen, what = annotations, "annotation"
        if predictions:
            report.count("ignored", "Label Studio predictions (the task has an annotation)", len(predictions))
    elif predictions and use_predictions:
        chosen, what = predictions, "prediction"
        report.count("from_predictions")
    else:
        if predictions:
            report.count("ignored", "Label Studio predictions of tasks with no annotation (--use-predictions "
                         "reads them)", len(predictions))
        return None
    if len(chosen) > 1:
        report.count("ignored", f"extra Label Studio {what}s (the first is used)", len(chosen) - 1)
    spans = []
    chosen = _expect(path, line, chosen[0], dict, f"a{'n' if what[0] == 'a' else ''} {what}")
    for result in _expect(path, line, chosen.get("result", []), list, '"result"'):
        result = _expect(path, line, result, dict, "a result")
        if result.get("type") != "labels":
            report.count("ignored", f"Label Studio results of type {result.get('type')!r}")
            continue
        value = _expect(path, line, result.get("value"), dict, '"value"')
        labels = _expect(path, line, value.get("labels"), list, '"labels"')
        for type_ in labels:
            entity = _span(path, line, text, value.get("start"), value.get("end"), type_)
            if "text" in value:
                _check_mention(path, line, text, entity, value["text"],
                               f"span [{entity.start}, {entity.end}) says {value['text']!r}")
            spans.append(entity)
    return spans


def _parse_record(path, line, record, flavour, report, text_key, use_predictions=False):
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
        return text, _label_studio_spans(path, line, text, record, report, use_predictions)

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
                    _check_mention(path, line, text, entity, mention,
                                   f"mention {mention!r} at [{start}, {last}] (inclusive)")
                    spans.append(entity)
        return text, spans

    if flavour == "kerasbert":
        if "entities" not in record:
            return text, None
        for item in _expect(path, line, record["entities"], list, '"entities"'):
            item = _expect(path, line, item, dict, "an entity")
            spans.append(_span(path, line, text, item.get("start"), item.get("end"), item.get("type")))
        return text, spans

    if flavour == "spacy":
        if "entities" not in record:
            return text, None
        return text, _triples(path, line, text, record, "entities")

    # doccano: "entities" (new) or "label"/"labels" (old)
    if "entities" in record:
        for item in _expect(path, line, record["entities"], list, '"entities"'):
            item = _expect(path, line, item, dict, "an entity")
            spans.append(_span(path, line, text, item.get("start_offset"), item.get("end_offset"),
                               item.get("label")))
        if record.get("relations"):
            report.count("ignored", "doccano relations", len(record["relations"]))
        return text, spans
    key = "label" if "label" in record else "labels" if "labels" in record else None
    if key is None:
        return text, None
    return text, _triples(path, line, text, record, key)


def _triples(path, line, text, record, key):
    """Entities of ``record[key]``, a list of ``[start, end, "TYPE"]`` (end exclusive)."""
    spans = []
    for item in _expect(path, line, record[key], list, f'"{key}"'):
        if not (isinstance(item, list) and len(item) == 3):
            raise InputDataError(path, line, f'each "{key}" item must be [start, end, "TYPE"], not {item!r}')
        spans.append(_span(path, line, text, *item))
    return spans


def _genia_record(path, line, record):
    """``(text, spans, words)`` of a GENIA (W2NER-style) record."""
    words = _expect(path, line, record.get("sentence"), list, '"sentence"')
    if not all(isinstance(w, str) for w in words):
        raise InputDataError(path, line, '"sentence" must be a list of strings (the words)')
    spans, start = [], 0
    for word in words:
        spans.append((start, start + len(word)))
        start += len(word) + 1
    text = " ".join(words)
    entities = []
    for item in _expect(path, line, record.get("ner", []), list, '"ner"'):
        item = _expect(path, line, item, dict, "an entity")
        index = _expect(path, line, item.get("index"), list, '"index"')
        if not index or not all(_is_int(i) and 0 <= i < len(words) for i in index):
            raise InputDataError(path, line, f'"index" {index!r} must be word positions 0..{len(words) - 1}')
        if sorted(index) != list(range(min(index), max(index) + 1)):
            raise InputDataError(path, line, f'"index" {index!r} is not contiguous (discontinuous entities '
                                             f'are not supported)')
        entities.append(_span(path, line, text, spans[min(index)][0], spans[max(index)][1], item.get("type")))
    return text, entities, spans


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


def read_jsonl(path, format: str = "auto", text_key: str = "text", use_predictions: bool = False,
               keep_overlaps: bool = False) -> ReadResult:
    """Read a JSON-lines (or JSON array) file with character spans into examples.

    Args:
        path: the file (may be gzip-compressed).
        format: ``"auto"`` or one of ``doccano``, ``labelstudio``, ``cluener``,
            ``kerasbert``, ``spacy``, ``genia`` (see the module doc). ``auto`` takes the flavour of
            the first record with annotations; every record must agree.
        text_key: key of the text (in ``"data"`` for Label Studio).
        use_predictions: Label Studio tasks with no annotation take their
            first prediction (pre-annotations, e.g. written by ``kerasbert ner
            predict --output-format label-studio``); counted as
            ``from_predictions``. Without it they are read as unannotated and
            their predictions are counted as ignored.
        keep_overlaps: keep nested and overlapping spans (for the span
            heads), counted by kind; else resolve them by the
            rule of :mod:`kerasbert_apps.ner.examples` (for the BIO heads).

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
        words = None
        if flavour == "genia":
            text, spans, words = _genia_record(path, line, record)
        else:
            text, spans = _parse_record(path, line, record, flavour, report, text_key, use_predictions)
            if flavour == "kerasbert":
                words = _read_words(path, line, record, text)
        if spans is None:
            report.unannotated += 1
            spans = []
        entities = finish_entities(spans, text, source, report, trim=True, keep_overlaps=keep_overlaps)
        examples.append(Example(text, entities, source, words))
    return finish_report(path, report, examples)


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


#: ``kerasbert ner predict --output-format``: name -> whether the output is ONE
#: JSON array (Label Studio imports an array of tasks) rather than JSON lines.
OUTPUT_FORMATS = {"jsonl": False, "label-studio": True, "doccano": False}


def prediction_record(result: dict, format: str = "jsonl") -> dict:
    """One prediction (a dict an NER model's ``predict`` returns,
    :meth:`kerasbert_apps.ner.pipeline.NerPipeline.result`) as a record of
    ``format``, for correcting it in an annotation tool and training again;
    the kit's readers read every one back to the same entities.

    * ``jsonl``: the prediction as it is (``{"text", "entities": [{"start",
      "end", "type", "text", "score"}]}``, read as the ``kerasbert`` flavour);
    * ``doccano``: ``{"text", "label": [[start, end, "TYPE"], ...]}``, what
      doccano's sequence-labelling import reads;
    * ``label-studio``: a task with the entities as ``predictions`` (Label
      Studio imports them as pre-annotations): ``{"data": {"text"},
      "predictions": [{"model_version", "score", "result": [{"id",
      "from_name": "label", "to_name": "text", "type": "labels", "value":
      {"start", "end", "text", "labels": [TYPE]}, "score"}]}]}``. The names
      ``label`` / ``text`` are those of Label Studio's Named Entity
      Recognition template (``<Labels name="label" toName="text">``); each
      region's ``score`` is the entity's, the prediction's the lowest of them
      (Label Studio sorts tasks by it: least sure first). Read back with
      ``use_predictions``.
    """
    text, entities = result["text"], result["entities"]
    if format == "jsonl":
        return result
    if format == "doccano":
        return {"text": text, "label": [[e["start"], e["end"], e["type"]] for e in entities]}
    if format == "label-studio":
        regions = [
            {"id": f"e{i}", "from_name": "label", "to_name": "text", "type": "labels",
             "value": {"start": e["start"], "end": e["end"], "text": text[e["start"]:e["end"]], "labels": [e["type"]]},
             "score": e["score"]}
            for i, e in enumerate(entities)
        ]
        prediction = {"model_version": "kerasbert", "result": regions}
        if regions:
            prediction["score"] = min(region["score"] for region in regions)
        return {"data": {"text": text}, "predictions": [prediction]}
    raise ValueError(f"unknown output format {format!r}: use one of {', '.join(OUTPUT_FORMATS)}")
