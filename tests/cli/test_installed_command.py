"""The installed `openfable` command works from any directory.

pysbd (a dependency) installs a top-level package named ``benchmarks``; while the project's own
benchmarks package had that name, the console script failed with an ImportError everywhere but
the repository root. The project's package is ``fable_benchmarks`` now.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow


def test_openfable_runs_outside_the_repository(tmp_path: Path) -> None:
    command = Path(sys.executable).with_name("openfable")
    assert command.exists(), "the console script is installed with the project (pip install -e .)"
    # query's --help loads every subcommand module.
    finished = subprocess.run(
        [str(command), "query", "--help"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert finished.returncode == 0, finished.stderr[-2000:]
    assert "--budget" in finished.stdout and "Traceback" not in finished.stderr


def test_the_script_names_itself_openfable_without_djangos_options() -> None:
    from tests.conftest import REPO_ROOT

    # The script's main() from this checkout (the installed script may point at another one).
    finished = subprocess.run(
        [sys.executable, "-c", "from openfable.cli import main; main()", "--help"],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert finished.returncode == 0, finished.stderr[-2000:]
    assert finished.stdout.startswith("usage: openfable [-h] SUBCOMMAND")
    assert "--settings" not in finished.stdout and "--traceback" not in finished.stdout
    listing = subprocess.run(
        [sys.executable, "-c", "from openfable.cli import main; main()", "list", "--help"],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert listing.stdout.startswith("usage: openfable list") and "--offset" in listing.stdout
    assert "--format {json,table}" in listing.stdout and "--pythonpath" not in listing.stdout
