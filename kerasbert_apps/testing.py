"""The head contract: the checks every head keeps, shipped with the kit for the kit's heads and
for a head of another package (the way keras-hub ships ``run_task_test`` and spaCy its pytest
utilities).

A head's own test file runs every check for its head, with pytest (the only thing it needs
beyond the kit)::

    from kerasbert_apps.testing import HeadContract

    class TestMyHead(HeadContract):
        heads = [("ner", "my-head")]

The head is found in the registry (:mod:`kerasbert_apps.base.heads`): a head of another package
must be installed (``pip install -e .``: its ``kerasbert.heads`` entry point is how the fresh
processes below find it too). ``train_options`` of the class (a dict) sets the head's options
for its tiny training run (small sizes keep it quick). Nothing else is needed: no data files,
no checkpoint, no ``conftest.py``.

For each head, on a tiny random BERT checkpoint in Google's layout that this module writes
(:func:`tiny_checkpoint`) and toy data it makes (:func:`toy_records`): a tiny training run
through the task's ``train`` (the folder records its head), then, on that model with its head's
weights shaken so that it predicts many entities / triples (a stricter comparison than a
1-epoch model that predicts little) and its decoding settings away from their defaults (score
temperature, thresholds):

* listing the heads (what ``--help`` does) imports neither TensorFlow nor the head's model code;
* the save / load round trip, through the task's one loader (``kerasbert_apps.<task>.load``);
* the text SavedModel and its bfloat16 twin, served in a fresh process that imports only
  TensorFlow and TF-Text, give ``predict``'s outputs (offsets, labels, scores within 2e-4) with
  core ops plus the allowed TF-Text op only;
* the ``--input ids`` export gives what the head's ``ids_endpoint`` gives, with core ops only;
  ``--jit-compile head`` is refused in one line for a head without a compiled part;
* a LoRA folder (adapters and head only) loads back to the same outputs and merges, and answers
  ``kerasbert TASK predict`` in a fresh process;
* ``predict`` on the JAX backend gives what TensorFlow gives (and, for a head with a score
  temperature, the scores calibration fits it on);
* NER: ``ner select`` measures the head's outputs if it declares a measure (the entities are
  ``predict``'s, ``P(best)`` a probability), else refuses it in one line.

The fresh processes run once per task for all the class's heads (their imports are most of
their cost: one TensorFlow process serves the exports and then runs the LoRA folders' ``predict``,
one JAX process loads every folder); a head is trained once per test process, whichever classes
use it (:func:`trained_head`). Head-specific behaviour (decoding rules, training rows,
thresholds) belongs in the head's own tests beside the class.

The kit runs the same class over its own heads (``tests/test_heads_ner.py``:
``heads = kit_heads("ner")``), so a new folder under ``kerasbert_apps/<task>/heads/`` is checked with no
line of test code.
"""

import dataclasses
import json
import os
import random
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

#: The toy vocabulary's words; the data and texts are made of them.
WORDS = "all work and no play makes jack a dull boy".split()
#: The tiny checkpoint's vocabulary.
VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *WORDS]
#: Tokens per window: every longer text goes through the window merge.
MAX_LENGTH = 16
#: Small sizes for the kit's heads' options, and no calibration pass at the
#: end of the run (each where the task has it). The checks set a score
#: temperature of their own (:func:`_non_default`); what calibration fits
#: on, ``score_outcomes``, is checked by the JAX check.
SMALL = {"lstm_units": 8, "pointer_size": 8, "biaffine_size": 16, "calibrate": False}
#: The kit's heads' decision settings given as numbers, so that the tiny run fits nothing on dev
#: at its end (the fitting and tuning at the end of training have tests of their own); the
#: checks set values of their own (:func:`_non_default`). Given only to a head whose settings
#: declare them.
FIXED = {"span_threshold": 0.0, "threshold_start": 0.5, "threshold_end": 0.5, "threshold_entity": 0.5,
         "threshold_link": 0.5, "biaffine_lstm": 8}


def toy_sentences(n, seed):
    """``n`` random sentences (lists of words) of :data:`WORDS`, each with
    ``jack likes dull boy`` or ``dull jack`` in it."""
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        words = [rng.choice(WORDS) for _ in range(rng.randint(4, 20))]
        at = rng.randrange(len(words))
        words[at:at] = ["jack", "likes", "dull", "boy"] if rng.random() < 0.6 else ["dull", "jack"]
        out.append(words)
    return out


def ner_record(words):
    """An NER record of ``words``: ``jack`` is a PER, ``dull X`` a THING
    (``dull jack`` nests a PER)."""
    starts = np.cumsum([0] + [len(w) + 1 for w in words[:-1]]).tolist()
    entities = []
    for i, word in enumerate(words):
        if word == "jack":
            entities.append({"start": starts[i], "end": starts[i] + 4, "type": "PER"})
        if word == "dull" and i + 1 < len(words):
            entities.append({"start": starts[i], "end": starts[i + 1] + len(words[i + 1]), "type": "THING"})
    return {"text": " ".join(words), "entities": entities}


def triples_record(words):
    """A triples record of ``words``: ``jack likes dull boy`` holds (jack,
    likes, dull boy); ``dull jack`` holds (jack, is, dull)."""
    text = " ".join(words)
    triples = []
    if "jack likes dull boy" in text:
        triples.append(["jack", "likes", "dull boy"])
    if "dull jack" in text:
        triples.append(["jack", "is", "dull"])
    return {"text": text, "triple_list": triples}


def toy_records(task, n, seed):
    """``n`` records of ``task`` (``"ner"`` or ``"triples"``, the kit's own
    JSON lines) of random toy sentences."""
    record = ner_record if task == "ner" else triples_record
    return [record(words) for words in toy_sentences(n, seed)]


#: The texts every check predicts: toy sentences, a long one (many
#: windows), empty and blank ones, emoji and characters the vocabulary lacks.
TEXTS = [" ".join(w) for w in toy_sentences(24, 9)] + [
    " ".join(random.Random(5).choice(WORDS) for _ in range(120)), "", "   ", "😀 jack 🎉", "李白 jack 在北京"]


def tiny_checkpoint(folder, seed=0):
    """Write a tiny random BERT (2 layers, hidden size 8, 16 positions, the
    15 tokens of :data:`VOCAB`) into ``folder`` in Google's layout
    (``bert_config.json``, ``bert_model.ckpt.*``, ``vocab.txt``), as every
    checkpoint loader of the kit reads it; returns ``folder``."""
    import keras

    from kerasbert.models.encoder import BertEncoder
    from kerasbert.checkpoints.loader import save_encoder

    keras.utils.set_random_seed(seed)
    encoder = BertEncoder(vocabulary_size=len(VOCAB), num_layers=2, num_heads=2, hidden_dim=8, intermediate_dim=16,
                          max_sequence_length=MAX_LENGTH)
    save_encoder(encoder, folder, VOCAB)
    return Path(folder)


_SESSION = {}  # "checkpoint" -> folder; (task, head) -> trained head: once per test process


def session_checkpoint(tmp_path_factory):
    """The tiny checkpoint of this test process (written once)."""
    if "checkpoint" not in _SESSION:
        _SESSION["checkpoint"] = tiny_checkpoint(tmp_path_factory.mktemp("tiny_checkpoint")).resolve()
    return _SESSION["checkpoint"]


def _task(name):
    import importlib

    module, attr = {"ner": ("kerasbert_apps.ner.train", "NER"), "triples": ("kerasbert_apps.triples.train", "TRIPLES")}[name]
    return getattr(importlib.import_module(module), attr)


def _loader(name):
    import importlib

    return importlib.import_module(f"kerasbert_apps.{name}").load


def kit_heads(task):
    """``[(task, name)]`` of the kit's own heads of ``task``, in ``--head`` order."""
    from kerasbert_apps.base import heads

    return [(task, head.name) for head in heads.heads(task) if heads.is_builtin(head)]


def trained_head(task_name, name, tmp_path_factory, options=None):
    """A tiny training run of the head ``name`` of ``task_name`` on the tiny
    checkpoint, then its model shaken and saved; once per test process.
    ``options``: the head's training options (over :data:`SMALL`)."""
    key = (task_name, name)
    if key not in _SESSION:
        _SESSION[key] = _train(task_name, name, tmp_path_factory, options or {})
    return _SESSION[key]


def _train(task_name, name, tmp_path_factory, options):
    from kerasbert_apps.base import heads

    task = _task(task_name)
    tmp = tmp_path_factory.mktemp(f"{task_name}_{name}")
    for split, n, seed in (("train", 40, 0), ("dev", 12, 1)):
        (tmp / f"{split}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in toy_records(task_name, n, seed)),
                                           encoding="utf-8")
    fields = {f.name for f in dataclasses.fields(task.train_settings)}
    head_settings = heads.get(task_name, name).settings
    own = {f.name for f in dataclasses.fields(head_settings)} if head_settings else set()
    given = {**SMALL, **{k: v for k, v in FIXED.items() if k in own}, **options}
    settings = task.train_settings(
        checkpoint=str(session_checkpoint(tmp_path_factory)), train=str(tmp / "train.jsonl"),
        dev=str(tmp / "dev.jsonl"), output=str(tmp / "run"), epochs=1, batch_size=8, max_length=MAX_LENGTH, seed=7,
        head=name, **{k: v for k, v in given.items() if k in fields})
    metrics = task.train(settings)
    pipeline = _non_default(_loader(task_name)(tmp / "run"))
    for seed in range(4):  # shaken again while it predicts little
        _shake(pipeline, seed)
        rows = pipeline.output_rows(TEXTS)
        if _count(rows) > 40:
            break
    pipeline.save(tmp / "shaken")
    assert _count(rows) > 20, f"{name}: the shaken model predicts too little to compare"
    return SimpleNamespace(task=task, name=name, head=heads.get(task_name, name), tmp=tmp, settings=settings,
                           metrics=metrics, pipeline=pipeline, rows=rows, folder=tmp / "shaken")


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


def _non_default(pipeline):
    """The pipeline with its decoding settings away from their defaults, so
    that every check also shows that they travel (into the saved folder, the
    exports, the JAX predict): a score temperature of 1.7 (NER heads with
    one) and a decision threshold of -0.5 (heads with one: the span heads),
    every triple threshold lowered to 0.4 (triple heads)."""
    if hasattr(pipeline, "set_temperature"):
        pipeline.set_temperature(1.7)
        if hasattr(pipeline, "set_threshold"):
            pipeline.set_threshold(-0.5)
        return pipeline
    if hasattr(pipeline, "with_thresholds"):
        return pipeline.with_thresholds({key: 0.4 for key in pipeline.thresholds})
    return pipeline


def _close(ours, theirs, atol, where=""):
    """Output rows equal: numbers within ``atol``, everything else exactly."""
    assert len(ours) == len(theirs), where
    for i, (a, b) in enumerate(zip(ours, theirs)):
        assert a.keys() == b.keys(), where
        for key in a:
            if a[key] and isinstance(a[key][0], float):
                np.testing.assert_allclose(a[key], b[key], atol=atol, err_msg=f"{where} text {i} {key}")
            else:
                assert a[key] == b[key], f"{where} text {i} {key}: {TEXTS[i][:60]!r}"


def _without_scores(result):
    """A ``predict`` result with its entities' scores left out."""
    return {**result, "entities": [{k: v for k, v in e.items() if k != "score"} for e in result["entities"]]}


def _model_inputs(model, windows):
    """The model's inputs for these windows: the encoder's from the windows,
    any other (CasRel's training input ``subject_span``) zeros."""
    rows = len(windows["token_ids"])
    return {name: windows[name] if name in windows else np.zeros([rows, *tensor.shape[1:]], tensor.dtype)
            for name, tensor in model.input.items()}


def lora_pipeline(trained, checkpoint, rank=2, seed=2):
    """A pipeline of ``trained``'s head with LoRA adapters of rank ``rank``
    on ``checkpoint``, as a ``--lora-rank`` training run holds it when it
    saves: the model built, the adapters enabled and compiled for training
    (the run's optimizer and schedule attached to the model), without the
    training; the adapters random so that they count."""
    import keras

    from kerasbert.training.fit import compile_for_training
    from kerasbert.checkpoints.loader import load_encoder
    from kerasbert.layers.lora import enable_lora

    cls = trained.head.pipeline_class()
    keras.utils.set_random_seed(6)
    model = cls.build_model(load_encoder(str(checkpoint)), trained.pipeline.labels, trained.settings)
    rng = np.random.default_rng(seed)
    for layer in enable_lora(model.encoder, rank):
        layer.lora_kernel_b.assign(rng.normal(0, 0.3, layer.lora_kernel_b.shape))
    compile_for_training(model, 4, trained.settings, cls.head_prefix)
    pipeline = cls.for_training(model, trained.pipeline.tokenizer, trained.pipeline.labels, trained.settings)
    pipeline.lora = {"rank": rank, "checkpoint": str(Path(checkpoint).resolve())}
    return pipeline


#: The fresh TensorFlow process of each task: first it serves the text
#: exports importing only TensorFlow and TF-Text (as TF Serving does), then
#: -- nothing of kerasbert imported yet -- runs ``kerasbert TASK predict``
#: on every LoRA folder (as a user's first command after a ``--lora-rank`` run).
FRESH_PROCESS = r"""
import contextlib, io, json, sys
import tensorflow as tf
import tensorflow_text  # noqa: F401  (registers the TF-Text op, as TF Serving links it)
job = json.load(open(sys.argv[1], encoding="utf-8"))
texts = job["texts"]
served = []
for path in job["exports"]:
    serve = tf.saved_model.load(path).signatures["serving_default"]
    rows = []
    for b in range(0, len(texts), 16):
        got = {k: v.numpy() for k, v in serve(text=tf.constant(texts[b:b + 16], tf.string)).items()}
        for i in range(len(texts[b:b + 16])):
            n = int(got["count"][i])
            rows.append({k: [x.decode("utf-8") if isinstance(x, bytes) else x for x in v[i, :n].tolist()]
                         for k, v in got.items() if k != "count"})
    served.append(rows)
ours = [m for m in sys.modules if m.split(".")[0] in ("kerasbert", "kerasbert_apps")]
predicted = []
from kerasbert.cli import main

for folder in job["lora"]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            status = main([job["task"], "predict", "--model", folder, job["lora_texts"]])
        except Exception as error:  # reported per folder
            status, err = repr(error), io.StringIO(repr(error))
    predicted.append({"status": status, "stdout": out.getvalue(), "stderr": err.getvalue()[-2000:]})
json.dump({"served": served, "imported_before": ours, "lora": predicted}, open(sys.argv[2], "w", encoding="utf-8"),
          ensure_ascii=False)
"""

JAX_PREDICT = r"""
import json, os, sys
os.environ["KERAS_BACKEND"] = "jax"
import keras
assert keras.backend.backend() == "jax"
import importlib
from kerasbert_apps.ner.examples import Example

load = importlib.import_module("kerasbert_apps." + sys.argv[1]).load
texts = json.load(open(sys.argv[2], encoding="utf-8"))
for folder in sys.argv[3:]:
    pipeline = load(folder)
    out = {"rows": pipeline.output_rows(texts, batch_size=16)}
    if hasattr(pipeline, "score_outcomes"):  # calibration's pass, on the host
        scores_at, _ = pipeline.score_outcomes([Example(t, [], "jax") for t in texts], batch_size=16)
        out["outcomes"] = scores_at(1.3).tolist()
    print("OUT " + json.dumps(out, ensure_ascii=False), flush=True)
"""

LISTING = r"""
import json, sys
from kerasbert_apps.base import heads

names = {task: list(heads.names(task)) for task in heads.TASKS}
print(json.dumps({"names": names, "modules": sorted(sys.modules)}))
"""


def _require_module(name):
    """``name`` importable, or the test skips -- and fails where ``CI`` is set, so that a missing
    package never hides a check there (``pytest.importorskip`` would skip silently)."""
    import importlib.util

    if importlib.util.find_spec(name) is None:
        message = f"needs {name} (pip install {name})"
        pytest.fail(message) if os.environ.get("CI") else pytest.skip(message)


def _env():
    return dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")


class HeadContract:
    """The head contract as a pytest test class (see the module docstring):
    subclass it with ``heads`` set to the ``(task, head name)`` pairs to
    check; pytest collects the subclass (name it ``Test...``)."""

    #: ``(task, head name)`` of the heads the checks run on.
    heads = ()
    #: Training options of the tiny run (over :data:`SMALL`), e.g. ``{"my_size": 8}``.
    train_options = {}

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if not any(task == "ner" for task, _ in cls.heads):
            cls.test_ner_select_measures_the_head_or_refuses_it = None  # an NER command

    def pytest_generate_tests(self, metafunc):
        if "trained" in metafunc.fixturenames:
            params = list(self.heads)
            if metafunc.function.__name__ == "test_ner_select_measures_the_head_or_refuses_it":
                params = [p for p in params if p[0] == "ner"]
            metafunc.parametrize("trained", params, ids=[f"{t}-{h}" for t, h in params], indirect=True,
                                 scope="class")

    @pytest.fixture(scope="class")
    @classmethod
    def trained(cls, request, tmp_path_factory):
        """The head's tiny training run, shaken and saved (:func:`trained_head`)."""
        return trained_head(*request.param, tmp_path_factory, cls.train_options)

    @classmethod
    def _every(cls, task, tmp_path_factory):
        return [trained_head(t, h, tmp_path_factory, cls.train_options) for t, h in cls.heads if t == task]

    @classmethod
    def _tasks(cls):
        return list(dict.fromkeys(task for task, _ in cls.heads))

    @pytest.fixture(scope="class")
    @classmethod
    def fresh(cls, tmp_path_factory):
        """Per task: the float32 and bfloat16 text exports of every head and
        the rows they should give, and every head's LoRA folder, then ONE
        fresh process (:data:`FRESH_PROCESS`) serving the exports and running
        ``predict`` on the LoRA folders."""
        out = {}
        for task in cls._tasks():
            tmp = tmp_path_factory.mktemp(f"fresh_{task}")
            every = cls._every(task, tmp_path_factory)
            exports, expected = [], []
            for trained in every:
                half = trained.pipeline.with_precision("bfloat16")
                for pipeline, precision, atol in ((trained.pipeline, "float32", 2e-4), (half, "bfloat16", 1e-3)):
                    exports.append(pipeline.export(tmp / f"{trained.name}-{precision}"))
                    rows = trained.rows if pipeline is trained.pipeline else pipeline.output_rows(TEXTS)
                    expected.append((trained, pipeline, rows, atol, f"{trained.name} {precision}"))
                lora_pipeline(trained, session_checkpoint(tmp_path_factory)).save(tmp / f"lora-{trained.name}")
            lora_texts = [t for t in TEXTS[:6] if t.strip()]
            (tmp / "lora_texts.txt").write_text("".join(t + "\n" for t in lora_texts), encoding="utf-8")
            job = {"task": task, "texts": TEXTS, "exports": [str(p) for p in exports],
                   "lora": [str(tmp / f"lora-{t.name}") for t in every], "lora_texts": str(tmp / "lora_texts.txt")}
            (tmp / "job.json").write_text(json.dumps(job, ensure_ascii=False), encoding="utf-8")
            (tmp / "fresh.py").write_text(FRESH_PROCESS, encoding="utf-8")
            run = subprocess.run([sys.executable, str(tmp / "fresh.py"), str(tmp / "job.json"), str(tmp / "out.json")],
                                 capture_output=True, text=True, env=_env(), cwd=tmp)
            assert run.returncode == 0, run.stderr[-3000:]
            out[task] = SimpleNamespace(every=every, exports=exports, expected=expected, lora_texts=lora_texts,
                                        **json.loads((tmp / "out.json").read_text(encoding="utf-8")))
        return out

    # --------------------------------------------------------------------- the checks

    def test_listing_the_heads_imports_no_model_code(self):
        """Listing the heads (what ``--help`` does) in a fresh process
        finds every head here, and imports neither TensorFlow / Keras / JAX,
        nor any model, pipeline or decoding module, nor any module of a
        head's package below the one that registers it."""
        from kerasbert_apps.base import heads

        run = subprocess.run([sys.executable, "-c", LISTING], capture_output=True, text=True, env=_env())
        assert run.returncode == 0, run.stderr[-3000:]
        listed = json.loads(run.stdout.splitlines()[-1])
        heavy = [m for m in listed["modules"] if m.split(".")[0] in ("tensorflow", "keras", "jax")
                 or m.endswith((".model", ".pipeline", ".decode"))]
        assert heavy == [], heavy[:10]
        for task, name in self.heads:
            assert name in listed["names"][task], (task, name)
            package = heads.get(task, name).pipeline.partition(":")[0].rpartition(".")[0]
            below = [m for m in listed["modules"] if m.startswith(package + ".")]
            assert below == [], f"listing the heads imported {below[:5]}"

    def test_training_records_the_head(self, trained):
        from kerasbert_apps.base import heads

        model = trained.tmp / "run" / "model"
        saved = json.loads((model / trained.head.settings_file).read_text())
        assert saved["head"] == trained.name
        assert heads.head_of(trained.task.name, trained.tmp / "run").name == trained.name
        assert trained.pipeline.head_name == trained.name
        assert isinstance(trained.pipeline, trained.head.pipeline_class())
        assert json.loads((trained.tmp / "run" / "metrics.json").read_text()) == json.loads(json.dumps(trained.metrics))

    def test_save_load_round_trip(self, trained):
        back = _loader(trained.task.name)(trained.folder)  # the task's one loader
        assert type(back) is type(trained.pipeline) and back.settings() == trained.pipeline.settings()
        assert back.output_rows(TEXTS) == trained.rows
        assert back.predict(TEXTS) == trained.pipeline.predict(TEXTS)

    def test_text_exports_in_a_fresh_process_give_what_predict_gives(self, fresh):
        """float32 and bfloat16 (the encoder's weights and matmuls; the head
        and decoding stay float32) exports of every head: each gives what
        the pipeline of its precision predicts, long texts decoded across
        windows, with core ops plus the allowed TF-Text op only, served by a
        process that imports only TensorFlow and TF-Text."""
        from kerasbert.serving.op_check import disallowed_ops
        from kerasbert.serving.op_check import list_ops
        from kerasbert.serving.op_check import non_core_ops

        for task, got in fresh.items():
            assert got.imported_before == [], got.imported_before[:10]  # only TensorFlow and TF-Text served
            for trained in got.every:
                assert trained.pipeline.with_precision("float32") is trained.pipeline
                windowed = [row for text, row in zip(TEXTS, trained.rows) if len(text.split()) > MAX_LENGTH]
                assert _count(windowed) > 0, trained.name  # decoded across windows
            assert len(got.exports) == len(got.served) == len(got.expected) > 0, (task, len(got.served))
            for path, served, (trained, pipeline, rows, atol, where) in zip(got.exports, got.served, got.expected):
                ops = list_ops(path)
                assert disallowed_ops(ops) == [] and non_core_ops(ops) == ["FastWordpieceTokenizeWithOffsets"], where
                if pipeline is not trained.pipeline:
                    assert {v.dtype for v in pipeline.model.encoder.weights} == {"bfloat16"}, where
                    head = [v for v in pipeline.model.weights if v.path.startswith(pipeline.head_prefix)]
                    assert head and {v.dtype for v in head} == {"float32"}, where
                _close(rows, served, atol, where)

    def test_ids_export_gives_the_ids_endpoint(self, trained, tmp_path):
        import tensorflow as tf

        from kerasbert.errors import KerasbertError
        from kerasbert.serving.op_check import list_ops
        from kerasbert.serving.op_check import non_core_ops

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
            with pytest.raises(KerasbertError, match="no part that compiles on its own"):
                pipeline.export(tmp_path / "head", jit_compile="head")

    def test_lora_folder_loads_back_and_merges(self, trained, tmp_path, tmp_path_factory):
        """A LoRA folder (adapters and head only) loads back to the same
        model and settings, and merges into a plain model computing the
        same. Decoding is a function of the model's outputs and the settings
        (which the round trip checks end to end), so the model's outputs
        for the windows of the texts are compared here, for every output."""
        from kerasbert.checkpoints.loader import load_encoder
        from kerasbert.layers.lora import lora_layers

        checkpoint = session_checkpoint(tmp_path_factory)
        cls = trained.head.pipeline_class()
        x = {"token_ids": np.array([[2, 7, 9, 11, 3]], np.int32), "segment_ids": np.zeros((1, 5), np.int32),
             "padding_mask": np.ones((1, 5), np.int32)}
        plain = np.asarray(load_encoder(str(checkpoint))(x)["sequence_output"])
        pipeline = lora_pipeline(trained, checkpoint)
        model = pipeline.model
        pipeline.save(tmp_path / "lora")
        assert not (tmp_path / "lora" / "model.keras").exists()  # adapters and head only
        back = _loader(trained.task.name)(tmp_path / "lora")
        assert type(back) is cls and back.lora == pipeline.lora and back.settings() == pipeline.settings()
        merged = back.merged()
        assert merged.lora is None and not lora_layers(merged.model.encoder)
        assert merged.settings() == pipeline.settings()
        want = np.asarray(model.encoder(x)["sequence_output"])
        assert np.abs(want - plain).max() > 1e-3  # the adapters count
        windows = _model_inputs(model, pipeline.windows_numpy(TEXTS[:8]))
        import keras

        theirs = keras.tree.flatten(model(windows))
        assert theirs
        for ours in (back, merged):
            np.testing.assert_allclose(np.asarray(ours.model.encoder(x)["sequence_output"]), want, atol=1e-4)
            outputs = keras.tree.flatten(ours.model(windows))
            assert len(outputs) == len(theirs), trained.name
            for i, (a, b) in enumerate(zip(outputs, theirs)):
                np.testing.assert_allclose(np.asarray(a, np.float64), np.asarray(b, np.float64), atol=1e-4,
                                           err_msg=f"{trained.name} LoRA output {i}")

    def test_lora_folders_answer_predict_in_a_fresh_process(self, fresh):
        """A LoRA folder of every head, as a ``--lora-rank`` run saves it
        (:func:`lora_pipeline`), answers ``kerasbert TASK predict`` in a
        fresh process that imported nothing of kerasbert before (one process
        per task runs it on every head's folder in turn: no ``predict``
        imports what training does, so a folder that needs training's
        classes fails whatever its place)."""
        for task, got in fresh.items():
            key = "entities" if task == "ner" else "triples"
            assert len(got.lora) == len(got.every)
            for trained, result in zip(got.every, got.lora):
                assert result["status"] == 0, f"{trained.name}: {result['stderr'].strip()}"
                rows = [json.loads(line) for line in result["stdout"].splitlines()]
                assert len(rows) == len(got.lora_texts) and all(key in row for row in rows), trained.name

    def test_predict_on_the_jax_backend_gives_what_tensorflow_gives(self, tmp_path_factory, tmp_path):
        """``predict`` of every head's (shaken, non-default) model on the
        JAX backend -- the model on the host between the same TensorFlow
        tokenizer and decoding -- gives what TensorFlow gives, and so do the
        scores calibration fits a temperature on, for a head with one."""
        _require_module("jax")
        from kerasbert_apps.ner.examples import Example

        (tmp_path / "texts.json").write_text(json.dumps(TEXTS, ensure_ascii=False), encoding="utf-8")
        for task in self._tasks():
            every = self._every(task, tmp_path_factory)
            run = subprocess.run([sys.executable, "-c", JAX_PREDICT, task, str(tmp_path / "texts.json"),
                                  *(str(t.folder) for t in every)], capture_output=True, text=True, env=_env(),
                                 cwd=tmp_path)
            assert run.returncode == 0, run.stderr[-3000:]
            outs = [json.loads(line[len("OUT "):]) for line in run.stdout.splitlines() if line.startswith("OUT ")]
            assert len(outs) == len(every)
            for trained, out in zip(every, outs):
                # JAX in batches of 16, TensorFlow's rows in batches of 32: a text's outputs do not depend on its batch
                _close(trained.rows, out["rows"], 2e-3, f"{trained.name} on JAX")
                if hasattr(trained.pipeline, "score_outcomes"):
                    scores_at, _ = trained.pipeline.score_outcomes([Example(t, [], "tf") for t in TEXTS],
                                                                   batch_size=16)
                    assert len(out["outcomes"]) > 20, trained.name
                    np.testing.assert_allclose(out["outcomes"], scores_at(1.3), atol=2e-3, err_msg=trained.name)

    def test_ner_select_measures_the_head_or_refuses_it(self, trained):
        """A head that declares a selection measure: ``ner select``'s
        analysis gives ``predict``'s entities (the serving path's windows and
        decoding) and, per text, a log P(best labelling) <= 0, an entity
        entropy and an encoder vector. A head that declares none is refused
        in one line before the pool is read."""
        from kerasbert.errors import KerasbertError
        from kerasbert_apps.ner import select

        tagger = trained.pipeline
        if not getattr(tagger, "selection_measure", None):
            with pytest.raises(KerasbertError, match=f"does not support the {trained.name} head") as error:
                select.select_texts(tagger, iter(()), budget=1)
            assert "\n" not in str(error.value)
            return
        found = select.analyse(tagger, TEXTS, batch_size=8)
        # the serving path's entities, windows and all (scores as predict rounds them, within one unit
        # of their last digit: the two paths batch the texts differently)
        predicted = tagger.predict(TEXTS)
        assert len(found) == len(predicted)
        for (result, *_), want in zip(found, predicted):
            assert _without_scores(result) == _without_scores(want), trained.name
            np.testing.assert_allclose([e["score"] for e in result["entities"]],
                                       [e["score"] for e in want["entities"]], atol=2e-4, err_msg=trained.name)
        for (result, log_best, entropy, vector), text in zip(found, TEXTS):
            assert log_best <= 1e-6 and np.isfinite(log_best), trained.name
            scores = [e["score"] for e in result["entities"]]  # rounded to 4 decimals: up to 1e-3 each in entropy
            assert entropy == pytest.approx(select.entity_entropy(scores), abs=1e-3 * max(len(scores), 1))
            assert vector.ndim == 1 and np.isfinite(vector).all() and (np.linalg.norm(vector) > 0) == bool(text.strip())
        # a longer text has more labellings to doubt: the longest (many windows) is the least sure
        longest = max(range(len(TEXTS)), key=lambda i: len(TEXTS[i]))
        assert min(range(len(TEXTS)), key=lambda i: found[i][1]) == longest, trained.name
