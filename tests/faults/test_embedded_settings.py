"""The embedded server's own settings (``openfable.embedded_db.SETTINGS_FILE``): its buffer cache
sized at each start, and a start that cannot have it falls back to PostgreSQL's defaults."""

from __future__ import annotations

import psycopg
import pytest

from tests.faults.processes import PrivateCluster


def _shared_buffers(url: str) -> str:
    with psycopg.connect(url) as connection:
        row = connection.execute("SHOW shared_buffers").fetchone()
    assert row is not None
    return str(row[0])


@pytest.mark.slow  # starts a cluster of its own three times
def test_the_buffer_cache_is_set_at_each_start_and_an_impossible_one_falls_back(
    private_cluster: PrivateCluster,
) -> None:
    # A new cluster: initdb starts it with PostgreSQL's 128 MB; it is restarted with ours.
    url = private_cluster.start(embedded_shared_buffers_mb="160")
    assert _shared_buffers(url) == "160MB"
    private_cluster.stop()
    assert _shared_buffers(private_cluster.start(embedded_shared_buffers_mb="192")) == "192MB"
    private_cluster.stop()
    # More than PostgreSQL accepts (or the machine has): the server still starts, and says why.
    url = private_cluster.start(embedded_shared_buffers_mb="100000000")
    assert _shared_buffers(url) == "128MB"
    assert "did not start with" in private_cluster.said and "100000000MB" in private_cluster.said
