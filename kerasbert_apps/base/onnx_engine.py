"""The ONNX Runtime engine: a pipeline's ONNX export (:func:`kerasbert_apps.base.onnx_export.export_onnx`) run without TensorFlow (:class:`OnnxEngine`).

The export holds the pipeline's serving graph (:meth:`~kerasbert_apps.base.pipeline.Pipeline.infer`)
minus its two string steps (:mod:`kerasbert.serving.onnx`): its inputs are
the host tokenizer's pieces, its windows are cut by
:func:`kerasbert.tokenizers.graph_tokenizer.windows_of_tokens` (the
SavedModel's own windows, from its in-graph tokenizer's same pieces), the
model runs once over them (:class:`~kerasbert_apps.base.runners.ConvertibleRunner`)
and the head's decoding gives numbers (``infer`` without texts). The host
looks up the names and cuts the mentions (:func:`kerasbert.serving.onnx.named_row`)
and makes the app's results (the pipeline's ``result``): the SavedModel's
answers, with the scores within float rounding.

An export folder (``EXPORT_BASE/N/``) holds ``model.onnx``, its description
``kerasbert.json``, and the model folder's settings file and ``vocab.txt``:
:class:`OnnxEngine` loads the app's pipeline from them without its Keras
model (:meth:`~kerasbert_apps.base.pipeline.Pipeline.load` with
``with_model=False``), and imports neither TensorFlow nor Keras.

:func:`load` is what ``kerasbert_apps.ner.load(folder, engine=...)``,
``kerasbert_apps.triples.load`` and ``predict --engine`` call.
"""

from pathlib import Path

#: What ``engine`` (``predict --engine``) may be: ``onnx`` (ONNX Runtime on an
#: ONNX export), ``savedmodel`` (the Keras model folder, run by TensorFlow),
#: ``auto`` (ONNX Runtime where the folder is an ONNX export and onnxruntime
#: is installed, else the model folder).
ENGINES = ("auto", "onnx", "savedmodel")
#: Texts per call of the ONNX graph: the SavedModel's groups (:func:`kerasbert.serving.rows.by_length`).
ROWS_PER_CALL = 8
#: What ``pip`` installs for the engine.
INSTALL = "pip install 'kerasbert[onnx]'"


def onnxruntime_installed():
    """Whether ``onnxruntime`` can be imported (without importing it)."""
    import importlib.util

    return importlib.util.find_spec("onnxruntime") is not None


def chosen_export(task, folder, engine="auto"):
    """The ONNX export folder that ``engine`` (one of :data:`ENGINES`) runs
    for ``folder``, or None where the model folder's own path runs (the
    pipeline, TensorFlow); a folder the engine cannot run is a one-line
    error saying what would."""
    from kerasbert.errors import KerasbertError
    from kerasbert.serving.onnx import MODEL_FILE
    from kerasbert.serving.onnx import export_folder

    if engine not in ENGINES:
        raise KerasbertError(f"engine must be one of {', '.join(ENGINES)}, got {engine!r}")
    found = export_folder(folder)
    if engine == "savedmodel" or (engine == "auto" and found is None):
        if found is not None:
            raise KerasbertError(f"{found}: an ONNX export, which holds no Keras model for TensorFlow: run it with "
                                 f"the onnx engine (--engine onnx), or give the model folder it was exported from")
        return None
    if found is None:
        raise KerasbertError(f"{folder}: no ONNX export ({MODEL_FILE}) here nor in a version folder; write one "
                             f"with: kerasbert {task.name} export --format onnx --model MODEL --output {folder}")
    if not onnxruntime_installed():
        raise KerasbertError(f"{found}: an ONNX export; running it needs ONNX Runtime: {INSTALL}")
    return found


def load(task, folder, engine="auto", verbose=False):
    """The pipeline of ``task`` (a :class:`~kerasbert_apps.base.task.Task`)
    saved in ``folder``, run by ``engine`` (one of :data:`ENGINES`): an
    :class:`OnnxEngine` for an ONNX export (its version folder, or the
    export base: its highest version), else the pipeline of the model folder
    (``task.load``). ``auto`` takes ONNX Runtime when ``folder`` is an ONNX
    export and onnxruntime is installed. A folder that the engine cannot
    run is a one-line error saying what would (:func:`chosen_export`)."""
    found = chosen_export(task, folder, engine)
    return task.load(folder, verbose=verbose) if found is None else OnnxEngine.load(task, found, verbose=verbose)


class OnnxEngine:
    """A pipeline's ONNX export run by ONNX Runtime, without TensorFlow:
    ``predict`` as the pipeline's (strings or records in, the app's results
    out, in order), from the export's graph (:mod:`kerasbert.serving.onnx`).

    Args:
        pipeline: the app's pipeline loaded without its model (its
            settings, tokenizer and ``result``).
        session: the ``onnxruntime.InferenceSession`` of ``model.onnx``.
        description: the export's ``kerasbert.json``.
        folder: the export's version folder.
    """

    #: What ``predict --engine`` and :func:`load` call this engine.
    engine = "onnx"

    def __init__(self, pipeline, session, description, folder):
        self.pipeline = pipeline
        self.session = session
        self.description = description
        self.folder = Path(folder)

    @classmethod
    def load(cls, task, folder, verbose=False, threads=None):
        """The ONNX export ``folder`` (a version folder) of ``task``:
        ``threads`` intra-op threads (default: the cores this process may
        use; :func:`kerasbert.serving.onnx.session`)."""
        import sys

        from kerasbert.errors import KerasbertError
        from kerasbert.serving.onnx import MODEL_FILE
        from kerasbert.serving.onnx import describe
        from kerasbert.serving.onnx import session

        description = describe(folder)
        if description.get("task") != task.name:
            raise KerasbertError(f"{folder}: an ONNX export of a {description.get('task')} model, not of a "
                                 f"{task.name} model")
        pipeline = task.load(folder, with_model=False)
        if verbose:
            precision = description.get("precision", "float32")
            print(f"model: {folder} (ONNX Runtime{', ' + precision if precision != 'float32' else ''})",
                  file=sys.stderr)
        return cls(pipeline, session(Path(folder) / MODEL_FILE, threads), description, folder)

    # -------------------------------------------------------- the pipeline's
    @property
    def tokenizer(self):
        return self.pipeline.tokenizer

    @property
    def labels(self):
        return self.pipeline.labels

    @property
    def head_name(self):
        return self.pipeline.head_name

    def settings(self):
        return self.pipeline.settings()

    def result(self, text, row):
        """The app's result of one text (the pipeline's ``result``)."""
        return self.pipeline.result(text, row)

    def predict(self, texts, batch_size=32, jit_compile=False, serving=None, progress=False):
        """The pipeline's ``predict`` (:meth:`kerasbert_apps.base.pipeline.Pipeline.predict`:
        the same inputs and results) with the rows of :meth:`output_rows`."""
        from kerasbert.errors import KerasbertError
        from kerasbert_apps.base.pipeline import Pipeline

        if jit_compile or serving is not None:
            raise KerasbertError("the onnx engine runs its ONNX graph: jit_compile and serving are the TensorFlow "
                                 "engine's")
        return Pipeline.predict(self, texts, batch_size, progress=progress)

    def output_rows(self, texts, batch_size=32, jit_compile=False, serving=None):
        """The unpadded outputs of each text, named as the SavedModel names
        them (output name -> list), in the input order: texts sorted by
        length and run ``batch_size`` at a time, each batch tokenized at
        once and run in calls of at most :data:`ROWS_PER_CALL` texts of
        similar token counts (as the SavedModel's
        :func:`kerasbert.serving.rows.by_length` groups its rows: one long
        text does not make every short one pay for its padding); each batch
        done moves the open progress bar (:func:`kerasbert.progress.advance`)."""
        from kerasbert.progress import advance
        from kerasbert.serving.onnx import inputs_of
        from kerasbert.serving.onnx import named_row
        from kerasbert.serving.onnx import run
        from kerasbert.serving.rows import unpad

        names, spans = self.description["names"], self.description["spans"]
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        rows = [None] * len(texts)
        for begin in range(0, len(texts), batch_size):
            chunk = order[begin : begin + batch_size]
            pieces = dict(zip(chunk, self.tokenizer.pieces([texts[i] for i in chunk])))
            chunk.sort(key=lambda i: len(pieces[i][0]))
            for at in range(0, len(chunk), ROWS_PER_CALL):
                group = chunk[at : at + ROWS_PER_CALL]
                for i, row in zip(group, unpad(run(self.session, *inputs_of([pieces[i] for i in group])))):
                    rows[i] = named_row(texts[i], row, names, spans)
            advance(len(chunk))
        return rows


# -------------------------------------------------------------------- the command
def add_engine_option(parser):
    """``predict --engine``."""
    parser.add_argument(
        "--engine", choices=ENGINES, default="auto",
        help="onnx: run an ONNX export (export --format onnx; --model its folder or export base) with ONNX Runtime, "
        "without TensorFlow; savedmodel: the model folder with TensorFlow; auto: onnx when --model is an ONNX export "
        "and onnxruntime is installed, else savedmodel, and predict keeps a model folder's ONNX export in its serving "
        "cache where kerasbert[onnx] is installed and the precision is float32 (default: %(default)s)")


def add_format_option(parser):
    """``export --format``."""
    parser.add_argument(
        "--format", choices=("savedmodel", "onnx"), default="savedmodel",
        help="savedmodel: for TF Serving; onnx: model.onnx for ONNX Runtime (the graph takes the host tokenizer's "
        "pieces and gives numbers; predict --engine onnx and kerasbert_apps.APP.load run it without TensorFlow), "
        "with the settings and vocabulary the host needs (default: %(default)s)")


def onnx_engine(task, args):
    """The :class:`OnnxEngine` that ``--engine`` picks for ``--model``
    (:func:`chosen_export`; ``predict`` and ``evaluate``), else None. The
    decoding settings are the export's: options that would change them (the
    triples' ``--threshold-*``) and ``--precision`` other than float32 (or
    auto) are refused in one line."""
    from kerasbert.errors import KerasbertError

    found = chosen_export(task, args.model, getattr(args, "engine", "auto"))
    if found is None:
        return None
    if getattr(args, "precision", "float32") not in ("float32", "auto"):
        raise KerasbertError(f"--precision {args.precision}: an ONNX export runs in the precision it was exported "
                             "in (export --format onnx --precision)")
    engine = OnnxEngine.load(task, found, verbose=True)
    if task.configure(engine.pipeline, args).settings() != engine.settings():
        raise KerasbertError(f"{found}: its decoding settings are part of its ONNX graph; export again with these "
                             f"options (kerasbert {task.name} export --format onnx ...), or run it without them")
    return engine


def export_command(task, args, load_pipeline):
    """``export --format onnx``: check the options that apply to SavedModels
    only (``--precision`` bfloat16; auto is float32 here: int8 changes answers, so it is
    asked for), export the pipeline that ``load_pipeline()`` gives
    (:func:`export_onnx`) and say what was written; returns the exit status."""
    from kerasbert.errors import KerasbertError
    from kerasbert.serving.onnx_quantize import ONNX_PRECISIONS
    from kerasbert_apps.base.onnx_export import export_onnx

    if getattr(args, "input", "text") != "text":
        raise KerasbertError("--input ids is for SavedModels: an ONNX export takes the host tokenizer's pieces")
    if getattr(args, "jit_compile", False):
        raise KerasbertError("--jit-compile is for SavedModels (XLA in TF Serving); ONNX Runtime optimizes the graph "
                             "itself")
    precision = "float32" if args.precision == "auto" else args.precision
    if precision not in ONNX_PRECISIONS:
        raise KerasbertError(f"--precision {args.precision}: an ONNX export is {' or '.join(ONNX_PRECISIONS)}")
    path = export_onnx(load_pipeline(), args.output, version=args.version, precision=precision)
    print_onnx_export(task, path)
    return 0


def print_onnx_export(task, path):
    """Summarise an ONNX export written by ``APP export --format onnx``."""
    import shlex

    from kerasbert.serving.onnx import describe

    info = describe(path)
    print(f"ONNX: {path}")
    for kind in ("inputs", "outputs"):
        items = ", ".join(f"{k} {v['dtype']}{v['shape']}" for k, v in sorted(info[kind].items()))
        print(f"  {kind}: {items}")
    print(f"  checked in ONNX Runtime {info['checked_with_onnxruntime']} against the TensorFlow graph "
          f"(opset {info['opset']})")
    if info.get("precision") == "int8":
        int8 = info["int8"]
        print(f"  int8: the same answers as float32 on {int8['same_answers']} of {int8['inputs']} check inputs; "
              f"score it on labelled data: kerasbert {task.name} evaluate --engine onnx --model "
              f"{shlex.quote(str(path))} --data FILE")
    print(f"  predict: kerasbert {task.name} predict --engine onnx --model {shlex.quote(str(path))} FILE")
    print(f"  python:  kerasbert_apps.{task.name}.load({str(path)!r}).predict([...])")
