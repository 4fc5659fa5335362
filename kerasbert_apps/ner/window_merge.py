"""The window-merge rule, written once for every NER head (TensorFlow ops).

A text longer than a window is cut into overlapping windows
(:meth:`kerasbert.tokenizers.graph_tokenizer.GraphTokenizer.windows`), and a token or a
span of tokens may be seen by several of them. It takes its values from the
window where it sits **furthest from a cut edge**: its margin is the smaller
of its first token's distance from the window's left cut and its last
token's distance from the right cut (the text's own first and last tokens
are not cuts); on a tie the earlier window wins.

:func:`chosen_rows` is the rule; :func:`merge_windows` applies it to single
tokens (a token tagger's tags and scores, and their token offsets) and
:func:`merged_spans` to every span of tokens (the span heads, which then
select the spans they keep from the merged cells' logits, in their own
``decode.py``); :func:`span_outputs` turns the selected spans into the
padded outputs every head gives (:func:`kerasbert_apps.ner.decode.entity_outputs`;
numeric without texts, for the heads' last numeric rules and the ONNX export).
"""

from kerasbert_apps.ner.decode import entity_outputs

_BIG = 1 << 20  # margin at a window edge that is the text's own edge (not a cut)
_ROWS = 1 << 31  # key = margin * _ROWS + (_ROWS - 1 - row) (int64): the margin first, then the earlier row


def chosen_rows(windows, first, last, valid, ids, n_ids):
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
        int32 ``[n_ids]``: the row (window) whose cell each id takes, -1 for
        an id that no window sees. (Rows are ordered by text, then by
        position: the earlier window is the lower row.)
    """
    import tensorflow as tf

    token_start, token_end = windows["token_start"], windows["token_end"]
    inner = [1] * (len(valid.shape) - 1)

    def per_row(x):
        return tf.reshape(x, [-1, *inner])

    n = per_row(token_end - token_start)  # text tokens per row
    left = tf.where(per_row(token_start > 0), first, _BIG)
    right = tf.where(per_row(token_end < tf.gather(windows["num_tokens"], windows["text_index"])), n - 1 - last, _BIG)
    later = tf.cast(_ROWS - 1 - tf.range(tf.size(token_start)), tf.int64)
    key = tf.where(valid, tf.cast(tf.minimum(left, right), tf.int64) * _ROWS + per_row(later), -1)
    ids = tf.where(valid, ids, n_ids)  # cells that do not exist: one more id, never read
    best = tf.math.unsorted_segment_max(tf.reshape(key, [-1]), tf.reshape(ids, [-1]), n_ids + 1)
    return tf.cast(tf.where(best >= 0, _ROWS - 1 - best % _ROWS, -1), tf.int32)[:-1]


def _text_tokens(windows):
    """``(positions [1, width], tokens per row [rows, 1], flat index of each
    row's first text token [rows], tokens of the batch)``."""
    import tensorflow as tf

    positions = tf.expand_dims(tf.range(tf.maximum(tf.shape(windows["token_ids"])[1] - 2, 0)), 0)
    num_tokens = windows["num_tokens"]
    row_first = tf.gather(tf.cumsum(num_tokens, exclusive=True), windows["text_index"]) + windows["token_start"]
    return positions, tf.expand_dims(windows["token_end"] - windows["token_start"], 1), row_first, tf.reduce_sum(num_tokens)


def _take(values, row, position):
    """``values[name][row, position]`` for each name (``values``: ``[rows, len]`` tensors)."""
    import tensorflow as tf

    flat = row * tf.shape(next(iter(values.values())))[1] + position
    return {name: tf.gather(tf.reshape(value, [-1]), flat) for name, value in values.items()}


def merge_windows(windows, values):
    """Per-window values ``[rows, len]`` (``len`` with ``[CLS]``) -> one value
    per text token, flat over the batch's texts (text 0's tokens first);
    with ``row`` and ``position`` (in that row, ``[CLS]`` at 0), the cell
    each token takes."""
    import tensorflow as tf

    positions, n, row_first, total = _text_tokens(windows)
    row = chosen_rows(windows, positions, positions, positions < n, tf.cast(tf.expand_dims(row_first, 1) + positions, tf.int64),
                      tf.cast(total, tf.int64))
    position = tf.range(total) - tf.gather(row_first, row) + 1  # + 1: [CLS]
    return {**_take(values, row, position), "row": row, "position": position}


def merged_spans(windows):
    """Every span of text tokens of a batch, once, from the window the rule
    chooses: ``cells`` int64 ``[N, 3]`` (row, first, last: positions among
    the row's text tokens, inclusive; add 1 for ``[CLS]``), and what
    :func:`span_outputs` needs (``text`` [N], ``first`` / ``last`` flat token
    indices [N], the merged token ``starts`` / ``ends`` in characters).
    Spans are ordered by first token, then length."""
    import tensorflow as tf

    positions, n, row_first, total = _text_tokens(windows)
    i, j = positions[:, :, None], positions[:, None, :]
    # At least 1: a batch without text tokens has no spans, and divides none by it below (ONNX Runtime
    # refuses an integer division by 0 even of an empty tensor).
    width = tf.maximum(tf.shape(positions)[1], 1)
    ids = tf.cast((row_first[:, None, None] + i) * width + (j - i), tf.int64)
    rows = chosen_rows(windows, i, j, (i <= j) & (j < n[:, :, None]), ids, tf.cast(total * width, tf.int64))
    seen = tf.cast(tf.reshape(tf.where(rows >= 0), [-1]), tf.int32)
    row = tf.gather(rows, seen)
    first, length = seen // width, seen % width  # flat first token; last - first
    in_row = first - tf.gather(row_first, row)
    cells = tf.cast(tf.stack([row, in_row, in_row + length], 1), tf.int64)
    # A token's cell is its one-token span's (the same margins).
    token_row = tf.gather(rows, tf.range(total) * width)
    merged = _take({"starts": windows["offsets"][..., 0], "ends": windows["offsets"][..., 1]}, token_row,
                   tf.range(total) - tf.gather(row_first, token_row) + 1)
    return {"cells": cells, "text": tf.gather(windows["text_index"], row), "first": first, "last": first + length,
            "starts": merged["starts"], "ends": merged["ends"], "n_texts": tf.size(windows["num_tokens"])}


def span_outputs(texts, spans, span, kind, score, types):
    """The padded outputs (:func:`kerasbert_apps.ner.decode.entity_outputs`:
    numeric when ``texts`` is None, else named) of the entities ``span``
    [E] (indices into :func:`merged_spans`' cells), of type ``kind`` [E]
    int32 and ``score`` [E]; a text's entities sorted by start, then end,
    then type."""
    import tensorflow as tf

    from kerasbert.serving.graph_ops import argsort

    e_text, first, last = (tf.gather(spans[k], span) for k in ("text", "first", "last"))
    longest = tf.cast(tf.reduce_max(tf.concat([last - first, [0]], 0)) + 1, tf.int64)
    order = argsort((tf.cast(first, tf.int64) * longest + tf.cast(last - first, tf.int64)) * max(len(types), 1)
                    + tf.cast(kind, tf.int64))
    e_text, first, last, kind, score = (tf.gather(x, order) for x in (e_text, first, last, kind, score))
    return entity_outputs(texts, spans["n_texts"], e_text, tf.gather(spans["starts"], first),
                          tf.gather(spans["ends"], last), kind, score, types)
