"""``kerasbert triples train | evaluate | predict``: a thin layer over the Python API.

Registered through the ``kerasbert.commands`` entry point (see pyproject.toml).
"""

from kerasbert.cli import add_export_options
from kerasbert.cli import print_export
from kerasbert.cli import print_predictions
from kerasbert.cli import write_scores
from kerasbert.settings import add_settings_options
from kerasbert.settings import settings_from_args


def register(subparsers):
    triples = subparsers.add_parser(
        "triples", help="relation-triple extraction: train, evaluate, predict, export",
        description="CasRel-style span-pointer (subject, predicate, object) extraction on a BERT encoder.",
    )
    commands = triples.add_subparsers(dest="triples_command", metavar="COMMAND")
    triples.set_defaults(func=lambda args: triples.print_help() or 2)

    from apps.triples.train import EVAL_MODES
    from apps.triples.train import FIELDS_HELP
    from apps.triples.train import FORMATS
    from apps.triples.train import TriplesTrainConfig

    train = commands.add_parser(
        "train", help="train an extractor on your data",
        description="Train a triple extractor. Settings come from their defaults, then --config FILE "
        "(JSON or TOML, same keys), then the options given here.",
    )
    add_settings_options(train, TriplesTrainConfig, FIELDS_HELP, choices={"eval_mode": EVAL_MODES, "format": FORMATS})
    train.set_defaults(func=cmd_train)

    evaluate = commands.add_parser("evaluate", help="triple-level scores of a trained model on a labelled file")
    evaluate.add_argument("--model", required=True, help="the model folder written by train (OUTPUT/model)")
    evaluate.add_argument("--data", required=True, help="labelled data file (CasRel or DuIE/CMeIE format)")
    evaluate.add_argument("--output", help="write the scores as JSON here (default: beside the data, <data>.scores.json)")
    evaluate.add_argument("--format", default="auto", choices=FORMATS, help="data format")
    evaluate.add_argument("--mode", default="exact", choices=EVAL_MODES,
                          help="match mode of the headline figures and breakdowns (both modes are always reported)")
    evaluate.add_argument("--batch-size", type=int, default=32)
    _threshold_options(evaluate)
    evaluate.set_defaults(func=cmd_evaluate)

    predict = commands.add_parser("predict", help="triples with character offsets, one JSON object per input")
    predict.add_argument("--model", required=True, help="the model folder written by train (OUTPUT/model)")
    predict.add_argument("input", nargs="?", default="-",
                         help="plain-text lines or JSONL with a \"text\" field; - for standard input")
    predict.add_argument("--batch-size", type=int, default=32)
    _threshold_options(predict)
    predict.set_defaults(func=cmd_predict)

    export = commands.add_parser(
        "export", help="write a SavedModel for TF Serving (raw text in, triples with offsets out)",
        description="Write EXPORT_BASE/N/ (TF Serving's versioned layout), atomically; N defaults to the next "
        "free integer and an existing version is never overwritten. Thresholds are baked into the graph.",
    )
    add_export_options(export)
    _threshold_options(export)
    export.set_defaults(func=cmd_export)


def _threshold_options(parser):
    parser.add_argument("--threshold-start", type=float, help="start pointer threshold (default: the model's)")
    parser.add_argument("--threshold-end", type=float, help="end pointer threshold (default: the model's)")


def _load(args):
    from apps.triples.extractor import Extractor

    extractor = Extractor.load(args.model)
    if args.threshold_start is not None or args.threshold_end is not None:
        t = dict(extractor.thresholds)
        for head in ("subject", "object"):
            if args.threshold_start is not None:
                t[f"{head}_start"] = args.threshold_start
            if args.threshold_end is not None:
                t[f"{head}_end"] = args.threshold_end
        extractor = type(extractor)(extractor.model, extractor.tokenizer, extractor.predicates,
                                    extractor.max_length, t, extractor.overlap)
    return extractor


def cmd_train(args):
    from apps.triples.train import TriplesTrainConfig
    from apps.triples.train import train

    train(settings_from_args(TriplesTrainConfig, args))
    return 0


def cmd_evaluate(args):
    from apps.triples.evaluate import format_scores
    from apps.triples.evaluate import score
    from apps.triples.train import read_data
    examples = read_data(args.data, args.format, "data")
    extractor = _load(args)
    predictions = extractor.predict([e.text for e in examples], batch_size=args.batch_size)
    scores = score(examples, predictions, mode=args.mode)
    print(format_scores(scores))
    write_scores(scores, args.data, args.output)
    return 0


def cmd_predict(args):
    return print_predictions(_load(args).predict, args.input, args.batch_size)


def cmd_export(args):
    from apps.triples.export import export_extractor

    path = export_extractor(_load(args), args.output, version=args.version, input=args.input)
    return print_export(path)
