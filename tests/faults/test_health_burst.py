"""A burst of unauthenticated health checks against the web server as ``make run`` starts it (uvicorn,
the embedded broker, a Celery worker), and jobs whose task never reached the broker.

Before: 25 concurrent ``GET /v1/api/health`` each held one connection of the shared producer pool
(the worker ping) and waited for a second; 14 never answered, and from then on every upload hung
while queueing its task. Now every check answers within a bound, an upload made after the burst
is queued and indexed, and a job committed without its task (the upload that hung) is sent again
by the worker: when it starts, and by its sweep while it runs. Real processes, the test database.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from django.db import connection
from django.utils import timezone

from documents.models import Document, IngestionJob
from documents.services.documents import document_create
from openfable import embedded_broker
from openfable.api_tokens import token_create
from openfable.embeddings import LOCAL_DIMENSIONS
from openfable.runner import _web_server_command, worker_command
from tests.conftest import REPO_ROOT
from tests.factories import CollectionFactory, UserFactory
from tests.fakes.llm.server import ScriptedOpenAIServer
from tests.faults.processes import answers, app_environment, free_port, stop_process, wait_for

pytestmark = [pytest.mark.faults, pytest.mark.slow, pytest.mark.django_db(transaction=True)]

BURST = 25
ANSWER_WITHIN = 20.0  # seconds: each health check of the burst answers within this

TEXT = "".join(
    f"Gate {n} of the harbour opens at {n + 5} o'clock and closes when the tide turns for ship {n}.\n"
    for n in range(8)
)


@dataclass
class Stack:
    base_url: str
    env: dict[str, str]
    logs: Path
    web: subprocess.Popen[bytes]

    def start_worker(self) -> subprocess.Popen[bytes]:
        return subprocess.Popen(
            worker_command(),
            cwd=REPO_ROOT,
            env=self.env,
            start_new_session=True,
            stdout=(self.logs / "worker.log").open("ab"),
            stderr=subprocess.STDOUT,
        )


def _get(url: str, *, timeout: float) -> tuple[int, float]:
    started = time.monotonic()
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:
            status = response.status
    except urllib.error.HTTPError as error:
        status = error.code
    except OSError:
        status = 0  # no answer within the timeout
    return status, time.monotonic() - started


def _post(url: str, body: dict[str, Any], key: str) -> tuple[int, Any]:
    request = urllib.request.Request(
        url,
        data=json.dumps(body).encode(),
        method="POST",
        headers={"Authorization": f"Bearer {key}", "Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


@pytest.fixture
def stack(tmp_path: Path) -> Iterator[Stack]:
    db = connection.settings_dict
    logs = tmp_path / "logs"
    logs.mkdir()
    with (
        ScriptedOpenAIServer(embedding_dimensions=LOCAL_DIMENSIONS) as embeddings,
        # The embedded broker in the data folder, as make run starts it for the web and the worker.
        embedded_broker.running(embedded_broker.broker_dir(tmp_path / "data")),
    ):
        env = app_environment(
            database_url=f"postgresql://{db['USER']}@/{db['NAME']}?host={db['HOST']}",
            data_dir=str(tmp_path / "data"),  # the embedded broker's socket, shared by both
            debug="true",
            embedding_url=embeddings.base_url,  # fast, deterministic vectors; no model to load
            embedding_model="scripted-embedding",
            job_sweep_seconds="1",
            job_unsent_seconds="2",
        )
        port = free_port()
        web = subprocess.Popen(
            _web_server_command(sys.executable, host="127.0.0.1", port=str(port)),
            cwd=REPO_ROOT,
            env=env,
            start_new_session=True,
            stdout=(logs / "web.log").open("wb"),
            stderr=subprocess.STDOUT,
        )
        try:
            wait_for(lambda: answers(port) or web.poll() is not None, timeout=90, what="the web server")
            assert web.poll() is None, (logs / "web.log").read_text()
            yield Stack(f"http://127.0.0.1:{port}", env, logs, web)
        finally:
            stop_process(web)
            for log in sorted(logs.iterdir()):
                print(f"--- {log.name}\n{log.read_text(errors='replace')[-4000:]}")


def _never_sent(collection: Any, text: str) -> Document:
    """A document whose job is in the database but whose task never reached the broker (the
    upload that hung after its commit), made some seconds ago."""
    document = document_create(collection=collection, content=text, queue=False).document
    # queue=False hands the job to this process; take that back: a queued job, never sent.
    IngestionJob.objects.filter(document=document).update(
        heartbeat=None, created=timezone.now() - timedelta(seconds=30)
    )
    return document


def test_a_burst_of_health_checks_answers_and_uploads_still_queue(stack: Stack) -> None:
    user = UserFactory.create()
    collection = CollectionFactory.create(owner=user)
    _, key = token_create(user=user, name="burst test")
    # Made before any worker runs, and its task lost: the worker queues it when it starts.
    lost_before = _never_sent(collection, "Before the worker. " + TEXT)
    worker = stack.start_worker()
    try:
        with ThreadPoolExecutor(max_workers=BURST) as pool:
            results = list(
                pool.map(
                    lambda _: _get(f"{stack.base_url}/v1/api/health", timeout=ANSWER_WITHIN + 10),
                    range(BURST),
                )
            )
        slow = [
            (status, round(seconds, 1))
            for status, seconds in results
            if status == 0 or seconds > ANSWER_WITHIN
        ]
        assert not slow, f"health checks without an answer within {ANSWER_WITHIN} s: {slow}"
        assert all(status in (200, 503) for status, _ in results), results

        # Uploads still reach the broker: this one is queued and indexed.
        status, created = _post(
            f"{stack.base_url}/v1/api/documents",
            {"text": TEXT, "title": "Harbour gates", "collection": collection.slug},
            key,
        )
        assert status == 202 and created["job"] is not None, created
        upload = created["document"]["id"]
        # A job whose task was lost while the worker runs: its sweep sends it again.
        lost_during = _never_sent(collection, "During the run. " + TEXT)

        def indexed() -> bool:
            states = dict(
                Document.objects.filter(pk__in=[upload, lost_before.pk, lost_during.pk]).values_list(
                    "pk", "status"
                )
            )
            assert Document.Status.FAILED not in states.values(), states
            return set(states.values()) == {Document.Status.INDEXED}

        wait_for(indexed, timeout=120, what="the upload and both lost jobs to be indexed")
        status, _ = _get(f"{stack.base_url}/v1/api/health", timeout=ANSWER_WITHIN)
        assert status == 200, "the web server still answers its health check"
    finally:
        stop_process(worker)
