"""The triple extractor: raw text -> triples with character offsets, and labelled examples -> training rows.

An :class:`Extractor` is a :class:`~kerasbert_apps.base.pipeline.Pipeline` around a
trained :class:`~kerasbert_apps.triples.model.TripleModel`, with its predicate list and
decoding thresholds. Following one sentence (the same path for ``predict``,
``evaluate``, the dev evaluation and the SavedModel):

1. **windows**: WordPiece ids and each token's character offsets in the
   original string; texts longer than ``max_length - 2`` tokens are cut into
   overlapping windows (:meth:`~kerasbert_apps.base.pipeline.Pipeline.windows`);
2. **encode** the window rows once (the model's ``encode`` sub-model): the
   sequence vectors and the subject start/end probabilities;
3. **subjects**, then one **object** row per subject for the whole batch (the
   ``objects`` sub-model), then the objects per predicate, merged over
   windows: :func:`kerasbert_apps.triples.decode.triples` (the decoding rule is in
   :mod:`kerasbert_apps.triples.decode`). A triple whose subject and object never share
   a window cannot be found.

Training rows (:meth:`Extractor.text_labels`, :meth:`Extractor.window_labels`)
use the offsets in reverse: an entity's start label goes on the token whose
start offset equals the entity's start, its end label on the token whose end
offset equals the entity's end. An entity edge inside a token (misaligned) is
put on the token it falls in (counted); an entity covering no token (only
characters the tokenizer drops) makes its triple unusable (counted). Each
window becomes one training row with its subject labels (every subject of a
triple inside the window) and, per subject, the object labels.
:class:`kerasbert_apps.triples.batches.SubjectSampledBatches` gives each row ONE gold
subject per epoch, drawn at random and redrawn every epoch (CasRel's
sampling); rows without triples are kept (subject pointers learn negatives)
with subject span (0, 0) and no objects.
"""

import dataclasses

import numpy as np

from kerasbert_apps.base.pipeline import Pipeline
from kerasbert_apps.base.report import FeatureReport
from kerasbert.errors import KerasbertError

THRESHOLD_KEYS = ("subject_start", "subject_end", "object_start", "object_end")
WARMUP_TEXTS = (
    "Alice Martin, born in Lyon, works for the United Nations in New York.",
    "李白出生于碎叶城。",
    "",
)


def normalize_thresholds(thresholds):
    """``(start, end)`` (both heads) or a dict with any of subject_start,
    subject_end, object_start, object_end -> the full dict (default 0.5)."""
    if thresholds is None:
        thresholds = (0.5, 0.5)
    if isinstance(thresholds, dict):
        unknown = set(thresholds) - set(THRESHOLD_KEYS)
        if unknown:
            raise KerasbertError(f"unknown threshold(s) {sorted(unknown)}; known: {', '.join(THRESHOLD_KEYS)}")
        out = {k: float(thresholds.get(k, 0.5)) for k in THRESHOLD_KEYS}
    else:
        start, end = thresholds
        out = {"subject_start": float(start), "subject_end": float(end),
               "object_start": float(start), "object_end": float(end)}
    for key, value in out.items():
        if not 0.0 <= value < 1.0:
            raise KerasbertError(f"threshold {key} must be in [0, 1), got {value}")
    return out


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


class Extractor(Pipeline):
    """A trained triple extractor: predict triples with character offsets.

    Args:
        model: a :class:`~kerasbert_apps.triples.model.TripleModel` (or anything with a
            ``decoders()`` method returning the two Keras models of
            :meth:`TripleModel.decoders`).
        tokenizer: the :class:`kerasbert.BertTokenizer` it was trained with.
        predicates: predicate names, index = the model's predicate column.
        max_length: tokens per window, ``[CLS]`` and ``[SEP]`` included.
        thresholds: ``(start, end)`` for all pointers, or a dict (see
            :func:`normalize_thresholds`); default 0.5 / 0.5.
        overlap: tokens shared by consecutive windows of a long text
            (default: a quarter of a window).
    """

    settings_file = "extractor.json"
    head_name = "casrel"
    #: The thresholds' CLI option names (``--threshold-start``, ``--threshold-end``).
    threshold_options = ("start", "end")
    kind = "triples model"
    task = "triples"
    labels_key = "predicates"
    head_prefix = "triples_head_"
    model_module = "kerasbert_apps.triples.model"
    warmup_texts = WARMUP_TEXTS
    FeatureReport = TriplesFeatureReport

    def __init__(self, model, tokenizer, predicates, max_length=128, thresholds=(0.5, 0.5), overlap=None):
        super().__init__(model, tokenizer, predicates, max_length=max_length, overlap=overlap)
        self.predicate_ids = {p: i for i, p in enumerate(self.predicates)}
        self.thresholds = normalize_thresholds(thresholds)

    @property
    def predicates(self):
        return self.labels

    def settings(self):
        return {**super().settings(), "thresholds": self.thresholds}

    def with_threshold_options(self, given):
        """The same extractor with thresholds named as in
        :attr:`threshold_options` (``start``, ``end``: subjects and objects
        alike), e.g. from the command line or the tuning grid."""
        return self.with_thresholds({f"{h}_{k}": v for h in ("subject", "object") for k, v in given.items()})

    def with_thresholds(self, thresholds):
        """The same extractor with other thresholds: a dict of any of
        :data:`THRESHOLD_KEYS` (the others are kept) or ``(start, end)`` for
        all pointers."""
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

    def window_labels(self, state, w_start, w_end, report):
        n = w_end - w_start + 2
        subject_start = np.zeros(n, np.int32)
        subject_end = np.zeros(n, np.int32)
        by_subject = {}
        for k, (sf, sl, p, of, ol) in enumerate(state["aligned"]):
            if not (w_start <= min(sf, of) and max(sl, ol) < w_end):
                continue
            state["used"].add(k)
            s_span = (sf - w_start + 1, sl - w_start + 1)
            subject_start[s_span[0]] = 1
            subject_end[s_span[1]] = 1
            objects = by_subject.setdefault(s_span, (set(), set()))
            objects[0].add((of - w_start + 1, p))
            objects[1].add((ol - w_start + 1, p))
        subjects = [
            (span, np.array(sorted(o_starts), np.int32).reshape(-1, 2), np.array(sorted(o_ends), np.int32).reshape(-1, 2))
            for span, (o_starts, o_ends) in sorted(by_subject.items())
        ]
        report.subjects += len(subjects)
        report.rows_without_triples += not subjects
        return {"subject_start": subject_start, "subject_end": subject_end, "subjects": subjects}

    def text_done(self, state, report):
        report.triples_used += len(state["used"])
        report.triples_cut_by_windows += len(state["aligned"]) - len(state["used"])

    # ---------------------------------------------------------------- inference
    def infer(self, texts, windows, run):
        import tensorflow as tf

        from kerasbert_apps.triples.decode import per_text
        from kerasbert.export import nonempty_encoder_inputs

        n_rows = tf.shape(windows["token_ids"])[0]
        inputs = nonempty_encoder_inputs(windows, self.tokenizer.cls_id, self.tokenizer.sep_id)
        positions = tf.range(tf.shape(windows["token_ids"])[1])[None, :]
        n = windows["token_end"] - windows["token_start"]
        allowed = (positions >= 1) & (positions <= n[:, None])
        fields = self.decode(inputs, n_rows, windows["text_index"], windows["offsets"], allowed, run)
        return per_text(fields, tf.size(windows["num_tokens"]), self.predicates, texts)

    def decode(self, inputs, n_rows, row_text, offsets, allowed, run):
        """The head's in-graph decoding of window rows: the flat triple fields
        of :func:`kerasbert_apps.triples.decode.unique_triples` (what ``infer`` and the
        ``ids`` endpoint share; a head overrides only this)."""
        from kerasbert_apps.triples.decode import triples

        return triples(self.model, self.thresholds, len(self.predicates), inputs, n_rows, row_text, offsets,
                       allowed, run)

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

    @classmethod
    def build_model(cls, encoder, predicates, settings):
        from kerasbert_apps.triples.model import TripleModel

        return TripleModel(encoder, len(predicates), dropout=settings.dropout, layer_mix=settings.freeze_encoder)

    @classmethod
    def for_training(cls, model, tokenizer, predicates, settings):
        return cls(model, tokenizer, predicates, max_length=settings.max_length,
                   thresholds=(settings.threshold_start, settings.threshold_end))

    def batches(self, rows, settings):
        from kerasbert_apps.triples.batches import SubjectSampledBatches

        return SubjectSampledBatches(rows, len(self.predicates), settings.batch_size, seed=settings.seed,
                                     max_width=self.max_length)
