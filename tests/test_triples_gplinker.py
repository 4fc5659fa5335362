"""The GPLinker triple head (--head gplinker) on the toy checkpoint: the
in-graph decoding on hand-made logits (SEO, EPO, a head link without its tail
link, thresholds, nested spans, a triple seen by two windows, the windows of
a long text through the pipeline), the sparse loss against the dense one,
training rows, a short training run through the CLI (predict, evaluate,
reload with its head, thresholds), the text-in SavedModel in a fresh process
against predict at non-default thresholds, and the settings' errors. One trained toy model is shared by the module."""

import json
import re

import numpy as np
import pytest
import tensorflow as tf

from kerasbert_apps.triples.data import Span
from kerasbert_apps.triples.data import Triple
from kerasbert_apps.triples.data import TripleExample
from kerasbert_apps.triples.decode import per_text
from kerasbert_apps.triples.heads.gplinker.pipeline import GPLinkerExtractor
from kerasbert_apps.triples.heads.gplinker.decode import linked_triples
from kerasbert_apps.triples.heads.gplinker.model import sparse_global_pointer_crossentropy
from kerasbert_apps.triples.train import TRIPLES
from kerasbert_apps.triples.train import TriplesTrainSettings
from conftest import require_shared
from conftest import webnlg_slice
from kerasbert.cli import main
from kerasbert.errors import KerasbertError
from kerasbert.layers.global_pointer import multilabel_categorical_crossentropy
from kerasbert.tokenizers.tokenizer import BertTokenizer

VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "jack", "makes", "a", "dull", "boy", "all", "work",
         "and", "no", "play", "##s", ",", "."]
PREDICATES = ["likes", "is", "does"]


def _toy():
    return require_shared("data", "models", "keras_bert_test_checkpoint")


def _sigmoid(x):
    return 1 / (1 + np.exp(-x))


# --- decoding on hand-made logits


def _decode(entities, heads, tails, row_text=None, offsets=None, allowed=None, **thresholds):
    rows, length = entities.shape[:2]
    row_text = np.zeros(rows, np.int32) if row_text is None else row_text
    if offsets is None:  # position p -> characters [10p, 10p + 5)
        offsets = np.tile(np.stack([np.arange(length) * 10, np.arange(length) * 10 + 5], 1)[None], (rows, 1, 1))
    if allowed is None:  # [CLS] at 0 and [SEP] last are not tokens
        allowed = np.tile((np.arange(length) >= 1) & (np.arange(length) < length - 1), (rows, 1))
    fields = linked_triples({"entities": tf.constant(entities), "heads": tf.constant(heads),
                             "tails": tf.constant(tails)}, tf.constant(row_text, tf.int32),
                            tf.constant(offsets, tf.int32), tf.constant(allowed), **thresholds)
    return {k: v.numpy() for k, v in fields.items()}


def _triples(fields):
    """(subject first position, last position, predicate, object first, last, score)."""
    return [(int(ss) // 10, (int(se) - 5) // 10, int(p), int(os_) // 10, (int(oe) - 5) // 10, float(score))
            for ss, se, p, os_, oe, score in zip(fields["subject_start"], fields["subject_end"], fields["predicate"],
                                                 fields["object_start"], fields["object_end"], fields["score"])]


def _blank(rows=1, length=9, predicates=3):
    return (np.full((rows, length, length, 2), -4.0, np.float32),
            np.full((rows, length, length, predicates), -4.0, np.float32),
            np.full((rows, length, length, predicates), -4.0, np.float32))


def test_decoding_seo_epo_and_half_links():
    entities, heads, tails = _blank()
    entities[0, 1, 2, 0] = 3.0  # subject: positions 1..2
    entities[0, 4, 4, 1] = 2.5  # objects: 4..4 and 5..6
    entities[0, 5, 6, 1] = 1.5
    heads[0, 1, 4, 0], tails[0, 2, 4, 0] = 2.0, 0.5  # SEO: (1-2, 0, 4-4) ...
    heads[0, 1, 5, 1], tails[0, 2, 6, 1] = 1.0, 4.0  # ... and (1-2, 1, 5-6)
    heads[0, 1, 5, 2], tails[0, 2, 6, 2] = 3.0, 3.0  # EPO: (1-2, 2, 5-6) too, same pair, another predicate
    heads[0, 1, 4, 2] = 5.0  # a head link without its tail link: nothing
    tails[0, 2, 4, 1] = 5.0  # a tail link without its head link: nothing
    heads[0, 5, 1, 0], tails[0, 6, 2, 0] = 5.0, 5.0  # links from an object to a subject: no subject at 5-6
    got = _triples(_decode(entities, heads, tails))
    assert [t[:5] for t in got] == [(1, 2, 0, 4, 4), (1, 2, 1, 5, 6), (1, 2, 2, 5, 6)]
    # the score: the sigmoid of the lowest of the four logits (subject, object, head link, tail link)
    np.testing.assert_allclose([t[5] for t in got], _sigmoid(np.array([0.5, 1.0, 1.5])), rtol=1e-6)


def test_thresholds_move_the_decisions_and_bound_the_scores():
    entities, heads, tails = _blank()
    entities[0, 1, 2, 0] = 3.0  # subject 1..2; objects 4..4 (logit 2.5) and 5..6 (1.5)
    entities[0, 4, 4, 1] = 2.5
    entities[0, 5, 6, 1] = 1.5
    heads[0, 1, 4, 0], tails[0, 2, 4, 0] = 2.0, 0.5
    heads[0, 1, 5, 1], tails[0, 2, 6, 1] = 1.0, 4.0
    heads[0, 1, 4, 2], tails[0, 2, 4, 2] = -1.0, -0.5  # links below logit 0
    heads[0, 1, 5, 2], tails[0, 2, 6, 2] = 5.0, -2.0  # a tail link far below 0
    assert [t[:5] for t in _triples(_decode(entities, heads, tails))] == [(1, 2, 0, 4, 4), (1, 2, 1, 5, 6)]
    # an entity threshold above object 5..6's logit drops its triple
    assert [t[:5] for t in _triples(_decode(entities, heads, tails, entity_threshold=1.6))] == [(1, 2, 0, 4, 4)]
    # a link threshold above 0.5 drops the triple whose tail link is 0.5
    assert [t[:5] for t in _triples(_decode(entities, heads, tails, link_threshold=0.6))] == [(1, 2, 1, 5, 6)]
    # a link threshold below 0 adds the pair whose two links are -1 and -0.5 (not the one with -2)
    got = _triples(_decode(entities, heads, tails, link_threshold=-1.5))
    assert [t[:5] for t in got] == [(1, 2, 0, 4, 4), (1, 2, 1, 5, 6), (1, 2, 2, 4, 4)]
    np.testing.assert_allclose([t[5] for t in got], _sigmoid(np.array([0.5, 1.0, -1.0])), rtol=1e-6)
    assert got[2][5] < 0.5  # the score stays the weakest decision's probability, here below 0.5


def test_decoding_nested_spans_and_the_cells_that_are_not_spans():
    entities, heads, tails = _blank()
    entities[0, 1, 5, 0] = 2.0  # subject 1..5 with an object inside it, 2..3 ...
    entities[0, 2, 3, 1] = 2.0
    entities[0, 2, 3, 0] = 2.0  # ... which is also a subject, whose object 3..3 lies inside it
    entities[0, 3, 3, 1] = 2.0
    heads[0, 1, 2, 0], tails[0, 5, 3, 0] = 1.0, 1.0
    heads[0, 2, 3, 1], tails[0, 3, 3, 1] = 1.0, 1.0
    entities[0, 6, 4, 0] = entities[0, 4, 4, 1] = 9.0  # end before start: not a span
    heads[0, 6, 4, 0] = tails[0, 4, 4, 0] = 9.0
    entities[0, 0, 1, 0] = entities[0, 7, 8, 1] = 9.0  # from [CLS], to [SEP]: not spans
    heads[0, 0, 7, 0] = tails[0, 1, 8, 0] = 9.0
    got = _triples(_decode(entities, heads, tails))
    assert [t[:5] for t in got] == [(1, 5, 0, 2, 3), (2, 3, 1, 3, 3)]
    assert _decode(*_blank())["score"].shape == (0,)  # nothing fires: no triple


def test_a_triple_seen_by_two_windows_is_kept_once_with_its_best_score():
    entities, heads, tails = _blank(rows=3)
    # rows 0 and 1: two windows of text 0, row 1 starting 3 tokens later; row 2: text 1
    offsets = np.zeros((3, 9, 2), np.int32)
    for row, shift in ((0, 0), (1, 3), (2, 0)):
        token = np.arange(9) - 1 + shift
        offsets[row] = np.stack([token * 10, token * 10 + 5], 1)
    for row, shift, link in ((0, 0, 1.0), (1, 3, 2.5)):  # tokens 4 and 6 of text 0: positions 5, 7 / 2, 4
        s, o = 5 - shift, 7 - shift
        entities[row, s, s, 0] = entities[row, o, o, 1] = 3.0
        heads[row, s, o, 1], tails[row, s, o, 1] = link, 3.0
    entities[1, 6, 6, 0] = entities[1, 1, 1, 1] = 3.0  # only in window 1: tokens 8 -> 3
    heads[1, 6, 1, 0] = tails[1, 6, 1, 0] = 0.2
    fields = _decode(entities, heads, tails, row_text=np.array([0, 0, 1], np.int32), offsets=offsets)
    assert fields["text"].tolist() == [0, 0]
    assert _triples(fields) == [(4, 4, 1, 6, 6, pytest.approx(_sigmoid(2.5), rel=1e-6)),
                                (8, 8, 0, 3, 3, pytest.approx(_sigmoid(0.2), rel=1e-6))]
    out = per_text({k: tf.constant(v) for k, v in fields.items()}, 2, PREDICATES)
    assert out["count"].numpy().tolist() == [2, 0]
    assert out["predicate"].numpy()[0].tolist() == [b"is", b"likes"]


class _JackLikesBoy:
    """A stand-in for the model: every ``jack`` token a subject, every
    ``boy`` an object, and each (jack, boy) pair of a row linked by
    predicate 0 with a head-link logit that grows with the subject's row
    position (so that the windows give the same triple different scores)."""

    def __call__(self, rows, training=False):
        ids = rows["token_ids"]
        jack, boy = ids == VOCAB.index("jack"), ids == VOCAB.index("boy")
        length = tf.shape(ids)[1]
        diagonal = tf.eye(length, dtype=tf.bool)[None]

        def spans(word):
            return tf.where(word[:, :, None] & diagonal, 3.0, -3.0)

        position = tf.cast(tf.range(length), tf.float32)[None, :, None]
        pair = jack[:, :, None] & boy[:, None, :]
        none = -tf.ones_like(tf.cast(pair, tf.float32))
        head = tf.where(pair, 0.5 + 0.1 * position, -1.0)
        tail = tf.where(pair, 3.0, -1.0)
        return {"entities": tf.stack([spans(jack), spans(boy)], -1),
                "heads": tf.stack([head, none, none], -1), "tails": tf.stack([tail, none, none], -1)}


def test_the_windows_of_a_long_text_through_the_pipeline():
    tokenizer = BertTokenizer(VOCAB, lowercase=True)
    extractor = GPLinkerExtractor(_JackLikesBoy(), tokenizer, PREDICATES, max_length=8, overlap=3)  # 6 tokens, step 3
    words = "jack makes boy all jack boy work no play jack dull a boy".split()
    text = " ".join(words)
    starts = [m.start() for m in re.finditer(r"\S+", text)]
    w = extractor.windows_numpy([text])
    assert len(w["text_index"]) == 4  # tokens [0, 6), [3, 9), [6, 12), [9, 13)
    expected = {}
    for row in range(len(w["text_index"])):
        first, last = int(w["token_start"][row]), int(w["token_end"][row])
        for s in range(first, last):
            for o in range(first, last):
                if words[s] == "jack" and words[o] == "boy":
                    key = (s, o)
                    expected[key] = max(expected.get(key, 0), _sigmoid(min(3.0, 0.5 + 0.1 * (s - first + 1))))
    (result,) = extractor.predict([text])
    got = {(starts.index(t["subject"]["start"]), starts.index(t["object"]["start"])): t["score"]
           for t in result["triples"]}
    assert set(got) == set(expected) == {(0, 2), (0, 5), (4, 2), (4, 5), (9, 12)}  # (9, 5), (4, 12): no common window
    assert all(t["predicate"] == "likes" and t["subject"]["text"] == "jack" and t["object"]["text"] == "boy"
               for t in result["triples"])
    for key, score in got.items():
        assert score == pytest.approx(expected[key], abs=1e-4)
    # jack 4 -> boy 5 is in windows 0 and 1: kept once, with window 0's score (jack at row position 5, not 2)
    assert got[(4, 5)] == pytest.approx(_sigmoid(1.0), abs=1e-4)


# --- the loss


def test_sparse_loss_is_the_dense_multilabel_crossentropy():
    rng = np.random.default_rng(0)
    logits = rng.normal(0, 3, (2, 4, 4, 3)).astype("float32")
    logits[1, 3] = -1e12  # a padded position, masked as the GlobalPointer masks it
    logits[1, :, 3] = -1e12
    positives = [(0, 0, 1, 2), (0, 0, 3, 2), (0, 2, 2, 0), (1, 1, 2, 1), (1, 0, 0, 1)]  # (row, m, n, channel)
    dense = np.zeros(logits.shape, np.float32)
    codes = np.zeros((2, 4, 2), np.int32)
    for b, m, n, c in positives:
        dense[b, m, n, c] = 1
        k = int((codes[b, m] > 0).sum())
        codes[b, m, k] = n * 3 + c + 1
    got = float(sparse_global_pointer_crossentropy(tf.constant(codes), tf.constant(logits)))
    # per (row, channel): log(1 + sum_neg exp(s)) + log(1 + sum_pos exp(-s)), summed over channels, mean over rows
    by_hand = 0.0
    for b in range(2):
        for c in range(3):
            s, y = logits[b, ..., c].ravel().astype(np.float64), dense[b, ..., c].ravel()
            by_hand += np.log1p(np.exp(s[y == 0]).sum()) + np.log1p(np.exp(-s[y == 1]).sum())
    assert got == pytest.approx(by_hand / 2, rel=1e-5)
    reference = multilabel_categorical_crossentropy(np.transpose(dense, (0, 3, 1, 2)).reshape(2, 3, -1),
                                                    np.transpose(logits, (0, 3, 1, 2)).reshape(2, 3, -1))
    assert got == pytest.approx(float(np.asarray(reference).sum(axis=1).mean()), rel=1e-5)


# --- training rows


def test_training_rows_hold_spans_and_links_as_codes():
    tokenizer = BertTokenizer(VOCAB, lowercase=True)
    text = "jack makes a dull boy"  # [CLS] jack makes a dull boy [SEP]
    triples = [("jack", "is", "dull boy", 0, 12), ("jack", "likes", "a", 0, 11), ("dull boy", "does", "makes", 12, 5),
               ("jack", "is", "dull boy", 0, 12)]
    example = TripleExample(text, [Triple(Span(s0, s0 + len(s), s), p, Span(o0, o0 + len(o), o))
                                   for s, p, o, s0, o0 in triples], "t:1")
    rows, report = GPLinkerExtractor(None, tokenizer, PREDICATES, max_length=16).features([example])
    assert report.triples_used == 4 and report.subjects == 2

    def decoded(name, channels):
        codes = rows[name][0]
        return sorted((i, (int(c) - 1) // channels, (int(c) - 1) % channels) for i in range(len(codes))
                      for c in codes[i] if c)

    assert rows["entity_codes"][0].shape[0] == 7
    # (first, last, 0 subject / 1 object)
    assert decoded("entity_codes", 2) == [(1, 1, 0), (2, 2, 1), (3, 3, 1), (4, 5, 0), (4, 5, 1)]
    # head links (subject start, object start, predicate); tail links (subject end, object end, predicate)
    assert decoded("head_codes", 3) == [(1, 3, 0), (1, 4, 1), (4, 2, 2)]
    assert decoded("tail_codes", 3) == [(1, 3, 0), (1, 5, 1), (5, 2, 2)]


# --- a short training run, predict, evaluate, reload, export


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("gplinker")
    data = webnlg_slice(tmp, 32, 8)
    status = main(["triples", "train", "--checkpoint", str(_toy()), "--train", str(data[0]), "--dev", str(data[1]),
                   "--output", str(tmp / "run"), "--epochs", "1", "--batch-size", "8", "--max-length", "16",
                   "--seed", "7", "--head", "gplinker", "--pointer-size", "8"])
    assert status == 0
    return tmp, data


def test_training_run_reloads_with_its_head_and_evaluates(run, capsys):
    tmp, (_, dev) = run
    assert json.loads((tmp / "run" / "settings.json").read_text())["head"] == "gplinker"
    saved = json.loads((tmp / "run" / "model" / "gplinker.json").read_text())
    # --threshold-entity/--threshold-link auto (the default): tuned on dev at the end of training
    tuned = json.loads((tmp / "run" / "metrics.json").read_text())["tuned_thresholds"]
    assert tuned["names"] == ["entity", "link"] and tuned["f1"] >= tuned["f1_at_default"]
    assert saved["head"] == "gplinker" and saved["thresholds"] == dict(zip(tuned["names"], tuned["thresholds"]))
    assert not (tmp / "run" / "model" / "extractor.json").exists()
    extractor = TRIPLES.load(tmp / "run")
    assert type(extractor) is GPLinkerExtractor and extractor.predicates == saved["predicates"]
    capsys.readouterr()
    assert main(["triples", "evaluate", "--model", str(tmp / "run"), "--data", str(dev),
                 "--output", str(tmp / "scores.json")]) == 0
    printed = capsys.readouterr().out
    assert "exact" in printed and "partial" in printed and "SEO" in printed and "EPO" in printed
    scores = json.loads((tmp / "scores.json").read_text())
    assert scores["exact"]["f1"] == pytest.approx(tuned["f1"])  # the model folder decides at the tuned thresholds
    assert scores["exact"]["predicted"] > 0  # the barely trained toy model fires: something to compare


def test_thresholds_of_the_other_head_are_refused(run, tmp_path, capsys):
    import argparse

    from kerasbert_apps.triples.heads.casrel.pipeline import Extractor

    tmp, _ = run
    (tmp_path / "in.txt").write_text("Alan Bean was born in Wheeler , Texas .\n")
    capsys.readouterr()
    assert main(["triples", "predict", "--model", str(tmp / "run"), str(tmp_path / "in.txt"),
                 "--threshold-start", "0.3"]) == 2
    err = capsys.readouterr().err
    assert "--threshold-start belong to the casrel head" in err and "--threshold-entity/--threshold-link" in err
    assert "Traceback" not in err
    options = dict(threshold_start=None, threshold_end=None, threshold_entity=0.3, threshold_link=None)
    with pytest.raises(KerasbertError, match="--threshold-entity belong to the gplinker head; .* casrel head, whose "
                       "thresholds are --threshold-start/--threshold-end"):
        TRIPLES.configure(Extractor.__new__(Extractor), argparse.Namespace(**options))
    extractor = GPLinkerExtractor.load(tmp / "run")
    assert extractor.with_thresholds({"link": 0.2}).thresholds == {"entity": extractor.thresholds["entity"], "link": 0.2}
    with pytest.raises(KerasbertError, match=r"threshold entity must be in \(0, 1\), got 0.0"):
        extractor.with_thresholds({"entity": 0.0})
    with pytest.raises(KerasbertError, match=r"unknown gplinker threshold\(s\) \['subject_start'\]"):
        extractor.with_thresholds({"subject_start": 0.3})
    # a folder saved before the thresholds existed loads with 0.5 / 0.5
    settings = {k: v for k, v in extractor.settings().items() if k != "thresholds"}
    assert GPLinkerExtractor.from_settings(extractor.model, extractor.tokenizer, settings).thresholds == {
        "entity": 0.5, "link": 0.5}


def test_tune_writes_the_best_thresholds_and_evaluate_uses_them(run, tmp_path, capsys):
    import shutil

    tmp, (_, dev) = run
    shutil.copytree(tmp / "run" / "model", tmp_path / "model")
    capsys.readouterr()
    assert main(["triples", "tune", "--model", str(tmp_path / "model"), "--data", str(dev), "--values", "0.7"]) == 0
    out = capsys.readouterr().out
    grid = re.findall(r"entity (\S+)  link (\S+):  P \S+  R \S+  F1 (\S+)", out)
    assert [g[:2] for g in grid] == [("0.70", "0.70"), ("0.70", "0.50"), ("0.50", "0.70"), ("0.50", "0.50")]
    best = re.search(r"best: --threshold-entity (\S+)  --threshold-link (\S+): P \S+  R \S+  F1 (\S+) "
                     r"\(0.5 / 0.5: F1 (\S+)\)", out)
    entity, link, f1, default_f1 = (float(x) for x in best.groups())
    assert f1 == max(float(g[2]) for g in grid) >= default_f1 and default_f1 == float(grid[-1][2])
    saved = json.loads((tmp_path / "model" / "gplinker.json").read_text())
    assert saved["thresholds"] == {"entity": entity, "link": link}
    assert main(["triples", "evaluate", "--model", str(tmp_path / "model"), "--data", str(dev),
                 "--output", str(tmp_path / "scores.json")]) == 0
    assert json.loads((tmp_path / "scores.json").read_text())["f1"] == pytest.approx(f1, abs=1e-4)


def test_predict_cli_thresholds_are_the_extractors(run, tmp_path, capsys):
    """``triples predict --threshold-entity 0.7 --threshold-link 0.3`` gives
    what the extractor at those thresholds predicts (below 0.5: triples only
    the lowered link threshold lets through). The exports, at non-default
    thresholds, in a fresh process: the head contract (kerasbert_apps.testing)."""
    tmp, (_, dev) = run
    extractor = GPLinkerExtractor.load(tmp / "run").with_thresholds({"entity": 0.7, "link": 0.3})
    texts = [json.loads(line)["text"] for line in dev.read_text().splitlines()] + ["", "😀 🎉", "李白出生于碎叶城"]
    (tmp_path / "in.jsonl").write_text("".join(json.dumps({"text": t}, ensure_ascii=False) + "\n" for t in texts),
                                       encoding="utf-8")
    capsys.readouterr()
    assert main(["triples", "predict", "--model", str(tmp / "run"), str(tmp_path / "in.jsonl"),
                 "--threshold-entity", "0.7", "--threshold-link", "0.3"]) == 0
    predicted = [json.loads(line) for line in capsys.readouterr().out.splitlines() if line.strip()]
    assert predicted == json.loads(json.dumps(extractor.predict(texts), ensure_ascii=False))
    found = [t for p in predicted for t in p["triples"]]
    assert len(found) > 20 and all(0.3 < t["score"] <= 1 for t in found) and any(t["score"] < 0.5 for t in found)


# --- settings


def test_bad_head_and_settings_that_do_not_apply_are_clear_errors(tmp_path, capsys):
    with pytest.raises(SystemExit):
        main(["triples", "train", "--checkpoint", "c", "--train", "t", "--dev", "d", "--output", str(tmp_path / "o"),
              "--head", "tplinker"])
    err = capsys.readouterr().err
    assert "--head: invalid choice: 'tplinker'" in err and "'casrel', 'gplinker'" in err
    base = dict(checkpoint="c", train="t", dev="d", output="o")
    with pytest.raises(KerasbertError, match="unknown triples head .tplinker.; the heads are: casrel, gplinker"):
        TriplesTrainSettings(**base, head="tplinker").check()
    with pytest.raises(KerasbertError, match="are the casrel head's; the gplinker head's are --threshold-entity"):
        TriplesTrainSettings(**base, head="gplinker", threshold_start=0.3).check()
    with pytest.raises(KerasbertError, match="are the gplinker head's; the casrel head's are --threshold-start"):
        TriplesTrainSettings(**base, threshold_link=0.3).check()
    with pytest.raises(KerasbertError, match=r"threshold_entity must be auto or in \(0, 1\)"):
        TriplesTrainSettings(**base, head="gplinker", threshold_entity=1.0).check()
    with pytest.raises(KerasbertError, match="pointer_size must be even"):
        TriplesTrainSettings(**base, head="gplinker", pointer_size=7).check()
    TriplesTrainSettings(**base, head="gplinker").check()
    assert TriplesTrainSettings().head == "casrel"
