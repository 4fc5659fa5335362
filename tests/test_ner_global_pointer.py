"""The GlobalPointer NER head (--head global-pointer) on the toy checkpoint:
training rows (nested entities, window edges), the in-graph span decoding and
its window merge (against a brute-force numpy reading), a short training run
through the CLI settings, loading, exact-span scoring, and the text-in
SavedModel (fresh process, op allowlist) against predict. One trained toy
model is shared by the module."""

import json
import random

import numpy as np
import pytest
import tensorflow as tf

import kerasbert
from kerasbert_apps.ner.examples import Entity
from kerasbert_apps.ner.examples import Example
from kerasbert_apps.ner.heads.global_pointer.decode import span_entities
from kerasbert_apps.ner.heads.global_pointer.pipeline import SpanTagger
from kerasbert_apps.ner.train import NER
from kerasbert_apps.ner.train import NerTrainSettings
from kerasbert_apps.ner.train import train
from conftest import require_shared
from kerasbert.cli import main as cli_main
from kerasbert.errors import KerasbertError
from kerasbert_apps.testing import ner_record

WORDS = "all work and no play makes jack a dull boy".split()


def _toy():
    return require_shared("data", "models", "keras_bert_test_checkpoint")


def _records(n, seed):
    """Sentences of the toy vocabulary: every ``jack`` is a PER, every ``dull
    X`` a THING -- ``dull jack`` is a THING with a PER inside."""
    rng = random.Random(seed)
    records = []
    for _ in range(n):
        words = [rng.choice(WORDS) for _ in range(rng.randint(4, 20))]
        if rng.random() < 0.5:
            at = rng.randrange(len(words))
            words[at:at] = ["dull", "jack"]
        records.append(ner_record(words))
    return records


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("gp")
    for name, n, seed in (("train", 40, 0), ("dev", 12, 1)):
        (tmp / f"{name}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in _records(n, seed)), encoding="utf-8")
    settings = NerTrainSettings(checkpoint=str(_toy()), train=str(tmp / "train.jsonl"), dev=str(tmp / "dev.jsonl"),
                                output=str(tmp / "run"), epochs=1, batch_size=8, max_length=16, seed=7,
                                head="global-pointer", pointer_size=8)
    metrics = train(settings)
    return tmp, metrics


# --- training rows


def test_training_rows_keep_nested_entities_and_count_window_edges():
    tokenizer = kerasbert.load_tokenizer(_toy())
    tagger = SpanTagger(None, tokenizer, ["PER", "THING"], max_length=8)  # windows of 6 tokens, overlap 1
    words = "jack makes a dull jack boy and all work and no play".split()
    starts = np.cumsum([0] + [len(w) + 1 for w in words[:-1]]).tolist()
    span = lambda a, b, t: Entity(starts[a], starts[b] + len(words[b]), t)  # noqa: E731  (words a..b)
    entities = [span(0, 0, "PER"), span(3, 4, "THING"), span(4, 4, "PER"), span(4, 5, "THING"),
                span(0, 6, "THING"), span(8, 8, "ORG")]
    rows, report = tagger.features([Example(" ".join(words), entities, "t:1")])
    assert report.windows == 3  # tokens [0, 6), [5, 11), [10, 12)
    assert report.entities == 5 and report.unknown_types == {"ORG": 1}
    assert report.nested_entities == 4  # PER(0), THING(3-4), THING(4-5) inside THING(0-6); PER(4) inside THING(3-4)
    assert report.entities_in_no_window == 1  # THING(0-6): 7 tokens
    assert report.entities_split_by_windows == 3  # THING(4-5) in window 1, THING(0-6) in windows 0 and 1:
    # labelled on their parts in those windows, as the BIO heads tag them

    def decoded(row):
        spans = rows["spans"][row]
        return sorted((int(p) - 1, int(c - 1) // 2 - 1, int(c - 1) % 2) for p, cs in enumerate(spans) for c in cs if c)

    # (first, last) token positions within the window, type 0 = PER, 1 = THING
    assert decoded(0) == [(0, 0, 0), (0, 5, 1), (3, 4, 1), (4, 4, 0), (4, 5, 1)]
    assert decoded(1) == [(0, 0, 1), (0, 1, 1)]
    assert decoded(2) == []
    assert rows["spans"][0].shape[1] == rows["spans"][1].shape[1] == rows["spans"][2].shape[1]


# --- decoding


@pytest.mark.parametrize("threshold", [0.0, -0.7])
def test_window_merge_against_brute_force(threshold):
    """Random span logits per window, the same text seen by several windows
    with different verdicts: each span is decided by its window furthest from
    a cut (ties: the earlier window), as a brute-force numpy reading says; an
    entity where that logit is above the decision threshold."""
    tokenizer = kerasbert.load_tokenizer(_toy())
    tagger = SpanTagger(None, tokenizer, ["A", "B"], max_length=9)
    texts = [" ".join(random.Random(s).choice(WORDS) for _ in range(n)) for s, n in ((0, 23), (1, 3), (2, 0), (3, 15))]
    w = tagger.windows_numpy(texts)
    rng = np.random.default_rng(0)
    rows, width = w["token_ids"].shape
    logits = rng.normal(0, 1, size=(rows, width, width, 2)).astype("float32")
    got = span_entities(tf.constant(texts), {k: tf.constant(v) for k, v in w.items()}, tf.constant(logits), ["A", "B"],
                        threshold=threshold)

    for t, text in enumerate(texts):
        row_ids = [r for r in range(rows) if w["text_index"][r] == t]
        offsets = {}
        for r in row_ids:
            for p in range(w["token_end"][r] - w["token_start"][r]):
                offsets[w["token_start"][r] + p] = tuple(w["offsets"][r, p + 1])
        best = {}
        for k, r in enumerate(row_ids):
            s, e = int(w["token_start"][r]), int(w["token_end"][r])
            for a in range(s, e):
                for b in range(a, e):
                    left = a - s if s > 0 else 1 << 20
                    right = e - 1 - b if e < w["num_tokens"][t] else 1 << 20
                    key = (min(left, right), -k)
                    if (a, b) not in best or key > best[(a, b)][0]:
                        best[(a, b)] = (key, logits[r, a - s + 1, b - s + 1])
        expected = sorted((offsets[a][0], offsets[b][1], kind, 1 / (1 + np.exp(-v[kind])))
                          for (a, b), (_, v) in best.items() for kind in range(2) if v[kind] > threshold)
        n = int(got["count"][t])
        ours = [(int(got["start"][t, i]), int(got["end"][t, i]), got["type"][t, i].numpy().decode(),
                 float(got["score"][t, i])) for i in range(n)]
        assert [(s, e, "AB"[k]) for s, e, k, _ in expected] == [(s, e, k) for s, e, k, _ in ours], t
        np.testing.assert_allclose([x[3] for x in expected], [x[3] for x in ours], rtol=1e-5)
        assert all(text[s:e] == got["mention"][t, i].numpy().decode() for i, (s, e, _, _) in enumerate(ours))
    assert int(got["count"][0]) > 50 and int(got["count"][2]) == 0


# --- training, loading, scoring


def test_decoding_one_type_per_span_and_clashes_unless_all():
    """``nested``: a span is its best type only, and of two crossing
    candidates the more probable is kept, an entity inside another too;
    ``flat``: any overlap with a more probable entity drops a candidate;
    ``all``: every (span, type) above the threshold."""
    tokenizer = kerasbert.load_tokenizer(_toy())
    tagger = SpanTagger(None, tokenizer, ["A", "B"], max_length=16)
    words = "jack makes a dull jack boy and all work".split()
    text = " ".join(words)
    starts = np.cumsum([0] + [len(w) + 1 for w in words[:-1]]).tolist()
    windows = tagger.windows_numpy([text, "no entity here"])
    logits = np.full(windows["token_ids"].shape + windows["token_ids"].shape[1:] + (2,), -5.0, "float32")
    cells = {  # (first word, last word): logits (A, B)
        (0, 2): [4.0, -5.0],  # kept
        (1, 1): [-5.0, 3.0],  # inside (0, 2): kept where nested
        (2, 3): [3.5, -5.0],  # crosses (0, 2), less probable: dropped
        (5, 5): [2.0, 1.0],  # two types above 0: its best (A) only, but for "all"
        (7, 8): [-1.0, -0.5],  # no type above 0
    }
    for (a, b), v in cells.items():
        logits[0, a + 1, b + 1] = v
    feeds = {k: tf.constant(v) for k, v in windows.items()}

    def entities(decoding, threshold=0.0):
        out = span_entities(tf.constant([text, "no entity here"]), feeds, tf.constant(logits), ["A", "B"],
                            threshold=threshold, decoding=decoding)
        assert int(out["count"][1]) == 0
        return [(int(s), int(e), t.decode()) for s, e, t in
                zip(out["start"][0], out["end"][0], out["type"][0].numpy())][: int(out["count"][0])]

    span = lambda a, b, t: (starts[a], starts[b] + len(words[b]), t)  # noqa: E731
    assert entities("all") == [span(0, 2, "A"), span(1, 1, "B"), span(2, 3, "A"), span(5, 5, "A"), span(5, 5, "B")]
    assert entities("nested") == [span(0, 2, "A"), span(1, 1, "B"), span(5, 5, "A")]
    assert entities("flat") == [span(0, 2, "A"), span(5, 5, "A")]
    # below the threshold -0.75, (7, 8) is a candidate of its best type B
    assert entities("nested", threshold=-0.75) == [span(0, 2, "A"), span(1, 1, "B"), span(5, 5, "A"), span(7, 8, "B")]
    with pytest.raises(ValueError, match="decoding must be one of"):
        entities("best")


def test_decoding_follows_the_training_data_unless_given():
    """``--global-pointer-decoding auto`` keeps nested entities where the
    training data has an entity inside another and decodes flat where it has
    none; the others are used as given; the choice is in the settings file,
    and a folder saved without it keeps every candidate, as it was decoded."""
    from kerasbert_apps.ner.span_pipeline import SpanFeatureReport

    tokenizer = kerasbert.load_tokenizer(_toy())

    def decoding(choice, nested_in_data):
        settings = NerTrainSettings(checkpoint="c", train="t", dev="d", output="o", head="global-pointer",
                                    global_pointer_decoding=choice)
        tagger = SpanTagger.for_training(None, tokenizer, ["A"], settings)
        tagger.after_features(SpanFeatureReport(nested_entities=nested_in_data), settings)
        return tagger

    default = NerTrainSettings(checkpoint="c", train="t", dev="d", output="o", head="global-pointer")
    assert default.global_pointer_decoding == "auto"
    assert [decoding("auto", n).decoding for n in (0, 3)] == ["flat", "nested"]
    for given in ("nested", "flat", "all"):
        assert [decoding(given, n).decoding for n in (0, 3)] == [given, given]
    flat = decoding("auto", 0)
    assert flat.settings()["decoding"] == "flat"
    assert SpanTagger.from_settings(None, tokenizer, flat.settings()).decoding == "flat"
    older = {k: v for k, v in flat.settings().items() if k != "decoding"}
    assert SpanTagger.from_settings(None, tokenizer, older).decoding == "all"
    with pytest.raises(ValueError, match="decoding must be one of"):  # load: "damaged", naming the file
        SpanTagger.from_settings(None, tokenizer, {**flat.settings(), "decoding": "best"})


def test_training_run_keeps_nested_entities_and_scores_exact_spans(run, capsys):
    tmp, metrics = run
    assert metrics["dev"]["scorer"] == "exact spans"
    assert {"precision", "recall", "f1", "macro_f1", "per_type", "nested"} <= set(metrics["dev"])
    assert metrics["dev"]["nested"]["gold"] > 0  # the dev file's PERs inside THINGs were kept
    assert (tmp / "run" / "model" / "span_tagger.json").exists()
    # --global-pointer-decoding auto on data with entities inside others: nested
    assert json.loads((tmp / "run" / "model" / "span_tagger.json").read_text())["decoding"] == "nested"
    assert json.loads((tmp / "run" / "settings.json").read_text())["head"] == "global-pointer"
    tagger = NER.load(tmp / "run")
    assert isinstance(tagger, SpanTagger) and tagger.types == ["PER", "THING"]
    # --calibrate (the default): the score temperature fitted on dev is in the model folder
    fitted = metrics["score_temperature"]
    assert fitted["entities"] > 0 and fitted["temperature"] != 1.0
    assert tagger.temperature == fitted["temperature"]
    assert json.loads((tmp / "run" / "model" / "span_tagger.json").read_text())["temperature"] == fitted["temperature"]
    # --span-threshold auto (the default): the decision threshold fitted on dev, before the temperature
    threshold = metrics["span_threshold"]
    assert threshold["f1"] >= threshold["f1_at_0"] and [0.0, threshold["f1_at_0"]] in threshold["grid"]
    assert tagger.threshold == threshold["threshold"]
    assert json.loads((tmp / "run" / "model" / "span_tagger.json").read_text())["threshold"] == threshold["threshold"]
    capsys.readouterr()
    assert cli_main(["ner", "evaluate", "--model", str(tmp / "run"), "--data", str(tmp / "dev.jsonl"),
                     "--output", str(tmp / "scores.json")]) == 0
    out = capsys.readouterr().out
    assert "scorer: exact spans" in out and "nested  P" in out
    assert "nested and overlapping entities kept" in out and "overlapping spans kept" in out
    assert json.loads((tmp / "scores.json").read_text())["scorer"] == "exact spans"
    with pytest.raises(KerasbertError, match="cannot be distilled"):
        tagger.student([0])


def test_calibrate_fits_the_score_temperature_and_changes_no_entity(run, tmp_path, capsys):
    import shutil

    from kerasbert_apps.ner.calibration import score_logits

    tmp, _ = run
    model = tmp_path / "model"
    shutil.copytree(tmp / "run" / "model", model)
    tagger = SpanTagger.load(model)
    tagger.temperature = 1.0  # as if trained with --no-calibrate
    tagger.save_settings(model)
    texts = [r["text"] for r in _records(16, 3)]
    before = tagger.output_rows(texts)  # unrounded scores
    assert cli_main(["ner", "calibrate", "--model", str(model), "--data", str(tmp / "dev.jsonl")]) == 0
    out = capsys.readouterr().out
    assert "score temperature" in out and "entities unchanged" in out and "written:" in out
    calibrated = SpanTagger.load(model)
    temperature = calibrated.temperature
    assert temperature != 1.0
    after = calibrated.output_rows(texts)
    n = 0
    assert len(before) == len(after) == len(texts)
    for ours, theirs in zip(before, after):
        assert (ours["start"], ours["end"], ours["type"]) == (theirs["start"], theirs["end"], theirs["type"])
        unsaturated = np.array(ours["score"]) < 1 - 1e-6
        want = 1 / (1 + np.exp(-score_logits(ours["score"]) / temperature))  # the same logit, divided by T
        np.testing.assert_allclose(np.array(theirs["score"])[unsaturated], want[unsaturated], atol=2e-4)
        n += len(ours["score"])
    assert n > 20
    (tmp_path / "empty").mkdir()
    assert cli_main(["ner", "calibrate", "--model", str(tmp_path / "empty"), "--data", str(tmp / "dev.jsonl")]) == 2
    assert "not a kerasbert NER model folder" in capsys.readouterr().err
    with pytest.raises(KerasbertError, match="temperature must be above 0"):
        SpanTagger(calibrated.model, calibrated.tokenizer, ["PER"], temperature=0)


def test_the_fitted_threshold_scores_as_predict_does(run):
    """The fit at the end of training read the threshold from a variable (one
    traced function for the grid); the F1 it saw at a threshold is what
    predict gives there, and a lower threshold finds more entities."""
    from kerasbert_apps.ner.span_scores import span_scores

    tmp, metrics = run
    fitted = metrics["span_threshold"]
    tagger = NER.load(tmp / "run")
    examples = NER.read(tmp / "dev.jsonl", NerTrainSettings(head="global-pointer"))
    texts = [e.text for e in examples]
    found = []
    for threshold, f1 in [(fitted["threshold"], fitted["f1"]), tuple(fitted["grid"][0])]:
        tagger.set_threshold(threshold)
        predictions = tagger.predict(texts, batch_size=16)
        assert span_scores(examples, predictions)["f1"] == pytest.approx(f1)
        found.append(sum(len(p["entities"]) for p in predictions))
    assert fitted["grid"][0][0] < fitted["threshold"] and found[1] > found[0]
    with pytest.raises(KerasbertError, match="finite number"):
        tagger.set_threshold(float("nan"))


def test_span_threshold_is_an_option_of_the_span_heads():
    for head in ("global-pointer", "biaffine"):
        NerTrainSettings(checkpoint="c", train="t", dev="d", output="o", head=head, span_threshold=-1.5).check()
    with pytest.raises(KerasbertError, match="--span-threshold is an option of the span heads"):
        NerTrainSettings(checkpoint="c", train="t", dev="d", output="o", head="crf", span_threshold=-1.5).check()
    with pytest.raises(KerasbertError, match="span_threshold: expected auto or a number"):
        NerTrainSettings(checkpoint="c", train="t", dev="d", output="o", head="biaffine", span_threshold="low").check()


def test_bio_heads_resolve_overlaps_and_say_their_scorer(run):
    tmp, _ = run
    examples = NER.read(tmp / "dev.jsonl", NerTrainSettings(head="crf"))
    assert not any(a is not b and a.start < b.end and b.start < a.end for ex in examples
                   for a in ex.entities for b in ex.entities)
    scores = NER.score(examples, [{"entities": []} for _ in examples], NerTrainSettings())
    assert scores["scorer"] == "seqeval BIO" and NER.format_scores(scores).startswith("scorer: seqeval BIO\n")


def test_exact_span_scores_count_nested_entities():
    from kerasbert_apps.ner.span_scores import span_scores

    gold = [Example("x" * 20, [Entity(0, 10, "A"), Entity(2, 4, "B"), Entity(12, 14, "B")], "t:1")]
    predicted = [{"entities": [{"start": 0, "end": 10, "type": "A"}, {"start": 2, "end": 4, "type": "A"},
                               {"start": 12, "end": 14, "type": "B"}, {"start": 12, "end": 13, "type": "B"}]}]
    scores = span_scores(gold, predicted)
    assert (scores["precision"], scores["recall"]) == (2 / 4, 2 / 3)
    assert scores["per_type"]["A"]["precision"] == 0.5 and scores["per_type"]["B"]["recall"] == 0.5
    assert scores["macro_f1"] == pytest.approx((2 * 0.5 * 1 / 1.5 + 2 * 0.5 * 0.5 / 1.0) / 2)
    # nested: gold B(2-4) inside A (missed: predicted as A); predicted A(2-4) and B(12-13) inside others, both wrong
    assert scores["nested"] == {"precision": 0.0, "recall": 0.0, "f1": 0.0, "gold": 1, "predicted": 2}
    # calibration: right = the exact (start, end, type); an entity without a score is counted apart
    for entity, score in zip(predicted[0]["entities"], (0.95, 0.9, 0.35, None)):
        if score is not None:
            entity["score"] = score
    calibration = span_scores(gold, predicted)["calibration"]
    assert (calibration["entities"], calibration["correct"], calibration["unscored"]) == (3, 2, 1)
    bins = {row["low"]: (row["count"], row["accuracy"]) for row in calibration["table"] if row["count"]}
    assert bins == {0.9: (2, 0.5), 0.3: (1, 1.0)}
    # |0.5 - 0.925| * 2/3 + |1 - 0.35| * 1/3
    assert calibration["ece"] == pytest.approx(0.425 * 2 / 3 + 0.65 / 3)


def test_head_settings():
    settings = NerTrainSettings(checkpoint="c", train="t", dev="d", output="o", head="softmax")
    settings.check()
    assert settings.crf is False
    settings = NerTrainSettings(checkpoint="c", train="t", dev="d", output="o", crf=False)
    settings.check()
    assert settings.head == "softmax"
    with pytest.raises(KerasbertError, match="--no-crf is the softmax head"):
        NerTrainSettings(checkpoint="c", train="t", dev="d", output="o", crf=False, head="global-pointer").check()
    with pytest.raises(KerasbertError, match="unknown ner head .pointer.; the heads are: crf, softmax"):
        NerTrainSettings(checkpoint="c", train="t", dev="d", output="o", head="pointer").check()
