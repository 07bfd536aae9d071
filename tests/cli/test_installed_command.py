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
