"""Jobs whose task never reached the broker (committed, then the broker failed or hung) are sent
again: by the worker's sweep, and when the same text is sent again. A real filesystem broker in
the test's folder, the test database."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from django.utils import timezone

from documents.models import IngestionJob
from documents.services.documents import document_create
from documents.services.job_queue import jobs_requeue_unsent
from openfable.celery import app as celery_app
from tests.factories import CollectionFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def queue_folder(tmp_path: Path) -> Iterator[Path]:
    """The app's broker for this test: a filesystem broker whose messages land in the folder yielded."""
    previous = (celery_app.conf.broker_url, celery_app.conf.broker_transport_options)
    folders = {name: tmp_path / name for name in ("queue", "control")}
    for folder in folders.values():
        folder.mkdir()
    celery_app.conf.broker_url = "filesystem://"
    celery_app.conf.broker_transport_options = {
        "data_folder_in": str(folders["queue"]),
        "data_folder_out": str(folders["queue"]),
        "control_folder": str(folders["control"]),
    }
    celery_app._after_fork()  # a producer pool made earlier points at another broker
    try:
        yield folders["queue"]
    finally:
        celery_app.conf.broker_url, celery_app.conf.broker_transport_options = previous
        celery_app._after_fork()


def _lost(text: str, *, age: float = 300) -> IngestionJob:
    """A queued job in the database whose task never reached the broker, made ``age`` seconds ago."""
    document = document_create(collection=CollectionFactory.create(), content=text, queue=False).document
    job = IngestionJob.objects.get(document=document)
    IngestionJob.objects.filter(pk=job.pk).update(
        heartbeat=None, created=timezone.now() - timedelta(seconds=age)
    )
    return job


def test_an_upload_notes_on_its_job_that_its_task_was_sent(
    queue_folder: Path, django_capture_on_commit_callbacks: Callable[..., Any]
) -> None:
    with django_capture_on_commit_callbacks(execute=True):
        job = document_create(collection=CollectionFactory.create(), content="Sent once.").job
    assert job is not None
    job.refresh_from_db()
    assert job.status == IngestionJob.Status.QUEUED and job.heartbeat is not None
    assert len(list(queue_folder.glob("*.msg"))) == 1
    assert jobs_requeue_unsent(older_than=0) == [], "a sent job is not sent twice"


def test_the_sweep_sends_the_jobs_never_sent_and_leaves_the_others(queue_folder: Path) -> None:
    lost = _lost("Lost long ago.")
    young = _lost("Being committed right now.", age=1)
    handed = document_create(collection=CollectionFactory.create(), content="Run here.", queue=False).job
    assert handed is not None and handed.heartbeat is not None, "the caller runs it: nothing to send"

    assert jobs_requeue_unsent(older_than=60) == [lost.document_id]
    assert len(list(queue_folder.glob("*.msg"))) == 1
    lost.refresh_from_db()
    young.refresh_from_db()
    assert lost.heartbeat is not None and young.heartbeat is None
    assert jobs_requeue_unsent(older_than=60) == [], "sent once"


def test_the_same_text_sent_again_queues_its_lost_job_instead_of_answering_no_job(
    queue_folder: Path, django_capture_on_commit_callbacks: Callable[..., Any]
) -> None:
    lost = _lost("Sent while the broker hung.")
    collection = lost.document.collection
    with django_capture_on_commit_callbacks(execute=True):
        again = document_create(collection=collection, content="Sent while the broker hung.")
    assert not again.created and again.job is not None and again.job.pk == lost.pk
    assert len(list(queue_folder.glob("*.msg"))) == 1
    lost.refresh_from_db()
    assert lost.heartbeat is not None
    # Sent now: the same text a third time is the same document, with nothing more to queue.
    with django_capture_on_commit_callbacks(execute=True):
        third = document_create(collection=collection, content="Sent while the broker hung.")
    assert third.job is None and len(list(queue_folder.glob("*.msg"))) == 1


def test_a_broker_that_refuses_the_task_leaves_the_job_for_the_sweep(
    django_capture_on_commit_callbacks: Callable[..., Any], caplog: pytest.LogCaptureFixture
) -> None:
    previous = (celery_app.conf.broker_url, celery_app.conf.broker_transport_options)
    celery_app.conf.broker_url = "redis://127.0.0.1:9/0"  # nothing listens on the discard port
    celery_app.conf.broker_transport_options = {}
    celery_app._after_fork()
    try:
        with django_capture_on_commit_callbacks(execute=True):
            result = document_create(collection=CollectionFactory.create(), content="Broker away.")
    finally:
        celery_app.conf.broker_url, celery_app.conf.broker_transport_options = previous
        celery_app._after_fork()
    assert result.created and result.job is not None, "the upload itself is kept"
    result.job.refresh_from_db()
    assert result.job.status == IngestionJob.Status.QUEUED and result.job.heartbeat is None
    assert "could not be queued" in caplog.text
