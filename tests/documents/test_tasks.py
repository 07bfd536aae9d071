"""The Celery tasks are thin retry shells: transient failures retry with backoff, then the job fails
visibly with a retry offered; a document deleted mid-run is a quiet no-op. The services send them
through the seam this module plugs them into (``documents.services.background``)."""

from __future__ import annotations

import logging
from collections.abc import Sequence

import numpy as np
import pytest

from documents import tasks
from documents.models import Document, IngestionJob, Node
from documents.services import background, jobs
from documents.services.documents import document_create
from openfable.embeddings import EmbeddingError, get_embedder
from tests.factories import CollectionFactory

pytestmark = pytest.mark.django_db

TEXT = "Tide tables\n\nHigh tide comes twice a day.\n\nThe moon pulls the water.\n"


class _Embedder:
    """The real local model, with a hook that runs before each batch."""

    def __init__(self, before_batch: object) -> None:
        self.real = get_embedder()
        self.model_name, self.dimensions = self.real.model_name, self.real.dimensions
        self.before_batch = before_batch
        self.calls = 0

    def embed_passages(self, texts: Sequence[str]) -> np.ndarray:
        self.calls += 1
        self.before_batch()  # type: ignore[operator]
        return self.real.embed_passages(texts)

    def embed_query(self, text: str) -> np.ndarray:
        return self.real.embed_query(text)


def test_transient_failures_retry_then_fail_the_job_visibly(
    monkeypatch: pytest.MonkeyPatch, eager_tasks: None
) -> None:
    def unavailable() -> None:
        raise EmbeddingError("The embedding service at http://127.0.0.1:9 is not answering.")

    broken = _Embedder(unavailable)
    monkeypatch.setattr(jobs, "get_embedder", lambda: broken)
    document = document_create(collection=CollectionFactory.create(), content=TEXT, queue=False).document

    tasks.run_ingestion_job.apply(args=[document.pk])

    job = IngestionJob.objects.get(document=document)
    assert broken.calls == tasks.MAX_RETRIES + 1, "the first try and three retries"
    assert job.status == IngestionJob.Status.FAILED
    assert job.error.startswith(f"Gave up after {tasks.MAX_RETRIES} retries") and "not answering" in job.error
    document.refresh_from_db()
    assert document.status == Document.Status.FAILED


def test_retry_options_are_celerys_own() -> None:
    task = tasks.run_ingestion_job
    # The name messages in the broker carry, kept from before the function was renamed.
    assert task.name == "documents.tasks.ingest_document"
    assert task.autoretry_for == (EmbeddingError,)
    assert task.retry_backoff and task.retry_jitter and task.max_retries == tasks.MAX_RETRIES


def test_the_database_away_is_waited_for_minutes_not_seconds(
    monkeypatch: pytest.MonkeyPatch, eager_tasks: None
) -> None:
    """A restart or fail-over of the database outlasts Celery's three quick retries: the task keeps
    trying on its own, longer schedule and finishes the job once the database answers (the fault
    test tests/faults/test_database_restart.py does it with real processes and a stopped server)."""
    from django.db import OperationalError

    real = jobs.job_run_now
    attempts: list[int] = []
    countdowns: list[float] = []

    def away_for_a_while(**kwargs: object) -> object:
        attempts.append(1)
        if len(attempts) <= 6:  # twice as many failures as Celery's own schedule would take
            raise OperationalError("connection to server on socket failed: No such file or directory")
        return real(**kwargs)  # type: ignore[arg-type]

    original_retry = tasks.run_ingestion_job.retry

    def recorded_retry(*args: object, **kwargs: object) -> object:
        countdowns.append(float(kwargs["countdown"]))  # type: ignore[arg-type]
        return original_retry(*args, **kwargs)

    monkeypatch.setattr(tasks, "job_run_now", away_for_a_while)
    monkeypatch.setattr(tasks.run_ingestion_job, "retry", recorded_retry)
    document = document_create(collection=CollectionFactory.create(), content=TEXT, queue=False).document

    tasks.run_ingestion_job.apply(args=[document.pk])

    assert len(attempts) == 7
    assert IngestionJob.objects.get(document=document).status == IngestionJob.Status.SUCCEEDED
    # The delays grow (1, 2, 4, 8, 15, 30 s, each ±20 %), and the whole schedule waits minutes.
    assert len(countdowns) == 6 and countdowns == sorted(countdowns)
    assert 0.8 <= countdowns[0] <= 1.2 and 24 <= countdowns[-1] <= 36
    assert sum(tasks.DATABASE_RETRY_DELAYS) >= 240


def test_a_document_deleted_while_it_is_indexed_is_a_quiet_no_op(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    document = document_create(collection=CollectionFactory.create(), content=TEXT, queue=False).document

    def delete_it() -> None:
        Document.objects.filter(pk=document.pk).delete()

    monkeypatch.setattr(jobs, "get_embedder", lambda: _Embedder(delete_it))
    with caplog.at_level(logging.INFO):
        tasks.run_ingestion_job.apply(args=[document.pk])
    assert not Document.objects.exists() and not Node.objects.exists() and not IngestionJob.objects.exists()
    assert not [record for record in caplog.records if record.levelno >= logging.WARNING]
    assert any("deleted while it was being indexed" in record.getMessage() for record in caplog.records)


def test_a_job_whose_worker_died_is_failed_by_the_sweep_with_a_retry_not_left_indexing() -> None:
    """A worker killed mid-job cannot report it: the job stops showing progress, and once that has
    lasted OPENFABLE_JOB_STALL_SECONDS the worker's sweep fails it visibly. The pages, the REST
    API, MCP and the command line only read: until the sweep they show the job as it is.

    (This test used to rely on the page's GET failing the job; now it calls the sweep.)"""
    from datetime import timedelta

    from django.test import Client
    from django.urls import reverse
    from django.utils import timezone
    from rest_framework.test import APIClient

    from documents.services.job_queue import jobs_fail_stalled, jobs_sweep
    from documents.services.jobs import job_claim, job_progress
    from mcp_server.actions import job_status
    from openfable.api_tokens import token_create
    from tests.cli import run_openfable
    from tests.factories import UserFactory

    owner = UserFactory.create()
    document = document_create(
        collection=CollectionFactory.create(owner=owner), content=TEXT, queue=False
    ).document
    job = job_claim(document_id=document.pk)
    assert job is not None
    job_progress(job, "embedding", 0.5)
    assert jobs_fail_stalled() == 0, "a job that just moved is alive"

    IngestionJob.objects.filter(pk=job.pk).update(heartbeat=timezone.now() - timedelta(minutes=16))
    client = Client()
    client.force_login(owner)
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Bearer {token_create(user=owner, name='tests')[1]}")
    assert client.get(reverse("documents:home")).status_code == 200
    assert api.get("/v1/api/documents").status_code == 200
    assert api.get(f"/v1/api/jobs/{job.pk}").json()["status"] == "running"
    assert job_status(user=owner, job_id=job.pk)["status"] == "running"
    assert run_openfable("list")[0] == 0 and run_openfable("jobs", "--job", str(job.pk))[0] == 0
    job.refresh_from_db()
    assert job.status == IngestionJob.Status.RUNNING, "a read writes nothing"

    # What the worker's timer runs (tasks._sweep_jobs, which also closes this test's connection;
    # tests/faults/test_stall_sweep.py runs it in a real worker).
    assert jobs_sweep().failed == 1
    page = client.get(reverse("documents:home")).content.decode()
    job.refresh_from_db()
    document.refresh_from_db()
    assert job.status == IngestionJob.Status.FAILED and "The worker stopped while indexing" in job.error
    assert document.status == Document.Status.FAILED
    assert "The worker stopped while indexing" in page and ">Retry<" in page


def test_the_services_send_the_tasks_this_module_plugged_in(monkeypatch: pytest.MonkeyPatch) -> None:
    sent: list[tuple[str, object]] = []

    class Recorder:
        def __init__(self, name: str) -> None:
            self.name = name

        def delay(self, argument: object) -> None:
            sent.append((self.name, argument))

    assert background._tasks() == background.BackgroundTasks(
        ingest_document=tasks.run_ingestion_job, embed_nodes=tasks.embed_nodes
    ), "Django's start-up (DocumentsConfig.ready) imported documents.tasks, which plugged them in"
    monkeypatch.setattr(
        background,
        "_connected",
        background.BackgroundTasks(ingest_document=Recorder("ingest"), embed_nodes=Recorder("embed")),
    )
    background.ingestion_send(document_id=7)
    background.embedding_send(node_ids=[3, 4])
    assert sent == [("ingest", 7), ("embed", [3, 4])]
    monkeypatch.setattr(background, "_connected", None)
    with pytest.raises(RuntimeError, match=r"documents\.tasks was never imported"):
        background.ingestion_send(document_id=7)
