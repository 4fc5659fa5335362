"""What ``kerasbert ner select``'s P(best labelling) is for the BIO heads'
outputs (numpy, float64; the measures their registrations declare,
:mod:`kerasbert_apps.ner.heads.bio`, computed by
:meth:`kerasbert_apps.ner.heads.bio.pipeline.Tagger.selection_log_best`), per
window row, over the row's tokens ``[CLS]`` and ``[SEP]`` included, at the
score temperature ``T`` (emissions and transitions divided by it):

* ``crf``: ``P(best) = exp(score(Viterbi path) - log Z)``, ``score`` the sum
  of the emission scores of the path's tags, the transitions between them
  and the first tag's start penalty, ``log Z`` the CRF's forward algorithm
  over the same lattice (the BIO constraints as the decoder applies them)
  (:func:`crf_log_best`);
* ``softmax``: the product over the tokens of each token's largest softmax
  probability (:func:`softmax_log_best`).
"""

import numpy as np


def crf_log_best(potentials, lengths, tags, transitions, start=None):
    """log P(``tags``) under a linear-chain CRF, per row: ``potentials``
    [rows, len, tags] emission scores, ``lengths`` [rows], ``tags`` [rows,
    len] the labelling (the Viterbi path), ``transitions`` [tags, tags]
    (from, to) and ``start`` [tags] first-tag scores (default 0). Rows of
    length 0 give 0."""
    potentials = np.asarray(potentials, np.float64)
    transitions = np.asarray(transitions, np.float64)
    lengths = np.asarray(lengths, np.int64)
    tags = np.asarray(tags, np.int64)
    n_rows, time, n_tags = potentials.shape
    start = np.zeros(n_tags) if start is None else np.asarray(start, np.float64)
    if n_rows == 0:
        return np.zeros(0)
    steps = np.arange(time)[None, :]
    inside = steps < lengths[:, None]
    unary = np.take_along_axis(potentials, tags[..., None], axis=2)[..., 0]
    path = np.where(inside, unary, 0.0).sum(axis=1) + start[tags[:, 0]]
    moves = transitions[tags[:, :-1], tags[:, 1:]]
    path += np.where(inside[:, 1:], moves, 0.0).sum(axis=1)
    alpha = potentials[:, 0] + start[None]
    for t in range(1, time):
        moved = np.logaddexp.reduce(alpha[:, :, None] + transitions[None], axis=1) + potentials[:, t]
        alpha = np.where((t < lengths)[:, None], moved, alpha)
    log_z = np.logaddexp.reduce(alpha, axis=1)
    return np.where(lengths > 0, np.minimum(path - log_z, 0.0), 0.0)


def softmax_log_best(potentials, lengths):
    """log of the product over each row's first ``lengths`` tokens of the
    token's largest softmax probability: log P(argmax labelling) under
    independent per-token softmaxes."""
    potentials = np.asarray(potentials, np.float64)
    lengths = np.asarray(lengths, np.int64)
    if potentials.shape[0] == 0:
        return np.zeros(0)
    log_norm = np.logaddexp.reduce(potentials, axis=2)
    best = potentials.max(axis=2) - log_norm
    inside = np.arange(potentials.shape[1])[None, :] < lengths[:, None]
    return np.where(inside, best, 0.0).sum(axis=1)
