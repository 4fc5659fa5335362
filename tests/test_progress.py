"""Progress of long work (:mod:`kerasbert.progress`): on a terminal, every long command shows the
items done, their rate and the time left on standard error; with standard error in a file (a
log, a pipe) it shows nothing, ``--quiet`` turns it off, and standard output holds the results
alone either way. The Python API draws the same bar when asked (``progress=True``).

The commands run in a fresh process whose standard error is a pseudo-terminal (``os.openpty``),
as a user's terminal is, on tiny untrained models (the toy checkpoint)."""

import fcntl
import json
import os
import re
import shutil
import struct
import subprocess
import sys
import termios

import pytest

from conftest import untrained_tiny_folders

CONLL = "Peter NNP B-NP B-PER\nlives VBZ B-VP O\nin IN B-PP O\nParis NNP B-NP B-LOC\n. . O O\n\n" \
        "Anna NNP B-NP B-PER\nsaw VBD B-VP O\nBerlin NNP B-NP B-LOC\n. . O O\n"
WORDS = "Peter lives in Paris Anna saw Berlin the of and works for likes Siemens Munich".split()
#: A finished bar: ``N/N [elapsed<left, R texts/s]`` -- the count, the time left, the rate.
FINISHED = re.compile(r"(\d+)/\1 \[\d\d:\d\d<\d\d:\d\d, +[\d.]+ (texts|lines)/s\]")


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    """An NER tagger (crf head) and a triples extractor (casrel head), untrained, on the toy
    checkpoint; the files the commands read."""
    import random

    tmp = untrained_tiny_folders(tmp_path_factory.mktemp("progress"))
    rng = random.Random(0)
    (tmp / "texts.txt").write_text("".join(" ".join(rng.choice(WORDS) for _ in range(rng.randint(3, 20))) + "\n"
                                           for _ in range(600)), encoding="utf-8")
    (tmp / "dev.conll").write_text((CONLL + "\n") * 100, encoding="utf-8")
    triples = [{"text": "Alan Bean likes Siemens.", "triple_list": [["Alan Bean", "likes", "Siemens"]]},
               {"text": "Anna works for Siemens in Munich.", "triple_list": [["Anna", "works_for", "Siemens"]]}]
    (tmp / "triples.json").write_text(json.dumps(triples * 60), encoding="utf-8")
    return tmp


#: Each long command, as ``kerasbert ARGS`` (the folder filled in), with the unit its bar counts.
COMMANDS = {
    "ner predict": (["ner", "predict", "--model", "{ner}", "{texts.txt}"], "lines"),
    "ner evaluate": (["ner", "evaluate", "--model", "{ner}", "--data", "{dev.conll}"], "texts"),
    "ner calibrate": (["ner", "calibrate", "--model", "{calibrated}", "--data", "{dev.conll}"], "texts"),
    "ner select": (["ner", "select", "--model", "{ner}", "--pool", "{texts.txt}", "--budget", "5", "--output",
                    "{selected.json}"], "texts"),
    "triples predict": (["triples", "predict", "--model", "{triples}", "{texts.txt}"], "lines"),
    "triples evaluate": (["triples", "evaluate", "--model", "{triples}", "--data", "{triples.json}"], "texts"),
    "triples tune": (["triples", "tune", "--model", "{triples}", "--data", "{triples.json}", "--values", "0.3,0.6",
                      "--dry-run"], "texts"),
    "ner predict --quiet": (["ner", "predict", "--quiet", "--model", "{ner}", "{texts.txt}"], None),
}

SCRIPT = """
import sys
from kerasbert.cli import main

for name, argv in COMMANDS:
    print("=== " + name, file=sys.stderr, flush=True)
    print("=== " + name, flush=True)
    status = main(argv)
    sys.stdout.flush()
    sys.stderr.flush()
    print("=== status %d" % status, file=sys.stderr, flush=True)
"""


def run_commands(folder, terminal):
    """Run :data:`COMMANDS` in one fresh process, standard output to a file and standard error
    to a pseudo-terminal (``terminal``) or to a file; returns ``(stdout, {name: its stderr})``."""
    calibrated = folder / "calibrated"  # calibrate writes its temperature into the folder: a fresh copy each time
    shutil.rmtree(calibrated, ignore_errors=True)
    shutil.copytree(folder / "ner", calibrated)
    names = {"ner": folder / "ner", "triples": folder / "triples", "calibrated": calibrated}
    commands = [(name, [str(names.get(a[1:-1], folder / a[1:-1])) if a.startswith("{") else a for a in argv])
                for name, (argv, _) in COMMANDS.items()]
    script = f"COMMANDS = {commands!r}\n" + SCRIPT
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", KERASBERT_SERVING_CACHE="0", KERASBERT_NO_PLUGINS="1")
    with open(folder / f"out-{terminal}.txt", "w+", encoding="utf-8") as out:
        if terminal:
            reader, writer = os.openpty()
            fcntl.ioctl(writer, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 120, 0, 0))  # a 120-column terminal
            process = subprocess.Popen([sys.executable, "-c", script], stdout=out, stderr=writer,
                                       stdin=subprocess.DEVNULL, env=env)
            os.close(writer)
            err = b""
            while True:  # read as it comes: a full terminal buffer would stop the process
                try:
                    chunk = os.read(reader, 1 << 16)
                except OSError:  # the process closed its end
                    break
                if not chunk:
                    break
                err += chunk
            os.close(reader)
            status = process.wait(timeout=600)
        else:
            with open(folder / "err.txt", "w+b") as err_file:
                status = subprocess.run([sys.executable, "-c", script], stdout=out, stderr=err_file,
                                        stdin=subprocess.DEVNULL, env=env, timeout=600).returncode
                err_file.seek(0)
                err = err_file.read()
        out.seek(0)
        stdout = out.read()
    err = err.decode("utf-8", errors="replace").replace("\r\n", "\n")
    assert status == 0 and err.count("=== status 0\n") == len(COMMANDS), err[-3000:]
    return stdout, {name: err.split(f"=== {name}\n", 1)[1].split("=== status", 1)[0] for name in COMMANDS}


@pytest.fixture(scope="module")
def on_terminal(models):
    return run_commands(models, terminal=True)


@pytest.fixture(scope="module")
def in_a_file(models):
    return run_commands(models, terminal=False)


@pytest.mark.parametrize("name", [name for name, (_, unit) in COMMANDS.items() if unit])
def test_a_long_command_shows_its_progress_on_a_terminal(on_terminal, name):
    """The last state of the bar: every item done (``N/N``), the time left and the rate."""
    _, errors = on_terminal
    err = errors[name]
    finished = FINISHED.findall(err)
    assert finished, f"{name}: no finished progress bar on the terminal:\n{err[-2000:]}"
    assert {unit for _, unit in finished} == {COMMANDS[name][1]}, finished
    assert "\r" in err  # drawn in place, as a bar is


def test_the_bar_counts_every_input(on_terminal):
    _, errors = on_terminal
    assert FINISHED.search(errors["ner predict"]).group(1) == "600"  # the lines of the file
    assert FINISHED.search(errors["ner evaluate"]).group(1) == "200"  # its sentences
    assert FINISHED.search(errors["triples tune"]).group(1) == str(9 * 120)  # 3 x 3 pairs x 120 texts
    assert FINISHED.search(errors["ner select"]).group(1) == str(600 + 20)  # the pool, then 5 x 4 candidates


def test_quiet_and_a_file_get_no_progress_and_the_same_results(on_terminal, in_a_file):
    stdout_terminal, errors_terminal = on_terminal
    stdout_file, errors_file = in_a_file
    assert not FINISHED.search(errors_terminal["ner predict --quiet"])
    for name, err in errors_file.items():
        assert "\r" not in err and "/s]" not in err and "%|" not in err, (name, err[-2000:])
    # standard output holds the results alone, the same on a terminal and in a file
    assert stdout_terminal == stdout_file
    predicted = stdout_file.split("=== ner predict\n", 1)[1].split("=== ", 1)[0].splitlines()
    assert [json.loads(line)["line"] for line in predicted] == list(range(1, 601))


def test_the_python_api_draws_the_bar_when_asked(models, capsys):
    import kerasbert_apps.ner

    tagger = kerasbert_apps.ner.load(models / "ner")
    texts = [f"Peter lives in Paris {i}" for i in range(70)]
    capsys.readouterr()
    plain = tagger.predict(texts, batch_size=16)
    assert capsys.readouterr().err == ""  # off by default
    shown = tagger.predict(texts, batch_size=16, progress=True)
    err = capsys.readouterr().err
    assert shown == plain
    assert re.search(r"predict: 100%.*70/70 \[", err), err
    assert tagger.predict(texts[:3], progress="auto") == plain[:3]  # standard error is no terminal here
    assert capsys.readouterr().err == ""


def test_pretrains_counting_pass_shows_its_progress_when_asked(capsys):
    from kerasbert.training.pretraining import count_sequences

    assert count_sequences(iter(range(1000)), 10, progress=True) == 990
    err = capsys.readouterr().err
    assert re.search(r"counting the text: 990 sequences \[", err), err
    assert count_sequences(iter(range(100)), 10, cap=50, progress=True) == 50
    assert re.search(r"counting the text: 100%.*50/50 \[", capsys.readouterr().err)
    assert count_sequences(iter(range(100)), 0) == 100  # "auto": no terminal here
    assert capsys.readouterr().err == ""


def test_progress_takes_true_false_or_auto():
    from kerasbert.progress import shown

    assert shown(True) and not shown(False)
    with pytest.raises(ValueError, match="progress must be True, False or 'auto', got 'yes'"):
        shown("yes")
