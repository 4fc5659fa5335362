"""The ``kerasbert`` command.

The library's own subcommands are ``inspect`` and ``pretrain``. Apps add theirs through the
``kerasbert.commands`` entry-point group: each entry point names a function
``register(subparsers)`` that adds one subcommand (an ``argparse`` parser whose
``func`` default takes the parsed arguments and returns an exit status). The
library never imports an app by name.

Errors the user can act on (:class:`~kerasbert.errors.KerasbertError`, and
an :class:`OSError` for a file that cannot be read or written) are printed as
one message, without a traceback, with exit status 2. Ctrl-C (SIGINT) and
SIGTERM stop a command alike: what it was writing is cleaned up, one line
says so, exit status 130 and 143.
"""

import argparse
import json
import sys
from importlib.metadata import entry_points

ENTRY_POINT_GROUP = "kerasbert.commands"


def _start(argv):
    """Before anything imports TensorFlow: its C++ start-up lines are not for
    CLI users (:mod:`kerasbert.cli.quiet`), unless ``kerasbert --verbose ...`` or
    ``KERASBERT_VERBOSE=1`` asks for them; integrations no command uses are
    not imported (:mod:`kerasbert.cli.lean_import`)."""
    from kerasbert.cli import lean_import
    from kerasbert.cli import quiet

    lean_import.skip_optional_integrations()
    options = argv[: next((i for i, a in enumerate(argv) if not a.startswith("-")), len(argv))]
    if not (quiet.verbose() or "--verbose" in options):
        quiet.quiet_tensorflow_import()


def cmd_inspect(args):
    from kerasbert.checkpoints.loader import inspect_checkpoint

    info = inspect_checkpoint(args.path)
    if args.json:
        print(json.dumps(info, indent=2, ensure_ascii=False))
    else:
        print(format_inspection(info, verbose=args.verbose))
    return 1 if info["problems"] else 0


def cmd_pretrain(args):
    from kerasbert.training.pretraining import pretrain
    from kerasbert.training.settings import PretrainSettings
    from kerasbert.training.settings import settings_from_args

    pretrain(settings_from_args(PretrainSettings, args))
    return 0


FAMILY_NAMES = {
    "bert": "BERT",
    "albert": "ALBERT (Google layout)",
    "albert_brightmart": "ALBERT (brightmart albert_zh layout)",
    "electra": "ELECTRA discriminator",
}


def describe_factorization(config):
    parts = []
    if config["embedding_size"] != config["hidden_size"]:
        parts.append(f"embeddings {config['embedding_size']}")
    if config["family"].startswith("albert"):
        parts.append(
            f"{config['num_hidden_groups'] * config['inner_group_num']} shared layer(s) "
            f"called {config['num_layers']} times"
        )
    return "".join(", " + p for p in parts)


def format_inspection(info, verbose=False):
    lines = [f"checkpoint: {info['path']}"]
    if "layout" in info:
        config = info["config"]
        lines += [
            f"layout:     {info['layout']}",
            f"config:     {info['config_file']}",
            f"weights:    {info['weights']}",
            f"vocab:      {info['vocab_file']}",
            "model:      {family_name}, {num_layers} layers, hidden {hidden_size}, {num_heads} heads, "
            "intermediate {intermediate_size}, vocab {vocab_size}, max positions "
            "{max_position_embeddings}, activation {hidden_act}".format(
                **config, family_name=FAMILY_NAMES[config["family"]]
            )
            + describe_factorization(config),
            f"parameters: {info['parameters']:,} (encoder"
            + (" + masked-LM head)" if info["masked_lm_head"] else ")"),
            f"mapped:     {len(info['mapping'])} variables",
        ]
        if verbose:
            width = max((len(m["keras"]) for m in info["mapping"]), default=0)
            for m in info["mapping"]:
                lines.append(f"  {m['keras']:<{width}}  <-  {m['checkpoint']} {m['shape']}")
        if info["ignored"]:
            lines.append(f"ignored:    {len(info['ignored'])} variables")
            reasons = {}
            for name, why in info["ignored"].items():
                reasons.setdefault(why, []).append(name)
            for why, names in reasons.items():
                shown = ", ".join(names[:3]) + (f", ... ({len(names) - 3} more)" if len(names) > 3 else "")
                lines.append(f"  {why}: {shown}")
    if info["problems"]:
        lines.append(f"PROBLEMS ({len(info['problems'])}):")
        lines += [f"  {p}" for p in info["problems"]]
    else:
        lines.append("status:     OK, loads with kerasbert.load_encoder")
    return "\n".join(lines)


def build_parser():
    parser = argparse.ArgumentParser(
        prog="kerasbert",
        description="NER and relation-triple extraction on BERT-family encoders (Keras 3).",
    )
    parser.add_argument("--verbose", action="store_true", dest="tensorflow_log",
                        help="show TensorFlow's C++ log lines from its start-up (also: KERASBERT_VERBOSE=1)")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    inspect = subparsers.add_parser(
        "inspect",
        help="describe a checkpoint folder and check that it loads",
        description="Detect the layout (official or Hugging Face) and the family (BERT / "
        "RoBERTa-wwm, ALBERT in Google's or brightmart's layout, ELECTRA), read the config, "
        "count parameters, show which checkpoint variable feeds which Keras weight and what "
        "is ignored. Exit status 1 if anything is wrong.",
    )
    inspect.add_argument("path", help="checkpoint folder or prefix")
    inspect.add_argument("--json", action="store_true", help="print the report as JSON")
    inspect.add_argument("-v", "--verbose", action="store_true", help="list every variable mapping")
    inspect.set_defaults(func=cmd_inspect)
    from kerasbert.training.settings import PretrainSettings
    from kerasbert.training.settings import add_settings_options

    pretrain = subparsers.add_parser(
        "pretrain",
        help="masked-LM pre-training of a BERT encoder on your text, continued or from scratch",
        description="Train a BERT checkpoint's encoder and masked-LM head further on plain text (--checkpoint), or "
        "a new one from scratch (--from-scratch: a WordPiece vocabulary learnt from the text, every CJK character "
        "a token, and a randomly initialised BERT of --size), on files streamed line by line (.gz too), with "
        "BERT's masking (15% of the tokens, whole words; 80% [MASK], 10% random, 10% kept); an epoch is one pass "
        "over the text unless --steps-per-epoch caps it; the held-out masked-token accuracy after each epoch goes "
        "to OUTPUT/history.jsonl, the result to OUTPUT/encoder in Google's official layout, for --checkpoint of "
        "the train commands. Settings: their defaults, then --settings FILE, then these options.",
    )
    add_settings_options(pretrain, PretrainSettings)
    pretrain.set_defaults(func=cmd_pretrain)
    for entry_point in entry_points(group=ENTRY_POINT_GROUP):
        entry_point.load()(subparsers)
    return parser


class Terminated(KeyboardInterrupt):
    """SIGTERM (``docker stop``, systemd, Kubernetes, ``kill``), raised in the
    main thread like Ctrl-C's KeyboardInterrupt, so that everything a
    KeyboardInterrupt cleans up is cleaned up alike: a staging folder or
    temporary file removed (:mod:`kerasbert.files.atomic`), a run's folder released
    with its backup kept for ``--resume``."""


def _terminate(signum, frame):
    import signal

    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # once: the clean-up is not interrupted in its turn
    raise Terminated()


def _stop_again_where_it_can_stop(unraisable, hook):
    """``sys.unraisablehook`` while a command runs. A signal's handler runs at
    whatever Python code the main thread is in, and where that is a finaliser
    (``__del__``, a weakref callback: TensorFlow and h5py objects have them)
    Python prints the exception and drops it. The command then went on as if
    nothing was asked, and a SIGTERM, ignored from its first delivery on, left
    it running to its end. Such a stop is delivered again, as a signal, a
    moment later (from a thread: a signal tripped here would be handled in
    this hook, and dropped again), so it is raised at the next line that can
    raise it."""
    import _thread
    import signal
    import threading

    stop = unraisable.exc_value
    if not (isinstance(stop, KeyboardInterrupt) and _in_main_thread()):
        return hook(unraisable)
    signum = signal.SIGTERM if isinstance(stop, Terminated) else signal.SIGINT
    if signum == signal.SIGTERM:
        signal.signal(signal.SIGTERM, _terminate)

    def deliver():
        if _running:  # not once the command has ended: the stop is for it, not for its caller
            _thread.interrupt_main(signum)

    timer = threading.Timer(0.02, deliver)
    timer.daemon = True
    timer.start()


_running = False


def main(argv=None):
    argv = sys.argv[1:] if argv is None else list(argv)
    _start(argv)
    import signal

    from kerasbert.errors import KerasbertError

    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    previous = signal.signal(signal.SIGTERM, _terminate) if _in_main_thread() else None
    previous_hook = sys.unraisablehook
    sys.unraisablehook = lambda unraisable: _stop_again_where_it_can_stop(unraisable, previous_hook)
    global _running
    _running = True
    try:
        return int(args.func(args) or 0)
    except KerasbertError as e:
        print(f"kerasbert: error: {e}", file=sys.stderr)
        return 2
    except OSError as e:
        # A file the user named cannot be read or written (a full disk, no
        # permission, a path through a file): the path and the reason, one
        # line. Where kerasbert knows more it says so itself (WriteError).
        where = f"{e.filename}: " if e.filename else ""
        print(f"kerasbert: error: {where}{e.strerror or e}", file=sys.stderr)
        return 2
    except Terminated:
        print("kerasbert: terminated (SIGTERM)", file=sys.stderr)
        return 143
    except KeyboardInterrupt:
        print("kerasbert: interrupted", file=sys.stderr)
        return 130
    finally:
        _running = False
        sys.unraisablehook = previous_hook
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)


def _in_main_thread():
    import threading

    return threading.current_thread() is threading.main_thread()
