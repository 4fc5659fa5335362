"""From raw text to entities, and from labelled examples to training features.

A :class:`Tagger` is a trained :class:`~apps.ner.model.NerModel`, the
tokenizer it was trained with and its tag list. Following one sentence:

1. **tokenize** the raw text (no truncation) -> WordPiece ids and each
   token's character offsets in the original string;
2. **window**: texts longer than ``max_length - 2`` tokens are cut into
   overlapping windows (``[CLS] ... [SEP]`` each); each token's prediction is
   taken from the window where it sits furthest from an edge;
3. **model**: Viterbi tags per token (``tags``) and emission scores;
4. **decode**: BIO tags -> entity spans; an entity's ``start`` is its first
   token's start offset and ``end`` its last token's end offset (exclusive),
   so ``text[start:end]`` is the entity as written. ``score`` is the mean,
   over the entity's tokens, of the softmax of the emission scores at the
   chosen tag (a confidence heuristic, not a CRF marginal).

Training features use the same offsets in reverse (:meth:`Tagger.features`):
every token inside an entity gets ``B-TYPE`` (first token) or ``I-TYPE``, all
other tokens (``[CLS]``, ``[SEP]`` included) ``O`` -- identically for English
words split into WordPieces and for Chinese characters. An entity whose edges
fall inside a token cannot be represented exactly; such entities are counted
and reported (they are tagged on the tokens they overlap).
"""

import dataclasses

import numpy as np

from kerasbert.errors import KerasbertError
from kerasbert.saving import load_pipeline
from kerasbert.saving import save_pipeline
from kerasbert.tokenizer import padded_length
from kerasbert.tokenizer import token_windows as windows

TAGGER_CONFIG = "tagger.json"


def bio_tags(types):
    """``["O", "B-T1", "I-T1", "B-T2", ...]`` for the sorted entity types."""
    tags = ["O"]
    for t in sorted(types):
        tags += [f"B-{t}", f"I-{t}"]
    return tags


@dataclasses.dataclass
class FeatureReport:
    examples: int = 0
    windows: int = 0
    entities: int = 0
    misaligned_entities: int = 0
    entities_split_by_windows: int = 0
    entities_without_tokens: int = 0
    unknown_types: dict = dataclasses.field(default_factory=dict)

    def summary(self):
        lines = [f"{self.examples} examples -> {self.windows} sequences, {self.entities} entities"]
        if self.misaligned_entities:
            lines.append(f"  {self.misaligned_entities} entities start or end inside a WordPiece token (tagged on the tokens they overlap)")
        if self.entities_split_by_windows:
            lines.append(f"  {self.entities_split_by_windows} entities cross a window boundary (long texts; tagged in part)")
        if self.entities_without_tokens:
            lines.append(f"  {self.entities_without_tokens} entities cover no token (only characters the tokenizer drops); skipped")
        for t, n in sorted(self.unknown_types.items()):
            lines.append(f"  {n} entities of type {t!r}, not in the training labels; skipped")
        return "\n".join(lines)


class Tagger:
    """A trained NER tagger: predict entities with character offsets.

    Args:
        model: a :class:`~apps.ner.model.NerModel`.
        tokenizer: the :class:`kerasbert.BertTokenizer` it was trained with.
        tags: tag names, index = tag id (``"O"`` first).
        max_length: tokens per window, ``[CLS]`` and ``[SEP]`` included.
        overlap: tokens shared by consecutive windows of a long text.
    """

    def __init__(self, model, tokenizer, tags, max_length=128, overlap=None):
        self.model = model
        self.tokenizer = tokenizer
        self.tags = list(tags)
        self.tag_ids = {t: i for i, t in enumerate(self.tags)}
        self.max_length = int(max_length)
        inner = self.max_length - 2
        self.overlap = int(overlap if overlap is not None else inner // 4)
        if not 0 <= self.overlap < inner:
            raise KerasbertError(f"overlap must be between 0 and max_length - 3, got {self.overlap}")
        self.types = sorted({t[2:] for t in self.tags if t != "O"})

    # ------------------------------------------------------------------ tokens
    def _window_ranges(self, n):
        inner = self.max_length - 2
        return windows(n, inner, inner - self.overlap)

    # ---------------------------------------------------------------- training
    def features(self, examples, report=None):
        """Training sequences for ``examples`` (see the module docstring).

        Returns ``(features, report)``: features is a dict of lists of int32
        arrays ``token_ids``, ``segment_ids``, ``padding_mask``, ``tags``.
        """
        report = report or FeatureReport()
        feats = {"token_ids": [], "segment_ids": [], "padding_mask": [], "tags": []}
        pieces = self.tokenizer.pieces([e.text for e in examples])
        for example, (ids, offsets) in zip(examples, pieces):
            report.examples += 1
            tags = np.zeros(len(ids), dtype=np.int32)
            starts, ends = offsets[:, 0], offsets[:, 1]
            for entity in example.entities:
                if entity.type not in self.types:
                    report.unknown_types[entity.type] = report.unknown_types.get(entity.type, 0) + 1
                    continue
                report.entities += 1
                inside = np.nonzero((ends > entity.start) & (starts < entity.end))[0]
                if len(inside) == 0:
                    report.entities_without_tokens += 1
                    continue
                if starts[inside[0]] != entity.start or ends[inside[-1]] != entity.end:
                    report.misaligned_entities += 1
                tags[inside] = self.tag_ids[f"I-{entity.type}"]
                tags[inside[0]] = self.tag_ids[f"B-{entity.type}"]
            for start, end in self._window_ranges(len(ids)):
                window_tags = tags[start:end]
                if start > 0 and window_tags[0] != 0 and self.tags[window_tags[0]].startswith("I-"):
                    report.entities_split_by_windows += 1
                    window_tags = window_tags.copy()
                    window_tags[0] = self.tag_ids["B-" + self.tags[window_tags[0]][2:]]
                n = end - start + 2
                feats["token_ids"].append(np.concatenate([[self.tokenizer.cls_id], ids[start:end], [self.tokenizer.sep_id]]).astype(np.int32))
                feats["segment_ids"].append(np.zeros(n, np.int32))
                feats["padding_mask"].append(np.ones(n, np.int32))
                feats["tags"].append(np.concatenate([[0], window_tags, [0]]).astype(np.int32))
                report.windows += 1
        return feats, report

    # -------------------------------------------------------------- prediction
    def predict(self, texts, batch_size=32):
        """Entities for each text: a list of ``{"text", "entities": [{"start",
        "end", "type", "text", "score"}]}``, offsets into the original text."""
        if isinstance(texts, str):
            raise TypeError("pass a list of texts")
        pieces = self.tokenizer.pieces(list(texts))
        # Flatten every window of every text into one list of sequences.
        jobs = []  # (text index, token start, token end, window index in the text)
        for i, (ids, _) in enumerate(pieces):
            for k, (start, end) in enumerate(self._window_ranges(len(ids))):
                jobs.append((i, start, end, k))
        tag_rows = [np.zeros(len(ids), np.int32) for ids, _ in pieces]
        prob_rows = [np.zeros(len(ids), np.float32) for ids, _ in pieces]
        best_key = [np.full(len(ids), np.iinfo(np.int64).min, np.int64) for ids, _ in pieces]
        order = sorted(range(len(jobs)), key=lambda j: jobs[j][2] - jobs[j][1])
        for b in range(0, len(order), batch_size):
            chunk = [jobs[j] for j in order[b : b + batch_size]]
            # Widths rounded up to a multiple of 8 (at most max_length): few distinct
            # shapes, so the model's predict function is traced a few times only.
            width = padded_length(max(end - start for _, start, end, _ in chunk) + 2, 8, self.max_length)
            token_ids = np.zeros((len(chunk), width), np.int32)
            mask = np.zeros((len(chunk), width), np.int32)
            for r, (i, start, end, k) in enumerate(chunk):
                n = end - start
                token_ids[r, : n + 2] = np.concatenate([[self.tokenizer.cls_id], pieces[i][0][start:end], [self.tokenizer.sep_id]])
                mask[r, : n + 2] = 1
            out = self.model.predict_on_batch(
                {"token_ids": token_ids, "segment_ids": np.zeros_like(token_ids), "padding_mask": mask}
            )
            tags = np.asarray(out["tags"])
            potentials = np.asarray(out["potentials"], dtype=np.float32)
            probs = np.exp(potentials - potentials.max(-1, keepdims=True))
            probs /= probs.sum(-1, keepdims=True)
            for r, (i, start, end, k) in enumerate(chunk):
                n = end - start
                positions = np.arange(n)
                # Distance to the nearest edge that cuts the text (the text's own
                # start and end are not cuts); the most central window wins,
                # on a tie the earlier one (the export's graph does the same).
                left = positions if start > 0 else np.full(n, n)
                right = n - 1 - positions if end < len(pieces[i][0]) else np.full(n, n)
                key = np.minimum(left, right).astype(np.int64) * (1 << 32) - k
                take = key > best_key[i][start:end]
                window_tags = tags[r, 1 : n + 1]
                window_probs = probs[r, 1 : n + 1][positions, window_tags]
                tag_rows[i][start:end][take] = window_tags[take]
                prob_rows[i][start:end][take] = window_probs[take]
                best_key[i][start:end][take] = key[take]
        results = []
        for text, (ids, offsets), tags, probs in zip(texts, pieces, tag_rows, prob_rows):
            results.append({"text": text, "entities": self.decode(text, offsets, tags, probs)})
        return results

    def decode(self, text, offsets, tags, probs=None):
        """BIO tag ids over tokens -> entity dicts. An ``I-X`` that does not
        continue an ``X`` entity starts one (the usual lenient repair)."""
        entities = []
        current = None  # [type, first token, last token]

        def close():
            if current is not None:
                t, first, last = current
                start, end = int(offsets[first][0]), int(offsets[last][1])
                score = float(np.mean(probs[first : last + 1])) if probs is not None else 1.0
                entities.append({"start": start, "end": end, "type": t, "text": text[start:end], "score": round(score, 4)})

        for k, tag_id in enumerate(tags):
            tag = self.tags[int(tag_id)]
            if tag == "O":
                close()
                current = None
                continue
            prefix, t = tag[0], tag[2:]
            if prefix == "I" and current is not None and current[0] == t:
                current[2] = k
            else:
                close()
                current = [t, k, k]
        close()
        return entities

    # ------------------------------------------------------------ save / load
    def save(self, directory):
        """Write everything needed to predict into ``directory`` (use
        :func:`kerasbert.training.atomic_write_dir` for an atomic save)."""
        settings = {"tags": self.tags, "max_length": self.max_length, "overlap": self.overlap}
        save_pipeline(directory, self.model, self.tokenizer, settings, TAGGER_CONFIG)

    @classmethod
    def load(cls, directory):
        """A tagger saved by :meth:`save` (``kerasbert ner train`` output)."""
        import apps.ner.model  # noqa: F401  (registers NerModel for deserialization)

        model, tokenizer, settings = load_pipeline(directory, TAGGER_CONFIG, "NER model")
        return cls(model, tokenizer, settings["tags"], settings["max_length"], settings["overlap"])
