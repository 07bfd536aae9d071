"""The database stops under a running web server and worker, then comes back.

A private PostgreSQL cluster (made like the embedded one, in the test's own folder: the shared
cluster other test runs use is never touched) is migrated; the web server (uvicorn serving the
ASGI app, as ``make run`` starts it) and a Celery worker run against it as child processes, with
their own data folder and filesystem broker. One document goes in through the REST API and is
queried; a second is being indexed (the worker waits on its embeddings) when ``pg_ctl stop -m
fast`` stops the database for longer than Celery's own retries last. Meanwhile every request
fails at once with a 503 and the JSON error, and the command line says so in one sentence. Then
the cluster starts again: the same two processes, never restarted, answer queries, finish the
interrupted ingestion and index a new document.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from openfable import embedded_broker
from openfable.embeddings import LOCAL_DIMENSIONS
from openfable.runner import _web_server_command
from tests.conftest import REPO_ROOT
from tests.fakes.llm.server import ScriptedOpenAIServer, delay
from tests.faults.processes import (
    PrivateCluster,
    answers,
    app_environment,
    free_port,
    manage,
    stop_process,
    wait_for,
)

pytestmark = [pytest.mark.faults, pytest.mark.slow]

FIRST = "".join(
    f"Section {n}. The pump of station {n} runs {n + 4} hours a day and is serviced every {n % 3 + 2} weeks.\n"
    for n in range(8)
)
SECOND = "".join(
    f"Rule {n}. A visitor to floor {n} signs the register and wears badge colour {n % 4} at all times.\n"
    for n in range(8)
)
THIRD = "".join(
    f"Boiler {n} of the plant heats {n * 50 + 200} litres an hour and is drained every {n % 5 + 1} months.\n"
    for n in range(8)
)
FAST = 3.0  # seconds: a request to a stopped database is answered within this
# Longer than Celery's whole retry schedule of a task before this test (2 + 4 + 8 s at most):
# a restart or fail-over of a real database server takes this long, or longer.
OUTAGE = 16.0


@dataclass(frozen=True)
class Reply:
    status: int
    body: Any
    seconds: float


@dataclass
class Stack:
    cluster: PrivateCluster
    base_url: str
    env: dict[str, str]
    web: subprocess.Popen[bytes]
    worker: subprocess.Popen[bytes]
    key: str
    embeddings: ScriptedOpenAIServer

    def call(self, method: str, path: str, body: Any = None) -> Reply:
        """One REST request with the API token; the decoded JSON answer, whatever its status."""
        request = urllib.request.Request(
            self.base_url + path,
            data=json.dumps(body).encode() if body is not None else None,
            method=method,
            headers={"Authorization": f"Bearer {self.key}", "Content-Type": "application/json"},
        )
        started = time.monotonic()
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                status, raw = response.status, response.read()
        except urllib.error.HTTPError as error:
            status, raw = error.code, error.read()
        return Reply(status, json.loads(raw) if raw else None, time.monotonic() - started)


@pytest.fixture
def stack(tmp_path: Path, private_cluster: PrivateCluster) -> Iterator[Stack]:
    with (
        ScriptedOpenAIServer(embedding_dimensions=LOCAL_DIMENSIONS) as embeddings,
        # The embedded broker in the data folder, as make run starts it for the web and the worker.
        embedded_broker.running(embedded_broker.broker_dir(tmp_path / "data")),
    ):
        cluster = private_cluster
        url = cluster.start()
        env = app_environment(
            database_url=url,
            data_dir=str(tmp_path / "data"),  # its broker's socket too, shared by web and worker
            secret_key="fault-test-only-secret",
            https="false",
            embedding_url=embeddings.base_url,  # fast, deterministic vectors; no model to load
            embedding_model="scripted-embedding",
        )
        migrated = manage(env, "migrate", "--no-input", "-v", "0")
        assert migrated.returncode == 0, migrated.stderr
        made = manage(
            env,
            "shell",
            "-c",
            "from django.contrib.auth import get_user_model\n"
            "from openfable.api_tokens import token_create\n"
            "user = get_user_model().objects.create_user(username='operator', password='not-used-here')\n"
            "print(token_create(user=user, name='fault test')[1])",
        )
        assert made.returncode == 0, made.stderr
        key = made.stdout.strip().splitlines()[-1]

        port = free_port()
        logs = tmp_path / "logs"
        logs.mkdir()
        web = subprocess.Popen(
            _web_server_command(sys.executable, host="127.0.0.1", port=str(port)),
            cwd=REPO_ROOT,
            env=env,
            start_new_session=True,
            stdout=(logs / "web.log").open("wb"),
            stderr=subprocess.STDOUT,
        )
        worker = subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", "openfable", "worker", "--concurrency", "1"],
            cwd=REPO_ROOT,
            env=env,
            start_new_session=True,
            stdout=(logs / "worker.log").open("wb"),
            stderr=subprocess.STDOUT,
        )
        try:
            wait_for(lambda: answers(port) or web.poll() is not None, timeout=90, what="the web server")
            assert web.poll() is None, (logs / "web.log").read_text()
            yield Stack(cluster, f"http://127.0.0.1:{port}/v1/api", env, web, worker, key, embeddings)
        finally:
            stop_process(web)
            stop_process(worker)
            for log in sorted(logs.iterdir()):
                print(f"--- {log.name}\n{log.read_text()[-4000:]}")


def _add(stack: Stack, text: str, title: str) -> int:
    created = stack.call("POST", "/documents", {"text": text, "title": title})
    assert created.status == 202, created.body
    return int(created.body["document"]["id"])


def _wait_indexed(stack: Stack, document_id: int, timeout: float = 90) -> None:
    def indexed() -> bool:
        answer = stack.call("GET", f"/documents/{document_id}?meta_only=true")
        assert answer.status == 200 and answer.body["status"] != "failed", answer.body
        return bool(answer.body["status"] == "indexed")

    wait_for(indexed, timeout=timeout, what=f"the worker to index document {document_id}")


def _query(stack: Stack, text: str) -> Reply:
    return stack.call("POST", "/query", {"query": text, "token_budget": 200})


def _found(answer: Reply) -> set[int]:
    return {chunk["document_id"] for chunk in answer.body["chunks"]}


def test_a_stopped_database_fails_requests_fast_and_the_same_processes_recover(stack: Stack) -> None:
    first = _add(stack, FIRST, "Pump stations")
    _wait_indexed(stack, first)
    answer = _query(stack, "how often is the pump serviced")
    assert answer.status == 200 and first in _found(answer), answer.body

    # The worker is in the middle of an ingestion (waiting for its embeddings) when the database stops.
    stack.embeddings.script_embeddings(delay(3.0))
    embedded = len(stack.embeddings.embedding_requests)
    caught = _add(stack, THIRD, "Boilers")
    wait_for(
        lambda: len(stack.embeddings.embedding_requests) > embedded,
        timeout=60,
        what="the worker to be embedding the new document",
    )
    stack.cluster.stop()
    stopped = time.monotonic()

    for method, path, body in (
        ("POST", "/query", {"query": "how often is the pump serviced", "token_budget": 200}),
        ("GET", "/documents", None),
        ("POST", "/documents", {"text": SECOND, "title": "Visitors"}),
    ):
        refused = stack.call(method, path, body)
        assert refused.status == 503, (method, path, refused)
        assert refused.seconds < FAST, (
            f"{method} {path} took {refused.seconds:.1f} s with the database stopped"
        )
        assert refused.body["error"]["code"] == "database_unavailable"
        assert refused.body["error"]["message"].startswith("The database is not answering right now.")
        print(
            f"{method} {path} with the database stopped: {refused.status} in {refused.seconds * 1000:.0f} ms"
        )

    started = time.monotonic()
    command = manage(stack.env, "openfable", "query", "how often is the pump serviced", timeout=60)
    print(
        f"openfable query with the database stopped: exit {command.returncode} in {time.monotonic() - started:.1f} s"
    )
    assert command.returncode == 1, command.stdout + command.stderr
    assert command.stdout == "", "an error goes to stderr"
    said = json.loads(command.stderr.strip().splitlines()[-1])
    assert said["error"].startswith("Cannot reach the database"), said
    assert "Traceback" not in command.stderr, command.stderr

    time.sleep(max(0.0, OUTAGE - (time.monotonic() - stopped)))
    stack.cluster.start()
    answer = _query(stack, "how often is the pump serviced")
    print(f"first query after the restart: {answer.status} in {answer.seconds * 1000:.0f} ms")
    assert answer.status == 200, answer.body  # the very first request after the restart
    assert first in _found(answer)

    started = time.monotonic()
    _wait_indexed(stack, caught, timeout=120)  # the job the outage interrupted, finished by the same worker
    print(f"the interrupted ingestion finished {time.monotonic() - started:.1f} s after the restart")
    second = _add(stack, SECOND, "Visitors")
    _wait_indexed(stack, second)
    answer = _query(stack, "which badge does a visitor wear")
    assert answer.status == 200 and second in _found(answer), answer.body
    assert stack.web.poll() is None and stack.worker.poll() is None, "the same processes, never restarted"
