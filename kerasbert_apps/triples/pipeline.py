"""What the triple heads share: a :class:`TriplePipeline` (predicates,
thresholds, training-row alignment, the in-graph path from windows to the
padded triples, results, the ``ids`` endpoint, the predicate list of a run).

A head (:mod:`kerasbert_apps.triples.heads`) subclasses it and writes its
own thresholds (:meth:`TriplePipeline.complete_thresholds`), window labels,
decoding (:meth:`TriplePipeline.decode`), model and batches. Training rows
(:meth:`TriplePipeline.text_labels`) use the token offsets in reverse: an
entity's first and last tokens are the tokens it overlaps; an entity edge
inside a token (misaligned) is put on the token it falls in (counted); an
entity covering no token (only characters the tokenizer drops) makes its
triple unusable (counted). A window holds the triples whose subject and
object both lie inside it.
"""

import dataclasses

import numpy as np

from kerasbert_apps.base.pipeline import Pipeline
from kerasbert_apps.base.report import FeatureReport
from kerasbert.errors import KerasbertError

WARMUP_TEXTS = (
    "Alice Martin, born in Lyon, works for the United Nations in New York.",
    "李白出生于碎叶城。",
    "",
)


@dataclasses.dataclass
class TriplesFeatureReport(FeatureReport):
    triples: int = 0
    triples_used: int = 0
    subjects: int = 0
    rows_without_triples: int = 0
    misaligned_entities: int = 0
    triples_without_tokens: int = 0
    triples_cut_by_windows: int = 0
    unknown_predicates: dict = dataclasses.field(default_factory=dict)

    LINES = (
        ("rows_without_triples", "  {n} sequences have no triple (kept: negatives for the subject pointers)"),
        ("misaligned_entities", "  {n} entity edges fall inside a WordPiece token (labelled on that token)"),
        ("triples_without_tokens", "  {n} triples have an entity covering no token; skipped"),
        ("triples_cut_by_windows", "  {n} triples have subject and object in no common window (long texts); skipped"),
        ("unknown_predicates", "  {n} triples with predicate {key!r}, not in the predicate list; skipped"),
    )

    def headline(self):
        return (f"{self.examples} examples -> {self.windows} sequences, {self.triples_used} of {self.triples} "
                f"triples used, {self.subjects} (sequence, subject) pairs")


def _align(starts, ends, span):
    """(first token, last token, aligned) of a character span, or None."""
    inside = np.nonzero((ends > span.start) & (starts < span.end))[0]
    if len(inside) == 0:
        return None
    first, last = int(inside[0]), int(inside[-1])
    return first, last, bool(starts[first] == span.start and ends[last] == span.end)


class TriplePipeline(Pipeline):
    """A trained triple extractor of any head: predict triples with character offsets.

    Args:
        model: the head's Keras model.
        tokenizer: the :class:`kerasbert.BertTokenizer` it was trained with.
        predicates: predicate names, index = the model's predicate channel.
        max_length: tokens per window, ``[CLS]`` and ``[SEP]`` included.
        thresholds: the head's decision thresholds (see its
            :meth:`complete_thresholds`); None: its defaults.
        overlap: tokens shared by consecutive windows of a long text
            (default: a quarter of a window).
    """

    #: The thresholds' CLI option names (``--threshold-NAME``), as registered.
    threshold_options = ()
    kind = "triples model"
    task = "triples"
    labels_key = "predicates"
    head_prefix = "triples_head_"
    warmup_texts = WARMUP_TEXTS
    FeatureReport = TriplesFeatureReport

    def __init__(self, model, tokenizer, predicates, max_length=128, thresholds=None, overlap=None):
        super().__init__(model, tokenizer, predicates, max_length=max_length, overlap=overlap)
        self.predicate_ids = {p: i for i, p in enumerate(self.predicates)}
        self.thresholds = self.complete_thresholds(thresholds)

    @staticmethod
    def complete_thresholds(thresholds):
        """The head's full thresholds dict from what a caller gives (None: the defaults)."""
        raise NotImplementedError

    @property
    def predicates(self):
        return self.labels

    def settings(self):
        return {**super().settings(), "thresholds": self.thresholds}

    #: ``{threshold key: tf.Variable}`` of a :meth:`live_copy` (None: the
    #: decoding uses :attr:`thresholds` as constants).
    _live = None

    def decision_thresholds(self):
        """The thresholds :meth:`decode` decides with: :attr:`thresholds`
        (floats), or in a :meth:`live_copy` the variables holding them."""
        return dict(self._live) if self._live is not None else dict(self.thresholds)

    def live_copy(self):
        """A copy whose decoding reads the thresholds from ``tf.Variable`` s:
        :meth:`set_live_thresholds` then changes them without tracing the
        graph again (threshold tuning scores many pairs; a new extractor per
        pair would trace each time). Predict with it; export this extractor
        or one made by :meth:`with_thresholds` instead."""
        import tensorflow as tf

        copy = self.with_thresholds({})
        copy._live = {k: tf.Variable(float(v), trainable=False, dtype=tf.float32, name=f"threshold_{k}")
                      for k, v in copy.thresholds.items()}
        return copy

    def set_live_thresholds(self, thresholds):
        """Set thresholds (a dict of any of the head's keys, or what
        :meth:`with_threshold_options` takes when ``options``) of a
        :meth:`live_copy`; returns it."""
        if self._live is None:
            raise KerasbertError("set_live_thresholds needs a live_copy(); use with_thresholds otherwise")
        self.thresholds = self.complete_thresholds({**self.thresholds, **thresholds})
        for key, variable in self._live.items():
            variable.assign(self.thresholds[key])
        return self

    def live_threshold_options(self, given):
        """:meth:`set_live_thresholds` with thresholds named as in
        :attr:`threshold_options` (the tuning grid's names)."""
        return self.set_live_thresholds(self.threshold_keys(given))

    def threshold_keys(self, given):
        """Thresholds named as in :attr:`threshold_options` -> the head's
        threshold keys (the same names unless the head says)."""
        return dict(given)

    def with_threshold_options(self, given):
        """The same extractor with thresholds named as in
        :attr:`threshold_options` (from the command line or the tuning grid)."""
        return self.with_thresholds(self.threshold_keys(given))

    def with_thresholds(self, thresholds):
        """The same extractor with other thresholds: a dict of any of the
        head's threshold keys (the others are kept), or what the head's
        :meth:`complete_thresholds` takes."""
        if isinstance(thresholds, dict):
            thresholds = {**self.thresholds, **thresholds}
        return type(self).from_settings(self.model, self.tokenizer,
                                        {**self.settings(), "thresholds": thresholds, "lora": self.lora})

    # ------------------------------------------------------------ training rows
    def text_labels(self, example, offsets, report):
        starts, ends = offsets[:, 0], offsets[:, 1]
        aligned = []  # (subject first, last, predicate id, object first, last)
        for triple in example.triples:
            if triple.predicate not in self.predicate_ids:
                report.count("unknown_predicates", triple.predicate)
                continue
            report.triples += 1
            s = _align(starts, ends, triple.subject)
            o = _align(starts, ends, triple.object)
            if s is None or o is None:
                report.triples_without_tokens += 1
                continue
            report.misaligned_entities += (not s[2]) + (not o[2])
            aligned.append((s[0], s[1], self.predicate_ids[triple.predicate], o[0], o[1]))
        return {"aligned": aligned, "used": set()}

    def text_done(self, state, report):
        report.triples_used += len(state["used"])
        report.triples_cut_by_windows += len(state["aligned"]) - len(state["used"])

    # ---------------------------------------------------------------- inference
    def infer(self, texts, windows, run):
        import tensorflow as tf

        from kerasbert_apps.triples.decode import per_text
        from kerasbert_apps.triples.decode import triple_numbers
        from kerasbert.serving.rows import nonempty_encoder_inputs

        n_rows = tf.shape(windows["token_ids"])[0]
        inputs = nonempty_encoder_inputs(windows, self.tokenizer.cls_id, self.tokenizer.sep_id)
        positions = tf.range(tf.shape(windows["token_ids"])[1])[None, :]
        n = windows["token_end"] - windows["token_start"]
        allowed = (positions >= 1) & (positions <= n[:, None])
        fields = self.decode(inputs, n_rows, windows["text_index"], windows["offsets"], allowed, run)
        if texts is None:  # the numeric outputs (string_outputs)
            return triple_numbers(fields, tf.size(windows["num_tokens"]))
        return per_text(fields, tf.size(windows["num_tokens"]), self.predicates, texts)

    def string_outputs(self):
        """The predicate names and the subjects and objects (:mod:`kerasbert_apps.triples.decode`)."""
        from kerasbert_apps.triples.decode import TRIPLE_SPANS
        from kerasbert_apps.triples.decode import triple_names

        return triple_names(self.predicates), TRIPLE_SPANS

    def decode(self, inputs, n_rows, row_text, offsets, allowed, run):
        """The head's in-graph decoding of window rows: the flat triple fields
        of :func:`kerasbert_apps.triples.decode.unique_triples` (what ``infer``
        and the ``ids`` endpoint share; a head writes only this)."""
        raise NotImplementedError

    def result(self, text, row):
        triples = []
        for ss, se, p, os_, oe, score in zip(row["subject_start"], row["subject_end"], row["predicate"],
                                             row["object_start"], row["object_end"], row["score"]):
            triples.append({
                "subject": {"start": ss, "end": se, "text": text[ss:se]},
                "predicate": p,
                "object": {"start": os_, "end": oe, "text": text[os_:oe]},
                "score": round(float(score), 4),
            })
        return {"text": text, "triples": triples}

    def ids_endpoint(self):
        """``token_ids``, ``segment_ids``, ``padding_mask`` (int32 [batch, len],
        one window per row, ``[CLS] ... [SEP]``) -> the ``text`` signature's
        outputs without ``subject``/``object`` strings, with TOKEN positions
        (row position of the first token, last + 1) instead of character
        offsets; core TensorFlow ops only."""
        from kerasbert_apps.base.pipeline import GraphRunner
        from kerasbert_apps.triples.decode import id_rows
        from kerasbert_apps.triples.decode import per_text

        def serve(token_ids, segment_ids, padding_mask):
            import tensorflow as tf

            n_rows = tf.shape(token_ids)[0]
            inputs, allowed, offsets = id_rows(token_ids, segment_ids, padding_mask, self.tokenizer.cls_id,
                                               self.tokenizer.sep_id)
            fields = self.decode(inputs, n_rows, tf.range(n_rows), offsets, allowed, GraphRunner())
            return per_text(fields, n_rows, self.predicates)

        return serve

    # --------------------------------------------------------------- training
    @classmethod
    def given_thresholds(cls, settings):
        """The run's ``--threshold-<option>`` settings by option name, ``auto``
        ones at 0.5: what the run decides with until :meth:`after_training`."""
        given = {option: getattr(settings, f"threshold_{option}") for option in cls.threshold_options}
        return {option: 0.5 if value == "auto" else value for option, value in given.items()}

    @classmethod
    def after_training(cls, model_dir, dev_examples, settings):
        """The thresholds left at ``auto`` tuned on dev
        (:func:`kerasbert_apps.triples.tuning.tune_thresholds`; the others as
        given) and written into the best model's settings file;
        ``{"tuned_thresholds": ...}`` for ``metrics.json``."""
        from kerasbert_apps.triples.evaluate import score
        from kerasbert_apps.triples.tuning import DEFAULT_VALUES
        from kerasbert_apps.triples.tuning import format_tuning
        from kerasbert_apps.triples.tuning import tune_thresholds
        from kerasbert_apps.triples.tuning import tuned

        auto = [o for o in cls.threshold_options if getattr(settings, f"threshold_{o}", None) == "auto"]
        if not auto or not dev_examples:
            return {}
        given = cls.given_thresholds(settings)
        values = {o: DEFAULT_VALUES if o in auto else [given[o]] for o in cls.threshold_options}
        best = cls.load(model_dir)
        result = tune_thresholds(best, dev_examples, lambda ex, pred: score(ex, pred, mode=settings.eval_mode),
                                 values=values, batch_size=settings.batch_size, log=None)
        tuned(best, result).save_settings(model_dir)
        print(format_tuning(result, "dev", tuned_here=True))
        return {"tuned_thresholds": {"names": result["names"], "thresholds": result["best"]["thresholds"],
                                     **{k: result["best"][k] for k in ("precision", "recall", "f1")},
                                     "f1_at_default": result["default"]["f1"] if result["default"] else None}}

    @classmethod
    def training_labels(cls, train_examples, dev_examples, settings):
        from kerasbert_apps.triples.data import predicates_of
        from kerasbert_apps.triples.data import read_schema

        if settings.schema:
            schema = read_schema(settings.schema)
            print("schema: " + schema.summary())
            predicates = schema.predicates
        else:
            predicates = predicates_of(train_examples)
        if not any(ex.triples for ex in train_examples):
            raise KerasbertError(f"{settings.train}: no located triples in the training data; nothing to learn")
        unseen = sorted(set(predicates_of(dev_examples)) - set(predicates))
        if unseen:
            shown = ", ".join(unseen[:10]) + (f", ... ({len(unseen) - 10} more)" if len(unseen) > 10 else "")
            print(f"note: {len(unseen)} predicate(s) occur in dev but not in the predicate list; "
                  f"they cannot be predicted and count as misses in dev scores: {shown}")
        return predicates
