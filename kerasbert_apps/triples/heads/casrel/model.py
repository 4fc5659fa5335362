"""The triple network: CasRel-style cascade of span pointers on a BERT encoder.

::

    token_ids, segment_ids, padding_mask ─> encoder ─> dropout ─> h [batch, len, H]
        h ─> Dense(1) ─> subject_start [batch, len]
        h ─> Dense(1) ─> subject_end   [batch, len]
        h, subject_span [batch, 2] ─> conditional LayerNorm ─> h_s
        h_s ─> Dense(P) ─> object_start [batch, len, P]
        h_s ─> Dense(P) ─> object_end   [batch, len, P]

``subject_span`` is the (start token, end token) of ONE subject per example:
the gold subject sampled for the step when training (CasRel), every decoded
subject in turn when predicting. The model's outputs are LOGITS (the loss
takes them with ``from_logits=True``, stable at any value); the decoding
sub-models (:meth:`TripleModel.decoders`) output their sigmoid:
``object_*[b, i, p]`` is then the probability that token ``i`` starts/ends
an object of predicate ``p`` for that subject.

Subject conditioning: conditional LayerNorm (bert4keras), not CasRel's sum
-------------------------------------------------------------------------
CasRel adds ``v_s`` (the mean of the subject's start and end token vectors) to
every token vector and feeds the sum straight to the linear object taggers.
Because nothing non-linear sits between the sum and the taggers,
``w_p . (h_i + v_s) + b_p = w_p . h_i + (w_p . v_s + b_p)``: the subject only
shifts each predicate's logit by the same amount at every position. It can
switch a predicate on or off, but it cannot move *where* the object is; two
subjects of the same sentence that share a predicate get the same object
positions. Conditional LayerNorm (Su Jianlin's bert4keras CasRel) computes
``LN(h_i) * (gamma + W_g [h_start; h_end]) + (beta + W_b [h_start; h_end])``: a
per-feature, subject-dependent scaling that changes each position's score
differently, at the cost of 2 x (2H x H) parameters. ``W_g`` and ``W_b`` start
at zero, so at initialisation it is a plain LayerNorm over the encoder output.
It runs in float32 under mixed precision.

Loss and class imbalance: plain binary cross-entropy, as CasRel
---------------------------------------------------------------
Pointer labels are very sparse (about 2 positives per 100 tokens for subjects,
~1 in 5000 for objects x predicates). We keep CasRel's loss: binary
cross-entropy per pointer, averaged over real (non-padding) tokens; for the
object pointers summed over predicates first (so a predicate's gradient is not
divided by ``P``). Reasons: (1) it is the loss of the published numbers we
compare against; (2) the decode thresholds (0.5) keep their meaning of
"probability > 1/2" -- bert4keras' trick of squaring the probabilities
(``p**2``) inside the loss changes what the output means (the threshold then
sits at ``p = 0.71`` of the unsquared value) and re-weighting positives would
need a per-dataset weight. The one imbalance measure taken is the focal-loss
paper's prior-probability bias initialisation: every pointer starts at
``p = 0.01`` instead of 0.5, so the first steps are not spent pushing
thousands of negatives down (it changes where training starts, not the loss).

All head layers are named ``triples_head_*`` so the optimizer can give them
their own learning rate (:class:`kerasbert.training.optimizer.GroupedAdamW`); pointer
outputs are float32 under mixed precision.

Decoding without a forward pass per subject: :meth:`TripleModel.decoders`
returns two functional sub-models sharing these layers -- ``encode`` (text ->
``sequence`` + subject pointers) and ``objects`` (``sequence`` + subject spans
-> object pointers) -- so a predictor encodes a batch once, then repeats each
sequence once per candidate subject and scores all subjects of the batch in
one call (see :mod:`kerasbert_apps.triples.heads.casrel.pipeline`).
"""

import math

import keras
from keras import ops

from kerasbert_apps.base.pipeline import ENCODER_INPUTS
from kerasbert_apps.base.model import TaskModel
from kerasbert_apps.base.model import encoder_inputs

HEAD_PREFIX = "triples_head_"
PRIOR = 0.01  # initial probability of every pointer (bias initialisation)
POINTERS = ("subject_start", "subject_end", "object_start", "object_end")


@keras.saving.register_keras_serializable(package="kerasbert_triples")
class SubjectConditionalLayerNorm(keras.layers.Layer):
    """LayerNorm over ``sequence`` whose scale and shift depend on the subject.

    ``call(sequence, subject_span)``: ``sequence`` [batch, len, H],
    ``subject_span`` [batch, 2] int (start, end token index). The subject
    vector is the concatenation of the sequence vectors at those two positions
    (gathered by a one-hot matrix product: backend-agnostic and
    differentiable); ``gamma + c W_g`` and ``beta + c W_b`` then scale and shift
    the normalised sequence. ``W_g``, ``W_b`` (``scale_kernel``,
    ``shift_kernel``) start at zero and, unlike ``gamma``/``beta``, get weight
    decay (towards a plain LayerNorm).
    """

    def __init__(self, epsilon=1e-12, **kwargs):
        super().__init__(**kwargs)
        self.epsilon = float(epsilon)

    def build(self, sequence_shape, subject_span_shape=None):
        hidden = sequence_shape[-1]
        self.gamma = self.add_weight(shape=(hidden,), initializer="ones", name="gamma")
        self.beta = self.add_weight(shape=(hidden,), initializer="zeros", name="beta")
        self.scale_kernel = self.add_weight(shape=(2 * hidden, hidden), initializer="zeros", name="scale_kernel")
        self.shift_kernel = self.add_weight(shape=(2 * hidden, hidden), initializer="zeros", name="shift_kernel")

    def call(self, sequence, subject_span):
        sequence = ops.cast(sequence, self.compute_dtype)
        length = ops.shape(sequence)[1]
        picks = ops.one_hot(ops.cast(subject_span, "int32"), length, dtype=self.compute_dtype)  # [b, 2, len]
        ends = ops.einsum("bkl,blh->bkh", picks, sequence)  # [b, 2, H]
        condition = ops.concatenate([ends[:, 0], ends[:, 1]], axis=-1)  # [b, 2H]
        gamma = self.gamma + ops.matmul(condition, self.scale_kernel)  # [b, H]
        beta = self.beta + ops.matmul(condition, self.shift_kernel)
        mean = ops.mean(sequence, axis=-1, keepdims=True)
        variance = ops.mean(ops.square(sequence - mean), axis=-1, keepdims=True)
        normed = (sequence - mean) * ops.rsqrt(variance + self.epsilon)
        return normed * gamma[:, None, :] + beta[:, None, :]

    def compute_output_spec(self, sequence, subject_span):
        return keras.KerasTensor(sequence.shape, dtype=self.compute_dtype)

    def get_config(self):
        return {**super().get_config(), "epsilon": self.epsilon}


class _Untracked:
    """A holder Keras does not track (so cached sub-models are not saved twice)."""

    def __init__(self):
        self.value = None


@keras.saving.register_keras_serializable(package="kerasbert_triples")
class TripleModel(TaskModel):
    """Span-pointer triple extractor (see the module docstring).

    Args:
        encoder: an encoder from :mod:`kerasbert.models.encoder` (BERT, ALBERT or
            ELECTRA; or any model with the same inputs and a ``"sequence_output"``).
        num_predicates: number of predicates ``P``.
        dropout: dropout on the encoder output.
        layer_mix: feed the head a learned mix of all the encoder's hidden
            states (the encoder built with ``output_hidden_states=True``;
            ``--freeze-encoder``) instead of its last layer.
    """

    def __init__(self, encoder, num_predicates, dropout=0.1, layer_mix=False, **kwargs):
        # === Layers ===
        self.encoder = encoder
        self.freeze_pooler(encoder)
        self.make_layer_mix(encoder, layer_mix, HEAD_PREFIX)
        bias = keras.initializers.Constant(math.log(PRIOR / (1.0 - PRIOR)))

        def pointer(units, name):  # logits; the decoders apply the sigmoid
            return keras.layers.Dense(units, bias_initializer=bias, dtype="float32", name=HEAD_PREFIX + name)

        self.head_dropout = keras.layers.Dropout(dropout, name=HEAD_PREFIX + "dropout")
        self.subject_start_dense = pointer(1, "subject_start")
        self.subject_end_dense = pointer(1, "subject_end")
        self.condition = SubjectConditionalLayerNorm(dtype="float32", name=HEAD_PREFIX + "condition")
        self.object_start_dense = pointer(num_predicates, "object_start")
        self.object_end_dense = pointer(num_predicates, "object_end")

        # === Functional Model ===
        inputs = encoder_inputs()
        inputs["subject_span"] = keras.Input(shape=(2,), dtype="int32", name="subject_span")
        sequence = self.encoded(encoder({name: inputs[name] for name in ENCODER_INPUTS}))
        sequence = self.head_dropout(sequence)
        outputs = self._subject_pointers(sequence)
        outputs.update(self._object_pointers(sequence, inputs["subject_span"]))
        super().__init__(inputs=inputs, outputs=outputs, **kwargs)

        # === Config ===
        self.num_predicates = int(num_predicates)
        self.dropout = dropout
        self._decoders = _Untracked()

    def _subject_pointers(self, sequence):
        return {
            "subject_start": ops.squeeze(self.subject_start_dense(sequence), axis=-1),
            "subject_end": ops.squeeze(self.subject_end_dense(sequence), axis=-1),
        }

    def _object_pointers(self, sequence, subject_span):
        conditioned = self.condition(sequence, subject_span)
        return {"object_start": self.object_start_dense(conditioned), "object_end": self.object_end_dense(conditioned)}

    def decoders(self):
        """``(encode, objects)``: functional models sharing this model's
        layers, with pointer PROBABILITIES (the sigmoid of the logits).

        * ``encode``: ``{token_ids, segment_ids, padding_mask}`` ->
          ``{"sequence": [b, len, H], "subject_start", "subject_end": [b, len]}``;
        * ``objects``: ``{"sequence": [n, len, H], "subject_span": [n, 2]}`` ->
          ``{"object_start", "object_end": [n, len, P]}``.
        """
        if self._decoders.value is None:
            def probabilities(logits):
                return {name: ops.sigmoid(value) for name, value in logits.items()}

            inputs = encoder_inputs()
            sequence = self.encoded(self.encoder(inputs))
            encode = keras.Model(inputs, {"sequence": sequence, **probabilities(self._subject_pointers(sequence))},
                                 name="triples_encode")
            seq_in = keras.Input(shape=(None, sequence.shape[-1]), dtype=sequence.dtype, name="sequence")
            span_in = keras.Input(shape=(2,), dtype="int32", name="subject_span")
            objects = keras.Model({"sequence": seq_in, "subject_span": span_in},
                                  probabilities(self._object_pointers(seq_in, span_in)), name="triples_objects")
            self._decoders.value = (encode, objects)
        return self._decoders.value

    def task_loss(self, x, y, y_pred):
        mask = ops.cast(x["padding_mask"], "float32")
        tokens = ops.maximum(ops.sum(mask), 1.0)
        loss = 0.0
        for name in POINTERS:
            per_pointer = ops.binary_crossentropy(ops.cast(y[name], "float32"), ops.cast(y_pred[name], "float32"),
                                                  from_logits=True)
            if name.startswith("object"):
                per_pointer = ops.sum(per_pointer, axis=-1)  # summed over predicates
            loss = loss + ops.sum(per_pointer * mask) / tokens
        return loss

    def head_config(self):
        return {"num_predicates": self.num_predicates, "dropout": self.dropout, "layer_mix": self.layer_mix}
