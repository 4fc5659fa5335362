"""The NER tagger: raw text -> entities with character offsets, and labelled examples -> training rows.

A :class:`Tagger` is a :class:`~kerasbert_apps.base.pipeline.Pipeline` around a trained
:class:`~kerasbert_apps.ner.heads.bio.model.NerModel`. Following one sentence (the same path for
``predict``, ``evaluate``, the dev evaluation and the SavedModel):

1. **windows**: WordPiece ids and each token's character offsets in the
   original string; texts longer than ``max_length - 2`` tokens are cut into
   overlapping windows (:meth:`~kerasbert_apps.base.pipeline.Pipeline.windows`);
2. **model**: emission scores and the CRF's Viterbi tags per window row
   (:class:`~kerasbert_apps.ner.heads.bio.model.NerModel`; in TensorFlow graphs its BiLSTM runs
   as the fused kernel, :mod:`kerasbert_apps.ner.heads.bio.fused_bilstm`);
3. **decode** (:func:`kerasbert_apps.ner.heads.bio.decode.entities`): windows merged, BIO tags ->
   entity spans with offsets and scores (each entity's probability under the
   model, from the emission scores and the CRF's transitions, both divided
   by the score temperature: ``temperature`` in ``tagger.json``, 1 unless
   fitted on dev, :mod:`kerasbert_apps.ner.calibration`; it changes no entity).

Training rows use the same offsets in reverse (:meth:`Tagger.text_labels`):
every token inside an entity gets ``B-TYPE`` (first token) or ``I-TYPE``, all
other tokens (``[CLS]``, ``[SEP]`` included) ``O`` -- identically for English
words split into WordPieces and for Chinese characters. An entity whose edges
fall inside a token cannot be represented exactly; such entities are counted
and reported (they are tagged on the tokens they overlap). A window that
starts inside an entity starts it with ``B-`` (counted).
"""

import numpy as np

from kerasbert_apps.base.pipeline import GraphRunner
from kerasbert_apps.base.runners import ConvertibleRunner
from kerasbert_apps.ner.calibration import ScoreTemperature
from kerasbert_apps.ner.pipeline import WARMUP_TEXTS  # noqa: F401 (its name before the NER pipelines shared it)
from kerasbert_apps.ner.pipeline import NerFeatureReport  # noqa: F401 (idem)
from kerasbert_apps.ner.pipeline import NerPipeline
from kerasbert_apps.ner.pipeline import entity_tokens
from kerasbert_apps.ner.tags import bio_tags

class Tagger(ScoreTemperature, NerPipeline):
    """A trained NER tagger: predict entities with character offsets.

    Args:
        model: a :class:`~kerasbert_apps.ner.heads.bio.model.NerModel` (or any Keras model with
            the encoder's inputs and outputs ``tags`` [batch, len] and
            ``potentials`` [batch, len, num_tags]).
        tokenizer: the :class:`kerasbert.BertTokenizer` it was trained with.
        tags: tag names, index = tag id (``"O"`` first).
        max_length: tokens per window, ``[CLS]`` and ``[SEP]`` included.
        overlap: tokens shared by consecutive windows of a long text.
        temperature: the score temperature (> 0): entity scores are taken
            with the emission scores and transitions divided by it (see
            :meth:`~kerasbert_apps.ner.calibration.ScoreTemperature.calibrate`).
    """

    compiled_head = True  # export(..., jit_compile="head"): fused_bilstm.graph_scorers

    settings_file = "tagger.json"
    labels_key = "tags"
    model_module = "kerasbert_apps.ner.heads.bio.model"

    def __init__(self, model, tokenizer, tags, max_length=128, overlap=None, temperature=1.0):
        super().__init__(model, tokenizer, tags, max_length=max_length, overlap=overlap)
        self.tag_ids = {t: i for i, t in enumerate(self.tags)}
        self.types = sorted({t[2:] for t in self.tags if t != "O"})
        self.set_temperature(temperature)

    @property
    def tags(self):
        return self.labels

    @property
    def head_name(self):
        """``crf`` or ``softmax``: whether the model has a CRF layer."""
        return "crf" if getattr(self.model, "crf", None) is not None else "softmax"

    # ------------------------------------------------------------ training rows
    def text_labels(self, example, offsets, report):
        tags = np.zeros(len(offsets), dtype=np.int32)
        starts, ends = offsets[:, 0], offsets[:, 1]
        for entity in example.entities:
            if entity.type not in self.types:
                report.count("unknown_types", entity.type)
                continue
            report.entities += 1
            inside = entity_tokens(entity, starts, ends, report)
            if inside is None:
                continue
            tags[inside] = self.tag_ids[f"I-{entity.type}"]
            tags[inside[0]] = self.tag_ids[f"B-{entity.type}"]
        return tags

    def window_labels(self, tags, start, end, report):
        window = tags[start:end]
        if start > 0 and window[0] != 0 and self.tags[window[0]].startswith("I-"):
            report.entities_split_by_windows += 1
            window = window.copy()
            window[0] = self.tag_ids["B-" + self.tags[window[0]][2:]]
        return {"tags": np.concatenate([[0], window, [0]]).astype(np.int32)}

    # ---------------------------------------------------------------- inference
    def rows_out(self, windows, run):
        """Step 2: the model's Viterbi ``tags`` int32 and emission scores
        ``potentials`` float32 of each window row."""
        import tensorflow as tf

        from kerasbert_apps.ner.heads.bio.fused_bilstm import graph_scorers
        from kerasbert.serving.rows import nonempty_encoder_inputs

        n_rows = tf.shape(windows["token_ids"])[0]
        # An empty batch gets one [CLS] [SEP] row: the model never sees an empty batch.
        inputs = nonempty_encoder_inputs(windows, self.tokenizer.cls_id, self.tokenizer.sep_id)
        # The fused BiLSTM kernel is for plain graphs, and for the graph the ONNX export converts (its
        # handler writes ONNX's LSTM op, kerasbert.serving.onnx); XLA compiles Keras's LSTM loop itself.
        fused = (run.in_graph or isinstance(run, ConvertibleRunner)) and not run.jit_compile
        scorer, compiled = graph_scorers(self.model, run.compiled_heads) if fused else (None, None)
        out = run.rows(scorer or self.model, inputs, one_group=compiled)
        return tf.cast(out["tags"][:n_rows], tf.int32), tf.cast(out["potentials"][:n_rows], tf.float32)

    def infer(self, texts, windows, run):
        from kerasbert_apps.ner.heads.bio.decode import crf_parameters
        from kerasbert_apps.ner.heads.bio.decode import entities
        from kerasbert_apps.ner.heads.bio.decode import tag_tables

        tags, potentials = self.rows_out(windows, run)
        return entities(texts, windows, tags, potentials, tag_tables(self.tags), crf_parameters(self.model),
                        self.temperature)

    # ``kerasbert ner select`` (:mod:`kerasbert_apps.ner.select`): the head's
    # outputs beside the encoder's, their entities, and P(best labelling) per row.
    def selection_outputs(self, head_input, padding_mask, fused=False):
        """The emission scores ``potentials`` and Viterbi ``tags`` of the
        head on the encoder's output (``fused``: in a plain graph, with the
        fused BiLSTM kernel)."""
        from keras import ops

        bilstm = None
        if fused and getattr(self.model, "lstm", None) is not None:
            from kerasbert_apps.ner.heads.bio.fused_bilstm import fused_bilstm

            bilstm = fused_bilstm(self.model.lstm)
        potentials, tags = self.model.head(head_input, padding_mask, bilstm=bilstm, training=False)
        return {"potentials": ops.cast(potentials, "float32"), "tags": ops.cast(tags, "int32")}

    def selection_decode(self, texts, windows, out):
        """``(entities, kept)``: the entities of the window rows' outputs
        ``out`` (as :meth:`infer` decodes them) and the rows' ``tags`` and
        ``potentials`` for :meth:`selection_log_best`."""
        import tensorflow as tf

        from kerasbert_apps.ner.heads.bio.decode import crf_parameters
        from kerasbert_apps.ner.heads.bio.decode import entities
        from kerasbert_apps.ner.heads.bio.decode import tag_tables

        n_rows = tf.shape(windows["token_ids"])[0]
        tags = tf.cast(out["tags"][:n_rows], tf.int32)
        potentials = tf.cast(out["potentials"][:n_rows], tf.float32)
        found = entities(texts, windows, tags, potentials, tag_tables(self.tags), crf_parameters(self.model),
                         self.temperature)
        return found, {"tags": tags, "potentials": potentials}

    def selection_log_best(self, out, lengths):
        """log P(best labelling) per window row (numpy), the measure the
        head's registration declares: the CRF's probability of its Viterbi
        path under the decoder's constraints
        (:func:`kerasbert_apps.ner.heads.bio.selection.crf_log_best`), or the
        product of the per-token softmax maxima for the softmax head
        (:func:`~kerasbert_apps.ner.heads.bio.selection.softmax_log_best`); at
        the score temperature."""
        import keras

        from kerasbert.layers.crf import FORBIDDEN_SCORE
        from kerasbert_apps.ner.heads.bio.selection import crf_log_best
        from kerasbert_apps.ner.heads.bio.selection import softmax_log_best

        potentials = out["potentials"] / self.temperature
        layer = getattr(self.model, "crf", None)
        if layer is None:
            return softmax_log_best(potentials, lengths)
        transitions = np.asarray(keras.ops.convert_to_numpy(layer.transitions), np.float64) / self.temperature
        start = np.zeros(transitions.shape[0])
        if layer.allowed is not None:
            transitions = np.where(np.asarray(layer.allowed, bool), transitions, transitions + FORBIDDEN_SCORE)
        if layer.allowed_start is not None:
            start = np.where(np.asarray(layer.allowed_start, bool), start, start + FORBIDDEN_SCORE)
        return crf_log_best(potentials, lengths, out["tags"], transitions, start)

    # ------------------------------------------------------------ calibration
    def _spans_and_potentials(self, texts, windows, run):
        from kerasbert_apps.ner.heads.bio.decode import entity_spans
        from kerasbert_apps.ner.heads.bio.decode import tag_tables

        tags, potentials = self.rows_out(windows, run)
        return {**entity_spans(windows, tags, tag_tables(self.tags)), "potentials": potentials}

    def score_outcomes(self, examples, batch_size=32):
        """:meth:`ScoreTemperature.score_outcomes`: an entity is right when
        it matches a gold entity exactly (type and units, as the ECE of
        ``evaluate`` counts, :func:`kerasbert_apps.ner.calibration.entities_right`).
        The model runs once; each ``T`` reruns only the forward-backward
        (:func:`kerasbert_apps.ner.heads.bio.decode.entity_scores`) on the windows that hold an
        entity."""
        import tensorflow as tf

        from kerasbert_apps.ner.calibration import entities_right
        from kerasbert_apps.ner.heads.bio.decode import crf_parameters
        from kerasbert_apps.ner.heads.bio.decode import entity_scores

        parts, correct = [], []  # per batch: its entities' spans and the potentials of their rows; outcomes
        lattice = self._text_function("spans", lambda t: self._spans_and_potentials(t, self.windows_function(t), GraphRunner()))
        for chunk, out in self.in_batches([e.text for e in examples], batch_size, self._spans_and_potentials, lattice):
            out = {k: np.asarray(v) for k, v in out.items()}
            per_text = [[] for _ in chunk]  # the batch's entities are text after text
            for t, s, e, k in zip(out["text"], out["start"], out["end"], out["kind"]):
                per_text[t].append({"start": int(s), "end": int(e), "type": self.types[k]})
            correct.append(entities_right([examples[i] for i in chunk], per_text))
            rows, row_of = np.unique(out["row"], return_inverse=True)  # only the rows that hold an entity
            parts.append({**{k: out[k] for k in ("first", "last", "closed", "begin", "inside")},
                          "row": row_of.reshape(-1).astype(np.int32), "lengths": out["lengths"][rows],
                          "potentials": out["potentials"][rows]})
        if not parts:
            return (lambda temperature: np.zeros(0)), np.zeros(0, bool)
        width = max(p["potentials"].shape[1] for p in parts)
        first_row = np.cumsum([0] + [len(p["lengths"]) for p in parts])
        for p, r in zip(parts, first_row):
            p["row"] = p["row"] + np.int32(r)
            p["potentials"] = np.pad(p["potentials"], [(0, 0), (0, width - p["potentials"].shape[1]), (0, 0)])
        spans = {k: tf.constant(np.concatenate([p[k] for p in parts]))
                 for k in ("row", "first", "last", "closed", "begin", "inside", "lengths")}
        potentials = tf.constant(np.concatenate([p["potentials"] for p in parts]))
        crf = crf_parameters(self.model)
        score = tf.function(lambda t: entity_scores(potentials, spans, crf, t), autograph=False)
        return ((lambda temperature: score(tf.constant(temperature, tf.float32)).numpy().astype(np.float64)),
                np.concatenate(correct))

    def ids_endpoint(self):
        """``token_ids``, ``segment_ids``, ``padding_mask`` -> ``tags`` int32
        [batch, len] (index into the tag list of ``assets.extra/kerasbert.json``)
        and ``potentials`` float32 [batch, len, num_tags]; core TensorFlow ops."""
        from kerasbert_apps.ner.heads.bio.fused_bilstm import graph_scorers

        scorer = graph_scorers(self.model)[0] or (lambda rows: self.model(rows, training=False))

        def serve(token_ids, segment_ids, padding_mask):
            out = scorer({"token_ids": token_ids, "segment_ids": segment_ids, "padding_mask": padding_mask})
            return {"tags": out["tags"], "potentials": out["potentials"]}

        return serve

    # --------------------------------------------------------------- training
    @classmethod
    def training_labels(cls, train_examples, dev_examples, settings):
        return bio_tags(super().training_labels(train_examples, dev_examples, settings))

    @classmethod
    def build_model(cls, encoder, tags, settings):
        from kerasbert_apps.ner.heads.bio.model import NerModel
        from kerasbert.layers.crf import allowed_transitions

        allowed, allowed_start = (None, None)
        if settings.crf and settings.constrained_decoding:
            allowed, allowed_start = (a.tolist() for a in allowed_transitions(tags, "BIO"))
        return NerModel(encoder, len(tags), use_lstm=settings.lstm, lstm_units=settings.lstm_units,
                        use_crf=settings.crf, dropout=settings.dropout, allowed=allowed, allowed_start=allowed_start,
                        layer_mix=settings.freeze_encoder)

    def batches(self, rows, settings, targets=()):
        from kerasbert.training.batching import BucketedBatches

        return BucketedBatches(rows, settings.batch_size, targets=("tags", *targets), seed=settings.seed,
                               max_width=self.max_length)

    #: A student learns the teacher's emission scores (the CRF's inputs).
    soft_target = "potentials"
