"""Tests for `kerasbert.layers.crf`.

- against TensorFlow Addons' outputs (`../shared/fixtures/crf_tfa_reference.npz`),
- against brute-force enumeration of every path (numpy, float64),
- the `CRF` layer: training, mixed precision, constraints,
- the JAX backend, in a subprocess (the Keras backend is fixed per process).

The layer's config round trip, `.keras` file, dtype policies and JAX rebuild: the layer
harness (`kerasbert.testing`, tests/test_layers.py).
"""

import ast
import itertools
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import keras
import numpy as np
import pytest
from conftest import REPO_ROOT
from conftest import require_shared
from keras import ops

from kerasbert.layers import crf

BIO_LABELS = ["O", "B-PER", "I-PER", "B-LOC", "I-LOC"]


@pytest.fixture(scope="module")
def ref():
    path = require_shared("fixtures", "crf_tfa_reference.npz")
    with np.load(path) as data:
        return {key: data[key] for key in data.files}


def to_numpy(x):
    if isinstance(x, keras.Variable):
        x = ops.copy(x)  # a tensor: numpy() on a variable warns under numpy 2
    return ops.convert_to_numpy(x)


def atol_for(x, float64_atol=1e-9):
    """Tolerance by the dtype the code computed in (JAX without x64: float32)."""
    return float64_atol if str(to_numpy(x).dtype) == "float64" else 1e-4


# --- brute force over all paths, float64 numpy -------------------------------


def path_score(potentials, transitions, path):
    """Score of `path` (a tuple of tags, its length is the sequence length)."""
    unary = sum(potentials[t, tag] for t, tag in enumerate(path))
    binary = sum(transitions[a, b] for a, b in zip(path[:-1], path[1:]))
    return float(unary + binary)


def brute_force(potentials, transitions, length, allowed=None, allowed_start=None):
    """log_norm, best path, best score and marginals `[time, num_tags]` of one sequence.

    With `allowed`/`allowed_start`, the best path is searched among allowed
    paths only (the log_norm and marginals stay unconstrained).
    """
    num_tags = transitions.shape[0]
    marginals = np.zeros(potentials.shape, dtype=np.float64)
    if length == 0:
        return 0.0, (), 0.0, marginals
    paths = list(itertools.product(range(num_tags), repeat=length))
    scores = np.array([path_score(potentials, transitions, p) for p in paths])
    top = scores.max()
    log_norm = top + np.log(np.exp(scores - top).sum())
    probabilities = np.exp(scores - log_norm)
    for path, probability in zip(paths, probabilities):
        marginals[np.arange(length), list(path)] += probability

    def permitted(path):
        if allowed_start is not None and not allowed_start[path[0]]:
            return False
        return allowed is None or all(allowed[a, b] for a, b in zip(path[:-1], path[1:]))

    candidates = [i for i, p in enumerate(paths) if permitted(p)]
    best = max(candidates, key=lambda i: scores[i])
    return log_norm, paths[best], scores[best], marginals


def random_case(seed, dtype=np.float64):
    rng = np.random.default_rng(seed)
    num_tags = int(rng.integers(3, 5))
    time = int(rng.integers(1, 6))
    batch = 5
    lengths = rng.integers(0, time + 1, size=batch)
    lengths[:3] = [0, 1, time]  # always cover empty, single step and full
    potentials = rng.normal(size=(batch, time, num_tags)) * 2
    transitions = rng.normal(size=(num_tags, num_tags))
    tags = rng.integers(0, num_tags, size=(batch, time))
    return (
        potentials.astype(dtype),
        tags.astype(np.int32),
        lengths.astype(np.int32),
        transitions.astype(dtype),
    )


# --- backend helpers ---------------------------------------------------------


def backend_grad(fn, x, compiled=False):
    """Gradient of the scalar `fn(x)` with respect to `x`, as numpy.

    `compiled`: inside `tf.function(jit_compile=True)` (dynamic shapes) on
    TensorFlow, `jax.jit` on JAX.
    """
    backend = keras.backend.backend()
    if backend == "tensorflow":
        import tensorflow as tf

        def grad(x):
            with tf.GradientTape() as tape:
                tape.watch(x)
                y = fn(x)
            return tape.gradient(y, x)

        if compiled:
            spec = tf.TensorSpec([None] * len(x.shape), tf.as_dtype(x.dtype))
            grad = tf.function(grad, jit_compile=True, input_signature=[spec])
        return grad(tf.convert_to_tensor(x)).numpy()
    if backend == "jax":
        import jax

        grad = jax.jit(jax.grad(fn)) if compiled else jax.grad(fn)
        return np.asarray(grad(x))
    pytest.skip(f"no gradient helper for the {backend} backend")


def backend_jit(fn, jit_compile):
    """`fn` compiled with dynamic batch and time on TF, `jax.jit` on JAX."""
    backend = keras.backend.backend()
    if backend == "tensorflow":
        import tensorflow as tf

        return tf.function(
            fn,
            jit_compile=jit_compile,
            input_signature=[
                tf.TensorSpec([None, None, None], tf.float32),
                tf.TensorSpec([None, None], tf.int32),
                tf.TensorSpec([None], tf.int32),
                tf.TensorSpec([None, None], tf.float32),
            ],
        )
    if backend == "jax":
        import jax

        return jax.jit(fn)
    pytest.skip(f"no jit helper for the {backend} backend")


# --- reference values from TensorFlow Addons ---------------------------------


def test_matches_tfa_reference(ref):
    potentials, tags = ref["potentials"], ref["tag_indices"]
    lengths, transitions = ref["sequence_lengths"], ref["transition_params"]

    log_likelihood, returned = crf.crf_log_likelihood(
        potentials, tags, lengths, transitions
    )
    score = crf.crf_sequence_score(potentials, tags, lengths, transitions)
    log_norm = crf.crf_log_norm(potentials, lengths, transitions)
    decoded, best = crf.crf_decode(potentials, transitions, lengths)

    assert str(to_numpy(log_likelihood).dtype) == "float32"
    np.testing.assert_allclose(to_numpy(returned), transitions)
    np.testing.assert_allclose(to_numpy(log_likelihood), ref["log_likelihood"], atol=1e-4)
    np.testing.assert_allclose(to_numpy(score), ref["sequence_score"], atol=1e-4)
    np.testing.assert_allclose(to_numpy(log_norm), ref["log_norm"], atol=1e-4)
    np.testing.assert_allclose(to_numpy(best), ref["best_score"], atol=1e-4)
    decoded = to_numpy(decoded)
    assert decoded.dtype == np.int32 and str(to_numpy(best).dtype) == "float32"
    for b, length in enumerate(lengths):
        np.testing.assert_array_equal(decoded[b, :length], ref["decode_tags"][b, :length])
        assert (decoded[b, length:] == 0).all()


def test_matches_tfa_reference_float64(ref):
    potentials = ref["potentials"].astype(np.float64)
    transitions = ref["transition_params"].astype(np.float64)
    tags, lengths = ref["tag_indices"], ref["sequence_lengths"]

    log_likelihood, _ = crf.crf_log_likelihood(potentials, tags, lengths, transitions)
    decoded, best = crf.crf_decode(potentials, transitions, lengths)

    atol = atol_for(log_likelihood, 1e-6)
    np.testing.assert_allclose(
        to_numpy(log_likelihood), ref["log_likelihood_f64"], atol=atol
    )
    np.testing.assert_allclose(to_numpy(best), ref["best_score_f64"], atol=atol)
    np.testing.assert_array_equal(to_numpy(decoded), ref["decode_tags_f64"])


# --- brute force -------------------------------------------------------------


@pytest.mark.parametrize("seed", range(10))
def test_matches_brute_force(seed):
    potentials, tags, lengths, transitions = random_case(seed)

    score = to_numpy(crf.crf_sequence_score(potentials, tags, lengths, transitions))
    log_norm = to_numpy(crf.crf_log_norm(potentials, lengths, transitions))
    decoded, best = crf.crf_decode(potentials, transitions, lengths)
    decoded, best = to_numpy(decoded), to_numpy(best)
    atol = atol_for(score)

    for b, length in enumerate(lengths):
        expected_norm, best_path, best_score, _ = brute_force(
            potentials[b], transitions, length
        )
        gold = tuple(tags[b, :length])
        assert score[b] == pytest.approx(
            path_score(potentials[b], transitions, gold) if length else 0.0, abs=atol
        )
        assert log_norm[b] == pytest.approx(expected_norm, abs=atol)
        assert tuple(decoded[b, :length]) == best_path
        assert (decoded[b, length:] == 0).all()
        assert best[b] == pytest.approx(best_score, abs=atol)


@pytest.mark.parametrize("compiled", [False, True])
def test_gradient_is_marginals(compiled):
    """d log_norm / d potentials = the tag marginals; 0 beyond the length."""
    potentials, _, lengths, transitions = random_case(seed=42)

    grad = backend_grad(
        lambda p: ops.sum(crf.crf_log_norm(p, lengths, transitions)),
        potentials,
        compiled,
    )
    for b, length in enumerate(lengths):
        _, _, _, marginals = brute_force(potentials[b], transitions, length)
        np.testing.assert_allclose(grad[b], marginals, atol=atol_for(grad, 1e-9))


def test_padding_is_ignored():
    """Steps beyond the length may hold NaN potentials and out-of-range tags."""
    potentials, tags, lengths, transitions = random_case(seed=3, dtype=np.float32)
    padded_potentials, padded_tags = potentials.copy(), tags.copy()
    for b, length in enumerate(lengths):
        padded_potentials[b, length:] = np.nan
        padded_tags[b, length:] = -100

    clean, _ = crf.crf_log_likelihood(potentials, tags, lengths, transitions)
    padded, _ = crf.crf_log_likelihood(padded_potentials, padded_tags, lengths, transitions)
    np.testing.assert_allclose(to_numpy(padded), to_numpy(clean), atol=1e-5)
    clean_tags, clean_best = crf.crf_decode(potentials, transitions, lengths)
    padded_tags_out, padded_best = crf.crf_decode(padded_potentials, transitions, lengths)
    np.testing.assert_array_equal(to_numpy(padded_tags_out), to_numpy(clean_tags))
    np.testing.assert_allclose(to_numpy(padded_best), to_numpy(clean_best), atol=1e-5)


def test_empty_sequences_are_zero():
    potentials = np.random.default_rng(0).normal(size=(2, 1, 3)).astype(np.float32)
    transitions = np.zeros((3, 3), np.float32)
    lengths = np.array([0, 0], np.int32)
    tags = np.zeros((2, 1), np.int32)

    log_likelihood, _ = crf.crf_log_likelihood(potentials, tags, lengths, transitions)
    decoded, best = crf.crf_decode(potentials, transitions, lengths)
    np.testing.assert_array_equal(to_numpy(log_likelihood), [0.0, 0.0])
    np.testing.assert_array_equal(to_numpy(decoded), [[0], [0]])
    np.testing.assert_array_equal(to_numpy(best), [0.0, 0.0])


def test_log_likelihood_needs_transition_params():
    with pytest.raises(ValueError, match="transition_params"):
        crf.crf_log_likelihood(np.zeros((1, 2, 3)), np.zeros((1, 2), int), [2])


@pytest.mark.parametrize("jit_compile", [False, True])
def test_compiled_with_dynamic_shapes(ref, jit_compile):
    """Under tf.function (dynamic batch/time, with and without XLA) / jax.jit."""

    def fn(potentials, tags, lengths, transitions):
        log_likelihood, _ = crf.crf_log_likelihood(potentials, tags, lengths, transitions)
        decoded, best = crf.crf_decode(potentials, transitions, lengths)
        return log_likelihood, decoded, best

    compiled = backend_jit(fn, jit_compile)
    args = (
        ref["potentials"],
        ref["tag_indices"],
        ref["sequence_lengths"],
        ref["transition_params"],
    )
    # The fixture; then one time step with an empty sequence (same trace on TF).
    for case in (args, (args[0][:, :1], args[1][:, :1], np.array([1, 0, 1, 0], np.int32), args[3])):
        got = [to_numpy(x) for x in compiled(*case)]
        want = [to_numpy(x) for x in fn(*case)]
        np.testing.assert_allclose(got[0], want[0], atol=1e-5)
        np.testing.assert_array_equal(got[1], want[1])
        np.testing.assert_allclose(got[2], want[2], atol=1e-5)
    np.testing.assert_allclose(
        to_numpy(compiled(*args)[0]), ref["log_likelihood"], atol=1e-4
    )


# --- forward-backward: marginals and segment probabilities ---------------------


def brute_force_events(potentials, transitions, length, segments, allowed=None, allowed_start=None):
    """Marginals `[time, num_tags]` and the probability of each segment event
    `(start, end, begin_tag, inside_tag, closed)` of one sequence, by summing
    over every labelling (the permitted ones only, with constraints)."""
    num_tags = transitions.shape[0]
    marginals = np.zeros(potentials.shape, dtype=np.float64)
    paths = [
        p for p in itertools.product(range(num_tags), repeat=length)
        if (allowed_start is None or allowed_start[p[0]])
        and (allowed is None or all(allowed[a, b] for a, b in zip(p[:-1], p[1:])))
    ]
    scores = np.array([path_score(potentials, transitions, p) for p in paths])
    probabilities = np.exp(scores - scores.max())
    probabilities /= probabilities.sum()
    events = np.zeros(len(segments))
    for path, probability in zip(paths, probabilities):
        marginals[np.arange(length), list(path)] += probability
        for k, (s, e, b, c, closed) in enumerate(segments):
            begins = path[s] == b or (path[s] == c and (s == 0 or path[s - 1] not in (b, c)))
            inside = all(path[t] == c for t in range(s + 1, e + 1))
            ends = not closed or e + 1 == length or path[e + 1] != c
            events[k] += probability * (begins and inside and ends)
    return marginals, events


def random_segments(rng, lengths, count=12):
    """Segments `(row, start, end, begin_tag, inside_tag, closed)` inside the lengths."""
    segments = []
    rows = [b for b, length in enumerate(lengths) if length > 0]
    for _ in range(count):
        row = int(rng.choice(rows))
        start = int(rng.integers(0, lengths[row]))
        end = int(rng.integers(start, lengths[row]))
        kind = int(rng.integers(0, 2))
        segments.append((row, start, end, 1 + 2 * kind, 2 + 2 * kind, bool(rng.integers(0, 4) > 0)))
    return segments


@pytest.mark.parametrize("constrained", [False, True])
@pytest.mark.parametrize("seed", range(3))
def test_marginals_and_segments_match_brute_force(seed, constrained):
    """Tag marginals and BIO segment probabilities against enumerating every
    (permitted) labelling; NaN potentials in the padding change nothing."""
    rng = np.random.default_rng(100 + seed)
    batch, time = 4, 5
    lengths = np.array([time, 1, int(rng.integers(2, time)), 0], np.int32)
    potentials = rng.normal(size=(batch, time, 5)) * 2
    potentials[:, :, [2, 4]] += 1.0  # dangling I-X labellings carry weight when unconstrained
    transitions = rng.normal(size=(5, 5))
    constraints = crf.allowed_transitions(BIO_LABELS, "BIO") if constrained else (None, None)
    padded = potentials.copy()
    for b, length in enumerate(lengths):
        padded[b, length:] = np.nan
    segments = random_segments(rng, lengths)
    rows, starts, ends, begins, insides, closed = (np.array(x) for x in zip(*segments))

    marginals = to_numpy(crf.crf_marginals(padded, lengths, transitions, *constraints))
    log_p = to_numpy(crf.crf_segment_log_probability(
        padded, lengths, transitions, rows, starts, ends, begins, insides, closed, *constraints))
    atol = atol_for(log_p, 1e-9)
    assert np.isfinite(marginals).all() and np.isfinite(log_p).all()
    for b, length in enumerate(lengths):
        mine = [k for k, segment in enumerate(segments) if segment[0] == b]
        if length == 0:
            assert not mine and (marginals[b] == 0).all()
            continue
        want_marginals, want_events = brute_force_events(
            potentials[b, :length], transitions, length, [segments[k][1:] for k in mine], *constraints)
        np.testing.assert_allclose(marginals[b, :length], want_marginals, atol=atol)
        np.testing.assert_allclose(marginals[b, :length].sum(axis=-1), 1.0, atol=atol)
        assert (marginals[b, length:] == 0).all()
        np.testing.assert_allclose(np.exp(log_p[mine]), want_events, atol=atol)
    if constrained:  # forbidden tags have probability 0: no I-X at step 0
        assert marginals[:, 0, [2, 4]].max() < 1e-30


def test_segment_probability_of_a_zero_transition_crf_is_the_softmax_product():
    """Zero transitions, no constraints: independent softmaxes per step, so a
    B-I-I segment followed by a step is p(B or dangling I) * p(I) * p(I) * p(not I)."""
    rng = np.random.default_rng(5)
    potentials = rng.normal(size=(1, 6, 5))
    p = np.exp(potentials[0]) / np.exp(potentials[0]).sum(-1, keepdims=True)
    got = to_numpy(crf.crf_segment_log_probability(
        potentials, [6], np.zeros((5, 5)), [0], [1], [3], [1], [2]))
    begin = p[1, 1] + p[1, 2] * (1 - p[0, 1] - p[0, 2])
    assert np.exp(got[0]) == pytest.approx(begin * p[2, 2] * p[3, 2] * (1 - p[4, 2]), abs=atol_for(got, 1e-12))


def step_by_step(potentials, transitions, start, segments):
    """Viterbi tags, marginals and segment-event probabilities of one sequence
    `[length, num_tags]` (float64 numpy), one step at a time: the plain
    recursions, with the segments' events as ratios of clamped partition
    functions."""
    length, num_tags = potentials.shape
    lse = np.logaddexp.reduce
    alpha, beta, best, pointers = np.zeros_like(potentials), np.zeros_like(potentials), potentials[0] + start, []
    alpha[0] = potentials[0] + start
    for t in range(1, length):
        alpha[t] = lse(alpha[t - 1][:, None] + transitions, axis=0) + potentials[t]
        pointers.append(np.argmax(best[:, None] + transitions, axis=0))
        best = np.max(best[:, None] + transitions, axis=0) + potentials[t]
    for t in range(length - 2, -1, -1):
        beta[t] = lse(transitions + (potentials[t + 1] + beta[t + 1])[None, :], axis=1)
    log_norm = lse(alpha[-1])
    tags = [int(np.argmax(best))]
    for step_pointers in reversed(pointers):
        tags.insert(0, int(step_pointers[tags[0]]))

    def event(s, e, b, c, closed):
        def allowed_into(t):  # [from, to]
            keep = np.ones((num_tags, num_tags), bool)
            if t == s:
                keep[:, [k for k in range(num_tags) if k not in (b, c)]] = False
                keep[[b, c], c] = False  # I begins only after neither B nor I (t > 0 here)
            elif s < t <= e:
                keep[:, [k for k in range(num_tags) if k != c]] = False
            elif t == e + 1 and closed:
                keep[:, c] = False
            return keep

        a = np.where(allowed_into(0)[0], potentials[0] + start, -np.inf) if s == 0 else potentials[0] + start
        for t in range(1, length):
            a = lse(np.where(allowed_into(t), a[:, None] + transitions, -np.inf), axis=0) + potentials[t]
        return np.exp(lse(a) - log_norm)

    return tags, np.exp(alpha + beta - log_norm), np.array([event(*segment) for segment in segments])


@pytest.mark.parametrize("constrained", [False, True])
def test_long_sequences_match_the_step_by_step_recursions(constrained):
    """Up to 130 steps (eight levels of the doubling scans, pointer jumping):
    tags, marginals and segment probabilities as the plain recursions give
    them (float64 in, so exactly the same tags); float32 marginals to 1e-3."""
    rng = np.random.default_rng(7)
    lengths = np.array([130, 77, 1, 0, 64], np.int32)
    potentials = rng.normal(size=(len(lengths), 130, 5)) * 3
    transitions = rng.normal(size=(5, 5))
    allowed, allowed_start = crf.allowed_transitions(BIO_LABELS, "BIO") if constrained else (None, None)
    lattice = transitions if allowed is None else np.where(allowed, transitions, transitions + crf.FORBIDDEN_SCORE)
    start = np.zeros(5) if allowed_start is None else np.where(allowed_start, 0.0, crf.FORBIDDEN_SCORE)
    segments = random_segments(rng, lengths, count=30)
    rows, starts, ends, begins, insides, closed = (np.array(x) for x in zip(*segments))

    tags, _ = crf.crf_decode(potentials, transitions, lengths, allowed, allowed_start)
    marginals = to_numpy(crf.crf_marginals(potentials, lengths, transitions, allowed, allowed_start))
    marginals32 = to_numpy(crf.crf_marginals(potentials.astype("float32"), lengths, transitions, allowed, allowed_start))
    log_p = to_numpy(crf.crf_segment_log_probability(
        potentials, lengths, transitions, rows, starts, ends, begins, insides, closed, allowed, allowed_start))
    atol = atol_for(log_p, 1e-8)
    for b, length in enumerate(lengths):
        if length == 0:
            continue
        mine = [k for k, segment in enumerate(segments) if segment[0] == b]
        want_tags, want_marginals, want_events = step_by_step(
            potentials[b, :length], lattice, start, [segments[k][1:] for k in mine])
        assert to_numpy(tags)[b, :length].tolist() == want_tags
        np.testing.assert_allclose(marginals[b, :length], want_marginals, atol=atol)
        np.testing.assert_allclose(marginals32[b, :length], want_marginals, atol=1e-3)
        np.testing.assert_allclose(np.exp(log_p[mine]), want_events, atol=atol)


@pytest.mark.parametrize("jit_compile", [False, True])
def test_forward_backward_compiled_with_dynamic_shapes(ref, jit_compile):
    """Marginals and segment probabilities under tf.function (dynamic shapes,
    with and without XLA) / jax.jit: what eager execution gives."""
    allowed, allowed_start = crf.allowed_transitions(BIO_LABELS, "BIO")

    def fn(potentials, tags, lengths, transitions):
        marginals = crf.crf_marginals(potentials, lengths, transitions, allowed, allowed_start)
        rows = ops.zeros_like(lengths[:2])
        log_p = crf.crf_segment_log_probability(
            potentials, lengths, transitions, rows, rows, rows + 1, rows + 1, rows + 2,
            allowed=allowed, allowed_start=allowed_start)
        return marginals, log_p, tags

    compiled = backend_jit(fn, jit_compile)
    args = (ref["potentials"], ref["tag_indices"], ref["sequence_lengths"], ref["transition_params"])
    for case in (args, (args[0][:, :2], args[1][:, :2], np.array([2, 0, 1, 2], np.int32), args[3])):
        got = [to_numpy(x) for x in compiled(*case)]
        want = [to_numpy(x) for x in fn(*case)]
        np.testing.assert_allclose(got[0], want[0], atol=1e-5)
        np.testing.assert_allclose(got[1], want[1], atol=1e-5)



# --- constraints -------------------------------------------------------------


def test_allowed_transitions_bio():
    allowed, allowed_start = crf.allowed_transitions(BIO_LABELS, "BIO")
    index = {label: i for i, label in enumerate(BIO_LABELS)}

    def ok(a, b):
        return bool(allowed[index[a], index[b]])

    assert allowed.dtype == bool and allowed.shape == (5, 5)
    assert not ok("O", "I-PER") and not ok("B-PER", "I-LOC") and not ok("I-LOC", "I-PER")
    assert ok("B-PER", "I-PER") and ok("I-PER", "I-PER") and ok("O", "B-LOC")
    assert ok("I-PER", "O") and ok("B-PER", "B-PER") and ok("I-LOC", "B-PER")
    assert allowed_start.tolist() == [True, True, False, True, False]
    np.testing.assert_array_equal(crf.allowed_transitions(BIO_LABELS, "iob2")[0], allowed)


def test_allowed_transitions_bioes():
    labels = ["O", "B-PER", "I-PER", "E-PER", "S-PER", "B-LOC", "E-LOC"]
    allowed, allowed_start = crf.allowed_transitions(labels, "BIOES")
    index = {label: i for i, label in enumerate(labels)}

    def ok(a, b):
        return bool(allowed[index[a], index[b]])

    for a, b in [("B-PER", "I-PER"), ("B-PER", "E-PER"), ("I-PER", "E-PER"),
                 ("E-PER", "O"), ("S-PER", "B-LOC"), ("O", "S-PER"), ("E-LOC", "B-PER")]:
        assert ok(a, b), (a, b)
    for a, b in [("O", "I-PER"), ("O", "E-PER"), ("B-PER", "O"), ("B-PER", "B-PER"),
                 ("I-PER", "S-PER"), ("B-LOC", "E-PER"), ("S-PER", "E-PER"), ("E-PER", "I-PER")]:
        assert not ok(a, b), (a, b)
    assert allowed_start.tolist() == [True, True, False, False, True, True, False]


def test_allowed_transitions_rejects_bad_input():
    with pytest.raises(ValueError, match="scheme"):
        crf.allowed_transitions(BIO_LABELS, "BILOU")
    with pytest.raises(ValueError, match="E-PER"):
        crf.allowed_transitions(["O", "B-PER", "E-PER"], "BIO")
    with pytest.raises(ValueError, match="PER"):
        crf.allowed_transitions(["O", "PER"], "BIOES")


def test_constrained_decode_respects_bio():
    allowed, allowed_start = crf.allowed_transitions(BIO_LABELS, "BIO")
    rng = np.random.default_rng(7)
    batch, time = 16, 5
    potentials = rng.normal(size=(batch, time, 5))
    potentials[:, :, [2, 4]] += 1.5  # favour I-X tags, so unconstrained paths break BIO
    transitions = rng.normal(size=(5, 5))
    lengths = rng.integers(1, time + 1, size=batch).astype(np.int32)

    def violations(decoded):
        count = 0
        for b, length in enumerate(lengths):
            path = decoded[b, :length]
            count += int(not allowed_start[path[0]])
            count += sum(int(not allowed[a, c]) for a, c in zip(path[:-1], path[1:]))
        return count

    free, _ = crf.crf_decode(potentials, transitions, lengths)
    assert violations(to_numpy(free)) > 0, "the test needs unconstrained violations"

    decoded, best = crf.crf_decode(
        potentials, transitions, lengths, allowed=allowed, allowed_start=allowed_start
    )
    decoded, best = to_numpy(decoded), to_numpy(best)
    assert violations(decoded) == 0
    for b, length in enumerate(lengths):
        _, best_path, best_score, _ = brute_force(
            potentials[b], transitions, length, allowed, allowed_start
        )
        assert tuple(decoded[b, :length]) == best_path
        assert best[b] == pytest.approx(best_score, abs=atol_for(best))

    layer = crf.CRF(5, allowed=allowed, allowed_start=allowed_start)
    layer.build((None, None, 5))
    layer.transitions.assign(transitions.astype(np.float32))
    layer_tags = to_numpy(layer(potentials.astype(np.float32), sequence_lengths=lengths))
    assert violations(layer_tags) == 0


# --- the layer ---------------------------------------------------------------


def test_layer_decodes_like_the_function(ref):
    layer = crf.CRF(5)
    potentials, lengths = ref["potentials"], ref["sequence_lengths"]
    layer.build(potentials.shape)
    layer.transitions.assign(ref["transition_params"])
    assert layer.transitions.path.endswith("transitions")

    decoded = to_numpy(layer(potentials, sequence_lengths=lengths))
    mask = np.arange(potentials.shape[1])[None, :] < lengths[:, None]
    np.testing.assert_array_equal(decoded, np.where(mask, ref["decode_tags"], 0))
    np.testing.assert_array_equal(to_numpy(layer(potentials, mask=mask)), decoded)
    full = to_numpy(layer(potentials))
    np.testing.assert_array_equal(full[0], ref["decode_tags"][0])  # length 7 = full

    log_likelihood = layer.log_likelihood(potentials, ref["tag_indices"], lengths)
    np.testing.assert_allclose(to_numpy(log_likelihood), ref["log_likelihood"], atol=1e-4)
    loss = layer.loss(potentials, ref["tag_indices"], lengths)
    assert float(to_numpy(loss)) == pytest.approx(-ref["log_likelihood"].mean(), abs=1e-4)


def test_layer_refuses_constraints_of_another_shape():
    allowed, _ = crf.allowed_transitions(BIO_LABELS, "BIO")
    with pytest.raises(ValueError, match="allowed"):
        crf.CRF(4, allowed=allowed)


class ToyTagger(keras.Model):
    """Dense potentials + CRF, trained through `compute_loss` (any backend)."""

    def __init__(self, num_tags, **kwargs):
        super().__init__(**kwargs)
        self.num_tags = num_tags
        self.dense = keras.layers.Dense(num_tags)
        self.crf = crf.CRF(num_tags)
        self.crf.build((None, None, num_tags))

    def call(self, inputs):
        return self.dense(inputs)

    def compute_loss(self, x=None, y=None, y_pred=None, sample_weight=None, training=True):
        lengths = ops.zeros_like(y[:, 0]) + ops.shape(y)[1]
        return self.crf.loss(y_pred, y, lengths)


def toy_data(num_tags=4, batch=32, time=6, features=8, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(batch, time, features)).astype(np.float32)
    y = np.argmax(x[:, :, :num_tags], axis=-1).astype(np.int32)
    return x, y


def test_layer_trains():
    keras.utils.set_random_seed(0)
    x, y = toy_data()
    model = ToyTagger(4)
    # jit_compile=True: XLA, what `"auto"` picks on a GPU (on CPU it picks False).
    model.compile(optimizer=keras.optimizers.Adam(0.1), jit_compile=True)
    model(x[:1])
    before = to_numpy(model.crf.transitions).copy()
    assert any(v is model.crf.transitions for v in model.trainable_variables)

    history = model.fit(x, y, batch_size=16, epochs=10, verbose=0)
    losses = history.history["loss"]
    assert losses[-1] < 0.5 * losses[0], losses
    assert not np.allclose(to_numpy(model.crf.transitions), before)
    decoded = to_numpy(model.crf(model(x)))
    assert (decoded == y).mean() > 0.8


@pytest.fixture
def mixed_bfloat16():
    from kerasbert.testing import dtype_policy

    with dtype_policy("mixed_bfloat16"):
        yield


def test_layer_under_mixed_precision(mixed_bfloat16):
    keras.utils.set_random_seed(0)
    x, y = toy_data()
    dense = keras.layers.Dense(4)
    layer = crf.CRF(4)
    potentials = dense(x)
    assert keras.backend.standardize_dtype(potentials.dtype) == "bfloat16"
    layer.build(potentials.shape)
    assert layer.transitions.dtype == "float32"

    lengths = np.full((len(x),), x.shape[1], np.int32)
    log_likelihood = layer.log_likelihood(potentials, y, lengths)
    assert keras.backend.standardize_dtype(log_likelihood.dtype) == "float32"
    expected, _ = crf.crf_log_likelihood(
        to_numpy(ops.cast(potentials, "float32")), y, lengths, to_numpy(layer.transitions)
    )
    np.testing.assert_allclose(to_numpy(log_likelihood), to_numpy(expected), atol=1e-5)
    decoded = layer(potentials, sequence_lengths=lengths)
    assert keras.backend.standardize_dtype(decoded.dtype) == "int32"

    model = ToyTagger(4)  # and it trains under the policy
    model.compile(optimizer=keras.optimizers.Adam(0.05))
    history = model.fit(x, y, batch_size=16, epochs=2, verbose=0)
    assert np.isfinite(history.history["loss"]).all()
    assert model.crf.transitions.dtype == "float32"


def test_module_uses_keras_ops_only():
    """The CRF package imports only keras, numpy and its own modules (and
    TensorFlow inside the TensorFlow branches of ``sequence._scan`` and
    ``sequence._gather``); numpy only in the non-traced config helpers."""
    imported, numpy_users = set(), set()
    for path in sorted(Path(crf.__file__).parent.glob("*.py")):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                imported.update(alias.name.split(".")[0] for alias in node.names)
            elif isinstance(node, ast.ImportFrom):
                imported.add(node.module if node.module.startswith("kerasbert.") else node.module.split(".")[0])
        numpy_users |= {
            function.name
            for function in tree.body
            if isinstance(function, ast.FunctionDef)
            for node in ast.walk(function)
            if isinstance(node, ast.Name) and node.id == "np"
        }
    assert imported == {"keras", "numpy", "tensorflow", "kerasbert.layers.crf.layer", "kerasbert.layers.crf.sequence",
                        "kerasbert.layers.crf.probabilities"}
    assert numpy_users == {"allowed_transitions", "_bool_list"}


# --- JAX backend -------------------------------------------------------------

JAX_SCRIPT = textwrap.dedent(
    """
    import json, sys
    import numpy as np
    import keras
    assert keras.backend.backend() == "jax", keras.backend.backend()
    import jax
    from kerasbert.layers import crf

    d = np.load(sys.argv[1])
    p, tags, lengths, trans = (
        d["potentials"], d["tag_indices"], d["sequence_lengths"], d["transition_params"]
    )

    def both(p, tags, lengths, trans):
        ll, _ = crf.crf_log_likelihood(p, tags, lengths, trans)
        decoded, best = crf.crf_decode(p, trans, lengths)
        return ll, decoded, best

    ll, decoded, best = both(p, tags, lengths, trans)
    jll, jdecoded, jbest = jax.jit(both)(p, tags, lengths, trans)
    grad = jax.grad(lambda q: -crf.crf_log_likelihood(q, tags, lengths, trans)[0].sum())(p)
    short = [0, 1, 1, 0]
    sll, sdecoded, _ = jax.jit(both)(p[:, :1], tags[:, :1], np.int32(short), trans)
    allowed, allowed_start = crf.allowed_transitions(["O", "B-PER", "I-PER", "B-LOC", "I-LOC"], "BIO")
    seg = [np.int32(x) for x in ([0, 0, 1, 2], [0, 1, 0, 0], [1, 3, 0, 2], [1, 3, 1, 3], [2, 4, 2, 4])]

    def probabilities(p, lengths, trans):
        return (crf.crf_marginals(p, lengths, trans, allowed, allowed_start),
                crf.crf_segment_log_probability(p, lengths, trans, *seg, allowed=allowed, allowed_start=allowed_start))

    marginals, log_p = probabilities(p, lengths, trans)
    jmarginals, jlog_p = jax.jit(probabilities)(p, lengths, trans)
    layer = crf.CRF(5)
    layer.build(p.shape)
    layer.transitions.assign(trans)
    result = {
        "log_likelihood": np.asarray(ll).tolist(),
        "decode_tags": np.asarray(decoded).tolist(),
        "best_score": np.asarray(best).tolist(),
        "jit_log_likelihood": np.asarray(jll).tolist(),
        "jit_decode_tags": np.asarray(jdecoded).tolist(),
        "jit_best_score": np.asarray(jbest).tolist(),
        "grad_finite": bool(np.isfinite(np.asarray(grad)).all()),
        "grad_padding_zero": bool(np.all(np.asarray(grad)[3, 1:] == 0)),
        "short_log_likelihood": np.asarray(sll).tolist(),
        "short_decode_tags": np.asarray(sdecoded).tolist(),
        "layer_decode_tags": np.asarray(layer(p, sequence_lengths=lengths)).tolist(),
        "dtypes": [str(ll.dtype), str(decoded.dtype), str(best.dtype), str(marginals.dtype), str(log_p.dtype)],
        "marginals": np.asarray(marginals).tolist(),
        "jit_marginals": np.asarray(jmarginals).tolist(),
        "segment_log_p": np.asarray(log_p).tolist(),
        "jit_segment_log_p": np.asarray(jlog_p).tolist(),
    }
    print("RESULT " + json.dumps(result))
    """
)


def test_jax_backend_matches_reference(ref):
    import importlib.util

    if importlib.util.find_spec("jax") is None:
        pytest.fail(
            "jax is not installed: it is a dev dependency (pip install -e '.[dev]'); "
            "the CRF must be tested on KERAS_BACKEND=jax too",
            pytrace=False,
        )
    fixture = require_shared("fixtures", "crf_tfa_reference.npz")
    env = dict(os.environ, KERAS_BACKEND="jax", JAX_PLATFORMS="cpu", TF_CPP_MIN_LOG_LEVEL="3")
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT), env.get("PYTHONPATH")]))
    proc = subprocess.run(
        [sys.executable, "-c", JAX_SCRIPT, str(fixture)],
        env=env,
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    lines = [line for line in proc.stdout.splitlines() if line.startswith("RESULT ")]
    assert proc.returncode == 0 and lines, (
        f"JAX subprocess failed (rc={proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    )
    got = json.loads(lines[-1][len("RESULT "):])

    lengths = ref["sequence_lengths"]
    mask = np.arange(ref["potentials"].shape[1])[None, :] < lengths[:, None]
    want_tags = np.where(mask, ref["decode_tags"], 0)
    assert got["dtypes"] == ["float32", "int32", "float32", "float32", "float32"]
    # Forward-backward (with the BIO constraints): what this process's backend computes.
    allowed, allowed_start = crf.allowed_transitions(BIO_LABELS, "BIO")
    seg = [np.int32(x) for x in ([0, 0, 1, 2], [0, 1, 0, 0], [1, 3, 0, 2], [1, 3, 1, 3], [2, 4, 2, 4])]
    p, trans = ref["potentials"], ref["transition_params"]
    marginals = to_numpy(crf.crf_marginals(p, lengths, trans, allowed, allowed_start))
    log_p = to_numpy(crf.crf_segment_log_probability(p, lengths, trans, *seg, allowed=allowed,
                                                     allowed_start=allowed_start))
    for prefix in ("", "jit_"):
        np.testing.assert_allclose(got[prefix + "marginals"], marginals, atol=1e-5)
        np.testing.assert_allclose(got[prefix + "segment_log_p"], log_p, atol=1e-4)
    for prefix in ("", "jit_"):
        np.testing.assert_allclose(got[prefix + "log_likelihood"], ref["log_likelihood"], atol=1e-4)
        np.testing.assert_allclose(got[prefix + "best_score"], ref["best_score"], atol=1e-4)
        np.testing.assert_array_equal(got[prefix + "decode_tags"], want_tags)
    np.testing.assert_array_equal(got["layer_decode_tags"], want_tags)
    assert got["grad_finite"] and got["grad_padding_zero"]

    # One time step, lengths [0, 1, 1, 0]: compare with this process's backend.
    short = np.array([0, 1, 1, 0], np.int32)
    p, tags, trans = ref["potentials"][:, :1], ref["tag_indices"][:, :1], ref["transition_params"]
    ll, _ = crf.crf_log_likelihood(p, tags, short, trans)
    decoded, _ = crf.crf_decode(p, trans, short)
    np.testing.assert_allclose(got["short_log_likelihood"], to_numpy(ll), atol=1e-5)
    np.testing.assert_array_equal(got["short_decode_tags"], to_numpy(decoded))
