"""`make run` under the load that crashed its worker on the filesystem broker: nothing is lost.

Before: kombu's filesystem transport handed the worker a message file before it was fully
written; the worker died on ``JSONDecodeError('Expecting value…')`` (three times in an hour on a
loaded 2-core machine, and within 38 s of this load), the message it had read was gone, and the
upload it belonged to stayed ``queued`` for good. Now: the runner itself (``python -m
openfable.runner``, the web server, the worker and the embedded Redis broker it starts) takes two
minutes of 4 concurrent page-image renders of a PDF plus, every 3 s, a burst of 25 health checks
and 10 small uploads; its worker never dies, every upload is indexed, nothing is left queued, and
Ctrl-C stops every part, the broker last. Real processes, the test database; embeddings from the
scripted server (fast, deterministic), so the indexing keeps up and the broker is what is tested.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
from django.conf import settings
from django.db import connection
from django.test import Client

from documents.models import Document, IngestionJob
from openfable import embedded_broker
from openfable.api_tokens import token_create
from openfable.embeddings import LOCAL_DIMENSIONS
from tests.conftest import REPO_ROOT
from tests.documents.ingestion import document_files as files
from tests.factories import CollectionFactory, UserFactory
from tests.fakes.llm.server import ScriptedOpenAIServer
from tests.faults.processes import answers, app_environment, free_port, stop_process, wait_for

pytestmark = [
    pytest.mark.faults,
    pytest.mark.slow,
    pytest.mark.starts_first,
    pytest.mark.django_db(transaction=True),
]

LOAD_SECONDS = 120.0
BURST_EVERY_SECONDS = 3.0
HEALTH_CALLS = 25  # per burst
UPLOADS = 10  # per burst
RENDERERS = 4  # page images drawn at once, without a break
DRAIN_SECONDS = 90.0  # after the load: the last uploads are indexed within this


@dataclass
class Runner:
    base_url: str
    data_dir: Path
    log: Path
    process: subprocess.Popen[bytes]

    def said(self) -> str:
        return self.log.read_text(errors="replace")


@dataclass
class Tally:
    """What the load saw, counted from several threads."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    statuses: dict[str, Counter[int]] = field(default_factory=dict)
    uploads: list[int] = field(default_factory=list)

    def note(self, kind: str, status: int) -> None:
        with self.lock:
            self.statuses.setdefault(kind, Counter())[status] += 1


def _request(
    url: str, *, body: dict[str, Any] | None = None, headers: dict[str, str] | None = None
) -> tuple[int, bytes]:
    request = urllib.request.Request(
        url,
        data=None if body is None else json.dumps(body).encode(),
        method="GET" if body is None else "POST",
        headers={"Content-Type": "application/json", **(headers or {})},
    )
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as error:
        return error.code, error.read()
    except OSError:
        return 0, b""  # no answer


@pytest.fixture
def runner(tmp_path: Path) -> Iterator[Runner]:
    """`make run` (``python -m openfable.runner``) on the test database, in a data folder of its own."""
    db = connection.settings_dict
    port = free_port()
    data_dir = tmp_path / "data"
    log = tmp_path / "runner.log"
    with ScriptedOpenAIServer(embedding_dimensions=LOCAL_DIMENSIONS) as embeddings:
        env = app_environment(
            database_url=f"postgresql://{db['USER']}@/{db['NAME']}?host={db['HOST']}",
            data_dir=str(data_dir),
            port=str(port),
            secret_key=settings.SECRET_KEY,  # the sessions this process signs in with
            https="false",
            embedding_url=embeddings.base_url,
            embedding_model="scripted-embedding",
        )
        process = subprocess.Popen(
            [sys.executable, "-m", "openfable.runner"],
            cwd=REPO_ROOT,
            env=env,
            # A process group of its own, as a terminal gives it: Ctrl-C is sent to the group.
            start_new_session=True,
            stdout=log.open("wb"),
            stderr=subprocess.STDOUT,
        )
        started = Runner(f"http://127.0.0.1:{port}", data_dir, log, process)
        try:
            wait_for(lambda: answers(port) or process.poll() is not None, timeout=120, what="make run")
            assert process.poll() is None, started.said()
            wait_for(lambda: " ready." in started.said(), timeout=120, what="the worker")
            yield started
        finally:
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGINT)  # Ctrl-C
            stop_process(process, grace=60)
            print(started.said()[-6000:])


def _render_forever(
    runner: Runner, document_id: int, page: int, cookie: str, tally: Tally, until: float
) -> None:
    """Draw one page again and again: its kept picture is removed after each answer, so every
    request draws it (in a child process of the web server) instead of reading it back."""
    url = f"{runner.base_url}/documents/{document_id}/pages/{page}.png"
    while time.monotonic() < until:
        request = urllib.request.Request(url, headers={"Cookie": cookie})
        try:
            with urllib.request.urlopen(request, timeout=60) as response:
                status, retry_after = response.status, None
        except urllib.error.HTTPError as error:
            status, retry_after = error.code, error.headers.get("Retry-After")
        except OSError:
            status, retry_after = 0, None  # no answer
        if status == 503 and retry_after:
            # Four drawers against two drawing slots on a loaded machine: a request that finds no
            # slot in time is told when to come back (the bound this test runs against), and does.
            tally.note("render busy", status)
            time.sleep(float(retry_after))
            continue
        tally.note("render", status)
        for drawn in (runner.data_dir / "page-images").glob(f"{document_id}-*/{page}.png"):
            drawn.unlink(missing_ok=True)


def _burst(runner: Runner, key: str, collection: str, number: int, tally: Tally) -> None:
    auth = {"Authorization": f"Bearer {key}"}

    def health(_: int) -> None:
        tally.note("health", _request(f"{runner.base_url}/v1/api/health")[0])

    def upload(n: int) -> None:
        text = f"Burst {number}, note {n}: the tide table for berth {n} changes on day {number}.\n"
        status, raw = _request(
            f"{runner.base_url}/v1/api/documents",
            body={"text": text * 3, "title": f"Note {number}.{n}", "collection": collection},
            headers=auth,
        )
        tally.note("upload", status)
        if status == 202:
            with tally.lock:
                tally.uploads.append(int(json.loads(raw)["document"]["id"]))

    with ThreadPoolExecutor(max_workers=HEALTH_CALLS + UPLOADS) as pool:
        list(pool.map(health, range(HEALTH_CALLS)))
        list(pool.map(upload, range(UPLOADS)))


def test_make_run_loses_no_upload_under_renders_health_bursts_and_uploads(runner: Runner) -> None:
    user = UserFactory.create()
    collection = CollectionFactory.create(owner=user)
    _, key = token_create(user=user, name="load test")
    browser = Client()
    browser.force_login(user)
    cookie = f"{settings.SESSION_COOKIE_NAME}={browser.cookies[settings.SESSION_COOKIE_NAME].value}"

    # The PDF whose pages are drawn, indexed by the runner's worker first (its pages are known then).
    sent = httpx.post(
        f"{runner.base_url}/v1/api/documents",
        files={"file": ("report.pdf", files.report_pdf(pages=RENDERERS), "application/pdf")},
        data={"collection": collection.slug},
        headers={"Authorization": f"Bearer {key}"},
        timeout=60,
    )
    assert sent.status_code == 202, sent.text
    pdf = int(sent.json()["document"]["id"])
    wait_for(
        lambda: Document.objects.get(pk=pdf).status == Document.Status.INDEXED, timeout=120, what="the PDF"
    )

    tally = Tally()
    until = time.monotonic() + LOAD_SECONDS
    renderers = [
        threading.Thread(target=_render_forever, args=(runner, pdf, page, cookie, tally, until), daemon=True)
        for page in range(1, RENDERERS + 1)
    ]
    for thread in renderers:
        thread.start()
    number = 0
    while time.monotonic() < until:
        started = time.monotonic()
        _burst(runner, key, collection.slug, number, tally)
        number += 1
        time.sleep(max(0.0, BURST_EVERY_SECONDS - (time.monotonic() - started)))
    for thread in renderers:
        thread.join(timeout=90)

    def drained() -> bool:
        return not IngestionJob.objects.filter(
            status__in=[IngestionJob.Status.QUEUED, IngestionJob.Status.RUNNING]
        ).exists()

    wait_for(drained, timeout=DRAIN_SECONDS, what="every queued job to finish")
    said = runner.said()
    print({kind: dict(counts) for kind, counts in tally.statuses.items()}, f"{len(tally.uploads)} uploads")

    assert "Unrecoverable error" not in said and "JSONDecodeError" not in said
    assert said.count("Started the worker") == 1, "the worker never died (the runner restarts a dead one)"
    assert said.count("Started the broker") == 1 and said.count("Started the web server") == 1
    assert tally.statuses["upload"] == Counter({202: number * UPLOADS}), tally.statuses["upload"]
    states = Counter(Document.objects.filter(pk__in=tally.uploads).values_list("status", flat=True))
    assert states == Counter({Document.Status.INDEXED: number * UPLOADS}), states
    assert not IngestionJob.objects.filter(status=IngestionJob.Status.QUEUED).exists()
    assert set(tally.statuses["render"]) == {200}, tally.statuses["render"]
    assert 0 not in tally.statuses["health"], f"health checks without an answer: {tally.statuses['health']}"

    # Ctrl-C: the web server and the worker stop, then the broker; the runner exits cleanly.
    os.killpg(runner.process.pid, signal.SIGINT)
    assert runner.process.wait(timeout=90) == 0, runner.said()[-3000:]
    assert not embedded_broker.answers(embedded_broker.broker_dir(runner.data_dir))
    assert "OpenFable stopped." in runner.said()
