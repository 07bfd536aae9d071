"""The suite's own set-up: collecting tests starts no database, and screenshots reach
docs/screenshots only when `make screenshots` asks for them."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.browser.conftest import SCREENSHOTS_ENV, screenshots_dir
from tests.conftest import REPO_ROOT


@pytest.mark.slow  # a pytest of its own in a child process
def test_collecting_tests_starts_no_database(tmp_path: Path) -> None:
    environment = {key: value for key, value in os.environ.items() if not key.startswith("OPENFABLE_")}
    environment["OPENFABLE_DATA_DIR"] = str(tmp_path)
    collected = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "--collect-only",
            "-q",
            "-p",
            "no:cacheprovider",
            "tests/test_docs.py",
        ],
        cwd=REPO_ROOT,
        env=environment,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert collected.returncode == 0, collected.stdout[-3000:] + collected.stderr[-3000:]
    assert "tests collected" in collected.stdout
    assert not (tmp_path / "postgres").exists(), "collecting the tests started the embedded PostgreSQL"


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
