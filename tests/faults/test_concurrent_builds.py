"""Builds that run while something else happens to their document (real threads, real PostgreSQL,
each thread with its own connection and transaction, the real local embedding model).

- a collection deleted while one of its trees is being saved, or while its documents embed:
  the delete waits for the save and removes everything, the builds stop quietly;
- a slow build beats every few seconds in every stage, so the stalled-job sweep never fails it;
- a build whose job was given up (swept, or claimed again by another runner) saves nothing.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np
import pytest
from django.db import connection

from documents.models import (
    Collection,
    CollectionSearchStats,
    CollectionTerm,
    Document,
    DocumentTerm,
    IngestionJob,
    Node,
)
from documents.services import jobs, trees
from documents.services.collections import collection_create, collection_delete
from documents.services.documents import document_create
from documents.services.job_queue import jobs_fail_stalled
from documents.services.jobs import JobRun, job_claim, job_run_now
from openfable.embeddings import get_embedder

pytestmark = [pytest.mark.faults, pytest.mark.slow, pytest.mark.django_db(transaction=True)]

PARAGRAPH = (
    "Paragraph {n} of the station manual. The anemometer on mast {n} reads wind speed every second, "
    "and the logger keeps a ten-minute mean with the peak gust beside it for the report."
)


def _text(paragraphs: int, salt: str = "") -> str:
    return f"# Manual {salt}\n\n" + "\n\n".join(PARAGRAPH.format(n=n) for n in range(paragraphs)) + "\n"


class _SlowEmbedder:
    """The real local model, ``seconds_per_text`` slower, with a hook before each call."""

    def __init__(self, *, seconds_per_text: float = 0.0, before: Callable[[int], None] | None = None) -> None:
        self.real = get_embedder()
        self.model_name, self.dimensions = self.real.model_name, self.real.dimensions
        self.seconds_per_text = seconds_per_text
        self.before = before or (lambda call: None)
        self.calls = 0

    def embed_passages(self, texts: Sequence[str]) -> np.ndarray:
        self.calls += 1
        self.before(self.calls)
        time.sleep(self.seconds_per_text * len(texts))
        return self.real.embed_passages(texts)

    def embed_query(self, text: str) -> np.ndarray:
        return self.real.embed_query(text)


class _InThread:
    """Run ``target`` in a thread with a connection of its own; its result or its exception."""

    def __init__(self, target: Callable[[], Any]) -> None:
        self.result: Any = None
        self.error: BaseException | None = None

        def run() -> None:
            try:
                self.result = target()
            except BaseException as error:  # handed to the test to assert on
                self.error = error
            finally:
                connection.close()

        self.thread = threading.Thread(target=run, daemon=True)
        self.thread.start()

    def join(self, timeout: float = 120) -> Any:
        self.thread.join(timeout)
        assert not self.thread.is_alive(), "the thread did not finish"
        if self.error is not None:
            raise self.error
        return self.result


def _waiting_on_a_lock(timeout: float = 30) -> None:
    """Until another backend of this database waits for a row lock."""
    deadline = time.monotonic() + timeout
    with connection.cursor() as cursor:
        while time.monotonic() < deadline:
            cursor.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                "AND wait_event_type = 'Lock'"
            )
            if cursor.fetchone()[0]:
                return
            time.sleep(0.05)
    raise AssertionError("nothing waited for a lock")


@pytest.fixture
def pause_in_save(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[threading.Event, threading.Event]]:
    """Holds a tree swap inside its transaction, its new nodes written, until ``release`` is set."""
    inside, release = threading.Event(), threading.Event()
    real = trees.search_index_refresh

    def paused(document_ids: list[int]) -> None:
        real(document_ids)
        inside.set()
        assert release.wait(60), "the test never let the swap commit"

    monkeypatch.setattr(trees, "search_index_refresh", paused)
    yield inside, release
    release.set()


# -- item 12: deleting a collection while its documents index


def test_deleting_a_collection_while_a_tree_is_saved_waits_for_it_and_removes_everything(
    pause_in_save: tuple[threading.Event, threading.Event],
) -> None:
    inside, release = pause_in_save
    collection = collection_create(name="Stations")
    documents = [
        document_create(collection=collection, content=_text(3, salt=str(n)), queue=False).document
        for n in range(2)
    ]
    build = _InThread(lambda: job_run_now(document_id=documents[0].pk, embedder=_SlowEmbedder()))
    assert inside.wait(60), "the build never reached its save"

    delete = _InThread(lambda: collection_delete(collection=collection))
    _waiting_on_a_lock()  # the delete waits for the tree being saved...
    release.set()  # ...which commits now, its new nodes included
    delete.join()
    run = build.join()

    # The save committed before the delete; the run ends as succeeded, or finds its job gone.
    assert run is None or (isinstance(run, JobRun) and run.succeeded)
    assert not Collection.objects.filter(pk=collection.pk).exists()
    assert not Document.objects.exists() and not Node.objects.exists()
    assert not DocumentTerm.objects.exists() and not IngestionJob.objects.exists()
    assert not CollectionTerm.objects.exists() and not CollectionSearchStats.objects.exists()


def test_deleting_a_collection_while_its_documents_embed_stops_the_builds_quietly(
    caplog: pytest.LogCaptureFixture,
) -> None:
    collection = collection_create(name="Stations")
    document = document_create(collection=collection, content=_text(20), queue=False).document
    embedding = threading.Event()
    embedder = _SlowEmbedder(seconds_per_text=0.02, before=lambda call: embedding.set())
    build = _InThread(lambda: job_run_now(document_id=document.pk, embedder=embedder))
    assert embedding.wait(60)

    collection_delete(collection=collection)
    assert build.join() is None, "the build found its document gone and stopped"
    assert not Document.objects.exists() and not Node.objects.exists() and not IngestionJob.objects.exists()
    assert not [record for record in caplog.records if record.levelname in ("ERROR", "CRITICAL")]


# -- item 7: a large document's build beats; one build per document


def test_a_slow_build_beats_in_every_stage_and_is_never_swept(settings: Any) -> None:
    """Embedding its blocks takes several times the stall limit; the sweep, run all along from
    another connection as the pages and endpoints run it, never fails it."""
    settings.JOB_STALL_SECONDS = 12
    document = document_create(
        collection=collection_create(name="Big"), content=_text(60), queue=False
    ).document
    # 60 blocks (a paragraph each) at 0.3 s more each: without progress by block groups, one
    # silent call of 18 s and more; with it, a beat every 16 blocks (4.8 s and the model's time,
    # which a loaded 2-core machine can stretch to a few seconds: hence the 12 s limit).
    build = _InThread(
        lambda: job_run_now(document_id=document.pk, embedder=_SlowEmbedder(seconds_per_text=0.3))
    )
    swept = 0
    stages: set[str] = set()
    while build.thread.is_alive():
        swept += jobs_fail_stalled()
        stages.update(IngestionJob.objects.values_list("stage", flat=True))
        time.sleep(0.2)
    run = build.join()
    assert swept == 0 and isinstance(run, JobRun) and run.succeeded, run and run.job.error
    assert {"chunking", "embedding"} <= stages
    document.refresh_from_db()
    assert document.status == Document.Status.INDEXED


def test_the_save_beats_too_and_the_sweep_leaves_it_alone(
    pause_in_save: tuple[threading.Event, threading.Event], monkeypatch: pytest.MonkeyPatch, settings: Any
) -> None:
    """A tree swap is one transaction (minutes for a 5 MB document): a thread with a connection
    of its own keeps the heartbeat moving meanwhile, and the sweep never fails it."""
    monkeypatch.setattr(jobs, "_SAVE_HEARTBEAT_SECONDS", 0.2)
    inside, release = pause_in_save
    document = document_create(
        collection=collection_create(name="Big"), content=_text(3), queue=False
    ).document
    build = _InThread(lambda: job_run_now(document_id=document.pk, embedder=_SlowEmbedder()))
    assert inside.wait(60)
    beats = set()
    for _ in range(10):
        beats.add(IngestionJob.objects.values_list("heartbeat", flat=True).get())
        time.sleep(0.15)
    settings.JOB_STALL_SECONDS = 60
    IngestionJob.objects.update(heartbeat=time_ago(120))  # as if the save had been silent that long
    assert jobs_fail_stalled() == 0, "a document whose tree is being saved has a live worker"
    release.set()
    run = build.join()
    assert len(beats) >= 3, "the heartbeat moved during the save"
    assert isinstance(run, JobRun) and run.succeeded


def test_a_build_whose_job_was_swept_meanwhile_saves_nothing_and_states_agree(settings: Any) -> None:
    document = document_create(
        collection=collection_create(name="Big"), content=_text(20), queue=False
    ).document

    def swept_once(call: int) -> None:
        if call == 2:  # the worker looks dead to the sweep (a long pause, say)
            settings.JOB_STALL_SECONDS = 60
            IngestionJob.objects.update(heartbeat=time_ago(120))
            assert jobs_fail_stalled() == 1

    run = job_run_now(document_id=document.pk, embedder=_SlowEmbedder(before=swept_once))
    assert run is None, "the build stopped at its next heartbeat"
    job = IngestionJob.objects.get()
    document.refresh_from_db()
    assert job.status == IngestionJob.Status.FAILED and document.status == Document.Status.FAILED
    assert not Node.objects.exists(), "nothing of the given-up build was saved"


def test_a_job_claimed_again_leaves_one_build_the_first_runner_stops() -> None:
    """A second runner takes the job over while the first one embeds (a task delivered twice):
    the first finds the job no longer its own and saves nothing; the second one's tree is kept."""
    document = document_create(
        collection=collection_create(name="Big"), content=_text(20), queue=False
    ).document
    claims: list[IngestionJob | None] = []

    def claimed_by_another(call: int) -> None:
        if call == 2:
            claims.append(_InThread(lambda: job_claim(document_id=document.pk, worker="other:1")).join())

    first = job_run_now(document_id=document.pk, embedder=_SlowEmbedder(before=claimed_by_another))
    assert first is None, "the first runner stopped without saving"
    assert not Node.objects.exists()
    claimed = claims[0]
    assert claimed is not None and claimed.worker == "other:1"
    assert IngestionJob.objects.get().status == IngestionJob.Status.RUNNING
    second = job_run_now(document_id=document.pk, embedder=_SlowEmbedder(), claimed=claimed)
    assert second is not None and second.succeeded and Node.objects.filter(document=document).exists()


def time_ago(seconds: float) -> Any:
    from datetime import timedelta

    from django.utils import timezone

    return timezone.now() - timedelta(seconds=seconds)


_ = jobs  # the module whose sweep and heartbeat these tests exercise
