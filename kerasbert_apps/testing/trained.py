"""The contract's trained heads: a tiny training run of a head on the toy world
(:mod:`kerasbert_apps.testing.toy`), its model shaken so that it predicts many entities /
triples, once per test process and set of training options; and a LoRA pipeline of it."""

import dataclasses
import importlib
import json
from pathlib import Path
from types import SimpleNamespace

import numpy as np

from kerasbert_apps.testing.toy import MAX_LENGTH
from kerasbert_apps.testing.toy import TEXTS
from kerasbert_apps.testing.toy import tiny_checkpoint
from kerasbert_apps.testing.toy import toy_records

#: Small sizes for the kit's heads' options, and no calibration pass at the
#: end of the run (each where the task has it). The checks set a score
#: temperature of their own (:func:`non_default`); what calibration fits
#: on, ``score_outcomes``, is checked by the JAX check.
SMALL = {"lstm_units": 8, "pointer_size": 8, "biaffine_size": 16, "calibrate": False}
#: The kit's heads' decision settings given as numbers, so that the tiny run fits nothing on dev
#: at its end (the fitting and tuning at the end of training have tests of their own); the
#: checks set values of their own (:func:`non_default`). Given only to a head whose settings
#: declare them.
FIXED = {"span_threshold": 0.0, "threshold_start": 0.5, "threshold_end": 0.5, "threshold_entity": 0.5,
         "threshold_link": 0.5, "biaffine_lstm": 8}

_SESSION = {}  # "checkpoint" -> folder; (task, head, options) -> trained head: once per test process


def session_checkpoint(tmp_path_factory):
    """The tiny checkpoint of this test process (written once)."""
    if "checkpoint" not in _SESSION:
        _SESSION["checkpoint"] = tiny_checkpoint(tmp_path_factory.mktemp("tiny_checkpoint")).resolve()
    return _SESSION["checkpoint"]


def task_of(name):
    """The task object (``train``, ``train_settings``) of ``"ner"`` or ``"triples"``."""
    module, attr = {"ner": ("kerasbert_apps.ner.train", "NER"),
                    "triples": ("kerasbert_apps.triples.train", "TRIPLES")}[name]
    return getattr(importlib.import_module(module), attr)


def loader(name):
    """The task's one loader, ``kerasbert_apps.<task>.load``."""
    return importlib.import_module(f"kerasbert_apps.{name}").load


def kit_heads(task):
    """``[(task, name)]`` of the kit's own heads of ``task``, in ``--head`` order."""
    from kerasbert_apps.base import heads

    return [(task, head.name) for head in heads.heads(task) if heads.is_builtin(head)]


def trained_head(task_name, name, tmp_path_factory, options=None):
    """A tiny training run of the head ``name`` of ``task_name`` on the tiny
    checkpoint, then its model shaken and saved; once per test process and
    set of ``options`` (the head's training options, over :data:`SMALL`):
    classes that train the same head with other options get runs of their own."""
    options = dict(options or {})
    key = (task_name, name, json.dumps(options, sort_keys=True, default=repr))
    if key not in _SESSION:
        _SESSION[key] = _train(task_name, name, tmp_path_factory, options)
    return _SESSION[key]


def _train(task_name, name, tmp_path_factory, options):
    from kerasbert_apps.base import heads

    task = task_of(task_name)
    tmp = tmp_path_factory.mktemp(f"{task_name}_{name}")
    for split, n, seed in (("train", 40, 0), ("dev", 12, 1)):
        (tmp / f"{split}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in toy_records(task_name, n, seed)),
                                           encoding="utf-8")
    fields = {f.name for f in dataclasses.fields(task.train_settings)}
    head_settings = heads.get(task_name, name).settings
    own = {f.name for f in dataclasses.fields(head_settings)} if head_settings else set()
    given = {**SMALL, **{k: v for k, v in FIXED.items() if k in own}, **options}
    settings = task.train_settings(
        checkpoint=str(session_checkpoint(tmp_path_factory)), train=str(tmp / "train.jsonl"),
        dev=str(tmp / "dev.jsonl"), output=str(tmp / "run"), epochs=1, batch_size=8, max_length=MAX_LENGTH, seed=7,
        head=name, **{k: v for k, v in given.items() if k in fields})
    metrics = task.train(settings)
    pipeline = non_default(loader(task_name)(tmp / "run"))
    for seed in range(4):  # shaken again while it predicts little
        shake(pipeline, seed)
        rows = pipeline.output_rows(TEXTS)
        if count_found(rows) > 40:
            break
    pipeline.save(tmp / "shaken")
    assert count_found(rows) > 20, f"{name}: the shaken model predicts too little to compare"
    return SimpleNamespace(task=task, name=name, head=heads.get(task_name, name), tmp=tmp, settings=settings,
                           options=options, metrics=metrics, pipeline=pipeline, rows=rows, folder=tmp / "shaken")


def head_variables(pipeline):
    """The variables of the head's layers (those named with its ``head_prefix``)."""
    return [v for v in pipeline.model.weights if v.path.split("/")[0].startswith(pipeline.head_prefix)]


def shake(pipeline, seed=3):
    """Random noise on the head's weights (:func:`head_variables`; biases,
    which may hold a prior against firing, replaced by noise): the model
    then predicts many entities / triples."""
    rng = np.random.default_rng(seed)
    for variable in head_variables(pipeline):
        value = np.asarray(variable.numpy())
        noise = rng.normal(0, 0.5 + float(np.abs(value).mean()), value.shape)
        variable.assign((noise * 0.5 if variable.path.endswith("bias") else value + noise).astype(value.dtype))


def count_found(rows):
    """How many entities / triples output rows (or ``predict`` results) hold."""
    def found(row):
        if not row:
            return 0
        if "entities" in row or "triples" in row:
            return len(row.get("entities", row.get("triples")))
        return len(next(iter(row.values())))

    return sum(found(row) for row in rows)


def non_default(pipeline):
    """The pipeline with its decoding settings away from their defaults, so
    that every check also shows that they travel (into the saved folder, the
    exports, the JAX predict): a score temperature of 1.7 (NER heads with
    one) and a decision threshold of -0.5 (heads with one: the span heads),
    every triple threshold lowered to 0.4 (triple heads)."""
    if hasattr(pipeline, "set_temperature"):
        pipeline.set_temperature(1.7)
        if hasattr(pipeline, "set_threshold"):
            pipeline.set_threshold(-0.5)
        return pipeline
    if hasattr(pipeline, "with_thresholds"):
        return pipeline.with_thresholds({key: 0.4 for key in pipeline.thresholds})
    return pipeline


def lora_pipeline(trained, checkpoint, rank=2, seed=2):
    """A pipeline of ``trained``'s head with LoRA adapters of rank ``rank``
    on ``checkpoint``, as a ``--lora-rank`` training run holds it when it
    saves: the model built, the adapters enabled and compiled for training
    (the run's optimizer and schedule attached to the model), without the
    training. The adapters are random so that they count; the head holds
    ``trained``'s shaken weights and its decoding settings are
    :func:`non_default`, so that it predicts many entities / triples too."""
    import keras

    from kerasbert.checkpoints.loader import load_encoder
    from kerasbert.layers.lora import enable_lora
    from kerasbert.training.fit import compile_for_training

    cls = trained.head.pipeline_class()
    keras.utils.set_random_seed(6)
    model = cls.build_model(load_encoder(str(checkpoint)), trained.pipeline.labels, trained.settings)
    ours = [v for v in model.weights if v.path.split("/")[0].startswith(cls.head_prefix)]
    shaken = head_variables(trained.pipeline)  # the same layers in the same order (nested names are numbered)
    assert [v.shape for v in ours] == [v.shape for v in shaken], f"{trained.name}: another head"
    for variable, value in zip(ours, shaken):
        variable.assign(value.numpy())
    rng = np.random.default_rng(seed)
    for layer in enable_lora(model.encoder, rank):
        layer.lora_kernel_b.assign(rng.normal(0, 0.3, layer.lora_kernel_b.shape))
    compile_for_training(model, 4, trained.settings, cls.head_prefix)
    pipeline = non_default(cls.for_training(model, trained.pipeline.tokenizer, trained.pipeline.labels,
                                            trained.settings))
    pipeline.lora = {"rank": rank, "checkpoint": str(Path(checkpoint).resolve())}
    return pipeline
