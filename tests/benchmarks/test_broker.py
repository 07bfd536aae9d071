"""The embedded broker drains fast enough for a large upload (a real worker, real messages).

The embedded Redis server (``make run``'s broker) hands a worker each message as it arrives: one
worker drains hundreds of no-op messages a second, several times the filesystem transport it
replaced (docs/benchmarks.md, "Broker"). With kombu's default polling interval (1 s) the filesystem transport
drained about two a second."""

from __future__ import annotations

import pytest

from fable_benchmarks.broker import broker_drain, format_drain

pytestmark = [pytest.mark.slow, pytest.mark.django_db]


def test_a_worker_drains_the_embedded_redis_broker_at_dozens_of_messages_a_second() -> None:
    row = broker_drain(messages=100, broker="redis", timeout=300)
    print(format_drain([row]))
    assert row.messages == 100
    # Hundreds a second on two idle cores; the bound leaves room for a machine busy with other tests.
    assert row.per_second >= 15, format_drain([row])
