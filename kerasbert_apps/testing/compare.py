"""How the contract compares answers: output rows and ``predict`` results (numbers within a
tolerance, everything else exactly), and the ``--input ids`` export's answers in the terms of
``predict``'s, for an NER head (its outputs decoded by the head's own decoding in place of the
model) and a triples head (its token positions read as character offsets)."""

import numpy as np

from kerasbert_apps.base.pipeline import ENCODER_INPUTS


def same_rows(ours, theirs, atol, where="", texts=None):
    """Output rows (output name -> list, one dict per text) equal: numbers within ``atol``,
    everything else exactly."""
    assert len(ours) == len(theirs), where
    for i, (a, b) in enumerate(zip(ours, theirs)):
        assert a.keys() == b.keys(), where
        for key in a:
            if a[key] and isinstance(a[key][0], float):
                np.testing.assert_allclose(a[key], b[key], atol=atol, err_msg=f"{where} text {i} {key}")
            else:
                assert a[key] == b[key], f"{where} text {i} {key}: {(texts[i][:60] if texts else '')!r}"


def same_answers(ours, theirs, atol, where=""):
    """``predict`` results (nests of dicts and lists) equal: floats within ``atol``
    (``predict`` rounds scores to 4 decimals), everything else exactly."""
    if isinstance(theirs, dict):
        assert isinstance(ours, dict) and ours.keys() == theirs.keys(), f"{where}: {ours!r} != {theirs!r}"
        for key in theirs:
            same_answers(ours[key], theirs[key], atol, f"{where}.{key}")
    elif isinstance(theirs, list):
        assert isinstance(ours, list) and len(ours) == len(theirs), f"{where}: {ours!r} != {theirs!r}"
        for i, (a, b) in enumerate(zip(ours, theirs)):
            same_answers(a, b, atol, f"{where}[{i}]")
    elif isinstance(theirs, float):
        assert isinstance(ours, (int, float)) and abs(ours - theirs) <= atol, f"{where}: {ours!r} != {theirs!r}"
    else:
        assert ours == theirs, f"{where}: {ours!r} != {theirs!r}"


def predict_keys(rows, results):
    """The command's output rows (``kerasbert TASK predict``'s JSON lines) with only the keys of
    ``predict``'s ``results`` (the command may add where each came from, e.g. its input line)."""
    return [{k: v for k, v in row.items() if k in result} for row, result in zip(rows, results)] + rows[len(results):]


def without_scores(result):
    """A ``predict`` result with its entities' scores left out."""
    return {**result, "entities": [{k: v for k, v in e.items() if k != "score"} for e in result["entities"]]}


def model_inputs(model, windows):
    """The model's inputs for these windows: the encoder's from the windows,
    any other (CasRel's training input ``subject_span``) zeros."""
    rows = len(windows["token_ids"])
    return {name: windows[name] if name in windows else np.zeros([rows, *tensor.shape[1:]], tensor.dtype)
            for name, tensor in model.input.items()}


class ExportRunner:
    """A runner (:mod:`kerasbert_apps.base.runners`) that runs an ``--input ids`` export's
    signature on the window rows instead of the model it is given: the head's own decoding
    (``Pipeline.infer``) then reads the export's outputs."""

    in_graph = False
    jit_compile = False
    compiled_heads = False

    def __init__(self, signature):
        self.signature = signature
        self.calls = 0

    def rows(self, model, inputs, one_group=None):
        import tensorflow as tf

        self.calls += 1
        return self.signature(**{k: tf.cast(inputs[k], tf.int32) for k in ENCODER_INPUTS})

    def call(self, model, inputs):
        raise AssertionError("the head runs a part of its model on its own: its ids export gives decoded rows")


def ner_ids_rows(pipeline, signature, texts):
    """The output rows of ``texts`` (as ``output_rows`` gives them) with the ids export's
    ``signature`` in place of the model: the pipeline's windows, the export, the head's decoding."""
    import tensorflow as tf

    from kerasbert.serving.rows import unpad

    batch = tf.constant(list(texts), tf.string)
    runner = ExportRunner(signature)
    rows = list(unpad(pipeline.infer(batch, pipeline.windows_function(batch), runner)))
    assert runner.calls > 0, "the decoding never ran the export"
    return rows


#: What a triples head's ids export and its output rows both give, per triple.
TRIPLE_FIELDS = ("subject_start", "subject_end", "predicate", "object_start", "object_end", "score")


def triples_ids_rows(pipeline, signature, texts):
    """The output rows of ``texts`` from the ids export's ``signature``, as a client of it
    reads them: the pipeline's tokenizer (one window per text: ``texts`` must fit), the export,
    its token positions (first token, last + 1) turned into character offsets by the
    tokenizer's offsets. Fields :data:`TRIPLE_FIELDS`."""
    import tensorflow as tf

    batch = pipeline.tokenizer(list(texts), max_length=pipeline.max_length)
    assert not batch.truncated.any(), "a text does not fit in one window"
    out = signature(**{k: tf.constant(v) for k, v in batch.inputs.items()})
    out = {k: v.numpy() for k, v in out.items()}
    rows = []
    for i in range(len(texts)):
        n = int(out["count"][i])
        row = {key: out[key][i, :n].tolist() for key in TRIPLE_FIELDS}
        row["predicate"] = [p.decode("utf-8") for p in row["predicate"]]
        for side in ("subject", "object"):
            starts, ends = row[f"{side}_start"], row[f"{side}_end"]
            row[f"{side}_start"] = [int(batch.offsets[i, s, 0]) for s in starts]
            row[f"{side}_end"] = [int(batch.offsets[i, e - 1, 1]) for e in ends]
        rows.append(row)
    return rows
