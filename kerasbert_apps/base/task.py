"""An app, as the skeleton sees it: what its data is, how it is scored, which pipeline it trains.

A :class:`Task` is the small description each app writes once (its name,
settings, readers, scoring and pipeline class); everything around it is
written here and in :mod:`kerasbert_apps.base.cli` once for all apps:

* :meth:`Task.train` -- a training run, start to end: read (and fail on) the
  data before anything is written, derive the labels, start the run
  (:func:`kerasbert.training.fit.start_run`), open the checkpoint once, build the
  model and the training rows under the distribution strategy, turn the
  ``auto`` batch size, epochs, patience and head learning rate into numbers
  for the number of rows and the head's declared needs (:meth:`Task.resolve_auto`), with
  ``--lora-rank`` put Keras LoRA adapters on the frozen encoder
  (:func:`start_lora`) or with ``--freeze-encoder`` freeze it and mix its
  layers for the head, compile (``--layer-lr-decay``: per-layer learning
  rates), fit
  with dev evaluation after each epoch and the best pipeline kept
  (:func:`kerasbert.training.fit.fit_and_select`), then let the head finish the
  best pipeline (:meth:`~kerasbert_apps.base.pipeline.Pipeline.after_training`: the
  NER heads fit their score temperature on dev);
* :meth:`Task.evaluate` -- a saved pipeline scored on a labelled file;
* the CLI's ``train | evaluate | predict | export`` subcommands
  (:func:`kerasbert_apps.base.cli.add_task_commands`).

A new head for an existing task is a folder under ``kerasbert_apps/<task>/heads/``: a
:class:`~kerasbert_apps.base.pipeline.Pipeline` subclass (labels, model,
decoding) registered in :mod:`kerasbert_apps.base.heads`, through which the
task's ``pipeline_class`` and ``load`` find it; a new task is a folder with
its readers, its scoring, a ``Task`` and a ``register`` for the CLI.
"""

import numpy as np

from kerasbert.training.runs import run_command
from kerasbert.training.settings import TrainSettings


class Task:
    """What the skeleton needs to know about an app (see the module docstring).

    Attributes:
        name: the ``kerasbert`` subcommand (``"ner"``).
        help, description: its ``--help`` texts.
        trains: what ``train`` trains, for help texts ("an NER tagger").
        train_settings: the training settings dataclass (a
            :class:`kerasbert.training.settings.TrainSettings` subclass that includes
            ``read_settings``).
        read_settings: the dataclass of reader options shared by ``train`` and
            ``evaluate`` (declared once, e.g. ``format``, ``tag_column``).
        output_formats: what ``predict --output-format`` offers.
    """

    name = None
    help = ""
    description = ""
    trains = "a model"
    train_settings = TrainSettings
    read_settings = None
    #: ``predict --output-format`` choices: name -> whether the output is one
    #: JSON array (else one JSON object per line); see :meth:`output_record`.
    output_formats = {"jsonl": False}
    output_formats_help = "how predictions are written"
    #: The ``distill`` settings dataclass (a
    #: :class:`kerasbert.training.settings.DistillSettings` subclass); None: the app
    #: offers no ``distill``.
    distill_settings = None

    # --- what an app writes
    def pipeline_class(self, settings=None):
        """The :class:`~kerasbert_apps.base.pipeline.Pipeline` subclass trained with ``settings``
        (or loaded, when ``settings`` is None)."""
        raise NotImplementedError

    def read(self, path, settings, what="data"):
        """The examples of a labelled file (the reader's report printed)."""
        raise NotImplementedError

    def score(self, examples, predictions, settings):
        """Scores of ``predictions`` against the gold ``examples``: a dict with
        at least ``f1``, ``precision`` and ``recall``."""
        raise NotImplementedError

    def format_scores(self, scores):
        raise NotImplementedError

    def add_options(self, parser, command):
        """Options of this app's ``evaluate``, ``predict`` or ``export`` beyond the common ones."""

    def output_record(self, result, format):
        """One prediction (a dict of the pipeline's ``predict``) as a record of
        ``format`` (one of :attr:`output_formats`)."""
        return result

    def unlabeled_example(self, text):
        """An example of ``text`` with no labels (for ``distill --unlabeled``)."""
        raise NotImplementedError

    def configure(self, pipeline, args):
        """``pipeline`` with the options of :meth:`add_options` applied."""
        return pipeline

    # --- written once
    @run_command
    def train(self, settings, callbacks=()):
        """Train, select on dev F1, save the best pipeline in ``OUTPUT/model``;
        returns the metrics written to ``OUTPUT/metrics.json``. ``callbacks``
        are extra Keras callbacks (e.g. for a notebook)."""
        from kerasbert.training import distribution
        from kerasbert.training import fit
        from kerasbert.checkpoints.loader import load_encoder

        settings.check()
        distribution.make_strategy(settings.strategy)  # before TensorFlow runs anything (multiworker needs it)
        train_examples, dev_examples = self.read_run_data(settings)
        head = self.pipeline_class(settings)
        labels = head.training_labels(train_examples, dev_examples, settings)

        fit.start_run(settings, f"{self.name} train")
        checkpoint, tokenizer = fit.open_encoder_checkpoint(settings)
        with distribution.distribution_scope(settings.strategy):
            if settings.freeze_encoder:  # fixed features: the encoder runs as at inference, without its dropout
                encoder = load_encoder(checkpoint, trainable=False, output_hidden_states=True, dropout=0.0)
                model = head.build_model(encoder, labels, settings)
                print_frozen(model)
            else:
                model = head.build_model(load_encoder(checkpoint), labels, settings)
            pipeline = head.for_training(model, tokenizer, labels, settings)
            if settings.lora_rank:
                pipeline.lora = start_lora(model, checkpoint, settings)
            rows, report = pipeline.features(train_examples)
            print("train features: " + report.summary().replace("\n", "\n  "))
            pipeline.after_features(report, settings)
            settings = self.resolve_auto(settings, len(rows["token_ids"]), getattr(settings, "head", None))
            batches = pipeline.batches(rows, settings)
            fit.compile_for_training(model, len(batches), settings, head.head_prefix)

        dev_texts = [e.text for e in dev_examples]
        metrics = fit.fit_and_select(
            model, batches, settings,
            dev_scores=lambda: self.score(dev_examples, pipeline.predict(dev_texts, batch_size=settings.batch_size), settings),
            save_pipeline=pipeline.save,
            format_scores=self.format_scores,
            callbacks=callbacks,
        )
        metrics.update(weight_counts(model))
        if distribution.is_chief():
            from pathlib import Path

            from kerasbert.checkpoints.saving import MODEL_DIR

            metrics.update(head.after_training(Path(settings.output) / MODEL_DIR, dev_examples, settings))
        fit.write_metrics(settings.output, metrics)  # the chief only
        return metrics

    def read_run_data(self, settings):
        """``(train examples, dev examples)`` of a run, cut to
        ``max_train_examples`` / ``max_dev_examples``; read (and failed on)
        before anything is created in OUTPUT."""
        train_examples = self.read(settings.train, settings, "train")
        dev_examples = self.read(settings.dev, settings, "dev")
        if settings.max_train_examples:
            train_examples = train_examples[: settings.max_train_examples]
        if settings.max_dev_examples:
            dev_examples = dev_examples[: settings.max_dev_examples]
        return train_examples, dev_examples

    @run_command
    def distill(self, settings, callbacks=()):
        """Train a student with fewer encoder layers from the teacher
        ``settings.teacher`` (:func:`kerasbert.training.distill.student_encoder`: every
        other teacher layer, the embeddings and the head copied), on the
        teacher's outputs for the training texts and the ``--unlabeled``
        ones plus the gold labels (:meth:`kerasbert_apps.base.model.TaskModel.distillation_loss`);
        select on dev F1 like :meth:`train`. The result in ``OUTPUT/model``
        is an ordinary model folder. Returns the metrics (with the teacher's
        dev scores under ``"teacher_dev"``)."""
        from kerasbert.training import distribution
        from kerasbert.training import fit
        from kerasbert.training.distill import every_other_layer
        from kerasbert.training.distill import shares_layers

        settings.check()
        distribution.make_strategy(settings.strategy)  # before TensorFlow runs anything (multiworker needs it)
        train_examples, dev_examples = self.read_run_data(settings)
        unlabeled = read_unlabeled(settings.unlabeled) if settings.unlabeled else []
        teacher = self.load(settings.teacher, verbose=True)
        encoder = teacher.model.encoder
        if settings.teacher_layers != "auto":
            layers = [int(i) for i in settings.teacher_layers.split(",")]
        elif shares_layers(encoder):
            layers = list(range(settings.student_layers))
        else:
            layers = every_other_layer(encoder.num_layers, settings.student_layers)
        print(f"student: {len(layers)} of the teacher's {encoder.num_layers} encoder layers, initialised from "
              f"teacher layers {', '.join(map(str, layers))}; soft loss weight {settings.soft_weight}")
        dev_texts = [e.text for e in dev_examples]
        teacher_dev = self.score(dev_examples, teacher.predict(dev_texts, batch_size=64), settings)
        print("teacher on dev:\n" + self.format_scores(teacher_dev))

        fit.start_run(settings, f"{self.name} distill")
        with distribution.distribution_scope(settings.strategy):
            pipeline = teacher.student(layers)
            rows, report = pipeline.features(train_examples)
            print("train features: " + report.summary().replace("\n", "\n  "))
            rows["gold"] = [np.ones(len(ids), np.int32) for ids in rows["token_ids"]]
            if unlabeled:
                more, report = pipeline.features([self.unlabeled_example(text) for text in unlabeled])
                print("unlabeled features: " + report.summary().replace("\n", "\n  "))
                more["gold"] = [np.zeros(len(ids), np.int32) for ids in more["token_ids"]]
                rows = {name: rows[name] + more[name] for name in rows}
            rows["teacher"] = teacher.soft_targets(rows)
            settings = self.resolve_auto(settings, len(rows["token_ids"]), pipeline.head_name)
            batches = pipeline.batches(rows, settings, targets=("teacher", "gold"))
            pipeline.model.soft_weight = settings.soft_weight
            fit.compile_for_training(pipeline.model, len(batches), settings, pipeline.head_prefix)

        metrics = fit.fit_and_select(
            pipeline.model, batches, settings,
            dev_scores=lambda: self.score(dev_examples, pipeline.predict(dev_texts, batch_size=settings.batch_size), settings),
            save_pipeline=pipeline.save,
            format_scores=self.format_scores,
            callbacks=callbacks,
        )
        metrics["teacher_dev"] = teacher_dev
        metrics["teacher_layers"] = layers
        if distribution.is_chief():
            from pathlib import Path

            from kerasbert.checkpoints.saving import MODEL_DIR

            metrics.update(type(pipeline).after_training(Path(settings.output) / MODEL_DIR, dev_examples, settings))
        fit.write_metrics(settings.output, metrics)
        if settings.save_encoder and distribution.is_chief():
            from pathlib import Path

            from kerasbert.checkpoints.loader import save_encoder

            best = self.load(Path(settings.output) / "model")
            save_encoder(best.model.encoder, Path(settings.output) / "encoder", best.tokenizer)
            print(f"encoder: {Path(settings.output) / 'encoder'} (official layout)")
        return metrics

    def resolve_auto(self, settings, rows, head_name):
        """``settings`` with their ``auto`` numbers for ``rows`` training
        rows and for what the registered head ``head_name`` of this task
        (None: none) declares its training needs (:meth:`kerasbert_apps.base.heads.Head.training_defaults`;
        :func:`kerasbert.training.fit.resolve_auto`). Options given as numbers win."""
        from kerasbert.training import fit
        from kerasbert_apps.base import heads

        declared = heads.get(self.name, head_name).training_defaults() if head_name else {}
        return fit.resolve_auto(settings, rows, **declared)

    def load(self, model_dir, verbose=False, with_model=True):
        """The pipeline saved in ``model_dir`` (a model folder, or a training
        run's output folder); ``with_model=False``: its settings and tokenizer
        only (:meth:`~kerasbert_apps.base.pipeline.Pipeline.load`)."""
        return self.pipeline_class().load(model_dir, verbose=verbose, with_model=with_model)

    def evaluate(self, load_pipeline, path, settings, batch_size=32, progress=False):
        """Scores on the labelled file ``path`` (read with the reader options
        of ``settings``) of the pipeline that ``load_pipeline()`` returns
        (called after the file is read: bad data is reported before a model
        is loaded). ``progress``: the texts done, their rate and the time
        left on standard error while the model runs (True, False, or
        ``"auto"``: on a terminal only; :func:`kerasbert.progress.progress`)."""
        from kerasbert.progress import progress as progress_bar

        examples = self.read(path, settings, "data")
        pipeline = load_pipeline()
        with progress_bar(len(examples), "evaluate", show=progress):
            predictions = pipeline.predict([e.text for e in examples], batch_size=batch_size)
        return self.score(examples, predictions, settings)


def start_lora(model, checkpoint, settings):
    """Keras LoRA adapters of rank ``settings.lora_rank`` on ``model``'s
    encoder, every original encoder weight frozen
    (:func:`kerasbert.layers.lora.enable_lora`); prints the trainable share. Returns
    the pipeline's :attr:`~kerasbert_apps.base.pipeline.Pipeline.lora`: the rank and the
    checkpoint the saved adapters go on (an absolute folder, or ``starter``)."""
    from pathlib import Path

    from kerasbert.layers.lora import enable_lora

    layers = enable_lora(model.encoder, settings.lora_rank)
    trainable, total = weight_counts(model).values()
    adapters = sum(int(np.prod(v.shape)) for v in model.encoder.trainable_variables)
    print(f"LoRA rank {settings.lora_rank} on {len(layers)} encoder kernels: {adapters:,} adapter + "
          f"{trainable - adapters:,} head weights train, {trainable / total:.2%} of {total:,}")
    reference = "starter" if settings.checkpoint == "starter" else str(Path(checkpoint.directory).resolve())
    return {"rank": int(settings.lora_rank), "checkpoint": reference}


def weight_counts(model):
    """``{"trainable_weights", "total_weights"}`` of ``model`` (numbers of
    scalars; the optimizer's slots not counted), for ``metrics.json``."""
    return {"trainable_weights": sum(int(np.prod(v.shape)) for v in model.trainable_variables),
            "total_weights": sum(int(np.prod(v.shape)) for v in model.weights)}


def print_frozen(model):
    """Print what trains with ``--freeze-encoder``: the head and the layer mix."""
    trainable, total = weight_counts(model).values()
    print(f"encoder frozen; the head reads a learned mix of its {model.encoder.num_layers + 1} layer outputs: "
          f"{trainable:,} head weights train, {trainable / total:.2%} of {total:,}")


def read_unlabeled(path):
    """The non-empty texts of ``path`` (:func:`kerasbert_apps.base.cli.read_texts`:
    plain lines or JSON lines with a ``"text"``); empty lines are counted."""
    from kerasbert_apps.base.cli import read_texts
    from kerasbert_apps.base.cli import repaired_note

    texts, empty, repaired = [], 0, []
    for _, text in read_texts(path, repaired):
        if text.strip():
            texts.append(text)
        else:
            empty += 1
    print(f"unlabeled: {path}\n  {len(texts)} texts" + (f"; {empty} empty lines skipped" if empty else ""))
    if repaired:
        print("  " + repaired_note(path, repaired))
    return texts
