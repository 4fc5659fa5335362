"""CRF probabilities by forward-backward: tag marginals and the probability of an entity segment.

They take the decoder's optional constraints, so they are probabilities over
the labellings the constrained decoder can return (:mod:`kerasbert.layers.crf`).
"""

from keras import ops

from kerasbert.layers.crf.sequence import _EXCLUDED
from kerasbert.layers.crf.sequence import _constrained
from kerasbert.layers.crf.sequence import _num_tags
from kerasbert.layers.crf.sequence import _prepare
from kerasbert.layers.crf.sequence import _scan
from kerasbert.layers.crf.sequence import _step_mask
from kerasbert.layers.crf.sequence import _time_major


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
    scan with no masks in it. The forward algorithm runs over the steps; the
    backward one as a forward recursion over each row's steps reversed
    within its length (so that it starts at every row's last step at once),
    its results put back in order after the scan. One step of padding more,
    beyond every length, so that the scan never runs zero steps (as in
    `crf_decode`)."""
    batch, time, num_tags = ops.shape(potentials)
    lengths = ops.minimum(sequence_lengths, time)
    potentials = ops.pad(potentials, [[0, 0], [0, 1], [0, 0]])
    mask = _step_mask(potentials, lengths)
    steps = ops.expand_dims(ops.arange(time + 1, dtype="int32"), 0)
    # Rows' steps are read by one gather from the flattened rows (on TensorFlow
    # a few ops, where `ops.take_along_axis` writes dozens): row b's step t is
    # flat step b * (time + 1) + t.
    offsets = ops.expand_dims(ops.arange(batch, dtype="int32") * (time + 1), 1)

    def take_steps(x, index):  # x[b, index[b, t]]
        return ops.take(ops.reshape(x, (-1, num_tags)), index + offsets, axis=0)

    # Step t of a row reads step length - 1 - t (an involution within the length), the padding stays.
    reverse = ops.where(mask, ops.expand_dims(lengths, 1) - 1 - steps, steps)
    time_major = _time_major(potentials)
    # Scan step r: the forward algorithm's step r, the backward one's (reversed) step r from step r - 1's potentials.
    both = ops.concatenate([time_major[1:], _time_major(take_steps(potentials, reverse))[:-1]], axis=-1)
    first = time_major[0] + start_penalty
    zero = ops.zeros_like(first)

    def step(carry, unaries):
        alpha, beta = carry
        unary, unary_back = ops.split(unaries, 2, axis=-1)
        alpha = _finite_logsumexp(ops.expand_dims(alpha, 2) + transitions, axis=1) + unary
        beta = _finite_logsumexp(transitions[None, :, :] + (unary_back + beta)[:, None, :], axis=2)
        return (alpha, beta), (alpha, beta)

    _, (alpha, beta) = _scan(step, (first, zero), both)
    alpha = ops.transpose(ops.concatenate([ops.expand_dims(first, 0), alpha], axis=0), (1, 0, 2))
    beta = ops.transpose(ops.concatenate([ops.expand_dims(zero, 0), beta], axis=0), (1, 0, 2))
    beta = ops.where(ops.expand_dims(mask, 2), take_steps(beta, reverse), 0.0)
    # Past a row's length alpha repeats its last step's (zeros in an empty row).
    last = ops.minimum(steps, ops.maximum(ops.expand_dims(lengths, 1) - 1, 0))
    alpha = ops.where(ops.reshape(lengths > 0, (-1, 1, 1)), take_steps(alpha, last), 0.0)
    log_norm = ops.logsumexp(alpha[:, -1], axis=1)
    log_norm = ops.where(lengths > 0, log_norm, ops.zeros_like(log_norm))
    return alpha[:, :-1], beta[:, :-1], log_norm


def _finite_logsumexp(x, axis):
    """`ops.logsumexp(x, axis)` where the maximum is finite (the scan's sums
    of finite scores): the same sum, without `ops.logsumexp`'s guard against
    an infinite or NaN maximum (on TensorFlow a dozen ops a step in the
    scan's loop, about half of them the guard)."""
    top = ops.max(x, axis=axis, keepdims=True)
    return ops.log(ops.sum(ops.exp(x - top), axis=axis)) + ops.squeeze(top, axis)


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
    rows_of = ops.take(ops.concatenate([alpha, beta, potentials], axis=2), rows, axis=0)
    row_alpha, row_beta, row_potentials = ops.split(rows_of, 3, axis=2)  # [n, time, tags] each
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
