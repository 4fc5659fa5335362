"""``kerasbert pretrain --from-scratch``: a WordPiece vocabulary learnt from the text (Google's
special ids, every CJK character a token) and a randomly initialised BERT, trained by the same
masked-LM loop into the official layout every train command reads. Chinese end to end on
CLUENER2020's training text (pretrain, inspect, an NER tagger trained on it and predicting),
English with a cased vocabulary and a resume, the one-line errors, and the bench
``bench.chinese_encoder`` (its arguments and a ``--tiny`` run)."""

import gzip
import json

import numpy as np
import pytest

from conftest import interrupt_then_resume
from conftest import require_shared
from kerasbert.checkpoints.loader import inspect_checkpoint
from kerasbert.checkpoints.loader import load_masked_lm
from kerasbert.checkpoints.loader import load_tokenizer
from kerasbert.errors import KerasbertError
from kerasbert.tokenizers.vocab import BERT_SPECIAL_TOKENS
from kerasbert.tokenizers.vocab import build_vocab
from kerasbert.tokenizers.vocab import is_cjk
from kerasbert.tokenizers.vocab import read_vocab
from kerasbert.training.pretraining import pretrain
from kerasbert.training.settings import PretrainSettings

GOOGLE_IDS = {"[PAD]": 0, "[unused1]": 1, "[unused99]": 99, "[UNK]": 100, "[CLS]": 101, "[SEP]": 102, "[MASK]": 103}


@pytest.fixture(scope="module")
def cluener_lines():
    """The first 400 examples of CLUENER2020's training file (JSON lines): text for the
    pretraining (300) and an NER train / dev split (the rest); nothing of its dev or test."""
    with gzip.open(require_shared("data", "cluener2020", "train.json.gz"), "rt", encoding="utf-8") as f:
        return [line for _, line in zip(range(400), f)]


def _english(path, lines=200, seed=0):
    rng = np.random.default_rng(seed)
    words = ["The", "river", "Paris", "London", "walked", "walking", "unbelievable", "believable", "Anna", "Weber",
             "visited", "visiting", "rivers", "a", "of", "in", "and", "Cairo", "Thursday", "Electronics"]
    path.write_text("\n".join(" ".join(rng.choice(words, rng.integers(6, 20))) + "." for _ in range(lines)) + "\n",
                    encoding="utf-8")
    return path


def _std(model, path):
    return float(np.std(next(v.numpy() for v in model.weights if v.path == path)))


def test_the_vocabulary_has_googles_special_ids_every_cjk_character_and_wordpieces():
    lines = ["北京欢迎你，Beijing welcomes you", "上海的Unbelievable故事", "兼容字\uf900在这里",
             "unbelievable walking"] * 3
    tokens, report = build_vocab(lines, vocab_size=400)
    assert {t: tokens.index(t) for t in GOOGLE_IDS} == GOOGLE_IDS and tokens[:104] == list(BERT_SPECIAL_TOKENS)
    assert len(tokens) == len(set(tokens))
    # U+F900 (a compatibility ideograph) is normalized to U+8C48 by the tokenizer, and kept as such.
    chars = {c for line in lines for c in line if is_cjk(c)} - {"\uf900"} | {"\u8c48"}
    assert chars <= set(tokens) and "\uf900" not in tokens and report["added"] == []
    assert report["cjk_characters"] == len(chars) and report["lines"] == len(lines)
    # A CJK character is a word of its own: never a ## continuation.
    assert not any(len(t) == 3 and t.startswith("##") and is_cjk(t[2]) for t in tokens)
    assert any(t.startswith("##") for t in tokens) and not any(c.isupper() for t in tokens[104:] for c in t)
    assert "unbelievable" in tokens  # pieces seen at least twice are merged up to whole words

    cased, _ = build_vocab(lines, vocab_size=400, lowercase=False)
    assert "Beijing" in cased and "beijing" not in cased
    english, _ = build_vocab(["unbelievable walking talking " * 3] * 5 + ["quick brown fox"] * 5, vocab_size=140)
    assert len(english) == 140  # at most --vocab-size where the text's characters fit
    with pytest.raises(KerasbertError, match="more than the 104 special"):
        build_vocab(lines, vocab_size=104)
    with pytest.raises(KerasbertError, match="no words"):
        build_vocab(["", "  "], vocab_size=400)


@pytest.mark.parametrize("options, message", [
    ([], "pretrain needs --checkpoint CHECKPOINT (continue its pre-training) or --from-scratch"),
    (["--checkpoint", "starter", "--from-scratch"], "give --checkpoint (continue its pre-training) or --from-scratch"),
    (["--checkpoint", "starter", "--layers", "3"], "--layers: the size of a new encoder (--from-scratch)"),
    (["--from-scratch", "--hidden", "100", "--heads", "3"], "hidden size 100 is not divisible by 3 heads"),
    (["--from-scratch", "--max-length", "600"], "max_length 600 is longer than --max-positions 512"),
    (["--from-scratch", "--vocab-size", "100"], "vocab_size must be more than the 104 special and unused tokens ([PAD], "
                                                "[unused1] .. [unused99], [UNK], [CLS], [SEP], [MASK]), got 100"),
])
def test_what_to_start_from_and_the_sizes_are_one_line_errors(tmp_path, capsys, options, message):
    from kerasbert.cli import main

    text = _english(tmp_path / "text.txt", lines=5)
    assert main(["pretrain", "--text", str(text), "--output", str(tmp_path / "run"), *options]) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1
    assert not (tmp_path / "run").exists()


def test_chinese_from_scratch_then_a_tagger(tmp_path, cluener_lines, capsys):
    from kerasbert.cli import main

    corpus = tmp_path / "corpus.txt"
    corpus.write_text("".join(json.loads(line)["text"] + "\n" for line in cluener_lines[:300]), encoding="utf-8")
    output = tmp_path / "pretrain"
    assert main(["pretrain", "--from-scratch", "--text", str(corpus), "--output", str(output), "--size", "tiny",
                 "--max-positions", "128", "--max-length", "64", "--batch-size", "8", "--steps-per-epoch", "2",
                 "--epochs", "2", "--keep-encoders-every", "1", "--held-out", "8"]) == 0
    encoder = output / "encoder"
    assert sorted(p.name for p in (output / "encoders").iterdir()) == ["step-2"]  # the last epoch's is encoder/
    kept = load_masked_lm(output / "encoders" / "step-2")
    vocab = read_vocab(encoder / "vocab.txt")
    assert vocab == read_vocab(output / "vocab.txt")
    assert {t: vocab.index(t) for t in GOOGLE_IDS} == GOOGLE_IDS
    text = corpus.read_text(encoding="utf-8")
    cjk = {c for c in text if is_cjk(c)}
    assert len(cjk) > 1000 and cjk <= set(vocab)
    tokenizer = load_tokenizer(encoder)  # as the train commands read it
    assert tokenizer.lowercase
    assert json.loads((encoder / "tokenizer_config.json").read_text()) == {"do_lower_case": True}
    assert not any("[UNK]" in tokenizer.tokenize(line) for line in text.splitlines())  # the text is covered

    capsys.readouterr()
    assert main(["inspect", str(encoder)]) == 0
    assert "status:     OK" in capsys.readouterr().out
    info = inspect_checkpoint(encoder)
    assert not info["problems"] and info["masked_lm_head"] and info["layout"] == "official"
    config = info["config"]
    assert (config["num_layers"], config["hidden_size"], config["num_heads"], config["intermediate_size"],
            config["max_position_embeddings"], config["vocab_size"]) == (2, 128, 2, 512, 128, len(vocab))
    model = load_masked_lm(encoder)
    # BERT's initialisation (truncated normal, 0.02), two small steps away; keras-hub's Glorot
    # default would give the head's transform a deviation of about 0.09.
    assert 0.015 < _std(model, "token_embedding/embeddings") < 0.025
    assert 0.015 < _std(model, "masked_lm_head/intermediate_dense/kernel") < 0.025
    assert 0.015 < _std(model, "transformer_layer_1/feedforward_intermediate_dense/kernel") < 0.025
    history = [json.loads(line) for line in (output / "history.jsonl").read_text().splitlines()]
    assert [r["epoch"] for r in history] == [0, 1, 2]
    assert not np.allclose(kept.get_weights()[0], model.get_weights()[0])  # the kept one is the earlier encoder
    metrics = json.loads((output / "metrics.json").read_text())
    assert metrics["learning_rate"] == 5e-4 and metrics["vocabulary_size"] == len(vocab)
    assert json.loads((output / "settings.json").read_text())["from_scratch"] is True

    train, dev, sentences = tmp_path / "train.json", tmp_path / "dev.json", tmp_path / "in.txt"
    train.write_text("".join(cluener_lines[300:364]), encoding="utf-8")
    dev.write_text("".join(cluener_lines[364:396]), encoding="utf-8")
    texts = [json.loads(line)["text"] for line in cluener_lines[396:400]]
    sentences.write_text("".join(t + "\n" for t in texts), encoding="utf-8")
    assert main(["ner", "train", "--checkpoint", str(encoder), "--train", str(train), "--dev", str(dev), "--output",
                 str(tmp_path / "ner"), "--epochs", "1", "--batch-size", "16", "--max-length", "64",
                 "--no-calibrate", "--head", "softmax", "--no-lstm"]) == 0
    capsys.readouterr()
    assert main(["ner", "predict", "--model", str(tmp_path / "ner" / "model"), str(sentences)]) == 0
    predicted = [json.loads(line) for line in capsys.readouterr().out.splitlines() if line.startswith("{")]
    assert [p["text"] for p in predicted] == texts and all(isinstance(p["entities"], list) for p in predicted)


def test_english_from_scratch_is_cased_on_request_and_resumes_with_its_own_vocabulary(tmp_path, monkeypatch, capsys):
    import kerasbert.tokenizers.vocab as vocab_module

    text = _english(tmp_path / "text.txt")

    def settings(**more):
        return PretrainSettings(from_scratch=True, lowercase=False, text=(str(text),), output=str(tmp_path / "run"),
                                size="tiny", layers=1, hidden=32, max_positions=64, max_length=32, vocab_size=300,
                                batch_size=8, steps_per_epoch=3, epochs=2, held_out=4, **more)

    learnt = vocab_module.build_vocab

    def run(settings, callbacks=()):
        if settings.resume:  # the resumed run reads OUTPUT/vocab.txt back: learning it again is an error here
            monkeypatch.setattr(vocab_module, "build_vocab", lambda *a, **k: pytest.fail("vocabulary learnt again"))
        else:
            monkeypatch.setattr(vocab_module, "build_vocab", learnt)
        return pretrain(settings, callbacks=callbacks)

    history = interrupt_then_resume(run, settings(), settings(), epoch=1, batch=1)
    assert [r["epoch"] for r in history] == [0, 1, 2]
    assert "(the run's own, resumed)" in capsys.readouterr().out
    encoder = tmp_path / "run" / "encoder"
    vocab = read_vocab(encoder / "vocab.txt")
    assert vocab == read_vocab(tmp_path / "run" / "vocab.txt") and len(vocab) <= 300
    assert {"Paris", "The", "London"} <= set(vocab) and any(t.startswith("##") for t in vocab)
    assert {t: vocab.index(t) for t in GOOGLE_IDS} == GOOGLE_IDS
    assert not load_tokenizer(encoder).lowercase
    info = inspect_checkpoint(encoder)
    assert not info["problems"] and info["config"]["num_layers"] == 1 and info["config"]["hidden_size"] == 32


def test_the_bench_arguments(tmp_path, capsys):
    from bench import chinese_encoder
    from bench.common import RESULTS

    args = chinese_encoder.parse_args([])
    assert (args.size, args.minutes, args.datasets, args.results) == ("mini", 60.0, ["cluener", "weibo", "cmeie"], RESULTS)
    assert args.ner_options == []  # the default head
    assert chinese_encoder.parse_args(["--ner-options", "--head 'global-pointer'"]).ner_options == ["--head",
                                                                                                    "global-pointer"]
    tiny = chinese_encoder.parse_args(["--tiny", "--work", str(tmp_path)])
    assert tiny.results == tmp_path / "results" and (tiny.layers, tiny.hidden, tiny.steps) == (1, 64, 4)
    assert tiny.ner_options == ["--head", "softmax", "--no-lstm"]
    for bad, message in ((["--minutes", "0"], "expected a number above 0"), (["--steps", "x"], "expected a number"),
                         (["--datasets", "msra"], "--datasets: unknown msra"), (["--size", "base"], "invalid choice"),
                         (["--ner-options", "--head 'x"], "--ner-options: No closing quotation"),
                         (["--curve", "300"], "--curve: a multiple of --eval-every")):
        with pytest.raises(SystemExit) as stop:
            chinese_encoder.parse_args(bad)
        assert stop.value.code == 2 and message in capsys.readouterr().err


def test_the_bench_time_budget_stops_training_and_counts_the_steps():
    from types import SimpleNamespace

    from bench import chinese_encoder

    for minutes, stopped in ((0.0, True), (60.0, False)):
        budget, model = chinese_encoder.time_budget(minutes), SimpleNamespace(stop_training=False)
        budget.set_model(model)
        budget.on_train_begin()
        for batch in range(3):
            budget.on_train_batch_end(batch)
        budget.on_epoch_end(0)
        assert (model.stop_training, budget.stopped, budget.steps, budget.at_epoch_end) == (stopped, stopped, 3, [3])


def test_the_bench_tiny_run(tmp_path):
    """Every step of the recipe on a few lines (CLUENER2020 only: Weibo's files are cut the
    same way, checked here without training); the records land in WORK/results."""
    from bench import chinese_encoder

    require_shared("data", "weibo_ner")
    work = tmp_path / "work"
    args = chinese_encoder.parse_args(["--tiny", "--work", str(work), "--datasets", "cluener"])
    weibo = chinese_encoder.dataset_files(args, work, chinese_encoder.SHARED, "weibo")
    assert [len([b for b in weibo[r].read_text(encoding="utf-8").split("\n\n") if b.strip()])
            for r in ("train", "dev", "test")] == [48, 16, 16]
    chinese_encoder.main(["--tiny", "--work", str(work), "--datasets", "cluener", "--curve", "2"])
    records = {path.name.split("-", 3)[-1]: json.loads(path.read_text(encoding="utf-8"))
               for path in (work / "results" / "chinese_encoder").glob("*.json")}
    assert sorted(records) == ["cluener-curve-tiny.json", "cluener-tiny.json", "pretraining-tiny.json"]
    curve = records["cluener-curve-tiny.json"]["rows"]
    assert [row["pretraining steps"] for row in curve] == [0, 2, 4]  # random start, kept at 2, the final encoder
    assert "encoders/step-2 " in curve[1]["commands"][0] and 0 <= curve[1]["dev F1"] <= 100
    pretraining = records["pretraining-tiny.json"]
    assert [r["step"] for r in pretraining["rows"]] == [0, 2, 4]
    assert all(0 <= r["held-out masked-token accuracy"] <= 100 for r in pretraining["rows"])
    text = pretraining["setup"]["pretraining text"]
    assert list(text) == [name for name, *_ in chinese_encoder.SOURCES]
    assert all(0 < t["lines"] <= 60 and t["characters"] > 0 for t in text.values())
    assert pretraining["setup"]["pretraining"]["steps done"] == 4
    assert "kerasbert pretrain --from-scratch" in pretraining["setup"]["pretraining"]["command"]
    cluener = records["cluener-tiny.json"]
    assert [r["system"].endswith(end) for r, end in zip(cluener["rows"], (
        ", pretrained from scratch here (4 steps)", ", random initialisation, no pretraining"))] == [True, True]
    assert all(0 <= r["dev F1"] <= 100 for r in cluener["rows"])
    assert "gain over random initialisation" in cluener["rows"][0]
    assert [a["test F1"] for a in cluener["anchors"]] == [70.0, 78.8]
