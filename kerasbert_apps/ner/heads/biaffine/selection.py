"""What ``kerasbert ner select``'s P(best labelling) is for the biaffine
head's outputs (numpy, float64; the measure its registration declares,
:mod:`kerasbert_apps.ner.heads.biaffine`, computed by
:meth:`kerasbert_apps.ner.heads.biaffine.pipeline.BiaffineTagger.selection_log_best`):
every span of a window row's text tokens has one softmax over the types and
"no entity" (logits divided by the score temperature ``T``); ``P(best)`` is
the product of each span's largest class probability
(:func:`span_class_log_best`).
"""

import numpy as np


def span_class_log_best(logits, lengths, temperature=1.0):
    """log prod over each row's spans of the largest class probability,
    ``softmax(logits / temperature)`` over the types and "no entity":
    ``logits`` [rows, len, len', types + 1] (start, end inclusive), spans
    with ``1 <= start <= end <= length - 2`` (the text's tokens, ``[CLS]`` at
    0 and ``[SEP]`` at ``length - 1`` excluded; a span's best class is "no
    entity" or a type)."""
    logits = np.asarray(logits, np.float64) / float(temperature)
    lengths = np.asarray(lengths, np.int64)
    if logits.shape[0] == 0:
        return np.zeros(0)
    i = np.arange(logits.shape[1])[:, None]
    j = np.arange(logits.shape[2])[None, :]
    valid = (i[None] >= 1) & (i[None] <= j[None]) & (j[None] <= (lengths - 2)[:, None, None])
    z = logits - logits.max(axis=-1, keepdims=True)
    log_best = -np.log(np.exp(z).sum(axis=-1))  # log max softmax = z_max - logsumexp(z)
    return np.where(valid, log_best, 0.0).sum(axis=(1, 2))
