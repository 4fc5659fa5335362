"""NER decoding, written once as TensorFlow ops: per-window tags -> entities.

:func:`entities` is step 3 of :class:`apps.base.pipeline.Pipeline` for the
NER tagger -- what ``predict``, ``evaluate``, the dev evaluation and the
SavedModel all run. Following a batch:

1. **merge windows**: each token of a text takes its tag (and score) from the
   window where it sits furthest from a cut edge; the text's own first and
   last tokens are not cuts; on a tie the earlier window wins;
2. **BIO decoding** over each text's tokens: an entity starts at ``B-X``, or
   at an ``I-X`` that does not continue an ``X`` entity (the usual lenient
   repair), and runs over the following ``I-X``;
3. **offsets**: an entity's ``start`` is its first token's start offset and
   ``end`` its last token's end (exclusive), code points into the original
   text, so ``text[start:end]`` is the entity as written; ``score`` is the
   mean over its tokens of the softmax of the emission scores at the chosen
   tag (a confidence heuristic, not a CRF marginal).

Outputs, padded per batch (the ``text`` signature's)::

    start, end  int32  [batch, max_entities]   -1 pads
    type        string [batch, max_entities]   "" pads
    mention     string [batch, max_entities]   text[start:end]; "" pads
    score       float32[batch, max_entities]   0 pads
    count       int32  [batch]
"""

import numpy as np

_BIG = 1 << 20  # margin of a window edge that is the text's own edge (not a cut)
_WINDOW_SLOTS = 1 << 32  # key = margin * _WINDOW_SLOTS - window index (int64)


def tag_tables(tags):
    """(prefix per tag id: 0 = O, 1 = B, 2 = I; type index per tag id; type names)."""
    types = sorted({t[2:] for t in tags if t != "O"})
    prefix = [0 if t == "O" else (1 if t.startswith("B-") else 2) for t in tags]
    type_index = [0 if t == "O" else types.index(t[2:]) for t in tags]
    return np.array(prefix, np.int32), np.array(type_index, np.int32), types


def tag_probabilities(potentials, tags):
    """Softmax of the emission scores [rows, len, tags] at the chosen tags [rows, len]."""
    import tensorflow as tf

    probs = tf.nn.softmax(tf.cast(potentials, tf.float32), axis=-1)
    return tf.gather(probs, tf.cast(tags, tf.int32), batch_dims=2)


def merge_windows(windows, values):
    """Per-window values [rows, len] -> one value per text token, flat over
    the batch's texts (text 0's tokens first), by the rule of step 1."""
    import tensorflow as tf

    text_index, token_start, token_end = windows["text_index"], windows["token_start"], windows["token_end"]
    num_tokens = windows["num_tokens"]
    n_rows = tf.size(text_index)
    positions = tf.range(tf.maximum(tf.shape(windows["token_ids"])[1] - 2, 0))
    n = token_end - token_start  # tokens per row
    valid = positions[None, :] < n[:, None]
    cut_left = (token_start > 0)[:, None]
    cut_right = (token_end < tf.gather(num_tokens, text_index))[:, None]
    left = tf.where(cut_left, positions[None, :], _BIG)
    right = tf.where(cut_right, n[:, None] - 1 - positions[None, :], _BIG)
    margin = tf.cast(tf.minimum(left, right), tf.int64)
    first_row = tf.cumsum(tf.math.bincount(text_index, minlength=tf.size(num_tokens), dtype=tf.int32), exclusive=True)
    window_k = tf.range(n_rows) - tf.gather(first_row, text_index)
    key = margin * _WINDOW_SLOTS - tf.cast(window_k, tf.int64)[:, None]  # margin first, then the earlier window
    token_first = tf.cumsum(num_tokens, exclusive=True)
    total = tf.reduce_sum(num_tokens)
    flat = tf.gather(token_first, text_index)[:, None] + token_start[:, None] + positions[None, :]
    cells = tf.where(valid)
    flat_valid = tf.gather_nd(flat, cells)
    key_valid = tf.gather_nd(key, cells)
    best = tf.math.unsorted_segment_max(key_valid, flat_valid, total)
    chosen = key_valid == tf.gather(best, flat_valid)
    where = tf.boolean_mask(flat_valid, chosen)[:, None]
    at = tf.boolean_mask(cells, chosen) + tf.constant([0, 1], tf.int64)  # row position = token position + 1 ([CLS])
    return {name: tf.scatter_nd(where, tf.gather_nd(value, at), tf.reshape(total, [1])) for name, value in values.items()}


def entities(texts, windows, row_tags, row_probs, tables):
    """Steps 1-3 of the module docstring: ``row_tags`` int32 and
    ``row_probs`` float32 [rows, len] (one row per window of ``windows``,
    :meth:`kerasbert.graph_tokenizer.GraphTokenizer.windows`), ``tables``
    from :func:`tag_tables` -> the padded outputs."""
    import tensorflow as tf

    prefix_table, type_table, types = tables
    num_tokens = windows["num_tokens"]
    n_texts = tf.size(num_tokens)
    merged = merge_windows(windows, {
        "tags": row_tags, "probs": row_probs,
        "starts": windows["offsets"][..., 0], "ends": windows["offsets"][..., 1],
    })
    tags, probs, starts, ends = merged["tags"], merged["probs"], merged["starts"], merged["ends"]

    # --- BIO decoding over the flat token list.
    total = tf.size(tags)
    token_first = tf.cumsum(num_tokens, exclusive=True)
    token_text = tf.repeat(tf.range(n_texts), num_tokens)
    first_of_text = tf.range(total) == tf.gather(token_first, token_text)
    prefix = tf.gather(prefix_table, tags)
    kind = tf.gather(type_table, tags)
    prev_prefix = tf.concat([[0], prefix[:-1]], 0)
    prev_kind = tf.concat([[-1], kind[:-1]], 0)
    inside = prefix > 0
    continues = (prefix == 2) & ~first_of_text & (prev_prefix > 0) & (prev_kind == kind)
    begins = inside & ~continues
    entity_of = tf.cumsum(tf.cast(begins, tf.int32)) - 1
    n_entities = tf.reduce_sum(tf.cast(begins, tf.int32))
    token_id = tf.range(total)
    members = tf.where(inside)[:, 0]
    member_entity = tf.gather(entity_of, members)
    first_token = tf.boolean_mask(token_id, begins)
    last_token = tf.math.unsorted_segment_max(tf.gather(token_id, members), member_entity, n_entities)
    score = tf.math.unsorted_segment_mean(tf.gather(probs, members), member_entity, n_entities)
    e_text = tf.gather(token_text, first_token)
    e_start = tf.gather(starts, first_token)
    e_end = tf.gather(ends, last_token)
    e_type = tf.gather(tf.constant(types if types else [""], tf.string), tf.gather(kind, first_token))
    e_mention = tf.strings.substr(tf.gather(texts, e_text), e_start, e_end - e_start, unit="UTF8_CHAR")

    def per_text(values, pad):
        ragged = tf.RaggedTensor.from_value_rowids(
            values, tf.cast(e_text, tf.int64), nrows=tf.cast(n_texts, tf.int64), validate=False
        )
        return ragged.to_tensor(default_value=pad)

    return {
        "start": per_text(e_start, -1),
        "end": per_text(e_end, -1),
        "type": per_text(e_type, ""),
        "mention": per_text(e_mention, ""),
        "score": per_text(score, 0.0),
        "count": tf.math.bincount(e_text, minlength=n_texts, maxlength=n_texts, dtype=tf.int32),
    }
