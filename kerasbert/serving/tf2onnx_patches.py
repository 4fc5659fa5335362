"""tf2onnx's conversion in less memory (:func:`fresh_node_protos`) and less time
(:func:`one_graph_copy`).

Kept apart from :mod:`kerasbert.serving.onnx` (the conversion and its handlers), because each
replaces one of tf2onnx's own functions for the time of a conversion, and is tied to the
tf2onnx releases whose code it mirrors (:data:`UPDATE_PROTO_KNOWN`, :data:`OPTIMIZE_GRAPH_KNOWN`);
the suite checks that the installed release is one of them, and that the graph is the one
tf2onnx's own code gives.
"""

import contextlib
import copy

#: The tf2onnx releases whose ``Node.update_proto`` :func:`fresh_node_protos` replaces (their code, read).
UPDATE_PROTO_KNOWN = ("1.17.0",)
#: The tf2onnx releases whose ``optimizer.optimize_graph`` :func:`one_graph_copy` wraps (their code, read).
OPTIMIZE_GRAPH_KNOWN = ("1.17.0",)


@contextlib.contextmanager
def fresh_node_protos():
    """During a conversion, tf2onnx's ``Node.update_proto`` writes each node
    into a new ``NodeProto`` instead of clearing and refilling the node's own.

    tf2onnx rewrites every node's proto after each of its graph optimizers
    (three dozen passes here), a constant's weights included. Under
    protobuf's upb runtime (the default) a message's cleared fields keep
    their memory until the whole message is freed, so each pass kept one
    more copy of the weights: about six gigabytes at the peak for a MiniLM
    tagger's export, against three with this. The result is the same graph
    (the same method, only into a fresh proto). Only for the releases in
    :data:`UPDATE_PROTO_KNOWN`; others are left as they are."""
    import onnx
    import tf2onnx
    from tf2onnx.graph import Node

    if tf2onnx.__version__ not in UPDATE_PROTO_KNOWN:
        yield
        return
    original = Node.update_proto

    def update_proto(self, external_tensor_storage=None):
        old = self._op
        self._op = onnx.NodeProto(name=old.name, op_type=old.op_type, domain=old.domain, doc_string=old.doc_string)
        self._op.input.extend(self.input)
        self._op.output.extend(self.output)
        for attr_name, sub_graph in (self.get_body_graphs() or {}).items():
            graph_proto = sub_graph.make_graph("graph for " + self.name + " " + attr_name,
                                               external_tensor_storage=external_tensor_storage)
            self.set_attr(attr_name, graph_proto)
        self._op.attribute.extend(self.get_onnx_attrs(external_tensor_storage).values())

    Node.update_proto = update_proto
    try:
        yield
    finally:
        Node.update_proto = original


@contextlib.contextmanager
def one_graph_copy():
    """During a conversion, tf2onnx's graph optimizers run on the graph
    itself, after one copy of it, instead of on a new copy each.

    tf2onnx (``optimizer.optimize_graph`` with ``catch_errors``, its default
    for a graph under 2 GB) deep-copies the whole graph, weights included,
    before each of its optimizer passes (three dozen here), so that a pass
    that fails is skipped: a large share of the conversion's time. Here the
    passes run uncopied; if one fails, tf2onnx's own function runs again on
    the copy taken before the first, so a failing pass is skipped as before.
    The same graph when none fails (the same passes in the same order). Only
    for the releases in :data:`OPTIMIZE_GRAPH_KNOWN`; others are left as they
    are."""
    import tf2onnx
    from tf2onnx import optimizer

    if tf2onnx.__version__ not in OPTIMIZE_GRAPH_KNOWN:
        yield
        return
    original = optimizer.optimize_graph

    def optimize_graph(graph, catch_errors=True, optimizers=None):
        if not catch_errors:
            return original(graph, catch_errors, optimizers)
        untouched = copy.deepcopy(graph)
        try:
            return original(graph, False, optimizers)
        except Exception:  # noqa: BLE001 (a pass failed: tf2onnx's own way, which skips it)
            return original(untouched, True, optimizers)

    optimizer.optimize_graph = optimize_graph
    try:
        yield
    finally:
        optimizer.optimize_graph = original
