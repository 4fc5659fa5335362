"""Runners: how step 2 of a :class:`~kerasbert_apps.base.pipeline.Pipeline` runs a Keras model over rows.

:class:`GraphRunner` runs inside a TensorFlow graph (a ``tf.function``, the
SavedModel), :class:`HostRunner` on the host with ``predict_on_batch`` (JAX
and other backends); both sort rows by length and run them in groups, and
give the same results. :class:`ConvertibleRunner` runs inside the graph that
the ONNX export converts: one call over all the rows. :class:`EndsPadded`
wraps a span model so that the groups' ``[rows, len, len, k]`` outputs
stack (every span head uses it).
"""

import numpy as np


def _call(model, inputs):
    import keras

    return model(inputs, training=False) if isinstance(model, keras.layers.Layer) else model(inputs)


def keras_dtype(layer):
    """The variable dtype of ``layer``'s Keras dtype policy (``"float32"``, ``"bfloat16"``)."""
    return layer.dtype_policy.variable_dtype


class GraphRunner:
    """Runs models inside a TensorFlow graph (a ``tf.function``, a SavedModel).

    The encoder inside the model computes through
    :func:`kerasbert.models.fused_encoder.fused_encoder` (the same function, written
    with ops that oneDNN fuses). With ``jit_compile``, :meth:`rows` runs the
    model compiled by XLA, on a few padded shapes
    (:func:`kerasbert.serving.rows.jit_buckets`).

    ``compiled_heads`` (``export(..., jit_compile="head")``): a head may run
    its part after the encoder compiled by XLA on those padded shapes for a
    batch that is one group of rows (:meth:`rows` ``one_group``; the BIO
    head: BiLSTM, emissions and Viterbi,
    :func:`kerasbert_apps.ner.heads.bio.fused_bilstm.graph_scorers`): one
    kernel where a plain graph runs a loop of small ops per token, faster
    for one short text, slower for the groups of a big batch (which keep
    the plain graph). XLA compiles each shape once per process: the
    export's warmup requests (:func:`kerasbert.serving.rows.jit_warmup_texts`)
    compile them all when a server loads it."""

    in_graph = True

    def __init__(self, jit_compile=False, compiled_heads=False):
        self.jit_compile = bool(jit_compile)
        self.compiled_heads = bool(compiled_heads)

    def rows(self, model, inputs, one_group=None):
        """``model`` over rows of encoder inputs (``[rows, len]`` with a
        ``padding_mask``), in length-sorted groups each trimmed to its longest
        row; outputs ``[rows, len, ...]`` in the input order, zero-padded.
        ``one_group`` (same outputs) replaces ``model`` for a batch that is
        one group (:func:`kerasbert.serving.rows.by_length`)."""
        import tensorflow as tf

        from kerasbert.serving.rows import by_length
        from kerasbert.serving.rows import jit_buckets
        from kerasbert.models.fused_encoder import serving_graph

        def named(model):
            def fn(rows):
                with tf.name_scope("model"):  # stage names for bench/serving_profile.py --ops
                    return _call(model, rows)

            return fn

        fn = named(model)
        with serving_graph():
            return by_length(jit_buckets(fn) if self.jit_compile else fn, inputs,
                             one_group_fn=None if one_group is None else named(one_group))

    def call(self, model, inputs):
        """``model`` on ``inputs`` in one call."""
        from kerasbert.models.fused_encoder import serving_graph

        with serving_graph():
            return _call(model, inputs)


class ConvertibleRunner:
    """Runs models inside the TensorFlow graph that the ONNX export converts
    (:mod:`kerasbert.serving.onnx`): every model once, over all the rows
    (``[rows, len]``, padded to the longest), with the encoder's fused
    serving ops, as :class:`GraphRunner` runs one group of rows. Not
    :class:`GraphRunner`'s grouping by length (a while loop over
    TensorArrays that tf2onnx cannot convert), and ``in_graph`` False: a
    head swaps in a kernel of TensorFlow's own only where the conversion has
    an op for it (the BIO heads check for this runner: their fused BiLSTM,
    ``BlockLSTMV2``, becomes ONNX's ``LSTM``). The outputs are
    :class:`GraphRunner`'s (padding is masked), up to float rounding."""

    in_graph = False
    jit_compile = False
    compiled_heads = False

    def rows(self, model, inputs, one_group=None):  # one_group: a graph-only speed-up
        from kerasbert.models.fused_encoder import serving_graph

        with serving_graph():
            return _call(model, inputs)

    call = rows


def in_serving_graph(ids_endpoint):
    """An ``ids`` signature's function traced with the fused encoder
    (:func:`kerasbert.models.fused_encoder.serving_graph`), its argument names kept."""
    from kerasbert.models.fused_encoder import serving_graph

    def serve(token_ids, segment_ids, padding_mask):
        with serving_graph():
            return ids_endpoint(token_ids, segment_ids, padding_mask)

    return serve


class HostRunner:
    """Runs Keras models on the host with ``predict_on_batch`` (compiled by
    Keras on any backend), for :meth:`Pipeline.predict` on backends other
    than TensorFlow. Same results as :class:`GraphRunner`; shapes are rounded
    (widths to multiples of 8, row counts to powers of two) so that a backend
    that compiles per shape (JAX) compiles a few times only."""

    in_graph = False
    jit_compile = False  # Keras compiles predict_on_batch itself

    def __init__(self, batch_size=32):
        self.batch_size = int(batch_size)

    def rows(self, model, inputs, one_group=None):  # one_group: a graph-only speed-up
        from kerasbert.training.batching import padded_length

        arrays = {k: np.asarray(v) for k, v in inputs.items()}
        lengths = (arrays["padding_mask"] > 0).sum(axis=1)
        n_rows, width = arrays["padding_mask"].shape
        order = np.argsort(lengths, kind="stable")
        outputs = {}
        for begin in range(0, n_rows, self.batch_size):
            rows = order[begin : begin + self.batch_size]
            used = padded_length(max(int(lengths[rows].max()), 2), 8, width)
            # Row counts rounded up to a multiple of 8 with empty rows: fewer
            # shapes to compile, and a batch that a keras.distribution
            # DataParallel can split over its devices.
            size = padded_length(len(rows), 8)
            batch = {k: np.concatenate([v[rows, :used], np.zeros((size - len(rows), used) + v.shape[2:], v.dtype)])
                     for k, v in arrays.items()}
            out = model.predict_on_batch(batch)
            for key, value in out.items():
                value = np.asarray(value)[: len(rows)]
                if key not in outputs:
                    outputs[key] = np.zeros((n_rows, width) + value.shape[2:], value.dtype)
                outputs[key][rows, :used] = value
        return outputs

    def call(self, model, inputs):
        arrays = {k: np.asarray(v) for k, v in inputs.items()}
        n = len(next(iter(arrays.values())))
        size = max(8, 1 << max(n - 1, 0).bit_length())
        padded = {k: np.concatenate([v, np.zeros((size - n,) + v.shape[1:], v.dtype)]) for k, v in arrays.items()}
        return {k: np.asarray(v)[:n] for k, v in model.predict_on_batch(padded).items()}


class EndsPadded:
    """The model with its ``keys`` outputs (default ``logits``; each ``[rows,
    len, len, k]``) padded (or cut) to ``length`` on the end axis, so that
    every group of rows gives ``[rows, len, length, k]`` and the runners can
    stack them: ``__call__`` in TensorFlow graphs (:class:`GraphRunner`),
    ``predict_on_batch`` on the host (:class:`HostRunner`)."""

    def __init__(self, model, length, keys=("logits",)):
        self.model = model
        self.length = int(length)
        self.keys = tuple(keys)

    def __call__(self, rows):
        import tensorflow as tf

        out = self.model(rows, training=False)
        padded = {}
        for key in self.keys:
            logits = tf.cast(out[key], tf.float32)
            pad = tf.maximum(self.length - tf.shape(logits)[2], 0)
            padded[key] = tf.pad(logits, [[0, 0], [0, 0], [0, pad], [0, 0]])[:, :, : self.length]
        return padded

    def predict_on_batch(self, rows):
        out = self.model.predict_on_batch(rows)
        padded = {}
        for key in self.keys:
            logits = np.asarray(out[key], np.float32)
            pad = max(self.length - logits.shape[2], 0)
            padded[key] = np.pad(logits, [(0, 0), (0, 0), (0, pad), (0, 0)])[:, :, : self.length]
        return padded
