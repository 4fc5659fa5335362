"""Every command's --help renders: no stray ``%%`` (argparse %-formats an
option's help, not a description, so the same text needs ``%`` in one place
and ``%%`` in the other), no ``%(default)s`` left unformatted."""

import argparse

from kerasbert.cli import build_parser


def all_parsers(parser, name="kerasbert"):
    """``(command, parser)`` for ``parser`` and every subcommand under it."""
    yield name, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub_name, sub in action.choices.items():
                yield from all_parsers(sub, f"{name} {sub_name}")


def test_every_commands_help_renders_percent_signs():
    parsers = dict(all_parsers(build_parser()))
    # the apps' commands are there (entry points), so a missing app cannot make this pass by itself
    for command in ("kerasbert pretrain", "kerasbert inspect", "kerasbert ner train", "kerasbert ner calibrate",
                    "kerasbert ner distill", "kerasbert triples tune", "kerasbert triples export"):
        assert command in parsers
    for command, parser in parsers.items():
        text = parser.format_help()
        assert "%%" not in text, command
        assert "%(" not in text, command
    assert "15% of the tokens" in " ".join(parsers["kerasbert pretrain"].format_help().split())
