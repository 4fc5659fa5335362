"""From raw text to triples, and from labelled examples to training features.

An :class:`Extractor` is a trained :class:`~apps.triples.model.TripleModel`,
the tokenizer it was trained with, its predicate list and decoding thresholds.
Following one sentence through :meth:`Extractor.predict`:

1. **tokenize** the raw text (no truncation) -> WordPiece ids and each token's
   character offsets in the original string;
2. **window**: texts longer than ``max_length - 2`` tokens are cut into
   overlapping windows (``[CLS] ... [SEP]`` each), as the NER tagger does;
3. **encode** a batch of windows once (``encode`` sub-model): the sequence
   vectors and the subject start/end probabilities;
4. **subjects**: :func:`decode_spans` on the subject pointers;
5. **objects**: every decoded subject of the batch becomes one row -- its
   window's sequence vectors repeated, plus its (start, end) tokens -- and all
   rows go through the ``objects`` sub-model in ONE call (chunks of
   ``4 x batch_size`` rows only when a batch has more subjects than that);
   :func:`decode_spans` per predicate gives the objects;
6. **merge**: token spans become character spans through the offsets
   (``start`` of the first token, ``end`` of the last, end exclusive, so
   ``text[start:end]`` is the entity as written); triples found in several
   windows are kept once per (subject span, predicate, object span), with
   the highest score. A triple whose subject and object never share a window
   cannot be found.

Decoding rule (:func:`decode_spans`): a pointer *fires* when its probability
is strictly greater than its threshold (CasRel's ``> h_bar``; a probability
exactly at the threshold does not fire) on a real token (not ``[CLS]``,
``[SEP]`` or padding). Every firing start is paired with the nearest firing
end at or after it (in the same predicate column for objects). So nested and
overlapping spans are possible (two starts may share an end); a span can not
reach past a closer firing end. One subject may get several objects and
predicates (SEO), and one (subject, object) pair several predicates (EPO).
``score`` of a span is the geometric mean of its start and end
probabilities; a triple's ``score`` is the geometric mean of its subject's and
its object's scores.

Training features (:meth:`Extractor.features`) use the offsets in reverse: an
entity's start label goes on the token whose start offset equals the
entity's start, its end label on the token whose end offset equals the
entity's end. An entity edge inside a token (misaligned) is put on the token
it falls in (counted); an entity covering no token (only characters the
tokenizer drops) makes its triple unusable (counted). Each window becomes one
training row with its subject labels (every subject of a triple inside the
window) and, per subject, the object labels.
:class:`apps.triples.batches.SubjectSampledBatches` gives each row ONE gold
subject per epoch, drawn at random and redrawn every epoch (CasRel's
sampling); rows without triples are kept (subject pointers learn negatives)
with subject span (0, 0) and no objects.
"""

import dataclasses
import math

import numpy as np

from kerasbert.tokenizer import padded_length
from kerasbert.tokenizer import token_windows as windows
from kerasbert.errors import KerasbertError
from kerasbert.saving import load_pipeline
from kerasbert.saving import save_pipeline

EXTRACTOR_CONFIG = "extractor.json"
THRESHOLD_KEYS = ("subject_start", "subject_end", "object_start", "object_end")


# =============================================================================
# Pure decoding
# =============================================================================


def decode_spans(start_probs, end_probs, threshold_start=0.5, threshold_end=0.5, mask=None):
    """Spans from start/end pointer probabilities (rule in the module doc).

    Args:
        start_probs, end_probs: ``[len]`` or ``[len, P]`` arrays.
        threshold_start, threshold_end: a pointer fires when prob > threshold.
        mask: ``[len]`` bool/int, positions that may start or end a span
            (None: all).

    Returns:
        For 1-D input, ``[(start, end, score)]`` sorted by (start, end); for
        2-D input ``[(start, end, column, score)]`` sorted by (start, end,
        column). ``end`` is inclusive (a token index); ``score`` is
        ``sqrt(p_start * p_end)``.
    """
    start_probs = np.asarray(start_probs, dtype=np.float32)
    end_probs = np.asarray(end_probs, dtype=np.float32)
    if start_probs.shape != end_probs.shape:
        raise ValueError(f"start and end probabilities differ in shape: {start_probs.shape} vs {end_probs.shape}")
    flat = start_probs.ndim == 1
    if flat:
        start_probs, end_probs = start_probs[:, None], end_probs[:, None]
    length = start_probs.shape[0]
    allowed = np.ones(length, bool) if mask is None else np.asarray(mask).astype(bool)[:length]
    starts = (start_probs > threshold_start) & allowed[:, None]
    ends = (end_probs > threshold_end) & allowed[:, None]
    if not starts.any() or not ends.any():
        return []
    # next_end[i, p]: the smallest j >= i where the end pointer of column p fires.
    index = np.where(ends, np.arange(length)[:, None], length)
    next_end = np.minimum.accumulate(index[::-1], axis=0)[::-1]
    spans = []
    for i, p in zip(*np.nonzero(starts)):
        j = next_end[i, p]
        if j < length:
            score = float(math.sqrt(float(start_probs[i, p]) * float(end_probs[j, p])))
            spans.append((int(i), int(j), int(p), score))
    spans.sort()
    if flat:
        return [(i, j, s) for i, j, _, s in spans]
    return spans


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


# =============================================================================
# Training features
# =============================================================================


@dataclasses.dataclass
class FeatureReport:
    examples: int = 0
    windows: int = 0
    triples: int = 0
    triples_used: int = 0
    subjects: int = 0
    rows_without_triples: int = 0
    misaligned_entities: int = 0
    triples_without_tokens: int = 0
    triples_cut_by_windows: int = 0
    unknown_predicates: dict = dataclasses.field(default_factory=dict)

    def summary(self):
        lines = [f"{self.examples} examples -> {self.windows} sequences, {self.triples_used} of {self.triples} "
                 f"triples used, {self.subjects} (sequence, subject) pairs"]
        if self.rows_without_triples:
            lines.append(f"  {self.rows_without_triples} sequences have no triple (kept: negatives for the subject pointers)")
        if self.misaligned_entities:
            lines.append(f"  {self.misaligned_entities} entity edges fall inside a WordPiece token (labelled on that token)")
        if self.triples_without_tokens:
            lines.append(f"  {self.triples_without_tokens} triples have an entity covering no token; skipped")
        if self.triples_cut_by_windows:
            lines.append(f"  {self.triples_cut_by_windows} triples have subject and object in no common window (long texts); skipped")
        for p, n in sorted(self.unknown_predicates.items()):
            lines.append(f"  {n} triples with predicate {p!r}, not in the predicate list; skipped")
        return "\n".join(lines)


def _align(starts, ends, span):
    """(first token, last token, aligned) of a character span, or None."""
    inside = np.nonzero((ends > span.start) & (starts < span.end))[0]
    if len(inside) == 0:
        return None
    first, last = int(inside[0]), int(inside[-1])
    return first, last, bool(starts[first] == span.start and ends[last] == span.end)


# =============================================================================
# The extractor
# =============================================================================


class Extractor:
    """A trained triple extractor: predict triples with character offsets.

    Args:
        model: a :class:`~apps.triples.model.TripleModel` (or anything with a
            ``decoders()`` method returning two objects with
            ``predict_on_batch``, see :meth:`TripleModel.decoders`).
        tokenizer: the :class:`kerasbert.BertTokenizer` it was trained with.
        predicates: predicate names, index = the model's predicate column.
        max_length: tokens per window, ``[CLS]`` and ``[SEP]`` included.
        thresholds: ``(start, end)`` for all pointers, or a dict (see
            :func:`normalize_thresholds`); default 0.5 / 0.5.
        overlap: tokens shared by consecutive windows of a long text
            (default: a quarter of a window).
    """

    def __init__(self, model, tokenizer, predicates, max_length=128, thresholds=(0.5, 0.5), overlap=None):
        self.model = model
        self.tokenizer = tokenizer
        self.predicates = list(predicates)
        if len(set(self.predicates)) != len(self.predicates):
            raise KerasbertError("the predicate list has duplicates")
        self.predicate_ids = {p: i for i, p in enumerate(self.predicates)}
        self.max_length = int(max_length)
        inner = self.max_length - 2
        if inner < 1:
            raise KerasbertError(f"max_length must be at least 3, got {self.max_length}")
        self.overlap = int(overlap if overlap is not None else inner // 4)
        if not 0 <= self.overlap < inner:
            raise KerasbertError(f"overlap must be between 0 and max_length - 3, got {self.overlap}")
        self.thresholds = normalize_thresholds(thresholds)

    def _window_ranges(self, n):
        inner = self.max_length - 2
        return windows(n, inner, inner - self.overlap)

    # ---------------------------------------------------------------- training
    def features(self, examples, report=None):
        """Training rows for ``examples`` (see the module docstring).

        Returns ``(features, report)``: ``features`` has lists (one item per
        row) ``token_ids``, ``segment_ids``, ``padding_mask``,
        ``subject_start``, ``subject_end`` (int32 arrays) and ``subjects``:
        per row a list of ``((start, end), object_starts, object_ends)`` with
        token indices in the row and ``object_*`` int arrays of
        ``[token, predicate]`` rows. Feed them to
        :class:`apps.triples.batches.SubjectSampledBatches`.
        """
        report = report or FeatureReport()
        names = ("token_ids", "segment_ids", "padding_mask", "subject_start", "subject_end", "subjects")
        feats = {name: [] for name in names}
        pieces = self.tokenizer.pieces([e.text for e in examples])
        for example, (ids, offsets) in zip(examples, pieces):
            report.examples += 1
            starts, ends = offsets[:, 0], offsets[:, 1]
            aligned = []  # (subject first, last, predicate id, object first, last)
            for triple in example.triples:
                if triple.predicate not in self.predicate_ids:
                    report.unknown_predicates[triple.predicate] = report.unknown_predicates.get(triple.predicate, 0) + 1
                    continue
                report.triples += 1
                s = _align(starts, ends, triple.subject)
                o = _align(starts, ends, triple.object)
                if s is None or o is None:
                    report.triples_without_tokens += 1
                    continue
                report.misaligned_entities += (not s[2]) + (not o[2])
                aligned.append((s[0], s[1], self.predicate_ids[triple.predicate], o[0], o[1]))
            used = set()
            for w_start, w_end in self._window_ranges(len(ids)):
                n = w_end - w_start + 2
                subject_start = np.zeros(n, np.int32)
                subject_end = np.zeros(n, np.int32)
                by_subject = {}
                for k, (sf, sl, p, of, ol) in enumerate(aligned):
                    if not (w_start <= min(sf, of) and max(sl, ol) < w_end):
                        continue
                    used.add(k)
                    s_span = (sf - w_start + 1, sl - w_start + 1)
                    subject_start[s_span[0]] = 1
                    subject_end[s_span[1]] = 1
                    objects = by_subject.setdefault(s_span, (set(), set()))
                    objects[0].add((of - w_start + 1, p))
                    objects[1].add((ol - w_start + 1, p))
                subjects = [
                    (span, np.array(sorted(o_starts), np.int32).reshape(-1, 2),
                     np.array(sorted(o_ends), np.int32).reshape(-1, 2))
                    for span, (o_starts, o_ends) in sorted(by_subject.items())
                ]
                token_ids = np.concatenate([[self.tokenizer.cls_id], ids[w_start:w_end], [self.tokenizer.sep_id]])
                feats["token_ids"].append(token_ids.astype(np.int32))
                feats["segment_ids"].append(np.zeros(n, np.int32))
                feats["padding_mask"].append(np.ones(n, np.int32))
                feats["subject_start"].append(subject_start)
                feats["subject_end"].append(subject_end)
                feats["subjects"].append(subjects)
                report.windows += 1
                report.subjects += len(subjects)
                report.rows_without_triples += not subjects
            report.triples_used += len(used)
            report.triples_cut_by_windows += len(aligned) - len(used)
        return feats, report

    # -------------------------------------------------------------- prediction
    def predict(self, texts, batch_size=32):
        """Triples for each text: a list of ``{"text", "triples": [{"subject":
        {"start", "end", "text"}, "predicate", "object": {...}, "score"}]}``,
        offsets into the original text, end exclusive."""
        if isinstance(texts, str):
            raise TypeError("pass a list of texts")
        texts = list(texts)
        pieces = self.tokenizer.pieces(texts)
        jobs = []  # (text index, token start, token end)
        for i, (ids, _) in enumerate(pieces):
            for start, end in self._window_ranges(len(ids)):
                jobs.append((i, start, end))
        found = [dict() for _ in texts]  # per text: (s_start, s_end, p, o_start, o_end) -> score
        encode, objects = self.model.decoders()
        order = sorted(range(len(jobs)), key=lambda j: jobs[j][2] - jobs[j][1])
        th = self.thresholds
        for b in range(0, len(order), batch_size):
            chunk = [jobs[j] for j in order[b : b + batch_size]]
            # Widths rounded up to a multiple of 8 (see padded_length) and the
            # subject rows below to a power of two: few distinct shapes, few traces.
            width = padded_length(max(end - start for _, start, end in chunk) + 2, 8, self.max_length)
            token_ids = np.zeros((len(chunk), width), np.int32)
            mask = np.zeros((len(chunk), width), np.int32)
            candidates = np.zeros((len(chunk), width), bool)  # real tokens: not [CLS]/[SEP]/padding
            for r, (i, start, end) in enumerate(chunk):
                n = end - start
                token_ids[r, : n + 2] = np.concatenate([[self.tokenizer.cls_id], pieces[i][0][start:end], [self.tokenizer.sep_id]])
                mask[r, : n + 2] = 1
                candidates[r, 1 : n + 1] = True
            encoded = encode.predict_on_batch(
                {"token_ids": token_ids, "segment_ids": np.zeros_like(token_ids), "padding_mask": mask}
            )
            sequence = np.asarray(encoded["sequence"])
            sub_start = np.asarray(encoded["subject_start"], np.float32)
            sub_end = np.asarray(encoded["subject_end"], np.float32)
            rows, spans, subject_scores = [], [], []
            for r in range(len(chunk)):
                for s, e, score in decode_spans(sub_start[r], sub_end[r], th["subject_start"], th["subject_end"], candidates[r]):
                    rows.append(r)
                    spans.append((s, e))
                    subject_scores.append(score)
            step = 4 * batch_size
            for c in range(0, len(rows), step):
                c_rows, c_spans = rows[c : c + step], spans[c : c + step]
                padded = max(8, 1 << (len(c_rows) - 1).bit_length())
                seq_rows = np.zeros((padded,) + sequence.shape[1:], sequence.dtype)
                seq_rows[: len(c_rows)] = sequence[c_rows]
                span_rows = np.zeros((padded, 2), np.int32)
                span_rows[: len(c_rows)] = c_spans
                out = objects.predict_on_batch({"sequence": seq_rows, "subject_span": span_rows})
                obj_start = np.asarray(out["object_start"], np.float32)
                obj_end = np.asarray(out["object_end"], np.float32)
                for k, (r, (s, e)) in enumerate(zip(c_rows, c_spans)):
                    i, start, _ = chunk[r]
                    offsets = pieces[i][1]
                    s_score = subject_scores[c + k]
                    for os_, oe, p, o_score in decode_spans(obj_start[k], obj_end[k], th["object_start"],
                                                            th["object_end"], candidates[r]):
                        key = (int(offsets[start + s - 1][0]), int(offsets[start + e - 1][1]), p,
                               int(offsets[start + os_ - 1][0]), int(offsets[start + oe - 1][1]))
                        score = math.sqrt(s_score * o_score)
                        if score > found[i].get(key, -1.0):
                            found[i][key] = score
        results = []
        for text, triples in zip(texts, found):
            items = []
            for (ss, se, p, os_, oe), score in sorted(triples.items()):
                items.append({
                    "subject": {"start": ss, "end": se, "text": text[ss:se]},
                    "predicate": self.predicates[p],
                    "object": {"start": os_, "end": oe, "text": text[os_:oe]},
                    "score": round(score, 4),
                })
            results.append({"text": text, "triples": items})
        return results

    # ------------------------------------------------------------ save / load
    def save(self, directory):
        """Write everything needed to predict into ``directory``: ``model.keras``
        (without optimizer state), ``vocab.txt``, ``extractor.json`` (use
        :func:`kerasbert.training.atomic_write_dir` for an atomic save)."""
        settings = {"predicates": self.predicates, "max_length": self.max_length, "overlap": self.overlap,
                    "thresholds": self.thresholds}
        save_pipeline(directory, self.model, self.tokenizer, settings, EXTRACTOR_CONFIG)

    @classmethod
    def load(cls, directory, thresholds=None):
        """An extractor saved by :meth:`save` (``kerasbert triples train``
        output); ``thresholds`` overrides the saved ones."""
        import apps.triples.model  # noqa: F401  (registers TripleModel for deserialization)

        model, tokenizer, settings = load_pipeline(directory, EXTRACTOR_CONFIG, "triples model")
        return cls(model, tokenizer, settings["predicates"], settings["max_length"],
                   thresholds if thresholds is not None else settings["thresholds"], settings["overlap"])
