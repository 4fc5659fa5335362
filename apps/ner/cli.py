"""``kerasbert ner train | evaluate | predict``: a thin layer over the Python API.

Registered through the ``kerasbert.commands`` entry point (see pyproject.toml).
"""

import argparse
import dataclasses
import json
import sys
from pathlib import Path


def register(subparsers):
    ner = subparsers.add_parser("ner", help="named-entity recognition: train, evaluate, predict",
                                description="BERT -> BiLSTM -> CRF named-entity recognition.")
    commands = ner.add_subparsers(dest="ner_command", metavar="COMMAND")
    ner.set_defaults(func=lambda args: ner.print_help() or 2)

    from apps.ner.train import FIELDS_HELP
    from apps.ner.train import NerTrainConfig

    train = commands.add_parser(
        "train", help="train a tagger on your data",
        description="Train an NER tagger. Settings come from their defaults, then --config FILE "
        "(JSON or TOML, same keys), then the options given here.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    train.add_argument("--config", help="JSON or TOML file of settings")
    defaults = NerTrainConfig()
    for field in dataclasses.fields(NerTrainConfig):
        flag = "--" + field.name.replace("_", "-")
        default = getattr(defaults, field.name)
        if isinstance(default, bool):
            train.add_argument(flag, dest=field.name, action=argparse.BooleanOptionalAction, default=None,
                               help=f"{FIELDS_HELP[field.name]} (default: {default})")
        else:
            kwargs = {}
            if field.name == "precision":
                kwargs["choices"] = ["float32", "mixed_bfloat16", "mixed_float16"]
            if field.name == "strategy":
                kwargs["choices"] = ["default", "mirrored"]
            train.add_argument(flag, dest=field.name, type=type(default), default=None,
                               help=f"{FIELDS_HELP[field.name]} (default: {default!r})", **kwargs)
    train.set_defaults(func=cmd_train)

    evaluate = commands.add_parser("evaluate", help="entity-level scores of a trained model on a labelled file")
    evaluate.add_argument("--model", required=True, help="the model folder written by train (OUTPUT/model)")
    evaluate.add_argument("--data", required=True, help="labelled data file")
    evaluate.add_argument("--output", help="write the scores as JSON here (default: beside the data, <data>.scores.json)")
    evaluate.add_argument("--format", default="auto", help="data format (auto, conll, jsonl, parallel)")
    evaluate.add_argument("--batch-size", type=int, default=32)
    evaluate.set_defaults(func=cmd_evaluate)

    predict = commands.add_parser("predict", help="entities with character offsets, one JSON object per input")
    predict.add_argument("--model", required=True, help="the model folder written by train (OUTPUT/model)")
    predict.add_argument("input", nargs="?", default="-",
                         help="plain-text lines or JSONL with a \"text\" field; - for standard input")
    predict.add_argument("--batch-size", type=int, default=32)
    predict.set_defaults(func=cmd_predict)


def cmd_train(args):
    from apps.ner.train import NerTrainConfig
    from apps.ner.train import train

    config = NerTrainConfig.from_file(args.config) if args.config else NerTrainConfig()
    for field in dataclasses.fields(NerTrainConfig):
        value = getattr(args, field.name, None)
        if value is not None:
            setattr(config, field.name, value)
    train(config)
    return 0


def cmd_evaluate(args):
    from apps.ner.data import read_ner_file
    from apps.ner.evaluate import format_scores
    from apps.ner.evaluate import score
    from apps.ner.tagger import Tagger
    from kerasbert.training import atomic_write_text

    tagger = Tagger.load(args.model)
    result = read_ner_file(args.data) if args.format == "auto" else read_ner_file(args.data, format=args.format)
    print(f"data: {args.data}\n  " + result.report.summary().replace("\n", "\n  "))
    predictions = tagger.predict([e.text for e in result.examples], batch_size=args.batch_size)
    scores = score(result.examples, predictions)
    print(format_scores(scores))
    out = Path(args.output) if args.output else Path(str(args.data) + ".scores.json")
    atomic_write_text(out, json.dumps(scores, indent=2) + "\n")
    print(f"scores written to {out}")
    return 0


def read_texts(source):
    """Texts from plain-text lines or JSONL objects with "text" (per line, decided
    by the first non-blank character). Yields (line number, text)."""
    from kerasbert.errors import InputDataError

    name = "<stdin>" if source == "-" else source
    handle = sys.stdin if source == "-" else open(source, encoding="utf-8")
    try:
        for number, line in enumerate(handle, 1):
            line = line.rstrip("\n").rstrip("\r")
            if line.lstrip().startswith("{"):
                try:
                    record = json.loads(line)
                except json.JSONDecodeError as e:
                    raise InputDataError(name, number, f"invalid JSON: {e.msg}")
                if not isinstance(record.get("text"), str):
                    raise InputDataError(name, number, 'a JSON line needs a string "text" field')
                yield number, record["text"]
            else:
                yield number, line
    except UnicodeDecodeError as e:
        raise InputDataError(name, None, f"not UTF-8 ({e.reason})")
    finally:
        if handle is not sys.stdin:
            handle.close()


def cmd_predict(args):
    from apps.ner.tagger import Tagger

    tagger = Tagger.load(args.model)
    batch = []

    def flush():
        for result in tagger.predict([text for _, text in batch], batch_size=args.batch_size):
            print(json.dumps(result, ensure_ascii=False), flush=False)
        sys.stdout.flush()
        batch.clear()

    for item in read_texts(args.input):
        batch.append(item)
        if len(batch) >= 256:
            flush()
    flush()
    return 0
