"""WordPiece vocabularies on disk: ``vocab.txt``, one token a line."""

from pathlib import Path

from kerasbert.errors import CheckpointError


def read_vocab(path):
    """The tokens of a ``vocab.txt``, one per line, strictly UTF-8.

    A trailing newline is optional. Raises :class:`CheckpointError` naming the
    line of the first byte that is not UTF-8, or of a duplicated token.
    """
    path = Path(path)
    if not path.exists():
        raise CheckpointError(f"{path}: missing (the WordPiece vocabulary)")
    data = path.read_bytes()
    if not data.strip():
        raise CheckpointError(f"{path}: damaged: empty ({len(data):,} bytes; a vocabulary has one token a line)")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data.count(b"\n", 0, e.start) + 1
        raise CheckpointError(
            f"{path}, line {line}: not UTF-8 (byte 0x{data[e.start]:02x} at offset {e.start})"
        )
    if text.startswith("\ufeff"):
        text = text[1:]
    tokens = text.split("\n")
    if tokens and tokens[-1] == "":
        tokens.pop()
    tokens = [t.rstrip("\r") for t in tokens]
    seen = {}
    for i, token in enumerate(tokens):
        if token in seen and token:
            raise CheckpointError(
                f"{path}, line {i + 1}: token {token!r} already on line {seen[token] + 1}"
            )
        seen[token] = i
    return tokens
