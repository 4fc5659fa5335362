"""The ONNX Runtime engine (kerasbert.serving.onnx, kerasbert_apps.base.onnx_engine): ``export --format
onnx`` of the BIO heads through the command line, run by ``kerasbert_apps.ner.load`` and ``ner predict
--engine`` in a fresh process that imports no TensorFlow, with predict's answers; the engine chosen
as the option says; the conversion's and the check's one-line errors; the string step the same on
both sides. Every head's parity (long texts included) is the head contract's check
(kerasbert_apps.testing, tests/test_heads_*.py)."""

import contextlib
import io
import json
import subprocess
import sys

import numpy as np
import pytest

from kerasbert.errors import KerasbertError
from kerasbert_apps.testing import TEXTS
from kerasbert_apps.testing.compare import same_answers
from kerasbert_apps.testing.processes import fresh_env
from kerasbert_apps.testing.processes import require_module

require_module("onnxruntime")
require_module("tf2onnx")

#: Modules the engine's process must not import.
HEAVY = ("tensorflow", "keras", "tf2onnx", "tensorflow_text", "jax")


def run_cli(argv):
    """``kerasbert ARGV`` in this process: (status, stdout, stderr)."""
    from kerasbert.cli import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            status = main(argv)
        except SystemExit as e:
            status = e.code
    return status, out.getvalue(), err.getvalue()


@pytest.fixture(scope="module", params=["crf", "softmax"])
def tagger(request, tmp_path_factory):
    """A BIO tagger of the head on the toy checkpoint, its head shaken so that it predicts
    many entities, saved as a model folder."""
    import keras

    import kerasbert
    from kerasbert_apps.ner.heads.bio.model import NerModel
    from kerasbert_apps.ner.heads.bio.pipeline import Tagger
    from kerasbert_apps.ner.tags import bio_tags
    from kerasbert_apps.testing import tiny_checkpoint
    from kerasbert_apps.testing.trained import shake

    tmp = tmp_path_factory.mktemp(f"onnx_{request.param}")
    checkpoint = tiny_checkpoint(tmp / "checkpoint")
    keras.utils.set_random_seed(1)
    tags = bio_tags(["PER", "THING"])
    model = NerModel(kerasbert.load_encoder(str(checkpoint)), len(tags), lstm_units=4, use_crf=request.param == "crf")
    pipeline = Tagger(model, kerasbert.load_tokenizer(str(checkpoint)), tags, max_length=16, temperature=1.3)
    pipeline.predict(TEXTS[:1])
    shake(pipeline, 3)
    pipeline.save(tmp / "model")
    assert pipeline.head_name == request.param
    return pipeline, tmp


def test_export_runs_without_tensorflow_and_answers_as_predict(tagger):
    """``ner export --format onnx`` writes EXPORT_BASE/1 (model.onnx, its description, the settings
    file and the vocabulary); ``kerasbert_apps.ner.load`` (auto: the export base is an ONNX export)
    and ``ner predict --engine onnx`` run it in a fresh process that imports none of TensorFlow,
    Keras, tf2onnx, TF-Text or JAX, and answer what the pipeline's predict answers: the same
    entities, long texts across windows, scores within 1e-3; records come back with their fields."""
    pipeline, tmp = tagger
    status, out, err = run_cli(["ner", "export", "--format", "onnx", "--model", str(tmp / "model"),
                                "--output", str(tmp / "onnx")])
    assert status == 0, err
    version = tmp / "onnx" / "1"
    assert out.startswith(f"ONNX: {version}\n") and "--engine onnx" in out
    assert sorted(p.name for p in version.iterdir()) == ["kerasbert.json", "model.onnx", "tagger.json", "vocab.txt"]
    description = json.loads((version / "kerasbert.json").read_text(encoding="utf-8"))
    assert description["format"] == "onnx" and description["head"] == pipeline.head_name
    assert set(description["inputs"]) == {"pieces", "counts"}
    assert set(description["outputs"]) == {"start", "end", "kind", "score", "count"}
    assert description["names"] == {"kind": ["type", pipeline.types]}

    (tmp / "texts.txt").write_text("".join(t + "\n" for t in TEXTS[:4]), encoding="utf-8")
    script = r"""
import contextlib, io, json, sys
import kerasbert_apps.ner
from kerasbert.cli import main

engine = kerasbert_apps.ner.load(sys.argv[1])
results = engine.predict(json.loads(sys.argv[2]))
records = engine.predict([{"id": 7, "text": "jack"}])
out = io.StringIO()
with contextlib.redirect_stdout(out):
    status = main(["ner", "predict", "--engine", "onnx", "--model", sys.argv[1], sys.argv[3]])
heavy = sorted(m for m in sys.modules if m.split(".")[0] in json.loads(sys.argv[4]))
print(json.dumps({"type": type(engine).__name__, "results": results, "records": records, "status": status,
                  "lines": out.getvalue().splitlines(), "heavy": heavy}))
"""
    run = subprocess.run([sys.executable, "-c", script, str(tmp / "onnx"), json.dumps(TEXTS), str(tmp / "texts.txt"),
                          json.dumps(HEAVY)], capture_output=True, text=True, env=fresh_env())
    assert run.returncode == 0, run.stderr[-3000:]
    got = json.loads(run.stdout.splitlines()[-1])
    assert got["heavy"] == [] and got["type"] == "OnnxEngine"
    want = pipeline.predict(TEXTS)
    long_text = max(range(len(TEXTS)), key=lambda i: len(TEXTS[i]))
    assert len(pipeline.tokenizer.pieces([TEXTS[long_text]])[0][0]) > 3 * pipeline.max_length
    assert len(want[long_text]["entities"]) > 5 and sum(len(r["entities"]) for r in want) > 40
    same_answers(got["results"], want, 1e-3, "ONNX engine")
    assert got["records"][0]["id"] == 7 and got["records"][0]["text"] == "jack"
    assert got["status"] == 0
    lines = [json.loads(line) for line in got["lines"]]
    same_answers([{k: v for k, v in line.items() if k != "line"} for line in lines], want[:4], 1e-3, "predict")


def test_the_engine_is_the_one_asked_for(tagger):
    """``auto`` loads a model folder as before; ``onnx`` on a model folder and ``savedmodel`` on an
    ONNX export are one-line errors saying what would run it; options the ONNX graph cannot honour
    are refused."""
    from kerasbert_apps.base.onnx_engine import OnnxEngine
    from kerasbert_apps.base.pipeline import Pipeline
    from kerasbert_apps.ner import load

    pipeline, tmp = tagger
    if not (tmp / "onnx").exists():
        assert run_cli(["ner", "export", "--format", "onnx", "--model", str(tmp / "model"),
                        "--output", str(tmp / "onnx")])[0] == 0
    assert isinstance(load(tmp / "model"), Pipeline)
    assert isinstance(load(tmp / "onnx" / "1", engine="onnx"), OnnxEngine)
    with pytest.raises(KerasbertError, match="no ONNX export .*export --format onnx") as error:
        load(tmp / "model", engine="onnx")
    assert "\n" not in str(error.value)
    with pytest.raises(KerasbertError, match="an ONNX export, which holds no Keras model"):
        load(tmp / "onnx", engine="savedmodel")
    with pytest.raises(KerasbertError, match="engine must be one of auto, onnx, savedmodel"):
        load(tmp / "onnx", engine="tensorrt")
    status, _, err = run_cli(["ner", "predict", "--engine", "onnx", "--precision", "bfloat16", "--model",
                              str(tmp / "onnx"), "-"])
    assert status == 2 and "an ONNX export runs in the precision it was exported in" in err
    for option in (["--input", "ids"], ["--jit-compile"], ["--precision", "bfloat16"]):
        status, _, err = run_cli(["ner", "export", "--format", "onnx", "--model", str(tmp / "model"),
                                  "--output", str(tmp / "refused"), *option])
        assert status == 2 and len(err.strip().splitlines()) == 1, (option, err)
        assert not (tmp / "refused").exists() or not any((tmp / "refused").iterdir())


def test_the_bilstm_is_onnx_lstm_ops(tagger, tmp_path):
    """The BIO heads' BiLSTM is exported as the SavedModel's serving graph computes it (TensorFlow's
    fused kernel) and converted to ONNX's own ``LSTM`` op, one per direction, not to a ``Loop``
    running the cell's small ops once per token; the CRF's loops (Viterbi, its backtracking, the
    entity scores' forward-backward) run no argmax and no conditional per step; the export answers
    as the pipeline does."""
    import onnx

    from kerasbert_apps.ner import load

    pipeline, _ = tagger
    path = pipeline.export_onnx(tmp_path, check_texts=TEXTS[:2])  # the pipeline's method: export_onnx
    assert json.loads((path / "kerasbert.json").read_text(encoding="utf-8"))["precision"] == "float32"
    graph = onnx.load(str(path / "model.onnx")).graph

    def ops(graph):
        for node in graph.node:
            yield node
            for attribute in node.attribute:
                yield from (ops(attribute.g) if attribute.type == onnx.AttributeProto.GRAPH else ())

    lstms = [node for node in graph.node if node.op_type == "LSTM"]
    assert len(lstms) == 2 and all(onnx.helper.get_attribute_value(a) == b"forward"
                                   for node in lstms for a in node.attribute if a.name == "direction")
    loops = [node for node in ops(graph) if node.op_type == "Loop"]
    assert not [node.name for node in loops if {"Sigmoid", "Tanh"} & {n.op_type for n in ops(node.attribute[0].g)}]
    if pipeline.head_name == "crf":  # Viterbi's back-pointers are taken after its loop, not at each step
        assert len(loops) == 3 and not [node.name for node in loops
                                         if {"ArgMax", "If"} & {n.op_type for n in ops(node.attribute[0].g)}]
    same_answers(load(path, engine="onnx").predict(TEXTS), pipeline.predict(TEXTS), 1e-3, "ONNX LSTM")


@pytest.mark.parametrize("tagger", ["crf"], indirect=True)
def test_int8_exports_and_evaluate_on_either_engine(tagger):
    """``export --format onnx --precision int8``: the products with constant weights run as ONNX
    Runtime's integer ops on int8 weights (none is left in float32), the description says so with its
    agreement with float32 on the check inputs, and the command says how to score it; ``evaluate
    --engine onnx`` scores an export as ``evaluate`` scores the model folder (the float32 export:
    the same scores), and the int8 one gives scores of its own; int8 is refused for a SavedModel."""
    import onnx

    pipeline, tmp = tagger
    if not (tmp / "onnx").exists():
        assert run_cli(["ner", "export", "--format", "onnx", "--model", str(tmp / "model"),
                        "--output", str(tmp / "onnx")])[0] == 0
    status, out, err = run_cli(["ner", "export", "--format", "onnx", "--precision", "int8", "--model",
                                str(tmp / "model"), "--output", str(tmp / "int8")])
    assert status == 0, err
    int8, float32 = tmp / "int8" / "1", tmp / "onnx" / "1"
    assert f"evaluate --engine onnx --model {int8} --data FILE" in out
    description = json.loads((int8 / "kerasbert.json").read_text(encoding="utf-8"))
    assert description["precision"] == "int8"
    assert description["int8"]["inputs"] > 2
    assert 0 <= description["int8"]["same_answers"] <= description["int8"]["inputs"]
    graph = onnx.load(str(int8 / "model.onnx")).graph
    weights = {tensor.name: tensor.data_type for tensor in graph.initializer}
    integer = [node for node in graph.node if node.op_type == "MatMulInteger"]
    assert integer and all(weights.get(node.input[1]) == onnx.TensorProto.INT8 for node in integer)
    assert not [node.name for node in graph.node if node.op_type in ("MatMul", "Attention") and set(node.input) & set(weights)]

    data = tmp / "labelled.conll"
    data.write_text("jack B-PER\nsaw O\nthe B-THING\nhouse I-THING\n\nmary B-PER\nand O\njack B-PER\n\n"
                    "a O\nbig B-THING\ndog I-THING\nbarked O\n", encoding="utf-8")
    scores = {}
    for name, model in (("folder", ["--model", str(tmp / "model")]),
                        ("float32", ["--engine", "onnx", "--model", str(float32)]),
                        ("int8", ["--engine", "onnx", "--model", str(int8)])):
        status, out, err = run_cli(["ner", "evaluate", *model, "--data", str(data),
                                    "--output", str(tmp / f"{name}.json")])
        assert status == 0, err
        assert ("(ONNX Runtime" in err) == (name != "folder") and ("(ONNX Runtime, int8)" in err) == (name == "int8")
        scores[name] = json.loads((tmp / f"{name}.json").read_text(encoding="utf-8"))
    same = ("precision", "recall", "f1", "predicted_entities", "gold_entities")
    assert {k: scores["float32"][k] for k in same} == {k: scores["folder"][k] for k in same}
    assert scores["folder"]["predicted_entities"] > 0 and set(scores["int8"]) == set(scores["folder"])
    status, _, err = run_cli(["ner", "export", "--precision", "int8", "--model", str(tmp / "model"),
                              "--output", str(tmp / "refused-int8")])
    assert status == 2 and "--precision int8 is for --format onnx" in err and not (tmp / "refused-int8").exists()


@pytest.mark.parametrize("tagger", ["crf"], indirect=True)
def test_versions_are_never_overwritten(tagger, tmp_path):
    from kerasbert_apps.base.onnx_export import export_onnx

    import onnx

    from kerasbert.serving import onnx as onnx_module
    from kerasbert.serving import onnx_fusion

    pipeline, _ = tagger
    first = export_onnx(pipeline, tmp_path, check_texts=["jack"])
    with pytest.MonkeyPatch.context() as patch:  # the second one's conversion is the first's (versions are the point)
        patch.setattr(onnx_module, "convert", lambda function: onnx.load(str(first / "model.onnx")))
        patch.setattr(onnx_fusion, "fuse_encoder", lambda model: model)
        second = export_onnx(pipeline, tmp_path, check_texts=["jack"])
    assert (first.name, second.name) == ("1", "2")
    with pytest.raises(KerasbertError, match="already exists; versions are never overwritten"):
        export_onnx(pipeline, tmp_path, version=1, check_texts=["jack"])
    assert sorted(p.name for p in tmp_path.iterdir()) == ["1", "2"]  # no staging folder left


@pytest.mark.parametrize("tagger", ["crf"], indirect=True)
def test_a_head_without_an_onnx_export_says_why(tagger, tmp_path):
    from kerasbert_apps.base.onnx_export import export_onnx

    pipeline, _ = tagger

    class Unconvertible(type(pipeline)):
        no_onnx_export = "its decoding runs a TensorFlow op ONNX has no counterpart for"

    refusing = Unconvertible.from_settings(pipeline.model, pipeline.tokenizer, pipeline.settings())
    with pytest.raises(KerasbertError, match=f"has no ONNX export: {Unconvertible.no_onnx_export}$"):
        export_onnx(refusing, tmp_path)
    assert list(tmp_path.iterdir()) == []


def test_conversion_and_check_name_what_fails():
    """tf2onnx only logs an op it cannot convert (and writes a model ONNX Runtime refuses): the
    conversion is a one-line error naming it; a model that answers otherwise than its function,
    or that ONNX Runtime refuses, is a one-line error naming the output, or the op."""
    import onnx
    import tensorflow as tf

    from kerasbert.serving.onnx import check
    from kerasbert.serving.onnx import convert

    spec = [tf.TensorSpec([None], tf.int32, name="x")]

    @tf.function(input_signature=spec, autograph=False)
    def joined(x):
        return {"y": tf.strings.reduce_join(tf.strings.as_string(x))}

    with pytest.raises(KerasbertError, match=r"^the ONNX conversion failed: tf2onnx cannot convert the TensorFlow "
                                             r"op\(s\) \w*ReduceJoin") as error:
        convert(joined)
    assert "\n" not in str(error.value)

    @tf.function(input_signature=spec, autograph=False)
    def plus_one(x):
        return {"y": x + 1}

    @tf.function(input_signature=spec, autograph=False)
    def plus_two(x):
        return {"y": x + 2}

    model = convert(plus_one)
    check(model, plus_one, [{"x": np.arange(3, dtype=np.int32)}])
    with pytest.raises(KerasbertError, match="answers otherwise .* output 'y' differs"):
        check(model, plus_two, [{"x": np.arange(3, dtype=np.int32)}])
    model.graph.node[0].op_type = "NoSuchOp"
    with pytest.raises(KerasbertError, match="does not load in ONNX Runtime: .*NoSuchOp"):
        check(model, plus_one, [{"x": np.arange(3, dtype=np.int32)}])
    onnx.checker.check_model(convert(plus_one))


def test_where_is_one_exact_op():
    """``tf.where`` converts to ONNX's ``Where`` (tf2onnx's own ``Cast(c) * x + Cast(Not(c)) * y``
    gives NaN where the branch not taken is infinite); booleans, and ``Select``'s 1-D condition
    over rows, too."""
    import tensorflow as tf

    from kerasbert.serving.onnx import check
    from kerasbert.serving.onnx import convert

    spec = [tf.TensorSpec([None], tf.bool, name="c"), tf.TensorSpec([None, 2], tf.float32, name="x"),
            tf.TensorSpec([None, 2], tf.float32, name="y")]

    @tf.function(input_signature=spec, autograph=False)
    def chosen(c, x, y):
        return {"float": tf.where(c[:, None], x, y), "int": tf.where(c, tf.shape(x)[0], 7),
                "bool": tf.where(c[:, None], x > 0, y > 0), "rows": tf.raw_ops.Select(condition=c, x=x, y=y)}

    model = convert(chosen)
    assert {"Where", "Or"} <= {n.op_type for n in model.graph.node}
    assert "Mul" not in {n.op_type for n in model.graph.node}
    inf = np.float32(np.inf)
    check(model, chosen, [{"c": np.array([True, False, True]), "x": np.array([[1, -0.0], [2, 3], [-4, 5]], np.float32),
                           "y": np.array([[inf, -inf], [-1, 0], [inf, 6]], np.float32)}], tolerance=0.0)


def _transposed_dense():
    """A small function for tf2onnx's passes to work on (transposes around a matmul of a variable),
    and its variable (the function holds it weakly)."""
    import tensorflow as tf

    weights = tf.Variable(np.random.default_rng(0).normal(size=(64, 64)).astype(np.float32))

    @tf.function(input_signature=[tf.TensorSpec([None, 64], tf.float32, name="x")], autograph=False)
    def dense(x):
        return {"y": tf.nn.relu(tf.transpose(tf.matmul(tf.transpose(weights), tf.transpose(x))))}

    return dense, weights


def _same_graph(a, b):
    """Two converted models have the same ops and the same weights."""
    assert sorted(n.op_type for n in a.graph.node) == sorted(n.op_type for n in b.graph.node)
    assert sorted(i.raw_data for i in a.graph.initializer) == sorted(i.raw_data for i in b.graph.initializer)


def test_conversion_writes_fresh_node_protos_with_the_same_graph(monkeypatch):
    """During ``convert`` tf2onnx's ``Node.update_proto`` writes each node into a new proto (so a
    constant's weights are not kept once per optimizer pass), the graph is the one tf2onnx's own method
    gives, and the method is tf2onnx's again afterwards."""
    import contextlib

    import tf2onnx
    from tf2onnx.graph import Node

    import kerasbert.serving.onnx as onnx_module
    from kerasbert.serving.onnx import check
    from kerasbert.serving.onnx import convert
    from kerasbert.serving.tf2onnx_patches import UPDATE_PROTO_KNOWN
    from kerasbert.serving.tf2onnx_patches import fresh_node_protos

    assert tf2onnx.__version__ in UPDATE_PROTO_KNOWN, (
        f"tf2onnx {tf2onnx.__version__}: read its Node.update_proto and add the release to UPDATE_PROTO_KNOWN "
        "if fresh_node_protos still does what it does")
    dense, _weights = _transposed_dense()

    original = Node.update_proto
    with fresh_node_protos():
        fresh_method = Node.update_proto
    assert fresh_method is not original and Node.update_proto is original
    replaced = []

    def recording(self, *args, **kwargs):
        before = self._op
        fresh_method(self, *args, **kwargs)
        replaced.append(self._op is not before)

    @contextlib.contextmanager
    def recorded():
        with monkeypatch.context() as patch:
            patch.setattr(Node, "update_proto", recording)
            yield

    monkeypatch.setattr(onnx_module, "fresh_node_protos", recorded)
    fresh = convert(dense)
    assert replaced and all(replaced)  # every update wrote a new proto
    monkeypatch.setattr(onnx_module, "fresh_node_protos", contextlib.nullcontext)  # tf2onnx's own method
    plain = convert(dense)
    assert Node.update_proto is original
    _same_graph(fresh, plain)
    check(fresh, dense, [{"x": np.random.default_rng(1).normal(size=(3, 64)).astype(np.float32)}], tolerance=1e-5)


def test_conversion_copies_the_graph_once_and_skips_a_failing_pass_as_tf2onnx_does(monkeypatch):
    """During ``convert`` tf2onnx's optimizer passes run on the graph after one copy of it (tf2onnx's own
    code copies it before every pass), giving the graph tf2onnx's own code gives; a pass that fails is
    skipped as tf2onnx skips it; ``optimize_graph`` is tf2onnx's again afterwards."""
    import contextlib
    import copy

    import tf2onnx
    from tf2onnx import optimizer
    from tf2onnx.graph import Graph

    import kerasbert.serving.onnx as onnx_module
    from kerasbert.serving.onnx import check
    from kerasbert.serving.onnx import convert
    from kerasbert.serving.tf2onnx_patches import OPTIMIZE_GRAPH_KNOWN

    assert tf2onnx.__version__ in OPTIMIZE_GRAPH_KNOWN, (
        f"tf2onnx {tf2onnx.__version__}: read its optimizer.optimize_graph and add the release to "
        "OPTIMIZE_GRAPH_KNOWN if one_graph_copy still does what it does")
    dense, _weights = _transposed_dense()

    copies, deepcopy, original, patch = [], copy.deepcopy, optimizer.optimize_graph, onnx_module.one_graph_copy

    def counting(x, *args, **kwargs):
        copies.append(isinstance(x, Graph))
        return deepcopy(x, *args, **kwargs)

    monkeypatch.setattr(copy, "deepcopy", counting)

    def converted(patched):
        copies.clear()
        monkeypatch.setattr(onnx_module, "one_graph_copy", patch if patched else contextlib.nullcontext)
        model = convert(dense)
        assert optimizer.optimize_graph is original
        return model, sum(copies)

    (once, copied_once), (plain, copied_plain) = converted(True), converted(False)
    assert copied_once == 1 and copied_plain > 10  # tf2onnx's own: one copy per pass
    _same_graph(once, plain)
    check(once, dense, [{"x": np.random.default_rng(1).normal(size=(3, 64)).astype(np.float32)}], tolerance=1e-5)

    class Failing:
        graph_been_opt = False

        def optimize(self, graph, iteration):
            next(n for n in graph.get_nodes() if n.type == "Relu").type = "Sigmoid"  # changes the graph, then fails
            raise RuntimeError("a pass that fails")

    # the first pass, so that it changes the graph given to optimize_graph
    monkeypatch.setattr(optimizer, "_optimizers", {"failing": Failing, **optimizer._optimizers})
    (skipped, _), (skipped_plain, _) = converted(True), converted(False)
    _same_graph(skipped, plain)
    _same_graph(skipped_plain, plain)
    check(skipped, dense, [{"x": np.random.default_rng(1).normal(size=(3, 64)).astype(np.float32)}], tolerance=1e-5)


def test_the_host_names_as_the_graph_does():
    """The string step, in the graph (named_outputs) and on the host (named_row), on the same padded
    numeric outputs: the same names and the same substrings (code points, pads dropped)."""
    import tensorflow as tf

    from kerasbert.serving.graph_ops import named_outputs
    from kerasbert.serving.onnx import named_row
    from kerasbert.serving.rows import unpad

    texts = ["李白 jack 在北京 😀", "", "dull boy"]
    numbers = {"start": np.array([[0, 3, 12], [-1, -1, -1], [5, -1, -1]], np.int32),
               "end": np.array([[2, 7, 13], [-1, -1, -1], [8, -1, -1]], np.int32),
               "kind": np.array([[1, 0, 1], [-1, -1, -1], [0, -1, -1]], np.int32),
               "score": np.array([[0.5, 0.25, 0.125], [0, 0, 0], [1, 0, 0]], np.float32),
               "count": np.array([3, 0, 1], np.int32)}
    names, spans = {"kind": ("type", ["PER", "THING"])}, {"mention": ("start", "end")}
    graph = unpad(named_outputs(tf.constant(texts), {k: tf.constant(v) for k, v in numbers.items()}, names, spans))
    host = [named_row(text, row, names, spans) for text, row in zip(texts, unpad(numbers))]
    assert graph == host
    assert host[0]["mention"] == ["李白", "jack", "😀"] and host[0]["type"] == ["THING", "PER", "THING"]
    assert host[1] == {"start": [], "end": [], "score": [], "type": [], "mention": []}


def test_triples_thresholds_are_the_exports(tmp_path):
    """A triples export runs with the thresholds it was exported with: ``predict --engine onnx``
    with other ``--threshold-*`` is refused in one line (they are constants of its graph), with
    the same ones it runs; the engine's triples are the extractor's."""
    import keras

    import kerasbert
    from kerasbert_apps.base.onnx_export import export_onnx
    from kerasbert_apps.testing import tiny_checkpoint
    from kerasbert_apps.testing.trained import shake
    from kerasbert_apps.triples import load
    from kerasbert_apps.triples.heads.casrel.model import TripleModel
    from kerasbert_apps.triples.heads.casrel.pipeline import Extractor

    checkpoint = tiny_checkpoint(tmp_path / "checkpoint")
    keras.utils.set_random_seed(2)
    model = TripleModel(kerasbert.load_encoder(str(checkpoint)), 2)
    extractor = Extractor(model, kerasbert.load_tokenizer(str(checkpoint)), ["likes", "is"], max_length=16,
                          thresholds=(0.3, 0.3))
    extractor.predict(TEXTS[:1])
    shake(extractor, 1)
    path = export_onnx(extractor, tmp_path / "onnx", check_texts=TEXTS[:2])
    want = extractor.predict(TEXTS)
    assert sum(len(r["triples"]) for r in want) > 20
    same_answers(load(path).predict(TEXTS), want, 1e-3, "casrel ONNX export")
    (tmp_path / "texts.txt").write_text("jack likes dull boy\n", encoding="utf-8")
    status, _, err = run_cli(["triples", "predict", "--model", str(path), "--threshold-start", "0.6",
                              str(tmp_path / "texts.txt")])
    assert status == 2 and "decoding settings are part of its ONNX graph" in err and len(err.splitlines()) == 2
    status, out, err = run_cli(["triples", "predict", "--model", str(path), "--threshold-start", "0.3",
                                str(tmp_path / "texts.txt")])
    assert status == 0, err
    same_answers(json.loads(out)["triples"], extractor.predict(["jack likes dull boy"])[0]["triples"], 1e-3, "cli")
