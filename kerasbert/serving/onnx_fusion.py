"""The encoder of a converted graph in the forms ONNX Runtime runs fused (:func:`fuse_encoder`).

tf2onnx writes the BERT encoder of a kerasbert graph as many small ops:
each LayerNorm as the moments it is computed from, each self-attention as
its matrix products, reshapes, transposes, mask and softmax, each GELU as
its ``Erf`` formula. ONNX Runtime has one kernel for each, but its session
recognises none of these patterns as tf2onnx writes them, and
``onnxruntime.transformers.optimizer.optimize_model`` cannot be run on the
whole graph: its Transpose folding drops a ``Transpose`` that still feeds a
``Shape`` (the BiLSTM's reversal; the graph it returns does not load), and
its symbolic shape inference stops at an ``Expand`` whose shape is computed
from the data (the windows). :func:`fuse_encoder` rewrites the main graph
(``Loop`` and ``If`` bodies are left as they are):

* **LayerNorm** -> ``LayerNormalization`` (opset 17 and later). Written here:
  ONNX Runtime's LayerNorm fusions (its session's and the optimizer's) expect
  PyTorch's pattern (``Pow`` and ``Div``) or an older tf2onnx one (the shift
  as ``Sub``), not the ``Mul`` square, ``Reciprocal`` and ``Neg`` that
  tf2onnx 1.17 writes for Keras's ``LayerNormalization`` and kerasbert's
  fused encoder;
* **self-attention** -> contrib ``Attention`` (``com.microsoft``), by ONNX
  Runtime's own BERT attention fusion (``onnxruntime.transformers.fusion_attention``)
  run alone, after three rewrites that make tf2onnx's pattern the one it
  recognises (:func:`fuse_with_onnxruntime`);
* **GELU** -> contrib ``Gelu`` (``FastGelu`` for the tanh approximation), by
  ONNX Runtime's own GELU fusions (``onnxruntime.transformers.fusion_gelu``,
  ``fusion_fastgelu``), which know the ``Mul(x, 1/sqrt(2))`` form tf2onnx
  writes; the session's own optimizations leave it as it is.

Not fused: a residual ``Add`` and its LayerNorm as ``SkipLayerNormalization``
(ONNX Runtime 1.32's CPU kernel of it is several times slower than ``Add``
and ``LayerNormalization``), and a bias with its GELU as ``BiasGelu`` (the
session folds the bias into the matrix product's ``Gemm`` instead).

Every rewrite computes what the ops it replaces computed, up to float
rounding; a pattern that is not exactly the one expected is left as it is.
"""

from collections import Counter

import numpy as np

#: The lowest opset ``LayerNormalization`` exists in.
LAYER_NORM_OPSET = 17
#: ONNX Runtime's contrib ops' domain.
CONTRIB = "com.microsoft"


def fuse_encoder(model, attention=True):
    """``model`` (an ``onnx.ModelProto`` of a converted kerasbert graph) with
    its encoder's LayerNorms as ``LayerNormalization``, its self-attention
    as ONNX Runtime's ``Attention`` (``attention`` False: left as it is) and
    its GELUs as ``Gelu`` or ``FastGelu``; the model given is not changed. A graph without
    these patterns comes back as it was."""
    return fuse_encoder_with_stats(model, attention)[0]


def fuse_encoder_with_stats(model, attention=True):
    """``(fused_model, stats)``: :func:`fuse_encoder`'s model, and ``stats``
    (a dict): how many ``layer_norms``, ``attentions`` and ``gelus`` were
    fused, ``nodes_before`` and ``nodes_after`` and ``ops_before`` and
    ``ops_after`` (op type -> count; the main graph's)."""
    import onnx

    fused = onnx.ModelProto()
    fused.CopyFrom(model)
    stats = {"nodes_before": len(model.graph.node), "ops_before": op_counts(model),
             "layer_norms": 0, "attentions": 0, "gelus": 0}
    if _opset(fused) >= LAYER_NORM_OPSET:
        stats["layer_norms"] = fuse_layer_norms(fused.graph)
    if stats["layer_norms"]:  # an encoder: ONNX Runtime's fusions, which start from its LayerNorms
        stats["attentions"], stats["gelus"] = fuse_with_onnxruntime(fused, attention)
    stats["nodes_after"] = len(fused.graph.node)
    stats["ops_after"] = op_counts(fused)
    return fused, stats


def op_counts(model):
    """Op type -> how many nodes of the main graph run it (a ``Counter``)."""
    return Counter(node.op_type for node in model.graph.node)


def _opset(model):
    return max((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), default=0)


# ---------------------------------------------------------------------------- graph
class _Graph:
    """Lookups on a graph: producers, consumers (a name used inside a
    subgraph counts as a consumer that is not a node of this graph) and
    constants."""

    def __init__(self, graph):
        self.graph = graph
        self.producer = {o: n for n in graph.node for o in n.output if o}
        self.consumers = {}
        for node in graph.node:
            for name in node.input:
                self.consumers.setdefault(name, []).append(node)
            for name in _subgraph_names(node):
                self.consumers.setdefault(name, []).append(None)
        for value in graph.output:
            self.consumers.setdefault(value.name, []).append(None)
        self.initializers = {t.name: t for t in graph.initializer}

    def constant(self, name):
        """The value of ``name`` when it is an initializer or a ``Constant`` node's output, else None."""
        from onnx import numpy_helper

        if name in self.initializers:
            return numpy_helper.to_array(self.initializers[name])
        node = self.producer.get(name)
        if node is not None and node.op_type == "Constant" and node.attribute and node.attribute[0].name == "value":
            return numpy_helper.to_array(node.attribute[0].t)
        return None

    def parent(self, node, index, op_type):
        """The node producing ``node``'s input ``index`` when its op is ``op_type``, else None."""
        if index >= len(node.input):
            return None
        found = self.producer.get(node.input[index])
        return found if found is not None and found.op_type == op_type else None

    def only_consumers(self, name, nodes):
        """Whether every consumer of ``name`` is one of ``nodes`` (not a graph output, not a subgraph)."""
        return all(c is not None and any(c is n for n in nodes) for c in self.consumers.get(name, []))


def _subgraph_names(node):
    """The names a node's subgraphs read (their nodes' inputs, recursively)."""
    import onnx

    names = set()
    for attribute in node.attribute:
        graphs = [attribute.g] if attribute.type == onnx.AttributeProto.GRAPH else list(attribute.graphs)
        for graph in graphs:
            for inner in graph.node:
                names.update(inner.input)
                names.update(_subgraph_names(inner))
    return names


def _other_input(node, name):
    """The input of a two-input node that is not ``name`` (None when both or neither are)."""
    if len(node.input) != 2 or (node.input[0] == name) == (node.input[1] == name):
        return None
    return node.input[1] if node.input[0] == name else node.input[0]


def _axes(graph, node):
    """A reduction's axes (attribute or input), or None when not constant."""
    for attribute in node.attribute:
        if attribute.name == "axes":
            return list(attribute.ints)
    if len(node.input) > 1 and node.input[1]:
        value = graph.constant(node.input[1])
        return None if value is None else [int(v) for v in np.ravel(value)]
    return None


def _attribute(node, name, default):
    import onnx

    for attribute in node.attribute:
        if attribute.name == name:
            return onnx.helper.get_attribute_value(attribute)
    return default


def _rewrite(graph, replacements):
    """Apply ``replacements`` (pairs of a list of ``graph``'s nodes and the
    list of new nodes that replace them, placed where the last of the old
    ones was) at once: the graph's nodes are copied anew, so node objects
    taken from it before are stale after."""
    drop, at = set(), {}
    for old, new in replacements:
        drop.update(id(n) for n in old)
        positions = [i for i, n in enumerate(graph.node) if any(n is o for o in old)]
        at[max(positions)] = new
    nodes = []
    for i, node in enumerate(graph.node):
        nodes.extend(at.get(i, []))
        if id(node) not in drop:
            nodes.append(node)
    del graph.node[:]
    graph.node.extend(nodes)


def _sort(graph):
    """Order ``graph``'s nodes so that each comes after the producers of
    what it reads, its subgraphs' outer-scope values included (ONNX
    Runtime's fusions append the nodes they add at the end), keeping the
    present order where it can."""
    import heapq

    nodes = list(graph.node)
    producer = {o: i for i, n in enumerate(nodes) for o in n.output if o}
    needs = [{producer[x] for x in (*n.input, *_subgraph_names(n)) if x in producer} - {i}
             for i, n in enumerate(nodes)]
    waiting = [len(n) for n in needs]
    users = [[] for _ in nodes]
    for i, sources in enumerate(needs):
        for j in sources:
            users[j].append(i)
    ready = [i for i, w in enumerate(waiting) if w == 0]
    heapq.heapify(ready)
    order = []
    while ready:
        i = heapq.heappop(ready)
        order.append(nodes[i])
        for j in users[i]:
            waiting[j] -= 1
            if waiting[j] == 0:
                heapq.heappush(ready, j)
    if len(order) != len(nodes):
        raise ValueError("the graph has a cycle")
    del graph.node[:]
    graph.node.extend(order)


def _unique(graph, base):
    """A name for a new initializer or value that the graph does not use yet."""
    used = {t.name for t in graph.initializer} | {o for n in graph.node for o in n.output}
    name, i = base, 0
    while name in used:
        i += 1
        name = f"{base}_{i}"
    return name


# ------------------------------------------------------------------------ LayerNorm
def fuse_layer_norms(graph):
    """Rewrite each LayerNorm of ``graph`` (an ``onnx.GraphProto``; its
    nodes, not its subgraphs') as tf2onnx writes it into one
    ``LayerNormalization`` over the last axis; returns how many. Two forms,
    both from ``mean = ReduceMean(x)``, ``d = Sub(x, mean)``,
    ``r = Reciprocal(Sqrt(Add(ReduceMean(Mul(d, d)), epsilon)))`` and
    ``s = Mul(r, gamma)`` (reductions over the last axis, kept):
    ``Add(Mul(d, s), beta)`` (kerasbert's fused encoder) and
    ``Add(Mul(x, s), Add(Mul(Neg(mean), s), beta))`` (Keras's
    ``LayerNormalization``, from ``tf.nn.moments``); without ``beta`` when
    it is all zeros (tf2onnx folds adding it away)."""
    lookup, found, taken = _Graph(graph), [], set()
    for node in graph.node:
        match = _match_layer_norm(lookup, node) if node.op_type == "ReduceMean" else None
        if match is not None and not taken.intersection(id(n) for n in match[0]):
            taken.update(id(n) for n in match[0])
            found.append(match)
    _rewrite(graph, found)
    return len(found)


def _match_layer_norm(g, mean):
    """``(old_nodes, [new node])`` of the LayerNorm whose mean is ``mean``, or None."""
    import onnx

    if _axes(g, mean) != [-1] or _attribute(mean, "keepdims", 1) != 1:
        return None
    x, users = mean.input[0], [u for u in g.consumers.get(mean.output[0], []) if u is not None]
    sub = next((u for u in users if u.op_type == "Sub" and list(u.input) == [x, mean.output[0]]), None)
    neg = next((u for u in users if u.op_type == "Neg"), None)
    if sub is None or len(g.consumers[mean.output[0]]) != (1 if neg is None else 2):
        return None
    d = sub.output[0]
    chain = [next((u for u in g.consumers.get(d, []) if u is not None and u.op_type == "Mul"
                   and list(u.input) == [d, d]), None)]
    for op in ("ReduceMean", "Add", "Sqrt", "Reciprocal", "Mul"):
        chain.append(chain[-1] and _only_user(g, chain[-1].output[0], op))
    if any(n is None for n in chain):
        return None
    square, variance, add_eps, sqrt, reciprocal, scale = chain
    epsilon = g.constant(_other_input(add_eps, variance.output[0]) or "")
    gamma_name = _other_input(scale, reciprocal.output[0])
    gamma = g.constant(gamma_name or "")
    if _axes(g, variance) != [-1] or _attribute(variance, "keepdims", 1) != 1 or epsilon is None \
            or epsilon.size != 1 or gamma is None or gamma.shape[-1:] != (gamma.size,):
        return None
    s, width, beta = scale.output[0], gamma.size, None
    s_users = g.consumers.get(s, [])
    if any(u is None or u.op_type != "Mul" for u in s_users):
        return None
    if neg is None:  # Mul(d, s)
        if len(s_users) != 1 or _other_input(s_users[0], s) != d:
            return None
        tail = [s_users[0]]
    else:  # Add(Mul(x, s), Mul(Neg(mean), s)), or Add(Mul(x, s), Add(Mul(Neg(mean), s), beta))
        times = next((u for u in s_users if _other_input(u, s) == x), None)
        shift = next((u for u in s_users if _other_input(u, s) == neg.output[0]), None)
        plus = shift and _only_user(g, shift.output[0], "Add")
        if times is None or plus is None or len(s_users) != 2:
            return None
        tail = [neg, times, shift, plus]
        if _other_input(plus, shift.output[0]) != times.output[0]:
            beta = _other_input(plus, shift.output[0])
            last = _only_user(g, times.output[0], "Add")
            if last is None or _other_input(last, times.output[0]) != plus.output[0]:
                return None
            tail.append(last)
    plus_beta = _only_user(g, tail[-1].output[0], "Add") if beta is None else None
    if plus_beta is not None and _width(g, _other_input(plus_beta, tail[-1].output[0]), width):
        beta = _other_input(plus_beta, tail[-1].output[0])
        tail.append(plus_beta)
    if beta is not None and not _width(g, beta, width):
        return None
    old = [mean, sub, square, variance, add_eps, sqrt, reciprocal, scale, *tail]
    for node in old[:-1]:  # nothing outside reads an intermediate value
        if not all(g.only_consumers(o, old) for o in node.output):
            return None
    inputs = [x, _vector(g, gamma_name, gamma)] + ([] if beta is None else [_vector(g, beta, g.constant(beta))])
    fused = onnx.helper.make_node("LayerNormalization", inputs, [old[-1].output[0]],
                                  name=_unique(g.graph, f"{old[-1].name}_LayerNormalization"), axis=-1,
                                  epsilon=float(np.ravel(epsilon)[0]))
    return old, [fused]


def _only_user(g, name, op_type):
    """The one node that reads ``name`` when it runs ``op_type``, else None."""
    users = g.consumers.get(name, [])
    return users[0] if len(users) == 1 and users[0] is not None and users[0].op_type == op_type else None


def _width(g, name, width):
    """Whether ``name`` is a constant of ``width`` values along its last axis only (a LayerNorm's shift)."""
    value = g.constant(name or "")
    return value is not None and value.size == width and value.shape[-1:] == (width,)


def _vector(g, name, value):
    """``name``, or a new initializer holding ``value`` as a vector when it has more dimensions."""
    from onnx import numpy_helper

    if value.ndim == 1 and name in g.initializers:
        return name
    new = _unique(g.graph, f"{name}_vector")
    g.graph.initializer.append(numpy_helper.from_array(np.ravel(value), new))
    return new


# ------------------------------------------------------------- ONNX Runtime's fusions
def fuse_with_onnxruntime(model, attention=True):
    """Run ONNX Runtime's BERT attention fusion (when ``attention``) and its
    GELU fusions (``Gelu``, and ``FastGelu`` for the tanh approximation) on
    ``model`` (an ``onnx.ModelProto``, changed in place, its LayerNorms
    already fused: the attention fusion starts from the LayerNorm after each
    attention); returns how many ``Attention`` and GELU nodes they made.
    tf2onnx's attention is first rewritten into the pattern the fusion
    recognises:

    * the number of heads is read from the graph (the constant ``[heads,
      head_size]`` the queries are reshaped with: the fusion cannot find it
      in tf2onnx's shape computation); a graph with none, or several, is
      not fused;
    * the scores' scale ``Mul(qk, 1 / sqrt(head_size))`` becomes
      ``Div(qk, sqrt(head_size))``: the mask added to them is a ``Mul``
      too, and the fusion takes the first ``Mul`` it finds for either. Its
      ``Attention`` scales by ``1 / sqrt(head_size)`` without reading the
      constant, so a graph scaled otherwise is not fused;
    * the mask's ``Slice(Unsqueeze(mask, axes=[1, 2]))`` (a slice that keeps
      everything) becomes two ``Unsqueeze``, as the fusion expects;

    and after: kerasbert's encoder runs on rows (``[batch * length,
    hidden]``) while ``Attention`` takes and gives ``[batch, length,
    hidden]``, so each one's input is reshaped to the mask's ``[batch,
    length]`` and its output back to rows."""
    from onnxruntime.transformers.fusion_fastgelu import FusionFastGelu
    from onnxruntime.transformers.fusion_gelu import FusionGelu
    from onnxruntime.transformers.fusion_options import AttentionMaskFormat
    from onnxruntime.transformers.onnx_model_bert import BertOnnxModel

    heads = _heads(_Graph(model.graph)) if attention else None
    if heads is not None and not _scale_as_division(model.graph, heads[1]):
        heads = None
    if heads is not None:
        _mask_unsqueezes(model.graph)
    bert = BertOnnxModel(model, *((heads[0], heads[0] * heads[1]) if heads else (0, 0)))
    if heads is not None:
        bert.attention_mask.set_mask_format(AttentionMaskFormat.AttentionMask)  # the 0/1 mask as it is
        bert.attention_fusion.apply()
    FusionGelu(bert).apply()  # the erf GELU
    FusionFastGelu(bert).apply()  # the tanh approximation
    graph = model.graph
    attentions = [n for n in graph.node if n.op_type == "Attention" and n.domain == CONTRIB]
    gelus = sum(n.op_type in ("Gelu", "FastGelu") and n.domain == CONTRIB for n in graph.node)
    if attentions:
        _rows_to_batches(graph, attentions, heads[0] * heads[1])
    if attentions or gelus:
        _sort(graph)  # the fusions append what they add
        if not any(o.domain == CONTRIB for o in model.opset_import):
            model.opset_import.append(_onnx().helper.make_opsetid(CONTRIB, 1))
    return len(attentions), gelus


def _onnx():
    import onnx

    return onnx


def _scores(g, softmax):
    """The nodes that may scale the scores a ``Softmax`` takes: its input's
    producer and, when that is an ``Add`` (of the mask), its parents."""
    first = g.producer.get(softmax.input[0])
    if first is None:
        return []
    return [first] + ([p for p in (g.producer.get(x) for x in first.input) if p is not None]
                      if first.op_type == "Add" else [])


def _heads(g):
    """``(heads, head_size)``: the constant tail of the shape that the query
    of each ``Softmax`` 's query-key product is reshaped with
    (``Reshape(q, Concat(batch_and_length, [heads, head_size]))``), or None
    when there is none or they differ."""
    found = set()
    for softmax in (n for n in g.graph.node if n.op_type == "Softmax"):
        for scaled in _scores(g, softmax):
            product = g.parent(scaled, 0, "MatMul")
            transpose = product and g.parent(product, 0, "Transpose")
            reshape = transpose and g.parent(transpose, 0, "Reshape")
            shape = reshape and g.producer.get(reshape.input[1])
            while shape is not None and shape.op_type == "Cast":
                shape = g.producer.get(shape.input[0])
            tail = g.constant(shape.input[-1]) if shape is not None and shape.op_type == "Concat" else None
            if tail is not None and tail.shape == (2,):
                found.add(tuple(int(v) for v in tail))
    return found.pop() if len(found) == 1 else None


def _scale_as_division(graph, head_size):
    """Rewrite each ``Mul(qk, 1 / sqrt(head_size))`` before a softmax as
    ``Div(qk, sqrt(head_size))``; False (and nothing rewritten) when a
    ``Div`` there holds another constant (the fusion would not read it)."""
    onnx = _onnx()
    g, found, root = _Graph(graph), [], None
    for softmax in (n for n in graph.node if n.op_type == "Softmax"):
        for node in _scores(g, softmax):
            product = g.parent(node, 0, "MatMul")
            scale = g.constant(node.input[1]) if node.op_type in ("Mul", "Div") and len(node.input) == 2 else None
            if product is None or scale is None or scale.size != 1:
                continue
            scale = float(np.ravel(scale)[0])
            if node.op_type == "Div":
                if not np.isclose(scale, np.sqrt(head_size), rtol=1e-6, atol=0):
                    return False
                continue
            if not np.isclose(scale, 1 / np.sqrt(head_size), rtol=1e-6, atol=0) \
                    or not g.only_consumers(node.output[0], [g.producer[softmax.input[0]]]):
                continue
            if root is None:
                root = _unique(graph, "attention_scale_root")
                graph.initializer.append(onnx.numpy_helper.from_array(np.array(np.sqrt(head_size), np.float32), root))
            found.append(([node], [onnx.helper.make_node("Div", [product.output[0], root], [node.output[0]],
                                                         name=f"{node.name}_Div")]))
    _rewrite(graph, found)
    return True


def _mask_unsqueezes(graph):
    """Rewrite ``Slice(Unsqueeze(mask, axes=[1, 2]))`` feeding a ``Sub`` (the
    attention mask's ``1 - mask[:, None, None, :]``, the slice keeping
    everything) as two ``Unsqueeze`` of one axis each."""
    onnx = _onnx()
    g, found = _Graph(graph), []
    for node in graph.node:
        users = g.consumers.get(node.output[0], [None]) if node.op_type == "Slice" else [None]
        if not all(u is not None and u.op_type == "Sub" for u in users):
            continue
        unsqueeze = g.parent(node, 0, "Unsqueeze")
        axes = g.constant(unsqueeze.input[1]) if unsqueeze is not None and len(unsqueeze.input) == 2 else None
        if axes is None or axes.tolist() != [1, 2] or not g.only_consumers(unsqueeze.output[0], [node]) \
                or not _keeps_all(g, node, 4):
            continue
        middle = _unique(graph, f"{unsqueeze.output[0]}_1")
        one = _unique(graph, f"{unsqueeze.name}_axis")
        graph.initializer.append(onnx.numpy_helper.from_array(np.array([1], np.int64), one))
        first = onnx.helper.make_node("Unsqueeze", [unsqueeze.input[0], one], [middle], name=f"{unsqueeze.name}_1")
        second = onnx.helper.make_node("Unsqueeze", [middle, one], [node.output[0]], name=f"{unsqueeze.name}_2")
        found.append(([unsqueeze, node], [first, second]))
    _rewrite(graph, found)


def _keeps_all(g, node, rank):
    """Whether a ``Slice`` of a rank-``rank`` tensor keeps every element:
    starts 0, steps 1, ends at least 10**9 (what tf2onnx writes for an end
    not given)."""
    values = [g.constant(x) if x else None for x in (*node.input[1:], "", "")[:4]]
    starts, ends = values[0], values[1]
    axes = np.arange(rank) if values[2] is None and len(node.input) < 4 else values[2]
    steps = np.ones(rank) if values[3] is None and len(node.input) < 5 else values[3]
    if any(v is None for v in (starts, ends, axes, steps)) or len(np.ravel(axes)) != rank:
        return False
    return (sorted(int(a) % rank for a in np.ravel(axes)) == list(range(rank)) and not np.any(starts)
            and np.all(steps == 1) and np.all(ends >= 10**9))


def _rows_to_batches(graph, attentions, hidden):
    """Reshape each ``Attention`` 's input to its mask's ``[batch, length,
    width]``, and its output (``hidden`` wide) back to the input's leading
    dimensions: rows as kerasbert's encoder has them, or batches (then both
    reshapes keep the shape)."""
    onnx = _onnx()
    found, shapes = [], {}
    width, rest = _unique(graph, "attention_width"), _unique(graph, "attention_rest")
    graph.initializer.append(onnx.numpy_helper.from_array(np.array([hidden], np.int64), width))
    graph.initializer.append(onnx.numpy_helper.from_array(np.array([-1], np.int64), rest))
    for attention in attentions:
        mask, name, before = attention.input[3], attention.name, []
        names = {k: _unique(graph, f"{name}_{k}") for k in ("leading", "back", "batches", "output")}
        if mask not in shapes:
            shapes[mask] = _unique(graph, f"{name}_shape")
            before += [onnx.helper.make_node("Shape", [mask], [f"{shapes[mask]}_mask"], name=f"{name}_MaskShape"),
                       onnx.helper.make_node("Concat", [f"{shapes[mask]}_mask", rest], [shapes[mask]],
                                             name=f"{name}_Shape", axis=0)]
        source, output = attention.input[0], attention.output[0]
        before += [onnx.helper.make_node("Shape", [source], [names["leading"]], name=f"{name}_Leading", end=-1),
                   onnx.helper.make_node("Concat", [names["leading"], width], [names["back"]], name=f"{name}_Back",
                                         axis=0),
                   onnx.helper.make_node("Reshape", [source, shapes[mask]], [names["batches"]],
                                         name=f"{name}_ToBatches")]
        attention.input[0], attention.output[0] = names["batches"], names["output"]
        after = onnx.helper.make_node("Reshape", [names["output"], names["back"]], [output], name=f"{name}_ToRows")
        found.append(([attention], [*before, attention, after]))
    _rewrite(graph, found)
