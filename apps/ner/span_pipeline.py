"""What the span heads share (entities as spans of tokens, nested kept):
:class:`SpanPipeline` and :class:`SpanFeatureReport`.

A span head's pipeline (GlobalPointer, biaffine: :mod:`kerasbert_apps.ner.heads`)
subclasses :class:`SpanPipeline` and gives its model (:meth:`build_model`),
the span logits of its head (:meth:`selection_logits`) and its decoding
(:meth:`decode`: the window's span logits -> entities, after
:func:`kerasbert_apps.ner.window_merge.merged_spans`). The rest is here:

* **training rows** from the token offsets in reverse (:meth:`SpanPipeline.text_labels`):
  an entity is the span from the first to the last token it overlaps (an
  entity whose edges fall inside a token is counted as misaligned, as for
  the BIO heads). A window holds the entities that lie inside it; an entity
  cut by a window edge is labelled on its part inside the window (counted;
  at inference a span at a cut edge loses to a window that sees it further
  from the cut), and one that fits whole in no window is counted apart;
* **inference**: the windows of the BIO heads (step 1), the model's span
  logits per window (step 2), the head's :meth:`decode` (step 3);
* **the score temperature** (``temperature`` in the settings file, 1 by
  default), fitted on dev at the end of a training run
  (:meth:`~kerasbert_apps.ner.calibration.ScoreTemperature.calibrate`,
  ``--calibrate``, on by default) or later by ``kerasbert ner calibrate``:
  an entity is right when its (start, end, type) is exact, and its score is
  ``sigmoid(logit / T)`` of the head's logit. It changes no entity.
"""

import dataclasses

import numpy as np

from kerasbert_apps.base.runners import EndsPadded
from kerasbert_apps.ner.calibration import ScoreTemperature
from kerasbert_apps.ner.pipeline import NerFeatureReport
from kerasbert_apps.ner.pipeline import NerPipeline
from kerasbert_apps.ner.pipeline import entity_tokens
from kerasbert.errors import KerasbertError


@dataclasses.dataclass
class SpanFeatureReport(NerFeatureReport):
    nested_entities: int = 0
    entities_in_no_window: int = 0

    LINES = (
        ("nested_entities", "  {n} entities lie inside another entity (kept: span heads represent them)"),
        ("misaligned_entities", "  {n} entities start or end inside a WordPiece token (labelled on the tokens they overlap)"),
        ("entities_split_by_windows", "  {n} times an entity crosses a window edge (labelled on its part in the "
                                      "window)"),
        ("entities_in_no_window", "  {n} entities are longer than a window (labelled in parts only)"),
        ("entities_without_tokens", "  {n} entities cover no token (only characters the tokenizer drops); skipped"),
        ("unknown_types", "  {n} entities of type {key!r}, not in the training labels; skipped"),
    )


class SpanPipeline(ScoreTemperature, NerPipeline):
    """A trained span NER model: predict (possibly nested) entities with
    character offsets.

    Args:
        model: the head's Keras model, with the encoder's inputs and an
            output ``logits`` ``[batch, len, len, classes]`` (start, end
            inclusive, class).
        tokenizer: the :class:`kerasbert.BertTokenizer` it was trained with.
        types: entity type names, index = the model's type axis.
        max_length: tokens per window, ``[CLS]`` and ``[SEP]`` included.
        overlap: tokens shared by consecutive windows of a long text.
        temperature: the score temperature (> 0; see :meth:`calibrate`).
    """

    labels_key = "types"
    FeatureReport = SpanFeatureReport
    #: The scorer :meth:`kerasbert_apps.ner.train.NerTask.score` uses for span heads.
    scorer = "exact spans"

    def __init__(self, model, tokenizer, types, max_length=128, overlap=None, temperature=1.0):
        super().__init__(model, tokenizer, types, max_length=max_length, overlap=overlap)
        self.types = list(self.labels)
        self.type_ids = {t: i for i, t in enumerate(self.types)}
        self.set_temperature(temperature)

    # ------------------------------------------------------------ calibration
    def score_outcomes(self, examples, batch_size=32):
        """:meth:`ScoreTemperature.score_outcomes`: an entity is right when
        it is an exact (start, end, type) match (nested entities kept), and
        its score at ``T`` is ``sigmoid(logit / T)`` (the head's logit: its
        scores at ``T`` = 1 are ``sigmoid(logit)``)."""
        from kerasbert_apps.ner.calibration import score_logits
        from kerasbert_apps.ner.calibration import sigmoid_scores

        rows = self.output_rows([e.text for e in examples], batch_size=batch_size)
        scores, correct = [], []
        for example, row in zip(examples, rows):
            gold = {(e.start, e.end, e.type) for e in example.entities}
            scores.extend(row["score"])
            correct.extend((int(s), int(e), t) in gold for s, e, t in zip(row["start"], row["end"], row["type"]))
        return sigmoid_scores(score_logits(scores, self.temperature)), np.array(correct, bool)

    # ------------------------------------------------------------ training rows
    def text_labels(self, example, offsets, report):
        starts, ends = offsets[:, 0], offsets[:, 1]
        spans = []
        for entity in example.entities:
            if entity.type not in self.type_ids:
                report.count("unknown_types", entity.type)
                continue
            report.entities += 1
            if any(o is not entity and o.start <= entity.start and entity.end <= o.end
                   and (o.start, o.end) != (entity.start, entity.end) for o in example.entities):
                report.nested_entities += 1
            inside = entity_tokens(entity, starts, ends, report)
            if inside is None:
                continue
            spans.append((int(inside[0]), int(inside[-1]), self.type_ids[entity.type]))
        return {"spans": spans, "placed": set()}

    def window_labels(self, state, start, end, report):
        per_start = [[] for _ in range(end - start + 2)]
        for index, (first, last, kind) in enumerate(state["spans"]):
            if first >= end or last < start:
                continue
            if first >= start and last < end:
                state["placed"].add(index)
            else:  # cut by a window edge: its part in the window
                report.entities_split_by_windows += 1
                first, last = max(first, start), min(last, end - 1)
            code = (last - start + 1) * len(self.types) + kind + 1
            if code not in per_start[first - start + 1]:
                per_start[first - start + 1].append(code)
        k = max(1, max(len(codes) for codes in per_start))
        spans = np.zeros((len(per_start), k), np.int32)
        for position, codes in enumerate(per_start):
            spans[position, : len(codes)] = codes
        return {"spans": spans}

    def text_done(self, state, report):
        report.entities_in_no_window += len(state["spans"]) - len(state["placed"])

    def features(self, examples, report=None):
        """:meth:`Pipeline.features`, the ``spans`` of every row widened to
        the same number of columns (the most entities that start at one token)."""
        rows, report = super().features(examples, report)
        if rows.get("spans"):
            k = max(s.shape[1] for s in rows["spans"])
            rows["spans"] = [np.pad(s, [(0, 0), (0, k - s.shape[1])]) for s in rows["spans"]]
        return rows, report

    # ---------------------------------------------------------------- inference
    def decode(self, texts, windows, logits):
        """Step 3: the entities of ``logits`` float32 ``[rows, len, len,
        classes]`` (one row per window of ``windows``), as the padded outputs
        of :func:`kerasbert_apps.ner.window_merge.span_outputs`."""
        raise NotImplementedError

    # ``kerasbert ner select`` (:mod:`kerasbert_apps.ner.select`): the head's
    # outputs beside the encoder's, their entities, and P(best) per row.
    def selection_logits(self, head_input, padding_mask):
        """The span logits of the head on the encoder's output (its
        ``encoded`` features): ``[rows, len, len, classes]``."""
        raise NotImplementedError

    def selection_outputs(self, head_input, padding_mask, fused=False):
        from keras import ops

        return {"logits": ops.cast(self.selection_logits(head_input, padding_mask), "float32")}

    def selection_decode(self, texts, windows, out):
        """``(entities, kept)``: the entities of the window rows' outputs
        ``out`` (as :meth:`infer` decodes them) and what
        :meth:`selection_log_best` needs of them."""
        import tensorflow as tf

        n_rows = tf.shape(windows["token_ids"])[0]
        width = tf.shape(windows["token_ids"])[1]
        logits = tf.cast(out["logits"], tf.float32)[:n_rows, :width, :width]
        return self.decode(texts, windows, logits), {"logits": logits}

    def selection_log_best(self, out, lengths):
        """log P(best reading) per window row (numpy): each span's
        ``sigmoid(logit / T)`` decision (:func:`kerasbert_apps.ner.select.span_log_best`)."""
        from kerasbert_apps.ner.select import span_log_best

        return span_log_best(out["logits"], lengths, self.temperature)

    def infer(self, texts, windows, run):
        import tensorflow as tf

        from kerasbert.export import nonempty_encoder_inputs

        n_rows = tf.shape(windows["token_ids"])[0]
        width = tf.shape(windows["token_ids"])[1]
        # An empty batch gets one [CLS] [SEP] row: the model never sees an empty batch.
        inputs = nonempty_encoder_inputs(windows, self.tokenizer.cls_id, self.tokenizer.sep_id)
        out = run.rows(EndsPadded(self.model, self.max_length), inputs)
        return self.decode(texts, windows, tf.cast(out["logits"], tf.float32)[:n_rows, :width, :width])

    def ids_endpoint(self):
        """``token_ids``, ``segment_ids``, ``padding_mask`` -> ``logits``
        float32 [batch, len, len, classes] (start, end inclusive, class: the
        types of ``assets.extra/kerasbert.json``, then any class the head
        adds); core TensorFlow ops."""

        def serve(token_ids, segment_ids, padding_mask):
            out = self.model({"token_ids": token_ids, "segment_ids": segment_ids, "padding_mask": padding_mask},
                             training=False)
            return {"logits": out["logits"]}

        return serve

    # --------------------------------------------------------------- training
    def batches(self, rows, settings, targets=()):
        from kerasbert.batching import BucketedBatches

        if targets:
            raise KerasbertError(f"the {self.head_name} head cannot be distilled")
        return BucketedBatches(rows, settings.batch_size, targets=("spans",), seed=settings.seed,
                               max_width=self.max_length)

    def student(self, layers):
        raise KerasbertError(f"a {self.head_name} model cannot be distilled (ner distill takes a BIO tagger as "
                             "teacher)")
