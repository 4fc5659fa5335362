"""Masked-LM pre-training of a BERT encoder on plain text: continued from a
checkpoint, or from scratch.

``kerasbert pretrain --checkpoint CK --text FILE [FILE...] --output OUT``
trains an encoder and its masked-LM head (:class:`~kerasbert.models.masked_lm.BertMaskedLM`)
further on in-domain text, as BERT was pre-trained, and writes both to
``OUT/encoder`` in Google's official layout (``cls/predictions/*`` included),
which ``--checkpoint`` of every training command, :func:`kerasbert.load_encoder`
and :func:`kerasbert.load_masked_lm` read.

``kerasbert pretrain --from-scratch --text FILE [FILE...] --output OUT``
starts from nothing instead (:func:`scratch_model`): a WordPiece vocabulary
learnt from the text (:func:`kerasbert.tokenizers.vocab.build_vocab`, written
to ``OUT/vocab.txt`` first and read back by ``--resume``) and a BERT of the
chosen size, randomly initialised as BERT is (truncated normal, 0.02); then
the same training and the same ``OUT/encoder``.

The pieces, in the order the data goes through them:

* :func:`read_lines` -- lines of plain-text or ``.gz`` files, one document or
  paragraph a line, read one line at a time (never a whole file);
* :func:`word_starts` -- which WordPiece tokens begin a word: a ``##`` piece
  never does; with a segmenter (Chinese: jieba, :func:`jieba_segmenter`) a
  token also continues a word when it starts inside a segmented word;
* :func:`stream_sequences` -- tokens of consecutive lines joined with
  ``[SEP]`` and cut into windows of ``max_length - 2`` tokens plus
  ``[CLS]``/``[SEP]`` (a generator);
* :func:`mask_tokens` -- BERT's masking: 15% of the tokens selected (whole
  words together), of those 80% become ``[MASK]``, 10% a random token, 10%
  stay; ``[CLS]``, ``[SEP]`` and ``[PAD]`` never;
* :func:`pretrain` -- the run: the first ``held_out`` sequences are set
  aside (masked once, with a fixed seed, so their masked-token accuracy is
  comparable between epochs); an epoch is one pass over the rest of the text
  (the sequences are counted first, streaming: :func:`count_sequences`), or
  ``steps_per_epoch`` batches when that is less; at the end of the text the
  stream starts again from the first file; resumable, TensorBoard,
  ``history.jsonl``.
"""

import itertools
import json
import math
import time
from pathlib import Path

import keras
import numpy as np

from kerasbert.errors import KerasbertError
from kerasbert.tokenizers.vocab import is_cjk
from kerasbert.training.callbacks import EpochRecords
from kerasbert.training.runs import run_command
from kerasbert.training.settings import PretrainSettings  # noqa: F401 (kerasbert.training.pretraining.PretrainSettings)

MASK_RATE = 0.15
# Of the selected tokens: [MASK], a random token, unchanged.
MASK_SHARES = (0.8, 0.1, 0.1)
SPECIAL_TOKENS = ("[CLS]", "[SEP]", "[PAD]", "[UNK]", "[MASK]")


# =============================================================================
# Text
# =============================================================================


def read_lines(paths):
    """Non-empty lines (stripped) of plain-text or gzip (``.gz``) UTF-8 files,
    one at a time, file after file (:func:`kerasbert.files.data.stream_lines`:
    a byte that is not UTF-8 is an error naming its file and line)."""
    from kerasbert.files.data import stream_lines

    for path in paths:
        path = Path(path)
        if not path.is_file():
            raise KerasbertError(f"{path}: cannot read the text ({'a folder' if path.is_dir() else 'no such file'})")
        for _, line in stream_lines(path):
            line = line.strip()
            if line:
                yield line


def has_cjk(text):
    return any(is_cjk(c) for c in text)


def jieba_segmenter():
    """``jieba.lcut`` (a function text -> list of words that concatenate back to
    the text), imported on first use; jieba is an optional dependency."""
    try:
        import jieba
    except ImportError:
        raise KerasbertError("whole-word masking of Chinese text needs the jieba word segmenter: pip install jieba "
                             "(or pip install 'kerasbert[zh]'); or pass --no-whole-word-masking")
    jieba.setLogLevel(60)  # no start-up chatter
    return jieba.lcut


def word_starts(tokens, offsets=None, words=None):
    """Per WordPiece token, True where it begins a word.

    Args:
        tokens: the token strings of one text (no special tokens).
        offsets: ``[n, 2]`` character offsets of the tokens in the text;
            needed with ``words``.
        words: the text cut into words by a segmenter (they concatenate back
            to the text, as jieba's do), or None.

    A ``##`` piece continues the word before it; with ``words``, so does a
    token that starts inside a word rather than at its beginning (a Chinese
    word's second, third, ... character).
    """
    starts = np.array([not t.startswith("##") for t in tokens], dtype=bool)
    if words is not None and len(tokens):
        boundaries, position = set(), 0
        for word in words:
            boundaries.add(position)
            position += len(word)
        begins = np.array([int(o) in boundaries for o in np.asarray(offsets)[:, 0]], dtype=bool)
        starts &= begins
    return starts


def stream_sequences(lines, tokenizer, max_length, whole_word=True, segment=None):
    """Packed sequences from an iterable of text lines: a generator of
    ``(token_ids, starts)`` (int32 and bool arrays of at most ``max_length``,
    ``[CLS]`` first and ``[SEP]`` last).

    The tokens of consecutive lines are concatenated with ``[SEP]`` between
    them (none where a window ends with a line) and cut into windows of
    ``max_length - 2``. ``starts`` marks the
    tokens that begin a word (:func:`word_starts`; every token when not
    ``whole_word``; the first token of a window always; special tokens are
    False). ``segment``: the word segmenter for lines with Chinese characters
    (default: :func:`jieba_segmenter`, loaded at the first such line); lines
    without them need none. Consumes ``lines`` lazily: a window is yielded as
    soon as its tokens are read.
    """
    width = int(max_length) - 2
    if width < 1:
        raise KerasbertError(f"max_length must be at least 3, got {max_length}")
    ids, starts = [], []
    for line in lines:
        line_ids, offsets = tokenizer.encode_pieces(line)
        if not len(line_ids):
            continue
        if ids:
            ids.append(tokenizer.sep_id)
            starts.append(False)
        if whole_word:
            words = None
            if has_cjk(line):
                if segment is None:
                    segment = jieba_segmenter()
                words = segment(line)
            line_starts = word_starts([tokenizer.vocab[i] for i in line_ids], offsets, words)
        else:
            line_starts = np.ones(len(line_ids), dtype=bool)
        ids.extend(line_ids.tolist())
        starts.extend(line_starts.tolist())
        while len(ids) >= width:
            yield _window(tokenizer, ids[:width], starts[:width])
            ids, starts = ids[width:], starts[width:]
    if ids:
        yield _window(tokenizer, ids, starts)


def _window(tokenizer, ids, starts):
    starts = list(starts)
    if ids and ids[0] != tokenizer.sep_id:
        starts[0] = True  # a word cut by the window boundary starts again here
    return (np.asarray([tokenizer.cls_id] + list(ids) + [tokenizer.sep_id], dtype=np.int32),
            np.asarray([False] + starts + [False], dtype=bool))


# =============================================================================
# Masking
# =============================================================================


def max_predictions(max_length, rate=MASK_RATE):
    """Masked positions per sequence of ``max_length`` tokens (the width of ``mask_positions``)."""
    return max(1, int(round((max_length - 2) * rate)))


def mask_tokens(token_ids, starts, rng, mask_id, vocab_size, special_ids, predictions, rate=MASK_RATE,
                shares=MASK_SHARES):
    """BERT's masking of one sequence.

    ``round(rate * n)`` of its ``n`` ordinary tokens (at least 1, at most
    ``predictions``) are selected, whole words at a time (a word is a token
    with ``starts`` True and the tokens after it with ``starts`` False; words
    are taken in random order, skipping any that would overshoot the count);
    each selected token becomes ``[MASK]`` (``shares[0]``), a random ordinary
    token (``shares[1]``) or stays (the rest). Tokens in ``special_ids``
    ([CLS], [SEP], [PAD], ...) are never selected.

    Returns ``(masked token_ids, mask_positions, mask_ids, mask_weights)``;
    the last three have ``predictions`` entries (padded with 0, weight 0).
    """
    token_ids = np.asarray(token_ids, dtype=np.int32)
    ordinary = ~np.isin(token_ids, special_ids)
    starts = np.asarray(starts, dtype=bool) | ~ordinary
    words = []
    for i in np.flatnonzero(ordinary):
        if starts[i] or not words or words[-1][-1] != i - 1:
            words.append([i])
        else:
            words[-1].append(i)
    count = min(predictions, max(1, int(round(rate * int(ordinary.sum())))))
    chosen = []
    for w in rng.permutation(len(words)):
        if len(chosen) >= count:
            break
        if len(chosen) + len(words[w]) <= count:
            chosen.extend(words[w])
    chosen = np.sort(np.asarray(chosen, dtype=np.int32))
    masked = token_ids.copy()
    draw = rng.random(len(chosen))
    to_mask = draw < shares[0]
    to_random = (draw >= shares[0]) & (draw < shares[0] + shares[1])
    masked[chosen[to_mask]] = mask_id
    allowed = np.setdiff1d(np.arange(vocab_size), special_ids)
    masked[chosen[to_random]] = rng.choice(allowed, size=int(to_random.sum()))
    positions = np.zeros(predictions, np.int32)
    labels = np.zeros(predictions, np.int32)
    weights = np.zeros(predictions, np.float32)
    positions[: len(chosen)] = chosen
    labels[: len(chosen)] = token_ids[chosen]
    weights[: len(chosen)] = 1.0
    return masked, positions, labels, weights


class Masker:
    """:func:`mask_tokens` with one tokenizer's special ids and a padded batch
    maker. Never selected: ``[CLS]``, ``[SEP]``, ``[PAD]``, and also ``[UNK]``
    (nothing to learn from) and ``[MASK]``; random replacements are never
    these either."""

    def __init__(self, tokenizer, max_length, rate=MASK_RATE):
        if tokenizer.mask_id is None:
            raise KerasbertError("the vocabulary has no [MASK] token; masked-LM training needs one")
        self.tokenizer, self.max_length = tokenizer, int(max_length)
        self.predictions = max_predictions(max_length, rate)
        self.rate = rate
        self.special_ids = np.asarray(sorted({i for i, t in enumerate(tokenizer.vocab) if t in SPECIAL_TOKENS}), np.int32)

    def batch(self, sequences, rng):
        """Inputs and targets for ``BertMaskedLM``: ``(x, mask_ids, mask_weights)``, padded to ``max_length``."""
        n, width = len(sequences), self.max_length
        x = {"token_ids": np.full((n, width), self.tokenizer.pad_id, np.int32),
             "segment_ids": np.zeros((n, width), np.int32),
             "padding_mask": np.zeros((n, width), np.int32),
             "mask_positions": np.zeros((n, self.predictions), np.int32)}
        labels = np.zeros((n, self.predictions), np.int32)
        weights = np.zeros((n, self.predictions), np.float32)
        for row, (ids, starts) in enumerate(sequences):
            masked, positions, labels[row], weights[row] = mask_tokens(
                ids, starts, rng, self.tokenizer.mask_id, self.tokenizer.vocabulary_size, self.special_ids,
                self.predictions, self.rate)
            x["token_ids"][row, : len(ids)] = masked
            x["padding_mask"][row, : len(ids)] = 1
            x["mask_positions"][row] = positions
        return x, labels, weights


# =============================================================================
# The run
# =============================================================================

#: The seed of the held-out sequences' masking (the same every epoch and every run).
HELD_OUT_SEED = 12345


def masked_accuracy(model, batch, batch_size=32):
    """Share of the masked tokens of ``batch`` (``(x, mask_ids, mask_weights)``) that ``model`` predicts right."""
    x, labels, weights = batch
    right = 0.0
    for start in range(0, len(labels), batch_size):
        chunk = {key: value[start : start + batch_size] for key, value in x.items()}
        logits = np.asarray(model.predict_on_batch(chunk))
        right += float(((logits.argmax(-1) == labels[start : start + batch_size]) * weights[start : start + batch_size]).sum())
    total = float(weights.sum())
    return right / total if total else float("nan")


def training_batches(sequences, masker, batch_size, held_out, seed, skip=0):
    """Training batches (:meth:`Masker.batch`) forever: pass after pass over
    ``sequences()`` (a function returning a fresh stream), its first
    ``held_out`` sequences left out each time; the first ``skip`` batches are
    skipped (a resumed run). Batch ``i`` is masked with the seed ``(seed, i)``,
    so a resumed run sees the batches an uninterrupted one would have."""
    index, rows = 0, []
    while True:
        seen = False
        for sequence in itertools.islice(sequences(), held_out, None):
            seen = True
            rows.append(sequence)
            if len(rows) == batch_size:
                if index >= skip:
                    yield masker.batch(rows, np.random.default_rng([seed, index]))
                index, rows = index + 1, []
        if not seen:
            raise KerasbertError(f"the text has no sequences beyond the {held_out} held out; give more text "
                                 f"or a smaller --held-out")


def count_sequences(sequences, held_out, cap=None, progress="auto"):
    """How many sequences of the stream ``sequences`` (an iterable) follow
    the first ``held_out``, counted one at a time (nothing kept); with
    ``cap``, counting stops there. ``progress``: the sequences counted and
    their rate (and, with ``cap``, the time left) on standard error (True,
    False, or ``"auto"``: on a terminal only; :func:`kerasbert.progress.progress`)."""
    from kerasbert.progress import advance
    from kerasbert.progress import progress as progress_bar

    count = 0
    with progress_bar(cap, "counting the text", unit="sequences", show=progress):
        for _ in itertools.islice(sequences, held_out, None if cap is None else held_out + cap):
            count += 1
            advance()
    return count


def epoch_steps(settings, count):
    """Batches per epoch for ``count`` training sequences in one pass over the
    text: the pass (rounded up to whole batches), or ``settings.steps_per_epoch``
    when that is set and less. Prints what a pass made (and warns when it
    makes less than one batch)."""
    batch = settings.batch_size
    if count == 0:
        raise KerasbertError(f"the text has no sequences beyond the {settings.held_out} held out; give more text "
                             f"or a smaller --held-out")
    pass_steps = math.ceil(count / batch)
    cap = settings.steps_per_epoch
    capped = bool(cap) and count >= cap * batch  # counting stopped there: the pass is at least that long
    steps = cap if capped else pass_steps
    counted = f"at least {count}" if capped else f"{count}"
    plural = "s" if count != 1 or capped else ""
    print(f"one pass over the text: {counted} training sequence{plural} of up to {settings.max_length} tokens (after the "
          f"{settings.held_out} held out) -> {steps} batches of {batch} per epoch"
          + (f" (--steps-per-epoch {cap})" if capped else ""))
    if count < batch:
        print(f"warning: one pass over the text makes {count} training sequence{plural}, fewer than one batch of "
              f"{batch}; "
              "each batch repeats the text. Give more text, or a smaller --batch-size or --held-out")
    return steps


#: A from-scratch run's vocabulary, in ``OUTPUT`` (read back by ``--resume``).
VOCAB_FILE = "vocab.txt"


def scratch_vocab(settings):
    """``(tokens, learnt)``: the vocabulary of a ``--from-scratch`` run:
    ``OUTPUT/vocab.txt`` when resuming a run that wrote it (``learnt``
    False), else learnt from the text (:func:`kerasbert.tokenizers.vocab.build_vocab`,
    ``learnt`` True; the caller writes it once ``OUTPUT`` is claimed).
    Prints what it made."""
    from kerasbert.tokenizers.vocab import build_vocab
    from kerasbert.tokenizers.vocab import read_vocab

    path = Path(settings.output) / VOCAB_FILE
    if settings.resume and path.is_file():
        tokens = read_vocab(path)
        print(f"vocabulary: {path}, {len(tokens)} tokens (the run's own, resumed)")
        return tokens, False
    tokens, report = build_vocab(read_lines(settings.text), settings.vocab_size, settings.lowercase)
    cased = "lower-cased" if settings.lowercase else "cased"
    print(f"vocabulary: {len(tokens)} tokens ({cased}) learnt from {report['lines']} lines of text, "
          f"{report['cjk_characters']} distinct CJK characters among them, one token each"
          + (f" ({len(report['added'])} of them added after the WordPiece trainer's)" if report["added"] else ""))
    if len(tokens) > settings.vocab_size:
        print(f"note: the text has more distinct characters than --vocab-size {settings.vocab_size} leaves room for; "
              f"each is kept: {len(tokens)} tokens")
    return tokens, True


def scratch_model(settings, vocab_size):
    """A randomly initialised :class:`~kerasbert.models.masked_lm.BertMaskedLM`
    of ``settings.encoder_size()`` over ``vocab_size`` tokens, with
    ``settings.max_positions`` position embeddings; every kernel and
    embedding drawn as BERT draws them (truncated normal, standard deviation
    0.02; the masked-LM head's transform too, where keras-hub would start
    from Glorot), biases 0, LayerNorms 1 and 0. Uses Keras's global seed."""
    from kerasbert.checkpoints.config import EncoderConfig
    from kerasbert.models.masked_lm import BertMaskedLM

    size = settings.encoder_size()
    config = EncoderConfig(vocab_size=vocab_size, hidden_size=size["hidden"], num_layers=size["layers"],
                           num_heads=size["heads"], intermediate_size=size["intermediate"],
                           max_position_embeddings=settings.max_positions)
    model = BertMaskedLM(config.encoder_class()(**config.encoder_kwargs()))
    initializer = keras.initializers.TruncatedNormal(stddev=0.02)
    for variable in model.masked_lm_head.weights:
        if variable.path == "masked_lm_head/intermediate_dense/kernel":
            variable.assign(initializer(variable.shape, dtype=variable.dtype))
    print(f"new encoder: BERT, {size['layers']} layers, hidden {size['hidden']}, {size['heads']} heads, "
          f"intermediate {size['intermediate']}, vocabulary {vocab_size}, max positions {settings.max_positions}; "
          f"{model.count_params():,} parameters with the masked-LM head")
    return model


@run_command
def pretrain(settings, callbacks=(), segment=None):
    """Run masked-LM pre-training (module docstring), continued from
    ``settings.checkpoint`` or from scratch (``settings.from_scratch``);
    returns the metrics dict (also ``OUTPUT/metrics.json``).

    ``callbacks``: more Keras callbacks for ``fit``. ``segment``: the word
    segmenter of Chinese lines (text -> words), :func:`jieba_segmenter` when
    None.

    Writes into ``OUTPUT`` (a new or empty folder, or its own earlier run:
    :mod:`kerasbert.training.runs`): ``run.json``, ``settings.json``,
    ``history.jsonl`` (per epoch: loss, training accuracy,
    ``held_out_accuracy``), ``logs/`` (TensorBoard), ``encoders/step-S/``
    every ``keep_encoders_every`` epochs (S: steps done), ``backup/`` while it
    runs (for ``--resume``), ``metrics.json`` and, at the end and
    atomically, ``encoder/`` (official layout, masked-LM head included; from
    scratch also ``tokenizer_config.json``, which says whether it lower-cases,
    and ``OUTPUT/vocab.txt`` from the start).
    """
    from kerasbert.training.callbacks import training_callbacks
    from kerasbert.training.callbacks import TrainingSpeed
    from kerasbert.files.atomic import atomic_write_dir
    from kerasbert.files.atomic import atomic_write_text
    from kerasbert.training.fit import open_encoder_checkpoint
    from kerasbert.training.fit import progress_verbosity
    from kerasbert.training.fit import start_run
    from kerasbert.training.fit import step_jit_compile
    from kerasbert.training.fit import write_metrics
    from kerasbert.checkpoints.loader import load_encoder
    from kerasbert.checkpoints.loader import load_masked_lm
    from kerasbert.checkpoints.loader import save_encoder
    from kerasbert.models.masked_lm import BertMaskedLM
    from kerasbert.training.optimizer import make_optimizer

    settings.check()
    if settings.from_scratch:
        from kerasbert.tokenizers.vocab import OFFICIAL_MAX_CHARS_PER_WORD
        from kerasbert.tokenizers.tokenizer import BertTokenizer

        folder = None
        vocab, learnt = scratch_vocab(settings)
        # As load_tokenizer will read OUTPUT/encoder (Google's layout): the same tokens before and after.
        tokenizer = BertTokenizer(vocab, lowercase=settings.lowercase, max_length=settings.max_length,
                                  max_chars_per_word=OFFICIAL_MAX_CHARS_PER_WORD)
    else:
        folder, tokenizer = open_encoder_checkpoint(settings)
        if folder.config.family != "bert":
            raise KerasbertError(f"pretrain supports BERT checkpoints only; {settings.checkpoint} is "
                                 f"{folder.config.family}")
    masker = Masker(tokenizer, settings.max_length)
    if segment is None and settings.whole_word_masking:
        segment = _lazy_segmenter()

    def sequences():
        return stream_sequences(read_lines(settings.text), tokenizer, settings.max_length,
                                whole_word=settings.whole_word_masking, segment=segment)

    held = list(itertools.islice(sequences(), settings.held_out))
    held_batch = masker.batch(held, np.random.default_rng(HELD_OUT_SEED)) if held else None
    cap = settings.steps_per_epoch * settings.batch_size if settings.steps_per_epoch else None
    count = count_sequences(sequences(), settings.held_out, cap)
    steps_per_epoch = epoch_steps(settings, count)
    output = start_run(settings, "pretrain")  # after the text was read through: a bad file leaves nothing in OUTPUT

    if folder is None:
        if learnt:
            from kerasbert.tokenizers.vocab import write_vocab

            write_vocab(output / VOCAB_FILE, tokenizer.vocab)
        model = scratch_model(settings, tokenizer.vocabulary_size)
    elif any(name.startswith("cls/predictions/") for name in folder.shapes):
        model = load_masked_lm(folder)
    else:
        print(f"note: {folder.directory} has no masked-LM head (cls/predictions/*); a new one is trained")
        model = BertMaskedLM(load_encoder(folder))
    # The pooler (next-sentence prediction's input) gets no gradient from the
    # masked-LM loss; it is kept as it is.
    model.encoder.get_layer("pooled_dense").trainable = False
    total_steps = steps_per_epoch * settings.epochs
    rate = settings.peak_learning_rate()
    optimizer = make_optimizer(total_steps, rate, rate, "masked_lm_head",
                               warmup_ratio=settings.warmup_ratio, weight_decay=settings.weight_decay,
                               precision=settings.precision)
    model.compile(optimizer=optimizer, loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                  weighted_metrics=[keras.metrics.SparseCategoricalAccuracy(name="accuracy")],
                  jit_compile=step_jit_compile(settings.jit_compile))
    optimizer.build(model.trainable_variables)

    # Keras's BackupAndRestore resumes at the start of the epoch it records;
    # the stream is skipped to the same place.
    initial_epoch = 0
    metadata = output / "backup" / "training_metadata.json"
    if settings.resume and metadata.exists():
        from kerasbert.files.atomic import read_json

        recorded = read_json(metadata)
        if not isinstance(recorded, dict) or not isinstance(recorded.get("epoch"), int):
            raise KerasbertError(f"{metadata}: damaged: no epoch number")
        initial_epoch = recorded["epoch"]
    history_path = output / "history.jsonl"
    evaluator = HeldOutAccuracy(held_batch, history_path, settings.batch_size)
    before = _accuracy_before(history_path)  # a resumed run measured it already
    if before is None and held_batch is not None:  # the checkpoint's own (or the random start's) accuracy, as "epoch 0"
        evaluator.set_model(model)
        evaluator.on_epoch_end(-1)
        before = evaluator.last
    # Packed sequences are full (max_length tokens) but for the last one of each pass over the text.
    speed = TrainingSpeed(steps_per_epoch * settings.batch_size * settings.max_length)
    encoder_dir = output / "encoder"

    def write_encoder(directory):
        save_encoder(model, directory, tokenizer.vocab)
        if folder is None:  # no checkpoint's to follow: say whether the vocabulary is lower-cased
            atomic_write_text(Path(directory) / "tokenizer_config.json",
                              json.dumps({"do_lower_case": bool(settings.lowercase)}, indent=2) + "\n")

    from kerasbert.training.callbacks import KeptEncoders

    kept = [KeptEncoders(settings.keep_encoders_every, settings.epochs, steps_per_epoch, output / "encoders",
                         write_encoder)] if settings.keep_encoders_every else []
    started = time.perf_counter()
    model.fit(training_batches(sequences, masker, settings.batch_size, settings.held_out, settings.seed,
                               skip=initial_epoch * steps_per_epoch), steps_per_epoch=steps_per_epoch,
              epochs=settings.epochs, verbose=progress_verbosity(), shuffle=False,
              callbacks=[speed] + training_callbacks(output, evaluator, settings.backup_every_steps or None)
              + kept + list(callbacks))
    atomic_write_dir(encoder_dir, write_encoder)
    later = speed.epoch_seconds[1:]
    metrics = {
        "held_out_sequences": len(held),
        "training_sequences_per_pass": count if not cap or count < cap else None,  # None: not counted to the end
        "steps_per_epoch": steps_per_epoch,
        "held_out_accuracy_before": before,
        "held_out_accuracy": evaluator.last,
        "steps": total_steps,
        "learning_rate": rate,
        "vocabulary_size": tokenizer.vocabulary_size,
        "train_seconds": time.perf_counter() - started,
        "train_epoch_seconds": speed.epoch_seconds,
        "train_tokens_per_s_after_first_epoch": speed.tokens_per_epoch * len(later) / sum(later) if later else None,
    }
    write_metrics(output, metrics)
    print(f"\nencoder + masked-LM head: {encoder_dir}\nhistory: {history_path}\nlogs:    {output / 'logs'}")
    return metrics


def _accuracy_before(history_path):
    """The held-out accuracy before training ("epoch" 0) in ``history.jsonl``, if there."""
    from kerasbert.training.history import read_history

    for record in read_history(history_path):
        if record.get("epoch") == 0:
            return record.get("held_out_accuracy")
    return None


def _lazy_segmenter():
    """A segmenter that loads jieba at its first call (only text with Chinese needs it)."""
    loaded = []

    def segment(text):
        if not loaded:
            loaded.append(jieba_segmenter())
        return loaded[0](text)

    return segment


class HeldOutAccuracy(EpochRecords):
    """After each epoch: masked-token accuracy on the held-out batch (logged as
    ``held_out_accuracy``), one line appended to ``history.jsonl`` (each
    epoch once across resumes: :class:`~kerasbert.training.callbacks.EpochRecords`);
    called with epoch -1 before training, it records the checkpoint's own
    accuracy as epoch 0."""

    def __init__(self, held_batch, history_path, batch_size=32):
        super().__init__(history_path)
        self.held_batch, self.batch_size = held_batch, batch_size
        self.last = None

    def on_epoch_end(self, epoch, logs=None):
        logs = logs if logs is not None else {}
        if self.held_batch is not None:
            self.last = masked_accuracy(self.model, self.held_batch, self.batch_size)
            logs["held_out_accuracy"] = self.last
        record = {"epoch": epoch + 1}
        for key, value in logs.items():
            try:
                record[key] = float(value)
            except (TypeError, ValueError):
                record[key] = str(value)
        self.append(record)
        if self.last is not None:
            when = f"epoch {epoch + 1}" if epoch >= 0 else "before training"
            print(f"\n{when}: held-out masked-token accuracy {self.last:.4f}")

