"""Overlapping entity candidates resolved by score, as TensorFlow ops: a
span head's last decoding step (the rule of Yu, Bohnet and Poesio 2020,
section 3), for any head whose decoding calls it.

The candidates of a text, by score from the highest, are kept unless they
*cross* an entity kept before them (one starts inside the other and ends
after it); an entity inside another (nested) is kept. With ``nested=False``
(a model trained on data where no entity lies inside another) a candidate
that overlaps an entity kept before it in any way is dropped too, the
paper's rule for flat entities. Kept entities are sorted by start, then end.
"""

import functools


def without_clashes(*parts, nested=True):
    """The rule of the module docstring on the padded outputs ``parts`` (each
    as :func:`~kerasbert_apps.ner.window_merge.span_outputs` returns them,
    for the same texts, numeric -- the kit's heads name them afterwards --
    or named; a span is in one part at most): their entities together,
    crossing ones dropped (and with ``nested=False`` nested ones too),
    sorted by start then end; every output of the parts comes along (pads:
    -1 for integers, 0 for scores, ``""`` for strings). Run eagerly
    (the decoding around a model on the JAX backend) it runs as a graph:
    its loop over the entities, op by op in Python, took seconds a batch."""
    import tensorflow as tf

    if tf.executing_eagerly():
        return _without_clashes_graph(bool(nested))(*parts)

    index = [tf.range(tf.shape(p["start"])[1])[None, :] for p in parts]
    valid = tf.concat([i < p["count"][:, None] for i, p in zip(index, parts)], axis=1)
    field = {k: tf.concat([p[k] for p in parts], axis=1) for k in parts[0] if k != "count"}
    # by score, highest first (padding last)
    order = tf.argsort(tf.where(valid, field["score"], -1.0), axis=1, direction="DESCENDING", stable=True)
    field = {k: tf.gather(v, order, batch_dims=1) for k, v in field.items()}
    valid = tf.gather(valid, order, batch_dims=1)
    start, end = field["start"], field["end"]  # characters, end exclusive
    n = tf.shape(start)[1]

    def keep_next(k, kept):
        s, e = start[:, k:k + 1], end[:, k:k + 1]
        if nested:
            crosses = ((start < s) & (s < end) & (end < e)) | ((s < start) & (start < e) & (e < end))
        else:  # any overlap (end exclusive)
            crosses = (start < e) & (s < end)
        ok = valid[:, k] & ~tf.reduce_any(crosses & kept, axis=1)
        return k + 1, kept | (tf.one_hot(k, n, on_value=True, off_value=False)[None, :] & ok[:, None])

    _, kept = tf.while_loop(lambda k, kept: k < n, keep_next, (tf.constant(0), tf.zeros_like(valid)))
    # kept entities by start, then end (two stable sorts), the others after them
    big = tf.cast(tf.reduce_max(tf.concat([tf.reshape(end, [-1]), [0]], 0)), tf.int64) + 1
    key = tf.where(kept, tf.cast(start, tf.int64) * big + tf.cast(end, tf.int64), tf.int64.max)
    order = tf.argsort(key, axis=1, stable=True)
    count = tf.reduce_sum(tf.cast(kept, tf.int32), axis=1)
    width = tf.reduce_max(tf.concat([count, [0]], 0))
    real = tf.range(width)[None, :] < count[:, None]
    out = {k: tf.where(real, tf.gather(v, order, batch_dims=1)[:, :width], _pad(v.dtype)) for k, v in field.items()}
    out["count"] = count
    return out


def _pad(dtype):
    """What pads an output of ``dtype``: ``""``, 0.0 for floats, -1 for integers."""
    return "" if dtype.name == "string" else (0.0 if dtype.is_floating else -1)


@functools.lru_cache(maxsize=None)
def _without_clashes_graph(nested):
    import tensorflow as tf

    return tf.function(functools.partial(without_clashes, nested=nested), autograph=False, reduce_retracing=True)
