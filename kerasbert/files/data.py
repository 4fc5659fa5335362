"""Reading data files strictly: gzip, UTF-8, JSON lines or a JSON array.

Every problem raises :class:`~kerasbert.errors.InputDataError` naming the file
and, where there is one, the line (a non-UTF-8 byte: its line and byte offset;
invalid JSON: the line of the record). Used by every app's readers.
"""

import bisect
import gzip
import io
import json
import zlib
from pathlib import Path

from kerasbert.errors import InputDataError
from kerasbert.errors import RecordLine


def read_text(path) -> str:
    """The file's text: gunzipped if gzip, decoded strictly as UTF-8 (BOM allowed)."""
    try:
        raw = Path(path).read_bytes()
    except OSError as err:
        raise InputDataError(path, None, f"cannot read file: {err.strerror or err}") from err
    where = ""
    if raw[:2] == b"\x1f\x8b":
        try:
            raw = gzip.decompress(raw)
        except (OSError, EOFError, zlib.error) as err:
            raise InputDataError(path, None, f"broken gzip data: {err}") from err
        where = " of the decompressed data"
    bom = 3 if raw.startswith(b"\xef\xbb\xbf") else 0
    try:
        return raw[bom:].decode("utf-8")
    except UnicodeDecodeError as err:
        offset = bom + err.start
        line = _line_at(raw, offset)
        bad = raw[offset:offset + 1].hex()
        raise InputDataError(
            path, line, f"not UTF-8: byte 0x{bad} at byte offset {offset}{where} ({err.reason}){encoding_hint(raw)}"
        ) from err


def _line_at(raw, offset):
    """The 1-based line of byte ``offset`` (LF, CRLF or CR-only line ends)."""
    if b"\n" not in raw and b"\r" in raw:
        return raw.count(b"\r", 0, offset) + 1
    return raw.count(b"\n", 0, offset) + 1


def encoding_hint(start):
    """What to tell about a file whose bytes begin with ``start`` when it is
    not UTF-8: a UTF-16 or UTF-32 byte-order mark says which encoding it is."""
    if start.startswith((b"\xff\xfe", b"\xfe\xff")):
        return "; the file is UTF-16 (it starts with a UTF-16 byte-order mark): save it as UTF-8"
    return ""


def stream_lines(path, handle=None):
    """``(line number, line)`` of a UTF-8 text file (gzip too, ``.gz``), read
    one line at a time (never the whole file): a byte-order mark dropped, LF,
    CRLF and CR-only line ends alike, the line without its end. A byte that
    is not UTF-8 raises :class:`InputDataError` naming the line and the byte.
    ``handle``: an open binary stream to read instead of ``path`` (standard
    input), ``path`` then only names it."""
    name = str(path)
    if handle is None:
        try:
            handle = gzip.open(path, "rb") if name.endswith(".gz") else open(path, "rb")
        except OSError as err:
            raise InputDataError(name, None, f"cannot open ({err.strerror or err})") from err
        owned = True
    else:
        owned = False
    start = handle.peek(4)[:4] if hasattr(handle, "peek") else b""
    text = io.TextIOWrapper(handle, encoding="utf-8", errors="surrogateescape", newline=None)
    try:
        for number, line in enumerate(text, 1):
            line = line[:-1] if line.endswith("\n") else line
            if number == 1 and line.startswith("\ufeff"):
                line = line[1:]
            try:
                line.encode("utf-8")
            except UnicodeEncodeError as err:  # an undecodable byte, kept as a lone surrogate
                byte = ord(line[err.start]) - 0xDC00
                raise InputDataError(name, number, f"not UTF-8: byte 0x{byte:02x} at character {err.start + 1}"
                                     f"{encoding_hint(start)}") from None
            yield number, line
    except (OSError, EOFError, zlib.error) as err:
        raise InputDataError(name, None, f"cannot read ({getattr(err, 'strerror', None) or err})") from err
    finally:
        if owned:
            text.close()
        else:
            text.detach()


def split_lines(text: str) -> list[str]:
    """Lines split on LF, each without its CR (so CRLF files read like LF
    files); a file with CR line ends only (old Mac tools) is split on CR."""
    if "\n" not in text and "\r" in text:
        text = text.replace("\r", "\n")
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return [line[:-1] if line.endswith("\r") else line for line in lines]


def _json_array_records(path, text: str):
    """``(line, element)`` pairs of a file holding one JSON array; errors name
    the line, and ``line`` is a :class:`~kerasbert.errors.RecordLine` (errors
    about an element name its record too)."""
    newlines = [i for i, char in enumerate(text) if char == "\n"]

    def line_of(offset):
        return bisect.bisect_left(newlines, offset) + 1

    def skip_space(offset):
        while offset < len(text) and text[offset] in " \t\r\n":
            offset += 1
        return offset

    def fail(offset, problem):
        offset = min(offset, len(text.rstrip()) - 1)
        raise InputDataError(path, line_of(max(offset, 0)), f"invalid JSON: {problem}")

    decoder = json.JSONDecoder()
    records = []
    position = skip_space(text.index("[") + 1)
    if position < len(text) and text[position] == "]":
        position += 1
    else:
        while True:
            try:
                element, end = decoder.raw_decode(text, position)
            except json.JSONDecodeError as err:
                if err.pos >= len(text):
                    fail(err.pos, "the array is not closed with ]")
                where = RecordLine(err.lineno, len(records) + 1)
                raise InputDataError(path, where, f"invalid JSON: {err.msg} (column {err.colno})") from err
            records.append((RecordLine(line_of(position), len(records) + 1), element))
            position = skip_space(end)
            if position >= len(text):
                fail(position, "the array is not closed with ]")
            if text[position] == "]":
                position += 1
                break
            if text[position] != ",":
                fail(position, f"expected , or ] after an array element, found {text[position]!r}")
            position = skip_space(position + 1)
    if skip_space(position) < len(text):
        fail(skip_space(position), "extra data after the array")
    return records


def json_records(path, text: str):
    """``(line, record)`` pairs from a JSON-lines file or a JSON array."""
    if text.lstrip().startswith("["):
        return _json_array_records(path, text)
    records = []
    for number, line in enumerate(split_lines(text), start=1):
        if not line.strip():
            continue
        try:
            records.append((number, json.loads(line)))
        except json.JSONDecodeError as err:
            raise InputDataError(
                path, number, f"invalid JSON: {err.msg} (column {err.colno}); one object per line expected"
            ) from err
    return records


def records_flavour(path, records, detect, given="auto"):
    """The one flavour all ``records`` (``(line, object)`` pairs) agree on.

    ``detect(record)`` names the flavour a record shows, or None when it shows
    none. ``given`` (not ``"auto"``) is the flavour the caller insists on.
    Returns the flavour, or None when no record shows one. A non-object record
    or one of another flavour raises :class:`InputDataError` naming its line.
    """
    flavour, flavour_line = (None, None) if given == "auto" else (given, None)
    for line, record in records:
        if not isinstance(record, dict):
            raise InputDataError(path, line, f"expected a JSON object, found {type(record).__name__}")
        shown = detect(record)
        if shown is None:
            continue
        if flavour is None:
            flavour, flavour_line = shown, line
        elif shown != flavour:
            since = "the format given" if flavour_line is None else f"line {flavour_line}"
            raise InputDataError(path, line, f"record looks like {shown} but {since} says {flavour}")
    return flavour
