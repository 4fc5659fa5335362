"""Training batches: examples of similar length, padded only to the longest
in the batch (not to ``max_length``).

* :class:`BucketedBatches` -- a ``keras.utils.PyDataset`` of length-bucketed
  batches, reshuffled each epoch, splittable evenly over devices or workers;
* :func:`padded_length` -- the width a batch is padded to (few distinct
  shapes, so a compiled step is traced a few times only).
"""

import math

import keras
import numpy as np


def padded_length(n, multiple=8, cap=None):
    """``n`` rounded up to a multiple of ``multiple``, but never beyond ``cap``
    (and never below ``n``). Every batch is padded this way, so a model's
    compiled step sees few distinct shapes and is traced a few times only."""
    rounded = int(math.ceil(n / multiple) * multiple)
    return max(int(n), min(rounded, cap)) if cap else rounded


class BucketedBatches(keras.utils.PyDataset):
    """Batches of examples of similar length, padded to the batch's longest.

    Args:
        features: dict name -> list of arrays (one per example; all names
            share lengths, the first dimension), e.g. ``token_ids``,
            ``segment_ids``, ``padding_mask``, ``tags`` (int, batched as
            int32) or a teacher's scores ``[length, tags]`` (float, batched in
            their own dtype).
        batch_size: examples per batch.
        targets: names of the features that are targets (``y``), the rest are
            inputs (``x``).
        shuffle: shuffle within length buckets and the batch order, anew each
            epoch (seeded).
        pad_to_multiple: round each batch's length up to a multiple of this,
            to limit the number of distinct shapes (each one compiles once).
        seed: shuffling seed.
        pad_values: dict name -> padding value (default 0).
        max_width: never round a batch's length up beyond this (e.g. the
            model's number of position embeddings).
    """

    def __init__(self, features, batch_size, targets=(), shuffle=True, pad_to_multiple=8, seed=0, pad_values=None,
                 max_width=None, **kwargs):
        super().__init__(**kwargs)
        self.features = features
        self.names = list(features)
        self.targets = list(targets)
        self.batch_size = int(batch_size)
        self.shuffle = shuffle
        self.pad_to_multiple = int(pad_to_multiple)
        self.pad_values = dict(pad_values or {})
        self.max_width = max_width
        self.lengths = np.array([len(a) for a in features[self.names[0]]])
        self.rng = np.random.default_rng(seed)
        self._epoch = 0
        self.row_multiple = 1
        self._make_batches()

    def split_evenly(self, parts):
        """Make every batch's row count a multiple of ``parts`` (devices or
        replicas that each take an equal share of a batch): the rows of the
        short batch beyond a multiple are left out of each epoch, chosen
        anew each epoch. Returns how many rows an epoch leaves out."""
        self.row_multiple = int(parts)
        if len(self.lengths) % self.batch_size % self.row_multiple:  # else the batches already split evenly
            self._make_batches()
        return self.left_out

    def _make_batches(self):
        n = len(self.lengths)
        rows = np.arange(n)
        # Every batch a multiple of row_multiple rows: leave out (random) rows.
        self.left_out = n % self.batch_size % self.row_multiple
        if self.left_out:
            rows = np.sort(self.rng.choice(n, n - self.left_out, replace=False) if self.shuffle else rows[: -self.left_out])
        if self.shuffle:
            # Sort by length with random tie-breaking, chunk, shuffle the chunks.
            order = rows[np.lexsort((self.rng.random(len(rows)), self.lengths[rows]))]
        else:
            order = rows[np.argsort(self.lengths[rows], kind="stable")]
        batches = [order[i : i + self.batch_size] for i in range(0, len(order), self.batch_size)]
        if self.shuffle:
            self.rng.shuffle(batches)
        self.batches = self._expose_shapes(batches)

    def _expose_shapes(self, batches):
        """Keras builds a PyDataset's ``tf.data`` signature from its first two
        batches and rejects any later batch of another shape. Put first the
        smallest batch (the short last one, if any) and second a batch of
        another width (if any), so the signature leaves every varying
        dimension open. The rest keep their order."""
        if len(batches) < 3:
            return batches
        first = min(range(len(batches)), key=lambda i: len(batches[i]))
        width = self._width(batches[first])
        second = next((i for i in range(len(batches)) if i != first and self._width(batches[i]) != width), None)
        front = [first] + ([second] if second is not None else [])
        return [batches[i] for i in front] + [b for i, b in enumerate(batches) if i not in front]

    def _width(self, rows):
        return padded_length(int(self.lengths[rows].max()), self.pad_to_multiple, self.max_width)

    def __len__(self):
        return len(self.batches)

    def __getitem__(self, index):
        return self.batch(index)

    def batch(self, index, share=(0, 1)):
        """Batch ``index``; with ``share=(i, n)`` only its rows ``i::n`` (one
        worker's share of a global batch, see :func:`worker_batches`), padded
        to the whole batch's width."""
        rows = self.batches[index]
        width = self._width(rows)
        rows = rows[share[0] :: share[1]]
        x, y = {}, {}
        for name in self.names:
            first = np.asarray(self.features[name][rows[0]])
            dtype = first.dtype if first.dtype.kind == "f" else np.int32
            array = np.full((len(rows), width) + first.shape[1:], self.pad_values.get(name, 0), dtype=dtype)
            for i, row in enumerate(rows):
                value = self.features[name][row]
                array[i, : len(value)] = value
            (y if name in self.targets else x)[name] = array
        if not self.targets:
            return x
        if len(self.targets) == 1:
            return x, y[self.targets[0]]
        return x, y

    def on_epoch_end(self):
        if self.shuffle:
            self._make_batches()
