"""NER export for TF Serving: the SavedModel gives what ``kerasbert ner predict``
gives, in a process that never imports kerasbert.

The tagger is a small random network on MiniLM's vocabulary with emission
biases pushed towards entity tags, so it predicts many entities of every
kind (``I-X`` without ``B-X``, adjacent entities, entities across windows):
a stricter check of the in-graph decoding than a trained model that mostly
says ``O``. ``max_length=16`` makes every longer sentence go through the
window merge. Its score temperature is 1.6, so the exports are checked to
carry it.
"""

import json
import os
import subprocess
import sys

import keras
import numpy as np
import pytest
import tensorflow as tf

import kerasbert
from kerasbert_apps.ner.readers import read_ner_file
from kerasbert_apps.ner.heads.bio.fused_bilstm import fused_bilstm
from kerasbert_apps.ner.heads.bio.fused_bilstm import graph_scorers
from kerasbert_apps.ner.heads.bio.model import NerModel
from kerasbert_apps.ner.heads.bio.pipeline import Tagger
from kerasbert_apps.ner.tags import bio_tags
from kerasbert.cli import main as cli_main
from kerasbert.models.encoder import BertEncoder
from kerasbert.errors import KerasbertError
from kerasbert.serving.saved_model import describe
from kerasbert.serving.saved_model import next_version
from kerasbert.serving.requests import predict_request
from kerasbert.serving.saved_model import read_warmup
from kerasbert.serving.requests import rest_body
from kerasbert.serving.saved_model import saved_model_node_count
from kerasbert.serving.rows import unpad
from kerasbert.serving.saved_model import write_version
from kerasbert.serving.op_check import disallowed_ops
from kerasbert.serving.op_check import list_ops
from kerasbert.serving.op_check import non_core_ops
from conftest import require_shared

LONG_TEXT = " ".join(f"Peter{i} met Acme in Paris, day {i * 7 % 31}." for i in range(400))[:10_000]
EDGE_CASES = ["", "   \t\n ", "😀🎉🚀", LONG_TEXT, "李白在北京", "Ｆｕｌｌｗｉｄｔｈ Ｔｏｋｙｏ"]


@pytest.fixture(scope="module")
def tagger(minilm_dir):
    tokenizer = kerasbert.load_tokenizer(minilm_dir)
    keras.utils.set_random_seed(7)
    encoder = BertEncoder(vocabulary_size=len(tokenizer.vocab), num_layers=1, num_heads=2, hidden_dim=16,
                          intermediate_dim=32, max_sequence_length=64)
    tags = bio_tags(["LOC", "ORG", "PER"])
    model = NerModel(encoder, len(tags), lstm_units=8)
    kernel, bias = model.emissions.get_weights()
    rng = np.random.default_rng(0)
    model.emissions.set_weights([rng.normal(0, 2.0, kernel.shape), bias + np.array([-1.0] + [0.5] * (len(tags) - 1))])
    return Tagger(model, tokenizer, tags, max_length=16, temperature=1.6)


@pytest.fixture(scope="module")
def sentences():
    conll = read_ner_file(require_shared("data", "conll2003", "eng.testb"))
    texts = [e.text for e in conll.examples[:200]]
    cluener = require_shared("data", "cluener2020", "dev.json")
    with open(cluener, encoding="utf-8") as f:
        texts += [json.loads(line)["text"] for line in list(f)[:20]]
    return texts + EDGE_CASES


@pytest.fixture(scope="module")
def exported(tagger, tmp_path_factory):
    base = tmp_path_factory.mktemp("exports") / "ner"
    text = tagger.export(base)
    ids = tagger.export(base, input="ids")
    return base, text, ids


FRESH_PROCESS = r"""
import json, sys
import tensorflow as tf
import tensorflow_text  # noqa: F401  (registers the TF-Text op, as TF Serving links it)
texts = json.load(open(sys.argv[2], encoding="utf-8"))
serve = tf.saved_model.load(sys.argv[1]).signatures["serving_default"]
step = int(sys.argv[4]) if len(sys.argv) > 4 else 64
out = {}
for b in range(0, len(texts), step):
    got = serve(text=tf.constant(texts[b:b + step], tf.string))
    for i in range(len(texts[b:b + step])):
        n = int(got["count"][i])
        out[b + i] = [
            {"start": int(got["start"][i, k]), "end": int(got["end"][i, k]), "type": got["type"][i, k].numpy().decode(),
             "text": got["mention"][i, k].numpy().decode(), "score": float(got["score"][i, k])}
            for k in range(n)
        ]
assert not any(m.split(".")[0] in ("kerasbert", "kerasbert_apps") for m in sys.modules), "imported more than TF and TF-Text"
json.dump([out[i] for i in range(len(texts))], open(sys.argv[3], "w", encoding="utf-8"), ensure_ascii=False)
"""


def _run_fresh(saved_model, texts, tmp_path, batch=64):
    (tmp_path / "texts.json").write_text(json.dumps(texts, ensure_ascii=False), encoding="utf-8")
    script = tmp_path / "serve.py"
    script.write_text(FRESH_PROCESS, encoding="utf-8")
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    subprocess.run([sys.executable, str(script), str(saved_model), str(tmp_path / "texts.json"), str(tmp_path / "out.json"),
                    str(batch)], check=True, env=env, cwd=tmp_path)
    return json.loads((tmp_path / "out.json").read_text(encoding="utf-8"))


def test_fresh_process_gives_what_ner_predict_gives(tagger, sentences, exported, tmp_path, capsys):
    _, text_export, _ = exported
    served = _run_fresh(text_export, sentences, tmp_path)

    model_dir = tmp_path / "model"
    tagger.save(model_dir)
    inputs = tmp_path / "in.jsonl"
    inputs.write_text("".join(json.dumps({"text": t}, ensure_ascii=False) + "\n" for t in sentences), encoding="utf-8")
    capsys.readouterr()
    assert cli_main(["ner", "predict", "--model", str(model_dir), str(inputs)]) == 0
    predicted = [json.loads(line) for line in capsys.readouterr().out.splitlines() if line.strip()]
    assert len(predicted) == len(served) == len(sentences)
    total = 0
    for text, ours, theirs in zip(sentences, predicted, served):
        assert [(e["start"], e["end"], e["type"], e["text"]) for e in ours["entities"]] == [
            (e["start"], e["end"], e["type"], e["text"]) for e in theirs
        ], text[:80]
        np.testing.assert_allclose([e["score"] for e in ours["entities"]], [e["score"] for e in theirs], atol=2e-4)
        for e in theirs:
            assert text[e["start"]:e["end"]] == e["text"]
        total += len(theirs)
    assert total > 1000  # the random tagger really does produce entities to compare
    # the temperature reached the export: at T = 1 the same entities score differently
    plain = Tagger.from_settings(tagger.model, tagger.tokenizer, {**tagger.settings(), "temperature": 1.0})
    at_one = [e["score"] for p in plain.predict(sentences[:20]) for e in p["entities"]]
    served_scores = [e["score"] for entities in served[:20] for e in entities]
    assert len(at_one) == len(served_scores) > 20
    assert np.abs(np.array(at_one) - served_scores).max() > 0.05
    long_text = sentences.index(EDGE_CASES[3])
    assert len(LONG_TEXT) == 10_000 and len(served[long_text]) > 50  # decoded across hundreds of windows


def test_jit_compiled_export_gives_what_predict_gives(tagger, sentences, tmp_path, capsys):
    """``export --jit-compile``: the model runs compiled by XLA on padded shapes
    (rows 1/2/4/8, widths in steps of 16), in a process without kerasbert; the
    same entities as the plain ``predict``, scores within 2e-4."""
    from kerasbert.serving.rows import JIT_ROW_BUCKETS

    model_dir = tmp_path / "model"
    tagger.save(model_dir)
    assert cli_main(["ner", "export", "--model", str(model_dir), "--output", str(tmp_path / "jit"), "--jit-compile"]) == 0
    assert "jit_compile: the model runs compiled by XLA" in capsys.readouterr().out
    path = tmp_path / "jit" / "1"
    assert describe(path)["jit_compile"] is True
    assert disallowed_ops(list_ops(path)) == []
    # max_length 16: one width bucket, each row bucket reached by a warmup request
    plain = len(read_warmup(path)) - len(JIT_ROW_BUCKETS)
    assert plain == len(tagger.warmup_texts) + 1
    assert [len(r.inputs["text"].string_val) for r in read_warmup(path)[plain:]] == list(JIT_ROW_BUCKETS)
    texts = sentences[:60] + EDGE_CASES
    served = _run_fresh(path, texts, tmp_path)
    predicted = tagger.predict(texts)
    assert sum(len(e) for e in served) > 300
    for text, ours, theirs in zip(texts, predicted, served):
        assert [(e["start"], e["end"], e["type"]) for e in ours["entities"]] == [
            (e["start"], e["end"], e["type"]) for e in theirs], text[:80]
        np.testing.assert_allclose([e["score"] for e in ours["entities"]], [e["score"] for e in theirs], atol=2e-4)
    with pytest.raises(KerasbertError, match="text exports only"):
        tagger.export(tmp_path / "ids", input="ids", jit_compile=True)


def test_op_list_is_core_tensorflow_plus_allowed_tf_text(exported):
    _, text_export, ids_export = exported
    text_ops = list_ops(text_export)
    assert disallowed_ops(text_ops) == []
    assert non_core_ops(text_ops) == ["FastWordpieceTokenizeWithOffsets"]
    assert {"UnicodeDecodeWithOffsets", "UnicodeDecode"} & set(text_ops)
    assert non_core_ops(list_ops(ids_export)) == []
    assert describe(text_export)["ops"] == sorted(text_ops)


#: The text export's serving graph (this tagger: 1 layer, BiLSTM-CRF, windows of 16), in nodes
#: (kerasbert.serving.saved_model.saved_model_node_count): what loading and the first call pay, and what the
#: executor runs per request. Raise it only for a reason, in the same commit.
NER_SERVING_NODES = 2100


def test_the_serving_graph_stays_small(exported):
    _, text_export, _ = exported
    nodes = saved_model_node_count(text_export)
    assert nodes["serving"] <= NER_SERVING_NODES, nodes


def test_edge_cases_return_well_formed_outputs(exported):
    _, text_export, _ = exported
    serve = tf.saved_model.load(str(text_export)).signatures["serving_default"]
    out = serve(text=tf.constant(EDGE_CASES))
    count = out["count"].numpy()
    width = out["start"].shape[1]
    assert count.shape == (len(EDGE_CASES),) and width == count.max()
    for name in ("start", "end", "type", "mention", "score"):
        assert out[name].shape == (len(EDGE_CASES), width)
    assert count[0] == 0 and count[1] == 0  # empty and whitespace-only
    for i, n in enumerate(count):
        assert (out["start"][i, n:].numpy() == -1).all() and (out["type"][i, n:].numpy() == b"").all()
        assert (out["start"][i, :n].numpy() < out["end"][i, :n].numpy()).all()
        assert (out["end"][i, :n].numpy() <= len(EDGE_CASES[i])).all()
    rows = unpad(out)
    assert [len(r["start"]) for r in rows] == count.tolist()
    assert all(isinstance(t, str) for r in rows for t in r["type"])
    assert all(EDGE_CASES[i][s:e] == m for i, r in enumerate(rows) for s, e, m in zip(r["start"], r["end"], r["mention"]))
    empty = serve(text=tf.constant([], tf.string))
    assert empty["count"].shape == (0,) and empty["start"].shape[0] == 0 and empty["type"].dtype == tf.string


def test_saved_model_cli_shows_the_signature(exported):
    _, text_export, _ = exported
    cli = os.path.join(os.path.dirname(sys.executable), "saved_model_cli")
    shown = subprocess.run([cli, "show", "--dir", str(text_export), "--all"], capture_output=True, text=True,
                           env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"), check=True).stdout
    assert "signature_def['serving_default']" in shown
    for name in ("inputs['text']", "outputs['start']", "outputs['end']", "outputs['type']", "outputs['score']",
                 "outputs['count']", "outputs['mention']"):
        assert name in shown


def test_rest_body_grpc_request_and_warmup_match_the_signature(exported):
    _, text_export, ids_export = exported
    serve = tf.saved_model.load(str(text_export)).signatures["serving_default"]
    spec = serve.structured_input_signature[1]
    texts = ["Alice lives in Paris.", "李白在北京"]

    body = json.loads(json.dumps(rest_body(texts)))
    assert body["signature_name"] == "serving_default"
    assert all(set(instance) == set(spec) for instance in body["instances"])
    from_rest = serve(text=tf.constant([instance["text"] for instance in body["instances"]]))

    request = predict_request({"text": texts})
    assert set(request.inputs) == set(spec)
    for name, proto in request.inputs.items():
        assert tf.dtypes.as_dtype(proto.dtype) == spec[name].dtype
        assert spec[name].shape.is_compatible_with([d.size for d in proto.tensor_shape.dim])
    from_grpc = serve(**{k: tf.constant(tf.make_ndarray(v)) for k, v in request.inputs.items()})
    for name in from_rest:
        np.testing.assert_array_equal(from_rest[name].numpy(), from_grpc[name].numpy())

    for export in (text_export, ids_export):
        function = tf.saved_model.load(str(export)).signatures["serving_default"]
        signature = function.structured_input_signature[1]
        warmup = read_warmup(export)
        assert len(warmup) >= 3
        for request in warmup:
            assert request.model_spec.signature_name == "serving_default"
            assert set(request.inputs) == set(signature)
            function(**{k: tf.constant(tf.make_ndarray(v)) for k, v in request.inputs.items()})


def test_ids_export_gives_the_models_tags(tagger, exported):
    _, _, ids_export = exported
    serve = tf.saved_model.load(str(ids_export)).signatures["serving_default"]
    batch = tagger.tokenizer(["Alice lives in Paris.", "Bob"], max_length=16)
    got = serve(**{k: tf.constant(v) for k, v in batch.inputs.items()})
    want = tagger.model.predict_on_batch(batch.inputs)
    mask = batch.padding_mask.astype(bool)
    np.testing.assert_array_equal(got["tags"].numpy()[mask], np.asarray(want["tags"])[mask])
    np.testing.assert_allclose(got["potentials"].numpy()[mask], np.asarray(want["potentials"])[mask], atol=1e-5)
    assert describe(ids_export)["tags"] == tagger.tags
    assert "BlockLSTMV2" in list_ops(ids_export)  # the BiLSTM runs as the fused kernel


@pytest.mark.parametrize("rows", [1, 3, 8, 9, 21])
def test_by_length_gives_each_row_what_one_call_gives(rows):
    """Length-sorted groups of 8 (or one direct call for up to 8 rows): each
    row's outputs as if the whole batch ran at once, in the input order."""
    from kerasbert.serving.rows import by_length

    rng = np.random.default_rng(rows)
    lengths = rng.integers(1, 12, rows)
    mask = (np.arange(12)[None, :] < lengths[:, None]).astype(np.int32)
    inputs = {"token_ids": tf.constant((rng.integers(1, 50, (rows, 12)) * mask).astype(np.int32)),
              "padding_mask": tf.constant(mask)}

    def fn(x):  # per row, position by position: a running sum over the real tokens
        values = tf.cast(x["token_ids"] * x["padding_mask"], tf.float32)
        return {"sum": tf.cumsum(values, axis=1), "both": tf.stack([values, -values], -1)}

    got = tf.function(lambda x: by_length(fn, x))(inputs)
    want = fn(inputs)
    for key in want:
        np.testing.assert_allclose(got[key].numpy() * mask.reshape(mask.shape + (1,) * (want[key].ndim - 2)),
                                   want[key].numpy() * mask.reshape(mask.shape + (1,) * (want[key].ndim - 2)))
        assert got[key].shape == want[key].shape


def test_fused_bilstm_computes_the_keras_layer():
    keras.utils.set_random_seed(3)
    layer = keras.layers.Bidirectional(keras.layers.LSTM(6, return_sequences=True))
    x = np.random.default_rng(1).normal(size=(4, 9, 5)).astype("float32")
    lengths = np.array([9, 4, 1, 6])
    mask = np.arange(9)[None, :] < lengths[:, None]
    want = np.asarray(layer(x, mask=mask))
    got = fused_bilstm(layer)(tf.constant(x), tf.constant(mask)).numpy()
    np.testing.assert_allclose(got[mask], want[mask], atol=1e-5)
    assert not got[~mask].any()
    # Layers it does not cover are left to Keras.
    assert fused_bilstm(keras.layers.Bidirectional(keras.layers.LSTM(6, return_sequences=True), merge_mode="sum")) is None
    assert fused_bilstm(keras.layers.Bidirectional(keras.layers.LSTM(6, return_sequences=True, activation="relu"))) is None
    assert fused_bilstm(keras.layers.Bidirectional(keras.layers.GRU(6, return_sequences=True))) is None
    mixed = keras.layers.Bidirectional(keras.layers.LSTM(6, return_sequences=True, dtype="mixed_bfloat16"))
    assert fused_bilstm(mixed) is None


def _compiled_functions(function_library):
    return [f.signature.name for f in function_library.function
            if "_XlaMustCompile" in f.attr and f.attr["_XlaMustCompile"].b]


def test_the_head_compiled_export_gives_what_predict_gives(tagger, sentences, exported, tmp_path, capsys):
    """``export --jit-compile head``: the head after the encoder (BiLSTM,
    emissions, Viterbi) is an XLA-compiled function, the encoder is not; its
    warmup requests reach every padded shape; in a process without kerasbert,
    one text per request (the compiled head: a batch of one row group), it
    gives what ``predict`` (the plain graph, no XLA) gives. A bigger batch
    runs the plain graph's head (tested with the plain export)."""
    from tensorflow.core.protobuf import saved_model_pb2

    from kerasbert.serving.rows import JIT_ROW_BUCKETS

    model_dir = tmp_path / "model"
    tagger.save(model_dir)
    assert cli_main(["ner", "export", "--model", str(model_dir), "--output", str(tmp_path / "jit"),
                     "--jit-compile", "head"]) == 0
    out = capsys.readouterr().out
    assert "the head after the encoder runs compiled by XLA" in out and "--xla_cpu_compilation_enabled=true" in out
    path = tmp_path / "jit" / "1"
    assert describe(path)["jit_compile"] == "head"
    assert disallowed_ops(list_ops(path)) == []
    saved = saved_model_pb2.SavedModel()
    saved.ParseFromString((path / "saved_model.pb").read_bytes())
    library = saved.meta_graphs[0].graph_def.library
    compiled = [f for f in library.function if "_XlaMustCompile" in f.attr and f.attr["_XlaMustCompile"].b]
    assert compiled and not any(n.op.startswith("_FusedMatMul") or n.op == "MatMul" and "encoder" in n.name
                                for f in compiled for n in f.node_def)
    assert [len(r.inputs["text"].string_val) for r in read_warmup(path)][-len(JIT_ROW_BUCKETS):] == list(JIT_ROW_BUCKETS)
    for plain in (exported[1], ):  # the plain export and predict compile nothing
        saved.ParseFromString((plain / "saved_model.pb").read_bytes())
        assert not _compiled_functions(saved.meta_graphs[0].graph_def.library)
    assert not _compiled_functions(tagger.serving_function_of().get_concrete_function().graph.as_graph_def().library)
    texts = sentences[:60] + EDGE_CASES
    served = _run_fresh(path, texts, tmp_path, batch=1)
    assert sum(len(e) for e in served) > 300
    for text, ours, theirs in zip(texts, tagger.predict(texts), served):
        assert [(e["start"], e["end"], e["type"]) for e in ours["entities"]] == [
            (e["start"], e["end"], e["type"]) for e in theirs], text[:80]
        np.testing.assert_allclose([e["score"] for e in ours["entities"]], [e["score"] for e in theirs], atol=2e-4)


@pytest.mark.parametrize("use_lstm,use_crf", [(True, True), (False, True), (True, False)])
def test_the_compiled_head_computes_the_model(use_lstm, use_crf):
    """graph_scorers' compiled head on rows of several lengths (padded to its
    shapes, masked) gives the Keras model's tags and emission scores."""
    keras.utils.set_random_seed(5)
    encoder = BertEncoder(vocabulary_size=50, num_layers=1, num_heads=2, hidden_dim=16, intermediate_dim=32,
                          max_sequence_length=64)
    model = NerModel(encoder, 7, use_lstm=use_lstm, lstm_units=6, use_crf=use_crf)
    lengths = np.array([9, 4, 2, 7, 3])
    mask = (np.arange(9)[None, :] < lengths[:, None]).astype("int32")
    rows = {"token_ids": np.random.default_rng(2).integers(1, 50, (5, 9)).astype("int32") * mask,
            "segment_ids": np.zeros((5, 9), "int32"), "padding_mask": mask}
    want = model(rows, training=False)
    got = tf.function(graph_scorers(model, compiled_head=True)[1])({k: tf.constant(v) for k, v in rows.items()})
    real = mask.astype(bool)
    np.testing.assert_array_equal(got["tags"].numpy()[real], np.asarray(want["tags"])[real])
    np.testing.assert_allclose(got["potentials"].numpy()[real], np.asarray(want["potentials"])[real], atol=1e-5)


def test_versions_are_numbered_atomic_and_never_overwritten(exported, tmp_path):
    base, text_export, ids_export = exported
    assert (text_export.name, ids_export.name) == ("1", "2") and next_version(base) == 3
    with pytest.raises(KerasbertError, match="never overwritten"):
        write_version(base, 1, lambda d: None)

    def interrupted(directory):
        (directory / "saved_model.pb").write_bytes(b"half")
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        write_version(base, None, interrupted)
    assert sorted(p.name for p in base.iterdir()) == ["1", "2"]  # no version 3, no leftovers




def test_the_printed_docker_and_curl_lines_are_shell_quoted(tmp_path, capsys):
    """An export base with spaces and a quote in its path: the printed
    `docker run` line, split as a shell splits it, mounts that folder (it
    used to break into several arguments) under a model name TF Serving's
    image takes (the test after this one runs its entry point)."""
    import shlex

    from kerasbert_apps.base.cli import print_export

    base = tmp_path / "my models" / "Bob's tagger"
    version = base / "1"
    (version / "assets.extra").mkdir(parents=True)
    (version / "assets.extra" / "kerasbert.json").write_text(json.dumps(
        {"inputs": {"text": {"dtype": "string", "shape": [None]}}, "outputs": {}, "ops": [], "input_mode": "text"}))
    print_export(str(version))
    lines = capsys.readouterr().out.splitlines()
    docker = shlex.split(next(line for line in lines if "docker run" in line).split("serve:", 1)[1])
    assert docker[docker.index("-v") + 1] == f"{base}:/models/bob_s_tagger"
    assert docker[docker.index("-e") + 1] == "MODEL_NAME=bob_s_tagger"
    assert docker[-1] == "tensorflow/serving"
    curl = shlex.split(next(line for line in lines if "curl" in line).split("then:", 1)[1])
    assert curl[3] == "localhost:8501/v1/models/bob_s_tagger:predict"


#: What the stock ``tensorflow/serving`` image runs (its ``tf_serving_entrypoint.sh``; ``MODEL_BASE_PATH=/models``
#: in its environment): the model name goes through the shell unquoted.
ENTRYPOINT = ("tensorflow_model_server --port=8500 --rest_api_port=8501 --model_name=${MODEL_NAME} "
              "--model_base_path=${MODEL_BASE_PATH}/${MODEL_NAME}")


def test_the_model_name_and_the_printed_serving_lines_work_with_the_stock_image(tagger, tmp_path, capsys):
    """An export to a folder whose name has spaces and letters outside ASCII: the printed ``docker
    run`` line gives the image's entry point one ``--model_name`` and one ``--model_base_path``,
    the folder mounted there; the warmup requests and the ``curl`` line name the same model. (The
    folder's own name, ``My NER model 東京``, reached the server as several arguments.)"""
    import shlex

    tagger.save(tmp_path / "model")
    base = tmp_path / "exports" / "My NER model 東京"
    capsys.readouterr()
    assert cli_main(["ner", "export", "--model", str(tmp_path / "model"), "--output", str(base)]) == 0
    lines = capsys.readouterr().out.splitlines()
    docker = shlex.split(next(line for line in lines if "docker run" in line).split("serve:", 1)[1])
    source, _, mounted = docker[docker.index("-v") + 1].rpartition(":")
    assert source == str(base)
    variable, _, name = docker[docker.index("-e") + 1].partition("=")
    assert variable == "MODEL_NAME" and name == "my_ner_model"
    shell = subprocess.run(["bash", "-c", "printf '%s\\n' " + ENTRYPOINT], capture_output=True, text=True, check=True,
                           env={"MODEL_NAME": name, "MODEL_BASE_PATH": "/models", "PATH": os.environ["PATH"]})
    assert shell.stdout.splitlines() == ["tensorflow_model_server", "--port=8500", "--rest_api_port=8501",
                                         f"--model_name={name}", f"--model_base_path={mounted}"]
    assert {request.model_spec.name for request in read_warmup(base / "1")} == {name}
    assert describe(base / "1")["model_name"] == name
    curl = shlex.split(next(line for line in lines if "curl" in line).split("then:", 1)[1])
    assert curl[3] == f"localhost:8501/v1/models/{name}:predict"


@pytest.mark.parametrize("folder, name", [("ner", "ner"), ("My NER model 東京", "my_ner_model"), ("東京", "model"),
                                          ("--Model.v2 (final)", "model.v2_final"), ("a/b c", "b_c")])
def test_the_model_name_is_the_folders_name_as_tf_serving_takes_it(tmp_path, folder, name):
    from kerasbert_apps.base.export import check_model_name
    from kerasbert_apps.base.export import serving_model_name

    assert serving_model_name(tmp_path / folder) == name
    assert check_model_name(name) == name
    with pytest.raises(KerasbertError, match="model_name 'my model': TF Serving's docker image passes the model name"):
        check_model_name("my model")
