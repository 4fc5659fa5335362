"""Heads of other packages (the ``kerasbert.heads`` entry points, :mod:`kerasbert_apps.base.heads`):
one that fails to import is left out with one warning line and everything else works; an option
that would clash with the task's or another head's is refused in one line naming both; each head
says which package it comes from.

The plugins here are fake distributions: a ``.dist-info`` folder with an ``entry_points.txt``
and the modules it names, in a temporary folder put on ``sys.path`` (in this process) or on
``PYTHONPATH`` (for the command line, in a fresh process).
"""

import copy
import dataclasses
import os
import re
import subprocess
import sys

import pytest

from kerasbert.errors import KerasbertError
from kerasbert.training.settings import setting
from kerasbert_apps.base import heads
from kerasbert_apps.ner.train import NER  # noqa: F401  (the task's own options are known to the registry)
from kerasbert_apps.triples.train import TRIPLES  # noqa: F401

KIT_NER = ("crf", "softmax", "global-pointer", "biaffine")

GOOD = '''
import dataclasses
from kerasbert.training.settings import setting
from kerasbert_apps.base.heads import Head, register

@dataclasses.dataclass
class FakeSettings:
    fake_size: int = setting(8, "the fake head's size")

register(Head(name="fake-head", task="ner", pipeline="{module}.pipeline:FakeTagger", settings_file="fake.json",
              help="a fake head", settings=FakeSettings))
'''
CLASHING = '''
import dataclasses
from kerasbert.training.settings import setting
from kerasbert_apps.base.heads import Head, register

@dataclasses.dataclass
class ClashSettings:
    pointer_size: int = setting(16, "my pointer size")

register(Head(name="clasher", task="ner", pipeline="{module}.pipeline:Clasher", settings_file="clash.json",
              settings=ClashSettings))
'''


def fake_distribution(folder, name, modules):
    """A distribution ``name`` in ``folder`` whose ``kerasbert.heads`` entry
    points are ``modules`` (entry point name -> module source); returns the
    module name of each entry point."""
    info = folder / f"{name}-0.1.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 0.1\n", encoding="utf-8")
    points, names = [], {}
    for point, source in modules.items():
        module = f"{name}_{point}"
        (folder / f"{module}.py").write_text(source.replace("{module}", module), encoding="utf-8")
        points.append(f"{point} = {module}")
        names[point] = module
    (info / "entry_points.txt").write_text("[kerasbert.heads]\n" + "\n".join(points) + "\n", encoding="utf-8")
    return names


@pytest.fixture
def registry(monkeypatch):
    """The registry as it is (the kit's heads, any installed plugin), restored after the test;
    entry points not loaded yet."""
    heads.discover()
    monkeypatch.setattr(heads, "_REGISTRY", copy.deepcopy(heads._REGISTRY))
    plugins = heads._PLUGINS
    monkeypatch.setattr(heads, "_PLUGINS", {"loaded": False, "failed": [], "origin": dict(plugins["origin"])})
    return heads


def test_a_plugin_that_fails_is_left_out_with_one_warning_line(registry, tmp_path, monkeypatch, capsys):
    fake_distribution(tmp_path, "fakeplug", {"broken": "raise RuntimeError('boom at import')\n", "good": GOOD,
                                             "clash": CLASHING})
    monkeypatch.syspath_prepend(str(tmp_path))
    registry.load_plugins()
    warnings = capsys.readouterr().err.splitlines()
    assert len(warnings) == 2, warnings
    broken, clash = sorted(warnings)
    assert broken.startswith("kerasbert: warning: head plugin broken = fakeplug_broken (from fakeplug) is left out")
    assert broken.endswith("RuntimeError: boom at import")
    assert "clash = fakeplug_clash (from fakeplug)" in clash and "'clasher'" in clash
    assert "'global-pointer' head (from kerasbert)" in clash  # both named
    names = registry.names("ner")
    assert names[:4] == KIT_NER and "fake-head" in names and "clasher" not in names  # the kit's first
    assert registry.package(registry.get("ner", "fake-head")) == "fakeplug"
    assert {registry.package(registry.get("ner", n)) for n in KIT_NER} == {"kerasbert"}
    assert [failed[:2] for failed in registry.failed_plugins()] == [("fakeplug", "broken"), ("fakeplug", "clash")]
    with pytest.raises(KerasbertError, match=r"unknown ner head 'nope'; .*left out: broken \(from fakeplug\)"):
        registry.get("ner", "nope")
    registry.load_plugins()  # once: no second warning
    assert capsys.readouterr().err == ""


@dataclasses.dataclass
class _Dropout:
    dropout: float = setting(0.2, "my dropout")


@dataclasses.dataclass
class _PointerSize:
    pointer_size: int = setting(16, "my pointer size")


@dataclasses.dataclass
class _NoCrf:
    no_crf: bool = setting(False, "a flag --crf's negation already is")


@pytest.mark.parametrize("settings, options, both", [
    (_Dropout, (), r"declares the option 'dropout' \(--dropout\), which is already an option of ner train"),
    (_PointerSize, (), r"declares the option 'pointer_size' \(--pointer-size\), which the 'global-pointer' head "
                       r"\(from kerasbert\) already declares"),
    (_NoCrf, (), r"declares the option 'no_crf' \(--no-crf\), which the 'crf' head \(from kerasbert\) already declares"),
], ids=["task-option", "other-head", "negated-flag"])
def test_a_clashing_option_is_refused_at_registration_in_one_line(registry, settings, options, both):
    head = heads.Head(name="my-head", task="ner", pipeline="my_package.pipeline:MyTagger",
                      settings_file="my_head.json", settings=settings, options=options)
    with pytest.raises(KerasbertError, match=r"^the ner head 'my-head' \(from my_package\) " + both) as error:
        registry.register(head)
    assert "\n" not in str(error.value)
    assert "my-head" not in registry.names("ner")


def test_heads_whose_settings_inherit_one_declaration_share_its_option(registry):
    """Two heads whose settings dataclasses subclass one that declares an option (the span
    heads' shared threshold) share that option; the same name declared anew is refused."""

    @dataclasses.dataclass
    class SharedMargin:
        shared_margin: float = setting(0.0, "a margin both heads read")

    @dataclasses.dataclass
    class First(SharedMargin):
        first_size: int = setting(1, "the first head's size")

    @dataclasses.dataclass
    class Second(SharedMargin):
        second_size: int = setting(1, "the second head's size")

    @dataclasses.dataclass
    class Anew:
        shared_margin: float = setting(0.5, "my own margin")

    for name, settings in (("first-head", First), ("second-head", Second)):
        registry.register(heads.Head(name=name, task="ner", pipeline=f"pkg_{name[:-5]}.pipeline:P",
                                     settings_file=f"{name}.json", settings=settings))
    assert {"first-head", "second-head"} <= set(registry.names("ner"))
    with pytest.raises(KerasbertError, match=r"declares the option 'shared_margin' \(--shared-margin\), which the "
                                             r"'first-head' head \(from pkg_first\) already declares"):
        registry.register(heads.Head(name="anew-head", task="ner", pipeline="pkg_anew.pipeline:P",
                                     settings_file="anew.json", settings=Anew))


def test_a_clashing_evaluate_option_is_refused(registry):
    head = heads.Head(name="my-extractor", task="triples", pipeline="my_package.pipeline:Mine",
                      settings_file="mine.json", options=(("entity", "my threshold"),))
    with pytest.raises(KerasbertError, match=r"reads the option 'entity', which the 'gplinker' head \(from "
                                             r"kerasbert\) already reads"):
        registry.register(head)
    # options named after the head are welcome
    registry.register(dataclasses.replace(head, options=(("my_entity", "my threshold"),)))
    assert registry.names("triples") == ("casrel", "gplinker", "my-extractor")


BROKEN_CLI = r"""
from kerasbert.cli import main

print("STATUS", main(["heads"]), flush=True)
for argv in (["ner", "train", "--help"], ["--help"]):
    try:
        main(argv)
    except SystemExit as stop:
        print("STATUS", stop.code, flush=True)
"""


def test_a_broken_plugin_leaves_the_command_line_working(tmp_path):
    """``kerasbert`` in a fresh process with a plugin that raises on import and one that works:
    ``kerasbert heads`` lists every head with its package and the one left out, ``ner train
    --help`` offers every head, ``kerasbert --help`` works; one warning line in all."""
    fake_distribution(tmp_path, "fakeplug", {"broken": "raise ImportError('needs a module that is not there')\n",
                                             "good": GOOD})
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")]),
               TF_CPP_MIN_LOG_LEVEL="3")
    env.pop("KERASBERT_NO_PLUGINS", None)
    run = subprocess.run([sys.executable, "-c", BROKEN_CLI], capture_output=True, text=True, env=env, cwd=tmp_path)
    assert run.returncode == 0, run.stderr[-3000:]
    assert run.stdout.count("STATUS 0") == 3, run.stdout[-3000:]
    warnings = [line for line in run.stderr.splitlines() if line.startswith("kerasbert:")]
    assert warnings == ["kerasbert: warning: head plugin broken = fakeplug_broken (from fakeplug) is left out: "
                        "ImportError: needs a module that is not there"]
    listing = run.stdout.split("STATUS 0")[0]
    for name in KIT_NER + ("casrel", "gplinker"):
        assert f"  {name} " in listing and "from kerasbert;" in listing
    assert "fake-head" in listing and "from fakeplug; train options: --fake-size" in listing
    assert "left out (failed to load):\n  broken = fakeplug_broken (from fakeplug): ImportError" in listing
    train_help = " ".join(run.stdout.split("STATUS 0")[1].split())
    assert "usage: kerasbert [-h] [--verbose] COMMAND" in run.stdout.split("STATUS 0")[2]
    choices = re.search(r"--head \{([^}]*)\}", train_help).group(1).split(",")
    assert choices[:4] == list(KIT_NER) and "fake-head" in choices  # (and any head installed here)
    assert "fake-head (from fakeplug): a fake head" in train_help and "--fake-size" in train_help


def test_a_head_refused_once_the_tasks_options_are_known_is_named_when_asked_for(registry, monkeypatch, capsys):
    """A head registered before its task's options were known and refused then: ``--head`` lets its
    name through argparse, and the check names it with the clash, in one line."""
    import argparse

    from kerasbert.training.settings import add_settings_options
    from kerasbert_apps.ner.train import NerTrainSettings

    base = NerTrainSettings.__mro__[1]  # the task's own settings, before the heads' were added
    monkeypatch.setattr(heads, "_TASK_FLAGS", {})
    registry.register(heads.Head(name="late-head", task="ner", pipeline="my_package.pipeline:Late",
                                 settings_file="late.json", settings=_Dropout))
    settings_class = registry.train_settings_class("ner", base)
    assert "is left out" in capsys.readouterr().err
    parser = argparse.ArgumentParser()
    add_settings_options(parser, settings_class)
    args = parser.parse_args(["--head", "late-head", "--train", "t", "--dev", "d", "--output", "o"])
    assert args.head == "late-head"
    assert "late-head" not in parser.format_help()  # not offered
    settings = settings_class(head=args.head, train="t", dev="d", output="o")
    with pytest.raises(KerasbertError, match=r"^the ner head 'late-head' was left out when the heads were loaded: "
                                             r"the ner head 'late-head' \(from my_package\) declares the option "
                                             r"'dropout' \(--dropout\), which is already an option of ner train"):
        settings.check()
    with pytest.raises(SystemExit):
        parser.parse_args(["--head", "no-such-head"])  # a name nobody registered: argparse's invalid choice


TASK_CLASHING = '''
import dataclasses
from kerasbert.training.settings import setting
from kerasbert_apps.base.heads import Head, register

@dataclasses.dataclass
class SpanSettings:
    dropout: float = setting(0.2, "my dropout")

register(Head(name="clash-span", task="ner", pipeline="{module}.pipeline:ClashSpan", settings_file="clash_span.json",
              settings=SpanSettings))
'''

ASKED_FOR = r"""
import sys
from kerasbert.cli import main

for head in ("clash-span", "clasher", "broken", "fake-head-typo"):
    print("=== " + head, file=sys.stderr, flush=True)
    try:
        status = main(["ner", "train", "--head", head])
    except SystemExit as stop:
        status = stop.code
    print("=== status", status, file=sys.stderr, flush=True)
"""


def test_a_head_left_out_is_named_with_its_reason_when_asked_for(tmp_path):
    """``ner train --head NAME`` for a head whose plugin was left out -- its option clashes with
    the task's or with another head's (its registration refused), or its module failed to
    import -- is one ``kerasbert: error:`` line naming it
    and why, without argparse's usage (it used to end in ``invalid choice`` after the whole
    usage, the reason only in a warning further up). A name nobody registered is still
    argparse's ``invalid choice`` with the choices."""
    fake_distribution(tmp_path, "fakeplug", {"span": TASK_CLASHING, "clash": CLASHING, "good": GOOD,
                                             "broken": "raise ImportError('needs a module that is not there')\n"})
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")]),
               TF_CPP_MIN_LOG_LEVEL="3")
    env.pop("KERASBERT_NO_PLUGINS", None)
    run = subprocess.run([sys.executable, "-c", ASKED_FOR], capture_output=True, text=True, env=env, cwd=tmp_path)
    assert run.returncode == 0, run.stderr[-3000:]
    asked = {}
    for part in run.stderr.split("=== ")[1:]:
        head, _, rest = part.partition("\n")
        if not head.startswith("status"):
            asked[head] = rest
    statuses = re.findall(r"=== status (\d+)", run.stderr)
    assert statuses == ["2"] * 4, run.stderr[-3000:]
    expected = {
        "clash-span": "the ner head 'clash-span' was left out when the heads were loaded: the ner head 'clash-span' "
                      "(from fakeplug_span) declares the option 'dropout' (--dropout), which is already an option of ner "
                      "train; name it after the head (e.g. clash_span_dropout)",
        "clasher": "the ner head 'clasher' was left out when the heads were loaded: the ner head 'clasher' (from "
                   "fakeplug_clash) declares the option 'pointer_size' (--pointer-size), which the 'global-pointer' "
                   "head (from kerasbert) already declares; name it after the head (e.g. clasher_pointer_size)",
        "broken": "the ner head 'broken' was left out when the heads were loaded: the head plugin broken = "
                  "fakeplug_broken (from fakeplug) failed to load: ImportError: needs a module that is not there",
    }
    for head, message in expected.items():
        errors = [line for line in asked[head].splitlines() if line.startswith("kerasbert: error:")]
        assert errors == [f"kerasbert: error: {message}"], asked[head]
        assert "usage:" not in asked[head], asked[head]
    typo = asked["fake-head-typo"]
    assert "usage:" in typo and "argument --head: invalid choice: 'fake-head-typo'" in typo
    assert "'clash-span'" not in typo.split("invalid choice")[1]  # the choices offered are the heads that work
    assert "'fake-head'" in typo.split("invalid choice")[1]


def test_how_to_add_a_head_quotes_the_real_files():
    """Every code block of docs/add-a-head.md that starts with ``# <file>`` quotes that file:
    its lines (but blank ones and ``# ...`` elisions) appear in the file, in order."""
    from conftest import REPO_ROOT

    page = (REPO_ROOT / "docs" / "add-a-head.md").read_text(encoding="utf-8")
    quoted = 0
    for block in re.findall(r"```(?:python|toml)\n# ([\w./-]+\.(?:py|toml))\n(.*?)```", page, re.S):
        path, body = block
        source = (REPO_ROOT / path).read_text(encoding="utf-8").splitlines()
        at = 0
        for line in body.splitlines():
            if not line.strip() or line.strip().startswith("# ..."):
                continue
            try:
                at = source.index(line.rstrip(), at) + 1
            except ValueError:
                pytest.fail(f"docs/add-a-head.md quotes {path} with a line it does not have (in that order): {line!r}")
        quoted += 1
    assert quoted >= 9
