"""Queued jobs whose message was sent and then lost from the broker (a worker that took it and died
before claiming the job; a broker that lost its last writes) are sent again: by the worker's sweep,
whatever their heartbeat, and when a person re-indexes the document. A long queue with every message
in it sends nothing. The session's real Redis broker (``broker_url``), the test database."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
import redis
from django.utils import timezone
from rest_framework.test import APIClient

from documents.models import IngestionJob
from documents.services.documents import document_create, document_reindex
from documents.services.job_queue import jobs_requeue_lost, jobs_sweep
from openfable.api_tokens import token_create
from openfable.celery import app as celery_app
from tests.factories import CollectionFactory, UserFactory

pytestmark = pytest.mark.django_db

QUEUE = "celery"  # Celery's default queue: a Redis list, pushed on the left, taken from the right


def _redis(url: str) -> redis.Redis:
    return redis.Redis.from_url(url.replace("redis+socket://", "unix://"))


def _sent(text: str, capture: Callable[..., Any], *, age: float, collection: Any = None) -> IngestionJob:
    """A queued job whose message went to the broker ``age`` seconds ago."""
    with capture(execute=True):
        job = document_create(collection=collection or CollectionFactory.create(), content=text).job
    assert job is not None
    IngestionJob.objects.filter(pk=job.pk).update(heartbeat=timezone.now() - timedelta(seconds=age))
    job.refresh_from_db()
    return job


def test_the_sweep_sends_again_the_job_whose_message_a_dead_worker_took(
    broker_url: str, django_capture_on_commit_callbacks: Callable[..., Any]
) -> None:
    broker = _redis(broker_url)
    oldest = _sent("Sent first.", django_capture_on_commit_callbacks, age=300)
    for n in range(3):
        _sent(f"Sent later {n}.", django_capture_on_commit_callbacks, age=200)
    assert broker.llen(QUEUE) == 4
    assert jobs_requeue_lost(older_than=60) == [], "a long queue with every message in it sends nothing"

    # A worker takes the oldest message (first in, first out) and dies before it claims the job:
    # the job stays queued, with the heartbeat of its send, and nothing in the broker names it.
    assert broker.rpop(QUEUE) is not None
    assert jobs_requeue_lost(older_than=60) == [oldest.document_id]
    assert broker.llen(QUEUE) == 4
    oldest.refresh_from_db()
    assert oldest.status == IngestionJob.Status.QUEUED
    assert oldest.heartbeat is not None and timezone.now() - oldest.heartbeat < timedelta(seconds=10)
    assert jobs_requeue_lost(older_than=60) == [], "sent once, not at every sweep"


def test_the_sweep_leaves_a_job_sent_moments_ago_and_sends_it_once_it_is_older(
    broker_url: str, django_capture_on_commit_callbacks: Callable[..., Any]
) -> None:
    young = _sent("Sent a moment ago.", django_capture_on_commit_callbacks, age=1)
    _redis(broker_url).delete(QUEUE)  # the broker lost it
    assert jobs_requeue_lost(older_than=60) == []
    IngestionJob.objects.filter(pk=young.pk).update(heartbeat=timezone.now() - timedelta(seconds=61))
    # The worker's own sweep, with the app's settings: within a minute of the loss.
    assert jobs_sweep().sent == [young.document_id]
    assert _redis(broker_url).llen(QUEUE) == 1


def test_the_sweep_sends_nothing_when_it_cannot_count_the_queue(
    broker_url: str, django_capture_on_commit_callbacks: Callable[..., Any], caplog: pytest.LogCaptureFixture
) -> None:
    _sent("Lost, broker away.", django_capture_on_commit_callbacks, age=300)
    _redis(broker_url).delete(QUEUE)
    previous = celery_app.conf.broker_url
    celery_app.conf.broker_url = "redis+socket:///nonexistent/openfable/redis.sock"
    celery_app._after_fork()
    try:
        assert jobs_requeue_lost(older_than=60) == []
    finally:
        celery_app.conf.broker_url = previous
        celery_app._after_fork()
    assert "could not count the broker's messages" in caplog.text


def test_reindexing_a_stuck_queued_job_sends_its_message_again(
    broker_url: str, django_capture_on_commit_callbacks: Callable[..., Any]
) -> None:
    broker = _redis(broker_url)
    stuck = _sent("Stuck in the queue.", django_capture_on_commit_callbacks, age=300)
    broker.delete(QUEUE)
    with django_capture_on_commit_callbacks(execute=True):
        again = document_reindex(document=stuck.document)
    assert again.pk == stuck.pk, "the queued job is the re-index: no second job"
    assert broker.llen(QUEUE) == 1
    # Asked again at once: its message went moments ago, nothing more is sent.
    with django_capture_on_commit_callbacks(execute=True):
        document_reindex(document=stuck.document)
    assert broker.llen(QUEUE) == 1


def test_reindexing_a_job_that_waits_its_turn_sends_nothing_more(
    broker_url: str, django_capture_on_commit_callbacks: Callable[..., Any]
) -> None:
    waiting = _sent("Waiting its turn in a long queue.", django_capture_on_commit_callbacks, age=300)
    with django_capture_on_commit_callbacks(execute=True):
        again = document_reindex(document=waiting.document)
    assert again.pk == waiting.pk
    # Its message is still in the queue: a second one would reach the job while it runs.
    assert _redis(broker_url).llen(QUEUE) == 1


def test_the_rest_reindex_of_a_stuck_job_answers_it_and_sends_it_again(
    broker_url: str, django_capture_on_commit_callbacks: Callable[..., Any]
) -> None:
    broker = _redis(broker_url)
    owner = UserFactory.create()
    stuck = _sent(
        "Stuck, then re-indexed through the API.",
        django_capture_on_commit_callbacks,
        age=300,
        collection=CollectionFactory.create(owner=owner),
    )
    broker.delete(QUEUE)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {token_create(user=owner, name='tests')[1]}")
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(f"/v1/api/documents/{stuck.document_id}/reindex", {}, format="json")
    assert response.status_code == 202, response.content
    assert response.json()["job"]["id"] == stuck.pk
    assert broker.llen(QUEUE) == 1


def test_the_same_text_sent_again_sends_a_stuck_job_again(
    broker_url: str, django_capture_on_commit_callbacks: Callable[..., Any]
) -> None:
    broker = _redis(broker_url)
    stuck = _sent("Sent, lost, sent again.", django_capture_on_commit_callbacks, age=300)
    broker.delete(QUEUE)
    with django_capture_on_commit_callbacks(execute=True):
        again = document_create(collection=stuck.document.collection, content="Sent, lost, sent again.")
    assert not again.created and again.job is not None and again.job.pk == stuck.pk
    assert broker.llen(QUEUE) == 1
