from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent

# The scripted OpenAI-compatible server, for every test that speaks to an LLM or embedder.
pytest_plugins = ["tests.fakes.fixtures"]


@pytest.fixture(scope="session")
def shared_dir() -> Path:
    """The evaluation datasets live beside the repository (../shared), never inside it."""
    path = Path(os.environ.get("OPENFABLE_SHARED_DIR", REPO_ROOT.parent / "shared"))
    if not (path / "datasets").is_dir():
        pytest.fail(f"datasets not found under {path}; set OPENFABLE_SHARED_DIR")
    return path
