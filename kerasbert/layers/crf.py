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

Time loops use `keras.ops` only (`ops.scan`; for the differentiated forward
algorithm on TensorFlow, `ops.while_loop` with a bounded trip count, see
`_fold_over_time`), so everything works with a dynamic time dimension and
inside `tf.function(jit_compile=True)` and `jax.jit`. The log-likelihood is
differentiable everywhere, XLA included. `crf_decode` is meant for inference:
differentiating its `best_score` under TensorFlow XLA is not supported.
"""

import keras
import numpy as np
from keras import ops

# Added to the score of a forbidden transition or first tag in `crf_decode`.
FORBIDDEN_SCORE = -1e4
# Stands in for log(0) where some tags are left out of a logsumexp.
_EXCLUDED = -1e30


def _compute_dtype(x):
    """float64 stays float64; anything else (float16, bfloat16, ints) -> float32."""
    dtype = keras.backend.standardize_dtype(x.dtype)
    return "float64" if dtype == "float64" else "float32"


def _prepare(potentials, sequence_lengths, transition_params):
    potentials = ops.convert_to_tensor(potentials)
    dtype = _compute_dtype(potentials)
    potentials = ops.cast(potentials, dtype)
    sequence_lengths = ops.cast(ops.convert_to_tensor(sequence_lengths), "int32")
    if transition_params is not None:
        transition_params = ops.cast(
            ops.convert_to_tensor(transition_params), dtype
        )
    return potentials, sequence_lengths, transition_params


def _num_tags(potentials, transition_params):
    """Static number of tags when known (it always is on JAX), else a tensor."""
    for dim in (transition_params.shape[-1], potentials.shape[-1]):
        if dim is not None:
            return dim
    return ops.shape(transition_params)[-1]


def _step_mask(potentials, sequence_lengths):
    """Boolean `[batch, time]`: True at the steps `t < sequence_lengths[b]`."""
    steps = ops.arange(ops.shape(potentials)[1], dtype="int32")
    return ops.less(ops.expand_dims(steps, 0), ops.expand_dims(sequence_lengths, 1))


def _fold_over_time(step, init, potentials):
    """`carry = step(carry, potentials[:, t], t)` for every step t: the last carry.

    This is the loop that gets differentiated, so it is written per backend
    (with `keras.ops` only): on TensorFlow, `ops.while_loop` with
    `maximum_iterations`, because XLA (`jit_compile=True`, the Keras default on
    GPU) can only differentiate a while loop with a bounded trip count and the
    TensorFlow `ops.scan` sets none; elsewhere `ops.scan`, because JAX cannot
    reverse-differentiate a while loop.
    """
    time_major = _time_major(potentials)
    zero = ops.zeros((), dtype="int32")
    if keras.backend.backend() == "tensorflow":
        time = ops.shape(potentials)[1]

        def body(t, carry):
            return t + 1, step(carry, ops.take(time_major, t, axis=0), t)

        _, carry = ops.while_loop(
            lambda t, carry: ops.less(t, time),
            body,
            (zero, init),
            maximum_iterations=time,
        )
        return carry

    def scan_step(carry, unary):
        carry, t = carry
        carry = (step(carry, unary, t), t + 1)
        return carry, carry

    (carry, _), _ = ops.scan(scan_step, (init, zero), time_major)
    return carry


def _time_major(x):
    """`[batch, time, num_tags]` -> `[time, batch, num_tags]`.

    The scans below run over this one tensor and carry the step index: the
    TensorFlow `ops.scan` fails on several `xs` with a dynamic time dimension,
    and it requires the per-step outputs to match the carry's structure, so the
    steps return their carry as outputs.
    """
    return ops.transpose(x, (1, 0, 2))


def _constrained(transition_params, num_tags, dtype, allowed, allowed_start):
    """`(transitions, start_penalty)` with `FORBIDDEN_SCORE` added to the
    forbidden transitions and first tags (the decode-time constraints)."""
    if allowed is not None:
        allowed = ops.cast(ops.convert_to_tensor(allowed), "bool")
        transition_params = ops.where(
            allowed, transition_params, transition_params + FORBIDDEN_SCORE
        )
    start_penalty = ops.zeros((num_tags,), dtype=dtype)
    if allowed_start is not None:
        allowed_start = ops.cast(ops.convert_to_tensor(allowed_start), "bool")
        start_penalty = ops.where(
            allowed_start, start_penalty, start_penalty + FORBIDDEN_SCORE
        )
    return transition_params, start_penalty


def crf_sequence_score(
    potentials, tag_indices, sequence_lengths, transition_params
):
    """Unnormalized score of the tag sequences `tag_indices`.

    Args:
        potentials: `[batch, time, num_tags]` unary scores.
        tag_indices: `[batch, time]` integer tags. Values at steps beyond the
            length are ignored (they may be out of range, e.g. -100).
        sequence_lengths: `[batch]` integer lengths.
        transition_params: `[num_tags, num_tags]` transition scores.

    Returns:
        `[batch]` scores (0 for empty sequences).
    """
    potentials, sequence_lengths, transition_params = _prepare(
        potentials, sequence_lengths, transition_params
    )
    num_tags = _num_tags(potentials, transition_params)
    mask = _step_mask(potentials, sequence_lengths)
    tags = ops.where(mask, ops.cast(tag_indices, "int32"), 0)

    unary = ops.sum(
        potentials * ops.one_hot(tags, num_tags, dtype=potentials.dtype),
        axis=-1,
    )
    unary = ops.sum(ops.where(mask, unary, ops.zeros_like(unary)), axis=1)

    # Transition t -> t + 1 counts when step t + 1 is inside the sequence.
    pair_index = tags[:, :-1] * num_tags + tags[:, 1:]
    binary = ops.take(ops.reshape(transition_params, (-1,)), pair_index)
    binary = ops.where(mask[:, 1:], binary, ops.zeros_like(binary))
    return unary + ops.sum(binary, axis=1)


def crf_log_norm(potentials, sequence_lengths, transition_params):
    """Log partition function (forward algorithm, in log space).

    Args:
        potentials: `[batch, time, num_tags]` unary scores.
        sequence_lengths: `[batch]` integer lengths.
        transition_params: `[num_tags, num_tags]` transition scores.

    Returns:
        `[batch]` log-normalizers (0 for empty sequences).
    """
    potentials, sequence_lengths, transition_params = _prepare(
        potentials, sequence_lengths, transition_params
    )
    return _forward_log_norm(potentials, sequence_lengths, transition_params)


def _forward_log_norm(potentials, sequence_lengths, transition_params, start_penalty=None):
    """`crf_log_norm` of prepared inputs; `start_penalty` `[num_tags]` is
    added to the first step's scores."""

    def step(alpha, unary, t):
        # alpha[b, i] + trans[i, j], reduced over the previous tag i.
        moved = ops.logsumexp(
            ops.expand_dims(alpha, 2) + transition_params, axis=1
        )
        first = unary if start_penalty is None else unary + start_penalty
        new_alpha = ops.where(ops.equal(t, 0), first, moved + unary)
        keep = ops.expand_dims(ops.less(t, sequence_lengths), 1)
        return ops.where(keep, new_alpha, alpha)

    alpha = _fold_over_time(step, ops.zeros_like(potentials[:, 0, :]), potentials)
    log_norm = ops.logsumexp(alpha, axis=1)
    return ops.where(sequence_lengths > 0, log_norm, ops.zeros_like(log_norm))


def crf_log_likelihood(
    potentials, tag_indices, sequence_lengths, transition_params=None
):
    """Log-likelihood of `tag_indices` under the CRF.

    Args:
        potentials: `[batch, time, num_tags]` unary scores.
        tag_indices: `[batch, time]` integer gold tags.
        sequence_lengths: `[batch]` integer lengths.
        transition_params: `[num_tags, num_tags]` transition scores. Required:
            unlike TFA, this function does not create a variable; use the
            `CRF` layer to own a trainable transition matrix.

    Returns:
        log_likelihood: `[batch]` log-likelihoods (not negated, not averaged).
        transition_params: the transition matrix that was used.
    """
    if transition_params is None:
        raise ValueError(
            "crf_log_likelihood() needs `transition_params` (a "
            "[num_tags, num_tags] tensor). It does not create a variable, "
            "unlike tfa.text.crf_log_likelihood; use the kerasbert CRF layer "
            "(CRF(num_tags).log_likelihood(...)) for a trainable matrix."
        )
    score = crf_sequence_score(
        potentials, tag_indices, sequence_lengths, transition_params
    )
    log_norm = crf_log_norm(potentials, sequence_lengths, transition_params)
    return score - log_norm, transition_params


def crf_decode(
    potentials,
    transition_params,
    sequence_lengths,
    allowed=None,
    allowed_start=None,
):
    """Viterbi decoding: the highest-scoring tag sequence.

    Args:
        potentials: `[batch, time, num_tags]` unary scores.
        transition_params: `[num_tags, num_tags]` transition scores.
        sequence_lengths: `[batch]` integer lengths.
        allowed: optional boolean `[num_tags, num_tags]`; `allowed[i, j]` False
            forbids tag `i` followed by tag `j` (see `allowed_transitions`).
        allowed_start: optional boolean `[num_tags]`; False forbids a sequence
            from starting with that tag.

    Returns:
        decode_tags: `[batch, time]` int32 tags (0 at steps at or beyond the
            length).
        best_score: `[batch]` scores of the best paths (0 for empty sequences;
            they include `FORBIDDEN_SCORE` penalties only if no allowed path
            exists).
    """
    potentials, sequence_lengths, transition_params = _prepare(
        potentials, sequence_lengths, transition_params
    )
    num_tags = _num_tags(potentials, transition_params)
    transition_params, start_penalty = _constrained(
        transition_params, num_tags, potentials.dtype, allowed, allowed_start
    )
    mask = _step_mask(potentials, sequence_lengths)
    # A back-pointer to oneself: used at step 0 and at steps beyond the length,
    # so that backtracking carries the last real tag through the padding.
    identity = ops.zeros_like(potentials[:, 0, :], dtype="int32") + ops.arange(
        num_tags, dtype="int32"
    )

    def forward(carry, unary):
        score, _, t = carry
        candidates = ops.expand_dims(score, 2) + transition_params
        pointers = ops.cast(ops.argmax(candidates, axis=1), "int32")
        moved = ops.max(candidates, axis=1) + unary
        first = ops.equal(t, 0)
        new_score = ops.where(first, unary + start_penalty, moved)
        pointers = ops.where(first, identity, pointers)
        keep = ops.expand_dims(ops.less(t, sequence_lengths), 1)
        carry = (
            ops.where(keep, new_score, score),
            ops.where(keep, pointers, identity),
            t + 1,
        )
        return carry, carry

    init = (
        ops.zeros_like(potentials[:, 0, :]),
        identity,
        ops.zeros((), dtype="int32"),
    )
    (score, _, _), (_, pointers, _) = ops.scan(
        forward, init, _time_major(potentials)
    )

    def backward(tag, step_pointers):
        # `tag` is the best tag at step t; step_pointers[b, tag] the one at t - 1.
        previous = ops.squeeze(ops.take_along_axis(step_pointers, ops.expand_dims(tag, 1), axis=1), 1)
        return previous, tag

    last_tag = ops.cast(ops.argmax(score, axis=1), "int32")
    _, tags = ops.scan(backward, last_tag, pointers, reverse=True)
    tags = ops.where(mask, ops.transpose(tags, (1, 0)), 0)
    best_score = ops.max(score, axis=1)
    best_score = ops.where(
        sequence_lengths > 0, best_score, ops.zeros_like(best_score)
    )
    return tags, best_score


def crf_forward_backward(
    potentials,
    sequence_lengths,
    transition_params,
    allowed=None,
    allowed_start=None,
):
    """Forward and backward log-scores, with the decode-time constraints.

    With `allowed` / `allowed_start` (as in `crf_decode`) the forbidden
    transitions and first tags get `FORBIDDEN_SCORE` added, exactly as Viterbi
    sees them, so the distribution is (up to `exp(-10^4)`) that over the
    labellings `crf_decode` can return. Without them it is the training
    distribution (`crf_log_norm`).

    Args:
        potentials: `[batch, time, num_tags]` unary scores.
        sequence_lengths: `[batch]` integer lengths.
        transition_params: `[num_tags, num_tags]` transition scores.
        allowed, allowed_start: optional constraints, see `crf_decode`.

    Returns:
        `(alpha, beta, log_norm)`: `alpha[b, t, j]` is the log of the summed
        exp-scores of the prefixes `y_0..y_t` with `y_t = j` (step t's
        potential included); `beta[b, t, j]` that of the suffixes
        `y_{t+1}..y_{len-1}` given `y_t = j` (0 at the last step);
        `log_norm` `[batch]` the log-normalizer (0 for empty sequences).
        At steps beyond the length, alpha repeats the last step's and beta
        is 0.
    """
    potentials, sequence_lengths, transition_params = _prepare(
        potentials, sequence_lengths, transition_params
    )
    num_tags = _num_tags(potentials, transition_params)
    transition_params, start_penalty = _constrained(
        transition_params, num_tags, potentials.dtype, allowed, allowed_start
    )
    return _forward_backward(potentials, sequence_lengths, transition_params, start_penalty)


def _forward_backward(potentials, sequence_lengths, transitions, start_penalty):
    """`crf_forward_backward` of prepared inputs, with the constraints
    already in `transitions` and `start_penalty`: both directions in one
    scan (step t of the forward algorithm and step time - 1 - t of the
    backward one at each iteration)."""
    time_major = _time_major(potentials)
    # Each step sees its own potentials and those of the step it runs backwards.
    both = ops.concatenate([time_major, ops.flip(time_major, axis=0)], axis=-1)
    last = ops.shape(potentials)[1] - 1
    zero = ops.zeros_like(potentials[:, 0, :])

    def step(carry, unaries):
        alpha, beta_next, unary_next, t = carry
        unary, unary_back = ops.split(unaries, 2, axis=-1)
        # forward, step t
        moved = ops.logsumexp(ops.expand_dims(alpha, 2) + transitions, axis=1)
        new_alpha = ops.where(ops.equal(t, 0), unary + start_penalty, moved + unary)
        alpha = ops.where(ops.expand_dims(ops.less(t, sequence_lengths), 1), new_alpha, alpha)
        # backward, step u = last - t: from beta and the potentials at u + 1 (0 at the last step)
        moved = ops.logsumexp(transitions[None, :, :] + (unary_next + beta_next)[:, None, :], axis=2)
        beta = ops.where(ops.expand_dims(ops.less(last - t + 1, sequence_lengths), 1), moved, ops.zeros_like(moved))
        carry = (alpha, beta, unary_back, t + 1)
        return carry, carry

    (last_alpha, _, _, _), (alpha, beta, _, _) = ops.scan(
        step, (zero, zero, zero, ops.zeros((), dtype="int32")), both
    )
    log_norm = ops.logsumexp(last_alpha, axis=1)
    log_norm = ops.where(sequence_lengths > 0, log_norm, ops.zeros_like(log_norm))
    return (
        ops.transpose(alpha, (1, 0, 2)),
        ops.transpose(ops.flip(beta, axis=0), (1, 0, 2)),
        log_norm,
    )


def crf_marginals(
    potentials,
    sequence_lengths,
    transition_params,
    allowed=None,
    allowed_start=None,
):
    """Tag marginals `P(y_t = j)`: `[batch, time, num_tags]`, each step's
    summing to 1, 0 at steps beyond the length. Constraints as in
    `crf_forward_backward`."""
    alpha, beta, log_norm = crf_forward_backward(
        potentials, sequence_lengths, transition_params, allowed, allowed_start
    )
    marginals = ops.exp(alpha + beta - log_norm[:, None, None])
    mask = ops.expand_dims(_step_mask(alpha, ops.cast(sequence_lengths, "int32")), 2)
    return ops.where(mask, marginals, ops.zeros_like(marginals))


def crf_segment_log_probability(
    potentials,
    sequence_lengths,
    transition_params,
    rows,
    starts,
    ends,
    begin_tags,
    inside_tags,
    closed=None,
    allowed=None,
    allowed_start=None,
):
    """Log-probability that a BIO decoder reads one entity exactly on
    steps `starts..ends` (inclusive) of sequence `rows`, for `n` segments.

    With `B = begin_tags`, `I = inside_tags` (e.g. "B-PER", "I-PER"), the
    event is: step `s` begins the entity (`y_s = B`, or `y_s = I` after a
    step that is neither `B` nor `I`, or at step 0: the lenient reading of a
    dangling `I`), steps `s+1..e` are `I`, and, if `closed`, step `e + 1`
    does not continue it (`y_{e+1} != I`, or `e` is the last step). With
    `closed` False the segment's end is left open (it may continue). Under
    the BIO constraints (`allowed_transitions`) a dangling `I` is forbidden,
    so the event is `y_s = B`, `y_{s+1..e} = I`, `y_{e+1} != I`.

    A CRF with zero transitions and no constraints is independent softmaxes
    per step: the same function then gives the per-token product.

    Args:
        potentials, sequence_lengths, transition_params: as elsewhere.
        rows, starts, ends, begin_tags, inside_tags: `[n]` integers; steps
            must satisfy `0 <= starts <= ends < sequence_lengths[rows]`.
        closed: optional boolean `[n]` (default all True).
        allowed, allowed_start: optional constraints, see `crf_decode`.

    Returns:
        `[n]` log-probabilities (float32, or float64 for float64 input).
    """
    potentials, sequence_lengths, transition_params = _prepare(
        potentials, sequence_lengths, transition_params
    )
    num_tags = _num_tags(potentials, transition_params)
    trans, start_penalty = _constrained(
        transition_params, num_tags, potentials.dtype, allowed, allowed_start
    )
    rows, starts, ends, b, c = (
        ops.cast(ops.convert_to_tensor(x), "int32")
        for x in (rows, starts, ends, begin_tags, inside_tags)
    )
    closed = (
        ops.ones_like(starts, dtype="bool")
        if closed is None
        else ops.cast(ops.convert_to_tensor(closed), "bool")
    )
    alpha, beta, log_norm = _forward_backward(potentials, sequence_lengths, trans, start_penalty)
    # Each segment's row of alpha, beta and the potentials, read at its steps by masks over time.
    rows_of = ops.take(ops.concatenate([alpha, beta, potentials], axis=-1), rows, axis=0)
    row_alpha, row_beta, row_potentials = ops.split(rows_of, 3, axis=-1)  # [n, time, tags] each
    steps = ops.arange(ops.shape(potentials)[1], dtype="int32")[None, :, None]
    s, e = ops.reshape(starts, (-1, 1, 1)), ops.reshape(ends, (-1, 1, 1))
    tags = ops.expand_dims(ops.arange(num_tags, dtype="int32"), 0)
    is_b, is_c = tags == ops.reshape(b, (-1, 1)), tags == ops.reshape(c, (-1, 1))  # [n, tags]

    def at(values, step):  # [n, time, tags] at step [n, 1, 1] -> [n, tags] (0 outside the row)
        return ops.sum(ops.where(steps == step, values, 0.0), axis=1)

    def pick(values, where):  # [n, tags] -> [n]: the value at the one tag where `where`
        return ops.sum(ops.where(where, values, 0.0), axis=1)

    def excluded(values, where_excluded):  # logsumexp over the tags not excluded
        return ops.logsumexp(ops.where(where_excluded, _EXCLUDED, values), axis=1)

    from_c, into_c = ops.split(ops.take(ops.concatenate([trans, ops.transpose(trans)], axis=1), c, axis=0), 2, axis=1)
    stay = pick(from_c, is_c)  # trans[c, c]
    # Prefixes ending at s with y_s = B, or with y_s = I after neither B nor I.
    head_b = pick(at(row_alpha, s), is_b)
    head_c = ops.where(
        starts > 0,
        excluded(at(row_alpha, s - 1) + into_c, is_b | is_c),
        pick(ops.expand_dims(start_penalty, 0), is_c),
    ) + pick(at(row_potentials, s), is_c)
    # Steps s+1..e all I: their potentials of I, and e - s - 1 transitions I -> I.
    inside = (steps > s) & (steps <= e) & is_c[:, None, :]
    body = ops.sum(ops.where(inside, row_potentials, 0.0), axis=(1, 2)) + ops.cast(ends - starts - 1, alpha.dtype) * stay
    # Suffixes after e given y_e = j, with y_{e+1} != I when closed (and e + 1 in the row).
    after = at(row_potentials + row_beta, e + 1)  # [n, tags]: unary + beta at e + 1
    beta_end = at(row_beta, e)
    has_next = closed & ops.less(ends + 1, ops.take(sequence_lengths, rows))

    def tail(from_j, is_j):  # from_j: trans[j, k]
        return ops.where(has_next, excluded(from_j + after, is_c), pick(beta_end, is_j))

    tail_c = tail(from_c, is_c)
    single = ops.logaddexp(head_b + tail(ops.take(trans, b, axis=0), is_b), head_c + tail_c)
    longer = ops.logaddexp(head_b + pick(into_c, is_b), head_c + stay) + body + tail_c
    score = ops.where(ends > starts, longer, single)
    return score - ops.take(log_norm, rows)


def allowed_transitions(labels, scheme="BIO"):
    """Which tag transitions and first tags a tagging scheme permits.

    Args:
        labels: list of label strings, indexed by tag id: "O" or
            "<prefix>-<type>", e.g. "B-PER", "I-PER", "E-PER", "S-PER". The type
            may contain hyphens ("B-GEO-LOC" has type "GEO-LOC").
        scheme: "BIO" (alias "IOB2") or "BIOES" (alias "IOBES").

    Returns:
        `(allowed, allowed_start)`: numpy booleans `[num_tags, num_tags]` (row =
        tag at step t, column = tag at step t + 1) and `[num_tags]`.

        - BIO: "I-X" may only follow "B-X" or "I-X", and may not start a
          sequence.
        - BIOES: after "B-X" or "I-X" only "I-X" or "E-X" may come; after "O",
          "E-X" or "S-X" only "O", "B-*" or "S-*"; a sequence may not start
          with "I-X" or "E-X". (An unfinished "B-X"/"I-X" at the very end is not
          forbidden: there are no end scores.)

    Raises:
        ValueError: unknown scheme, or a label that does not fit it.
    """
    scheme_name = str(scheme).upper()
    prefixes = {
        "BIO": "BI",
        "IOB2": "BI",
        "BIOES": "BIES",
        "IOBES": "BIES",
    }
    if scheme_name not in prefixes:
        raise ValueError(
            f"Unknown tagging scheme {scheme!r}; expected 'BIO' (IOB2) or "
            "'BIOES'."
        )
    parsed = []
    for label in labels:
        if label == "O":
            parsed.append(("O", None))
            continue
        prefix, sep, entity = str(label).partition("-")
        if not sep or not entity or prefix not in prefixes[scheme_name]:
            raise ValueError(
                f"Label {label!r} does not fit the {scheme_name} scheme: "
                f"expected 'O' or one of "
                f"{', '.join(p + '-<type>' for p in prefixes[scheme_name])}."
            )
        parsed.append((prefix, entity))

    def ok(previous, current):
        (p_prefix, p_type), (c_prefix, c_type) = previous, current
        inside = p_prefix in ("B", "I")  # an entity is open and may continue
        if scheme_name in ("BIO", "IOB2"):
            if c_prefix == "I":
                return inside and p_type == c_type
            return True
        if c_prefix in ("I", "E"):
            return inside and p_type == c_type
        return not inside  # O, B-*, S-* need the previous entity closed

    num_tags = len(parsed)
    allowed = np.array(
        [[ok(parsed[i], parsed[j]) for j in range(num_tags)] for i in range(num_tags)],
        dtype=bool,
    ).reshape(num_tags, num_tags)
    allowed_start = np.array(
        [prefix not in ("I", "E") for prefix, _ in parsed], dtype=bool
    )
    return allowed, allowed_start


@keras.saving.register_keras_serializable(package="kerasbert")
class CRF(keras.layers.Layer):
    """Linear-chain CRF layer: owns the transition matrix, decodes with Viterbi.

    Calling the layer returns the Viterbi tags (int32 `[batch, time]`). Training
    uses `layer.loss(potentials, tag_indices, sequence_lengths)` (=
    `-mean(log_likelihood)`) or `layer.log_likelihood(...)`, e.g. from an
    overridden `Model.compute_loss`.

    All CRF math runs in float32 even under a mixed-precision policy: the
    `transitions` variable is float32 and never autocast, and potentials are
    cast to float32 at entry.

    Args:
        num_tags: number of tags.
        allowed: optional boolean `[num_tags, num_tags]` matrix of allowed
            transitions, used at decode time only (see `allowed_transitions`).
        allowed_start: optional boolean `[num_tags]` of allowed first tags,
            used at decode time only.
        transitions_initializer: initializer of the transition matrix.
        **kwargs: standard layer arguments (`name`, `dtype`, `trainable`).

    Call arguments:
        potentials: `[batch, time, num_tags]` unary scores.
        sequence_lengths: optional `[batch]` integer lengths.
        mask: optional `[batch, time]` boolean padding mask (right-padded), used
            when `sequence_lengths` is None. With neither, every sequence has
            the full length.
    """

    def __init__(
        self,
        num_tags,
        allowed=None,
        allowed_start=None,
        transitions_initializer="glorot_uniform",
        **kwargs,
    ):
        kwargs.pop("autocast", None)
        super().__init__(autocast=False, **kwargs)

        # === Config ===
        self.num_tags = int(num_tags)
        self.allowed = _bool_list(allowed, (self.num_tags, self.num_tags), "allowed")
        self.allowed_start = _bool_list(
            allowed_start, (self.num_tags,), "allowed_start"
        )
        self.transitions_initializer = keras.initializers.get(
            transitions_initializer
        )
        self.supports_masking = True

    def build(self, potentials_shape=None):
        if potentials_shape is not None and potentials_shape[-1] not in (
            None,
            self.num_tags,
        ):
            raise ValueError(
                f"CRF(num_tags={self.num_tags}) got potentials with last "
                f"dimension {potentials_shape[-1]}."
            )
        # === Layers ===
        self.transitions = self.add_weight(
            name="transitions",
            shape=(self.num_tags, self.num_tags),
            initializer=self.transitions_initializer,
            dtype="float32",
            autocast=False,
            trainable=True,
        )
        self.built = True

    def _lengths(self, potentials, sequence_lengths, mask):
        if sequence_lengths is not None:
            return ops.cast(sequence_lengths, "int32")
        if mask is not None:
            return ops.sum(ops.cast(mask, "int32"), axis=1)
        return ops.zeros_like(potentials[:, 0, 0], dtype="int32") + ops.shape(
            potentials
        )[1]

    def call(self, potentials, sequence_lengths=None, mask=None):
        potentials = ops.cast(potentials, "float32")
        tags, _ = crf_decode(
            potentials,
            self.transitions,
            self._lengths(potentials, sequence_lengths, mask),
            allowed=self.allowed,
            allowed_start=self.allowed_start,
        )
        return tags

    def log_likelihood(self, potentials, tag_indices, sequence_lengths):
        """`[batch]` float32 log-likelihoods of the gold tags."""
        if not self.built:
            self.build(tuple(potentials.shape))
        log_likelihood, _ = crf_log_likelihood(
            ops.cast(potentials, "float32"),
            tag_indices,
            sequence_lengths,
            self.transitions,
        )
        return log_likelihood

    def loss(self, potentials, tag_indices, sequence_lengths):
        """Scalar training loss: `-mean(log_likelihood)` over the batch."""
        return -ops.mean(
            self.log_likelihood(potentials, tag_indices, sequence_lengths)
        )

    def compute_output_spec(self, potentials, sequence_lengths=None, mask=None):
        return keras.KerasTensor(tuple(potentials.shape[:-1]), dtype="int32")

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "num_tags": self.num_tags,
                "allowed": self.allowed,
                "allowed_start": self.allowed_start,
                "transitions_initializer": keras.initializers.serialize(
                    self.transitions_initializer
                ),
            }
        )
        return config


def _bool_list(value, shape, name):
    """None, or a nested list of Python bools of the given shape (for configs)."""
    if value is None:
        return None
    array = np.asarray(value)
    if array.shape != shape:
        raise ValueError(f"`{name}` must have shape {shape}, got {array.shape}.")
    return array.astype(bool).tolist()
