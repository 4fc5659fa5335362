"""The head contract as a pytest test class: :class:`HeadContract` (see the package's docstring,
:mod:`kerasbert_apps.testing`)."""

import json
import subprocess
import sys
from types import SimpleNamespace

import numpy as np
import pytest

from kerasbert_apps.testing.compare import TRIPLE_FIELDS
from kerasbert_apps.testing.compare import model_inputs
from kerasbert_apps.testing.compare import ner_ids_rows
from kerasbert_apps.testing.compare import predict_keys
from kerasbert_apps.testing.compare import same_answers
from kerasbert_apps.testing.compare import same_rows
from kerasbert_apps.testing.compare import triples_ids_rows
from kerasbert_apps.testing.compare import without_scores
from kerasbert_apps.testing.onnx_check import check_onnx_answers
from kerasbert_apps.testing.onnx_check import onnx_exports
from kerasbert_apps.testing.processes import FRESH_PROCESS
from kerasbert_apps.testing.processes import JAX_PREDICT
from kerasbert_apps.testing.processes import LISTING
from kerasbert_apps.testing.processes import fresh_env
from kerasbert_apps.testing.processes import require_module
from kerasbert_apps.testing.toy import MAX_LENGTH
from kerasbert_apps.testing.toy import TEXTS
from kerasbert_apps.testing.trained import count_found
from kerasbert_apps.testing.trained import loader
from kerasbert_apps.testing.trained import lora_pipeline
from kerasbert_apps.testing.trained import session_checkpoint
from kerasbert_apps.testing.trained import trained_head


class HeadContract:
    """The head contract as a pytest test class (see the package docstring, :mod:`kerasbert_apps.testing`):
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
        ``predict`` on the LoRA folders; beside them, what this process's
        LoRA pipelines predict (those that saved the folders)."""
        out = {}
        lora_texts = [t for t in TEXTS if t.strip()]
        for task in cls._tasks():
            tmp = tmp_path_factory.mktemp(f"fresh_{task}")
            every = cls._every(task, tmp_path_factory)
            exports, expected, lora_expected = [], [], []
            for trained in every:
                half = trained.pipeline.with_precision("bfloat16")
                for pipeline, precision, atol in ((trained.pipeline, "float32", 2e-4), (half, "bfloat16", 1e-3)):
                    exports.append(pipeline.export(tmp / f"{trained.name}-{precision}"))
                    rows = trained.rows if pipeline is trained.pipeline else pipeline.output_rows(TEXTS)
                    expected.append((trained, pipeline, rows, atol, f"{trained.name} {precision}"))
                lora = lora_pipeline(trained, session_checkpoint(tmp_path_factory))
                lora.save(tmp / f"lora-{trained.name}")
                lora_expected.append(lora.predict(lora_texts))
            (tmp / "lora_texts.txt").write_text("".join(t + "\n" for t in lora_texts), encoding="utf-8")
            job = {"task": task, "texts": TEXTS, "exports": [str(p) for p in exports],
                   "lora": [str(tmp / f"lora-{t.name}") for t in every], "lora_texts": str(tmp / "lora_texts.txt")}
            (tmp / "job.json").write_text(json.dumps(job, ensure_ascii=False), encoding="utf-8")
            (tmp / "fresh.py").write_text(FRESH_PROCESS, encoding="utf-8")
            run = subprocess.run([sys.executable, str(tmp / "fresh.py"), str(tmp / "job.json"), str(tmp / "out.json")],
                                 capture_output=True, text=True, env=fresh_env(), cwd=tmp)
            assert run.returncode == 0, run.stderr[-3000:]
            out[task] = SimpleNamespace(every=every, exports=exports, expected=expected, lora_texts=lora_texts,
                                        lora_expected=lora_expected,
                                        **json.loads((tmp / "out.json").read_text(encoding="utf-8")))
        return out

    @pytest.fixture(scope="class")
    @classmethod
    def onnx(cls, tmp_path_factory):
        """Per task: every head's ONNX export (or its refusal), run by ONE
        fresh process that imports no TensorFlow (:func:`~kerasbert_apps.testing.onnx_check.onnx_exports`)."""
        require_module("onnxruntime")
        require_module("tf2onnx")
        return {task: onnx_exports(task, cls._every(task, tmp_path_factory), TEXTS, tmp_path_factory.mktemp(f"onnx_{task}"))
                for task in cls._tasks()}

    # --------------------------------------------------------------------- the checks

    def test_listing_the_heads_imports_no_model_code(self):
        """Listing the heads (what ``--help`` does) in a fresh process
        finds every head here, and imports neither TensorFlow / Keras / JAX,
        nor any model, pipeline or decoding module, nor any module of a
        head's package below the one that registers it."""
        from kerasbert_apps.base import heads

        run = subprocess.run([sys.executable, "-c", LISTING], capture_output=True, text=True, env=fresh_env())
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
        back = loader(trained.task.name)(trained.folder)  # the task's one loader
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
                assert count_found(windowed) > 0, trained.name  # decoded across windows
            assert len(got.exports) == len(got.served) == len(got.expected) > 0, (task, len(got.served))
            for path, served, (trained, pipeline, rows, atol, where) in zip(got.exports, got.served, got.expected):
                ops = list_ops(path)
                assert disallowed_ops(ops) == [] and non_core_ops(ops) == ["FastWordpieceTokenizeWithOffsets"], where
                if pipeline is not trained.pipeline:
                    assert {v.dtype for v in pipeline.model.encoder.weights} == {"bfloat16"}, where
                    head = [v for v in pipeline.model.weights if v.path.startswith(pipeline.head_prefix)]
                    assert head and {v.dtype for v in head} == {"float32"}, where
                same_rows(rows, served, atol, where, texts=TEXTS)

    def test_ids_export_gives_what_predict_gives(self, trained, tmp_path):
        """The ``--input ids`` export, with core ops only, gives ``predict``'s
        answers. NER: its outputs, decoded by the head's own decoding in
        place of the model's (:func:`~kerasbert_apps.testing.compare.ner_ids_rows`),
        give every text's entities, long texts across windows. Triples: its
        triples, their token positions read as character offsets through the
        tokenizer's (:func:`~kerasbert_apps.testing.compare.triples_ids_rows`),
        are those of the texts that fit one window. ``--jit-compile head`` is
        refused in one line for a head without a compiled part."""
        import tensorflow as tf

        from kerasbert.errors import KerasbertError
        from kerasbert.serving.op_check import list_ops
        from kerasbert.serving.op_check import non_core_ops

        pipeline = trained.pipeline
        path = pipeline.export(tmp_path / "ids", input="ids")
        assert non_core_ops(list_ops(path)) == []
        loaded = tf.saved_model.load(str(path))
        signature = loaded.signatures["serving_default"]
        if trained.task.name == "ner":
            texts, want = TEXTS, trained.rows
            got = ner_ids_rows(pipeline, signature, texts)
        else:
            fits = ~pipeline.tokenizer(TEXTS, max_length=pipeline.max_length).truncated
            texts = [t for t, one in zip(TEXTS, fits) if one]
            want = [{k: row[k] for k in TRIPLE_FIELDS} for row, one in zip(trained.rows, fits) if one]
            got = triples_ids_rows(pipeline, signature, texts)
        assert count_found(want) > 10, f"{trained.name}: predict finds too little to compare"
        same_rows(got, want, 2e-4, f"{trained.name} ids export", texts=texts)
        if not pipeline.compiled_head:  # jit_compile="head" is refused before anything is traced
            with pytest.raises(KerasbertError, match="no part that compiles on its own"):
                pipeline.export(tmp_path / "head", jit_compile="head")

    def test_onnx_export_runs_without_tensorflow_and_gives_what_predict_gives(self, onnx):
        """Every head's ONNX export (``export --format onnx``), loaded by the
        task's one loader in a fresh process that imports none of TensorFlow,
        Keras, tf2onnx, TF-Text or JAX, gives the pipeline's output rows and
        ``predict`` results: the same entities / triples, long texts across
        windows, scores within 1e-3. A head that cannot be converted says so
        (its pipeline's ``no_onnx_export``, a sentence): its export is then
        refused in one line giving that reason, and this check holds it to
        that (:func:`~kerasbert_apps.testing.onnx_check.check_onnx_answers`)."""
        for task, got in onnx.items():
            assert got.heavy == [], got.heavy[:10]
            for trained, export, refused, answers in zip(got.every, got.exports, got.refused, got.heads):
                check_onnx_answers(trained, export, refused, answers, TEXTS)

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
        back = loader(trained.task.name)(tmp_path / "lora")
        assert type(back) is cls and back.lora == pipeline.lora and back.settings() == pipeline.settings()
        merged = back.merged()
        assert merged.lora is None and not lora_layers(merged.model.encoder)
        assert merged.settings() == pipeline.settings()
        want = np.asarray(model.encoder(x)["sequence_output"])
        assert np.abs(want - plain).max() > 1e-3  # the adapters count
        windows = model_inputs(model, pipeline.windows_numpy(TEXTS[:8]))
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
        (:func:`~kerasbert_apps.testing.trained.lora_pipeline`: its head predicts
        many entities / triples), answers ``kerasbert TASK predict`` in a fresh
        process that imported nothing of kerasbert before with what the
        pipeline that saved it predicts here: the same entities / triples,
        offsets and all, scores within 2e-4 (one process per task runs it on
        every head's folder in turn: no ``predict`` imports what training
        does, so a folder that needs training's classes fails whatever its place)."""
        for task, got in fresh.items():
            assert len(got.lora) == len(got.every) == len(got.lora_expected)
            for trained, result, want in zip(got.every, got.lora, got.lora_expected):
                assert result["status"] == 0, f"{trained.name}: {result['stderr'].strip()}"
                rows = [json.loads(line) for line in result["stdout"].splitlines()]
                assert count_found(want) > 0, f"{trained.name}: the LoRA pipeline predicts nothing to compare"
                same_answers(predict_keys(rows, want), want, 2e-4, f"{trained.name} LoRA folder in a fresh process")

    def test_predict_on_the_jax_backend_gives_what_tensorflow_gives(self, tmp_path_factory, tmp_path):
        """``predict`` of every head's (shaken, non-default) model on the
        JAX backend -- the model on the host between the same TensorFlow
        tokenizer and decoding -- gives what TensorFlow gives, and so do the
        scores calibration fits a temperature on, for a head with one."""
        require_module("jax")
        from kerasbert_apps.ner.examples import Example

        (tmp_path / "texts.json").write_text(json.dumps(TEXTS, ensure_ascii=False), encoding="utf-8")
        for task in self._tasks():
            every = self._every(task, tmp_path_factory)
            run = subprocess.run([sys.executable, "-c", JAX_PREDICT, task, str(tmp_path / "texts.json"),
                                  *(str(t.folder) for t in every)], capture_output=True, text=True, env=fresh_env(),
                                 cwd=tmp_path)
            assert run.returncode == 0, run.stderr[-3000:]
            outs = [json.loads(line[len("OUT "):]) for line in run.stdout.splitlines() if line.startswith("OUT ")]
            assert len(outs) == len(every)
            for trained, out in zip(every, outs):
                # JAX in batches of 16, TensorFlow's rows in batches of 32: a text's outputs do not depend on its batch
                same_rows(trained.rows, out["rows"], 2e-3, f"{trained.name} on JAX", texts=TEXTS)
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
            assert without_scores(result) == without_scores(want), trained.name
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
