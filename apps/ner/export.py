"""The NER serving graph: raw text in, entities with character offsets out.

:func:`export_tagger` writes a trained :class:`~apps.ner.tagger.Tagger` as a
SavedModel for TF Serving (layout, atomicity, warmup: :mod:`kerasbert.export`).
The ``text`` signature does, inside the graph, what :meth:`Tagger.predict`
does on the host -- following one batch of strings:

1. :meth:`kerasbert.graph_tokenizer.GraphTokenizer.windows`: WordPiece ids
   with code-point offsets, long texts cut into the Tagger's windows;
2. the :class:`~apps.ner.model.NerModel` (encoder, BiLSTM, CRF Viterbi) on
   the windows, sorted by length and run in groups of 8 each trimmed to its
   longest row (:func:`kerasbert.export.by_length`) -- tags and emission
   scores per token; the BiLSTM runs as TensorFlow's fused ``BlockLSTMV2``
   kernel with the layer's weights (:func:`model_call`);
3. merge: each token takes its tag from the window where it sits furthest
   from a cut edge (ties: the earlier window), exactly the Tagger's rule;
4. BIO decoding: an entity starts at ``B-X``, or at an ``I-X`` that does not
   continue an ``X`` entity, and runs over the following ``I-X``; its
   ``start`` is its first token's start offset, ``end`` its last token's end
   (exclusive), ``score`` the mean over its tokens of the softmax of the
   emission scores at the chosen tag.

Signature ``serving_default``::

    inputs:  text     string [batch]
    outputs: start    int32  [batch, max_entities]   code-point offsets (Python str
             end      int32  [batch, max_entities]   indices), end exclusive; -1 pads
             type     string [batch, max_entities]   "" pads
             mention  string [batch, max_entities]   text[start:end]; "" pads
             score    float32[batch, max_entities]   0 pads
             count    int32  [batch]                 entities per text

``--input ids`` exports ``token_ids``, ``segment_ids``, ``padding_mask``
(int32 [batch, len]) -> ``tags`` (int32 [batch, len], index into the tag list
in ``assets.extra/kerasbert.json``) and ``potentials`` (float32 [batch, len,
num_tags]), core TensorFlow ops only, for servers without TF-Text; the client
tokenizes (``assets.extra/vocab.txt``) and decodes.
"""

import numpy as np

from kerasbert.export import by_length
from kerasbert.export import nonempty_encoder_inputs
from kerasbert.export import export_saved_model
from kerasbert.export import fused_bilstm
from kerasbert.export import signature_and_warmup

#: Example texts replayed by TF Serving at load (one per warmup record).
WARMUP_TEXTS = [
    "Alice Martin flew from Paris to New York for the United Nations summit.",
    "李白是唐朝诗人。",
    "",
]

_BIG = 1 << 20  # margin of a window edge that is the text's own edge (not a cut)
_WINDOW_SLOTS = 1 << 32  # key = margin * _WINDOW_SLOTS - window index (int64)


def tag_tables(tags):
    """(prefix per tag id: 0 = O, 1 = B, 2 = I; type index per tag id; type names)."""
    types = sorted({t[2:] for t in tags if t != "O"})
    prefix = [0 if t == "O" else (1 if t.startswith("B-") else 2) for t in tags]
    type_index = [0 if t == "O" else types.index(t[2:]) for t in tags]
    return np.array(prefix, np.int32), np.array(type_index, np.int32), types


def model_call(model):
    """``rows -> {"tags": int32, "potentials": float32}``: the
    :class:`~apps.ner.model.NerModel` in a serving graph, its BiLSTM run by
    TensorFlow's fused kernel when the layer allows
    (:func:`kerasbert.export.fused_bilstm`), else by the layer itself."""
    import tensorflow as tf

    bilstm = fused_bilstm(model.lstm) if model.lstm is not None else None

    def call(rows):
        sequence = model.encoder(rows, training=False)["sequence_output"]
        potentials, tags = model.head(sequence, rows["padding_mask"], bilstm=bilstm, training=False)
        return {"tags": tf.cast(tags, tf.int32), "potentials": tf.cast(potentials, tf.float32)}

    return call


def text_endpoint(tagger):
    """``(function, trackables)``: the ``text`` signature's function for a
    :class:`~apps.ner.tagger.Tagger` (TensorFlow backend)."""
    import tensorflow as tf

    from kerasbert.graph_tokenizer import GraphTokenizer

    graph_tokenizer = GraphTokenizer(tagger.tokenizer)
    model = tagger.model
    prefix_table, type_table, types = tag_tables(tagger.tags)
    max_length, overlap = tagger.max_length, tagger.overlap
    run_model = model_call(model)

    def serve(text):
        texts = tf.reshape(text, [-1])
        w = graph_tokenizer.windows(texts, max_length=max_length, overlap=overlap)
        n_rows = tf.shape(w["token_ids"])[0]
        # An empty batch gets one [CLS] [SEP] row: the model never sees an empty batch.
        inputs = nonempty_encoder_inputs(w, graph_tokenizer.cls_id, graph_tokenizer.sep_id)

        def tag(rows):
            out = run_model(rows)
            probs = tf.nn.softmax(out["potentials"], axis=-1)
            return {"tags": out["tags"], "probs": tf.gather(probs, out["tags"], batch_dims=2)}

        out = by_length(tag, inputs)
        row_tags, row_probs = out["tags"][:n_rows], out["probs"][:n_rows]

        # --- merge windows: (row, position) -> text token, best window wins.
        text_index, token_start, token_end = w["text_index"], w["token_start"], w["token_end"]
        num_tokens = w["num_tokens"]
        length = tf.shape(row_tags)[1] - 2
        positions = tf.range(tf.maximum(length, 0))
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
        g = tf.gather(token_first, text_index)[:, None] + token_start[:, None] + positions[None, :]
        cells = tf.where(valid)
        g_valid = tf.gather_nd(g, cells)
        key_valid = tf.gather_nd(key, cells)
        best = tf.math.unsorted_segment_max(key_valid, g_valid, total)
        chosen = key_valid == tf.gather(best, g_valid)
        take = tf.boolean_mask(cells, chosen)
        where = tf.boolean_mask(g_valid, chosen)[:, None]
        at = take + tf.constant([0, 1], tf.int64)  # row position = token position + 1 ([CLS])

        def merged(values):
            return tf.scatter_nd(where, tf.gather_nd(values, at), tf.reshape(total, [1]))

        tags = merged(row_tags)
        probs = merged(row_probs)
        starts = merged(w["offsets"][..., 0])
        ends = merged(w["offsets"][..., 1])

        # --- BIO decoding over the flat token list.
        token_text = tf.repeat(tf.range(tf.size(num_tokens)), num_tokens)
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
                values, tf.cast(e_text, tf.int64), nrows=tf.cast(tf.size(num_tokens), tf.int64), validate=False
            )
            return ragged.to_tensor(default_value=pad)

        return {
            "start": per_text(e_start, -1),
            "end": per_text(e_end, -1),
            "type": per_text(e_type, ""),
            "mention": per_text(e_mention, ""),
            "score": per_text(score, 0.0),
            "count": tf.math.bincount(e_text, minlength=tf.size(num_tokens), maxlength=tf.size(num_tokens), dtype=tf.int32),
        }

    return serve, [model, graph_tokenizer]


def ids_endpoint(tagger):
    """``(function, trackables)`` for the ``ids`` signature (core ops only)."""
    model = tagger.model
    run_model = model_call(model)

    def serve(token_ids, segment_ids, padding_mask):
        return run_model({"token_ids": token_ids, "segment_ids": segment_ids, "padding_mask": padding_mask})

    return serve, [model]


def export_tagger(tagger, base, version=None, input="text", warmup_texts=None, model_name=None):
    """Write ``tagger`` as ``base/<version>`` for TF Serving (see the module
    docstring); returns the version folder. ``model_name`` goes into the
    warmup requests (default: the base folder's name). ``version`` defaults to the next
    free integer; ``input`` is ``"text"`` or ``"ids"``."""
    warmup_texts = list(WARMUP_TEXTS if warmup_texts is None else warmup_texts)
    endpoint, trackables = (ids_endpoint if input == "ids" else text_endpoint)(tagger)
    signature, warmup = signature_and_warmup(tagger.tokenizer, tagger.max_length, input, warmup_texts)
    description = {
        "task": "ner",
        "tags": tagger.tags,
        "max_length": tagger.max_length,
        "overlap": tagger.overlap,
        "tokenizer": tagger.tokenizer.get_config(),
    }
    return export_saved_model(base, version, endpoint, signature, trackables, description, warmup,
                              tagger.tokenizer.vocab, input,
                              model_name)
