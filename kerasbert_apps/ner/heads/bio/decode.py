"""The BIO heads' decoding (``crf`` and ``softmax``), written once as TensorFlow ops: per-window tags -> entities.

:func:`entities` is step 3 of :class:`kerasbert_apps.base.pipeline.Pipeline` for the
BIO tagger (:class:`kerasbert_apps.ner.heads.bio.pipeline.Tagger`) -- what
``predict``, ``evaluate``, the dev evaluation and the SavedModel all run.
Following a batch:

1. **merge windows**: each token of a text takes its tag (and score) from the
   window where it sits furthest from a cut edge; the text's own first and
   last tokens are not cuts; on a tie the earlier window wins (the rule of
   every head, :mod:`kerasbert_apps.ner.window_merge`);
2. **BIO decoding** over each text's tokens: an entity starts at ``B-X``, or
   at an ``I-X`` that does not continue an ``X`` entity (the usual lenient
   repair), and runs over the following ``I-X``;
3. **offsets**: an entity's ``start`` is its first token's start offset and
   ``end`` its last token's end (exclusive), code points into the original
   text, so ``text[start:end]`` is the entity as written;
4. **score**: the model's probability of the entity, computed in the window
   from which the entity's first token takes its tag
   (:func:`entity_log_probabilities`): the probability that the window's
   labelling reads exactly this entity -- its first token begins it (``B-X``;
   or a dangling ``I-X``, which the BIO constraints forbid), the following
   tokens are ``I-X``, and the token after its last one does not continue it.
   For the CRF head this is the CRF's probability of that event, by
   forward-backward with the decoder's constraints (the labellings Viterbi
   may return); for the softmax head (no CRF) the same event under
   independent per-token softmaxes, i.e. the product of the token
   probabilities times P(the next token is not ``I-X``). An entity that runs
   past the end of its first token's window (long texts only) is scored on
   the part inside that window, its end left open. With a score temperature
   ``T`` (:mod:`kerasbert_apps.ner.calibration`) the emission scores and transitions
   are divided by ``T`` first; the tags, hence the entities, are the same.

The outputs are every NER head's (:func:`kerasbert_apps.ner.decode.entity_outputs`).
"""

import functools

import numpy as np

from kerasbert_apps.ner.decode import entity_outputs
from kerasbert_apps.ner.window_merge import merge_windows


def tag_tables(tags):
    """(prefix per tag id: 0 = O, 1 = B, 2 = I; type index per tag id; type names)."""
    types = sorted({t[2:] for t in tags if t != "O"})
    prefix = [0 if t == "O" else (1 if t.startswith("B-") else 2) for t in tags]
    type_index = [0 if t == "O" else types.index(t[2:]) for t in tags]
    return np.array(prefix, np.int32), np.array(type_index, np.int32), types


def crf_parameters(model):
    """``(transitions, allowed, allowed_start)`` of a NER model's CRF layer
    (``allowed``/``allowed_start`` None when unconstrained) as TensorFlow
    tensors (in a graph, the transitions are the layer's variable), or None
    for a model without a CRF (the softmax head)."""
    import keras
    import tensorflow as tf

    layer = getattr(model, "crf", None)
    if layer is None:
        return None
    if keras.backend.backend() == "tensorflow":
        transitions = tf.convert_to_tensor(layer.transitions.value)
    else:  # JAX: decoding runs eagerly in TensorFlow, on the weights' values
        transitions = tf.constant(keras.ops.convert_to_numpy(layer.transitions))
    allowed = None if layer.allowed is None else tf.constant(layer.allowed, tf.bool)
    allowed_start = None if layer.allowed_start is None else tf.constant(layer.allowed_start, tf.bool)
    return tf.cast(transitions, tf.float32), allowed, allowed_start


def entity_log_probabilities(potentials, lengths, rows, starts, ends, begin_tags, inside_tags, closed, crf=None):
    """Log-probability, per entity, that row ``rows`` of ``potentials``
    [rows, len, tags] reads one entity exactly on positions ``starts..ends``
    (inclusive): step 4 of the module docstring. ``lengths`` [rows] are the
    rows' sequence lengths; per entity [n]: its ``B-X`` and ``I-X`` tag ids
    and ``closed`` (False: the entity may continue past ``ends``). ``crf``
    from :func:`crf_parameters` (None: independent softmaxes, i.e. zero
    transitions).

    The computation is :func:`kerasbert.layers.crf.crf_segment_log_probability`
    (``keras.ops``, written once): on the TensorFlow backend it is traced
    into the serving graph; on another backend (where this TensorFlow
    decoding runs around a model run on the host) it runs on the values,
    through ``tf.numpy_function``."""
    import keras
    import tensorflow as tf

    from kerasbert.layers.crf import crf_segment_log_probability

    if crf is None:
        num_tags = potentials.shape[-1] if potentials.shape[-1] is not None else tf.shape(potentials)[-1]
        crf = (tf.zeros(tf.stack([num_tags, num_tags])), None, None)
    transitions, allowed, allowed_start = crf
    args = (potentials, lengths, transitions, rows, starts, ends, begin_tags, inside_tags, closed, allowed,
            allowed_start)
    if keras.backend.backend() == "tensorflow":
        return crf_segment_log_probability(*args)
    given = tuple(i for i, x in enumerate(args) if x is not None)
    on_values = _on_host(given, len(args))
    return tf.reshape(tf.numpy_function(on_values, [args[i] for i in given], tf.float32, stateful=False), [-1])


#: The arguments of :func:`kerasbert.layers.crf.crf_segment_log_probability` that
#: hold one value per entity (padded on the host, :func:`_on_host`).
_PER_ENTITY = (3, 4, 5, 6, 7, 8)


@functools.lru_cache(maxsize=None)
def _on_host(given, n_args):
    """:func:`kerasbert.layers.crf.crf_segment_log_probability` on values, on the
    Keras backend the model runs on (``given``: the positions of the
    arguments that are not None). On JAX it is one ``jax.jit`` function, and
    the entities are padded to a power of two: run op by op, JAX compiled
    each of its ops for each new shape (seconds on a model's first
    batches)."""
    import keras

    from kerasbert.layers.crf import crf_segment_log_probability

    def full(values):
        out = [None] * n_args
        for i, value in zip(given, values):
            out[i] = value
        return out

    if keras.backend.backend() != "jax":
        return lambda *values: np.asarray(
            keras.ops.convert_to_numpy(crf_segment_log_probability(*full(values))), np.float32)
    import jax

    jitted = jax.jit(lambda *values: crf_segment_log_probability(*full(values)))
    per_entity = [k for k, i in enumerate(given) if i in _PER_ENTITY]

    def on_values(*values):
        n = len(values[per_entity[0]])
        if n == 0:
            return np.zeros([0], np.float32)
        size = 1 << max(3, (n - 1).bit_length())
        values = list(values)
        for k in per_entity:  # copies of the first entity: valid, and cut off below
            values[k] = np.concatenate([values[k], np.repeat(values[k][:1], size - n)])
        return np.asarray(jitted(*values), np.float32)[:n]

    return on_values


def entity_spans(windows, row_tags, tables):
    """Steps 1-3 of the module docstring: ``row_tags`` int32 [rows, len]
    (one row per window of ``windows``,
    :meth:`kerasbert.tokenizers.graph_tokenizer.GraphTokenizer.windows`) and ``tables``
    from :func:`tag_tables` -> the batch's entities, flat (text 0's first),
    each with its ``text`` index, character ``start`` / ``end`` and type
    index ``kind``, and where step 4 scores it: window ``row``, positions
    ``first`` .. ``last`` (inclusive) in that row, ``closed``, and the tag ids
    ``begin`` / ``inside`` of its type; plus ``lengths`` [rows] (each row's
    sequence length)."""
    import tensorflow as tf

    from kerasbert.serving.graph_ops import nonzero
    from kerasbert.serving.graph_ops import row_of
    from kerasbert.serving.graph_ops import shifted

    prefix_table, type_table, types = tables
    num_tokens = windows["num_tokens"]
    merged = merge_windows(windows, {"tags": row_tags, "starts": windows["offsets"][..., 0],
                                     "ends": windows["offsets"][..., 1]})
    tags, starts, ends = merged["tags"], merged["starts"], merged["ends"]

    # --- BIO decoding over the flat token list.
    total = tf.size(tags)
    token_text = row_of(tf.cumsum(num_tokens), total)
    prefix = tf.gather(prefix_table, tags)
    kind = tf.gather(type_table, tags)
    prev_prefix, prev_kind, prev_text = tf.unstack(shifted(tf.stack([prefix, kind, token_text], 1), [0, -1, -1]), axis=1)
    inside = prefix > 0
    continues = (prefix == 2) & (prev_text == token_text) & (prev_prefix > 0) & (prev_kind == kind)
    begins = inside & ~continues
    # An entity runs from a token that begins one to the last token before one that does not continue it.
    first_token = nonzero(begins)
    last_token = nonzero(inside & ~tf.concat([continues[1:], [False]], 0))
    # --- where each entity is scored: the window of its first token.
    e_row = tf.gather(merged["row"], first_token)
    e_first = tf.gather(merged["position"], first_token)
    row_last = windows["token_end"] - windows["token_start"]  # position of a row's last text token
    e_last = e_first + last_token - first_token
    closed = e_last <= tf.gather(row_last, e_row)
    e_kind = tf.gather(kind, first_token)
    begin_of = np.zeros(max(len(types), 1), np.int32)
    inside_of = np.zeros(max(len(types), 1), np.int32)
    for tag_id, (prefix_id, type_id) in enumerate(zip(prefix_table, type_table)):
        if prefix_id:
            (begin_of if prefix_id == 1 else inside_of)[type_id] = tag_id
    return {
        "text": tf.gather(token_text, first_token), "start": tf.gather(starts, first_token),
        "end": tf.gather(ends, last_token), "kind": e_kind,
        "row": e_row, "first": e_first, "last": tf.minimum(e_last, tf.gather(row_last, e_row)), "closed": closed,
        "begin": tf.gather(begin_of, e_kind), "inside": tf.gather(inside_of, e_kind), "lengths": row_last + 2,
    }


def entity_scores(row_potentials, spans, crf=None, temperature=1.0):
    """Step 4: the score of each entity of ``spans`` (:func:`entity_spans`)
    from ``row_potentials`` float32 [rows, len, tags] (the emission scores)
    and ``crf`` from :func:`crf_parameters` (None: the softmax head). With
    ``temperature`` ``T`` (a float or a scalar tensor) emissions and
    transitions are divided by ``T`` first (the score temperature,
    :mod:`kerasbert_apps.ner.calibration`; the constraints stay hard)."""
    import tensorflow as tf

    if crf is not None:
        crf = (crf[0] / temperature, *crf[1:])
    log_p = tf.cond(  # no forward-backward for a batch without entities
        tf.size(spans["row"]) > 0,
        lambda: entity_log_probabilities(tf.cast(row_potentials, tf.float32) / temperature, spans["lengths"],
                                         spans["row"], spans["first"], spans["last"], spans["begin"],
                                         spans["inside"], spans["closed"], crf),
        lambda: tf.zeros([0], tf.float32),
    )
    return tf.clip_by_value(tf.exp(log_p), 0.0, 1.0)


def entities(texts, windows, row_tags, row_potentials, tables, crf=None, temperature=1.0):
    """Steps 1-4 of the module docstring (:func:`entity_spans`,
    :func:`entity_scores`) -> the padded outputs (numeric when ``texts`` is
    None: :func:`kerasbert_apps.ner.decode.entity_outputs`)."""
    import tensorflow as tf

    spans = entity_spans(windows, row_tags, tables)
    score = entity_scores(row_potentials, spans, crf, temperature)
    return entity_outputs(texts, tf.size(windows["num_tokens"]), spans["text"], spans["start"], spans["end"],
                          spans["kind"], score, tables[2])

