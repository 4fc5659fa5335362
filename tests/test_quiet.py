"""kerasbert.cli.quiet: TensorFlow's C++ start-up lines are dropped, every other line is kept, in order.
(The CLI in a fresh process, quiet and with ``--verbose`` / ``KERASBERT_VERBOSE``: test_checkpoint.py's CLI tests.)"""

import os

from kerasbert.cli import quiet  # As TensorFlow 2.21 writes them (times and thread ids vary).

STARTUP = [
    b"WARNING: All log messages before absl::InitializeLog() is called are written to STDERR",
    b"I0000 00:00:1795747403.603299    9459 port.cc:153] oneDNN custom operations are on. You may see slightly "
    b"different numerical results due to floating-point round-off errors from different computation orders.",
    b"I0000 00:00:1795747403.603782    9459 cudart_stub.cc:31] Could not find cuda drivers on your machine, GPU "
    b"will not be used.",
    b"I0000 00:00:1795747403.677019    9459 cpu_feature_guard.cc:227] This TensorFlow binary is optimized to use "
    b"available CPU instructions in performance-critical operations.",
    b"To enable the following instructions: AVX2 AVX512F FMA, in other operations, rebuild TensorFlow with the "
    b"appropriate compiler flags.",
]
OTHER = [
    b"E0000 00:00:1795747403.603299    9459 port.cc:153] something else went wrong",
    b"W0000 00:00:1795747403.603299    9459 loader.cc:12] oneDNN custom operations are on.",  # another file
    b"Traceback (most recent call last):",
    b"oneDNN custom operations are on.",  # without absl's prefix
]


def test_startup_lines_are_recognised_and_nothing_else():
    assert [line for line in STARTUP if not quiet.is_startup_line(line)] == []
    assert [line for line in OTHER if quiet.is_startup_line(line)] == []


def test_the_block_drops_startup_lines_and_keeps_the_rest_in_order(capfd):
    mixed = [STARTUP[0], OTHER[0], STARTUP[1], OTHER[2], STARTUP[3], STARTUP[4], OTHER[3]]
    with quiet.startup_lines_dropped():
        for line in mixed:
            os.write(2, line + b"\n")
    assert capfd.readouterr().err.encode().splitlines() == [OTHER[0], OTHER[2], OTHER[3]]


def test_verbose_reads_the_environment(monkeypatch):
    for value, expected in (("1", True), ("yes", True), ("0", False), ("", False)):
        monkeypatch.setenv(quiet.VERBOSE_VARIABLE, value)
        assert quiet.verbose() is expected


def test_the_cli_is_quiet_unless_asked(monkeypatch):
    """kerasbert.cli installs the filter unless ``kerasbert --verbose ...`` or
    ``KERASBERT_VERBOSE`` asks for everything (a subcommand's own --verbose
    does not count)."""
    from kerasbert import cli

    calls = []
    monkeypatch.setattr(quiet, "quiet_tensorflow_import", lambda: calls.append(1))
    monkeypatch.delenv(quiet.VERBOSE_VARIABLE, raising=False)
    for argv, installed in ((["inspect", "x"], True), (["inspect", "x", "--verbose"], True),
                            (["--verbose", "inspect", "x"], False)):
        calls.clear()
        cli._start(argv)
        assert bool(calls) is installed, argv
    monkeypatch.setenv(quiet.VERBOSE_VARIABLE, "1")
    calls.clear()
    cli._start(["inspect", "x"])
    assert not calls
