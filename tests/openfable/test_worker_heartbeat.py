"""The workers' heartbeats (openfable.worker_heartbeat) on the real database: a recent one counts as
a live worker, one older than six beats does not, and the web's liveness probe touches nothing.
A real worker writing them, busy and killed: tests/faults/test_busy_worker_health.py."""

from __future__ import annotations

import threading
import time
from datetime import timedelta
from types import SimpleNamespace

import pytest
from django.db import connection
from django.test import Client, override_settings
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from pytest_django.fixtures import Settings

from openfable.models import WorkerHeartbeat
from openfable.worker_heartbeat import HeartbeatStep, heartbeat_delete, heartbeat_write, live_workers

pytestmark = pytest.mark.django_db


def test_a_recent_heartbeat_is_a_live_worker_and_an_old_one_is_not(settings: Settings) -> None:
    settings.WORKER_HEARTBEAT_SECONDS = 5.0  # alive while the last beat is under 30 s old
    started = timezone.now() - timedelta(minutes=5)
    heartbeat_write(name="web-1:10", started_at=started, active_tasks=2)
    heartbeat_write(name="web-2:20", started_at=started, active_tasks=0)
    WorkerHeartbeat.objects.filter(name="web-2:20").update(beat_at=timezone.now() - timedelta(seconds=31))
    (alive,) = live_workers()
    assert (alive.name, alive.active_tasks) == ("web-1:10", 2) and alive.seconds_since_beat < 5
    assert [worker.name for worker in live_workers(hostname="web-1")] == ["web-1:10"]
    assert live_workers(hostname="web-2") == []


def test_a_beat_updates_the_row_and_forgets_workers_gone_for_a_day() -> None:
    now = timezone.now()
    heartbeat_write(name="host:1", started_at=now, active_tasks=0)
    heartbeat_write(name="host:2", started_at=now, active_tasks=0)
    WorkerHeartbeat.objects.filter(name="host:2").update(beat_at=now - timedelta(days=2))
    heartbeat_write(name="host:1", started_at=now, active_tasks=1)
    assert list(WorkerHeartbeat.objects.values_list("name", "active_tasks")) == [("host:1", 1)]
    heartbeat_delete(name="host:1")
    assert not WorkerHeartbeat.objects.exists()


def test_the_liveness_probe_answers_without_asking_any_other_part() -> None:
    with CaptureQueriesContext(connection) as queries:
        response = Client().get("/v1/api/health/live")
    assert response.status_code == 200 and response.json() == {"status": "ok"}
    assert len(queries) == 0, "the liveness probe asked the database"


@override_settings(SECURE_SSL_REDIRECT=True)
def test_probes_over_plain_http_are_answered_not_sent_to_https() -> None:
    # A container's probes come over plain HTTP, past the proxy that serves HTTPS.
    assert Client().get("/v1/api/health/live").status_code == 200
    assert Client().get("/v1/api/documents").status_code == 301, "everything else still goes to https"


@pytest.mark.django_db(transaction=True)  # the step beats from a thread of its own
@pytest.mark.parametrize("shutdown", ["stop", "terminate"])
def test_a_worker_shut_down_warm_or_cold_stops_beating_and_removes_its_heartbeat(shutdown: str) -> None:
    step = HeartbeatStep(SimpleNamespace())
    step.start(SimpleNamespace())
    deadline = time.monotonic() + 10
    while not live_workers() and time.monotonic() < deadline:
        time.sleep(0.05)  # the first beat is the thread's
    assert live_workers() != []
    getattr(step, shutdown)(SimpleNamespace())
    assert not [thread for thread in threading.enumerate() if thread.name == "openfable-heartbeat"]
    assert live_workers() == []
