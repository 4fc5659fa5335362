"""``kerasbert triples train | evaluate | predict | export``.

Registered through the ``kerasbert.commands`` entry point (see
pyproject.toml). The commands come from the triples task
(:data:`apps.triples.train.TRIPLES`, :func:`apps.base.cli.add_task_commands`).
"""

from apps.base.cli import add_task_commands


def register(subparsers):
    from apps.triples.train import TRIPLES

    add_task_commands(subparsers, TRIPLES)
