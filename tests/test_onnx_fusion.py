"""The encoder fusion of ONNX exports (kerasbert.serving.onnx_fusion): on the export of a tiny CRF
tagger (built as test_onnx_engine's, its encoder's weights shaken), every LayerNorm becomes
LayerNormalization, every self-attention ONNX Runtime's Attention and every GELU its own op, the
graph shrinks, its loops and conditionals are untouched, and ONNX Runtime answers as it does on
the unfused graph, the encoder's hidden states included: one short text, one long text (several
windows), eight texts of mixed lengths; floats within 1e-4, integers equal. A fusion made wrong
on purpose fails that comparison."""

from collections import Counter

import numpy as np
import pytest

from kerasbert_apps.testing import TEXTS
from kerasbert_apps.testing.processes import require_module

require_module("onnxruntime")
require_module("tf2onnx")

#: What fused and unfused outputs may differ by (floats).
TOLERANCE = 1e-4


def batches(tokenizer):
    """The inputs compared: (name, pieces, counts)."""
    from kerasbert.serving.onnx import pieces_of

    long_text = max(TEXTS, key=len)
    mixed = [TEXTS[0], long_text, "jack", "", TEXTS[3], "😀 jack 🎉", TEXTS[10], "李白 jack 在北京"]
    return [(name, *pieces_of(tokenizer, texts))
            for name, texts in (("one short", [TEXTS[8]]), ("one long", [long_text]), ("eight mixed", mixed))]


def differences(model, fused, tmp_path, tokenizer):
    """``{batch: [problems]}`` between ONNX Runtime's outputs of ``model`` and ``fused`` (the
    same names; each output's shape, floats within :data:`TOLERANCE`, integers equal); the
    sessions are the engine's (every graph optimization, one thread)."""
    from kerasbert.serving.onnx import run
    from kerasbert.serving.onnx import session

    (tmp_path / "plain.onnx").write_bytes(model.SerializeToString())
    (tmp_path / "fused.onnx").write_bytes(fused.SerializeToString())
    plain, joined = session(tmp_path / "plain.onnx", 1), session(tmp_path / "fused.onnx", 1)
    found = {}
    for name, pieces, counts in batches(tokenizer):
        want, got = run(plain, pieces, counts), run(joined, pieces, counts)
        assert set(got) == set(want)
        problems = []
        for key, expected in want.items():
            if got[key].shape != expected.shape:
                problems.append(f"{key}: shape {got[key].shape}, not {expected.shape}")
            elif expected.dtype.kind == "f":
                gap = float(np.max(np.abs(got[key] - expected), initial=0.0))
                if gap > TOLERANCE:
                    problems.append(f"{key}: differs by {gap:.3g}")
            elif not np.array_equal(got[key], expected):
                problems.append(f"{key}: differs")
        found[name] = problems
    return found


def with_hidden_states(model):
    """``model`` with the encoder's hidden states (each LayerNorm's output, which the fused graph
    computes under the same name) as outputs too: a fusion that is wrong in one layer may move the
    answers too little to see, not the hidden states."""
    import onnx

    from kerasbert.serving.onnx_fusion import fuse_encoder

    names = [n.output[0] for n in fuse_encoder(model).graph.node if n.op_type == "LayerNormalization"]
    out = onnx.ModelProto()
    out.CopyFrom(model)
    out.graph.output.extend(onnx.helper.make_tensor_value_info(name, onnx.TensorProto.FLOAT, None) for name in names)
    return out


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    """(pipeline, its converted ONNX model before the fusion, the published export): the CRF tagger of test_onnx_engine on the toy checkpoint, its
    head shaken, and its encoder's weights shaken too: the toy checkpoint's biases and LayerNorm
    shifts are zeros (tf2onnx folds adding them away, leaving patterns that a trained encoder's
    graph does not have, such as projections without a bias), and its attention barely depends on
    the scores (four times their scale moved its hidden states by 1e-4)."""
    import keras
    import onnx

    import kerasbert
    from kerasbert_apps.base.onnx_export import export_onnx
    from kerasbert_apps.ner.heads.bio.model import NerModel
    from kerasbert_apps.ner.heads.bio.pipeline import Tagger
    from kerasbert_apps.ner.tags import bio_tags
    from kerasbert_apps.testing import tiny_checkpoint
    from kerasbert_apps.testing.trained import shake

    tmp = tmp_path_factory.mktemp("onnx_fusion")
    checkpoint = tiny_checkpoint(tmp / "checkpoint")
    keras.utils.set_random_seed(1)
    tags = bio_tags(["PER", "THING"])
    model = NerModel(kerasbert.load_encoder(str(checkpoint)), len(tags), lstm_units=4, use_crf=True)
    pipeline = Tagger(model, kerasbert.load_tokenizer(str(checkpoint)), tags, max_length=16, temperature=1.3)
    pipeline.predict(TEXTS[:1])
    shake(pipeline, 3)
    rng = np.random.default_rng(4)
    for variable in model.encoder.weights:
        variable.assign(np.asarray(variable.numpy()) + rng.normal(0, 0.5, variable.shape).astype("float32"))
    from kerasbert.serving import onnx_fusion

    given, fuse = [], onnx_fusion.fuse_encoder

    def keep(converted):  # the export's converted graph, before its fusion
        given.append(converted)
        return fuse(converted)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(onnx_fusion, "fuse_encoder", keep)
        path = export_onnx(pipeline, tmp / "onnx", check_texts=["jack"])
    return pipeline, given[0], onnx.load(str(path / "model.onnx"))


@pytest.fixture(scope="module")
def watched(exported):
    """The export with its hidden states as outputs (:func:`with_hidden_states`)."""
    return with_hidden_states(exported[1])


def test_the_encoder_is_fused_and_answers_the_same(exported, watched, tmp_path):
    """The tiny encoder (two layers): five LayerNorms (the embeddings' and two a layer), two
    attentions and two GELUs (the toy's is the tanh approximation: ``FastGelu``) fused, none of
    their old ops left; fewer nodes; the Loop and If nodes (the head's BiLSTM and Viterbi) the same;
    the model given unchanged; ONNX Runtime's answers and hidden states the unfused graph's."""
    import onnx

    from kerasbert.serving.onnx_fusion import fuse_encoder_with_stats

    pipeline, model, published = exported
    before = model.SerializeToString()
    fused, stats = fuse_encoder_with_stats(model)
    assert model.SerializeToString() == before
    onnx.checker.check_model(fused)
    ops = stats["ops_after"]
    assert (stats["layer_norms"], stats["attentions"], stats["gelus"]) == (5, 2, 2)
    assert (ops["LayerNormalization"], ops["Attention"], ops["FastGelu"]) == (5, 2, 2)  # the toy's tanh GELU
    published_ops = Counter(node.op_type for node in published.graph.node)
    assert (published_ops["LayerNormalization"], published_ops["Attention"]) == (5, 2)  # the export fuses
    assert not {"Softmax", "Pow", "Reciprocal", "ReduceMean"} & set(ops)
    before_ops = stats["ops_before"]
    assert (before_ops["ReduceMean"], before_ops["Softmax"], before_ops["Pow"]) == (10, 2, 2)
    assert stats["nodes_after"] < stats["nodes_before"] - 50
    assert stats["nodes_after"] == len(fused.graph.node)

    def control_flow(m):
        return sorted(n.SerializeToString(deterministic=True) for n in m.graph.node if n.op_type in ("Loop", "If"))

    assert len(control_flow(model)) >= 3 and control_flow(fused) == control_flow(model)
    assert len(watched.graph.output) == len(model.graph.output) + 5
    fused_watched, again = fuse_encoder_with_stats(watched)
    assert (again["layer_norms"], again["attentions"], again["gelus"]) == (5, 2, 2)
    assert differences(watched, fused_watched, tmp_path, pipeline.tokenizer) == {
        "one short": [], "one long": [], "eight mixed": []}


def test_the_comparison_sees_a_wrong_fusion(exported, watched, tmp_path):
    """The check above can fail: LayerNorms fused with a wrong epsilon, or attentions with another
    scale, answer otherwise, in every batch."""
    import onnx

    from kerasbert.serving.onnx_fusion import fuse_encoder

    pipeline, _, _ = exported
    for op, name, value in (("LayerNormalization", "epsilon", 0.01), ("Attention", "scale", 1.0)):
        fused = fuse_encoder(watched)
        for node in fused.graph.node:
            if node.op_type == op:
                kept = [a for a in node.attribute if a.name != name]
                del node.attribute[:]
                node.attribute.extend([*kept, onnx.helper.make_attribute(name, value)])
        found = differences(watched, fused, tmp_path, pipeline.tokenizer)
        assert all(problems for problems in found.values()), (op, found)


def test_attention_can_be_left_alone(exported):
    """``attention=False``: the LayerNorms and GELUs fused, the attention's ops kept."""
    from kerasbert.serving.onnx_fusion import fuse_encoder_with_stats

    _, model, _ = exported
    _, stats = fuse_encoder_with_stats(model, attention=False)
    assert (stats["layer_norms"], stats["attentions"], stats["gelus"]) == (5, 0, 2)
    assert stats["ops_after"]["Softmax"] == 2 and "Attention" not in stats["ops_after"]


def test_a_graph_without_an_encoder_comes_back_as_it_was():
    """Nothing to fuse: the same graph (no error), and none of the rewrites made."""
    import onnx
    from onnx import TensorProto
    from onnx import helper

    from kerasbert.serving.onnx_fusion import fuse_encoder_with_stats

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [None, 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [None, 1])
    axes = helper.make_tensor("axes", TensorProto.INT64, [1], [-1])
    nodes = [helper.make_node("ReduceMean", ["x", "axes"], ["m"]), helper.make_node("Sub", ["x", "m"], ["d"]),
             helper.make_node("ReduceMean", ["d", "axes"], ["y"])]
    model = helper.make_model(helper.make_graph(nodes, "g", [x], [y], [axes]),
                              opset_imports=[helper.make_opsetid("", 18)])
    fused, stats = fuse_encoder_with_stats(model)
    assert fused.SerializeToString() == model.SerializeToString()
    assert (stats["layer_norms"], stats["attentions"], stats["gelus"]) == (0, 0, 0)
    onnx.checker.check_model(fused)


def test_attention_scaled_otherwise_is_left_alone(exported):
    """ONNX Runtime's Attention scales the scores by 1/sqrt(head_size) whatever the graph said:
    a graph scaled otherwise keeps its attention's ops (its LayerNorms are still fused)."""
    import onnx

    from kerasbert.serving.onnx_fusion import fuse_encoder_with_stats

    _, model, _ = exported
    odd = onnx.ModelProto()
    odd.CopyFrom(model)
    producer = {o: n for n in odd.graph.node for o in n.output}
    odd.graph.initializer.append(onnx.numpy_helper.from_array(np.array(0.3, np.float32), "odd_scale"))
    scaled = 0
    for softmax in (n for n in odd.graph.node if n.op_type == "Softmax"):
        for name in producer[softmax.input[0]].input:
            node = producer.get(name)
            if node is not None and node.op_type == "Mul" and producer.get(node.input[0]).op_type == "MatMul":
                node.input[1] = "odd_scale"
                scaled += 1
    assert scaled == 2
    _, stats = fuse_encoder_with_stats(odd)
    assert (stats["layer_norms"], stats["attentions"]) == (5, 0) and stats["ops_after"]["Softmax"] == 2
