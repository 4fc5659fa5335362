"""A pipeline written as an ONNX export (:func:`export_onnx`: ``export --format onnx``), for the ONNX Runtime engine (:mod:`kerasbert_apps.base.onnx_engine`).

The export holds the pipeline's serving graph (:meth:`~kerasbert_apps.base.pipeline.Pipeline.infer`)
minus its two string steps (:mod:`kerasbert.serving.onnx`), converted by
tf2onnx, its encoder fused (:mod:`kerasbert.serving.onnx_fusion`), checked in
ONNX Runtime against the TensorFlow graph, and quantized on request
(:mod:`kerasbert.serving.onnx_quantize`). Writing one needs TensorFlow;
running one does not.
"""

from pathlib import Path


def export_onnx(pipeline, base, version=None, check_texts=None, precision="float32"):
    """Write ``pipeline`` as an ONNX export in ``base/<version>`` (``version``
    None: the next free integer; never overwritten; atomic), checked in
    ONNX Runtime against the TensorFlow graph it was converted from on
    ``check_texts`` (default: the pipeline's warmup texts, a text longer
    than one window, and an empty batch). ``precision`` ``"int8"``: the
    checked graph quantized (:func:`kerasbert.serving.onnx_quantize.quantize_int8`),
    its agreement with float32 on the check inputs in the description
    (``"int8"``). Returns the version folder. A
    head that has no ONNX export (its pipeline's ``no_onnx_export``), an op
    that does not convert, a model ONNX Runtime refuses or one that answers
    otherwise is a one-line :class:`~kerasbert.errors.KerasbertError`, and
    nothing is written."""
    import tensorflow as tf

    import kerasbert
    from kerasbert.checkpoints.saving import VOCAB_FILE
    from kerasbert.checkpoints.saving import write_settings
    from kerasbert.errors import KerasbertError
    from kerasbert.serving.onnx import check
    from kerasbert.serving.onnx import convert
    from kerasbert.serving.onnx import pieces_of
    from kerasbert.serving.onnx import session_of
    from kerasbert.serving.onnx import write_export
    from kerasbert.serving.onnx_fusion import fuse_encoder
    from kerasbert.serving.onnx_quantize import ONNX_PRECISIONS
    from kerasbert.serving.onnx_quantize import agreement
    from kerasbert.serving.onnx_quantize import quantize_int8
    from kerasbert.serving.saved_model import require_tensorflow_backend
    from kerasbert.tokenizers.graph_tokenizer import windows_of_tokens
    from kerasbert_apps.base.runners import ConvertibleRunner
    from kerasbert_apps.base.runners import keras_dtype

    head = pipeline.settings().get("head") or pipeline.head_name or type(pipeline).__name__
    if precision not in ONNX_PRECISIONS:
        raise KerasbertError(f"an ONNX export's precision is one of {', '.join(ONNX_PRECISIONS)}, got {precision!r}")
    if pipeline.no_onnx_export:
        raise KerasbertError(f"the {head} head has no ONNX export: {pipeline.no_onnx_export}")
    require_tensorflow_backend()
    if version is not None and (Path(base) / str(int(version))).exists():  # before the conversion's minutes
        raise KerasbertError(f"{Path(base) / str(int(version))} already exists; versions are never overwritten "
                             "(pick another --version)")
    if pipeline.lora:  # plain kernels with the adapters merged in
        pipeline = pipeline.merged()
    if keras_dtype(pipeline.model.encoder) != "float32":
        raise KerasbertError(f"the ONNX export is float32 only (this model's encoder is "
                             f"{keras_dtype(pipeline.model.encoder)}): export without --precision")
    tokenizer = pipeline.tokenizer
    special = (tokenizer.pad_id, tokenizer.cls_id, tokenizer.sep_id)

    @tf.function(input_signature=[tf.TensorSpec([None, 3], tf.int32, name="pieces"),
                                  tf.TensorSpec([None], tf.int32, name="counts")], autograph=False)
    def numbers(pieces, counts):
        windows = windows_of_tokens(pieces, counts, special, pipeline.max_length, pipeline.overlap)
        return pipeline.infer(None, windows, ConvertibleRunner())

    texts = list(check_texts) if check_texts is not None else default_check_texts(pipeline)
    feeds = [dict(zip(("pieces", "counts"), pieces_of(tokenizer, batch))) for batch in ([t] for t in texts)]
    feeds += [dict(zip(("pieces", "counts"), pieces_of(tokenizer, batch))) for batch in (texts, [])]
    model = fuse_encoder(convert(numbers))  # checked as it is published: fused
    checked = check(model, numbers, feeds)
    more = {"precision": precision}
    if precision == "int8":
        model = quantize_int8(model)
        more["int8"] = agreement(checked, session_of(model), feeds)
    names, spans = pipeline.string_outputs()
    description = {"kerasbert": kerasbert.__version__, "task": pipeline.task, "head": head,
                   pipeline.labels_key: pipeline.labels,
                   "names": {k: [name, list(labels)] for k, (name, labels) in names.items()},
                   "spans": {k: list(v) for k, v in spans.items()},
                   "max_length": pipeline.max_length, "overlap": pipeline.overlap,
                   "tokenizer": tokenizer.get_config(), **more}

    def write_more(folder):
        write_settings(folder, tokenizer, pipeline._stored_settings(), pipeline.settings_file)
        (folder / VOCAB_FILE).write_text("".join(t + "\n" for t in tokenizer.vocab), encoding="utf-8")

    return write_export(base, version, model, description, write_more)


def default_check_texts(pipeline):
    """The texts an export is checked on: the pipeline's warmup texts and
    one text longer than a window (its windows merged)."""
    texts = list(pipeline.warmup_texts)
    sample = next((t for t in texts if len(pipeline.tokenizer.pieces([t])[0][0])), "a b c")  # one with tokens
    long_text = sample
    while len(pipeline.tokenizer.pieces([long_text])[0][0]) <= 2 * pipeline.max_length:
        long_text = f"{long_text} {sample}"
    return texts + [long_text]
