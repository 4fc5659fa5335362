"""Training batches for the triple model: one random gold subject per row, redrawn each epoch."""

import numpy as np

from kerasbert.training.batching import BucketedBatches


class SubjectSampledBatches(BucketedBatches):
    """Length-bucketed batches (:class:`kerasbert.training.batching.BucketedBatches`:
    similar lengths together, padded to the batch's longest, reshuffled each
    epoch) where each row carries ONE of its gold subjects -- drawn at random,
    redrawn at every epoch end (CasRel samples one subject per sentence and
    step) -- with that subject's object labels.

    Args:
        features: :meth:`kerasbert_apps.triples.heads.casrel.pipeline.Extractor.features` output.
        num_predicates: ``P``.
        batch_size, seed, shuffle, max_width: as for ``BucketedBatches``.

    Batches: ``x`` = token_ids, segment_ids, padding_mask [b, len] and
    subject_span [b, 2] (``(0, 0)``, i.e. ``[CLS]``, for rows without a
    subject); ``y`` = subject_start, subject_end [b, len] int32 and
    object_start, object_end [b, len, P] int8.
    """

    def __init__(self, features, num_predicates, batch_size, seed=0, shuffle=True, max_width=None, **kwargs):
        base = {k: features[k] for k in ("token_ids", "segment_ids", "padding_mask", "subject_start", "subject_end")}
        super().__init__(base, batch_size, targets=("subject_start", "subject_end"), shuffle=shuffle,
                         seed=seed, max_width=max_width, **kwargs)
        self.subjects = features["subjects"]
        self.num_predicates = int(num_predicates)
        self.sample_rng = np.random.default_rng(seed + 1)
        self._sample()

    def _sample(self):
        self.choice = np.array([self.sample_rng.integers(len(s)) if s else -1 for s in self.subjects], np.int64)

    def __getitem__(self, index):
        x, y = super().__getitem__(index)
        rows = self.batches[index]
        n, width = x["token_ids"].shape
        span = np.zeros((n, 2), np.int32)
        object_start = np.zeros((n, width, self.num_predicates), np.int8)
        object_end = np.zeros((n, width, self.num_predicates), np.int8)
        for r, row in enumerate(rows):
            k = self.choice[row]
            if k < 0:
                continue
            (s, e), starts, ends = self.subjects[row][k]
            span[r] = (s, e)
            object_start[r, starts[:, 0], starts[:, 1]] = 1
            object_end[r, ends[:, 0], ends[:, 1]] = 1
        x["subject_span"] = span
        y["object_start"] = object_start
        y["object_end"] = object_end
        return x, y

    def on_epoch_end(self):
        super().on_epoch_end()
        self._sample()
