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
