"""Which ops an exported SavedModel uses, and whether TensorFlow Serving has them.

A text export may use core TensorFlow ops and the TF-Text ops that TF Serving
links (:data:`ALLOWED_TF_TEXT_OPS`); an ``ids`` export core ops only.
:func:`kerasbert.serving.saved_model.check_ops` refuses anything else before a
version is published.
"""

import functools
import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import tensorflow as tf

from kerasbert.errors import WriteError
from kerasbert.files.atomic import cache_base

#: TF-Text ops a graph built by :class:`GraphTokenizer` may contain, with the
#: TF-Text release that introduced each (see the module docstring).
ALLOWED_TF_TEXT_OPS = {
    "FastWordpieceTokenizeWithOffsets": "tensorflow_text.FastWordpieceTokenizer; TF-Text >= 2.7 (ops_lib)",
}



def list_ops(saved_model_dir):
    """Every op type in a SavedModel: the graphs' nodes and the nodes of every
    function in their libraries. Calls of library functions by name are not
    ops and are left out."""
    from tensorflow.core.protobuf import saved_model_pb2

    saved = saved_model_pb2.SavedModel()
    saved.ParseFromString((Path(saved_model_dir) / "saved_model.pb").read_bytes())
    ops, functions = set(), set()
    for meta_graph in saved.meta_graphs:
        graph = meta_graph.graph_def
        ops.update(node.op for node in graph.node)
        for function in graph.library.function:
            functions.add(function.signature.name)
            ops.update(node.op for node in function.node_def)
    return ops - functions


_CORE_OPS_SCRIPT = """
import json, sys
import tensorflow as tf
from tensorflow.core.framework import op_def_pb2
assert "tensorflow_text" not in sys.modules
names = {n for n in dir(tf.raw_ops) if not n.startswith("_")}
try:
    from tensorflow.python.client import pywrap_tf_session
    buf = pywrap_tf_session.TF_GetAllOpList()
    data = pywrap_tf_session.TF_GetBuffer(buf)
    op_list = op_def_pb2.OpList()
    op_list.ParseFromString(data)
    names.update(op.name for op in op_list.op)
except Exception:
    pass
assert "tensorflow_text" not in sys.modules
print(json.dumps(sorted(names)))
"""


@functools.lru_cache(maxsize=None)
def core_ops():
    """Names of the ops plain TensorFlow registers (``tf.raw_ops`` and the C++
    op registry), read in a fresh Python that never imports TF-Text (seconds:
    it imports TensorFlow), then cached on disk beside the Unicode tables
    (:func:`kerasbert.tokenizers.unicode_tables.cache_folder`), one file per TensorFlow installation (its version,
    folder and install time). A cache that cannot be read or written is
    skipped."""
    init = Path(tf.__file__).resolve()
    key = hashlib.sha256(f"{init}:{init.stat().st_mtime_ns}".encode()).hexdigest()[:16]
    path = cache_base() / "core-ops" / f"tensorflow-{tf.__version__}-{key}.json"
    try:
        names = json.loads(path.read_text(encoding="utf-8"))
        if isinstance(names, list) and "MatMul" in names:
            return frozenset(names)
    except (OSError, ValueError):
        pass
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    result = subprocess.run(
        [sys.executable, "-c", _CORE_OPS_SCRIPT], capture_output=True, text=True, env=env, check=True
    )
    names = json.loads(result.stdout.strip().splitlines()[-1])
    try:
        from kerasbert.files.atomic import atomic_write_bytes

        atomic_write_bytes(path, json.dumps(names).encode("utf-8"))
    except (OSError, WriteError):
        pass
    return frozenset(names)


def non_core_ops(ops):
    """The ops of ``ops`` that plain TensorFlow does not register."""
    return sorted(set(ops) - core_ops())


def disallowed_ops(ops):
    """The ops of ``ops`` that are neither core TensorFlow nor in
    :data:`ALLOWED_TF_TEXT_OPS` (empty when a graph is fit for TF Serving)."""
    return sorted(op for op in non_core_ops(ops) if op not in ALLOWED_TF_TEXT_OPS)
