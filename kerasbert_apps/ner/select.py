"""Active learning: choose which unlabelled texts to label next (``kerasbert ner select``).

:func:`select_texts` reads a pool of unlabelled texts (plain lines or JSON
lines with a ``"text"``, :func:`kerasbert_apps.base.cli.read_texts`) as a stream, scores
each text by how unsure the trained model is about it, and returns the
``budget`` most informative ones with the model's entities, which
:func:`write_selection` writes as Label Studio tasks (the entities as
pre-annotations) or doccano JSON lines -- the records of ``ner predict
--output-format`` (:func:`kerasbert_apps.ner.readers.prediction_record`), so the kit's
readers read them back.

Measures (``strategy``), computed from what the serving path computes for
``predict`` -- the same windows, model outputs and entity scores -- with the
model's score temperature ``T`` (1 unless calibrated) applied as for the
entity scores:

* ``least-confident``: ``1 - P(best labelling)`` of the text, as the model's
  head measures it: its registration declares what ``P(best labelling)`` is
  for its outputs (``selection_measure``,
  :class:`kerasbert_apps.base.heads.Head`; printed in the summary) and its
  pipeline computes it, per window row, from the head's outputs on the
  encoder's output at the score temperature (the hooks below). Each head's
  measure lives in its folder (``kerasbert_apps/ner/heads/<name>/selection.py``)
  or in its own package.

  A text longer than a window is cut into overlapping windows; its
  ``P(best)`` is the product over its windows (overlapping tokens count in
  each). Candidates are ranked by ``-log P(best)`` (the same order as
  ``1 - P(best)``, without its rounding to 1 for long texts).
* ``entropy``: the sum over the text's predicted entities of the binary
  entropy (in nats) of each entity's calibrated score ``p``:
  ``-p log p - (1 - p) log(1 - p)`` (:func:`entity_entropy`). A text with no
  predicted entity scores 0: this measure looks for doubtful entities, not
  for missed ones.
* ``random``: a uniform random sample (the model runs only on the kept
  candidates, for their pre-annotations and the diversity step).

**Diversity.** The best ``budget x pool_factor`` candidates are kept while the
pool streams by (a bounded heap). Then, best first, a candidate is skipped
when its encoder mean vector -- the mean of the encoder's last
``sequence_output`` over the text's WordPiece tokens, ``[CLS]`` and
``[SEP]`` excluded (a text of several windows: over all its windows' tokens)
-- has a cosine similarity above ``diversity`` with a text already chosen;
``diversity=1`` turns the step off (and only ``budget`` candidates are
kept). When the candidates run out before
``budget`` texts are chosen, fewer are returned (the summary says so).

**Streaming.** The pool is read ``chunk`` lines at a time; texts are not
kept, only the candidates of the heap (at most ``budget x pool_factor``
texts), a 64-bit hash of each distinct text (8 bytes in a sorted array,
:class:`~kerasbert_apps.ner.seen_texts.SeenTexts`: repeated texts are skipped and counted) and each scored
text's score (8 bytes, for the summary's quantiles). Empty lines and
repeats of an earlier text are skipped and counted. Ties are broken by a
random number per text drawn from ``seed``, so a run is reproducible.
"""

import dataclasses
import heapq
import json

import numpy as np

from kerasbert.errors import InputDataError
from kerasbert.errors import KerasbertError
from kerasbert_apps.ner.seen_texts import SeenTexts

#: ``--strategy`` choices.
STRATEGIES = ("least-confident", "entropy", "random")
#: ``--format`` choices: name -> whether the file is ONE JSON array.
SELECT_FORMATS = {"label-studio": True, "doccano": False, "jsonl": False}
#: What each strategy's score is, for the summary.
MEASURES = {
    "least-confident": "1 - P(best labelling)",
    "entropy": "sum of entity-score entropies (nats)",
    "random": "uniform random",
}
#: Quantiles printed in the summary.
QUANTILES = (0.0, 0.25, 0.5, 0.75, 0.9, 1.0)


# =============================================================================
# What every head's measure shares (numpy)
# =============================================================================


def entity_entropy(scores):
    """Sum of the binary entropies (nats) of entity scores ``scores``."""
    p = np.clip(np.asarray(scores, np.float64), 1e-12, 1 - 1e-12)
    return float(np.sum(-p * np.log(p) - (1 - p) * np.log1p(-p)))


def diverse_order(vectors, budget, threshold):
    """Indices of at most ``budget`` rows of ``vectors`` [n, dim], taken in
    order (best first), skipping a row whose cosine similarity with a row
    already taken is above ``threshold``; returns ``(taken, dropped)``."""
    vectors = np.asarray(vectors, np.float64)
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    unit = vectors / np.where(norms > 0, norms, 1.0)
    taken, dropped = [], 0
    for i in range(len(unit)):
        if len(taken) >= budget:
            break
        if taken and threshold < 1.0 and float(np.max(unit[taken] @ unit[i])) > threshold:
            dropped += 1
            continue
        taken.append(i)
    return taken, dropped


# =============================================================================
# The model side: one TensorFlow path (the serving path's windows and decoding)
# =============================================================================


# What a head provides for ``select`` (the measure is the head's, so that
# this module names no head). Its registration declares
# ``selection_measure``, a short description of what ``P(best labelling)``
# is for its outputs (printed in the summary; the pipeline's
# ``selection_measure`` reads it), and its pipeline computes it through three
# hooks: ``selection_outputs(head_input, padding_mask, fused)`` (the head's
# outputs on the encoder's output, in ``keras.ops``; a span head gives
# ``selection_logits`` instead), ``selection_decode(texts, windows, outputs)``
# (the entities, as ``infer`` decodes them, and the outputs the measure
# needs, named unlike the entity outputs: ``start``, ``end``, ...) and
# ``selection_log_best(outputs, lengths)`` (numpy: log P(best) per window
# row). A head that declares no measure is refused with a one-line error.


def selection_measure(tagger):
    """The measure ``tagger``'s head declares (its registration's
    ``selection_measure``, as the pipeline's ``selection_measure`` reads
    it), or a one-line :class:`~kerasbert.errors.KerasbertError` naming the
    registered heads that declare one."""
    measure = getattr(tagger, "selection_measure", None)
    if isinstance(measure, str) and measure:
        return measure
    from kerasbert_apps.base.heads import heads

    able = [head.name for head in heads("ner") if head.selection_measure]
    raise KerasbertError(f"ner select does not support the {tagger.head_name or type(tagger).__name__} head yet "
                         f"(it needs a selection measure of its outputs); heads it supports: {', '.join(able)}")


class _Scorer:
    """The NER model run once on rows of encoder inputs, with its encoder's
    ``sequence_output`` kept: ``sequence`` [rows, len, hidden] and the
    outputs of the head's :meth:`selection_outputs` (span logits padded on
    their end axis to the window length, as the model's own outputs are)."""

    def __init__(self, tagger, fused=False):
        self.model = tagger.model
        self.tagger = tagger
        self.length = tagger.max_length
        self.fused = fused

    def _outputs(self, rows):
        from keras import ops

        model = self.model
        encoded = model.encoder(rows, training=False)
        out = {"sequence": ops.cast(encoded["sequence_output"], "float32")}
        out.update(self.tagger.selection_outputs(model.encoded(encoded), rows["padding_mask"], fused=self.fused))
        return out

    def __call__(self, rows):  # in a TensorFlow graph (GraphRunner)
        import tensorflow as tf

        out = self._outputs(rows)
        for key, value in out.items():
            if len(value.shape) == 4:  # [rows, len, len, classes]: the end axis padded to the window length
                pad = tf.maximum(self.length - tf.shape(value)[2], 0)
                out[key] = tf.pad(value, [[0, 0], [0, 0], [0, pad], [0, 0]])[:, :, : self.length]
        return out

    def predict_on_batch(self, rows):  # on the host, other backends (HostRunner)
        import keras

        out = {k: np.asarray(keras.ops.convert_to_numpy(v)) for k, v in self._outputs(rows).items()}
        for key, value in out.items():
            if value.ndim == 4:
                pad = max(self.length - value.shape[2], 0)
                out[key] = np.pad(value, [(0, 0), (0, 0), (0, pad), (0, 0)])[:, :, : self.length]
        return out


_ENTITY_KEYS = ("start", "end", "type", "mention", "score", "count")


def _infer(tagger, texts, windows, run):
    """The serving path's entities of ``texts`` plus, per window row, what
    the measures need: the head's outputs, the row's length, its text, and
    the sum and count of its text tokens' encoder vectors."""
    import tensorflow as tf

    from kerasbert.serving.rows import nonempty_encoder_inputs

    n_rows = tf.shape(windows["token_ids"])[0]
    width = tf.shape(windows["token_ids"])[1]
    inputs = nonempty_encoder_inputs(windows, tagger.tokenizer.cls_id, tagger.tokenizer.sep_id)
    # The fused BiLSTM kernel is for plain graphs; XLA compiles Keras's LSTM loop itself.
    out = run.rows(_Scorer(tagger, fused=run.in_graph and not run.jit_compile), inputs)
    lengths = tf.reduce_sum(tf.cast(windows["padding_mask"] > 0, tf.int32), axis=1)
    positions = tf.range(width)[None, :]
    text_tokens = tf.cast((positions >= 1) & (positions <= lengths[:, None] - 2), tf.float32)
    sequence = tf.cast(out["sequence"], tf.float32)[:n_rows, :width]
    rows = {
        "row_text": windows["text_index"], "row_length": lengths,
        "row_vector": tf.reduce_sum(sequence * text_tokens[:, :, None], axis=1),
        "row_tokens": tf.reduce_sum(text_tokens, axis=1),
    }
    entities, head = tagger.selection_decode(texts, windows, {k: v for k, v in out.items() if k != "sequence"})
    taken = sorted(set(head) & (set(entities) | set(rows)))
    if taken:
        raise KerasbertError(f"the {tagger.head_name} head's selection outputs {', '.join(taken)} are named like "
                             f"the entity outputs or the rows' ({', '.join(sorted(set(entities) | set(rows)))}); "
                             "name them after the head")
    rows.update(head)
    return {**entities, **rows}


def analyse(tagger, texts, batch_size=32):
    """For each of ``texts``: ``(result, log_best, entropy, vector)`` --
    ``result`` the dict ``predict`` gives, ``log_best`` log P(best
    labelling), ``entropy`` the sum of its entities' score entropies,
    ``vector`` its encoder mean vector (module docstring)."""
    from kerasbert.serving.rows import unpad

    texts = list(texts)
    selection_measure(tagger)
    traced = tagger._text_function("select", lambda t: _infer(tagger, t, tagger.windows_function(t), _graph_runner()))
    found = [None] * len(texts)
    for chunk, out in tagger.in_batches(texts, batch_size, lambda t, w, run: _infer(tagger, t, w, run), traced):
        out = {k: np.asarray(v.numpy() if hasattr(v, "numpy") else v) for k, v in out.items()}
        lengths = out["row_length"]
        row_best = tagger.selection_log_best(out, lengths)
        n = len(chunk)
        text_of = out["row_text"].astype(np.int64)
        log_best = np.bincount(text_of, weights=row_best, minlength=n)
        tokens = np.bincount(text_of, weights=out["row_tokens"], minlength=n)
        vectors = np.zeros((n, out["row_vector"].shape[1]))
        np.add.at(vectors, text_of, out["row_vector"])
        vectors /= np.maximum(tokens, 1.0)[:, None]
        for k, (i, row) in enumerate(zip(chunk, unpad({key: out[key] for key in _ENTITY_KEYS}))):
            result = tagger.result(texts[i], row)
            found[i] = (result, float(log_best[k]), entity_entropy(row["score"]), vectors[k])
    return found


def _graph_runner():
    from kerasbert_apps.base.pipeline import GraphRunner

    return GraphRunner()


# =============================================================================
# The stream and the selection
# =============================================================================


@dataclasses.dataclass
class SelectionSummary:
    """What :func:`select_texts` saw and did (printed by :meth:`lines`)."""

    source: str = "<pool>"
    strategy: str = "least-confident"
    budget: int = 0
    lines: int = 0
    empty: int = 0
    repeated: int = 0
    scored: int = 0
    candidates: int = 0
    max_candidates_held: int = 0
    dropped_by_diversity: int = 0
    diversity: float = 0.95
    selected: int = 0
    quantiles: dict = dataclasses.field(default_factory=dict)
    #: least-confident: the quantiles of -log P(best labelling) (nats), which
    #: tell apart texts whose 1 - P(best) all print as 1.
    log_quantiles: dict = dataclasses.field(default_factory=dict)
    #: least-confident: what P(best labelling) is for the model's head (the
    #: head's ``selection_measure``).
    measure: str = ""

    def text(self):
        out = [f"pool: {self.source}",
               f"  {self.lines} lines read: {self.empty} empty, {self.repeated} repeat an earlier text (skipped), "
               f"{self.scored} scored"]
        if self.quantiles:
            q = ", ".join(f"{name} {value:.4g}" for name, value in self.quantiles.items())
            out.append(f"  {self.strategy} scores ({MEASURES[self.strategy]}): {q}")
        if self.log_quantiles:
            q = ", ".join(f"{name} {value:.4g}" for name, value in self.log_quantiles.items())
            out.append(f"  -log P(best labelling) (nats): {q}")
        if self.measure:
            out.append(f"  P(best labelling): {self.measure}")
        out.append(f"  {self.candidates} candidates kept (the best, at most budget x pool factor)")
        if self.diversity < 1.0:
            out.append(f"  {self.dropped_by_diversity} dropped by diversity (encoder mean vector cosine > "
                       f"{self.diversity:g} with a text already chosen)")
        out.append(f"  {self.selected} selected (budget {self.budget})")
        if self.selected < self.budget:
            out.append("  note: fewer than the budget: " + (
                "the pool holds fewer texts" if self.candidates < self.budget else
                "the candidates ran out (raise --pool-factor or --diversity)"))
        return "\n".join(out)


@dataclasses.dataclass
class Selection:
    """The chosen texts, best first: ``chosen`` holds dicts ``{"line",
    "text", "entities", "informativeness", "log_best", "entropy"}``
    (``entities`` as ``predict`` gives them); ``summary`` a
    :class:`SelectionSummary`."""

    chosen: list
    summary: SelectionSummary


def _numbered(texts):
    for number, item in enumerate(texts, 1):
        yield item if isinstance(item, tuple) else (number, item)


def stream_candidates(texts, keep, score_chunk, seed=0, chunk=1024, summary=None):
    """The ``keep`` best of ``texts`` (strings, or ``(line, text)`` pairs) by
    ``score_chunk(list of texts) -> keys`` (higher = more informative; None:
    random keys), read ``chunk`` at a time. Returns ``(candidates, scores,
    summary)``: candidates ``(key, tie, line, text)`` best first, the
    ``scores`` of every scored text (float64 array) and the counts in
    ``summary`` (a :class:`SelectionSummary`). At most ``keep`` candidates
    are held at any time (``summary.max_candidates_held``). Each text read
    moves the open progress bar (:mod:`kerasbert.progress`): a skipped one
    when it is read, a scored one as the model runs on it."""
    from array import array

    from kerasbert.progress import advance

    rng = np.random.default_rng(seed)
    summary = summary or SelectionSummary()
    seen = SeenTexts()
    heap = []
    scores = array("d")
    pending = []

    def flush():
        if not pending:
            return
        ties = rng.random(len(pending))
        keys = rng.random(len(pending)) if score_chunk is None else np.asarray(score_chunk([t for _, t in pending]))
        if score_chunk is None:
            advance(len(pending))  # no model runs on them (scored texts move the bar as it runs)
        scores.extend(np.asarray(keys, np.float64).tolist())
        for (line, text), key, tie in zip(pending, keys, ties):
            entry = (float(key), float(tie), -line, text)
            if len(heap) < keep:
                heapq.heappush(heap, entry)
            elif entry > heap[0]:
                heapq.heapreplace(heap, entry)
        summary.max_candidates_held = max(summary.max_candidates_held, len(heap))
        summary.scored += len(pending)
        pending.clear()

    for line, text in _numbered(texts):
        summary.lines += 1
        if not text.strip():
            summary.empty += 1
            advance()
            continue
        if not seen.add(text):
            summary.repeated += 1
            advance()
            continue
        pending.append((line, text))
        if len(pending) >= chunk:
            flush()
    flush()
    candidates = [(key, tie, -line, text) for key, tie, line, text in sorted(heap, reverse=True)]
    summary.candidates = len(candidates)
    return candidates, np.frombuffer(scores, np.float64) if len(scores) else np.zeros(0), summary


def check_options(budget, strategy="least-confident", diversity=0.95, pool_factor=4, format="label-studio"):
    """Raise :class:`~kerasbert.errors.KerasbertError` for an option out of range."""
    if strategy not in STRATEGIES:
        raise KerasbertError(f"unknown strategy {strategy!r}: use one of {', '.join(STRATEGIES)}")
    if int(budget) < 1:
        raise KerasbertError(f"--budget must be at least 1, got {budget}")
    if not 0.0 < float(diversity) <= 1.0:
        raise KerasbertError(f"--diversity is a cosine similarity threshold in (0, 1] (1: off), got {diversity}")
    if int(pool_factor) < 1:
        raise KerasbertError(f"--pool-factor must be at least 1, got {pool_factor}")
    if format not in SELECT_FORMATS:
        raise KerasbertError(f"unknown format {format!r}: use one of {', '.join(SELECT_FORMATS)}")


def select_texts(tagger, texts, budget, strategy="least-confident", seed=0, diversity=0.95, pool_factor=4,
                 batch_size=32, chunk=1024, source="<pool>", progress=False):
    """Choose ``budget`` texts of ``texts`` (an iterable of strings or of
    ``(line number, text)`` pairs, consumed once) to label next, by
    ``strategy`` (one of :data:`STRATEGIES`) with the diversity step at
    cosine ``diversity`` (module docstring). ``tagger``: a loaded NER
    pipeline of a head that declares a selection measure
    (:func:`selection_measure`). ``progress``: the texts done (the pool,
    then the candidates), their rate and, when ``texts`` has a length, the
    time left (True, False, or ``"auto"``: on a terminal only;
    :func:`kerasbert.progress.progress`). Returns a :class:`Selection`."""
    from kerasbert.progress import progress as progress_bar

    total = len(texts) if hasattr(texts, "__len__") else None
    with progress_bar(total, "select", show=progress):
        return _select(tagger, texts, budget, strategy, seed, diversity, pool_factor, batch_size, chunk, source)


def _select(tagger, texts, budget, strategy, seed, diversity, pool_factor, batch_size, chunk, source):
    """:func:`select_texts`'s work, inside its progress bar."""
    from kerasbert.progress import expect

    check_options(budget, strategy, diversity, pool_factor)
    # a head without a measure is refused before the pool is read
    measure = selection_measure(tagger) if strategy != "random" else ""
    budget = int(budget)
    summary = SelectionSummary(source=str(source), strategy=strategy, budget=budget, diversity=float(diversity),
                               measure=f"{measure} (the {tagger.head_name} head)" if strategy == "least-confident"
                               else "")

    def score_chunk(chunk_texts):
        found = analyse(tagger, chunk_texts, batch_size)
        if strategy == "least-confident":
            return [-log_best for _, log_best, _, _ in found]
        return [entropy for _, _, entropy, _ in found]

    keep = budget * int(pool_factor) if diversity < 1.0 else budget
    candidates, scores, summary = stream_candidates(
        texts, keep, None if strategy == "random" else score_chunk, seed, chunk, summary)
    if len(scores) and strategy != "random":
        shown = -np.expm1(-scores) if strategy == "least-confident" else scores  # 1 - P(best)
        name = lambda q: "min" if q == 0 else "max" if q == 1 else f"{int(q * 100)}%"  # noqa: E731
        summary.quantiles = {name(q): float(np.quantile(shown, q)) for q in QUANTILES}
        if strategy == "least-confident":
            summary.log_quantiles = {name(q): float(np.quantile(scores, q)) for q in QUANTILES}
    expect(len(candidates))  # the candidates are run once more (their entities and vectors)
    found = analyse(tagger, [text for *_, text in candidates], batch_size) if candidates else []
    taken, summary.dropped_by_diversity = diverse_order(
        np.array([f[3] for f in found]) if found else np.zeros((0, 1)), budget, float(diversity))
    chosen = []
    for i in taken:
        key, _, line, text = candidates[i]
        result, log_best, entropy, _ = found[i]
        informativeness = {"least-confident": float(-np.expm1(log_best)), "entropy": entropy,
                           "random": float(key)}[strategy]
        chosen.append({"line": line, "text": text, "entities": result["entities"],
                       "informativeness": round(informativeness, 6), "log_best": round(log_best, 6),
                       "entropy": round(entropy, 6)})
    summary.selected = len(chosen)
    return Selection(chosen, summary)


def selection_record(item, format="label-studio"):
    """One chosen text as a record of ``format`` (:data:`SELECT_FORMATS`):
    Label Studio task or doccano line as ``ner predict --output-format``
    writes them (:func:`kerasbert_apps.ner.readers.prediction_record`); ``jsonl``: the
    prediction with ``line``, ``informativeness``, ``log_best`` and
    ``entropy``."""
    from kerasbert_apps.ner.readers import prediction_record

    if format == "jsonl":
        return dict(item)
    if format not in SELECT_FORMATS:
        raise KerasbertError(f"unknown format {format!r}: use one of {', '.join(SELECT_FORMATS)}")
    return prediction_record({"text": item["text"], "entities": item["entities"]}, format)


def write_selection(selection, path, format="label-studio"):
    """Write the chosen texts to ``path`` atomically: one JSON array of
    Label Studio tasks, or JSON lines (doccano, jsonl)."""
    from kerasbert.files.atomic import atomic_write_text

    records = [json.dumps(selection_record(item, format), ensure_ascii=False) for item in selection.chosen]
    if SELECT_FORMATS[format]:
        text = "[\n" + ",\n".join(records) + "\n]\n" if records else "[]\n"
    else:
        text = "".join(r + "\n" for r in records)
    atomic_write_text(path, text)
    return path


def run_select(model, pool, budget, output, strategy="least-confident", format="label-studio", seed=0,
               diversity=0.95, pool_factor=4, batch_size=32, progress=False):
    """``kerasbert ner select``: load ``model``, stream ``pool`` (a file;
    bad lines raise :class:`~kerasbert.errors.InputDataError` naming file
    and line), write the selection to ``output`` and print the summary.
    ``progress``: the lines done, their rate and the time left on standard
    error (:func:`kerasbert.progress.progress`'s ``show``)."""
    from pathlib import Path

    import sys

    from kerasbert.progress import progress as progress_bar
    from kerasbert.progress import shown
    from kerasbert_apps.base.cli import count_lines
    from kerasbert_apps.base.cli import read_texts
    from kerasbert_apps.base.cli import repaired_note
    from kerasbert_apps.ner.train import NER

    check_options(budget, strategy, diversity, pool_factor, format)
    if pool != "-" and not Path(pool).is_file():
        raise InputDataError(pool, None, "no such file" if not Path(pool).exists() else "not a file")
    tagger = NER.load(model, verbose=True)
    repaired = []
    with progress_bar(count_lines(pool) if shown(progress) else None, "select", show=progress):
        selection = select_texts(tagger, read_texts(pool, repaired), budget, strategy=strategy, seed=seed,
                                 diversity=diversity, pool_factor=pool_factor, batch_size=batch_size, source=pool)
    if repaired:
        print(repaired_note(pool, repaired), file=sys.stderr)
    write_selection(selection, output, format)
    print(selection.summary.text())
    what = {"label-studio": "Label Studio tasks, the model's entities as pre-annotations",
            "doccano": "doccano JSON lines, the model's entities as labels",
            "jsonl": "kerasbert predictions with their informativeness"}[format]
    print(f"written: {output} ({what})")
    return selection


__all__ = ["STRATEGIES", "Selection", "SelectionSummary", "analyse", "check_options", "diverse_order", "entity_entropy",
           "run_select", "SeenTexts", "select_texts", "selection_measure", "selection_record", "stream_candidates",
           "write_selection"]


# =============================================================================
# The command
# =============================================================================


def add_command(commands):
    """Add ``select`` to the ``kerasbert ner`` subparsers ``commands``."""
    from kerasbert_apps.base.cli import MODEL_HELP
    from kerasbert_apps.base.cli import quiet_option

    parser = commands.add_parser(
        "select", help="choose which unlabelled texts to label next (active learning)",
        description="Rank a pool of unlabelled texts by how unsure the model is about them and write the BUDGET "
        "most informative ones, with the model's entities as pre-annotations, for Label Studio or doccano. "
        "least-confident: 1 - the probability of the model's best labelling of the text, as the model's head "
        "measures it (printed with the summary; kerasbert heads lists the heads); entropy: the sum "
        "of the binary entropies of the predicted entities' scores; random: a uniform sample. A diversity step "
        "skips a text whose encoder mean vector is too close (cosine) to one already chosen. The pool is read as a "
        "stream; only the best BUDGET x POOL_FACTOR candidates are kept. See the docs page 'Label less'.",
    )
    parser.add_argument("--model", required=True, help=MODEL_HELP)
    parser.add_argument("--pool", required=True,
                        help="unlabelled texts: plain-text lines, or JSON lines with a \"text\" field; - for standard input")
    parser.add_argument("--budget", type=int, required=True, help="how many texts to choose")
    parser.add_argument("--output", required=True, help="file to write the chosen texts to")
    parser.add_argument("--strategy", choices=STRATEGIES, default="least-confident",
                        help="informativeness measure (default: %(default)s)")
    parser.add_argument("--format", choices=list(SELECT_FORMATS), default="label-studio",
                        help="label-studio: one JSON array of tasks, the entities as predictions (pre-annotations); "
                        "doccano: JSON lines of doccano's sequence-labelling import; jsonl: the predictions with "
                        "their line and informativeness (default: %(default)s)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the tie-breaks and of random (default: %(default)s)")
    parser.add_argument("--diversity", type=float, default=0.95,
                        help="skip a text whose encoder mean vector has a cosine similarity above this with a text "
                        "already chosen; 1 turns it off (default: %(default)s)")
    parser.add_argument("--pool-factor", type=int, default=4,
                        help="candidates kept while the pool streams by: BUDGET x this (default: %(default)s)")
    parser.add_argument("--batch-size", type=int, default=32, help="texts per batch (default: %(default)s)")
    quiet_option(parser)
    parser.set_defaults(func=_command)
    return parser


def _command(args):
    from kerasbert_apps.base.cli import show_progress

    run_select(args.model, args.pool, args.budget, args.output, strategy=args.strategy, format=args.format,
               seed=args.seed, diversity=args.diversity, pool_factor=args.pool_factor, batch_size=args.batch_size,
               progress=show_progress(args))
    return 0
