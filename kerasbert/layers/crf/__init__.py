"""Linear-chain conditional random field (CRF) in backend-agnostic `keras.ops`.

The functions follow the conventions of TensorFlow Addons (`tfa.text.crf_*`),
so that a model trained with TFA can be ported by copying its transition
matrix, and they are tested against TFA's outputs:

- `potentials` is `[batch, time, num_tags]`: the unary (emission) score of each
  tag at each step. `time` may be dynamic (`None`).
- `transition_params[i, j]` is the score of moving from tag `i` at step `t` to
  tag `j` at step `t + 1`. There are no separate start or end scores.
- `sequence_lengths` is `[batch]` (any integer dtype). Steps at or beyond
  `sequence_lengths[b]` are ignored: their potentials and tags may hold
  anything (padding, `-100`, NaN potentials are not propagated either).
  Sequences must be left-aligned (padding on the right).
- The score of a path `y` is
  `sum_{t < len} potentials[b, t, y_t] + sum_{t < len - 1} transition_params[y_t, y_{t+1}]`.
- `log_likelihood = sequence_score - log_norm`, per sequence, neither negated
  nor averaged. The usual training loss is `-mean(log_likelihood)`.

Empty sequences (`sequence_lengths[b] == 0`) are defined to have sequence
score 0, log-normalizer 0 (hence log-likelihood 0, and no gradient), best score
0, and decoded tags all 0. Decoded tags beyond a sequence's length are 0, as in
TFA.

Precision: all the math runs in float32, whatever the input dtype (bfloat16 and
float16 potentials are cast up at entry), except that float64 inputs are kept
in float64 (useful for tests; under JAX this needs `jax_enable_x64`).

Decode-time constraints: `crf_decode(..., allowed=, allowed_start=)` takes a
boolean `[num_tags, num_tags]` matrix of allowed transitions and a boolean
`[num_tags]` vector of allowed first tags, for instance from
`allowed_transitions(labels, "BIO")`. A forbidden transition (or first tag) gets
`FORBIDDEN_SCORE` (-10000) added to its score, so Viterbi never picks it when
some allowed path exists (unless scores differ by more than 10^4, which real
potentials do not). If every path is forbidden, the least-penalized path is
returned and `best_score` includes the penalties. Constraints do not affect the
likelihood, only decoding.

Probabilities (forward-backward): `crf_forward_backward`, `crf_marginals` (tag
marginals) and `crf_segment_log_probability` (the probability that a BIO
decoder reads an entity exactly on given steps: the entity score of the NER
tagger) take the same optional constraints, applied as in `crf_decode`, so they
are probabilities over the labellings the constrained decoder can return.

Time loops use `keras.ops` (`ops.scan`; for the differentiated forward
algorithm on TensorFlow, `ops.while_loop` with a bounded trip count, see
`_fold_over_time`), except that Viterbi's forward pass scans on TensorFlow
through `sequence._scan`, a while loop that carries its state as loop
variables (what tf2onnx converts to an ONNX `Loop`: the ONNX export,
:mod:`kerasbert.serving.onnx`). The rest run in `ceil(log2(time))` steps, not
`time`: backtracking by pointer jumping, and forward-backward and segment
probabilities as prefix products of one scaled matrix per step (a doubling
scan of batched `matmul`s). Everything works with a dynamic time
dimension and inside `tf.function(jit_compile=True)` and `jax.jit`. The log-likelihood is
differentiable everywhere, XLA included. `crf_decode` is meant for inference:
differentiating its `best_score` under TensorFlow XLA is not supported.

The package's modules: ``sequence`` (sequence score, log-normalizer, likelihood,
Viterbi decoding), ``probabilities`` (forward-backward, marginals, segment
probabilities), ``layer`` (the :class:`CRF` layer and
:func:`allowed_transitions`). Their public names are this package's.
"""

from kerasbert.layers.crf.layer import CRF
from kerasbert.layers.crf.layer import allowed_transitions
from kerasbert.layers.crf.sequence import FORBIDDEN_SCORE
from kerasbert.layers.crf.sequence import crf_decode
from kerasbert.layers.crf.sequence import crf_log_likelihood
from kerasbert.layers.crf.sequence import crf_log_norm
from kerasbert.layers.crf.sequence import crf_sequence_score
from kerasbert.layers.crf.probabilities import crf_forward_backward
from kerasbert.layers.crf.probabilities import crf_marginals
from kerasbert.layers.crf.probabilities import crf_segment_log_probability

__all__ = [
    "CRF",
    "FORBIDDEN_SCORE",
    "allowed_transitions",
    "crf_decode",
    "crf_forward_backward",
    "crf_log_likelihood",
    "crf_log_norm",
    "crf_marginals",
    "crf_segment_log_probability",
    "crf_sequence_score",
]
