"""The biaffine NER head (--head biaffine): its layer (shapes, masking,
config, the loss learning a toy batch, JAX == TensorFlow), its training
targets, its decoding rules on hand-made logits (one type per span, nested
kept, crossing dropped by probability, windows merged, the score
temperature), its options, and the model with a BiLSTM and a max span
length on the toy encoder. What every head must do (a training run, save and
load, the SavedModel in a fresh process against predict, ids export, bf16,
LoRA, JAX predict) is the contract test's (tests/test_heads_ner.py)."""

import json
import os
import subprocess
import sys

import keras
import numpy as np
import pytest
import tensorflow as tf

import kerasbert
from kerasbert_apps.base import heads
from kerasbert_apps.ner.heads.biaffine.decode import biaffine_entities
from kerasbert_apps.ner.heads.biaffine.layer import MASKED_LOGIT
from kerasbert_apps.ner.heads.biaffine.layer import BiaffineSpanScorer
from kerasbert_apps.ner.heads.biaffine.layer import biaffine_crossentropy
from kerasbert_apps.ner.heads.biaffine.layer import span_classes
from kerasbert_apps.ner.heads.biaffine.layer import span_mask
from kerasbert_apps.ner.heads.biaffine.pipeline import BiaffineTagger
from kerasbert_apps.ner.train import NerTrainSettings
from conftest import require_shared
from test_ner_global_pointer import WORDS
from test_ner_global_pointer import _records  # toy sentences: PER inside THING
from kerasbert.errors import KerasbertError

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _toy():
    return require_shared("data", "models", "keras_bert_test_checkpoint")


# --- the layer


def _weights(layer, seed=0):
    rng = np.random.default_rng(seed)
    layer.set_weights([rng.normal(0, 0.5, w.shape).astype("float32") for w in layer.get_weights()])


def test_layer_scores_every_span_and_masks_padding_reversed_and_long_spans():
    layer = BiaffineSpanScorer(3, size=8, max_span_length=3)
    x = np.random.default_rng(1).normal(size=(2, 6, 5)).astype("float32")
    mask = np.array([[1] * 6, [1] * 4 + [0] * 2])
    layer.build(x.shape)
    _weights(layer)
    logits = np.asarray(layer(x, mask=mask))
    assert logits.shape == (2, 6, 6, 4) == layer.compute_output_shape(x.shape)
    i, j = np.meshgrid(np.arange(6), np.arange(6), indexing="ij")
    keep = (i <= j) & (j - i < 3) & (mask[:, :, None] > 0) & (mask[:, None, :] > 0)
    assert keep.sum() == 15 + 9
    assert (logits[~keep][:, :3] == MASKED_LOGIT).all() and (logits[~keep][:, 3] == 0).all()
    assert (np.abs(logits[keep]) < 1e3).all() and len(np.unique(logits[keep][:, 0])) == keep.sum()
    np.testing.assert_array_equal(np.asarray(span_mask(mask, 6, 3)), keep)
    # the biaffine form: r[i, j, c] = [h_s(i); 1] U_c [h_e(j); 1] (+ no prior: none_prior=0)
    start = np.maximum(x @ layer.start_ffnn.kernel.numpy() + layer.start_ffnn.bias.numpy(), 0)
    end = np.maximum(x @ layer.end_ffnn.kernel.numpy() + layer.end_ffnn.bias.numpy(), 0)
    ones = np.ones((2, 6, 1), "float32")
    want = np.einsum("bid,dce,bje->bijc", np.concatenate([start, ones], -1), layer.biaffine.numpy(),
                     np.concatenate([end, ones], -1))
    np.testing.assert_allclose(logits[keep], want[keep], rtol=1e-4, atol=1e-4)
    # the prior is added to "no entity" only
    prior = BiaffineSpanScorer(3, size=8, max_span_length=3, none_prior=4.0)
    prior.build(x.shape)
    prior.set_weights(layer.get_weights())
    np.testing.assert_allclose(np.asarray(prior(x, mask=mask))[keep], logits[keep] + [0, 0, 0, 4.0], atol=1e-5)


def test_layer_config_round_trip_and_registered_name():
    layer = BiaffineSpanScorer(4, size=12, activation="gelu", max_span_length=7, none_prior=2.5, name="b")
    config = layer.get_config()
    again = BiaffineSpanScorer.from_config(config)
    assert again.get_config() == config
    assert keras.saving.get_registered_name(BiaffineSpanScorer) == "kerasbert_ner>BiaffineSpanScorer"
    restored = keras.saving.deserialize_keras_object(keras.saving.serialize_keras_object(layer))
    assert isinstance(restored, BiaffineSpanScorer) and restored.get_config() == config
    with pytest.raises(ValueError, match="types and size must be at least 1"):
        BiaffineSpanScorer(0)


def test_span_classes_from_the_span_rows():
    # 2 types; codes end * 2 + type + 1 per start position; 0 pads
    spans = np.zeros((1, 4, 2), np.int32)
    spans[0, 1] = [2 * 2 + 0 + 1, 1 * 2 + 1 + 1]  # (1, 2) type 0, (1, 1) type 1
    spans[0, 2] = [3 * 2 + 1 + 1, 3 * 2 + 0 + 1]  # (2, 3) both types: the first wins
    classes = np.asarray(span_classes(spans, 4, 2))
    want = np.full((1, 4, 4), 2)
    want[0, 1, 2], want[0, 1, 1], want[0, 2, 3] = 0, 1, 0
    np.testing.assert_array_equal(classes, want)


def test_loss_counts_only_real_spans_and_learns_a_toy_batch():
    logits = np.zeros((1, 3, 3, 3), "float32")
    classes = np.full((1, 3, 3), 2)
    classes[0, 0, 1] = 0
    keep = np.asarray(span_mask(np.array([[1, 1, 0]]), 3))  # (0,0) (0,1) (1,1)
    assert float(biaffine_crossentropy(classes, logits, keep)) == pytest.approx(np.log(3))
    logits[0, 2, 2] = [50, 0, 0]  # a padded cell, wrong: not counted
    logits[0, 0, 1] = [2, 0, 0]
    want = (2 * np.log(3) + np.log(1 + 2 * np.exp(-2))) / 3
    assert float(biaffine_crossentropy(classes, logits, keep)) == pytest.approx(want, rel=1e-5)
    # the entity cell (0, 1) weighs 4, each "no entity" cell 1
    want = (2 * np.log(3) + 4 * np.log(1 + 2 * np.exp(-2))) / 6
    assert float(biaffine_crossentropy(classes, logits, keep, entity_weight=4.0)) == pytest.approx(want, rel=1e-5)

    keras.utils.set_random_seed(0)
    layer = BiaffineSpanScorer(2, size=16, none_prior=2.0)
    x = tf.constant(np.random.default_rng(0).normal(size=(4, 7, 12)).astype("float32"))
    mask = tf.constant(np.array([[1] * 7, [1] * 5 + [0] * 2, [1] * 6 + [0], [1] * 7]))
    classes = np.full((4, 7, 7), 2)
    classes[:, 1, 2], classes[:, 3, 3], classes[0, 0, 5] = 0, 1, 1
    optimizer = keras.optimizers.Adam(1e-2)
    losses = []
    for _ in range(60):
        with tf.GradientTape() as tape:
            loss = biaffine_crossentropy(classes, layer(x, mask=mask), span_mask(mask, 7))
        grads = tape.gradient(loss, layer.trainable_variables)
        optimizer.apply_gradients(zip(grads, layer.trainable_variables))
        losses.append(float(loss))
    assert losses[-1] < 0.05 * losses[0]
    predicted = np.argmax(np.asarray(layer(x, mask=mask)), -1)
    np.testing.assert_array_equal(predicted[np.asarray(span_mask(mask, 7))], classes[np.asarray(span_mask(mask, 7))])


JAX_SCRIPT = """
import json, sys
import numpy as np
import keras
from kerasbert_apps.ner.heads.biaffine.layer import BiaffineSpanScorer, biaffine_crossentropy, span_mask

assert keras.backend.backend() == "jax", keras.backend.backend()
data = np.load(sys.argv[1])
layer = BiaffineSpanScorer(3, size=8, max_span_length=4, none_prior=1.5)
layer.build(data["x"].shape)
layer.set_weights([data[f"w{i}"] for i in range(len(layer.get_weights()))])
logits = layer(data["x"], mask=data["mask"])
loss = biaffine_crossentropy(data["classes"], logits, span_mask(data["mask"], data["x"].shape[1], 4))
print("RESULT " + json.dumps({"logits": np.asarray(logits).tolist(), "loss": float(loss)}))
"""


def test_jax_gives_what_tensorflow_gives(tmp_path):
    layer = BiaffineSpanScorer(3, size=8, max_span_length=4, none_prior=1.5)
    rng = np.random.default_rng(3)
    x = rng.normal(size=(2, 6, 5)).astype("float32")
    mask = np.array([[1] * 6, [1] * 3 + [0] * 3], np.int32)
    classes = rng.integers(0, 4, size=(2, 6, 6))
    layer.build(x.shape)
    _weights(layer, 4)
    logits = np.asarray(layer(x, mask=mask))
    loss = float(biaffine_crossentropy(classes, logits, span_mask(mask, 6, 4)))
    np.savez(tmp_path / "data.npz", x=x, mask=mask, classes=classes,
             **{f"w{i}": w for i, w in enumerate(layer.get_weights())})
    env = dict(os.environ, KERAS_BACKEND="jax", JAX_PLATFORMS="cpu", TF_CPP_MIN_LOG_LEVEL="3")
    proc = subprocess.run([sys.executable, "-c", JAX_SCRIPT, str(tmp_path / "data.npz")], env=env, cwd=REPO_ROOT,
                          capture_output=True, text=True, timeout=600)
    lines = [line for line in proc.stdout.splitlines() if line.startswith("RESULT ")]
    assert proc.returncode == 0 and lines, f"JAX failed:\n{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}"
    got = json.loads(lines[-1][len("RESULT "):])
    np.testing.assert_allclose(np.array(got["logits"], "float32"), logits, rtol=1e-5, atol=1e-5)
    assert got["loss"] == pytest.approx(loss, rel=1e-5)


# --- decoding


def _softmax(v):
    e = np.exp(np.asarray(v, np.float64) - np.max(v))
    return e / e.sum()


def test_decoding_keeps_nested_drops_crossing_and_scores_by_softmax():
    tokenizer = kerasbert.load_tokenizer(_toy())
    tagger = BiaffineTagger(None, tokenizer, ["A", "B"], max_length=16)
    words = "jack makes a dull jack boy and all work".split()
    text = " ".join(words)
    starts = np.cumsum([0] + [len(w) + 1 for w in words[:-1]]).tolist()
    windows = tagger.windows_numpy([text, "", "no entity here"])
    assert windows["num_tokens"][0] == len(words)
    logits = np.zeros(windows["token_ids"].shape + windows["token_ids"].shape[1:] + (3,), "float32")
    logits[..., 2] = 6.0  # "no entity" everywhere
    cells = {  # (first word, last word): logits (A, B, none)
        (0, 2): [4.0, 0, 0],  # kept (best)
        (1, 1): [0, 3.0, 0],  # nested in (0, 2): kept
        (2, 3): [3.5, 0, 0],  # crosses (0, 2), less probable: dropped
        (6, 7): [0, 2.0, 0],  # crosses (7, 8), less probable: dropped
        (7, 8): [5.0, 0, 0],  # kept
        (4, 4): [0.5, 1.0, 0.8],  # B wins with p < 1/2: kept
        (5, 5): [1.0, 0, 1.0],  # a tie with "no entity": no entity
    }
    for (a, b), v in cells.items():
        logits[0, a + 1, b + 1] = v
    feeds = {k: tf.constant(v) for k, v in windows.items()}
    texts = tf.constant([text, "", "no entity here"])

    def entities(temperature, threshold=0.0, nested=True):
        out = biaffine_entities(texts, feeds, tf.constant(logits), ["A", "B"], temperature, threshold, nested)
        assert out["count"].numpy().tolist()[1:] == [0, 0]
        return [(int(s), int(e), t.decode(), float(p)) for s, e, t, p in
                zip(out["start"][0], out["end"][0], out["type"][0].numpy(), out["score"][0])][: int(out["count"][0])]

    kept = [(0, 2), (1, 1), (4, 4), (7, 8)]
    span = lambda a, b: (starts[a], starts[b] + len(words[b]))  # noqa: E731
    got = entities(1.0)
    assert [(s, e, t) for s, e, t, _ in got] == [span(a, b) + ("AB"[int(np.argmax(cells[a, b][:2]))],)
                                                for a, b in kept]
    p = np.array([_softmax(cells[c]).max() for c in kept])
    np.testing.assert_allclose([x[3] for x in got], p, rtol=1e-5)
    assert p[2] < 0.5
    # the score temperature: the same entities, sigmoid(log-odds / T)
    hot = entities(2.0)
    assert [x[:3] for x in hot] == [x[:3] for x in got]
    np.testing.assert_allclose([x[3] for x in hot], 1 / (1 + np.exp(-np.log(p / (1 - p)) / 2)), rtol=1e-5)
    # the decision threshold: a candidate's best type logit must beat "no entity" + threshold
    assert [x[:3] for x in entities(1.0, threshold=0.3)] == [x[:3] for x in got if x[:2] != span(4, 4)]  # 1.0 < 0.8 + 0.3
    loose = [x[:2] for x in entities(1.0, threshold=-0.5)]  # (5, 5): 1.0 > 1.0 - 0.5; every other span: 0 > 6 - 0.5 no
    assert loose == sorted([span(a, b) for a, b in kept] + [span(5, 5)])
    # flat decoding: (1, 1), inside the more probable (0, 2), is dropped as well
    assert [x[:2] for x in entities(1.0, nested=False)] == [span(0, 2), span(4, 4), span(7, 8)]
    # ... and the more probable of two nested candidates wins, whichever is outside: (1, 1) now, and
    # (2, 3), which crossed only the dropped (0, 2), comes back
    logits[0, 2, 2] = [0, 9.0, 0]
    assert [x[:3] for x in entities(1.0, nested=False)] == [span(1, 1) + ("B",), span(2, 3) + ("A",),
                                                            span(4, 4) + ("B",), span(7, 8) + ("A",)]
    assert [x[:2] for x in entities(1.0)] == [span(a, b) for a, b in kept]  # nested: both kept


def test_decoding_merges_windows_as_the_span_heads_do():
    """A text in several windows: a span in two of them takes the verdict of
    the window where it sits further from a cut."""
    tokenizer = kerasbert.load_tokenizer(_toy())
    tagger = BiaffineTagger(None, tokenizer, ["A"], max_length=10)  # 8 tokens a window, overlap 2
    text = " ".join(WORDS)  # 10 tokens: windows [0, 8) and [6, 10)
    windows = tagger.windows_numpy([text])
    assert windows["token_start"].tolist() == [0, 6] and windows["token_end"].tolist() == [8, 10]
    logits = np.zeros(windows["token_ids"].shape + windows["token_ids"].shape[1:] + (2,), "float32")
    logits[..., 1] = 5.0
    # token 6 ("jack"): 1 from window 0's cut, 0 from window 1's: window 0 says A
    logits[0, 7, 7], logits[1, 1, 1] = [3.0, 0], [0, 3.0]
    # token 7 ("a"): 0 from window 0's cut, 1 from window 1's: window 1 says none
    logits[0, 8, 8], logits[1, 2, 2] = [3.0, 0], [0, 3.0]
    logits[1, 3, 3] = [3.0, 0]  # token 8 ("dull"), in window 1 only: A
    out = biaffine_entities(tf.constant([text]), {k: tf.constant(v) for k, v in windows.items()},
                            tf.constant(logits), ["A"])
    assert out["mention"][0, : int(out["count"][0])].numpy().tolist() == [b"jack", b"dull"]


# --- settings and registration


def test_registered_with_its_options():
    head = heads.get("ner", "biaffine")
    assert head.keep_overlaps and head.scorer == "exact spans" and head.pipeline_class() is BiaffineTagger
    settings = NerTrainSettings(checkpoint="c", train="t", dev="d", output="o", head="biaffine")
    settings.check()
    assert (settings.biaffine_size, settings.biaffine_lstm, settings.biaffine_max_span) == (150, 128, 0)
    assert settings.biaffine_entity_weight == 10.0
    with pytest.raises(KerasbertError, match="biaffine_entity_weight must be above 0"):
        NerTrainSettings(checkpoint="c", train="t", dev="d", output="o", head="biaffine",
                         biaffine_entity_weight=0.0).check()
    with pytest.raises(KerasbertError, match="biaffine_size must be at least 1"):
        NerTrainSettings(checkpoint="c", train="t", dev="d", output="o", head="biaffine", biaffine_size=0).check()
    with pytest.raises(KerasbertError, match="must be 0 or more"):
        NerTrainSettings(checkpoint="c", train="t", dev="d", output="o", head="biaffine", biaffine_lstm=-1).check()


def test_decoding_follows_the_training_data_unless_given():
    """``--biaffine-decoding auto`` keeps nested entities where the training
    data has an entity inside another and decodes flat where it has none;
    ``nested`` / ``flat`` are used as given; the choice is in the settings
    file, and a folder saved without it keeps nested entities."""
    from kerasbert_apps.ner.span_pipeline import SpanFeatureReport

    tokenizer = kerasbert.load_tokenizer(_toy())

    def decoding(choice, nested_in_data):
        settings = NerTrainSettings(checkpoint="c", train="t", dev="d", output="o", head="biaffine",
                                    biaffine_decoding=choice)
        tagger = BiaffineTagger.for_training(None, tokenizer, ["A"], settings)
        tagger.after_features(SpanFeatureReport(nested_entities=nested_in_data), settings)
        return tagger

    assert NerTrainSettings(checkpoint="c", train="t", dev="d", output="o", head="biaffine").biaffine_decoding == "auto"
    assert [decoding("auto", n).nested for n in (0, 3)] == [False, True]
    assert [decoding("nested", n).nested for n in (0, 3)] == [True, True]
    assert [decoding("flat", n).nested for n in (0, 3)] == [False, False]
    flat = decoding("auto", 0)
    assert flat.settings()["nested"] is False
    assert BiaffineTagger.from_settings(None, tokenizer, flat.settings()).nested is False
    older = {k: v for k, v in flat.settings().items() if k != "nested"}
    assert BiaffineTagger.from_settings(None, tokenizer, older).nested is True


# --- the model on the toy encoder (training, export and the rest: tests/test_heads_ner.py)


def test_model_with_bilstm_and_max_span_trains_and_round_trips(tmp_path):
    """The BiLSTM and max-span options: the model's loss on a batch of the
    pipeline's training rows (nested entities) falls with a few steps, and
    the saved model (registered names, ``get_config``) loads back to the
    same logits."""
    from kerasbert_apps.ner.examples import Entity
    from kerasbert_apps.ner.examples import Example
    from kerasbert_apps.ner.heads.biaffine.model import BiaffineNerModel
    from kerasbert.checkpoints.loader import load_encoder

    keras.utils.set_random_seed(1)
    tokenizer = kerasbert.load_tokenizer(_toy())
    tagger = BiaffineTagger(None, tokenizer, ["PER", "THING"], max_length=16)
    examples = [Example(r["text"], [Entity(e["start"], e["end"], e["type"]) for e in r["entities"]], f"t:{i}")
                for i, r in enumerate(_records(8, 2))]
    rows, report = tagger.features(examples)
    assert report.nested_entities > 0
    width = max(len(t) for t in rows["token_ids"])
    x = {k: np.stack([np.pad(np.asarray(v), (0, width - len(v))) for v in rows[k]])
         for k in ("token_ids", "segment_ids", "padding_mask")}
    spans = np.stack([np.pad(v, [(0, width - len(v)), (0, 0)]) for v in rows["spans"]])
    model = BiaffineNerModel(load_encoder(_toy()), 2, size=16, use_lstm=True, lstm_units=8, max_span_length=4)
    logits = np.asarray(model(x)["logits"])
    assert logits.shape == (len(rows["token_ids"]), width, width, 3)
    i, j = np.meshgrid(np.arange(width), np.arange(width), indexing="ij")
    assert (logits[:, j - i >= 4][..., :2] == MASKED_LOGIT).all()  # longer than 4 tokens: never an entity
    model.compile(optimizer=keras.optimizers.Adam(3e-3))
    y = {"spans": spans}
    before = float(model.compute_loss(x, y, model(x)))
    model.fit(x, y, epochs=15, batch_size=8, verbose=0)
    assert float(model.compute_loss(x, y, model(x))) < 0.8 * before
    model.save(tmp_path / "m.keras")
    loaded = keras.saving.load_model(tmp_path / "m.keras")
    assert isinstance(loaded, BiaffineNerModel) and loaded.head_config() == model.head_config()
    np.testing.assert_allclose(np.asarray(loaded(x)["logits"]), np.asarray(model(x)["logits"]), atol=1e-5)
    with pytest.raises(KerasbertError, match="cannot be distilled"):
        BiaffineTagger(model, tokenizer, ["PER", "THING"]).student([0])
