"""What the span heads share (entities as spans of tokens, nested kept):
:class:`SpanPipeline` and :class:`SpanFeatureReport`.

A span head's pipeline (in its folder, :mod:`kerasbert_apps.ner.heads`, or
in a package of its own) subclasses :class:`SpanPipeline` and gives its
model (:meth:`build_model`), its decoding (:meth:`decode`: the window's span
logits -> entities, after :func:`kerasbert_apps.ner.window_merge.merged_spans`)
and, for ``ner select``, the span logits of its head
(:meth:`selection_logits`) and the measure its registration declares
(:meth:`selection_log_best`). The rest is here:

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
  ``sigmoid(logit / T)`` of the head's logit. It changes no entity;
* **the decision threshold** (``threshold`` in the settings file, 0 by
  default): a span is an entity where its margin (the head's decoding says
  which) is above it; fitted on dev for the best entity F1 at the end of a
  training run (``--span-threshold auto``, the default:
  :meth:`SpanPipeline.fit_threshold`), before the temperature.
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
        threshold: the decision threshold on each span's margin (the
            head's :meth:`decode` says which; 0 by default and in folders
            saved before it existed; see :meth:`fit_threshold`).
    """

    labels_key = "types"
    FeatureReport = SpanFeatureReport
    #: The scorer :meth:`kerasbert_apps.ner.train.NerTask.score` uses for span heads.
    scorer = "exact spans"

    def __init__(self, model, tokenizer, types, max_length=128, overlap=None, temperature=1.0, threshold=0.0):
        super().__init__(model, tokenizer, types, max_length=max_length, overlap=overlap)
        self.types = list(self.labels)
        self.type_ids = {t: i for i, t in enumerate(self.types)}
        self.set_temperature(temperature)
        self.set_threshold(threshold)

    def settings(self):
        return {**super().settings(), "threshold": self.threshold}

    # ------------------------------------------------------------ decision threshold
    #: The thresholds :meth:`fit_threshold` tries first; while the best is at
    #: an edge, it goes on one further (up to :attr:`THRESHOLD_LIMIT`); then
    #: halfway to the best one's neighbours.
    THRESHOLD_GRID = (-3.0, -2.0, -1.0, 0.0, 1.0)
    THRESHOLD_LIMIT = 6.0

    #: While :meth:`fit_threshold` runs: a ``tf.Variable`` the decoding reads
    #: the threshold from (the grid is scored without tracing again).
    _live_threshold = None

    def set_threshold(self, threshold):
        import math

        threshold = float(threshold)
        if not math.isfinite(threshold):
            raise KerasbertError(f"the decision threshold must be a finite number, got {threshold}")
        self.threshold = threshold
        self._functions = {}  # traced serving functions hold the old threshold

    @property
    def decision_threshold(self):
        """What :meth:`decode` compares margins with: :attr:`threshold`, or
        while :meth:`fit_threshold` runs, the variable it sets."""
        return self.threshold if self._live_threshold is None else self._live_threshold

    def fit_threshold(self, examples, batch_size=32):
        """Set the decision threshold with the best exact-span entity F1 on
        labelled ``examples`` (dev): those of :attr:`THRESHOLD_GRID` (and
        beyond, while the best is at an edge), then halfway between the best
        and each neighbour (ties: the one nearest 0); one traced prediction
        function for all of them. Small-data span
        models are precise and miss entities; a threshold below 0 trades
        some precision for more recall. Returns ``threshold``, ``f1``,
        ``precision``, ``recall``, ``f1_at_0`` and the ``grid`` tried
        (``[threshold, f1]`` pairs)."""
        import tensorflow as tf

        from kerasbert_apps.ner.span_scores import span_scores

        texts = [e.text for e in examples]
        tried = {}
        live = tf.Variable(0.0, trainable=False, dtype=tf.float32, name="decision_threshold")
        self._live_threshold, self._functions = live, {}

        def score(threshold):
            if threshold not in tried:
                live.assign(threshold)
                tried[threshold] = span_scores(examples, self.predict(texts, batch_size=batch_size))

        def best():
            return max(sorted(tried), key=lambda t: (tried[t]["f1"], -abs(t)))

        try:
            for threshold in sorted(set(self.THRESHOLD_GRID) | {0.0}):
                score(threshold)
            while best() in (min(tried), max(tried)) and abs(best()) < self.THRESHOLD_LIMIT:  # at an edge: go on
                score(best() + (1.0 if best() == max(tried) else -1.0))
            grid = sorted(tried)
            at = grid.index(best())
            for neighbour in grid[max(at - 1, 0): at + 2]:
                score((grid[at] + neighbour) / 2)
        finally:
            self._live_threshold = None
        chosen = best()
        self.set_threshold(chosen)
        return {"threshold": chosen, **{k: tried[chosen][k] for k in ("f1", "precision", "recall")},
                "f1_at_0": tried[0.0]["f1"], "grid": [[t, tried[t]["f1"]] for t in sorted(tried)]}

    def nested_from_data(self, report):
        """For a head's ``--...-decoding auto`` (:meth:`after_features`):
        whether its predictions keep entities inside others, True where the
        training data (the ``report`` of :meth:`features`) has any, said in
        one line. The functions traced so far that decode are dropped."""
        nested = report.nested_entities > 0
        # functions traced so far (the training rows' windows) do not decode: only those that do go
        self._functions = {name: f for name, f in self._functions.items() if name == "windows"}
        print(f"{self.head_name} decoding (auto): " + (
            f"nested entities kept ({report.nested_entities} in the training data lie inside another)"
            if nested else "flat (no entity of the training data lies inside another): of overlapping "
            "candidates the more probable is kept"))
        return nested

    @classmethod
    def after_training(cls, model_dir, dev_examples, settings):
        """With ``--span-threshold auto``: :meth:`fit_threshold` of the best
        model on dev (its settings file rewritten), then, with
        ``--calibrate``, its score temperature
        (:meth:`~kerasbert_apps.ner.calibration.ScoreTemperature.after_training`,
        on the entities at that threshold). Entries for ``metrics.json``."""
        metrics = {}
        if getattr(settings, "span_threshold", None) == "auto" and dev_examples:
            best = cls.load(model_dir)
            result = best.fit_threshold(dev_examples, batch_size=settings.batch_size)
            best.save_settings(model_dir)
            print(format_threshold(result, "dev"))
            metrics["span_threshold"] = result
        metrics.update(super().after_training(model_dir, dev_examples, settings))
        return metrics

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
        of :func:`kerasbert_apps.ner.window_merge.span_outputs`: numeric when
        ``texts`` is None (what the ONNX export's graph returns; pass
        ``texts`` through to ``span_outputs``, or name the numeric outputs
        last with :func:`kerasbert_apps.ner.decode.named_entities`)."""
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
        """log P(best labelling) per window row (numpy) from ``out`` (what
        :meth:`selection_decode` kept; ``lengths`` [rows] the rows' lengths,
        ``[CLS]`` and ``[SEP]`` included): the measure the head's
        registration declares (``selection_measure``), computed by the head."""
        raise NotImplementedError

    def infer(self, texts, windows, run):
        import tensorflow as tf

        from kerasbert.serving.rows import nonempty_encoder_inputs

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
        from kerasbert.training.batching import BucketedBatches

        if targets:
            raise KerasbertError(f"the {self.head_name} head cannot be distilled")
        return BucketedBatches(rows, settings.batch_size, targets=("spans",), seed=settings.seed,
                               max_width=self.max_length)

    @classmethod
    def for_training(cls, model, tokenizer, labels, settings):
        """The pipeline a run saves: at ``--span-threshold`` when given,
        else at 0 until :meth:`after_training` fits it."""
        threshold = getattr(settings, "span_threshold", "auto")
        return cls(model, tokenizer, labels, max_length=settings.max_length,
                   threshold=0.0 if threshold == "auto" else threshold)

    def student(self, layers):
        raise KerasbertError(f"a {self.head_name} model cannot be distilled (ner distill takes a BIO tagger as "
                             "teacher)")


def format_threshold(result, data):
    """One line on a fitted decision threshold (:meth:`SpanPipeline.fit_threshold`)."""
    return (f"decision threshold {result['threshold']:g}, fitted on {data}: entity F1 {result['f1_at_0']:.4f} at 0 -> "
            f"{result['f1']:.4f} (P {result['precision']:.4f}, R {result['recall']:.4f})")
