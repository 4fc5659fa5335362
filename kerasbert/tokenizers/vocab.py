"""WordPiece vocabularies: ``vocab.txt`` read strictly, built from a text (``kerasbert pretrain --from-scratch``), written."""

from pathlib import Path

from kerasbert.errors import CheckpointError

#: google-research/bert ``tokenization.py``: ``WordpieceTokenizer(max_input_chars_per_word=200)``.
OFFICIAL_MAX_CHARS_PER_WORD = 200
#: Hugging Face's BERT tokenizers (``tokenizers`` and ``transformers``) default.
HF_MAX_CHARS_PER_WORD = 100


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


#: The first ids of a new vocabulary, as in Google's Chinese BERT vocabulary: ``[PAD]`` 0,
#: ``[unused1]`` .. ``[unused99]`` 1-99 (free slots for tokens added later without resizing the
#: encoder), ``[UNK]`` 100, ``[CLS]`` 101, ``[SEP]`` 102, ``[MASK]`` 103.
BERT_SPECIAL_TOKENS = (("[PAD]",) + tuple(f"[unused{i}]" for i in range(1, 100))
                       + ("[UNK]", "[CLS]", "[SEP]", "[MASK]"))
#: Chinese BERT's vocabulary size, the default of :func:`build_vocab`.
DEFAULT_VOCAB_SIZE = 21128


def is_cjk(char):
    """A CJK ideograph: the characters BERT's tokenizer splits one by one
    (the ranges of google-research/bert's ``_is_chinese_char``)."""
    cp = ord(char)
    return (0x4E00 <= cp <= 0x9FFF or 0x3400 <= cp <= 0x4DBF or 0x20000 <= cp <= 0x2A6DF or 0x2A700 <= cp <= 0x2B81F
            or 0x2B820 <= cp <= 0x2CEAF or 0xF900 <= cp <= 0xFAFF or 0x2F800 <= cp <= 0x2FA1F)


def build_vocab(lines, vocab_size=DEFAULT_VOCAB_SIZE, lowercase=True, min_frequency=2, progress="auto"):
    """A BERT WordPiece vocabulary learnt from ``lines`` (an iterable of
    texts, read once, one at a time).

    Hugging Face ``tokenizers`` does the work: its ``WordPieceTrainer`` on
    the text as :class:`~kerasbert.tokenizers.tokenizer.BertTokenizer` splits
    it (BERT's normalizer: ``lowercase`` lower-cases and strips accents,
    CJK characters spaced apart; BERT's pre-tokenizer: whitespace and
    punctuation), so every CJK character is a token of its own, as in
    Chinese BERT, and other words become WordPieces (``##`` continuations)
    seen at least ``min_frequency`` times. The vocabulary starts with
    :data:`BERT_SPECIAL_TOKENS` (``[PAD]`` 0 ... ``[MASK]`` 103), then every
    character of the text, then the pieces learnt, up to ``vocab_size``
    tokens -- more when the text has more distinct characters than that:
    each one is kept (a CJK character the trainer left out would be added at
    the end). ``progress``: the lines read, on standard error (True, False
    or ``"auto"``: on a terminal only).

    Returns ``(tokens, report)``: the tokens in id order, and a dict with
    ``lines`` (texts read), ``cjk_characters`` (distinct CJK characters of
    the text, as the tokenizer normalizes them) and ``added`` (those the
    trainer had left out, put at the end).
    """
    from tokenizers import Tokenizer
    from tokenizers import models
    from tokenizers import normalizers
    from tokenizers import pre_tokenizers
    from tokenizers import trainers

    from kerasbert.errors import KerasbertError
    from kerasbert.progress import advance
    from kerasbert.progress import progress as progress_bar

    if vocab_size <= len(BERT_SPECIAL_TOKENS):
        raise KerasbertError(f"vocab_size must be more than the {len(BERT_SPECIAL_TOKENS)} special and unused tokens, "
                             f"got {vocab_size}")
    tokenizer = Tokenizer(models.WordPiece(unk_token="[UNK]", max_input_chars_per_word=OFFICIAL_MAX_CHARS_PER_WORD))
    tokenizer.normalizer = normalizers.BertNormalizer(clean_text=True, handle_chinese_chars=True, strip_accents=None,
                                                      lowercase=bool(lowercase))
    tokenizer.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    trainer = trainers.WordPieceTrainer(vocab_size=int(vocab_size), min_frequency=int(min_frequency),
                                        special_tokens=list(BERT_SPECIAL_TOKENS), continuing_subword_prefix="##",
                                        show_progress=False)
    seen, count = set(), [0]

    def texts():
        for line in lines:
            count[0] += 1
            seen.update(c for c in line if is_cjk(c))
            advance()
            yield line

    with progress_bar(None, "building the vocabulary", unit="lines", show=progress):
        tokenizer.train_from_iterator(texts(), trainer)
    ids = tokenizer.get_vocab()
    tokens = sorted(ids, key=ids.get)
    if len(tokens) <= len(BERT_SPECIAL_TOKENS):
        raise KerasbertError("the text has no words to build a vocabulary from")
    normalized = set()
    for char in seen:
        char = tokenizer.normalizer.normalize_str(char).strip()
        if len(char) == 1 and is_cjk(char):
            normalized.add(char)
    known = set(tokens)
    added = sorted(normalized - known)
    tokens += added
    return tokens, {"lines": count[0], "cjk_characters": len(normalized), "added": added}


def write_vocab(path, tokens):
    """Write ``tokens`` as a ``vocab.txt`` (one a line, UTF-8), atomically."""
    from kerasbert.files.atomic import atomic_write_text

    return atomic_write_text(Path(path), "".join(f"{token}\n" for token in tokens))
