"""tf2onnx's conversion in about half the memory: :func:`fresh_node_protos`.

Kept apart from :mod:`kerasbert.serving.onnx` (the conversion and its handlers), because it
replaces one of tf2onnx's own methods for the time of a conversion, and is tied to the
tf2onnx releases whose code it mirrors (:data:`UPDATE_PROTO_KNOWN`); the suite checks that the
installed release is one of them, and that the graph is the one tf2onnx's own method gives.
"""

import contextlib

#: The tf2onnx releases whose ``Node.update_proto`` :func:`fresh_node_protos` replaces (their code, read).
UPDATE_PROTO_KNOWN = ("1.17.0",)


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
