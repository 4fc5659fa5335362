"""The GPLinker triple head (``--head gplinker``): raw text -> triples, every subject and object at once.

A :class:`GPLinkerExtractor` is an :class:`~kerasbert_apps.triples.pipeline.TriplePipeline`
(the same readers, training-row alignment, windows, result format, scoring,
``predict`` / ``evaluate`` / ``export``) around a trained
:class:`~kerasbert_apps.triples.heads.gplinker.model.GPLinkerModel`: per window, the model's
span and link logits (step 2, one pass: no per-subject call), then
:func:`kerasbert_apps.triples.heads.gplinker.decode.linked_triples` (step 3: spans and links
above logit 0, the triple scored by the sigmoid of its lowest logit, windows
merged as for the CasRel head).

Training rows: each window holds the triples whose subject and object both
lie inside it (as for the CasRel head); its labels are sparse codes per row
position (:meth:`GPLinkerExtractor.window_labels`): the subject and object
spans, and for each triple the head link (subject start -> object start) and
the tail link (subject end -> object end) of its predicate. Every subject of
a row is trained at every step (CasRel samples one per step).

Thresholds (probabilities, default 0.5 = logit 0, bert4keras's rule): a span
holds where its probability is above ``entity``, a head or tail link where
its probability is above ``link`` (``--threshold-entity``,
``--threshold-link``; lower for recall, higher for precision; pick them on
dev with ``kerasbert triples tune``; a :meth:`~kerasbert_apps.triples.pipeline.TriplePipeline.live_copy`
reads them from variables). A folder saved before thresholds
existed loads with 0.5 / 0.5. The folder's settings file is
``gplinker.json`` (with ``"head": "gplinker"``), so ``predict``,
``evaluate`` and ``export`` load this head.
"""

import math

import numpy as np

from kerasbert_apps.triples.pipeline import TriplePipeline
from kerasbert.errors import KerasbertError

#: The model folder's settings file (a CasRel extractor's is ``extractor.json``).
SETTINGS_FILE = "gplinker.json"
HEAD = "gplinker"
#: The decision thresholds of this head (probabilities).
THRESHOLD_KEYS = ("entity", "link")


def link_thresholds(thresholds):
    """The GPLinker thresholds: a dict with any of ``entity`` and ``link`` (probabilities in (0, 1);
    default 0.5) -> the full dict."""
    thresholds = dict(thresholds or {})
    unknown = set(thresholds) - set(THRESHOLD_KEYS)
    if unknown:
        raise KerasbertError(f"unknown gplinker threshold(s) {sorted(unknown)}; known: {', '.join(THRESHOLD_KEYS)} "
                             "(--threshold-start/--threshold-end are the casrel head's)")
    out = {k: float(thresholds.get(k, 0.5)) for k in THRESHOLD_KEYS}
    for key, value in out.items():
        if not 0.0 < value < 1.0:
            raise KerasbertError(f"gplinker threshold {key} must be in (0, 1), got {value}")
    return out


class GPLinkerExtractor(TriplePipeline):
    """A trained GPLinker triple extractor: predict triples with character offsets.

    Args:
        model: a :class:`~kerasbert_apps.triples.heads.gplinker.model.GPLinkerModel` (or any
            Keras model with the encoder's inputs and outputs ``entities``
            ``[batch, len, len, 2]``, ``heads`` and ``tails`` ``[batch, len,
            len, P]``, logits).
        tokenizer: the :class:`kerasbert.BertTokenizer` it was trained with.
        predicates: predicate names, index = the model's predicate channel.
        max_length: tokens per window, ``[CLS]`` and ``[SEP]`` included.
        thresholds: ``{"entity": p, "link": q}`` (either may be left out:
            0.5), probabilities a span / a link must be above.
        overlap: tokens shared by consecutive windows of a long text.
    """

    settings_file = SETTINGS_FILE
    head_name = HEAD
    threshold_options = THRESHOLD_KEYS
    model_module = "kerasbert_apps.triples.heads.gplinker.model"
    complete_thresholds = staticmethod(link_thresholds)

    def __init__(self, model, tokenizer, predicates, max_length=128, thresholds=None, overlap=None):
        super().__init__(model, tokenizer, predicates, max_length=max_length, thresholds=thresholds, overlap=overlap)

    def settings(self):
        return {**super().settings(), "head": HEAD}

    @classmethod
    def from_settings(cls, model, tokenizer, settings):
        settings = dict(settings)
        head = settings.pop("head", HEAD)
        if head != HEAD:
            raise KerasbertError(f"a {cls.settings_file} folder holds the {HEAD} head, not {head!r}")
        return super().from_settings(model, tokenizer, settings)

    # ------------------------------------------------------------ training rows
    def window_labels(self, state, w_start, w_end, report):
        n = w_end - w_start + 2
        n_predicates = len(self.predicates)
        entity_codes = [set() for _ in range(n)]
        head_codes = [set() for _ in range(n)]
        tail_codes = [set() for _ in range(n)]
        subjects = set()
        for k, (sf, sl, p, of, ol) in enumerate(state["aligned"]):
            if not (w_start <= min(sf, of) and max(sl, ol) < w_end):
                continue
            state["used"].add(k)
            sf, sl, of, ol = (x - w_start + 1 for x in (sf, sl, of, ol))
            subjects.add((sf, sl))
            entity_codes[sf].add(sl * 2 + 0 + 1)
            entity_codes[of].add(ol * 2 + 1 + 1)
            head_codes[sf].add(of * n_predicates + p + 1)
            tail_codes[sl].add(ol * n_predicates + p + 1)
        report.subjects += len(subjects)
        report.rows_without_triples += not subjects
        return {name: _codes(codes) for name, codes in
                (("entity_codes", entity_codes), ("head_codes", head_codes), ("tail_codes", tail_codes))}

    def features(self, examples, report=None):
        """:meth:`Pipeline.features`, each code array of every row widened to
        the same number of columns (the most codes at one position)."""
        rows, report = super().features(examples, report)
        for name in ("entity_codes", "head_codes", "tail_codes"):
            if rows.get(name):
                k = max(c.shape[1] for c in rows[name])
                rows[name] = [np.pad(c, [(0, 0), (0, k - c.shape[1])]) for c in rows[name]]
        return rows, report

    # ---------------------------------------------------------------- inference
    def _logits(self, inputs, n_rows, width, run):
        """The model's three outputs over the rows, ``[n_rows, width, width, k]`` float32."""
        import tensorflow as tf

        from kerasbert_apps.base.runners import EndsPadded
        from kerasbert_apps.triples.heads.gplinker.model import OUTPUTS

        out = run.rows(EndsPadded(self.model, self.max_length, OUTPUTS), inputs)
        return {k: tf.cast(out[k], tf.float32)[:n_rows, :width, :width] for k in OUTPUTS}

    def decode(self, inputs, n_rows, row_text, offsets, allowed, run):
        import tensorflow as tf

        from kerasbert_apps.triples.heads.gplinker.decode import linked_triples

        width = tf.shape(allowed)[1]
        entity, link = (_logit(self.decision_thresholds()[k]) for k in THRESHOLD_KEYS)
        return linked_triples(self._logits(inputs, n_rows, width, run), row_text, offsets, allowed,
                              entity_threshold=entity, link_threshold=link)

    # --------------------------------------------------------------- training
    @classmethod
    def build_model(cls, encoder, predicates, settings):
        from kerasbert_apps.triples.heads.gplinker.model import GPLinkerModel

        return GPLinkerModel(encoder, len(predicates), head_size=settings.pointer_size, dropout=settings.dropout,
                             layer_mix=settings.freeze_encoder)

    @classmethod
    def for_training(cls, model, tokenizer, predicates, settings):
        return cls(model, tokenizer, predicates, max_length=settings.max_length,
                   thresholds=cls.given_thresholds(settings))

    def batches(self, rows, settings, targets=()):
        from kerasbert.training.batching import BucketedBatches

        if targets:
            raise KerasbertError("the gplinker head cannot be distilled")
        return BucketedBatches(rows, settings.batch_size, targets=("entity_codes", "head_codes", "tail_codes"),
                               seed=settings.seed, max_width=self.max_length)


def _logit(probability):
    """The logit of a probability: a float, or a scalar tensor (a :meth:`live_copy`'s variable)."""
    if isinstance(probability, float):
        return math.log(probability / (1.0 - probability))
    import tensorflow as tf

    return tf.math.log(probability) - tf.math.log1p(-probability)


def _codes(per_position):
    """Sets of codes per row position -> int32 ``[positions, K]`` (0 pads, K >= 1)."""
    k = max(1, max(len(c) for c in per_position))
    out = np.zeros((len(per_position), k), np.int32)
    for position, codes in enumerate(per_position):
        out[position, : len(codes)] = sorted(codes)
    return out
