"""kerasbert.cli.lean_import: the optional integrations TensorFlow and Keras import on start are refused, and only those."""

import json
import subprocess
import sys

from conftest import require_module

# A fresh process: TensorFlow is imported once per process, and this test process has long imported it.
PROBE = """
import json, sys
from kerasbert.cli import lean_import

lean_import.skip_optional_integrations()
import tensorflow, keras  # noqa: F401
before = {name: name in sys.modules for name in ("sklearn", "matplotlib", "jax", "scipy")}
import sklearn.base, matplotlib, jax  # noqa: F401  -- the same packages imported by anyone else: as usual
from keras.src.wrappers import fixes
print(json.dumps({"before": before, "after": all(n in sys.modules for n in ("sklearn", "matplotlib", "jax")),
                  "keras_sklearn": fixes.sklearn is not None}))
"""


def test_tensorflow_starts_without_the_integrations_and_they_import_as_usual_afterwards():
    """Without the hook, TensorFlow 2.21's start imports all four where they are installed."""
    for name in ("sklearn", "matplotlib", "jax", "scipy"):
        require_module(name)
    done = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    seen = json.loads(done.stdout.splitlines()[-1])
    assert seen["before"] == {"sklearn": False, "matplotlib": False, "jax": False, "scipy": False}
    assert seen["after"]  # imported by the program itself, they are there
    assert seen["keras_sklearn"] is False  # Keras's wrapper took the ImportError: its integration is off


def test_the_command_installs_the_hook():
    from kerasbert import cli
    from kerasbert.cli import lean_import

    cli._start(["--verbose", "inspect", "x"])  # even when verbose: it hides nothing, it skips work
    assert any(isinstance(f, lean_import._SkipFinder) for f in sys.meta_path)
