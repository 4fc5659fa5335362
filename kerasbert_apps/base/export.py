"""A pipeline written for TF Serving: :func:`export_pipeline`, what
:meth:`kerasbert_apps.base.pipeline.Pipeline.export` does (the SavedModel
machinery itself is :mod:`kerasbert.serving.saved_model`), and the model name
it is served under (:func:`serving_model_name`)."""

import re
from pathlib import Path

from kerasbert_apps.base.runners import in_serving_graph
from kerasbert_apps.base.runners import keras_dtype
from kerasbert.errors import KerasbertError


#: A model name TF Serving's docker image serves as it is: its entry point passes
#: ``--model_name=${MODEL_NAME}`` and ``--model_base_path=.../${MODEL_NAME}`` to the server through
#: a shell, unquoted, so a space, a quote or a glob character would break the command line.
MODEL_NAME = re.compile(r"[A-Za-z0-9_.-]+")


def serving_model_name(base):
    """The model name an export in the folder ``base`` is served under (the
    warmup requests' model name, and the printed ``docker run`` line's): the
    folder's name, lowercased, each run of characters outside ``[a-z0-9_.-]``
    made one ``_``, trimmed of ``_``, ``.`` and ``-`` at both ends
    (``My NER model 東京`` -> ``my_ner_model``); ``model`` when nothing is left."""
    name = re.sub(r"[^a-z0-9_.-]+", "_", Path(base).resolve().name.lower()).strip("_.-")
    return name or "model"


def check_model_name(name):
    """``name`` when it matches :data:`MODEL_NAME`; else a one-line error."""
    if not isinstance(name, str) or not MODEL_NAME.fullmatch(name):
        raise KerasbertError(f"model_name {name!r}: TF Serving's docker image passes the model name to the server "
                             "unquoted; use letters, digits, '_', '.' and '-' only")
    return name


def _constant_weights(endpoint):
    """``endpoint`` traced with the encoder's projection kernels as constants
    (:func:`kerasbert.models.fused_encoder.constant_weights`: oneDNN packs them once,
    at the first request, instead of on every call), its argument names kept."""
    import functools
    import inspect

    from kerasbert.models.fused_encoder import constant_weights

    @functools.wraps(endpoint)
    def traced(*args, **kwargs):
        with constant_weights():
            return endpoint(*args, **kwargs)

    traced.__signature__ = inspect.signature(endpoint)
    return traced


def export_pipeline(pipeline, base, version=None, input="text", warmup_texts=None, model_name=None,
                    jit_compile=False):
    """:meth:`~kerasbert_apps.base.pipeline.Pipeline.export` of ``pipeline``
    (the arguments are documented there); returns the version folder."""
    from kerasbert.serving.saved_model import export_saved_model
    from kerasbert.serving.rows import jit_warmup_texts
    from kerasbert.serving.saved_model import signature_and_warmup

    if jit_compile not in (False, True, "model", "head"):
        raise KerasbertError(f"jit_compile must be False, True, 'model' or 'head', got {jit_compile!r}")
    if jit_compile == "head" and not pipeline.compiled_head:
        raise KerasbertError(f"jit_compile 'head': the {pipeline.settings().get('head', type(pipeline).__name__)} "
                             "head has no part that compiles on its own; use jit_compile 'model' or a plain export")
    model_name = check_model_name(model_name) if model_name is not None else serving_model_name(base)
    if pipeline.lora:  # serve plain kernels with the adapters merged in
        return export_pipeline(pipeline.merged(), base, version, input, warmup_texts, model_name, jit_compile)
    warmup_texts = list(pipeline.warmup_texts if warmup_texts is None else warmup_texts)
    # bfloat16: the kernels as constants (_constant_weights). Not for float32, where oneDNN's packed
    # kernel measured no faster for one sentence and slower for a batch (bench/encoder_floor.py:
    # tf-fused-const against tf-fused).
    constant = _constant_weights if keras_dtype(pipeline.model.encoder) == "bfloat16" else (lambda endpoint: endpoint)
    if input == "ids":
        if jit_compile:
            raise KerasbertError("jit_compile applies to text exports only (--input text)")
        endpoint, trackables = constant(in_serving_graph(pipeline.ids_endpoint())), [pipeline.model]
    else:
        head_only = jit_compile == "head"
        endpoint = constant(lambda text: pipeline.serve(text, jit_compile=bool(jit_compile) and not head_only,
                                                        compiled_heads=head_only))
        trackables = [pipeline.model, pipeline.graph_tokenizer]
    signature, warmup = signature_and_warmup(pipeline.tokenizer, pipeline.max_length, input, warmup_texts)
    if jit_compile:
        warmup += [{"text": texts} for texts in jit_warmup_texts(pipeline.tokenizer, pipeline.max_length)]
    description = {"task": pipeline.task, **pipeline.settings(), "tokenizer": pipeline.tokenizer.get_config(),
                   "jit_compile": "head" if jit_compile == "head" else bool(jit_compile),
                   "precision": keras_dtype(pipeline.model.encoder), "model_name": model_name}
    return export_saved_model(base, version, endpoint, signature, trackables, description, warmup,
                              pipeline.tokenizer.vocab, input, model_name)
