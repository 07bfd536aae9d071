"""The health check tells a busy worker from a dead one (issue 33 item 5).

Before: during indexing, 25 of 25 health checks answered 503 "no Celery worker answered within
1 s", and a liveness probe reading that would have restarted a worker that was working. Now a
worker writes a heartbeat from a thread of its own (``openfable.worker_heartbeat``): a worker
that misses the ping but beats is alive and busy (200), one that neither answers nor beats is
dead (503), and none at all is dead too.

A real Celery worker process, started as ``make run`` starts it but with the solo pool, so that
the task runs in the very thread that answers pings: while it indexes, no ping can be answered,
which is the busy worker of the report at its most extreme. The task is a real ingestion whose
embedding request the scripted server holds for a while. The test database.
"""

from __future__ import annotations

import os
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.db import connection
from django.test import Client
from pytest_django.fixtures import Settings

from cli.corpus import handle_worker_alive
from documents.models import IngestionJob
from documents.services.documents import document_create
from openfable import health as health_module
from openfable.embeddings import LOCAL_DIMENSIONS
from openfable.errors import UserInputError
from openfable.runner import worker_command
from openfable.worker_heartbeat import live_workers
from tests.conftest import REPO_ROOT
from tests.factories import CollectionFactory
from tests.fakes.llm.server import ScriptedOpenAIServer, delay
from tests.faults.processes import app_environment, stop_process, wait_for

pytestmark = [pytest.mark.faults, pytest.mark.slow, pytest.mark.django_db(transaction=True)]

BEAT_SECONDS = 0.5  # the worker's heartbeat interval here: dead after 6 missed beats, 3 s
HELD_SECONDS = 40  # how long the embedding server holds the worker's request


@pytest.fixture
def embeddings() -> Iterator[ScriptedOpenAIServer]:
    with ScriptedOpenAIServer(embedding_dimensions=LOCAL_DIMENSIONS) as server:
        yield server


@pytest.fixture
def beats_fast(settings: Settings) -> None:
    # The health check in this process judges the heartbeats by the interval the worker uses.
    settings.WORKER_HEARTBEAT_SECONDS = BEAT_SECONDS


def _start_worker(
    tmp_path: Path, broker_url: str, embeddings: ScriptedOpenAIServer
) -> subprocess.Popen[bytes]:
    db = connection.settings_dict
    env = app_environment(
        database_url=f"postgresql://{db['USER']}@/{db['NAME']}?host={db['HOST']}",
        broker_url=broker_url,
        data_dir=str(tmp_path / "data"),
        debug="true",
        embedding_url=embeddings.base_url,
        embedding_model="scripted-embedding",
        embedding_timeout=str(HELD_SECONDS * 3),
        worker_heartbeat_seconds=str(BEAT_SECONDS),
    )
    return subprocess.Popen(
        [*worker_command(), "--pool", "solo"],
        cwd=REPO_ROOT,
        env=env,
        start_new_session=True,
        stdout=(tmp_path / "worker.log").open("wb"),
        stderr=subprocess.STDOUT,
    )


def _health() -> tuple[int, dict[str, Any]]:
    health_module._last = None  # a fresh probe, not the answer of a few seconds ago
    response = Client().get("/v1/api/health")
    return response.status_code, response.json()


@pytest.fixture(autouse=True)
def no_worker_left(transactional_db: None) -> None:
    # The suite's earlier fault tests run whole stacks on this database (`make run`'s own shape);
    # a worker of theirs still winding down beats here for a few seconds more. This test is about
    # its own worker: it starts once none is left.
    wait_for(lambda: not live_workers(), timeout=90, what="the workers of earlier tests to stop beating")


def test_a_busy_worker_is_alive_and_a_dead_one_is_not(
    tmp_path: Path, broker_url: str, embeddings: ScriptedOpenAIServer, beats_fast: None
) -> None:
    status, body = _health()
    assert status == 503 and body["failed"] == ["worker"], body
    assert "none wrote a heartbeat" in body["checks"]["worker"]["detail"]

    worker = _start_worker(tmp_path, broker_url, embeddings)
    log = tmp_path / "worker.log"
    try:
        wait_for(lambda: " ready." in log.read_text(errors="replace"), timeout=120, what="the worker")
        wait_for(lambda: handle_worker_alive({"hostname": None})["alive"], timeout=30, what="a heartbeat")
        status, body = _health()
        assert status == 200, body
        assert body["checks"]["worker"]["detail"] == "1 worker(s) answered"

        # Busy: the worker's only thread of work waits on the embedding server.
        embeddings.script_embeddings(delay(HELD_SECONDS))
        document = document_create(
            collection=CollectionFactory.create(), content="Tides turn twice a day."
        ).document
        wait_for(
            lambda: bool(embeddings.embedding_requests),
            timeout=60,
            what="the worker to start embedding",
        )
        job = IngestionJob.objects.get(document=document)
        assert job.status == IngestionJob.Status.RUNNING
        for _ in range(3):  # and again: not one lucky answer
            status, body = _health()
            assert status == 200, f"a busy worker was reported dead: {body}"
            detail = body["checks"]["worker"]["detail"]
            assert "alive but busy" in detail and "1 task(s) running" in detail, detail
        assert handle_worker_alive({"hostname": None})["workers"][0]["active_tasks"] == 1

        # Dead: killed mid-task, its row left behind grows stale within six beats.
        os.killpg(worker.pid, signal.SIGKILL)
        worker.wait(timeout=30)

        dead: list[dict[str, Any]] = []

        def reported_dead() -> bool:
            status, body = _health()
            if status == 503:
                dead.append(body)
            return bool(dead)

        wait_for(reported_dead, timeout=20, what="the health check to report the killed worker")
        # The answer that said so is the one judged: on a loaded machine a worker of another test
        # winding down may beat once more afterwards, which says nothing about this one.
        assert dead[0]["failed"] == ["worker"], dead[0]
        assert "none wrote a heartbeat in the last 3 s" in dead[0]["checks"]["worker"]["detail"]
        killed = f":{worker.pid}"
        assert not [alive for alive in live_workers() if alive.name.endswith(killed)]
        others = [alive.name for alive in live_workers()]
        if not others:
            with pytest.raises(UserInputError, match=r"No worker on .* wrote a heartbeat"):
                handle_worker_alive({"hostname": None})
        else:
            print(f"other workers beating after the kill: {others}")
    finally:
        stop_process(worker)
        print(log.read_text(errors="replace")[-4000:])


def test_a_worker_that_stops_takes_its_heartbeat_with_it(
    tmp_path: Path, broker_url: str, embeddings: ScriptedOpenAIServer, beats_fast: None
) -> None:
    from openfable.worker_heartbeat import live_workers

    worker = _start_worker(tmp_path, broker_url, embeddings)
    log = tmp_path / "worker.log"
    try:
        wait_for(lambda: bool(live_workers()), timeout=120, what="the worker's heartbeat")
        (alive,) = live_workers()
        assert alive.name.endswith(f":{worker.pid}")
        worker.terminate()  # a warm shutdown, as Ctrl-C in make run or `docker compose stop`
        worker.wait(timeout=60)
        assert live_workers() == [], "a stopped worker still counted as alive"
    finally:
        stop_process(worker)
        print(log.read_text(errors="replace")[-4000:])
