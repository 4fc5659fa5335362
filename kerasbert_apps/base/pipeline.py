"""A trained pipeline: raw text in, results with character offsets out.

:class:`Pipeline` is what every app's trained artefact is (the NER
:class:`~kerasbert_apps.ner.heads.bio.pipeline.Tagger`, the triples
:class:`~kerasbert_apps.triples.heads.casrel.pipeline.Extractor`): a Keras model, the tokenizer it
was trained with, its labels and its window settings. Following a batch of
texts, there is ONE path, the same for ``predict``, ``evaluate``, the dev
evaluation during training, the CLI and the exported SavedModel:

1. **text -> windows** (TensorFlow): :meth:`Pipeline.windows`, i.e.
   :meth:`kerasbert.tokenizers.graph_tokenizer.GraphTokenizer.windows` -- WordPiece ids
   with code-point offsets, long texts cut into overlapping windows of
   ``max_length`` tokens (``[CLS] ... [SEP]`` each);
2. **windows -> scores** (the Keras model, any backend), run by a *runner*:
   :class:`GraphRunner` inside a TensorFlow graph (rows sorted by length and
   run in groups, :func:`kerasbert.serving.rows.by_length`), :class:`HostRunner`
   on the host for backends other than TensorFlow (the same grouping with
   ``predict_on_batch``);
3. **scores -> results** (TensorFlow): the app's decoding, written once as
   TensorFlow ops, e.g. the NER window merge and BIO decoding.

An app writes steps 2-3 once, in :meth:`Pipeline.infer` (``texts``, the
windows, a runner -> the padded per-text outputs of the serving signature).
:meth:`serve` composes 1-3 in a TensorFlow function: the SavedModel's ``text``
signature (:meth:`export`) and, on the TensorFlow backend, exactly what
:meth:`predict` runs. On another backend (JAX) :meth:`predict` composes the
same three steps eagerly with a :class:`HostRunner`; only the runner differs.

Training rows come from the same windows (:meth:`features`): the app labels
each text's tokens through their offsets (:meth:`text_labels`) and each
window's slice of them (:meth:`window_labels`).

A pipeline folder (:meth:`save` / :meth:`load`) holds ``model.keras``,
``vocab.txt`` and the settings file named by :attr:`settings_file`
(:mod:`kerasbert.checkpoints.saving`). :meth:`load` also takes a training run's output
folder and uses its ``model/``. A pipeline trained with ``--lora-rank``
(:attr:`Pipeline.lora`) saves only its LoRA adapters and head, with a
reference to the encoder checkpoint they go on; :meth:`export` merges the
adapters into the kernels first (:meth:`Pipeline.merged`).
"""

from collections.abc import Mapping
from pathlib import Path

import numpy as np

from kerasbert_apps.base.report import FeatureReport
from kerasbert_apps.base.runners import GraphRunner
from kerasbert_apps.base.runners import HostRunner
from kerasbert_apps.base.runners import keras_dtype
from kerasbert.errors import KerasbertError
from kerasbert.checkpoints.saving import LORA_CONFIG_FILE
from kerasbert.checkpoints.saving import MODEL_FILE
from kerasbert.checkpoints.saving import VOCAB_FILE
from kerasbert.checkpoints.saving import load_pipeline
from kerasbert.checkpoints.saving import resolve_model_dir
from kerasbert.checkpoints.saving import save_pipeline

ENCODER_INPUTS = ("token_ids", "segment_ids", "padding_mask")
#: What :meth:`Pipeline.with_precision` (``--precision``) offers.
PRECISIONS = ("float32", "bfloat16")
#: Texts tokenized per call when building training rows.
FEATURE_CHUNK = 512


class Pipeline:
    """A trained model with the tokenizer and settings it was trained with.

    Args:
        model: the app's Keras model.
        tokenizer: the :class:`kerasbert.BertTokenizer` it was trained with.
        labels: the app's label list (NER tags, triple predicates), index =
            the model's label id.
        max_length: tokens per window, ``[CLS]`` and ``[SEP]`` included (>= 3).
        overlap: tokens shared by consecutive windows of a long text
            (default: a quarter of a window).

    Subclasses set the class attributes below and implement :meth:`infer`,
    :meth:`result`, :meth:`text_labels`, :meth:`window_labels` and the
    training hooks (:meth:`training_labels`, :meth:`build_model`,
    :meth:`batches`).
    """

    #: Name of the settings file in a pipeline folder (``tagger.json``).
    settings_file = None
    #: The registered head this pipeline is (:mod:`kerasbert_apps.base.heads`),
    #: recorded as ``"head"`` in the settings file.
    head_name = None
    #: What a pipeline folder of this kind is called in errors ("NER model").
    kind = "model"
    #: The ``task`` written into an export's description.
    task = None
    #: The key of :attr:`labels` in the settings file ("tags", "predicates").
    labels_key = "labels"
    #: Layer-name prefix of the task head (trained at ``head_learning_rate``).
    head_prefix = None
    #: Module whose import registers the model's Keras classes (for loading).
    model_module = None
    #: Texts of the export's warmup requests.
    warmup_texts = ()
    #: The report :meth:`features` fills.
    FeatureReport = FeatureReport
    #: ``{"rank": R, "checkpoint": ...}`` when the encoder carries Keras LoRA
    #: adapters over a frozen checkpoint (``--lora-rank``; the folder then
    #: stores adapters and head only, see :mod:`kerasbert.checkpoints.saving`); None for
    #: a plain model.
    lora = None

    def __init__(self, model, tokenizer, labels, max_length=128, overlap=None):
        self.model = model
        self.tokenizer = tokenizer
        self.labels = list(labels)
        if len(set(self.labels)) != len(self.labels):
            raise KerasbertError(f"the {self.labels_key} list has duplicates")
        self.max_length = int(max_length)
        inner = self.max_length - 2
        if inner < 1:
            raise KerasbertError(f"max_length must be at least 3, got {self.max_length}")
        self.overlap = int(overlap if overlap is not None else inner // 4)
        if not 0 <= self.overlap < inner:
            raise KerasbertError(f"overlap must be between 0 and max_length - 3, got {self.overlap}")
        self._graph_tokenizer = None
        self._functions = {}

    # ------------------------------------------------------------ settings
    def settings(self):
        """What the settings file holds (and the export's description)."""
        return {self.labels_key: self.labels, "max_length": self.max_length, "overlap": self.overlap}

    @classmethod
    def from_settings(cls, model, tokenizer, settings):
        settings = dict(settings)
        lora = settings.pop("lora", None)
        settings.pop("head", None)  # which class loads the folder (kerasbert_apps.base.heads.head_of)
        pipeline = cls(model, tokenizer, settings.pop(cls.labels_key), **settings)
        pipeline.lora = lora
        return pipeline

    def merged(self):
        """This pipeline with its LoRA adapters merged into plain encoder
        kernels (:func:`kerasbert.layers.lora.merged_model`, Keras's own merge): same
        results, no adapter matmuls, no LoRA layers. A pipeline without LoRA
        returns itself."""
        if not self.lora:
            return self
        from kerasbert.layers.lora import merged_model

        return type(self).from_settings(merged_model(self.model), self.tokenizer, self.settings())

    # -------------------------------------------------------- 1. windows
    @property
    def graph_tokenizer(self):
        """The :class:`~kerasbert.tokenizers.graph_tokenizer.GraphTokenizer` of :attr:`tokenizer`."""
        if self._graph_tokenizer is None:
            import tensorflow as tf

            from kerasbert.tokenizers.graph_tokenizer import GraphTokenizer

            with tf.init_scope():  # its constants live outside any function being traced
                self._graph_tokenizer = GraphTokenizer(self.tokenizer)
        return self._graph_tokenizer

    def windows(self, texts):
        """Step 1 (TensorFlow ops): ``texts`` (``tf.string [batch]``) -> the
        windows dict of :meth:`GraphTokenizer.windows`."""
        return self.graph_tokenizer.windows(texts, max_length=self.max_length, overlap=self.overlap)

    @property
    def windows_function(self):
        """:meth:`windows` as a ``tf.function`` of ``tf.string [batch]``,
        traced once per pipeline: the serving function, the training rows,
        calibration and selection call it (in a traced function, as a call of
        the one traced graph), instead of each tracing the tokenizer again."""
        return self._text_function("windows", self.windows)

    def _text_function(self, name, fn):
        """``fn`` as a ``tf.function`` taking ``tf.string [batch]`` (traced once)."""
        if name not in self._functions:
            import tensorflow as tf

            self._functions[name] = tf.function(fn, input_signature=[tf.TensorSpec([None], tf.string, name="text")], autograph=False)
        return self._functions[name]

    def windows_numpy(self, texts):
        """:meth:`windows` of a list of texts, as numpy arrays."""
        import tensorflow as tf

        out = self.windows_function(tf.constant(list(texts), tf.string))
        return {k: v.numpy() for k, v in out.items()}

    # ------------------------------------------------------ training rows
    def features(self, examples, report=None):
        """Training rows for ``examples``: one per window of each text.

        Returns ``(rows, report)``; ``rows`` maps ``token_ids``,
        ``segment_ids``, ``padding_mask`` and the app's label names to lists
        with one item per row (1-D int32 arrays of the row's length for the
        encoder inputs).
        """
        report = report or self.FeatureReport()
        rows = {name: [] for name in ENCODER_INPUTS}
        for begin in range(0, len(examples), FEATURE_CHUNK):
            chunk = examples[begin : begin + FEATURE_CHUNK]
            w = self.windows_numpy([e.text for e in chunk])
            first_row = np.searchsorted(w["text_index"], np.arange(len(chunk) + 1))
            for i, example in enumerate(chunk):
                spans = [(r, int(w["token_start"][r]), int(w["token_end"][r])) for r in range(first_row[i], first_row[i + 1])]
                offsets = np.zeros((int(w["num_tokens"][i]), 2), np.int32)
                for r, start, end in spans:
                    offsets[start:end] = w["offsets"][r, 1 : end - start + 1]
                state = self.text_labels(example, offsets, report)
                for r, start, end in spans:
                    width = end - start + 2
                    report.tokens += width - 2
                    report.unknown_tokens += int(np.count_nonzero(w["token_ids"][r, 1 : width - 1] == self.tokenizer.unk_id))
                    rows["token_ids"].append(w["token_ids"][r, :width])
                    rows["segment_ids"].append(np.zeros(width, np.int32))
                    rows["padding_mask"].append(np.ones(width, np.int32))
                    for key, value in self.window_labels(state, start, end, report).items():
                        rows.setdefault(key, []).append(value)
                    report.windows += 1
                self.text_done(state, report)
                report.examples += 1
        return rows, report

    def text_labels(self, example, offsets, report):
        """Label one text's tokens: ``offsets`` int32 [tokens, 2] are their
        character spans (end exclusive). Returns a state for :meth:`window_labels`."""
        raise NotImplementedError

    def window_labels(self, state, start, end, report):
        """The labels of the row holding the text's tokens ``start .. end - 1``
        (``[CLS]`` and ``[SEP]`` included): a dict, label name -> value."""
        raise NotImplementedError

    def text_done(self, state, report):
        """Called after the last window of a text (for counts over windows)."""

    # -------------------------------------------------------- 2-3. infer
    def infer(self, texts, windows, run):
        """Steps 2-3: ``texts`` ``tf.string [batch]``, their :meth:`windows`
        and a runner -> the per-text outputs of the serving signature (a dict
        of tensors padded per batch, with ``count`` [batch]). With ``texts``
        None, the numeric outputs before the string step (label indices for
        names, no text cut; what the ONNX export's graph returns,
        :mod:`kerasbert_apps.base.onnx_engine`): :meth:`string_outputs` says
        how the one gives the other."""
        raise NotImplementedError

    def string_outputs(self):
        """``(names, spans)``: how the serving signature's strings come from
        :meth:`infer`'s numeric outputs. ``names``: ``{index output:
        (name output, labels)}``, ``spans``: ``{string output: (start output,
        end output)}`` (code points into the text)
        (:func:`kerasbert.serving.graph_ops.named_outputs` in the graph,
        :func:`kerasbert.serving.onnx.named_row` on the host)."""
        raise NotImplementedError

    #: Why this head has no ONNX export (one sentence, said by ``export
    #: --format onnx`` and the head contract), or None: it has one
    #: (:func:`kerasbert_apps.base.onnx_export.export_onnx`).
    no_onnx_export = None

    #: Whether the head after the encoder can run compiled by XLA on its own
    #: (``export(..., jit_compile="head")``, :class:`GraphRunner`).
    compiled_head = False

    def serve(self, text, jit_compile=False, compiled_heads=False):
        """The ``text`` signature: steps 1-3 as TensorFlow ops (``text``:
        ``tf.string [batch]``); with ``jit_compile``, the model runs compiled
        by XLA; with ``compiled_heads``, the head after the encoder does
        (:class:`GraphRunner`)."""
        import tensorflow as tf

        texts = tf.reshape(text, [-1])
        with tf.name_scope("windows"):
            windows = self.windows_function(texts)
        return self.infer(texts, windows, GraphRunner(jit_compile, compiled_heads))

    def serving_function_of(self, jit_compile=False):
        """:meth:`serve` as a ``tf.function``: what ``predict`` runs on
        TensorFlow, and the SavedModel too, except that an export traces it
        with ``compiled_heads``."""
        if not jit_compile:
            return self._text_function("serve", self.serve)
        return self._text_function("serve_jit", lambda text: self.serve(text, jit_compile=True))

    @property
    def serving_function(self):
        """:meth:`serve` as a ``tf.function`` (what the SavedModel runs)."""
        return self.serving_function_of(False)

    def predict(self, texts, batch_size=32, jit_compile=False, serving=None, progress=False):
        """Results for each text (the app's dicts, offsets into the original
        text), in the input order. ``texts`` holds strings, or records (dicts
        with a string ``"text"``, e.g. ``{"id": 7, "text": ...}``), or both: a
        string's result is the app's dict, a record's is the record with
        every field it had and the results added (a result field replaces
        the record's field of the same name). Texts are sent ``batch_size``
        at a time to the serving function, sorted by length first so that a
        batch pads little (a text's result does not depend on its batch).
        With ``jit_compile`` (TensorFlow backend) the serving function of an
        export with ``jit_compile`` is used; ``serving``, the text signature
        of this pipeline's export loaded by ``tf.saved_model.load``, is run
        instead of tracing the serving function (what ``predict`` from the
        serving cache does). ``progress``: True draws a bar of the texts
        done, their rate and the time left (on standard error, or in a
        notebook), ``"auto"`` only when standard error is a terminal
        (:func:`kerasbert.progress.progress`)."""
        from kerasbert.progress import progress as progress_bar

        if isinstance(texts, (str, Mapping)):
            raise TypeError("pass a list of texts (or of records with a \"text\")")
        items = list(texts)
        texts = [_text_of(item, i) for i, item in enumerate(items)]
        with progress_bar(len(texts), "predict", show=progress):
            rows = self.output_rows(texts, batch_size, jit_compile, serving)
        results = [self.result(text, row) for text, row in zip(texts, rows)]
        return [{**item, **result} if isinstance(item, Mapping) else result for item, result in zip(items, results)]

    def output_rows(self, texts, batch_size=32, jit_compile=False, serving=None):
        """The unpadded outputs of each text (output name -> list, before
        :meth:`result` rounds and names them), in the input order; batched
        and run as :meth:`predict` says."""
        from kerasbert.serving.rows import unpad

        traced = (lambda batch: serving(text=batch)) if serving is not None else self.serving_function_of(jit_compile)
        rows = [None] * len(texts)
        for chunk, outputs in self.in_batches(texts, batch_size, self.infer, traced):
            for i, row in zip(chunk, unpad(outputs)):
                rows[i] = row
        return rows

    def in_batches(self, texts, batch_size, infer, traced):
        """``(indices, outputs)`` for each batch of ``texts``: sorted by
        length first and sent ``batch_size`` at a time, so that a batch pads
        little. ``infer(texts, windows, run)`` gives the outputs: on
        TensorFlow through ``traced`` (``infer`` as a ``tf.function`` of the
        texts), elsewhere run on the host (:class:`HostRunner`). Each batch
        done moves the open progress bar, if any
        (:func:`kerasbert.progress.advance`)."""
        import keras
        import tensorflow as tf

        from kerasbert.progress import advance

        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        for begin in range(0, len(texts), batch_size):
            chunk = order[begin : begin + batch_size]
            batch = tf.constant([texts[i] for i in chunk], tf.string)
            if keras.backend.backend() == "tensorflow":
                yield chunk, traced(batch)
            else:
                yield chunk, infer(batch, self.windows_function(batch), HostRunner(batch_size))
            advance(len(chunk))

    def result(self, text, row):
        """One text's result dict from its unpadded outputs (``row``: output
        name -> list)."""
        raise NotImplementedError

    # ------------------------------------------------------------- export
    def ids_endpoint(self):
        """The ``ids`` signature's function ``(token_ids, segment_ids,
        padding_mask) -> outputs`` (core TensorFlow ops only)."""
        raise NotImplementedError

    def export(self, base, version=None, input="text", warmup_texts=None, model_name=None, jit_compile=False):
        """Write the pipeline as ``base/<version>`` for TF Serving (see
        :mod:`kerasbert.serving.saved_model`); returns the version folder. ``input``:
        ``"text"`` (:meth:`serve`) or ``"ids"`` (:meth:`ids_endpoint`); ``version``:
        the next free integer by default; ``model_name`` goes into the warmup
        requests and the description (default: the base folder's name,
        :func:`kerasbert_apps.base.export.serving_model_name`). ``jit_compile``
        (text input only): the model (``True``, ``"model"``) or the head after
        the encoder (``"head"``, where :attr:`compiled_head` is set) compiled by
        XLA on a few padded shapes, each reached by a warmup request; TF Serving
        needs ``--xla_cpu_compilation_enabled=true`` for it."""
        from kerasbert_apps.base.export import export_pipeline

        return export_pipeline(self, base, version, input, warmup_texts, model_name, jit_compile)

    def export_onnx(self, base, version=None, precision="float32", check_texts=None):
        """Write the pipeline as an ONNX export ``base/<version>`` for ONNX Runtime
        (``export --format onnx``; ``precision`` ``"int8"``: quantized), checked
        on ``check_texts``: :func:`kerasbert_apps.base.onnx_export.export_onnx`."""
        from kerasbert_apps.base.onnx_export import export_onnx

        return export_onnx(self, base, version, check_texts, precision)

    # -------------------------------------------------------- save / load
    def save(self, directory):
        """Write everything needed to predict into ``directory`` (through
        :func:`kerasbert.files.atomic.atomic_write_dir` for an atomic save)."""
        save_pipeline(directory, self.model, self.tokenizer, self._stored_settings(), self.settings_file)

    def _stored_settings(self):
        """What the settings file holds: :meth:`settings`, ``head`` and ``lora``."""
        settings = self.settings()
        if self.head_name:
            settings.setdefault("head", self.head_name)
        if self.lora:
            settings["lora"] = dict(self.lora)
        return settings

    def save_settings(self, directory):
        """Rewrite only the settings file of the pipeline folder ``directory``
        (atomically), e.g. after :meth:`kerasbert_apps.ner.heads.global_pointer.pipeline.SpanTagger.calibrate`."""
        from kerasbert.checkpoints.saving import write_settings

        write_settings(directory, self.tokenizer, self._stored_settings(), self.settings_file)

    @classmethod
    def load(cls, directory, verbose=False, with_model=True):
        """A pipeline saved by :meth:`save`. ``directory`` may also be a
        training run's output folder (its ``model/`` is used). With
        ``verbose``, the folder used is printed on standard error (standard
        output may be a stream of predictions). ``with_model=False`` reads
        the settings and the tokenizer only (``model`` is None): enough for
        :meth:`result`, :meth:`settings` and :meth:`predict` with a loaded
        ``serving`` signature (:mod:`kerasbert_apps.base.serving_cache`)."""
        import importlib
        import sys

        from kerasbert.checkpoints.saving import load_settings

        if with_model:
            importlib.import_module(cls.model_module)  # registers the model's classes for deserialization
        if cls.task:
            from kerasbert_apps.base import heads

            found = heads.settings_path(cls.task, directory)
            if found is not None and found.name != cls.settings_file:
                raise KerasbertError(f"{found.parent}: a {heads.head_of(cls.task, directory).name} {cls.kind}, which "
                                     f"{cls.__name__}.load does not load; kerasbert_apps.{cls.task}.load(folder) "
                                     "loads a folder of any head")
        directory = resolve_model_dir(directory, cls.settings_file, cls.kind)
        if verbose:
            print(f"model: {directory}", file=sys.stderr)
        if with_model:
            model, tokenizer, settings = load_pipeline(directory, cls.settings_file, cls.kind)
        else:
            model, (tokenizer, settings) = None, load_settings(directory, cls.settings_file, cls.kind)
        try:
            pipeline = cls.from_settings(model, tokenizer, settings)
        except (KeyError, TypeError, ValueError) as e:  # a settings file edited by hand, or from another version
            raise KerasbertError(f"{directory / cls.settings_file}: damaged: its settings do not fit a {cls.kind} "
                                 f"({type(e).__name__}: {e})") from e
        if with_model:
            pipeline.check_fits_model(directory)
        return pipeline

    def check_fits_model(self, directory):
        """Refuse, in one line naming the settings file and the field, a
        folder whose settings disagree with its model's weights (a settings
        file edited by hand, or copied from another folder): a label list
        longer or shorter than the labels the model scores (its config's
        ``num_<labels_key>``, e.g. ``num_tags``: one tag short predicts
        silently wrong scores), a ``max_length`` beyond the encoder's
        position embeddings, a vocabulary larger than its token embeddings
        (both fail on the first long text or rare token otherwise)."""
        path = Path(directory) / self.settings_file
        model_file = _model_file(directory)
        scored = _config_count(self.model, f"num_{self.labels_key}")
        if scored is not None and scored != len(self.labels):
            raise KerasbertError(f"{path}: \"{self.labels_key}\" lists {len(self.labels)} labels, but the model "
                                 f"({model_file}) scores {scored}: the settings do not belong to these weights")
        encoder = getattr(self.model, "encoder", None)
        positions = getattr(encoder, "max_sequence_length", None)
        if positions is not None and self.max_length > positions:
            raise KerasbertError(f"{path}: \"max_length\" {self.max_length} is longer than the encoder's {positions} "
                                 f"position embeddings ({model_file})")
        vocabulary = getattr(encoder, "vocabulary_size", None)
        if vocabulary is not None and len(self.tokenizer.vocab) > vocabulary:
            raise KerasbertError(f"{Path(directory) / VOCAB_FILE}: {len(self.tokenizer.vocab)} tokens, but the "
                                 f"encoder ({model_file}) has {vocabulary} token embeddings: the vocabulary does not "
                                 "belong to these weights")

    # ----------------------------------------------------- training hooks
    @classmethod
    def training_labels(cls, train_examples, dev_examples, settings):
        """The label list for a run on these examples (prints what the user
        should know; raises when there is nothing to learn)."""
        raise NotImplementedError

    @classmethod
    def build_model(cls, encoder, labels, settings):
        raise NotImplementedError

    @classmethod
    def for_training(cls, model, tokenizer, labels, settings):
        """The pipeline that a training run saves after each better epoch."""
        return cls(model, tokenizer, labels, max_length=settings.max_length)

    def after_features(self, report, settings):
        """What this head takes from its training data before training, from
        the report :meth:`features` filled (e.g. whether entities nest);
        by default, nothing."""

    @classmethod
    def after_training(cls, model_dir, dev_examples, settings):
        """What this head does to the best pipeline of a finished training
        run (saved in ``model_dir``), e.g. fit its score temperature on dev;
        returns entries for ``metrics.json``. By default, nothing."""
        return {}

    def batches(self, rows, settings, targets=()):
        """Training batches (a ``keras.utils.PyDataset``) of :meth:`features`
        rows; ``targets`` names more row features that go to ``y`` (the
        distillation's ``teacher`` and ``gold``)."""
        raise NotImplementedError

    # ------------------------------------------------- distillation hooks
    #: The model output a student learns from its teacher (None: this
    #: pipeline cannot be distilled).
    soft_target = None

    def rebuilt(self, layers=None, encoder_dtype=None):
        """A pipeline like this one (tokenizer, labels, windows, head weights)
        whose encoder keeps only the transformer layers ``layers`` of this
        one's (:func:`kerasbert.training.distill.student_encoder`; None: all) and runs
        in the Keras dtype policy ``encoder_dtype`` (None: the global policy)."""
        from kerasbert.training.distill import copy_layer_weights
        from kerasbert.training.distill import student_encoder

        if self.lora:  # rebuild from the merged kernels
            return self.merged().rebuilt(layers, encoder_dtype)
        model = self.model
        layers = range(model.encoder.num_layers) if layers is None else layers
        if getattr(model, "layer_mix", False) and len(layers) != model.encoder.num_layers:
            raise KerasbertError("a model whose head mixes all encoder layers (--freeze-encoder) cannot be given "
                                 "fewer encoder layers (distilled)")
        encoder = student_encoder(model.encoder, layers, dtype=encoder_dtype)
        rebuilt = type(model)(encoder, **model.head_config())
        copy_layer_weights(model, rebuilt, skip=(encoder,))
        return type(self).from_settings(rebuilt, self.tokenizer, self.settings())

    def student(self, layers):
        """A distillation run's student: :meth:`rebuilt` with the teacher layers ``layers``, same precision."""
        return self.rebuilt(layers)

    def with_precision(self, precision):
        """This pipeline with its encoder's weights and matmuls in ``precision``
        (one of :data:`PRECISIONS`): ``"bfloat16"`` rebuilds the encoder under
        Keras's ``bfloat16`` policy (LayerNorm and softmax in float32 inside);
        the head and all decoding stay float32; ``"float32"``: this pipeline.
        Fast only with bfloat16 units (AVX512-BF16, AMX) or on GPUs. ``"auto"``:
        bfloat16 on a CPU with them, float32 elsewhere
        (:func:`kerasbert.training.precision.choose_serving_precision`)."""
        from kerasbert.training.precision import choose_serving_precision

        if precision not in ("auto",) + PRECISIONS:
            raise KerasbertError(f"precision must be one of auto, {', '.join(PRECISIONS)}, got {precision!r}")
        precision, _ = choose_serving_precision(precision)
        current = keras_dtype(self.model.encoder)
        if precision == current:
            return self
        return self.rebuilt(encoder_dtype=precision)

    def soft_targets(self, rows, batch_size=64):
        """This (teacher) model's :attr:`soft_target` output for each of
        ``rows`` (training rows of :meth:`features`): a list of float32 arrays,
        one per row, cut to the row's length."""
        from kerasbert.training.batching import BucketedBatches

        inputs = {name: rows[name] for name in ENCODER_INPUTS}
        batches = BucketedBatches(inputs, batch_size, shuffle=False, max_width=self.max_length)
        targets = [None] * len(rows["token_ids"])
        for index in range(len(batches)):
            out = np.asarray(self.model.predict_on_batch(batches[index])[self.soft_target], np.float32)
            for position, row in enumerate(batches.batches[index]):
                targets[row] = out[position, : len(rows["token_ids"][row])]
        return targets


def _text_of(item, index):
    """The text of one item of :meth:`Pipeline.predict`'s input: a string, or a record's ``"text"``."""
    if isinstance(item, str):
        return item
    if isinstance(item, Mapping) and isinstance(item.get("text"), str):
        return item["text"]
    what = "a record without a string \"text\"" if isinstance(item, Mapping) else f"of type {type(item).__name__}"
    raise TypeError(f"texts[{index}] is {what}; predict takes strings or records (dicts) with a \"text\" string")


def _model_file(directory):
    """The file a model folder's model config is read from (``model.keras``, or a LoRA folder's ``model.json``)."""
    return MODEL_FILE if (Path(directory) / MODEL_FILE).exists() else LORA_CONFIG_FILE


def _config_count(model, key):
    """``model``'s config entry ``key`` (an int), None when it has none."""
    try:
        value = model.head_config().get(key)
    except (AttributeError, NotImplementedError):
        return None
    return int(value) if isinstance(value, (int, np.integer)) else None


__all__ = ["GraphRunner", "HostRunner", "Pipeline"]
