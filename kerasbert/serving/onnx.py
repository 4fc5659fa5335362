"""ONNX exports: a serving graph converted by tf2onnx and checked in ONNX Runtime, then run on the host without TensorFlow.

What every kerasbert ONNX export shares (the apps give the graph itself:
:func:`kerasbert_apps.base.onnx_export.export_onnx`):

* **the graph** -- the SavedModel's serving graph minus its two string steps:
  it takes the host tokenizer's pieces (:func:`pieces_of`: each token's
  WordPiece id and code-point start and end, ``pieces`` int32 ``[tokens,
  3]``, text after text, and ``counts`` int32 ``[batch]``, the tokens of each
  text: what :meth:`kerasbert.tokenizers.graph_tokenizer.GraphTokenizer.tokens`
  gives in the SavedModel) and returns numbers (offsets, label indices,
  scores, ``count``); the host names the label indices and cuts the
  mentions from the texts (:func:`named_row`, the lookups the SavedModel's
  string step makes, :func:`kerasbert.serving.graph_ops.named_outputs`);
* **conversion** (:func:`convert`) -- ``tf2onnx.convert.from_function`` at
  opset :data:`OPSET`, with handlers for the TensorFlow ops of kerasbert's
  graphs that tf2onnx 1.17 lacks or converts only in part (each handler's
  docstring says which and why). tf2onnx logs an op it cannot convert and
  writes a model that ONNX Runtime then refuses: the conversion collects
  what it logs and fails in one line naming the ops;
* **the check** (:func:`check`) -- the converted model is loaded in ONNX
  Runtime and run on a few inputs, its outputs compared with the TensorFlow
  function's; a model that does not load or answers otherwise is never
  published (one line naming the op, or the output that differs);
* **layout** -- ``EXPORT_BASE/N/``: :data:`MODEL_FILE`, the description
  :data:`DESCRIPTION_FILE` (the kit's version, the engine's inputs and
  outputs, what the host names, the converter's versions) and what the app
  adds (the model folder's settings file and ``vocab.txt``), written
  atomically like a SavedModel version
  (:func:`kerasbert.serving.saved_model.write_version`);
* **the host** (:func:`session`, :func:`pieces_of`, :func:`named_row`,
  :func:`describe`) -- numpy, the host tokenizer and ``onnxruntime``;
  importing this module imports neither TensorFlow nor tf2onnx (conversion
  imports them when it runs).
"""

import json
import os
import re
from pathlib import Path

import numpy as np

from kerasbert.errors import KerasbertError
from kerasbert.serving.tf2onnx_patches import fresh_node_protos
from kerasbert.serving.tf2onnx_patches import one_graph_copy

#: The ONNX file of an export.
MODEL_FILE = "model.onnx"
#: The export's description (JSON).
DESCRIPTION_FILE = "kerasbert.json"
#: The opset exports are written in: 18 has ``ScatterND`` with max/min
#: reductions (:class:`UnsortedSegment` below) and ``BitwiseAnd`` (Keras's
#: TensorFlow ``argmax`` of floats checks sign bits).
OPSET = 18
#: The graph's inputs: the host tokenizer's pieces (:func:`pieces_of`).
INPUTS = ("pieces", "counts")
#: What the check allows between ONNX Runtime's and TensorFlow's float outputs.
CHECK_TOLERANCE = 1e-3


# ---------------------------------------------------------------------------- host
def pieces_of(tokenizer, texts):
    """The graph's inputs for ``texts``: ``(pieces, counts)``, ``pieces``
    int32 ``[tokens, 3]`` (each token's WordPiece id, start and end: code
    points into its text, end exclusive; text after text) and ``counts``
    int32 ``[batch]`` (the tokens of each text), from the host tokenizer
    (:meth:`kerasbert.tokenizers.tokenizer.BertTokenizer.pieces`)."""
    return inputs_of(tokenizer.pieces(list(texts)))


def inputs_of(per_text):
    """:func:`pieces_of` of texts already tokenized: ``per_text`` is the
    tokenizer's ``pieces`` of each (``(ids, offsets)``)."""
    counts = np.array([len(ids) for ids, _ in per_text], np.int32)
    rows = [np.concatenate([ids[:, None], offsets], 1) for ids, offsets in per_text if len(ids)]
    pieces = np.concatenate(rows, 0).astype(np.int32) if rows else np.zeros([0, 3], np.int32)
    return pieces, counts


def cores():
    """The CPU cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def session(path, threads=None):
    """An ONNX Runtime session of the model file ``path`` on the CPU: every
    graph optimization ONNX Runtime has (``ORT_ENABLE_ALL``), and ``threads``
    intra-op threads (default: the cores this process may use, :func:`cores`).
    A file ONNX Runtime cannot load is a one-line error naming it."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.intra_op_num_threads = int(threads or cores())
    options.log_severity_level = 3  # errors only: its notes on the graph's fused nodes are not the user's business
    try:
        return ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    except Exception as e:  # noqa: BLE001 (ONNX Runtime raises its own exception types)
        raise KerasbertError(f"{path}: ONNX Runtime cannot load it ({_ort_problem(e)})") from e


def run(session, pieces, counts):
    """The outputs of ``session`` for one batch's pieces, by name (numpy arrays)."""
    names = [o.name for o in session.get_outputs()]
    return dict(zip(names, session.run(names, {"pieces": pieces, "counts": counts})))


def named_row(text, row, names, spans):
    """The host's string step for one text: its unpadded numeric outputs
    ``row`` (output name -> list) with each index column of ``names``
    (``{key: [name_key, labels]}``) replaced by the labels' names, and each
    ``{string_key: [start_key, end_key]}`` of ``spans`` cut from ``text``
    (code points, end exclusive). The same lookups as the SavedModel's
    (:func:`kerasbert.serving.graph_ops.named_outputs`)."""
    out = dict(row)
    for key, (name_key, labels) in names.items():
        out[name_key] = [labels[i] for i in out.pop(key)]
    for key, (start_key, end_key) in spans.items():
        out[key] = [text[s:e] for s, e in zip(out[start_key], out[end_key])]
    return out


def describe(folder):
    """The description (:data:`DESCRIPTION_FILE`) of the ONNX export ``folder``."""
    from kerasbert.files.atomic import read_json

    folder = Path(folder)
    if not (folder / MODEL_FILE).is_file():
        raise KerasbertError(f"{folder}: not a kerasbert ONNX export (no {MODEL_FILE})")
    path = folder / DESCRIPTION_FILE
    if not path.is_file():
        raise KerasbertError(f"{folder}: not a kerasbert ONNX export (no {DESCRIPTION_FILE})")
    description = read_json(path)
    if not isinstance(description, dict) or description.get("format") != "onnx":
        raise KerasbertError(f"{path}: damaged: not the description of a kerasbert ONNX export")
    return description


def export_folder(folder):
    """The ONNX export that ``folder`` means: the folder itself when it holds
    :data:`MODEL_FILE`, else its highest integer version folder that does
    (an export base); None when neither."""
    folder = Path(folder)
    if (folder / MODEL_FILE).is_file():
        return folder
    if folder.is_dir():
        versions = sorted((int(p.name) for p in folder.iterdir() if p.is_dir() and re.fullmatch(r"\d+", p.name)),
                          reverse=True)
        for version in versions:
            if (folder / str(version) / MODEL_FILE).is_file():
                return folder / str(version)
    return None


def _ort_problem(error):
    """ONNX Runtime's error in one line, the op it names first."""
    message = " ".join(str(error).split())
    op = re.search(r"No Op registered for (\w+)", message)
    if op:
        return f"no ONNX op {op.group(1)} (domain version {_domain_version(message)})"
    node = re.search(r"In Node, \(\"([^\"]*)\", (\w+)", message) or re.search(r"running (\w+) node", message)
    if node:
        return f"op {node.group(node.lastindex)}: {message[-300:]}"
    return message[:400]


def _domain_version(message):
    found = re.search(r"domain_version of (\d+)", message)
    return found.group(1) if found else "?"


# ---------------------------------------------------------------------- conversion
def convert(function, opset=OPSET):
    """``function`` (a ``tf.function`` with an ``input_signature``) as an
    ONNX ``ModelProto`` (tf2onnx, with the handlers of this module). An op
    tf2onnx cannot convert, or a handler that fails, is a one-line
    :class:`~kerasbert.errors.KerasbertError` naming the ops (tf2onnx itself
    only logs them, and writes a model that ONNX Runtime refuses)."""
    import logging

    import tf2onnx

    _register_handlers()
    problems = []

    class Collect(logging.Handler):
        def emit(self, record):
            if record.levelno >= logging.ERROR:
                problems.append(record.getMessage().splitlines()[0])

    logger = logging.getLogger("tf2onnx")
    collect, propagate = Collect(), logger.propagate
    logger.addHandler(collect)
    logger.propagate = False  # tf2onnx's own lines would repeat what the error says
    try:
        with fresh_node_protos(), one_graph_copy():
            model, _ = tf2onnx.convert.from_function(function, input_signature=function.input_signature, opset=opset)
    except Exception as e:  # noqa: BLE001 (tf2onnx raises plain exceptions of many kinds)
        raise KerasbertError(f"the ONNX conversion failed: {_conversion_problems(problems) or e}") from e
    finally:
        logger.removeHandler(collect)
        logger.propagate = propagate
    found = _conversion_problems(problems)
    if found:
        raise KerasbertError(f"the ONNX conversion failed: {found}")
    return model


def _conversion_problems(lines):
    """What tf2onnx logged as errors, in one line: the unsupported op types, and the nodes it failed on."""
    unsupported = sorted({m.group(1) for line in lines for m in [re.search(r"op \[[^:]*: (\w+)\] is not supported", line)]
                          if m})
    failed = sorted({m.group(1) for line in lines for m in [re.search(r"Failed to convert node '?([^' ]+)", line)] if m})
    parts = []
    if unsupported:
        parts.append(f"tf2onnx cannot convert the TensorFlow op(s) {', '.join(unsupported)}")
    if failed:
        parts.append(f"tf2onnx failed on node(s) {', '.join(failed[:5])}")
    if not parts and lines:
        parts.append(lines[0][:300])
    return "; ".join(parts)


def check(model, function, feeds, tolerance=CHECK_TOLERANCE):
    """Load ``model`` (a ``ModelProto``) in ONNX Runtime and run it on each
    of ``feeds`` (dicts of numpy inputs by name); its outputs must be those
    of ``function`` (the TensorFlow function it was converted from): the
    same shapes, integers equal, floats within ``tolerance``. Anything else
    is a one-line :class:`~kerasbert.errors.KerasbertError` (the op ONNX
    Runtime refuses, or the output that differs and where). Returns the
    session it ran."""
    import tensorflow as tf

    runtime = session_of(model)
    names = [o.name for o in runtime.get_outputs()]
    for index, feed in enumerate(feeds):
        try:
            got = dict(zip(names, runtime.run(names, feed)))
        except Exception as e:  # noqa: BLE001
            raise KerasbertError(f"the ONNX model fails in ONNX Runtime on check input {index}: "
                                 f"{_ort_problem(e)}") from e
        want = {k: np.asarray(v) for k, v in function(**{k: tf.constant(v) for k, v in feed.items()}).items()}
        if set(got) != set(want):
            raise KerasbertError(f"the ONNX model's outputs {sorted(got)} are not the TensorFlow function's "
                                 f"{sorted(want)}")
        for name, expected in want.items():
            value = got[name]
            if value.shape != expected.shape:
                problem = f"shape {list(value.shape)}, TensorFlow's {list(expected.shape)}"
            elif expected.dtype.kind == "f":
                gap = float(np.max(np.abs(value - expected), initial=0.0))
                problem = None if gap <= tolerance else f"differs by up to {gap:.3g} (more than {tolerance:g})"
            else:
                problem = None if np.array_equal(value, expected) else "differs"
            if problem:
                raise KerasbertError(f"the ONNX model answers otherwise than the TensorFlow graph on check input "
                                     f"{index}: output {name!r} {problem} (a wrong conversion, or decisions on "
                                     "the edge of float rounding: scores tied, as an untrained head's may be)")
    return runtime


def session_of(model):
    """An ONNX Runtime session of ``model`` (a ``ModelProto``, before it is
    written) on the CPU; one it refuses is a one-line
    :class:`~kerasbert.errors.KerasbertError` naming the op."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.log_severity_level = 3
    try:
        return ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    except Exception as e:  # noqa: BLE001
        raise KerasbertError(f"the ONNX model does not load in ONNX Runtime: {_ort_problem(e)}") from e


def write_export(base, version, model, description, write_more):
    """Publish ``base/version`` (:func:`kerasbert.serving.saved_model.write_version`:
    atomic, never overwriting, ``version`` None for the next free integer)
    holding :data:`MODEL_FILE` (``model``, a checked ``ModelProto``), the
    :data:`DESCRIPTION_FILE` (``description`` -- the caller's, with the
    kit's version -- plus the graph's inputs and outputs and the
    converter's versions) and what ``write_more(folder)`` writes. Returns
    the version folder."""
    import onnx
    import onnxruntime
    import tensorflow as tf
    import tf2onnx

    from kerasbert.serving.saved_model import write_version

    details = {"format": "onnx", **description, "opset": OPSET,
               "inputs": _specs(model.graph.input), "outputs": _specs(model.graph.output),
               "tensorflow": tf.__version__, "tf2onnx": tf2onnx.__version__,
               "onnx": onnx.__version__, "checked_with_onnxruntime": onnxruntime.__version__}

    def write(folder):
        (Path(folder) / MODEL_FILE).write_bytes(model.SerializeToString())
        (Path(folder) / DESCRIPTION_FILE).write_text(json.dumps(details, indent=2, ensure_ascii=False) + "\n",
                                                     encoding="utf-8")
        write_more(Path(folder))

    return write_version(base, version, write)


def _specs(values):
    """``{name: {"dtype", "shape"}}`` of a graph's inputs or outputs (None for an unknown dimension)."""
    import onnx

    out = {}
    for value in values:
        tensor = value.type.tensor_type
        shape = [d.dim_value if d.HasField("dim_value") else None for d in tensor.shape.dim]
        out[value.name] = {"dtype": onnx.helper.tensor_dtype_to_np_dtype(tensor.elem_type).name, "shape": shape}
    return out


# -------------------------------------------------------------------- the handlers
_REGISTERED = []


def _register_handlers():
    """Register the handlers below with tf2onnx (once per process). Each is
    for opset :data:`OPSET` and later only (``version_18``), so a conversion
    at a lower opset keeps tf2onnx's own."""
    if _REGISTERED:
        return
    from onnx import TensorProto
    from tf2onnx import utils
    from tf2onnx.graph_builder import GraphBuilder
    from tf2onnx.handler import tf_op

    @tf_op("Log1p")
    class Log1p:
        """``log(1 + x)`` (``tf.math.log1p``; Keras's TensorFlow ``logaddexp``
        writes one): tf2onnx 1.17 has no handler. ``Log(Add(x, 1))``."""

        @classmethod
        def version_18(cls, ctx, node, **kwargs):
            dtype = utils.map_onnx_to_numpy_type(ctx.get_dtype(node.input[0]))
            one = ctx.make_const(utils.make_name("one"), np.array(1, dtype=dtype))
            add = ctx.make_node("Add", [node.input[0], one.output[0]])
            node.type = "Log"
            ctx.replace_inputs(node, [add.output[0]])

    @tf_op(["UpperBound", "LowerBound"])
    class SearchSorted:
        """``tf.searchsorted`` (:func:`kerasbert.serving.graph_ops.row_of`:
        the row of each flat position): tf2onnx 1.17 has no handler.
        ``out[b, j]`` = how many ``sorted[b, i]`` are ``<=`` (upper) or ``<``
        (lower) ``values[b, j]``, by a ``[b, m, n]`` comparison (the graphs
        search a few rows' ends, or a batch's texts' token counts)."""

        @classmethod
        def version_18(cls, ctx, node, **kwargs):
            sorted_inputs, values = node.input
            out_type = node.get_attr_value("out_type", TensorProto.INT32)
            builder = GraphBuilder(ctx)
            left = builder.make_unsqueeze({"data": sorted_inputs, "axes": [1]})
            right = builder.make_unsqueeze({"data": values, "axes": [2]})
            compare = ctx.make_node("LessOrEqual" if node.type == "UpperBound" else "Less", [left, right]).output[0]
            as_int = ctx.make_node("Cast", [compare], attr={"to": TensorProto.INT64}).output[0]
            total = builder.make_reduce_sum({"data": as_int, "axes": [2], "keepdims": 0, "noop_with_empty_axes": 0})
            shapes, dtypes = node.output_shapes, node.output_dtypes
            ctx.remove_node(node.name)
            ctx.make_node("Cast", [total], attr={"to": out_type}, name=node.name, outputs=node.output, shapes=shapes,
                          dtypes=dtypes)

    @tf_op(["UnsortedSegmentMax", "UnsortedSegmentMin", "UnsortedSegmentSum"])
    class UnsortedSegment:
        """tf2onnx 1.17's handler (TopK, Unique and a ReduceMax of the
        segment counts) fails on integer data for max and min (the window
        merge's ``unsorted_segment_max`` of int64 keys: it calls
        ``.tolist()`` on a Python int) and on empty segment ids (a batch
        with no entity: the ReduceMax of no counts makes a negative shape).
        Here: ``ScatterND`` with the reduction (opset 18 has max and min)
        into a tensor filled with the reduction's identity -- what
        TensorFlow leaves in an empty segment (the dtype's lowest value for
        max, highest for min, 0 for a sum)."""

        @classmethod
        def version_18(cls, ctx, node, **kwargs):
            data, segment_ids, num_segments = node.input
            np_dtype = np.dtype(utils.map_onnx_to_numpy_type(ctx.get_dtype(data)))
            utils.make_sure(ctx.get_rank(segment_ids) == 1, "%s: 1-D segment ids only", node.name)
            reduction = {"UnsortedSegmentMax": "max", "UnsortedSegmentMin": "min",
                         "UnsortedSegmentSum": "add"}[node.type]
            info = np.finfo(np_dtype) if np_dtype.kind == "f" else np.iinfo(np_dtype)
            identity = {"max": info.min, "min": info.max, "add": 0}[reduction]
            builder = GraphBuilder(ctx)
            n = ctx.make_node("Cast", [num_segments], attr={"to": TensorProto.INT64}).output[0]
            n = builder.make_unsqueeze({"data": n, "axes": [0]})
            data_shape = ctx.make_node("Shape", [data]).output[0]
            inner = builder.make_slice({"data": data_shape, "starts": [1], "ends": [np.iinfo(np.int64).max],
                                        "axes": [0]})
            shape = ctx.make_node("Concat", [n, inner], attr={"axis": 0}).output[0]
            fill = ctx.make_const(utils.make_name("identity"), np.array(identity, np_dtype).reshape([1]))
            base = ctx.make_node("Expand", [fill.output[0], shape]).output[0]
            ids = ctx.make_node("Cast", [segment_ids], attr={"to": TensorProto.INT64}).output[0]
            ids = builder.make_unsqueeze({"data": ids, "axes": [1]})
            shapes, dtypes = node.output_shapes, node.output_dtypes
            ctx.remove_node(node.name)
            ctx.make_node("ScatterND", [base, ids, data], attr={"reduction": reduction}, name=node.name,
                          outputs=node.output, shapes=shapes, dtypes=dtypes)

    @tf_op("Bitcast")
    class SignBit:
        """Keras's TensorFlow ``argmax`` of floats (the CRF's Viterbi, a span
        head's best type) reads the sign bit of the maxima
        (``keras.ops.signbit``: ``Bitcast`` float32 -> int32, then
        ``BitwiseAnd`` with ``INT32_MIN``); ONNX has no bit cast. Only that
        pattern is converted (anything else stops the conversion): an int32
        holding the sign bit alone, from comparisons (``-0.0`` by ``1 / x <
        0``)."""

        @classmethod
        def version_18(cls, ctx, node, **kwargs):
            x = node.input[0]
            utils.make_sure(ctx.get_dtype(x) == TensorProto.FLOAT
                            and node.get_attr_value("type") == TensorProto.INT32,
                            "%s: Bitcast of float32 to int32 only", node.name)
            int_min = np.iinfo(np.int32).min
            for consumer in ctx.find_output_consumers(node.output[0]):
                other = [i for i in consumer.inputs if i is not node]
                utils.make_sure(consumer.type == "BitwiseAnd" and other and other[0].is_const()
                                and int(other[0].get_tensor_value()) == int_min,
                                "%s: a Bitcast that is not a sign-bit test", node.name)
            zero = ctx.make_const(utils.make_name("zero"), np.array(0, np.float32)).output[0]
            one = ctx.make_const(utils.make_name("one"), np.array(1, np.float32)).output[0]
            negative = ctx.make_node("Less", [x, zero]).output[0]
            is_zero = ctx.make_node("Equal", [x, zero]).output[0]
            inverse = ctx.make_node("Div", [one, x]).output[0]  # -inf for -0.0
            negative_zero = ctx.make_node("And", [is_zero, ctx.make_node("Less", [inverse, zero]).output[0]]).output[0]
            sign = ctx.make_node("Or", [negative, negative_zero]).output[0]
            minimum = ctx.make_const(utils.make_name("int_min"), np.array(int_min, np.int32)).output[0]
            none = ctx.make_const(utils.make_name("int_zero"), np.array(0, np.int32)).output[0]
            shapes, dtypes = node.output_shapes, node.output_dtypes
            ctx.remove_node(node.name)
            ctx.make_node("Where", [sign, minimum, none], name=node.name, outputs=node.output, shapes=shapes,
                          dtypes=dtypes)

    @tf_op("OneHot")
    class OneHot:
        """tf2onnx 1.17 converts ``OneHot`` of 1-D indices with a constant
        depth only; the decodings take it of 2-D indices (a span head's best
        type per span) and of a loop counter with a depth known at run time
        (the clash rule's loop, :func:`kerasbert_apps.ner.overlaps.without_clashes`),
        with boolean values. Here (axis -1, any rank, any depth):
        ``Where(Equal(Unsqueeze(indices, -1), Range(depth)), on, off)``; a
        boolean result is chosen in uint8 and cast back (ONNX Runtime has no
        boolean ``Where`` kernel)."""

        @classmethod
        def version_18(cls, ctx, node, **kwargs):
            indices, depth, on_value, off_value = node.input
            utils.make_sure(node.get_attr_value("axis", -1) == -1, "%s: OneHot on the last axis only", node.name)
            builder = GraphBuilder(ctx)
            index = ctx.make_node("Cast", [indices], attr={"to": TensorProto.INT64}).output[0]
            index = builder.make_unsqueeze({"data": index, "axes": [-1]})
            size = ctx.make_node("Cast", [depth], attr={"to": TensorProto.INT64}).output[0]
            zero = ctx.make_const(utils.make_name("zero"), np.array(0, np.int64)).output[0]
            one = ctx.make_const(utils.make_name("one"), np.array(1, np.int64)).output[0]
            positions = ctx.make_node("Range", [zero, size, one]).output[0]
            hit = ctx.make_node("Equal", [index, positions]).output[0]
            shapes, dtypes = node.output_shapes, node.output_dtypes
            ctx.remove_node(node.name)
            if dtypes[0] == TensorProto.BOOL:
                on = ctx.make_node("Cast", [on_value], attr={"to": TensorProto.UINT8}).output[0]
                off = ctx.make_node("Cast", [off_value], attr={"to": TensorProto.UINT8}).output[0]
                picked = ctx.make_node("Where", [hit, on, off]).output[0]
                ctx.make_node("Cast", [picked], attr={"to": TensorProto.BOOL}, name=node.name, outputs=node.output,
                              shapes=shapes, dtypes=dtypes)
                return
            ctx.make_node("Where", [hit, on_value, off_value], name=node.name, outputs=node.output, shapes=shapes,
                          dtypes=dtypes)

    @tf_op("BlockLSTMV2")
    class BlockLSTM:
        """TensorFlow's fused LSTM over a whole sequence (the BIO heads'
        BiLSTM in serving graphs, :mod:`kerasbert_apps.ner.heads.bio.fused_bilstm`):
        tf2onnx 1.17 has no handler. Here ONNX's own ``LSTM`` op, one
        kernel for the sequence instead of a ``Loop`` of small ops per
        step, forward over the same input (a backward direction is the
        graph's ``ReverseSequence`` around it, converted as it is).
        ``w`` [inputs + units, 4 units], gates i, f, c, o (``BlockLSTMV2``'s
        order, Keras's), becomes ``W`` [1, 4 units, inputs] and ``R`` [1, 4
        units, units] in ONNX's order i, o, f, c; ``b`` the input bias (the
        recurrent one zero); ``seq_len_max`` every row's ``sequence_lens``
        (both give zeros past it); a ``cell_clip`` above 0 the ``clip``.
        Only the hidden output ``h`` is converted, without peepholes, with
        constant weights (the serving graph's frozen variables): anything
        else stops the conversion."""

        @classmethod
        def version_18(cls, ctx, node, **kwargs):
            seq_len_max, x, cs_prev, h_prev = node.input[:4]
            weights, bias = node.inputs[4], node.inputs[8]
            utils.make_sure(not node.get_attr_value("use_peephole", 0), "%s: BlockLSTMV2 with peepholes", node.name)
            utils.make_sure(not any(ctx.find_output_consumers(out) for out in node.output[:6]),
                            "%s: BlockLSTMV2 outputs other than h", node.name)
            utils.make_sure(weights.is_const() and bias.is_const(), "%s: BlockLSTMV2 weights that are not "
                            "constants", node.name)
            kernel, bias = weights.get_tensor_value(as_list=False), bias.get_tensor_value(as_list=False)
            units = kernel.shape[1] // 4
            dtype = kernel.dtype

            def onnx_gates(m):  # [..., 4 units] in i, f, c, o -> [4 units, ...] in i, o, f, c
                return np.concatenate([m[..., k * units : (k + 1) * units] for k in (0, 3, 1, 2)], -1).T

            w = ctx.make_const(utils.make_name("W"), onnx_gates(kernel[:-units])[None].astype(dtype)).output[0]
            r = ctx.make_const(utils.make_name("R"), onnx_gates(kernel[-units:])[None].astype(dtype)).output[0]
            b = np.concatenate([onnx_gates(bias), np.zeros([4 * units], dtype)])[None].astype(dtype)
            b = ctx.make_const(utils.make_name("B"), b).output[0]
            builder = GraphBuilder(ctx)
            rows = builder.make_slice({"data": ctx.make_node("Shape", [x]).output[0], "starts": [1], "ends": [2],
                                       "axes": [0]})
            steps = ctx.make_node("Cast", [seq_len_max], attr={"to": TensorProto.INT32}).output[0]
            lengths = ctx.make_node("Expand", [steps, rows]).output[0]
            initial_h = builder.make_unsqueeze({"data": h_prev, "axes": [0]})
            initial_c = builder.make_unsqueeze({"data": cs_prev, "axes": [0]})
            attr = {"hidden_size": units, "direction": "forward"}
            clip = float(node.get_attr_value("cell_clip", 0.0))
            if clip > 0:
                attr["clip"] = clip
            h = node.output[6]
            shapes, dtypes = [node.output_shapes[6]], [node.output_dtypes[6]]
            ctx.remove_node(node.name)
            lstm = ctx.make_node("LSTM", [x, w, r, b, lengths, initial_h, initial_c], attr=attr, name=node.name)
            builder.make_squeeze({"data": lstm.output[0], "axes": [1], "outputs": [h]}, shapes=shapes,
                                 dtypes=dtypes)

    @tf_op(["Select", "SelectV2"])
    class Select:
        """``tf.where`` of two values (every ``keras.ops.where``, the CRF's
        masks at each step of its loops among them): tf2onnx 1.17 writes
        ``Cast(c) * x + Cast(Not(c)) * y``, six ops (eight for booleans),
        for ONNX Runtime versions whose ``Where`` was slow; ONNX Runtime's
        ``Where`` is one kernel now, and exact where that sum is not
        (``-0.0``; an infinite value in the branch not taken). Here:
        ``Where``; booleans (ONNX Runtime has no boolean ``Where``) as
        ``Or(And(c, x), And(Not(c), y))``; ``Select``'s 1-D condition over
        rows reshaped to broadcast."""

        @classmethod
        def version_18(cls, ctx, node, **kwargs):
            utils.make_sure(len(node.input) == 3, "%s: Select of a condition alone", node.name)
            condition, true_value, false_value = node.input
            rank = ctx.get_rank(true_value) if ctx.get_rank(true_value) is not None else ctx.get_rank(false_value)
            if node.type == "Select" and ctx.get_rank(condition) == 1 and rank != 1:
                utils.make_sure(rank is not None, "%s: Select of a 1-D condition over values of unknown rank",
                                node.name)
                shape = ctx.make_const(utils.make_name("rows"), np.array([-1] + [1] * (rank - 1), np.int64))
                condition = ctx.make_node("Reshape", [condition, shape.output[0]]).output[0]
            shapes, dtypes = node.output_shapes, node.output_dtypes
            ctx.remove_node(node.name)
            if dtypes[0] == TensorProto.BOOL:
                taken = ctx.make_node("And", [condition, true_value]).output[0]
                other = ctx.make_node("And", [ctx.make_node("Not", [condition]).output[0], false_value]).output[0]
                ctx.make_node("Or", [taken, other], name=node.name, outputs=node.output, shapes=shapes, dtypes=dtypes)
                return
            ctx.make_node("Where", [condition, true_value, false_value], name=node.name, outputs=node.output,
                          shapes=shapes, dtypes=dtypes)

    _REGISTERED.append((Log1p, SearchSorted, UnsortedSegment, SignBit, OneHot, BlockLSTM, Select))
