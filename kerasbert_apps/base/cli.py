"""The apps' command line, written once: ``kerasbert APP train | evaluate | predict | export``.

:func:`add_task_commands` adds an app's subcommand and its four standard
commands from its :class:`~kerasbert_apps.base.task.Task`: ``train`` takes every
training setting as an option (generated from the settings dataclass:
:func:`kerasbert.training.settings.add_settings_options`), ``evaluate`` the same
reader options as ``train`` (declared once, in ``Task.read_settings``), and
the app adds only what is its own (:meth:`Task.add_options`). An app's
``register(subparsers)`` (its ``kerasbert.commands`` entry point) calls it and
may add more commands (the NER ``demo``).

Every command that takes ``--model`` accepts a pipeline folder or a training
run's output folder (``OUTPUT``, whose ``model/`` is then used; the folder
used is printed).
"""

import dataclasses
import json
import os
import re
import sys

from kerasbert.errors import InputDataError
from kerasbert.errors import KerasbertError
from kerasbert.training.settings import add_settings_options
from kerasbert.training.settings import settings_from_args
from kerasbert_apps.base.onnx_engine import add_engine_option
from kerasbert_apps.base.onnx_engine import add_format_option
from kerasbert_apps.base.onnx_engine import export_command
from kerasbert_apps.base.onnx_engine import onnx_engine

MODEL_HELP = "the model folder written by train (OUTPUT/model), or the training output folder OUTPUT"


def add_task_commands(subparsers, task):
    """Add ``task.name`` with ``train``, ``evaluate``, ``predict`` and
    ``export`` to the ``kerasbert`` parser's ``subparsers``; returns the
    app's own subparsers (to add more commands)."""
    parser = subparsers.add_parser(task.name, help=task.help, description=task.description)
    commands = parser.add_subparsers(dest=f"{task.name}_command", metavar="COMMAND")
    parser.set_defaults(func=lambda args: parser.print_help() or 2)

    train = commands.add_parser(
        "train", help=f"train {task.trains} on your data",
        description=f"Train {task.trains}. Settings come from their defaults, then --settings FILE "
        "(JSON or TOML, same keys), then the options given here.",
    )
    add_settings_options(train, task.train_settings)
    train.set_defaults(func=lambda args: _train(task, args))

    if task.distill_settings is not None:
        distill = commands.add_parser(
            "distill", help="train a smaller, faster student of a trained model (DistilBERT style)",
            description="Train a student with fewer encoder layers from a trained model (the teacher): the "
            "student's encoder starts from every other teacher layer (and the teacher's embeddings and head), and "
            "learns the teacher's scores on the training texts (and on --unlabeled texts) together with the gold "
            "labels. OUTPUT/model is an ordinary model folder for evaluate, predict and export. Settings as for "
            "train: defaults, then --settings FILE, then these options.",
        )
        add_settings_options(distill, task.distill_settings)
        distill.set_defaults(func=lambda args: _distill(task, args))

    evaluate = commands.add_parser("evaluate", help="scores of a trained model on a labelled file")
    evaluate.add_argument("--model", required=True, help=MODEL_HELP)
    evaluate.add_argument("--data", required=True, help="labelled data file")
    evaluate.add_argument("--output", metavar="FILE", help="also write the scores as JSON to FILE (atomically); "
                          "without it evaluate only prints them and writes nothing")
    evaluate.add_argument("--batch-size", type=int, default=32, help="texts per batch (default: %(default)s)")
    add_settings_options(evaluate, task.read_settings, settings_file=False)
    add_engine_option(evaluate)
    _precision_option(evaluate)
    quiet_option(evaluate)
    task.add_options(evaluate, "evaluate")
    evaluate.set_defaults(func=lambda args: _evaluate(task, args))

    predict = commands.add_parser(
        "predict", help="predictions with character offsets, one JSON object per input",
        description="Predict on each line of INPUT and print one JSON object per line, in order: a plain-text "
        "line as {\"line\": N, \"text\": ...} with the results, a JSON line with every field it had (\"id\", "
        "\"meta\", ...) and the results added (a result replaces a field of the same name). On a terminal, the "
        "lines done, their rate and the time left are shown on standard error (--quiet: not).")
    predict.add_argument("--model", required=True, help=MODEL_HELP)
    predict.add_argument("input", nargs="?", default="-",
                         help="plain-text lines or JSONL with a \"text\" field; - for standard input")
    predict.add_argument("--batch-size", type=int, default=32, help="texts per batch (default: %(default)s)")
    if len(task.output_formats) > 1:
        predict.add_argument("--output-format", choices=list(task.output_formats), default="jsonl",
                             help=task.output_formats_help)
    predict.add_argument("--no-cache", action="store_true",
                         help="build the model and trace its serving function in this command, without the serving "
                              "cache (by default the first predict of a model folder keeps its export, about the size of the "
                              "model, under $KERASBERT_CACHE or ~/.cache/kerasbert/serving, and later predicts run "
                              "it instead: an ONNX export run by ONNX Runtime, without TensorFlow, with --engine auto "
                              "and kerasbert[onnx] installed, else a SavedModel; "
                              "KERASBERT_SERVING_CACHE=0 in the environment: --no-cache for every predict)")
    add_engine_option(predict)
    _precision_option(predict)
    quiet_option(predict)
    task.add_options(predict, "predict")
    predict.set_defaults(func=lambda args: _predict(task, args))

    export = commands.add_parser(
        "export", help="write a SavedModel for TF Serving (raw text in, results with offsets out), or an ONNX export",
        description="Write EXPORT_BASE/N/ (TF Serving's versioned layout), atomically; N defaults to the next "
        "free integer and an existing version is never overwritten. With --format onnx: model.onnx for ONNX "
        "Runtime, checked against the TensorFlow graph before it is written.",
    )
    export.add_argument("--model", required=True, help=MODEL_HELP)
    export.add_argument("--output", required=True, metavar="EXPORT_BASE",
                        help="export base folder; the SavedModel (or ONNX export) goes to EXPORT_BASE/N/")
    export.add_argument("--version", type=int, help="version number N (default: the next free integer)")
    add_format_option(export)
    export.add_argument("--input", choices=("text", "ids"), default="text",
                        help="text: raw strings in, tokenization in the graph (needs TF-Text ops, which TF Serving "
                        "links); ids: token_ids/segment_ids/padding_mask in, core TensorFlow ops only")
    export.add_argument("--jit-compile", nargs="?", const="model", choices=("model", "head"), default=False,
                        help="compile with XLA (text input only): 'model' (the default) the whole model, 'head' "
                        "the head after the encoder (the crf/softmax heads: BiLSTM, emissions, Viterbi) with the "
                        "encoder left to oneDNN. Padded to a few shapes, which the warmup requests compile when "
                        "the server loads it; TF Serving must be started with --xla_cpu_compilation_enabled=true "
                        "(see 'Which export for which CPU' in the docs, docs/serving-speed.md)")
    _precision_option(export, export=True)
    task.add_options(export, "export")
    export.set_defaults(func=lambda args: _export(task, args))
    return commands


def register_heads(subparsers):
    """``kerasbert heads`` (a ``kerasbert.commands`` entry point): every
    registered head of every task with the package it comes from."""
    parser = subparsers.add_parser(
        "heads", help="list the heads of every task and the package each comes from",
        description="List the heads --head offers (the first of a task is its default), each with the package "
        "it comes from (kerasbert, or the distribution whose kerasbert.heads entry point registered it), the "
        "train options it adds and its settings file; then any head plugin that failed to load, and why. "
        "KERASBERT_NO_PLUGINS=1 loads no head of another package.")
    parser.set_defaults(func=cmd_heads)


def cmd_heads(args):
    from kerasbert_apps.base import heads

    for task in heads.TASKS:
        listed = heads.heads(task)
        width = max(len(h.name) for h in listed) + 2
        print(f"{task} (kerasbert {task} train --head NAME; the first is the default):")
        for head in listed:
            fields = dataclasses.fields(head.settings) if head.settings else ()
            options = ", ".join("--" + f.name.replace("_", "-") for f in fields) or "none"
            print(f"  {head.name:<{width}}from {heads.package(head)}; train options: {options}")
            if head.help:
                print(f"  {'':<{width}}{head.help}")
    failed = heads.failed_plugins()
    if failed:
        print("left out (failed to load):")
        for dist, point, value, error in failed:
            print(f"  {point} = {value} (from {dist}): {error}")
    return 0


def add_labelled_file_command(commands, name, task, func, help, description):
    """Add command ``name`` (an app's own, e.g. ``ner calibrate``, ``triples
    tune``) that reads a trained model and a labelled file: ``--model``,
    ``--data``, ``--batch-size`` and the task's reader options; returns its
    parser (to add the command's own options)."""
    parser = commands.add_parser(name, help=help, description=description)
    parser.add_argument("--model", required=True, help=MODEL_HELP)
    parser.add_argument("--data", required=True, help="labelled data file (dev)")
    parser.add_argument("--batch-size", type=int, default=32, help="texts per batch (default: %(default)s)")
    add_settings_options(parser, task.read_settings, settings_file=False)
    quiet_option(parser)
    parser.set_defaults(func=func)
    return parser


def quiet_option(parser):
    """``--quiet``: no progress bar (:func:`show_progress` reads it)."""
    parser.add_argument("--quiet", action="store_true",
                        help="no progress on standard error (without it, the texts done, their rate and the time "
                        "left are shown while the command runs, only when standard error is a terminal: nothing is "
                        "added to a log file or a pipe)")


def show_progress(args):
    """What a command's progress bar is drawn as (:func:`kerasbert.progress.progress`'s ``show``):
    ``"auto"`` (on a terminal only), or False with ``--quiet``."""
    return False if getattr(args, "quiet", False) else "auto"


def _precision_option(parser, export=False):
    from kerasbert_apps.base.pipeline import PRECISIONS

    parser.add_argument(
        "--precision", choices=("auto",) + PRECISIONS + (("int8",) if export else ()), default="float32",
        help="bfloat16: the encoder's weights and matmuls in bfloat16 (the head and decoding stay float32)"
        + ("; the export is half the size" if export else "; to see what a bfloat16 export would give")
        + ". Fast only on CPUs with AVX512-BF16 or AMX (grep -o 'avx512_bf16\\|amx_bf16' /proc/cpuinfo), slower "
        "than float32 elsewhere; auto: bfloat16 on a CPU with them, float32 elsewhere"
        + (" (this machine's CPU: choose explicitly for a model served on another)" if export else "")
        + ("; int8 (--format onnx only; an ONNX export is float32 otherwise, auto included): the matrix products "
           "in int8 with int8 weights and the embeddings stored in int8 (ONNX Runtime's dynamic quantization), "
           "answers close to float32's but not the same: score the export with evaluate --engine onnx"
           if export else "")
        + "; see 'Which export for which CPU' in the docs, docs/serving-speed.md (default: %(default)s)")


def _serving_precision(args):
    """Resolve ``args.precision`` for this CPU
    (:func:`kerasbert.training.precision.choose_serving_precision`): ``auto``
    chosen, with one line on standard error saying what and why; an explicit
    bfloat16 on a CPU without bfloat16 units kept, with a line that it is slower here."""
    from kerasbert.training.precision import choose_serving_precision

    args.precision, line = choose_serving_precision(args.precision)
    if line:
        print(line, file=sys.stderr)


def _load(task, args):
    return _configured(task, task.load(args.model, verbose=True), args)


def _configured(task, pipeline, args):
    """``pipeline`` with the command's options applied: the task's own
    (:meth:`~kerasbert_apps.base.task.Task.configure`) and ``--precision``."""
    return task.configure(pipeline, args).with_precision(args.precision)


def _train(task, args):
    task.train(settings_from_args(task.train_settings, args))
    return 0


def _distill(task, args):
    task.distill(settings_from_args(task.distill_settings, args))
    return 0


def _evaluate(task, args):
    def load():  # after the data is read: bad data is reported before a model is loaded
        engine = onnx_engine(task, args)  # --engine: ONNX Runtime on an ONNX export, without TensorFlow
        if engine is not None:
            return engine
        _serving_precision(args)
        return _load(task, args)

    settings = settings_from_args(task.read_settings, args)
    scores = task.evaluate(load, args.data, settings, batch_size=args.batch_size, progress=show_progress(args))
    print(task.format_scores(scores))
    if args.output:
        write_scores(scores, args.output)
    return 0


def _predict(task, args):
    import contextlib

    from kerasbert_apps.base.serving_cache import cached_predict
    from kerasbert_apps.base.serving_cache import switched_off

    fmt = getattr(args, "output_format", "jsonl")
    onnx = onnx_engine(task, args)  # --engine: ONNX Runtime on an ONNX export, without TensorFlow
    onnx = onnx and onnx.predict
    if onnx is None:
        _serving_precision(args)
    no_cache = args.no_cache or switched_off() or onnx is not None
    with contextlib.ExitStack() as stack:
        if onnx is not None:
            predict = onnx
        elif no_cache:
            predict = _load(task, args).predict
        else:
            predict = cached_predict(task, args.model, args.precision, lambda pipeline: task.configure(pipeline, args),
                                     engine=args.engine, stack=stack)
        return print_predictions(predict, args.input, args.batch_size,
                                 record=lambda result: task.output_record(result, fmt), array=task.output_formats[fmt],
                                 progress=show_progress(args))


def _export(task, args):
    if args.precision == "int8" and args.format != "onnx":
        raise KerasbertError("--precision int8 is for --format onnx (ONNX Runtime's int8 products); a SavedModel "
                             "is float32 or bfloat16")
    if args.format == "onnx":
        return export_command(task, args, lambda: task.configure(task.load(args.model, verbose=True), args))  # float32: int8 comes after the check
    _serving_precision(args)
    path = _load(task, args).export(args.output, version=args.version, input=args.input, jit_compile=args.jit_compile)
    return print_export(path)


def read_records(source, repaired=None):
    """The inputs to predict on, from a file or ``-`` (standard input): each
    line is plain text, or a JSON object with a ``"text"`` field when it
    starts with ``{``; read one line at a time
    (:func:`kerasbert.files.data.stream_lines`: a byte-order mark dropped, LF,
    CRLF or CR line ends). Yields ``(line number, text, fields)``: ``fields``
    is the JSON object (every field it has, ``"text"`` included), or
    ``{"line": N, "text": ...}`` for a plain-text line. Bad lines raise
    :class:`~kerasbert.errors.InputDataError` naming the line. A JSON text
    with a lone surrogate (``"\\ud800"``: valid JSON, but no Unicode text: it
    cannot be encoded) gets U+FFFD in its place (one code point for one:
    offsets are unchanged); its line number is appended to ``repaired`` (a
    list) when given."""
    from kerasbert.files.data import stream_lines

    if source == "-":
        lines = stream_lines("<stdin>", handle=sys.stdin.buffer)
    else:
        lines = stream_lines(source)
    name = "<stdin>" if source == "-" else source
    for number, line in lines:
        if line.lstrip().startswith("{"):
            try:
                record = json.loads(line)
            except json.JSONDecodeError as e:
                raise InputDataError(name, number, f"invalid JSON: {e.msg}")
            if not isinstance(record.get("text"), str):
                raise InputDataError(name, number, 'a JSON line needs a string "text" field')
            text = record["text"]
            try:
                text.encode("utf-8")
            except UnicodeEncodeError:
                text = record["text"] = LONE_SURROGATE.sub("\ufffd", text)
                if repaired is not None:
                    repaired.append(number)
            yield number, text, record
        else:
            yield number, line, {"line": number, "text": line}


def read_texts(source, repaired=None):
    """``(line number, text)`` of each input of :func:`read_records`."""
    for number, text, _ in read_records(source, repaired):
        yield number, text


#: A UTF-16 surrogate that is not half of a pair (only a JSON escape can put one in a Python string here).
LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def repaired_note(source, lines):
    """The one line that says which input lines had lone surrogates replaced (None: none)."""
    if not lines:
        return None
    name = "<stdin>" if source == "-" else source
    shown = ", ".join(map(str, lines[:5])) + (f" and {len(lines) - 5} more" if len(lines) > 5 else "")
    return (f"note: {name}: {len(lines)} text(s) held a lone surrogate (a \\ud800-\\udfff escape that is no "
            f"character), replaced with U+FFFD: line {shown}")


def count_lines(source):
    """The lines of the file ``source`` as :func:`read_records` reads them
    (LF, CRLF or CR line ends; gzip too), counted from its bytes; None for
    standard input (``-``) or a file that cannot be read (its error comes
    when it is read)."""
    import gzip

    if source == "-":
        return None
    try:
        handle = gzip.open(source, "rb") if str(source).endswith(".gz") else open(source, "rb")
    except OSError:
        return None
    count, last, pending_cr = 0, b"", False
    try:
        with handle:
            while True:
                block = handle.read(1 << 20)
                if not block:
                    break
                # a CRLF split between two blocks is one line end: the CR was counted, skip the LF
                count += block.count(b"\n") + block.count(b"\r") - block.count(b"\r\n")
                count -= pending_cr and block.startswith(b"\n")
                pending_cr = block.endswith(b"\r")
                last = block[-1:]
    except (OSError, EOFError, ValueError):  # a damaged .gz: its error comes when it is read
        return None
    return count + (last not in (b"", b"\n", b"\r"))


def with_fields(record, fields):
    """An output ``record`` (the app's result as ``--output-format`` writes
    it) with the input's ``fields`` kept: beside the results (a result field
    replaces an input field of the same name), or in a Label Studio task's
    ``data`` (where Label Studio keeps a task's fields)."""
    if isinstance(record.get("data"), dict) and "predictions" in record:
        return {**record, "data": {**fields, **record["data"]}}
    return {**fields, **record}


def print_predictions(predict, source, batch_size, chunk=256, record=None, array=False, progress=False):
    """Run ``predict(list_of_texts, batch_size=...)`` over the inputs of
    ``source`` (see :func:`read_records`) ``chunk`` lines at a time and print
    one JSON object per input line, in order: ``record(result)`` (default:
    the result) with the input's fields (:func:`with_fields`: a JSON line's
    every field, a plain-text line's ``"line"``), one per line, or with
    ``array`` the items of one JSON array (one per line, still written as they
    come). A line that cannot be read stops the command with its error, after
    the lines before it got their output; texts whose lone surrogates were
    replaced are named in a note (standard error). ``progress``: the lines
    done, their rate and the time left on standard error
    (:func:`kerasbert.progress.progress`'s ``show``)."""
    from kerasbert.progress import progress as progress_bar
    from kerasbert.progress import shown
    from kerasbert.progress import write

    pending = []
    written = 0
    repaired = []

    def flush():
        nonlocal written
        if pending:
            lines = []
            results = predict([text for _, text, _ in pending], batch_size=batch_size)
            for (_, _, fields), result in zip(pending, results):
                line = json.dumps(with_fields(record(result) if record else result, fields), ensure_ascii=False)
                if array:
                    line = ("[" if written == 0 else ",") + line
                lines.append(line + "\n")
                written += 1
            write("".join(lines))
            sys.stdout.flush()
            pending.clear()

    total = count_lines(source) if shown(progress) else None
    with progress_bar(total, "predict", unit="lines", show=progress):
        try:
            for item in read_records(source, repaired):
                pending.append(item)
                if len(pending) >= chunk:
                    flush()
        except InputDataError:
            flush()  # the lines read before the bad one
            raise
        flush()
    if array:
        print("]" if written else "[]")
    note = repaired_note(source, repaired)
    if note:
        print(note, file=sys.stderr)
    return 0


def write_scores(scores, output):
    """Write evaluation ``scores`` as JSON to the file ``output``, atomically,
    and say where; returns the path. A file that cannot be written is a
    one-line error (after the scores were printed)."""
    from pathlib import Path

    from kerasbert.errors import WriteError
    from kerasbert.files.atomic import atomic_write_text

    out = Path(output)
    try:
        atomic_write_text(out, json.dumps(scores, indent=2, ensure_ascii=False) + "\n")
    except WriteError as e:
        raise KerasbertError(f"{e}; choose another --output") from e
    except OSError as e:
        raise KerasbertError(f"cannot write the scores to {out} ({e.strerror or e}); choose another --output") from e
    print(f"scores written to {out}")
    return out


def print_export(path):
    """Summarise an export written by ``APP export``."""
    import shlex
    import urllib.parse

    from kerasbert.serving.saved_model import describe
    from kerasbert_apps.base.export import serving_model_name

    info = describe(path)
    print(f"SavedModel: {path}")
    for kind in ("inputs", "outputs"):
        items = ", ".join(f"{k} {v['dtype']}{v['shape']}" for k, v in sorted(info[kind].items()))
        print(f"  {kind}: {items}")
    print(f"  ops: {len(info['ops'])} types, all core TensorFlow" + (" or TF-Text ops TF Serving links" if info["input_mode"] == "text" else ""))
    print(f"  warmup: {path}/assets.extra/tf_serving_warmup_requests")
    if info.get("precision", "float32") != "float32":
        print(f"  precision: the encoder's weights and matmuls in {info['precision']}; head and decoding float32")
    jit = info.get("jit_compile")
    if jit:
        compiled = "the head after the encoder runs" if jit == "head" else "the model runs"
        print(f"  jit_compile: {compiled} compiled by XLA; the warmup requests compile each padded shape at load "
              "(TF Serving needs --xla_cpu_compilation_enabled=true)")
    base = os.path.abspath(os.path.dirname(path))
    # The name the warmup requests carry; one TF Serving's image passes through its shell unharmed.
    name = info.get("model_name") or serving_model_name(base)
    xla = " --xla_cpu_compilation_enabled=true" if jit else ""
    # Shell-quoted: a base path with spaces or quotes is one argument.
    print(f"  serve: docker run -p 8501:8501 -p 8500:8500 -v {shlex.quote(f'{base}:/models/{name}')} "
          f"-e {shlex.quote(f'MODEL_NAME={name}')} tensorflow/serving{xla}")
    url = f"localhost:8501/v1/models/{urllib.parse.quote(name)}:predict"
    print(f"  then:  curl -X POST {shlex.quote(url)} -d '{{\"instances\": [{{\"text\": \"...\"}}]}}'")
    return 0
