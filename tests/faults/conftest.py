"""Fixtures of the fault tests that start real processes."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.faults.processes import PrivateCluster


@pytest.fixture
def private_cluster() -> Iterator[PrivateCluster]:
    """A PostgreSQL cluster of the test's own (not started yet), stopped and removed afterwards."""
    folder = Path(tempfile.mkdtemp(prefix="openfable-fault-"))
    folder.chmod(0o755)  # the server's own user must reach its data folder inside
    cluster = PrivateCluster(folder / "postgres")
    try:
        yield cluster
    finally:
        cluster.stop()
        shutil.rmtree(folder, ignore_errors=True)
