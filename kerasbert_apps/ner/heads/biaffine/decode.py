"""Biaffine decoding, as TensorFlow ops: per-window span logits -> entities.

:func:`biaffine_entities` is step 3 of the
:class:`~kerasbert_apps.base.pipeline.Pipeline` of the biaffine head -- what
``predict``, ``evaluate``, the dev evaluation and the SavedModel all run.
Following a batch (Yu, Bohnet and Poesio 2020, section 3):

1. **the class of every span**: per window, the softmax over the types and
   "no entity" of each span's logits; a span is a *candidate* when its
   best type's logit is above the "no entity" logit plus the decision
   threshold (0 unless fitted on dev:
   :meth:`~kerasbert_apps.ner.span_pipeline.SpanPipeline.fit_threshold`;
   at 0: its highest logit is a type's, a tie with "no entity" is no
   entity). Its probability ``p`` is the softmax probability of that type;
2. **merge windows**: a span seen by several overlapping windows takes its
   class and ``p`` from the window where it sits furthest from a cut edge,
   the rule of every head (:func:`kerasbert_apps.ner.window_merge.merged_spans`);
3. **clashes**: the candidates of a text, by ``p`` from the highest, are
   kept unless they *cross* an entity kept before them (one starts inside
   the other and ends after it); an entity inside another (nested) is kept.
   With ``nested=False`` (a model trained on data where no entity lies
   inside another: :attr:`~kerasbert_apps.ner.heads.biaffine.pipeline.BiaffineTagger.nested`)
   a candidate that overlaps an entity kept before it in any way is
   dropped too, the paper's rule for flat entities.

An entity's ``score`` is ``sigmoid(log(p / (1 - p)) / T)``: ``p`` itself at
the score temperature ``T = 1`` (the default; fitted on dev by
:meth:`~kerasbert_apps.ner.calibration.ScoreTemperature.calibrate`, the
same mechanism as the GlobalPointer head's ``sigmoid(logit / T)``). ``T``
changes no entity: step 3 orders by ``p``, whose order ``T`` keeps.
Entities of a text are sorted by start, then end. Outputs are those of
every NER head (:func:`kerasbert_apps.ner.decode.entity_outputs`): the
rules above on numbers, the type names and mentions looked up last.
"""

from kerasbert_apps.ner.decode import named_entities
from kerasbert_apps.ner.overlaps import without_clashes
from kerasbert_apps.ner.window_merge import merged_spans
from kerasbert_apps.ner.window_merge import span_outputs


def candidate_log_odds(row_logits, threshold=0.0):
    """Step 1 of the module docstring: span logits ``row_logits`` float32
    ``[..., types + 1]`` -> ``(log_odds, candidate)``, both ``[...,
    types]``: ``log(p / (1 - p))`` of each span's best type, at that type
    only, and whether it is a candidate (the best type's logit is above "no
    entity"'s plus ``threshold``), at that type only."""
    import tensorflow as tf

    logits = tf.cast(row_logits, tf.float32)
    n_types = tf.shape(logits)[-1] - 1
    type_logits, none_logit = logits[..., :-1], logits[..., -1]
    best = tf.argmax(type_logits, axis=-1, output_type=tf.int32)
    at_class = tf.one_hot(best, n_types + 1, on_value=True, off_value=False)  # "no entity" never
    at_best = at_class[..., :-1]
    top = tf.reduce_max(type_logits, axis=-1)
    others = tf.reduce_logsumexp(tf.where(at_class, -1e30, logits), axis=-1)
    log_odds = (top - others)[..., None]
    candidate = at_best & (top > none_logit + threshold)[..., None]
    return tf.where(at_best, log_odds, 0.0), candidate


def biaffine_entities(texts, windows, row_logits, types, temperature=1.0, threshold=0.0, nested=True):
    """Steps 1-3 of the module docstring: ``row_logits`` float32 ``[rows,
    len, len, types + 1]`` (start, end inclusive, class; one row per window
    of ``windows``, :meth:`kerasbert.tokenizers.graph_tokenizer.GraphTokenizer.windows`,
    ``len`` its width with ``[CLS]``) -> the padded outputs; candidates
    are decided with ``threshold`` (a float or a scalar tensor) and scored
    ``sigmoid(log-odds / temperature)`` (a Python float > 0); entities
    inside others are kept with ``nested`` (a Python bool), else dropped.
    Numeric outputs when ``texts`` is None (:mod:`kerasbert_apps.ner.decode`)."""
    import tensorflow as tf

    spans = merged_spans(windows)
    logits = tf.gather_nd(tf.cast(row_logits, tf.float32), spans["cells"] + tf.constant([0, 1, 1], tf.int64))
    log_odds, candidate = candidate_log_odds(logits, threshold)  # [spans, types]
    hits = tf.where(candidate)  # [E, 2]: span, type
    score = tf.sigmoid(tf.gather_nd(log_odds, hits) / float(temperature))
    entities = without_clashes(span_outputs(None, spans, hits[:, 0], tf.cast(hits[:, 1], tf.int32), score, types),
                               nested=nested)
    return entities if texts is None else named_entities(texts, entities, types)
