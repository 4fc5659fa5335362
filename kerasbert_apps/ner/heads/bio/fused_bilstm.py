"""The NER model's BiLSTM as TensorFlow's fused kernel, for serving graphs.

Keras's LSTM runs, on the TensorFlow backend, as a ``While`` loop of small
ops per time step. Inside a serving graph (:meth:`kerasbert_apps.base.pipeline.Pipeline.serve`,
which ``predict`` runs too on TensorFlow) :func:`graph_scorers` runs the
:class:`~kerasbert_apps.ner.heads.bio.model.NerModel` with its BiLSTM computed by
:func:`fused_bilstm` instead: TensorFlow's ``BlockLSTMV2`` (a core op, so
the export's op check passes) with the layer's own weights -- the same
numbers, about half the time for a short sentence on a CPU. The graph that
the ONNX export converts runs it too, and its ``BlockLSTMV2`` ops become
ONNX's own ``LSTM`` op (a handler in :mod:`kerasbert.serving.onnx`). An export with
``jit_compile="head"`` goes further for one short request and compiles the
whole head with XLA (:func:`graph_scorers`). Training and the JAX backend use
the Keras layer.
"""


def fused_bilstm(layer):
    """A function ``(x, mask) -> y`` that computes ``layer`` -- a Keras
    ``Bidirectional(LSTM(..., return_sequences=True))``, ``merge_mode="concat"``
    -- on ``x`` [batch, time, features] with a right-padded boolean ``mask``,
    using TensorFlow's fused ``BlockLSTMV2`` kernel (a core op) and the
    layer's own weights instead of Keras's step-by-step loop: the same numbers
    at the unmasked positions (padded positions are zero), about half the time
    for a short sentence on a CPU. The backward direction runs over each row
    reversed within its own length (``ReverseSequence``), which is what
    Keras's masked backward LSTM computes.

    ``None`` when the layer is not one this covers (other activations, no
    bias, another merge mode, a compute dtype other than float32): the caller
    then calls the layer itself."""
    import keras

    directions = (getattr(layer, "forward_layer", None), getattr(layer, "backward_layer", None))
    for lstm in directions:
        cell = getattr(lstm, "cell", None)
        if not (isinstance(lstm, keras.layers.LSTM) and lstm.return_sequences and cell.use_bias
                and cell.activation is keras.activations.tanh and cell.recurrent_activation is keras.activations.sigmoid
                and lstm.compute_dtype == "float32"):
            return None
    if layer.merge_mode != "concat" or directions[0].go_backwards or not directions[1].go_backwards:
        return None

    def call(x, mask):
        import tensorflow as tf

        x = tf.cast(x, tf.float32)
        lengths = tf.reduce_sum(tf.cast(mask, tf.int32), axis=1)

        def run(x, cell):  # [batch, time, features] -> [batch, time, units]
            zeros = tf.zeros([tf.shape(x)[0], cell.units])
            no_peephole = tf.zeros([cell.units])
            out = tf.raw_ops.BlockLSTMV2(  # gate order i, f, c, o: Keras's
                seq_len_max=tf.cast(tf.shape(x)[1], tf.int64), x=tf.transpose(x, [1, 0, 2]),
                cs_prev=zeros, h_prev=zeros, w=tf.concat([cell.kernel, cell.recurrent_kernel], 0),
                wci=no_peephole, wcf=no_peephole, wco=no_peephole, b=cell.bias, cell_clip=0.0, use_peephole=False,
            )
            return tf.transpose(out[6], [1, 0, 2])

        def reverse(x):
            return tf.reverse_sequence(x, lengths, seq_axis=1, batch_axis=0)

        forward = run(x, directions[0].cell)
        backward = reverse(run(reverse(x), directions[1].cell))
        return tf.concat([forward, backward], -1) * tf.cast(mask, tf.float32)[:, :, None]

    return call


def graph_scorers(model, compiled_head=False):
    """``(plain, compiled)``: functions ``rows -> {"potentials", "tags"}``
    computing ``model`` (a :class:`~kerasbert_apps.ner.heads.bio.model.NerModel`)
    in a TensorFlow graph: the encoder as the serving graph computes it, then
    the head (BiLSTM, emissions, CRF Viterbi or argmax).

    * ``plain``: the head with its BiLSTM run by :func:`fused_bilstm`;
    * ``compiled`` (with ``compiled_head``: ``export(..., jit_compile="head")``,
      for a batch that is one group of rows,
      :class:`~kerasbert_apps.base.runners.GraphRunner`): the head compiled by
      XLA on padded shapes (:func:`kerasbert.serving.rows.jit_buckets`): one kernel
      instead of the BiLSTM kernels and the Viterbi loop, several small ops per
      token; the same numbers (Keras's LSTM and CRF, masked padding). Both then
      call the encoder as one traced function, so the graph holds it (and a
      bfloat16 export's constant kernels) once.

    Either is ``None`` when there is nothing to do (no BiLSTM
    :func:`fused_bilstm` covers and no head to compile): then call the model itself."""
    import tensorflow as tf

    lstm = getattr(model, "lstm", None)
    bilstm = fused_bilstm(lstm) if lstm is not None else None
    compiled_head = compiled_head and hasattr(model, "head")
    if bilstm is None and not compiled_head:
        return None, None

    def scores(potentials, tags):
        return {"potentials": tf.cast(potentials, tf.float32), "tags": tf.cast(tags, tf.int32)}

    def encode(rows):
        return model.encoded(model.encoder(rows, training=False))

    def plain(rows):
        return scores(*model.head(encode(rows), rows["padding_mask"], bilstm=bilstm, training=False))

    if not compiled_head:
        return plain, None
    from kerasbert.serving.rows import jit_buckets

    encode = tf.function(encode)  # one trace, called by both functions
    head = jit_buckets(lambda x: scores(*model.head(x["sequence"], x["padding_mask"], training=False)))

    def compiled(rows):
        return head({"sequence": encode(rows), "padding_mask": rows["padding_mask"]})

    return plain, compiled
