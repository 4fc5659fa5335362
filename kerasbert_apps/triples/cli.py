"""``kerasbert triples train | evaluate | predict | export | tune``.

Registered through the ``kerasbert.commands`` entry point (see
pyproject.toml). The four standard commands come from the triples task
(:data:`kerasbert_apps.triples.train.TRIPLES`, :func:`kerasbert_apps.base.cli.add_task_commands`);
this module adds ``tune`` (decision thresholds picked on dev,
:mod:`kerasbert_apps.triples.tuning`).
"""

from kerasbert_apps.base.cli import add_labelled_file_command
from kerasbert_apps.base.cli import add_task_commands
from kerasbert_apps.base.cli import show_progress


def register(subparsers):
    from kerasbert_apps.base.heads import heads
    from kerasbert_apps.triples.train import TRIPLES
    from kerasbert_apps.triples.tuning import DEFAULT_VALUES

    pairs = "; ".join(f"{h.name} head: " + " and ".join(f"--threshold-{o}" for o, _ in h.options)
                      for h in heads("triples") if h.options)
    commands = add_task_commands(subparsers, TRIPLES)
    tune = add_labelled_file_command(
        commands, "tune", TRIPLES, cmd_tune,
        help="pick a model's decision thresholds on a labelled file (dev)",
        description=f"Score the model on a labelled file (your dev set) at every pair of threshold values ({pairs}), "
        "print precision, recall and F1 for each, and write the pair with the best F1 into the model folder, so "
        "that predict, evaluate and exports made afterwards use it. Lower thresholds trade precision for recall. "
        "One pass over the file per pair.",
    )
    tune.add_argument("--values", default=",".join(f"{v:g}" for v in DEFAULT_VALUES),
                      help="comma-separated values each of the two thresholds takes; 0.5 is always added "
                      "(default: %(default)s)")
    tune.add_argument("--dry-run", action="store_true", help="print the scores only; leave the model folder as it is")


def cmd_tune(args):
    from kerasbert.progress import write
    from kerasbert_apps.triples.train import TRIPLES
    from kerasbert_apps.triples.tuning import format_tuning
    from kerasbert_apps.triples.tuning import tune_thresholds
    from kerasbert_apps.triples.tuning import tuned
    from kerasbert.errors import KerasbertError
    from kerasbert.checkpoints.saving import resolve_model_dir
    from kerasbert.training.settings import settings_from_args

    try:
        values = [float(v) for v in args.values.split(",") if v.strip()]
    except ValueError:
        raise KerasbertError(f"--values must be comma-separated numbers, got {args.values!r}")
    if not values or not all(0.0 < v < 1.0 for v in values):
        raise KerasbertError(f"--values must be probabilities in (0, 1), got {args.values!r}")
    settings = settings_from_args(TRIPLES.read_settings, args)
    examples = TRIPLES.read(args.data, settings, "data")
    extractor = TRIPLES.load(args.model, verbose=True)
    print(f"scoring ({settings.eval_mode} match):")
    result = tune_thresholds(extractor, examples, lambda ex, pred: TRIPLES.score(ex, pred, settings), values=values,
                             batch_size=args.batch_size, log=lambda line: write(line + "\n"),
                             progress=show_progress(args))
    print(format_tuning(result, args.data))
    if args.dry_run:
        print("--dry-run: the model folder is unchanged")
        return 0
    directory = resolve_model_dir(args.model, extractor.settings_file, extractor.kind)
    tuned(extractor, result).save_settings(directory)
    print(f"written: {directory / extractor.settings_file}")
    return 0
