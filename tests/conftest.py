"""Shared fixtures.

Tests that need ``../shared`` (checkpoints, corpora, reference outputs) use the
``shared_dir`` fixture. When ``../shared`` is missing they are skipped locally,
but they FAIL when the ``CI`` environment variable is set: CI must never pass by
skipping the checks that matter.
"""

import os
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]


def find_shared_dir():
    """``$KERASBERT_SHARED`` if set, else ``../shared`` beside the repository."""
    env = os.environ.get("KERASBERT_SHARED")
    return Path(env) if env else REPO_ROOT.parent / "shared"


def require_shared(*parts):
    """Path under the shared folder; skip (locally) or fail (CI) if absent."""
    path = find_shared_dir().joinpath(*parts)
    if not path.exists():
        message = f"needs {path} (the ../shared folder beside the repository)"
        if os.environ.get("CI"):
            pytest.fail(message + "; it must exist in CI", pytrace=False)
        pytest.skip(message)
    return path


@pytest.fixture(scope="session")
def shared_dir():
    return require_shared()


@pytest.fixture(scope="session")
def minilm_dir():
    return require_shared("data", "models", "minilm_l6_h384_uncased")


MIRRORED_SCRIPT = """
import importlib, json, sys, tensorflow as tf
cpu = tf.config.list_physical_devices("CPU")[0]
tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
module = importlib.import_module(sys.argv[1])
settings = getattr(module, sys.argv[2])(**json.loads(sys.argv[3]))
module.train(settings)
print("RESULT", open(settings.output + "/history.jsonl").read().replace("\\n", "|"))
"""


def train_on_two_logical_cpus(settings, module):
    """Run ``module.train(settings)`` in a fresh process whose CPU is split into
    two logical devices (they must be set before TensorFlow starts), with
    ``settings.strategy`` as given; returns the run's history (one dict per epoch)
    and checks that MirroredStrategy really used both devices."""
    import json
    import subprocess
    import sys

    run = subprocess.run(
        [sys.executable, "-c", MIRRORED_SCRIPT, module, type(settings).__name__, json.dumps(vars(settings))],
        capture_output=True, text=True, env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"), cwd=REPO_ROOT,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    assert "MirroredStrategy over 2 devices" in run.stdout
    line = next(l for l in run.stdout.splitlines() if l.startswith("RESULT"))
    return [json.loads(r) for r in line[len("RESULT "):].split("|") if r.strip()]
