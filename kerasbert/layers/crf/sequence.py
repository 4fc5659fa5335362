"""CRF sequence scores, log-normalizer, log-likelihood and Viterbi decoding (:mod:`kerasbert.layers.crf` states the conventions)."""

import keras
from keras import ops

# Added to the score of a forbidden transition or first tag in `crf_decode`.
FORBIDDEN_SCORE = -1e4


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


def _scan(step, init, xs):
    """`ops.scan(step, init, xs)` for one time-major `xs` and per-step
    outputs shaped like the carry `init` (Keras's rule).

    On TensorFlow it is written as a while loop whose loop variables ARE the
    carry and whose per-step outputs are written to TensorArrays at the step
    index: the same results, in the form tf2onnx turns into an ONNX `Loop`
    (Keras's TensorFlow scan keeps the carry in a one-slot TensorArray
    written and read at index 0 on every step, which it cannot convert).
    Elsewhere `ops.scan` itself. Not differentiated (Viterbi's forward pass;
    the differentiated forward algorithm is `_fold_over_time`).
    """
    if keras.backend.backend() != "tensorflow":
        return ops.scan(step, init, xs)
    import tensorflow as tf

    xs = tf.convert_to_tensor(xs)
    steps = tf.shape(xs)[0]
    carry = [tf.convert_to_tensor(c) for c in keras.tree.flatten(init)]
    arrays = [tf.TensorArray(c.dtype, size=steps, element_shape=c.shape) for c in carry]

    def pack(flat):
        return keras.tree.pack_sequence_as(init, flat) if keras.tree.is_nested(init) else flat[0]

    def body(i, carry, arrays):
        carry, ys = step(pack(carry), tf.gather(xs, i))
        arrays = [a.write(i, y) for a, y in zip(arrays, keras.tree.flatten(ys))]
        return i + 1, [tf.convert_to_tensor(c) for c in keras.tree.flatten(carry)], arrays

    _, carry, arrays = tf.while_loop(lambda i, *_: i < steps, body, (tf.constant(0), carry, arrays))
    ys = [a.stack() for a in arrays]
    return pack(carry), pack(ys)


def _gather(x, indices, axis=0):
    """`ops.take(x, indices, axis)` for indices known to be in range and not
    negative: on TensorFlow one `tf.gather` (the TensorFlow `ops.take`
    wraps negative indices first, half a dozen ops more, in each step of the
    loops below and of their ONNX conversion)."""
    if keras.backend.backend() == "tensorflow":
        import tensorflow as tf

        return tf.gather(x, indices, axis=axis)
    return ops.take(x, indices, axis=axis)


def _suffix_maps(pointers, steps):
    """`pointers` `[steps, n]` int32: step t maps an index `0 <= i < n` at
    step t to `pointers[t, i]` at step t - 1. Returns `[steps, n]`: row t
    maps an index at the last step to the one at step t, through every step
    after t (the identity at the last step). Pointer jumping (Hillis-Steele
    over suffixes): after the level of distance `d`, row t has gone through
    steps `t + 1 .. t + 2d`, so `ceil(log2(steps))` levels of gathers
    replace a loop over the steps."""
    size = ops.shape(pointers)[1]
    identity = ops.expand_dims(ops.arange(size, dtype="int32"), 0)
    maps = ops.concatenate([pointers[1:], identity], axis=0)  # row t: step t + 1's pointers
    index = ops.arange(steps, dtype="int32")
    rows = ops.expand_dims(index * size, 1)

    def level(distance, maps):
        # maps[t] after maps[t + distance] (the identity past the last step)
        later = _gather(ops.concatenate([maps, identity], axis=0), ops.minimum(index + distance, steps))
        return distance * 2, _gather(ops.reshape(maps, (-1,)), later + rows)

    _, maps = ops.while_loop(lambda distance, _: distance < steps, level, (ops.convert_to_tensor(1, "int32"), maps))
    return maps


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
    # One step of padding more, beyond every length: the scans below never
    # run zero steps (time 1; TensorFlow cannot stack an empty TensorArray
    # of a dynamic shape); it is cut off the tags at the end.
    sequence_lengths = ops.minimum(sequence_lengths, ops.shape(potentials)[1])
    potentials = ops.pad(potentials, [[0, 0], [0, 1], [0, 0]])
    mask = _step_mask(potentials, sequence_lengths)
    time_major = _time_major(potentials)
    steps, batch = ops.shape(time_major)[0], ops.shape(time_major)[1]
    first = time_major[0] + start_penalty

    # The loop computes the best score of a path ending in each tag, step by
    # step, and nothing else (no masking: a row's steps past its length are
    # never read); the back-pointers, an argmax of the same sums, are taken
    # after it over all steps at once.
    def forward(score, unary):
        score = ops.max(ops.expand_dims(score, 2) + transition_params, axis=1) + unary
        return score, score

    _, rest = _scan(forward, first, time_major[1:])
    scores = ops.concatenate([ops.expand_dims(first, 0), rest], axis=0)
    pointers = ops.cast(ops.argmax(ops.expand_dims(scores[:-1], 3) + transition_params, axis=2), "int32")
    # A back-pointer to oneself at step 0 and at steps beyond the length, so
    # that backtracking carries the last real tag through the padding.
    identity = ops.zeros_like(scores[:1], dtype="int32") + ops.arange(num_tags, dtype="int32")
    pointers = ops.concatenate([identity, pointers], axis=0)
    pointers = ops.where(ops.expand_dims(ops.transpose(mask), 2), pointers, identity)
    # The score at each row's last step (-inf for an empty row).
    is_last = ops.equal(
        ops.expand_dims(ops.arange(steps, dtype="int32"), 1),
        ops.expand_dims(sequence_lengths - 1, 0),
    )
    score = ops.max(ops.where(ops.expand_dims(is_last, 2), scores, float("-inf")), axis=0)

    # Backtracking over flat indices `row * num_tags + tag`, by pointer jumping:
    # the tags at every step at once, in `ceil(log2(steps))` gathers.
    offsets = ops.arange(batch, dtype="int32") * num_tags
    flat = ops.reshape(pointers + ops.expand_dims(ops.expand_dims(offsets, 0), 2), (steps, -1))
    last_tag = ops.cast(ops.argmax(score, axis=1), "int32")
    indices = _gather(_suffix_maps(flat, steps), last_tag + offsets, axis=1)  # [steps, batch]
    tags = ops.where(mask, ops.transpose(indices - ops.expand_dims(offsets, 0), (1, 0)), 0)[:, :-1]
    best_score = ops.max(score, axis=1)
    best_score = ops.where(
        sequence_lengths > 0, best_score, ops.zeros_like(best_score)
    )
    return tags, best_score
