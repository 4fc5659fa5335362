"""The triple extractor: raw text -> triples with character offsets, and labelled examples -> training rows.

An :class:`Extractor` is a :class:`~kerasbert_apps.base.pipeline.Pipeline` around a
trained :class:`~kerasbert_apps.triples.heads.casrel.model.TripleModel`, with its predicate list and
decoding thresholds. Following one sentence (the same path for ``predict``,
``evaluate``, the dev evaluation and the SavedModel):

1. **windows**: WordPiece ids and each token's character offsets in the
   original string; texts longer than ``max_length - 2`` tokens are cut into
   overlapping windows (:meth:`~kerasbert_apps.base.pipeline.Pipeline.windows`);
2. **encode** the window rows once (the model's ``encode`` sub-model): the
   sequence vectors and the subject start/end probabilities;
3. **subjects**, then one **object** row per subject for the whole batch (the
   ``objects`` sub-model), then the objects per predicate, merged over
   windows: :func:`kerasbert_apps.triples.heads.casrel.decode.triples` (the decoding rule is in
   :mod:`kerasbert_apps.triples.heads.casrel.decode`). A triple whose subject and object never share
   a window cannot be found.

Training rows (:meth:`Extractor.text_labels`, :meth:`Extractor.window_labels`)
use the offsets in reverse: an entity's start label goes on the token whose
start offset equals the entity's start, its end label on the token whose end
offset equals the entity's end. An entity edge inside a token (misaligned) is
put on the token it falls in (counted); an entity covering no token (only
characters the tokenizer drops) makes its triple unusable (counted). Each
window becomes one training row with its subject labels (every subject of a
triple inside the window) and, per subject, the object labels.
:class:`kerasbert_apps.triples.heads.casrel.batches.SubjectSampledBatches` gives each row ONE gold
subject per epoch, drawn at random and redrawn every epoch (CasRel's
sampling); rows without triples are kept (subject pointers learn negatives)
with subject span (0, 0) and no objects.
"""

import numpy as np

from kerasbert_apps.triples.pipeline import TriplePipeline
from kerasbert.errors import KerasbertError

THRESHOLD_KEYS = ("subject_start", "subject_end", "object_start", "object_end")


def pointer_thresholds(thresholds):
    """The CasRel pointer thresholds: ``(start, end)`` (subjects and objects
    alike) or a dict with any of subject_start, subject_end, object_start,
    object_end -> the full dict (default 0.5)."""
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


class Extractor(TriplePipeline):
    """A trained triple extractor: predict triples with character offsets.

    Args:
        model: a :class:`~kerasbert_apps.triples.heads.casrel.model.TripleModel` (or anything with a
            ``decoders()`` method returning the two Keras models of
            :meth:`TripleModel.decoders`).
        tokenizer: the :class:`kerasbert.BertTokenizer` it was trained with.
        predicates: predicate names, index = the model's predicate column.
        max_length: tokens per window, ``[CLS]`` and ``[SEP]`` included.
        thresholds: ``(start, end)`` for all pointers, or a dict (see
            :func:`pointer_thresholds`); default 0.5 / 0.5.
        overlap: tokens shared by consecutive windows of a long text
            (default: a quarter of a window).
    """

    settings_file = "extractor.json"
    head_name = "casrel"
    #: The thresholds' CLI option names (``--threshold-start``, ``--threshold-end``).
    threshold_options = ("start", "end")
    model_module = "kerasbert_apps.triples.heads.casrel.model"
    complete_thresholds = staticmethod(pointer_thresholds)

    def __init__(self, model, tokenizer, predicates, max_length=128, thresholds=(0.5, 0.5), overlap=None):
        super().__init__(model, tokenizer, predicates, max_length=max_length, thresholds=thresholds, overlap=overlap)

    def threshold_keys(self, given):
        """``start``, ``end`` (:attr:`threshold_options`, e.g. from the
        command line or the tuning grid): subjects and objects alike."""
        return {f"{h}_{k}": v for h in ("subject", "object") for k, v in given.items()}

    # ------------------------------------------------------------ training rows
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

    # ---------------------------------------------------------------- inference
    def decode(self, inputs, n_rows, row_text, offsets, allowed, run):
        """The head's in-graph decoding of window rows: the flat triple fields
        of :func:`kerasbert_apps.triples.decode.unique_triples` (what ``infer`` and the
        ``ids`` endpoint share; a head overrides only this)."""
        from kerasbert_apps.triples.heads.casrel.decode import triples

        return triples(self.model, self.decision_thresholds(), len(self.predicates), inputs, n_rows, row_text,
                       offsets, allowed, run)

    # --------------------------------------------------------------- training
    @classmethod
    def build_model(cls, encoder, predicates, settings):
        from kerasbert_apps.triples.heads.casrel.model import TripleModel

        return TripleModel(encoder, len(predicates), dropout=settings.dropout, layer_mix=settings.freeze_encoder)

    @classmethod
    def for_training(cls, model, tokenizer, predicates, settings):
        given = cls.given_thresholds(settings)
        return cls(model, tokenizer, predicates, max_length=settings.max_length,
                   thresholds=(given["start"], given["end"]))

    def batches(self, rows, settings, targets=()):
        from kerasbert_apps.triples.heads.casrel.batches import SubjectSampledBatches

        if targets:
            raise KerasbertError("the casrel head cannot be distilled")
        return SubjectSampledBatches(rows, len(self.predicates), settings.batch_size, seed=settings.seed,
                                     max_width=self.max_length)
