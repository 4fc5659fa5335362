"""The contract every registered head keeps (spaCy / keras-hub style: one
harness parametrised over the registry, :mod:`kerasbert_apps.base.heads`).

This module holds the checks; ``tests/test_heads_ner.py`` and
``tests/test_heads_triples.py`` run them over the heads of their task (two
files, so that the two test workers share the work: ``--dist loadfile``
gives a file to one worker).

For each head of each task: a tiny training run on the tiny test checkpoint
(the folder records its head), then, on that model with its head's weights
shaken so that it predicts many entities / triples (a stricter comparison
than a 1-epoch model that predicts little) and its decoding settings away
from their defaults (score temperature, thresholds): the save / load round trip;
the text SavedModel in a fresh process that imports only TensorFlow and
TF-Text gives ``predict``'s outputs (offsets, labels, scores within 2e-4)
with core ops plus the allowed TF-Text op only; the ``--input ids`` export
gives what the head's ``ids_endpoint`` gives, with core ops only; the
bfloat16 export gives what the bfloat16 pipeline predicts; a LoRA folder
(adapters and head only), saved as a ``--lora-rank`` run saves it, loads back
to the same outputs and merges, and answers ``kerasbert predict`` in a fresh
process; and ``predict`` on the JAX backend gives what TensorFlow gives (and,
for a head with a score temperature, the scores calibration fits it on).

The text-export, fresh LoRA predict and JAX checks run once per task over all
of its heads (one fresh process serves every export; one runs the command
line on every LoRA folder; one JAX process loads every folder: their imports
are most of their cost); the trained heads are shared through
:data:`_TRAINED`. A new head gets all of this by registering. Head-specific behaviour (the
decoding rules, training rows, thresholds, calibration) stays in each head's
own test file.
"""

import dataclasses
import json
import os
import random
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import keras
import numpy as np
import pytest
import tensorflow as tf

from conftest import require_shared
from kerasbert_apps.base import heads
from kerasbert_apps.ner.train import NER
from kerasbert_apps.triples.train import TRIPLES
from kerasbert.graph_tokenizer import disallowed_ops
from kerasbert.graph_tokenizer import list_ops
from kerasbert.graph_tokenizer import non_core_ops

TASKS = {"ner": NER, "triples": TRIPLES}
HEADS = [(task, head.name) for task in TASKS for head in heads.heads(task)]
WORDS = "all work and no play makes jack a dull boy".split()
#: Small sizes for the options a head may add, and no calibration pass at the
#: end of the run (set when the head's task has them). The checks set a score
#: temperature of their own (:func:`_non_default`); what calibration fits on,
#: ``score_outcomes``, is checked for every head by the JAX check, and the
#: pass itself (the same code for every head) by the demo's run and
#: ``test_ner_global_pointer.py``.
SMALL = {"lstm_units": 8, "pointer_size": 8, "calibrate": False}
#: The head's own decision settings given as numbers where it has them, so that
#: the tiny run fits nothing on dev at its end (the fitting and tuning at the
#: end of training: test_ner_global_pointer.py, test_triples_gplinker.py);
#: the checks set values of their own (:func:`_non_default`).
FIXED = {"span_threshold": 0.0, "threshold_start": 0.5, "threshold_end": 0.5, "threshold_entity": 0.5,
         "threshold_link": 0.5, "biaffine_lstm": 8}
MAX_LENGTH = 16  # every longer text goes through the window merge


def _toy():
    return require_shared("data", "models", "keras_bert_test_checkpoint")


def toy_sentences(n, seed):
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        words = [rng.choice(WORDS) for _ in range(rng.randint(4, 20))]
        at = rng.randrange(len(words))
        words[at:at] = ["jack", "likes", "dull", "boy"] if rng.random() < 0.6 else ["dull", "jack"]
        out.append(words)
    return out


def ner_record(words):
    """``jack`` is a PER, ``dull X`` a THING (``dull jack`` nests a PER)."""
    starts = np.cumsum([0] + [len(w) + 1 for w in words[:-1]]).tolist()
    entities = []
    for i, word in enumerate(words):
        if word == "jack":
            entities.append({"start": starts[i], "end": starts[i] + 4, "type": "PER"})
        if word == "dull" and i + 1 < len(words):
            entities.append({"start": starts[i], "end": starts[i + 1] + len(words[i + 1]), "type": "THING"})
    return {"text": " ".join(words), "entities": entities}


def triples_record(words):
    """``jack likes dull boy``: (jack, likes, dull boy); ``dull jack``: (jack, is, dull)."""
    text = " ".join(words)
    triples = []
    if "jack likes dull boy" in text:
        triples.append(["jack", "likes", "dull boy"])
    if "dull jack" in text:
        triples.append(["jack", "is", "dull"])
    return {"text": text, "triple_list": triples}


TEXTS = [" ".join(w) for w in toy_sentences(24, 9)] + [
    " ".join(random.Random(5).choice(WORDS) for _ in range(120)), "", "   ", "😀 jack 🎉", "李白 jack 在北京"]


def _shake(pipeline, seed=3):
    """Random noise on the head's weights (the layers named with its
    ``head_prefix``; biases, which may hold a prior against firing, replaced
    by noise): the model then predicts many entities / triples."""
    rng = np.random.default_rng(seed)
    for variable in pipeline.model.weights:
        if variable.path.split("/")[0].startswith(pipeline.head_prefix):
            value = np.asarray(variable.numpy())
            noise = rng.normal(0, 0.5 + float(np.abs(value).mean()), value.shape)
            variable.assign((noise * 0.5 if variable.path.endswith("bias") else value + noise).astype(value.dtype))


def _count(rows):
    return sum(len(next(iter(row.values()))) if row else 0 for row in rows)


def trained_fixture(task_name):
    """The module-scoped ``trained`` fixture over every registered head of ``task_name``."""
    params = [(t, h) for t, h in HEADS if t == task_name]

    @pytest.fixture(scope="module", params=params, ids=[f"{t}-{h}" for t, h in params])
    def trained(request, tmp_path_factory):
        """A tiny training run of the head, then its model shaken and saved."""
        return _trained(request.param, tmp_path_factory)

    return trained


#: The trained heads of this session, by ``(task, head)``: the module-scoped
#: ``trained`` fixture and the one JAX run per task share them.
_TRAINED = {}


def _trained(param, tmp_path_factory):
    if param not in _TRAINED:
        _TRAINED[param] = _train(param, tmp_path_factory)
    return _TRAINED[param]


def _train(param, tmp_path_factory):
    task_name, name = param
    task = TASKS[task_name]
    tmp = tmp_path_factory.mktemp(f"{task_name}_{name}")
    record = ner_record if task_name == "ner" else triples_record
    for split, n, seed in (("train", 40, 0), ("dev", 12, 1)):
        (tmp / f"{split}.jsonl").write_text("".join(json.dumps(record(w)) + "\n" for w in toy_sentences(n, seed)),
                                           encoding="utf-8")
    fields = {f.name for f in dataclasses.fields(task.train_settings)}
    head_settings = heads.get(task_name, name).settings
    own = {f.name for f in dataclasses.fields(head_settings)} if head_settings else set()
    settings = task.train_settings(
        checkpoint=str(_toy()), train=str(tmp / "train.jsonl"), dev=str(tmp / "dev.jsonl"), output=str(tmp / "run"),
        epochs=1, batch_size=8, max_length=MAX_LENGTH, seed=7, head=name,
        **{k: v for k, v in SMALL.items() if k in fields}, **{k: v for k, v in FIXED.items() if k in own})
    metrics = task.train(settings)
    pipeline = _non_default(task.load(tmp / "run"))
    for seed in range(4):  # shaken again while it predicts little
        _shake(pipeline, seed)
        rows = pipeline.output_rows(TEXTS)
        if _count(rows) > 40:
            break
    pipeline.save(tmp / "shaken")
    assert _count(rows) > 20, f"{name}: the shaken model predicts too little to compare"
    return SimpleNamespace(task=task, name=name, head=heads.get(task_name, name), tmp=tmp, settings=settings,
                           metrics=metrics, pipeline=pipeline, rows=rows, folder=tmp / "shaken")


def _non_default(pipeline):
    """The pipeline with its decoding settings away from their defaults, so
    that every check below also shows that they travel (into the saved
    folder, the exports, the JAX predict): a score temperature of 1.7 (NER
    heads) and a decision threshold of -0.5 (span heads), every triple
    threshold lowered to 0.4 (triple heads)."""
    if hasattr(pipeline, "set_temperature"):
        pipeline.set_temperature(1.7)
        if hasattr(pipeline, "set_threshold"):
            pipeline.set_threshold(-0.5)
        return pipeline
    return pipeline.with_thresholds({key: 0.4 for key in pipeline.thresholds})


def _close(ours, theirs, atol, where=""):
    """Output rows equal: numbers within ``atol``, everything else exactly."""
    assert len(ours) == len(theirs)
    for i, (a, b) in enumerate(zip(ours, theirs)):
        assert a.keys() == b.keys(), where
        for key in a:
            if a[key] and isinstance(a[key][0], float):
                np.testing.assert_allclose(a[key], b[key], atol=atol, err_msg=f"{where} text {i} {key}")
            else:
                assert a[key] == b[key], f"{where} text {i} {key}: {TEXTS[i][:60]!r}"


FRESH_PROCESS = r"""
import json, sys
import tensorflow as tf
import tensorflow_text  # noqa: F401  (registers the TF-Text op, as TF Serving links it)
texts = json.load(open(sys.argv[1], encoding="utf-8"))
served = []
for path in sys.argv[3:]:
    serve = tf.saved_model.load(path).signatures["serving_default"]
    rows = []
    for b in range(0, len(texts), 16):
        got = {k: v.numpy() for k, v in serve(text=tf.constant(texts[b:b + 16], tf.string)).items()}
        for i in range(len(texts[b:b + 16])):
            n = int(got["count"][i])
            rows.append({k: [x.decode("utf-8") if isinstance(x, bytes) else x for x in v[i, :n].tolist()]
                         for k, v in got.items() if k != "count"})
    served.append(rows)
assert not any(m.split(".")[0] in ("kerasbert", "kerasbert_apps", "apps") for m in sys.modules), "imported more than TF and TF-Text"
json.dump(served, open(sys.argv[2], "w", encoding="utf-8"), ensure_ascii=False)
"""


def _served(saved_models, tmp_path):
    """The unpadded outputs for :data:`TEXTS` of each text export, from one
    process that imports only TensorFlow and TF-Text."""
    (tmp_path / "texts.json").write_text(json.dumps(TEXTS, ensure_ascii=False), encoding="utf-8")
    (tmp_path / "serve.py").write_text(FRESH_PROCESS, encoding="utf-8")
    subprocess.run([sys.executable, str(tmp_path / "serve.py"), str(tmp_path / "texts.json"), str(tmp_path / "out.json"),
                    *map(str, saved_models)], check=True, env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"), cwd=tmp_path)
    return json.loads((tmp_path / "out.json").read_text(encoding="utf-8"))


def test_training_records_the_head(trained):
    model = trained.tmp / "run" / "model"
    saved = json.loads((model / trained.head.settings_file).read_text())
    assert saved["head"] == trained.name
    assert heads.head_of(trained.task.name, trained.tmp / "run").name == trained.name
    assert trained.pipeline.head_name == trained.name
    assert isinstance(trained.pipeline, trained.head.pipeline_class())
    assert json.loads((trained.tmp / "run" / "metrics.json").read_text()) == json.loads(json.dumps(trained.metrics))


def test_save_load_round_trip(trained):
    back = trained.task.load(trained.folder)
    assert type(back) is type(trained.pipeline) and back.settings() == trained.pipeline.settings()
    assert back.output_rows(TEXTS) == trained.rows
    assert back.predict(TEXTS) == trained.pipeline.predict(TEXTS)


def text_exports_test_for(task_name):
    """The contract's text-export check, once per task for all its heads
    (one fresh process serves every head's exports)."""

    def test_text_exports_in_a_fresh_process_give_what_predict_gives(tmp_path_factory, tmp_path):
        """float32 and bfloat16 (the encoder's weights and matmuls; the head and
        decoding stay float32) exports of every head: each gives what the
        pipeline of its precision predicts, with core ops plus the allowed
        TF-Text op only, served by one process that imports only TensorFlow
        and TF-Text."""
        every = [_trained(param, tmp_path_factory) for param in HEADS if param[0] == task_name]
        paths, expected = [], []
        for trained in every:
            half = trained.pipeline.with_precision("bfloat16")
            assert trained.pipeline.with_precision("float32") is trained.pipeline
            assert {v.dtype for v in half.model.encoder.weights} == {"bfloat16"}
            head = [v for v in half.model.weights if v.path.startswith(half.head_prefix)]
            assert head and {v.dtype for v in head} == {"float32"}
            for pipeline, precision, atol in ((trained.pipeline, "float32", 2e-4), (half, "bfloat16", 1e-3)):
                path = pipeline.export(tmp_path / f"{trained.name}-{precision}")
                ops = list_ops(path)
                assert disallowed_ops(ops) == [] and non_core_ops(ops) == ["FastWordpieceTokenizeWithOffsets"]
                paths.append(path)
                rows = trained.rows if pipeline is trained.pipeline else pipeline.output_rows(TEXTS)
                expected.append((rows, atol, f"{trained.name} {precision}"))
            windowed = [row for text, row in zip(TEXTS, trained.rows) if len(text.split()) > MAX_LENGTH]
            assert _count(windowed) > 0, trained.name  # decoded across windows
        for served, (rows, atol, where) in zip(_served(paths, tmp_path), expected):
            _close(rows, served, atol, where)

    return test_text_exports_in_a_fresh_process_give_what_predict_gives


def test_ids_export_gives_the_ids_endpoint(trained, tmp_path):
    pipeline = trained.pipeline
    path = pipeline.export(tmp_path / "ids", input="ids")
    assert non_core_ops(list_ops(path)) == []
    batch = pipeline.tokenizer(TEXTS[:6], max_length=pipeline.max_length)
    inputs = {k: tf.constant(v) for k, v in batch.inputs.items()}
    served = tf.saved_model.load(str(path)).signatures["serving_default"](**inputs)
    direct = tf.function(pipeline.ids_endpoint())(**inputs)
    assert set(served) == set(direct)
    for key in direct:
        a, b = np.asarray(direct[key]), served[key].numpy()
        if a.dtype.kind == "f":
            np.testing.assert_allclose(a, b, atol=2e-4, err_msg=key)
        else:
            np.testing.assert_array_equal(a, b, err_msg=key)
    if not pipeline.compiled_head:  # jit_compile="head" is refused before anything is traced
        from kerasbert.errors import KerasbertError

        with pytest.raises(KerasbertError, match="no part that compiles on its own"):
            pipeline.export(tmp_path / "head", jit_compile="head")


def _model_inputs(model, windows):
    """The model's inputs for these windows: the encoder's from the windows,
    any other (CasRel's training input ``subject_span``) zeros."""
    rows = len(windows["token_ids"])
    return {name: windows[name] if name in windows else np.zeros([rows, *tensor.shape[1:]], tensor.dtype)
            for name, tensor in model.input.items()}


def lora_pipeline(trained, rank=2, seed=2):
    """A pipeline of ``trained``'s head with LoRA adapters of rank ``rank``
    on the toy checkpoint, as a ``--lora-rank`` training run holds it when it
    saves: the model built, the adapters enabled and compiled for training
    (the run's optimizer and schedule attached to the model), without the
    training; the adapters random so that they count."""
    from kerasbert.fit import compile_for_training
    from kerasbert.loader import load_encoder
    from kerasbert.lora import enable_lora

    cls = trained.head.pipeline_class()
    keras.utils.set_random_seed(6)
    model = cls.build_model(load_encoder(str(_toy())), trained.pipeline.labels, trained.settings)
    rng = np.random.default_rng(seed)
    for layer in enable_lora(model.encoder, rank):
        layer.lora_kernel_b.assign(rng.normal(0, 0.3, layer.lora_kernel_b.shape))
    compile_for_training(model, 4, trained.settings, cls.head_prefix)
    pipeline = cls.for_training(model, trained.pipeline.tokenizer, trained.pipeline.labels, trained.settings)
    pipeline.lora = {"rank": rank, "checkpoint": str(Path(_toy()).resolve())}
    return pipeline


def test_lora_folder_loads_back_and_merges(trained, tmp_path):
    """A LoRA folder (adapters and head only) loads back to the same model
    and settings, and merges into a plain model computing the same. Decoding
    is a function of the model's outputs and the settings (which the round
    trip above checks end to end), so the model's outputs for the windows of
    the texts are compared here, for every output."""
    from kerasbert.loader import load_encoder
    from kerasbert.lora import lora_layers

    cls = trained.head.pipeline_class()
    x = {"token_ids": np.array([[2, 7, 9, 11, 3]], np.int32), "segment_ids": np.zeros((1, 5), np.int32),
         "padding_mask": np.ones((1, 5), np.int32)}
    plain = np.asarray(load_encoder(str(_toy()))(x)["sequence_output"])
    pipeline = lora_pipeline(trained)
    model = pipeline.model
    pipeline.save(tmp_path / "lora")
    assert not (tmp_path / "lora" / "model.keras").exists()  # adapters and head only
    back = trained.task.load(tmp_path / "lora")
    assert type(back) is cls and back.lora == pipeline.lora and back.settings() == pipeline.settings()
    merged = back.merged()
    assert merged.lora is None and not lora_layers(merged.model.encoder)
    assert merged.settings() == pipeline.settings()
    want = np.asarray(model.encoder(x)["sequence_output"])
    assert np.abs(want - plain).max() > 1e-3  # the adapters count
    windows = _model_inputs(model, pipeline.windows_numpy(TEXTS[:8]))
    theirs = keras.tree.flatten(model(windows))
    assert theirs
    for ours in (back, merged):
        np.testing.assert_allclose(np.asarray(ours.model.encoder(x)["sequence_output"]), want, atol=1e-4)
        outputs = keras.tree.flatten(ours.model(windows))
        assert len(outputs) == len(theirs), trained.name
        for i, (a, b) in enumerate(zip(outputs, theirs)):
            np.testing.assert_allclose(np.asarray(a, np.float64), np.asarray(b, np.float64), atol=1e-4,
                                       err_msg=f"{trained.name} LoRA output {i}")


CLI_PREDICT = r"""
import contextlib, io, json, sys
from kerasbert.cli import main
task, texts = sys.argv[1], sys.argv[2]
for folder in sys.argv[3:]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        status = main([task, "predict", "--model", folder, texts])
    print("RESULT " + json.dumps({"status": status, "stdout": out.getvalue(), "stderr": err.getvalue()[-2000:]}), flush=True)
"""


def lora_fresh_process_test_for(task_name):
    """The contract's LoRA check through the command line, once per task
    for all its heads: a LoRA folder of every head, as a ``--lora-rank``
    run saves it (:func:`lora_pipeline`), answers ``kerasbert TASK predict``
    in a fresh process that has imported nothing of ours before it. One
    process runs the command for every head's folder in turn (its imports
    are most of its cost): no predict imports what training does, so a
    folder that needs training's classes (the optimizer's, the schedule's)
    fails whatever its place; a folder that needed a class only another
    head's code imports could pass after that head's."""

    def test_lora_folders_answer_predict_in_a_fresh_process(tmp_path_factory, tmp_path):
        every = [_trained(param, tmp_path_factory) for param in HEADS if param[0] == task_name]
        for trained in every:
            lora_pipeline(trained).save(tmp_path / trained.name)
        texts = [t for t in TEXTS[:6] if t.strip()]
        (tmp_path / "texts.txt").write_text("".join(t + "\n" for t in texts), encoding="utf-8")
        run = subprocess.run([sys.executable, "-c", CLI_PREDICT, task_name, str(tmp_path / "texts.txt"),
                              *(str(tmp_path / t.name) for t in every)], capture_output=True, text=True,
                             env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"), cwd=tmp_path)
        assert run.returncode == 0, run.stderr[-3000:]
        results = [json.loads(line[len("RESULT "):]) for line in run.stdout.splitlines() if line.startswith("RESULT ")]
        assert len(results) == len(every)
        key = "entities" if task_name == "ner" else "triples"
        for trained, result in zip(every, results):
            assert result["status"] == 0, f"{trained.name}: {result['stderr'].strip()}"
            rows = [json.loads(line) for line in result["stdout"].splitlines()]
            assert len(rows) == len(texts) and all(key in row for row in rows), f"{trained.name}: {result['stdout']}"

    return test_lora_folders_answer_predict_in_a_fresh_process


JAX_PREDICT = r"""
import json, os, sys
os.environ["KERAS_BACKEND"] = "jax"
import keras
assert keras.backend.backend() == "jax"
from kerasbert_apps.{task}.train import {TASK}
from kerasbert_apps.ner.examples import Example
texts = json.load(open(sys.argv[1], encoding="utf-8"))
for folder in sys.argv[2:]:
    pipeline = {TASK}.load(folder)
    out = {"rows": pipeline.output_rows(texts, batch_size=16)}
    if hasattr(pipeline, "score_outcomes"):  # calibration's pass, on the host
        scores_at, _ = pipeline.score_outcomes([Example(t, [], "jax") for t in texts], batch_size=16)
        out["outcomes"] = scores_at(1.3).tolist()
    print("OUT " + json.dumps(out, ensure_ascii=False), flush=True)
"""


def jax_test_for(task_name):
    """The contract's JAX check, once per task for all its heads (one JAX
    process loads every head's folder: the imports are most of its cost)."""

    def test_predict_on_the_jax_backend_gives_what_tensorflow_gives(tmp_path_factory, tmp_path):
        """``predict`` of every head's (shaken, non-default) model on the JAX
        backend -- the model on the host between the same TensorFlow
        tokenizer and decoding -- gives what TensorFlow gives, and so do the
        scores calibration fits a temperature on, for a head with one."""
        pytest.importorskip("jax")
        every = [_trained(param, tmp_path_factory) for param in HEADS if param[0] == task_name]
        (tmp_path / "texts.json").write_text(json.dumps(TEXTS, ensure_ascii=False), encoding="utf-8")
        script = JAX_PREDICT.replace("{task}", task_name).replace("{TASK}", task_name.upper())
        run = subprocess.run([sys.executable, "-c", script, str(tmp_path / "texts.json"),
                              *(str(t.folder) for t in every)], capture_output=True, text=True,
                             env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"), cwd=Path(__file__).resolve().parents[1])
        assert run.returncode == 0, run.stderr[-3000:]
        outs = [json.loads(line[len("OUT "):]) for line in run.stdout.splitlines() if line.startswith("OUT ")]
        assert len(outs) == len(every)
        for trained, out in zip(every, outs):
            # JAX in batches of 16, TensorFlow's rows in batches of 32: a text's outputs do not depend on its batch
            _close(trained.rows, out["rows"], 2e-3, f"{trained.name} on JAX")
            if hasattr(trained.pipeline, "score_outcomes"):
                from kerasbert_apps.ner.examples import Example

                scores_at, _ = trained.pipeline.score_outcomes([Example(t, [], "tf") for t in TEXTS], batch_size=16)
                assert len(out["outcomes"]) > 20, trained.name
                np.testing.assert_allclose(out["outcomes"], scores_at(1.3), atol=2e-3, err_msg=trained.name)

    return test_predict_on_the_jax_backend_gives_what_tensorflow_gives


def test_the_registry_lists_heads_without_model_code_and_names_the_choices():
    """Listing the heads (what ``--help`` does) imports no TensorFlow and no
    head's model code; an unknown head is a one-line error with the choices;
    a name is registered once per task."""
    script = ("import sys; from kerasbert_apps.base import heads; "
              "print(heads.names('ner'), heads.names('triples')); "
              "print(sorted(m for m in sys.modules if m.split('.')[0] in ('tensorflow', 'keras') "
              "or m.endswith(('.model', '.pipeline', '.decode'))))")
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True).stdout
    assert out.splitlines()[1] == "[]" and "'crf'" in out and "'casrel'" in out
    assert heads.names("ner")[:3] == ("crf", "softmax", "global-pointer")  # the default first
    assert heads.names("triples")[:2] == ("casrel", "gplinker")
    from kerasbert.errors import KerasbertError

    with pytest.raises(KerasbertError, match=r"^unknown ner head 'nope'; the heads are: crf, softmax, global-pointer"):
        heads.get("ner", "nope")
    with pytest.raises(KerasbertError, match="already registered"):
        heads.register(dataclasses.replace(heads.get("ner", "crf"), help="another"))
    assert heads.register(heads.get("ner", "crf")) is heads.get("ner", "crf")  # the same head again: a no-op
