"""The suite's own set-up: collecting tests starts no database, and screenshots reach
docs/screenshots only when `make screenshots` asks for them."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from tests.browser.conftest import SCREENSHOTS_ENV, screenshots_dir
from tests.conftest import REPO_ROOT


def _child_pytest(data_dir: Path, *arguments: str) -> subprocess.CompletedProcess[str]:
    """A pytest of its own in a child process, with ``data_dir`` as its data folder and none of
    this run's OPENFABLE_* settings (its test database name, a server URL)."""
    environment = {key: value for key, value in os.environ.items() if not key.startswith("OPENFABLE_")}
    environment["OPENFABLE_DATA_DIR"] = str(data_dir)
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *arguments],
        cwd=REPO_ROOT,
        env=environment,
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.mark.slow  # a pytest of its own in a child process
def test_collecting_tests_starts_no_database(tmp_path: Path) -> None:
    collected = _child_pytest(tmp_path, "--collect-only", "tests/test_docs.py")
    assert collected.returncode == 0, collected.stdout[-3000:] + collected.stderr[-3000:]
    assert "tests collected" in collected.stdout
    assert not (tmp_path / "postgres").exists(), "collecting the tests started the embedded PostgreSQL"


@pytest.mark.slow  # a pytest of its own in a child process, on a server it makes and starts
def test_the_first_test_that_needs_the_database_starts_it() -> None:
    """From a data folder with no server in it, as on a clean clone: a database test passes."""
    from openfable.embedded_db import is_running, stop

    # Not under pytest's temporary root: the server runs as a user of its own, and every pytest
    # session (the child's too) closes that root to other users again.
    data_dir = Path(tempfile.mkdtemp(prefix="openfable-first-start-"))
    data_dir.chmod(0o755)
    try:
        ran = _child_pytest(
            data_dir, "-n", "0", "tests/documents/test_models.py::test_vector_extension_is_installed"
        )
        assert ran.returncode == 0, ran.stdout[-3000:] + ran.stderr[-3000:]
        assert "1 passed" in ran.stdout
        assert is_running(data_dir / "postgres"), "the server the test started is the folder's own"
    finally:
        if (data_dir / "postgres").exists():
            stop(data_dir / "postgres")
        shutil.rmtree(data_dir, ignore_errors=True)


def test_screenshots_go_to_an_ignored_folder_unless_make_screenshots_asks(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv(SCREENSHOTS_ENV, raising=False)
    assert screenshots_dir() == REPO_ROOT / "var" / "test-screenshots"
    assert "var/" in (REPO_ROOT / ".gitignore").read_text().split()
    monkeypatch.setenv(SCREENSHOTS_ENV, str(tmp_path / "docs-screenshots"))
    assert screenshots_dir() == tmp_path / "docs-screenshots" and screenshots_dir().is_dir()
    makefile = (REPO_ROOT / "Makefile").read_text()
    assert f"{SCREENSHOTS_ENV}=docs/screenshots" in makefile
