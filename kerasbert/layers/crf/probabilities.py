"""CRF probabilities by forward-backward: tag marginals and the probability of an entity segment.

They take the decoder's optional constraints, so they are probabilities over
the labellings the constrained decoder can return (:mod:`kerasbert.layers.crf`).
"""

from keras import ops

from kerasbert.layers.crf.sequence import _constrained
from kerasbert.layers.crf.sequence import _gather
from kerasbert.layers.crf.sequence import _num_tags
from kerasbert.layers.crf.sequence import _prepare
from kerasbert.layers.crf.sequence import _step_mask

# log(0) in the segment probabilities: finite, so that a sum of two stays finite.
_FLOOR = -1e30


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
    already in `transitions` and `start_penalty`.

    Both directions are prefix products of the step matrices
    (`_forward_logits`, `_scaled`), all taken by one doubling scan (`_prefix_products`):
    every row of a forward product is alpha. The backward algorithm is the
    same product over each row's steps reversed within its length, of the
    transposed matrices, from rows of ones; its results are put back in
    order after the scan.
    """
    batch, time, num_tags = ops.shape(potentials)
    lengths = ops.minimum(sequence_lengths, time)
    mask = _step_mask(potentials, lengths)
    steps = ops.expand_dims(ops.arange(time, dtype="int32"), 0)
    # Rows' steps are read by one gather from the flattened rows (on TensorFlow
    # a few ops, where `ops.take_along_axis` writes dozens): row b's step t is
    # flat step b * time + t.
    offsets = ops.expand_dims(ops.arange(batch, dtype="int32") * time, 1)

    def take_steps(x, index):  # x[b, index[b, t]]
        return _gather(ops.reshape(x, (-1, num_tags)), index + offsets)

    # Step t of a row reads step length - 1 - t (an involution within the length), the padding stays.
    reverse = ops.where(mask, ops.expand_dims(lengths, 1) - 1 - steps, steps)
    # Backward, step r of the reversed row is step `length - r` transposed, whose
    # potentials are the reversed row's step r - 1; step 0 is rows of log 1.
    backward = ops.pad(take_steps(potentials, reverse)[:, :-1], [[0, 0], [1, 0], [0, 0]])
    later = ops.reshape(steps > 0, (-1, 1, 1))
    logits = ops.concatenate([
        _forward_logits(potentials, transitions, start_penalty),
        ops.where(later, ops.transpose(transitions), 0.0) + backward[:, :, :, None],
    ], axis=0)
    matrices, scale = _prefix_products(*_scaled(logits, ops.concatenate([mask, mask], axis=0), num_tags), time)
    rows = matrices[:, :, 0, :]  # [2 * batch, time, tags]: every row of a product is the same
    alpha, beta = ops.split(ops.log(rows) + scale[:, :, :, 0], 2, axis=0)
    beta = ops.where(ops.expand_dims(mask, 2), take_steps(beta, reverse), 0.0)
    # An empty row's products are identities: log_norm log(1) = 0, alpha zeros.
    alpha = ops.where(ops.reshape(lengths > 0, (-1, 1, 1)), alpha, 0.0)
    log_norm = ops.log(ops.sum(rows[:batch, -1], axis=1)) + scale[:batch, -1, 0, 0]
    return alpha, beta, log_norm


def _forward_logits(potentials, transitions, start_penalty):
    """The step log-matrices `[batch, time, tags, tags]` of the forward
    algorithm: step t > 0 is `transitions + potentials[t]` (the potentials of
    the tag stepped to, on the columns), step 0 rows of
    `potentials[0] + start_penalty`, so every row of a product of them is
    the same: alpha at its last step."""
    first = ops.reshape(ops.arange(ops.shape(potentials)[1], dtype="int32") == 0, (-1, 1, 1))
    return ops.where(first, start_penalty, transitions) + potentials[:, :, None, :]


def _scaled(logits, mask, num_tags):
    """`(matrices, scale)` for `_prefix_products`: `exp(logits)` scaled to a
    largest entry of 1 in each step, the log of the scale beside it
    `[n, time, 1, 1]`; the identity (scale 0) at steps where `mask`
    `[n, time]` is False (beyond a row's length, so a product repeats the
    last step's there)."""
    scale = ops.max(logits, axis=(2, 3), keepdims=True)
    inside = ops.reshape(mask, (ops.shape(mask)[0], -1, 1, 1))
    eye = ops.eye(num_tags, dtype=logits.dtype)
    return ops.where(inside, ops.exp(logits - scale), eye), ops.where(inside, scale, 0.0)


def _prefix_products(matrices, scale, time):
    """Inclusive prefix products over axis 1 of `matrices` `[n, time, k, k]`,
    earlier steps on the left (Hillis-Steele): after the level of distance
    `d`, step t holds the product of steps `t - 2d + 1 .. t`, so
    `ceil(log2(time))` levels of batched `matmul`s replace a loop over the
    steps. Each matrix stands for `matrices * exp(scale)` (`scale`
    `[n, time, 1, 1]`) and is rescaled to a largest entry of 1 after every
    product, so nothing overflows. A step with nothing `d` before it is
    multiplied by the identity (scale 0) gathered from a slot put before
    step 0."""
    index = ops.arange(time, dtype="int32") + 1
    identity = ops.zeros_like(matrices[:, :1]) + ops.eye(ops.shape(matrices)[-1], dtype=matrices.dtype)
    none = ops.zeros_like(scale[:, :1])
    tiny = ops.convert_to_tensor(1e-30, dtype=matrices.dtype)  # an all-zero product stays 0, not NaN

    def level(distance, matrices, scale):
        source = ops.maximum(index - distance, 0)
        product = ops.matmul(_gather(ops.concatenate([identity, matrices], axis=1), source, axis=1), matrices)
        top = ops.maximum(ops.max(product, axis=(2, 3), keepdims=True), tiny)
        scale = _gather(ops.concatenate([none, scale], axis=1), source, axis=1) + scale + ops.log(top)
        return distance * 2, product / top, scale

    _, matrices, scale = ops.while_loop(
        lambda distance, *_: distance < time, level, (ops.convert_to_tensor(1, "int32"), matrices, scale)
    )
    return matrices, scale


def _finite_logsumexp(x, axis):
    """`ops.logsumexp(x, axis)` where the maximum is finite: the same sum,
    without `ops.logsumexp`'s guard against an infinite or NaN maximum (on
    TensorFlow half a dozen ops more)."""
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
    alpha, beta = ops.maximum(alpha, _FLOOR), ops.maximum(beta, _FLOOR)
    time = ops.shape(potentials)[1]
    # Each segment's values at its steps, by one gather from the rows' steps flattened
    # (row r's step t is r * time + t; steps outside the rows are clipped, their values unused).
    flat = ops.reshape(ops.concatenate([alpha, beta, potentials], axis=2), (-1, 3 * num_tags))

    def at(step):  # -> alpha, beta and potentials [n, tags] of each segment's row at `step`
        return ops.split(_gather(flat, rows * time + ops.clip(step, 0, time - 1)), 3, axis=1)

    tags = ops.expand_dims(ops.arange(num_tags, dtype="int32"), 0)
    is_b, is_c = tags == ops.reshape(b, (-1, 1)), tags == ops.reshape(c, (-1, 1))  # [n, tags]

    def pick(values, where):  # [n, tags] -> [n]: the value at the one tag where `where`
        return ops.sum(ops.where(where, values, 0.0), axis=1)

    def excluded(values, where_excluded):  # logsumexp over the tags not excluded
        return _finite_logsumexp(ops.where(where_excluded, _FLOOR, values), axis=1)

    from_c, into_c = ops.split(_gather(ops.concatenate([trans, ops.transpose(trans)], axis=1), c), 2, axis=1)
    stay = pick(from_c, is_c)  # trans[c, c]
    alpha_s, _, potentials_s = at(starts)
    alpha_before = at(starts - 1)[0]
    _, beta_e, _ = at(ends)
    _, beta_next, potentials_next = at(ends + 1)
    # Prefixes ending at s with y_s = B, or with y_s = I after neither B nor I.
    head_b = pick(alpha_s, is_b)
    head_c = ops.where(
        starts > 0, excluded(alpha_before + into_c, is_b | is_c), pick(ops.expand_dims(start_penalty, 0), is_c)
    ) + pick(potentials_s, is_c)
    # Steps s+1..e all I: their potentials of I, and e - s - 1 transitions I -> I.
    steps = ops.arange(time, dtype="int32")[None, :, None]
    inside = (steps > ops.reshape(starts, (-1, 1, 1))) & (steps <= ops.reshape(ends, (-1, 1, 1))) & is_c[:, None, :]
    body = ops.sum(ops.where(inside, _gather(potentials, rows), 0.0), axis=(1, 2))
    body = body + ops.cast(ends - starts - 1, alpha.dtype) * stay
    # Suffixes after e given y_e = j, with y_{e+1} != I when closed (and e + 1 in the row).
    has_next = closed & ops.less(ends + 1, _gather(sequence_lengths, rows))

    def tail(from_j, is_j):  # from_j: trans[j, k]
        return ops.where(has_next, excluded(from_j + potentials_next + beta_next, is_c), pick(beta_e, is_j))

    tail_c = tail(from_c, is_c)
    single = ops.logaddexp(head_b + tail(_gather(trans, b), is_b), head_c + tail_c)
    longer = ops.logaddexp(head_b + pick(into_c, is_b), head_c + stay) + body + tail_c
    return ops.where(ends > starts, longer, single) - _gather(log_norm, rows)
