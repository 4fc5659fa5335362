"""The GlobalPointer NER head (``--head global-pointer``): raw text -> possibly nested entities.

A :class:`SpanTagger` is a :class:`~kerasbert_apps.base.pipeline.Pipeline` around a
trained :class:`~kerasbert_apps.ner.heads.global_pointer.model.GlobalPointerNerModel`: the same windows
as the BIO :class:`~kerasbert_apps.ner.heads.bio.pipeline.Tagger` (step 1), the model's span logits
per window (step 2), and :func:`kerasbert_apps.ner.heads.global_pointer.decode.span_entities` (step 3:
windows merged, every (span, type) with a logit above 0 an entity, scored by
``sigmoid(logit / temperature)``). Unlike the BIO heads, entities may lie
inside one another or overlap, and a span may carry several types.

The score temperature (``temperature`` in ``span_tagger.json``, 1 by
default) is fitted on dev at the end of a training run
(:meth:`~kerasbert_apps.ner.calibration.ScoreTemperature.calibrate`, ``--calibrate``, on by default) or later by
``kerasbert ner calibrate``: it makes the scores better probabilities of an
entity being exactly right and changes no entity.

Training rows use the token offsets in reverse (:meth:`SpanTagger.text_labels`):
an entity is the span from the first to the last token it overlaps (an entity
whose edges fall inside a token is counted as misaligned, as for the BIO
heads). A window holds the entities that lie inside it; an entity cut by a
window edge is labelled on its part inside the window, as the BIO heads tag
it (counted; at inference a span at a cut edge loses to a window that sees it
further from the cut), and one that fits whole in no window is counted apart.
"""

import dataclasses

import numpy as np

from kerasbert_apps.base.runners import EndsPadded
from kerasbert_apps.ner.calibration import ScoreTemperature
from kerasbert_apps.ner.pipeline import NerFeatureReport
from kerasbert_apps.ner.pipeline import NerPipeline
from kerasbert_apps.ner.pipeline import entity_tokens
from kerasbert.errors import KerasbertError

#: The model folder's settings file (a BIO tagger's is ``tagger.json``).
SETTINGS_FILE = "span_tagger.json"


@dataclasses.dataclass
class SpanFeatureReport(NerFeatureReport):
    nested_entities: int = 0
    entities_in_no_window: int = 0

    LINES = (
        ("nested_entities", "  {n} entities lie inside another entity (kept: the GlobalPointer head represents them)"),
        ("misaligned_entities", "  {n} entities start or end inside a WordPiece token (labelled on the tokens they overlap)"),
        ("entities_split_by_windows", "  {n} times an entity crosses a window edge (labelled on its part in the "
                                      "window)"),
        ("entities_in_no_window", "  {n} entities are longer than a window (labelled in parts only)"),
        ("entities_without_tokens", "  {n} entities cover no token (only characters the tokenizer drops); skipped"),
        ("unknown_types", "  {n} entities of type {key!r}, not in the training labels; skipped"),
    )


class SpanTagger(ScoreTemperature, NerPipeline):
    """A trained GlobalPointer NER model: predict (possibly nested) entities
    with character offsets.

    Args:
        model: a :class:`~kerasbert_apps.ner.heads.global_pointer.model.GlobalPointerNerModel` (or any
            Keras model with the encoder's inputs and an output ``logits``
            ``[batch, len, len, types]``).
        tokenizer: the :class:`kerasbert.BertTokenizer` it was trained with.
        types: entity type names, index = the model's type axis.
        max_length: tokens per window, ``[CLS]`` and ``[SEP]`` included.
        overlap: tokens shared by consecutive windows of a long text.
        temperature: entity scores are ``sigmoid(logit / temperature)``
            (> 0; see :meth:`calibrate`).
    """

    #: What ``kerasbert ner select`` measures on this head's outputs (:data:`kerasbert_apps.ner.select.HEAD_MEASURES`).
    selection_measure = "spans"

    settings_file = SETTINGS_FILE
    head_name = "global-pointer"
    labels_key = "types"
    model_module = "kerasbert_apps.ner.heads.global_pointer.model"
    FeatureReport = SpanFeatureReport
    #: The scorer :meth:`kerasbert_apps.ner.train.NerTask.score` uses for this head.
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
        its score at ``T`` is ``sigmoid(logit / T)``."""
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
    def selection_logits(self, head_input, padding_mask):
        """``kerasbert ner select``: the span logits of the head on the encoder's output."""
        from keras import ops

        x = self.model.head_dropout(head_input, training=False)
        return self.model.pointer(ops.cast(x, "float32"), mask=padding_mask)

    def selection_entities(self, texts, windows, logits):
        """``kerasbert ner select``: the entities of ``logits`` (as :meth:`infer` decodes them)."""
        from kerasbert_apps.ner.heads.global_pointer.decode import span_entities

        return span_entities(texts, windows, logits, self.types, self.temperature)

    def infer(self, texts, windows, run):
        import tensorflow as tf

        from kerasbert_apps.ner.heads.global_pointer.decode import span_entities
        from kerasbert.export import nonempty_encoder_inputs

        n_rows = tf.shape(windows["token_ids"])[0]
        width = tf.shape(windows["token_ids"])[1]
        # An empty batch gets one [CLS] [SEP] row: the model never sees an empty batch.
        inputs = nonempty_encoder_inputs(windows, self.tokenizer.cls_id, self.tokenizer.sep_id)
        out = run.rows(EndsPadded(self.model, self.max_length), inputs)
        logits = tf.cast(out["logits"], tf.float32)[:n_rows, :width, :width]
        return span_entities(texts, windows, logits, self.types, self.temperature)

    def ids_endpoint(self):
        """``token_ids``, ``segment_ids``, ``padding_mask`` -> ``logits``
        float32 [batch, len, len, types] (start, end inclusive, type: the
        types of ``assets.extra/kerasbert.json``); core TensorFlow ops."""

        def serve(token_ids, segment_ids, padding_mask):
            out = self.model({"token_ids": token_ids, "segment_ids": segment_ids, "padding_mask": padding_mask},
                             training=False)
            return {"logits": out["logits"]}

        return serve

    # --------------------------------------------------------------- training
    @classmethod
    def build_model(cls, encoder, types, settings):
        from kerasbert_apps.ner.heads.global_pointer.model import GlobalPointerNerModel

        return GlobalPointerNerModel(encoder, len(types), head_size=settings.pointer_size, dropout=settings.dropout,
                                     layer_mix=settings.freeze_encoder)

    def batches(self, rows, settings, targets=()):
        from kerasbert.batching import BucketedBatches

        if targets:
            raise KerasbertError("the GlobalPointer head cannot be distilled")
        return BucketedBatches(rows, settings.batch_size, targets=("spans",), seed=settings.seed,
                               max_width=self.max_length)


    def student(self, layers):
        raise KerasbertError("a GlobalPointer model cannot be distilled (ner distill takes a BIO tagger as teacher)")
