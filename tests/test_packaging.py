"""The wheel installs ``kerasbert`` and ``kerasbert_apps``, never a top-level ``apps``.

Many user projects have a package named ``apps`` (every Django project): a
wheel that installed one would shadow it, or be shadowed. The source folders
are named as the packages they install (``kerasbert/``, ``kerasbert_apps/``).
"""

import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest


@pytest.fixture(scope="module")
def wheel(tmp_path_factory):
    out = tmp_path_factory.mktemp("wheel")
    root = Path(__file__).resolve().parents[1]
    # Built from a copy: a stale build/ in the checkout would leak old files into the wheel.
    source = out / "source"
    shutil.copytree(root, source, ignore=shutil.ignore_patterns(
        ".git", ".venv", "build", "dist", "runs", "site", "*.egg-info", "__pycache__", ".pytest_cache", ".gl", ".whl"))
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
                    "-w", str(out), str(source)], check=True, capture_output=True)
    (found,) = out.glob("kerasbert-*.whl")
    return found


def test_wheel_top_level_names_are_kerasbert_owned(wheel):
    names = zipfile.ZipFile(wheel).namelist()
    top = {n.split("/")[0] for n in names if not n.split("/")[0].endswith((".dist-info", ".data"))}
    assert top == {"kerasbert", "kerasbert_apps"}, top
    assert "kerasbert_apps/ner/train.py" in names
    assert "kerasbert_apps/testing/__init__.py" in names  # the head contract ships, for a plugin's own tests
    assert "kerasbert_apps/samples/ner/train.jsonl" in names or any(
        n.startswith("kerasbert_apps/samples/ner/") and n.endswith(".jsonl") for n in names)
    entry_points = next(n for n in names if n.endswith(".dist-info/entry_points.txt"))
    text = zipfile.ZipFile(wheel).read(entry_points).decode()
    assert "ner = kerasbert_apps.ner.cli:register" in text and "apps.ner" not in text.replace("kerasbert_apps", "")


def test_user_package_named_apps_lives_beside_kerasbert(wheel, tmp_path):
    """Install the wheel into a folder, put a user's own ``apps`` package beside it, import both."""
    site = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "--no-compile", "-q", "--target", str(site),
                    str(wheel)], check=True, capture_output=True)
    user = tmp_path / "project"
    (user / "apps").mkdir(parents=True)
    (user / "apps" / "__init__.py").write_text("WHO = 'the user'\n")
    code = ("import apps, kerasbert_apps.ner.train, kerasbert_apps.triples.train\n"
            "assert apps.WHO == 'the user', apps.__file__\n"
            "assert kerasbert_apps.ner.train.__file__.startswith(%r), kerasbert_apps.ner.train.__file__\n"
            "print('ok')\n" % str(site))
    # The user's project first, the installed wheel next; not the repository (cwd is the project).
    env = {**os.environ, "PYTHONPATH": f"{user}:{site}"}
    done = subprocess.run([sys.executable, "-c", code], cwd=user, env=env, capture_output=True, text=True)
    assert done.returncode == 0 and done.stdout.strip().endswith("ok"), done.stderr[-2000:]
