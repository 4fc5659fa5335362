"""The window-merge rule, written once for every NER head (TensorFlow ops).

A text longer than a window is cut into overlapping windows
(:meth:`kerasbert.graph_tokenizer.GraphTokenizer.windows`), and a token or a
span of tokens may be seen by several of them. It takes its values from the
window where it sits **furthest from a cut edge**: its margin is the smaller
of its first token's distance from the window's left cut and its last
token's distance from the right cut (the text's own first and last tokens
are not cuts); on a tie the earlier window wins.

:func:`chosen_cells` is the rule; :func:`merge_windows` applies it to single
tokens (the BIO heads' tags and scores, every head's token offsets) and
:func:`merged_spans` to every span of tokens (the span heads, which then
select the spans they keep from the merged cells' logits, e.g.
:func:`kerasbert_apps.ner.heads.global_pointer.decode.span_entities`);
:func:`span_outputs` turns the selected spans into the padded outputs.
"""

_BIG = 1 << 20  # margin at a window edge that is the text's own edge (not a cut)
_WINDOW_SLOTS = 1 << 32  # key = margin * _WINDOW_SLOTS - window index (int64)


def chosen_cells(windows, first, last, valid, ids, n_ids):
    """The rule over the cells ``(row, ...)`` of a batch's windows.

    Args:
        windows: the batch's windows (``text_index``, ``token_start``,
            ``token_end``, ``num_tokens`` per row).
        first, last: int32, broadcastable to ``valid``: the position of each
            cell's first and last token among its row's text tokens (0 is
            the token after ``[CLS]``).
        valid: bool ``[rows, ...]``: the cells that exist.
        ids: int64, broadcastable to ``valid``: which cells are the same
            token or span of a text (``0 <= ids < n_ids``).
        n_ids: the number of ids (int64 scalar).

    Returns:
        ``(cells, ids)``: int64 ``[N, rank]``, the chosen cell of each id seen
        by some window, and its id ``[N]``.
    """
    import tensorflow as tf

    text_index, token_start, token_end = windows["text_index"], windows["token_start"], windows["token_end"]
    num_tokens = windows["num_tokens"]
    inner = [1] * (len(valid.shape) - 1)

    def per_row(x):
        return tf.reshape(x, [-1, *inner])

    n = per_row(token_end - token_start)  # text tokens per row
    left = tf.where(per_row(token_start > 0), first, _BIG)
    right = tf.where(per_row(token_end < tf.gather(num_tokens, text_index)), n - 1 - last, _BIG)
    margin = tf.cast(tf.minimum(left, right), tf.int64)
    first_row = tf.cumsum(tf.math.bincount(text_index, minlength=tf.size(num_tokens), dtype=tf.int32), exclusive=True)
    window_k = tf.range(tf.size(text_index)) - tf.gather(first_row, text_index)
    key = margin * _WINDOW_SLOTS - per_row(tf.cast(window_k, tf.int64))  # margin first, then the earlier window
    shape = tf.shape(valid)
    cells = tf.where(valid)
    key_valid = tf.gather_nd(tf.broadcast_to(key, shape), cells)
    id_valid = tf.gather_nd(tf.broadcast_to(ids, shape), cells)
    best = tf.math.unsorted_segment_max(key_valid, id_valid, n_ids)
    chosen = key_valid == tf.gather(best, id_valid)
    return tf.boolean_mask(cells, chosen), tf.boolean_mask(id_valid, chosen)


def _text_tokens(windows):
    """``(positions [1, width], tokens per row [rows, 1], flat index of each
    row's first text token [rows, 1], tokens of the batch)``."""
    import tensorflow as tf

    positions = tf.range(tf.maximum(tf.shape(windows["token_ids"])[1] - 2, 0))[None, :]
    token_first = tf.cumsum(windows["num_tokens"], exclusive=True)
    row_first = tf.gather(token_first, windows["text_index"]) + windows["token_start"]
    return positions, (windows["token_end"] - windows["token_start"])[:, None], row_first[:, None], \
        tf.reduce_sum(windows["num_tokens"])


def merge_windows(windows, values):
    """Per-window values ``[rows, len]`` (``len`` with ``[CLS]``) -> one value
    per text token, flat over the batch's texts (text 0's tokens first)."""
    import tensorflow as tf

    positions, n, row_first, total = _text_tokens(windows)
    total = tf.cast(total, tf.int64)
    cells, ids = chosen_cells(windows, positions, positions, positions < n, tf.cast(row_first + positions, tf.int64),
                              total)
    at = cells + tf.constant([0, 1], tf.int64)  # row position = token position + 1 ([CLS])
    return {name: tf.scatter_nd(ids[:, None], tf.gather_nd(value, at), total[None]) for name, value in values.items()}


def merged_spans(windows):
    """Every span of text tokens of a batch, once, from the window the rule
    chooses: ``cells`` int64 ``[N, 3]`` (row, first, last: positions among
    the row's text tokens, inclusive; add 1 for ``[CLS]``), and what
    :func:`span_outputs` needs (``text`` [N], ``first`` / ``last`` flat token
    indices [N], the merged token ``starts`` / ``ends`` in characters)."""
    import tensorflow as tf

    positions, n, row_first, total = _text_tokens(windows)
    i, j = positions[:, :, None], positions[:, None, :]
    width = tf.cast(tf.shape(positions)[1], tf.int64)
    flat_first = tf.cast(row_first[:, :, None] + i, tf.int64)
    cells, _ = chosen_cells(windows, i, j, (i <= j) & (j < n[:, :, None]), flat_first * width + tf.cast(j - i, tf.int64),
                            tf.cast(total, tf.int64) * width)
    row, first, last = (tf.cast(cells[:, k], tf.int32) for k in range(3))
    merged = merge_windows(windows, {"starts": windows["offsets"][..., 0], "ends": windows["offsets"][..., 1]})
    flat = tf.gather(row_first[:, 0], row) + first
    return {"cells": cells, "text": tf.gather(windows["text_index"], row), "first": flat, "last": flat + last - first,
            "starts": merged["starts"], "ends": merged["ends"], "n_texts": tf.size(windows["num_tokens"])}


def span_outputs(texts, spans, span, kind, score, types):
    """The padded outputs (:func:`kerasbert_apps.ner.decode.entity_outputs`)
    of the entities ``span`` [E] (indices into :func:`merged_spans`' cells),
    of type ``kind`` [E] int32 and ``score`` [E]; a text's entities sorted by
    start, then end, then type."""
    import tensorflow as tf

    from kerasbert_apps.ner.decode import entity_outputs

    e_text, first, last = (tf.gather(spans[k], span) for k in ("text", "first", "last"))
    longest = tf.cast(tf.reduce_max(tf.concat([last - first, [0]], 0)) + 1, tf.int64)
    order = tf.argsort((tf.cast(first, tf.int64) * longest + tf.cast(last - first, tf.int64)) * max(len(types), 1)
                       + tf.cast(kind, tf.int64), stable=True)
    e_text, first, last, kind, score = (tf.gather(x, order) for x in (e_text, first, last, kind, score))
    return entity_outputs(texts, spans["n_texts"], e_text, tf.gather(spans["starts"], first),
                          tf.gather(spans["ends"], last), kind, score, types)
