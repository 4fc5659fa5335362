"""``kerasbert ner select`` (kerasbert_apps/ner/select.py): the heads' informativeness measures (in their
folders, kerasbert_apps/ner/heads/<name>/selection.py) on lattices whose answer is known, each head's
measure declared by its registration, the streamed pool with its bounded candidate heap, the diversity step, seeded
ties, the written tasks read back by the kit's readers, and the command end to end on tiny
random models (that every head's analysis gives predict's entities and a probability is the
head contract's check, kerasbert_apps.testing)."""

import itertools
import json
import tracemalloc

import keras
import numpy as np
import pytest

import kerasbert
from kerasbert_apps.ner import select as sel
from kerasbert_apps.ner.heads.biaffine.selection import span_class_log_best
from kerasbert_apps.ner.heads.bio.selection import crf_log_best
from kerasbert_apps.ner.heads.bio.selection import softmax_log_best
from kerasbert_apps.ner.heads.global_pointer.selection import span_log_best
from kerasbert_apps.ner.tags import bio_tags

TAGS = bio_tags(["LOC", "PER"])
TEXTS = ["Peter lives in Paris.", "Alice flew from Rome to Berlin on Monday.", "Nothing here.",
         "The United Nations met in New York and Geneva last year to talk about trade.", "Hi"]


@pytest.fixture(scope="module")
def tokenizer(minilm_dir):
    return kerasbert.load_tokenizer(minilm_dir)


def _encoder(tokenizer):
    from kerasbert.models.encoder import BertEncoder

    return BertEncoder(vocabulary_size=len(tokenizer.vocab), num_layers=1, num_heads=2, hidden_dim=16,
                       intermediate_dim=32, max_sequence_length=64)


@pytest.fixture(scope="module")
def taggers(tokenizer):
    """Tiny random models of two heads (max_length 16: long texts are windowed)."""
    from kerasbert_apps.ner.heads.bio.model import NerModel
    from kerasbert_apps.ner.heads.global_pointer.model import GlobalPointerNerModel
    from kerasbert_apps.ner.heads.global_pointer.pipeline import SpanTagger
    from kerasbert_apps.ner.heads.bio.pipeline import Tagger
    from kerasbert.layers.crf import allowed_transitions

    keras.utils.set_random_seed(5)
    allowed, allowed_start = (a.tolist() for a in allowed_transitions(TAGS, "BIO"))
    crf = NerModel(_encoder(tokenizer), len(TAGS), lstm_units=8, allowed=allowed, allowed_start=allowed_start)
    rng = np.random.default_rng(0)
    crf.crf.transitions.assign(rng.normal(0, 1.0, (len(TAGS), len(TAGS))).astype("float32"))
    return {
        "crf": Tagger(crf, tokenizer, TAGS, max_length=16),
        "global-pointer": SpanTagger(GlobalPointerNerModel(_encoder(tokenizer), 2, head_size=8), tokenizer,
                                     ["LOC", "PER"], max_length=16),
    }


# --- the measures ---------------------------------------------------------------------------


def _brute_force_log_best(potentials, transitions, start, length):
    """log P(Viterbi path) of one row by enumerating every labelling."""
    n = potentials.shape[1]
    scores = {}
    for path in itertools.product(range(n), repeat=length):
        s = start[path[0]] + sum(potentials[t, y] for t, y in enumerate(path))
        s += sum(transitions[a, b] for a, b in zip(path, path[1:]))
        scores[path] = s
    best = max(scores, key=scores.get)
    return scores[best] - np.logaddexp.reduce(list(scores.values())), best


def test_crf_least_confidence_is_the_viterbi_paths_probability():
    """exp(score(path) - log Z) by the forward algorithm equals the enumeration over all
    labellings, with first-tag penalties and rows of different lengths (padding ignored)."""
    rng = np.random.default_rng(1)
    tags, time = 3, 5
    transitions = rng.normal(0, 1, (tags, tags))
    start = np.array([0.0, -3.0, 0.5])
    potentials = rng.normal(0, 2, (3, time, tags))
    lengths = np.array([5, 3, 1])
    want, paths = [], np.zeros((3, time), int)
    for r, n in enumerate(lengths):
        log_p, best = _brute_force_log_best(potentials[r], transitions, start, n)
        want.append(log_p)
        paths[r, :n] = best
    potentials[1, 3:] = 99.0  # padding: must not count
    got = crf_log_best(potentials, lengths, paths, transitions, start)
    np.testing.assert_allclose(got, want, atol=1e-9)
    # a flat lattice: every labelling equally likely, P(best) = tags^-length
    flat = crf_log_best(np.zeros((1, 4, 3)), [4], np.zeros((1, 4), int), np.zeros((3, 3)))
    np.testing.assert_allclose(flat, [-4 * np.log(3)])


def test_softmax_span_and_entropy_measures_on_known_values():
    p = np.log([[[0.9, 0.1], [0.6, 0.4], [0.5, 0.5]]])
    np.testing.assert_allclose(np.exp(softmax_log_best(p, [2])), [0.9 * 0.6])  # third token is padding
    # GlobalPointer: logit 0 is p = 1/2 for each of the n(n+1)/2 spans x types of the n text tokens
    logits = np.zeros((2, 6, 8, 3))
    got = span_log_best(logits, [6, 3])
    np.testing.assert_allclose(got, [-10 * 3 * np.log(2), -1 * 3 * np.log(2)])
    sure = np.full((1, 6, 8, 3), -30.0)
    sure[0, 1, 2, 0] = 30.0
    assert span_log_best(sure, [6])[0] > -1e-9  # confident yes and no: P(best) = 1
    hotter = span_log_best(np.full((1, 6, 8, 3), 2.0), [6], temperature=4.0)
    assert hotter[0] < span_log_best(np.full((1, 6, 8, 3), 2.0), [6])[0]
    assert sel.entity_entropy([]) == 0.0
    assert sel.entity_entropy([0.5]) == pytest.approx(np.log(2))
    assert sel.entity_entropy([0.5, 0.5]) > sel.entity_entropy([0.5, 0.99]) > sel.entity_entropy([0.99]) > 0


def test_diversity_skips_near_duplicates_in_rank_order():
    vectors = np.array([[1.0, 0.0], [0.99, 0.05], [0.0, 1.0], [0.7, 0.7], [0.0, 0.0]])
    taken, dropped = sel.diverse_order(vectors, budget=4, threshold=0.95)
    assert taken == [0, 2, 3, 4] and dropped == 1  # [0.99, 0.05] is a near-duplicate of the first
    assert sel.diverse_order(vectors, budget=2, threshold=0.95) == ([0, 2], 1)
    assert sel.diverse_order(vectors, budget=5, threshold=1.0) == ([0, 1, 2, 3, 4], 0)  # 1: off


def test_span_class_measure_on_known_values():
    """One softmax per span: log P(best) = sum over the text's spans of log max_c p_c."""
    logits = np.zeros((1, 4, 4, 3))
    logits[0, 1, 1] = [2.0, 0.0, 0.0]  # the span (1, 1): one class likely
    logits[0, 1, 2] = [0.0, 0.0, 5.0]  # (1, 2): "no entity" likely
    logits[0, 0, 0] = [9.0, 0.0, 0.0]  # [CLS]: not a span of the text
    got = span_class_log_best(logits, np.array([4]))  # text tokens 1..2: spans (1,1), (1,2), (2,2)
    p = lambda z: np.exp(max(z)) / np.exp(z).sum()  # noqa: E731
    want = np.log(p([2.0, 0, 0])) + np.log(p([0, 0, 5.0])) + np.log(1 / 3)
    assert got[0] == pytest.approx(want)
    assert span_class_log_best(logits, np.array([4]), temperature=2.0)[0] < got[0]  # flatter: less sure


def test_a_head_without_a_selection_measure_is_refused_in_one_line():
    """A head that declares no measure is refused before the pool is read (the pool must not
    be consumed), naming the heads select supports; every built-in NER head's registration
    declares one."""
    from kerasbert.errors import KerasbertError
    from kerasbert_apps.base.heads import heads
    from kerasbert_apps.base.heads import is_builtin
    from kerasbert_apps.ner.heads.global_pointer.pipeline import SpanTagger

    class NoMeasure(SpanTagger):
        head_name = "my-head"  # registered nowhere: no measure

    consumed = []

    def pool():
        consumed.append(1)
        yield "a text"

    with pytest.raises(KerasbertError, match="does not support the my-head head yet") as error:
        sel.select_texts(NoMeasure.__new__(NoMeasure), pool(), budget=1, strategy="entropy")
    assert "\n" not in str(error.value) and "global-pointer" in str(error.value) and "biaffine" in str(error.value)
    assert not consumed
    builtin = [head for head in heads("ner") if is_builtin(head)]
    assert len(builtin) >= 4 and all(head.selection_measure for head in builtin)
    assert len({head.selection_measure for head in builtin}) == len(builtin)  # each its own (crf vs softmax)


def test_a_head_declares_its_own_selection_measure_in_its_registration(monkeypatch):
    """The measure is the head's: a head registered with a ``selection_measure`` (and computing
    it in ``selection_log_best``) is taken -- a head of another package the same way, with no
    edit of the kit -- and listed among the heads select supports, its pipeline not imported
    to list it. A pipeline class that sets ``selection_measure`` itself (before registrations
    declared it) keeps working."""
    import copy

    from kerasbert.errors import KerasbertError
    from kerasbert_apps.base import heads
    from kerasbert_apps.ner.heads.global_pointer.pipeline import SpanTagger

    heads.discover()
    monkeypatch.setattr(heads, "_REGISTRY", copy.deepcopy(heads._REGISTRY))
    measure = "the product of each start and end pointer's max(p, 1 - p)"
    heads.register(heads.Head(name="own-measure", task="ner", pipeline="not_a_module_anywhere:OwnTagger",
                              settings_file="own.json", selection_measure=measure))
    heads.register(heads.Head(name="no-measure", task="ner", pipeline="not_a_module_anywhere:NoTagger",
                              settings_file="none.json"))

    class OwnTagger(SpanTagger):
        head_name = "own-measure"

    class NoTagger(SpanTagger):
        head_name = "no-measure"

    class OldStyle(SpanTagger):
        head_name = "no-measure"
        selection_measure = "declared by the pipeline class"

    assert sel.selection_measure(OwnTagger.__new__(OwnTagger)) == measure
    assert sel.selection_measure(OldStyle.__new__(OldStyle)) == "declared by the pipeline class"
    with pytest.raises(KerasbertError, match="does not support the no-measure head yet") as error:
        sel.selection_measure(NoTagger.__new__(NoTagger))
    assert "own-measure" in str(error.value).split("heads it supports: ")[1]
    with pytest.raises(KerasbertError, match="selection_measure is an NER head's"):
        heads.register(heads.Head(name="triple-measure", task="triples", pipeline="m:C", settings_file="t.json",
                                  selection_measure="not for triples"))


# --- ranking on the model's outputs ---------------------------------------------------------


# That every head's analysis gives predict's entities and a probability is the head
# contract's check (kerasbert_apps.testing), on each head's trained model.


def test_a_higher_temperature_lowers_every_best_labellings_probability(taggers):
    """P(best) of each text falls as the score temperature rises (the model's distribution
    flattens); the span head's arithmetic at a temperature is checked on known values above."""
    tagger = taggers["crf"]
    cold = [f[1] for f in sel.analyse(tagger, TEXTS)]
    tagger.set_temperature(3.0)
    try:
        hot = sel.analyse(tagger, TEXTS)
    finally:
        tagger.set_temperature(1.0)
    assert all(h[1] < c for h, c in zip(hot, cold))


def test_ranking_follows_the_measure_and_the_summary_counts(taggers, monkeypatch):
    """Hand-made uncertainties: texts whose P(best) and entity scores are set; least-confident
    picks the least sure, entropy the ones with scores nearest 1/2."""
    known = {"a": (np.log(0.9), [0.99]), "b": (np.log(0.2), [0.95]), "c": (np.log(0.5), [0.5, 0.5]),
             "d": (np.log(0.7), [0.6]), "e": (np.log(0.99), [])}

    def fake(tagger, texts, batch_size=32):
        rng = np.random.default_rng(len(texts))
        return [({"text": t, "entities": [{"start": 0, "end": 1, "type": "PER", "text": t[0], "score": s}
                                          for s in known[t][1]]},
                 known[t][0], sel.entity_entropy(known[t][1]), rng.normal(size=4)) for t in texts]

    monkeypatch.setattr(sel, "analyse", fake)
    pool = ["a", "", "b", "c", "a", "d", "e", "  "]
    picked = sel.select_texts(taggers["crf"], pool, 2, diversity=1.0)
    assert [c["text"] for c in picked.chosen] == ["b", "c"]
    assert picked.chosen[0]["informativeness"] == pytest.approx(0.8)
    assert [c["line"] for c in picked.chosen] == [3, 4]
    s = picked.summary
    assert (s.lines, s.empty, s.repeated, s.scored, s.selected) == (8, 2, 1, 5, 2)
    assert s.quantiles["max"] == pytest.approx(0.8) and s.quantiles["min"] == pytest.approx(0.01)
    assert s.log_quantiles["max"] == pytest.approx(-np.log(0.2)) and "-log P(best labelling)" in s.text()
    assert "P(best labelling): the CRF's probability of its Viterbi path" in s.text()  # the head's measure
    by_entropy = sel.select_texts(taggers["crf"], pool, 3, strategy="entropy", diversity=1.0)
    assert [c["text"] for c in by_entropy.chosen] == ["c", "d", "b"]


# --- the stream -----------------------------------------------------------------------------


def test_a_large_pool_streams_through_a_bounded_heap(tmp_path):
    """20k lines: at most `keep` candidates are ever held, the kept ones are exactly the best, the
    skipped lines are counted, and Python's peak memory stays well below the pool's size."""
    from kerasbert_apps.base.cli import read_texts

    rng = np.random.default_rng(0)
    lines = []
    for i in range(20000):
        lines.append("" if i % 97 == 0 else f"sentence {i % 19000} " + "word " * int(rng.integers(20, 60)))
    pool = tmp_path / "pool.txt"
    pool.write_text("\n".join(lines) + "\n", encoding="utf-8")
    distinct = {t for t in lines if t}
    size = pool.stat().st_size

    def score(texts):  # a deterministic measure: the text's length
        return [float(len(t)) for t in texts]

    tracemalloc.start()
    try:
        candidates, scores, summary = sel.stream_candidates(read_texts(str(pool)), 50, score, seed=1, chunk=512)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert summary.max_candidates_held == 50 == len(candidates)
    assert summary.lines == 20000 and summary.empty == sum(1 for t in lines if not t)
    assert summary.scored == len(distinct) and summary.repeated == 20000 - summary.empty - len(distinct)
    assert len(scores) == summary.scored
    best = sorted((len(t) for t in distinct), reverse=True)[:50]
    assert [c[0] for c in candidates] == best
    assert peak < size / 3, (peak, size)


def test_seed_makes_ties_and_random_samples_reproducible(taggers):
    pool = [f"text number {i}" for i in range(300)]
    first = sel.select_texts(taggers["crf"], pool, 5, strategy="random", seed=3, diversity=1.0)
    again = sel.select_texts(taggers["crf"], iter(pool), 5, strategy="random", seed=3, diversity=1.0)
    other = sel.select_texts(taggers["crf"], pool, 5, strategy="random", seed=4, diversity=1.0)
    assert [c["line"] for c in first.chosen] == [c["line"] for c in again.chosen]
    assert [c["line"] for c in first.chosen] != [c["line"] for c in other.chosen]
    ties = [f"tie {i}" for i in range(40)]
    constant = lambda texts: [1.0] * len(texts)  # noqa: E731  every candidate ties
    a = sel.stream_candidates(ties, 5, constant, seed=7)[0]
    b = sel.stream_candidates(ties, 5, constant, seed=7)[0]
    c = sel.stream_candidates(ties, 5, constant, seed=8)[0]
    assert a == b and a != c


def test_near_duplicates_are_not_both_selected(taggers):
    """The uncased tokenizer gives 'Peter lives in Paris.' and 'PETER LIVES IN PARIS.' the same
    WordPieces, hence the same encoder mean vector (cosine 1): only one is chosen."""
    pool = ["Peter lives in Paris.", "PETER LIVES IN PARIS.", "Rome is far from Oslo and Lima.", "ok"]
    on = sel.select_texts(taggers["crf"], pool, 3, diversity=0.99)
    texts = [c["text"] for c in on.chosen]
    assert sum(t.lower() == "peter lives in paris." for t in texts) == 1
    assert on.summary.dropped_by_diversity == 1 and len(texts) == 3
    off = sel.select_texts(taggers["crf"], pool, 4, diversity=1.0)
    assert sum(c["text"].lower() == "peter lives in paris." for c in off.chosen) == 2


# --- the written file -----------------------------------------------------------------------


@pytest.mark.parametrize("fmt", ["label-studio", "doccano"])
def test_the_written_tasks_read_back_with_the_models_entities(taggers, tmp_path, fmt):
    from kerasbert_apps.ner.readers import read_ner_file

    selection = sel.select_texts(taggers["crf"], TEXTS, 4)
    assert sum(len(c["entities"]) for c in selection.chosen) >= 10  # the random model predicts: regions to check
    path = tmp_path / ("tasks.json" if fmt == "label-studio" else "tasks.jsonl")
    sel.write_selection(selection, path, fmt)
    if fmt == "label-studio":  # Label Studio's import format: a JSON array of tasks
        tasks = json.loads(path.read_text(encoding="utf-8"))
        assert isinstance(tasks, list) and len(tasks) == 4
        regions = 0
        for task in tasks:
            assert set(task) == {"data", "predictions"} and isinstance(task["data"]["text"], str)
            (prediction,) = task["predictions"]
            regions += len(prediction["result"])
            for region in prediction["result"]:
                assert (region["from_name"], region["to_name"], region["type"]) == ("label", "text", "labels")
                v = region["value"]
                assert task["data"]["text"][v["start"]:v["end"]] == v["text"] and v["labels"][0] in ("LOC", "PER")
        assert regions == sum(len(c["entities"]) for c in selection.chosen)
        examples = read_ner_file(path, format="labelstudio", use_predictions=True).examples
    else:
        examples = read_ner_file(path, format="doccano").examples
    assert [e.text for e in examples] == [c["text"] for c in selection.chosen]
    for example, chosen in zip(examples, selection.chosen):
        want = sorted((e["start"], e["end"], e["type"]) for e in chosen["entities"])
        assert sorted((e.start, e.end, e.type) for e in example.entities) == want


# --- the command ----------------------------------------------------------------------------


def test_command_end_to_end_and_bad_input(taggers, tmp_path, capsys):
    from kerasbert.cli import main

    model = tmp_path / "run" / "model"
    taggers["global-pointer"].save(model)
    pool = tmp_path / "pool.jsonl"
    pool.write_text("".join(json.dumps({"text": t}) + "\n" for t in TEXTS + ["", TEXTS[0]]), encoding="utf-8")
    out = tmp_path / "next.json"
    code = main(["ner", "select", "--model", str(tmp_path / "run"), "--pool", str(pool), "--budget", "3",
                 "--output", str(out), "--seed", "1"])
    printed = capsys.readouterr().out
    assert code == 0, printed
    assert "7 lines read: 1 empty, 1 repeat an earlier text (skipped), 5 scored" in printed
    assert "3 selected (budget 3)" in printed and "least-confident scores" in printed
    assert len(json.loads(out.read_text(encoding="utf-8"))) == 3

    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"text": "fine"}\n{"text": broken\n', encoding="utf-8")
    code = main(["ner", "select", "--model", str(model), "--pool", str(bad), "--budget", "1", "--output",
                 str(tmp_path / "x.json")])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and err[-1].startswith(f"kerasbert: error: {bad}, line 2: invalid JSON")
    assert err[:-1] == [f"model: {model}"]  # the model folder used, then the one-line error
    assert not (tmp_path / "x.json").exists()
    code = main(["ner", "select", "--model", str(model), "--pool", str(tmp_path / "none.txt"), "--budget", "5",
                 "--output", str(tmp_path / "x.json")])
    err = capsys.readouterr().err.strip()
    assert code == 2 and err == f"kerasbert: error: {tmp_path / 'none.txt'}: no such file"
    code = main(["ner", "select", "--model", str(model), "--pool", str(pool), "--budget", "0",
                 "--output", str(tmp_path / "x.json")])
    err = capsys.readouterr().err.strip()
    assert code == 2 and err == "kerasbert: error: --budget must be at least 1, got 0"  # before loading the model
    assert not (tmp_path / "x.json").exists()
