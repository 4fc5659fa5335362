"""What ``kerasbert ner select``'s P(best labelling) is for the GlobalPointer
head's outputs (numpy, float64; the measure its registration declares,
:mod:`kerasbert_apps.ner.heads.global_pointer`, computed by
:meth:`kerasbert_apps.ner.heads.global_pointer.pipeline.SpanTagger.selection_log_best`):
every (start, end, type) span of a window row's text tokens (``start <=
end``, ``[CLS]``/``[SEP]`` excluded) is an independent yes/no with ``p =
sigmoid(logit / T)``; the best labelling says yes where ``p > 1/2``, so
``P(best) = prod max(p, 1 - p)`` (:func:`span_log_best`).
"""

import numpy as np


def span_log_best(logits, lengths, temperature=1.0):
    """log prod max(p, 1 - p) over each row's spans, ``p = sigmoid(logit /
    temperature)``: ``logits`` [rows, len, len', types] (start, end
    inclusive), spans with ``1 <= start <= end <= length - 2`` (the text's
    tokens, ``[CLS]`` at 0 and ``[SEP]`` at ``length - 1`` excluded)."""
    logits = np.asarray(logits, np.float64) / float(temperature)
    lengths = np.asarray(lengths, np.int64)
    if logits.shape[0] == 0:
        return np.zeros(0)
    i = np.arange(logits.shape[1])[None, :, None]
    j = np.arange(logits.shape[2])[None, None, :]
    last = (lengths - 2)[:, None, None]
    valid = (i >= 1) & (i <= j) & (j <= last)
    # log max(p, 1 - p) = -log(1 + exp(-|z|))
    log_best = -np.logaddexp(0.0, -np.abs(logits))
    return np.where(valid[..., None], log_best, 0.0).sum(axis=(1, 2, 3))
