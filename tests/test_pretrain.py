"""``kerasbert pretrain``: BERT's masking (whole words, 15%, 80/10/10, never
special tokens), text streamed line by line, and a tiny run end to end (its
OUTPUT/encoder loads with its masked-LM head; held-out accuracy per epoch;
resume after an interruption). The encoder is a small random BERT written as
an official checkpoint with a masked-LM head."""

import gzip
import json

import keras
import numpy as np
import pytest

from conftest import interrupt_then_resume
from kerasbert.models.encoder import BertEncoder
from kerasbert.errors import KerasbertError
from kerasbert.checkpoints.loader import inspect_checkpoint
from kerasbert.checkpoints.loader import load_encoder
from kerasbert.checkpoints.loader import load_masked_lm
from kerasbert.checkpoints.loader import save_encoder
from kerasbert.models.masked_lm import BertMaskedLM
from kerasbert.training.pretraining import Masker
from kerasbert.training.pretraining import jieba_segmenter
from kerasbert.training.pretraining import mask_tokens
from kerasbert.training.pretraining import max_predictions
from kerasbert.training.pretraining import pretrain
from kerasbert.training.pretraining import read_lines
from kerasbert.training.pretraining import stream_sequences
from kerasbert.training.pretraining import training_batches
from kerasbert.training.pretraining import word_starts
from kerasbert.training.settings import PretrainSettings
from kerasbert.tokenizers.tokenizer import BertTokenizer

SPECIAL = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
WORDS = ["the", "a", "cat", "dog", "sat", "on", "mat", "play", "un", "run", "jump", "big", "small", "red", "blue"]
PIECES = ["##ing", "##ed", "##s", "##believ", "##able", "##ny"]
CHINESE = list("北京是中国的首都我爱天安门")
VOCAB = SPECIAL + WORDS + PIECES + CHINESE


@pytest.fixture(scope="module")
def tokenizer():
    return BertTokenizer(VOCAB)


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    """A random 2-layer BERT (hidden 32) with a masked-LM head, official layout."""
    keras.utils.set_random_seed(5)
    encoder = BertEncoder(vocabulary_size=len(VOCAB), num_layers=2, num_heads=2, hidden_dim=32,
                          intermediate_dim=64, max_sequence_length=64)
    folder = tmp_path_factory.mktemp("pretrain_ckpt")
    save_encoder(BertMaskedLM(encoder), folder, VOCAB)
    return folder


def _tokens(tokenizer, ids):
    return [tokenizer.vocab[i] for i in ids]


def test_english_words_from_wordpiece_marks(tokenizer):
    (ids, starts), = stream_sequences(["the cat unbelievable playing dogs"], tokenizer, 32)
    assert _tokens(tokenizer, ids) == ["[CLS]", "the", "cat", "un", "##believ", "##able", "play", "##ing", "dog",
                                       "##s", "[SEP]"]
    assert starts.tolist() == [False, True, True, True, False, False, True, False, True, False, False]


def test_whole_words_are_masked_together_and_specials_never(tokenizer):
    masker = Masker(tokenizer, 16)
    sequences = list(stream_sequences(["the cat unbelievable playing", "dogs sat on a mat"], tokenizer, 16))
    rng = np.random.default_rng(0)
    for _ in range(300):
        for ids, starts in sequences:
            masked, positions, labels, weights = mask_tokens(ids, starts, rng, tokenizer.mask_id,
                                                             tokenizer.vocabulary_size, masker.special_ids,
                                                             masker.predictions)
            chosen = set(positions[weights > 0].tolist())
            assert chosen and not chosen & {i for i, t in enumerate(ids) if VOCAB[t] in SPECIAL}
            # A word is chosen with all of its pieces or not at all.
            for i in chosen:
                j = i
                while not starts[j]:
                    j -= 1
                    assert j in chosen
                j = i + 1
                while j < len(ids) and not starts[j] and VOCAB[ids[j]].startswith("##"):
                    assert j in chosen
                    j += 1
            np.testing.assert_array_equal(labels[weights > 0], ids[sorted(chosen)])
            unchosen = [i for i in range(len(ids)) if i not in chosen]
            np.testing.assert_array_equal(masked[unchosen], ids[unchosen])


def test_whole_word_masking_off_masks_pieces_alone(tokenizer):
    (ids, starts), = stream_sequences(["unbelievable playing"], tokenizer, 32, whole_word=False)
    assert starts[1:-1].all()


def test_chinese_words_from_an_injected_segmenter(tokenizer):
    words = ["北京", "是", "中国", "的", "首都"]
    (ids, starts), = stream_sequences(["北京是中国的首都"], tokenizer, 32, segment=lambda text: words)
    assert _tokens(tokenizer, ids)[1:-1] == list("北京是中国的首都")
    assert starts.tolist() == [False, True, False, True, True, False, True, True, False, False]
    # Mixed text: a ## piece never starts a word, whatever the segmenter says.
    assert word_starts(["北", "京", "play", "##ing"], [[0, 1], [1, 2], [2, 6], [6, 9]],
                       ["北京", "playing"]).tolist() == [True, False, True, False]


def test_chinese_words_from_jieba(tokenizer):
    """jieba is in the dev extra: missing, this fails rather than skips."""
    (ids, starts), = stream_sequences(["我爱北京天安门"], tokenizer, 32)
    words, current = [], ""
    for token, start in zip(_tokens(tokenizer, ids)[1:-1], starts[1:-1]):
        if start and current:
            words.append(current)
            current = ""
        current += token
    words.append(current)
    assert words == ["我", "爱", "北京", "天安门"]


def test_without_jieba_a_clear_error(tokenizer, monkeypatch):
    import builtins

    real_import = builtins.__import__

    def no_jieba(name, *args, **kwargs):
        if name == "jieba":
            raise ImportError("no jieba")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_jieba)
    with pytest.raises(KerasbertError, match="pip install jieba"):
        jieba_segmenter()
    with pytest.raises(KerasbertError, match="kerasbert\\[zh\\]"):
        next(stream_sequences(["北京"], tokenizer, 32))
    # English needs no segmenter.
    assert next(stream_sequences(["the cat"], tokenizer, 32))[0].size == 4


def test_proportions_on_a_large_sample(tokenizer):
    """200k tokens: 15% selected, of those 80% [MASK], 10% random, 10% unchanged."""
    rng = np.random.default_rng(1)
    masker = Masker(tokenizer, 128)
    ordinary = np.setdiff1d(np.arange(len(VOCAB)), masker.special_ids)
    tokens = selected = to_mask = unchanged = 0
    while tokens < 200_000:
        ids = np.concatenate([[tokenizer.cls_id], rng.choice(ordinary, 126), [tokenizer.sep_id]]).astype(np.int32)
        starts = rng.random(128) < 0.6  # words of one to several pieces
        masked, positions, _, weights = mask_tokens(ids, starts, rng, tokenizer.mask_id, len(VOCAB),
                                                    masker.special_ids, max_predictions(128))
        chosen = positions[weights > 0]
        assert masked[0] == tokenizer.cls_id and masked[-1] == tokenizer.sep_id
        tokens += 126
        selected += len(chosen)
        to_mask += int((masked[chosen] == tokenizer.mask_id).sum())
        unchanged += int((masked[chosen] == ids[chosen]).sum())
    # A random replacement can draw the same token (1 in len(ordinary)).
    random_same = 0.1 / len(ordinary)
    assert abs(selected / tokens - 0.15) < 0.003
    assert abs(to_mask / selected - 0.8) < 0.01
    assert abs(unchanged / selected - (0.1 + random_same)) < 0.006
    assert abs(1 - (to_mask + unchanged) / selected - (0.1 - random_same)) < 0.006


def test_text_is_streamed_line_by_line(tmp_path, tokenizer):
    lines = [" ".join(["the big red dog sat on a mat"] * 3) for _ in range(2000)]
    path = tmp_path / "corpus.txt.gz"
    with gzip.open(path, "wt", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n\n")
    read = []

    def counted(iterable):
        for line in iterable:
            read.append(line)
            yield line

    # The first training batch (4 sequences after 2 held out) reads a few lines only.
    batches = training_batches(lambda: stream_sequences(counted(read_lines([path])), tokenizer, 16),
                               Masker(tokenizer, 16), 4, held_out=2, seed=0)
    x, _, _ = next(batches)
    assert x["token_ids"].shape == (4, 16) and len(read) <= 6
    read.clear()
    stream = stream_sequences(counted(read_lines([path])), tokenizer, 16)
    ids, _ = next(stream)
    assert len(ids) == 16 and len(read) <= 2  # one window needs one or two lines, not the file
    rest = list(stream)
    assert len(read) == 2000 and all(len(ids) <= 16 for ids, _ in rest)
    # Windows of max_length - 2 tokens of the lines joined with [SEP] (none
    # where a window ends with a line): nothing lost.
    windows = [ids] + [ids for ids, _ in rest]
    joined = [t for ids in windows for t in ids[1:-1]]
    assert all(w[1] != tokenizer.sep_id for w in windows)
    assert len([t for t in joined if t != tokenizer.sep_id]) == 2000 * 24
    assert 1999 - len(windows) <= joined.count(tokenizer.sep_id) <= 1999


def test_training_batches_cycle_skip_the_held_out_and_resume_where_they_were(tokenizer):
    lines = [f"the {w} sat on a mat" for w in WORDS]
    masker = Masker(tokenizer, 8)

    def sequences():
        return stream_sequences(iter(lines), tokenizer, 8)

    count = len(list(sequences()))
    held = next(sequences())[0]
    first = training_batches(sequences, masker, 3, held_out=1, seed=0)
    batches = [next(first) for _ in range(2 * count)]  # more than one pass over the text
    resumed = training_batches(sequences, masker, 3, held_out=1, seed=0, skip=5)
    for expected in batches[5:8]:
        got = next(resumed)
        for key in expected[0]:
            np.testing.assert_array_equal(got[0][key], expected[0][key])
        np.testing.assert_array_equal(got[1], expected[1])
    trained = []
    for x, labels, weights in batches:
        for row in range(len(labels)):
            ids = x["token_ids"][row].copy()
            ids[x["mask_positions"][row][weights[row] > 0]] = labels[row][weights[row] > 0]
            trained.append(ids[: len(held)])
    assert len(trained) == 6 * count and not any(np.array_equal(held, ids) for ids in trained)  # never trained on
    assert batches[0][0]["padding_mask"].shape == (3, 8)


def _corpus(tmp_path):
    rng = np.random.default_rng(0)
    words = WORDS + ["unbelievable", "playing", "dogs", "jumped"]
    path = tmp_path / "text.txt"
    path.write_text("\n".join(" ".join(rng.choice(words, rng.integers(5, 30))) for _ in range(300)) + "\n",
                    encoding="utf-8")
    return path


def _settings(tmp_path, checkpoint, name, **overrides):
    values = dict(checkpoint=str(checkpoint), text=(str(_corpus(tmp_path)),), output=str(tmp_path / name),
                  max_length=32, batch_size=8, steps_per_epoch=6, epochs=2, held_out=16, learning_rate=1e-3, seed=3)
    values.update(overrides)
    return PretrainSettings(**values)


def test_pretrain_end_to_end_from_the_command_line(tmp_path, checkpoint):
    from kerasbert.cli import main

    text = _corpus(tmp_path)
    output = tmp_path / "run"
    status = main(["pretrain", "--checkpoint", str(checkpoint), "--text", str(text), str(text), "--output",
                   str(output), "--max-length", "32", "--batch-size", "8", "--steps-per-epoch", "5", "--epochs", "2",
                   "--held-out", "16", "--learning-rate", "1e-3", "--no-whole-word-masking"])
    assert status == 0
    history = [json.loads(line) for line in (output / "history.jsonl").read_text().splitlines()]
    assert [r["epoch"] for r in history] == [0, 1, 2]  # 0: the checkpoint before training
    assert all(0.0 <= r["held_out_accuracy"] <= 1.0 for r in history) and all("loss" in r for r in history[1:])
    settings = json.loads((output / "settings.json").read_text())
    assert settings["text"] == [str(text), str(text)] and settings["whole_word_masking"] is False
    assert (output / "logs").exists() and not (output / "backup").exists()
    model = load_masked_lm(output / "encoder")  # the masked-LM head was written too
    before = load_masked_lm(checkpoint)
    head = "masked_lm_head/intermediate_dense/kernel"
    weight = {v.path: v.numpy() for v in model.weights}
    assert not np.allclose(weight[head], {v.path: v.numpy() for v in before.weights}[head])
    assert load_encoder(output / "encoder").num_layers == 2  # as the train commands' --checkpoint loads it
    info = inspect_checkpoint(output / "encoder")
    assert info["masked_lm_head"] and not info["problems"] and info["layout"] == "official"
    metrics = json.loads((output / "metrics.json").read_text())
    assert metrics["held_out_accuracy"] == history[-1]["held_out_accuracy"]
    assert metrics["held_out_accuracy_before"] == history[0]["held_out_accuracy"]
    assert len(metrics["train_epoch_seconds"]) == 2 and metrics["train_tokens_per_s_after_first_epoch"] > 0


def test_pretrain_resumes_after_an_interruption(tmp_path, checkpoint):
    history = interrupt_then_resume(pretrain, _settings(tmp_path, checkpoint, "run"),
                                    _settings(tmp_path, checkpoint, "run"), epoch=1, batch=2)
    assert [r["epoch"] for r in history] == [0, 1, 2]  # epoch 0 measured once, not again on resuming
    assert all("held_out_accuracy" in r for r in history)
    load_masked_lm(tmp_path / "run" / "encoder")


def test_bad_settings_are_clear_errors(tmp_path, checkpoint):
    with pytest.raises(KerasbertError, match="text"):
        pretrain(_settings(tmp_path, checkpoint, "a", text=()))
    with pytest.raises(KerasbertError, match="cannot read"):
        pretrain(_settings(tmp_path, checkpoint, "b", text=(str(tmp_path / "missing.txt"),)))
    with pytest.raises(KerasbertError, match="no sequences beyond"):
        pretrain(_settings(tmp_path, checkpoint, "c", held_out=100_000))


def test_settings_file_and_options_for_the_text_files(tmp_path):
    from kerasbert.cli import build_parser
    from kerasbert.training.settings import settings_from_args

    path = tmp_path / "settings.json"
    path.write_text(json.dumps({"text": ["a.txt", "b.txt.gz"], "steps_per_epoch": 7}))
    args = build_parser().parse_args(["pretrain", "--settings", str(path), "--no-whole-word-masking"])
    settings = settings_from_args(PretrainSettings, args)
    assert settings.text == ("a.txt", "b.txt.gz") and settings.steps_per_epoch == 7
    assert settings.whole_word_masking is False
    args = build_parser().parse_args(["pretrain", "--settings", str(path), "--text", "c.txt"])
    assert settings_from_args(PretrainSettings, args).text == ("c.txt",)


def test_a_checkpoint_without_a_head_gets_a_new_one(tmp_path, capsys):
    keras.utils.set_random_seed(6)
    encoder = BertEncoder(vocabulary_size=len(VOCAB), num_layers=1, num_heads=2, hidden_dim=16,
                          intermediate_dim=32, max_sequence_length=32)
    folder = tmp_path / "no_head"
    save_encoder(encoder, folder, VOCAB)
    with pytest.raises(KerasbertError, match="no masked-LM head"):
        load_masked_lm(folder)
    pretrain(_settings(tmp_path, folder, "run", steps_per_epoch=2, epochs=1, held_out=4))
    assert "a new one is trained" in capsys.readouterr().out
    assert inspect_checkpoint(tmp_path / "run" / "encoder")["masked_lm_head"]
    load_masked_lm(tmp_path / "run" / "encoder")


def _pass_length(text, checkpoint, max_length, held_out):
    """Training sequences in one pass over ``text`` (after ``held_out``), counted here."""
    from kerasbert.checkpoints.loader import load_tokenizer

    tokenizer = load_tokenizer(checkpoint, max_length=max_length)
    return sum(1 for _ in stream_sequences(read_lines([text]), tokenizer, max_length)) - held_out


def test_an_epoch_is_one_pass_over_the_text_unless_steps_per_epoch_caps_it(tmp_path, checkpoint, capsys):
    """The default epoch is one pass (counted while streaming), printed;
    --steps-per-epoch N caps it; a text smaller than a batch is warned about."""
    text = tmp_path / "part.txt"
    text.write_text("\n".join(_corpus(tmp_path).read_text().splitlines()[:40]) + "\n", encoding="utf-8")
    settings = _settings(tmp_path, checkpoint, "pass", text=(str(text),), steps_per_epoch=0, epochs=1, held_out=4)
    count = _pass_length(settings.text[0], checkpoint, 32, 4)
    assert count > 3 * 8
    metrics = pretrain(settings)
    out = capsys.readouterr().out
    assert f"one pass over the text: {count} training sequences of up to 32 tokens (after the 4 held out) -> " \
           f"{-(-count // 8)} batches of 8 per epoch" in out
    assert metrics["steps_per_epoch"] == -(-count // 8) and metrics["training_sequences_per_pass"] == count
    assert "warning" not in out

    metrics = pretrain(_settings(tmp_path, checkpoint, "capped", steps_per_epoch=3, epochs=1, held_out=4))
    assert "one pass over the text: at least 24 training sequences" in capsys.readouterr().out
    assert metrics["steps_per_epoch"] == 3 and metrics["training_sequences_per_pass"] is None

    small = tmp_path / "small.txt"
    small.write_text("the dog jumped\nplaying dogs\n\nunbelievable\n", encoding="utf-8")
    metrics = pretrain(_settings(tmp_path, checkpoint, "small", text=(str(small),), steps_per_epoch=0, epochs=2,
                                 held_out=0))
    out = capsys.readouterr().out
    assert "one pass over the text: 1 training sequence of up to 32 tokens (after the 0 held out)" in out
    assert "warning: one pass over the text makes 1 training sequence, fewer than one batch of 8" in out
    assert metrics["steps_per_epoch"] == 1 and len(metrics["train_epoch_seconds"]) == 2

