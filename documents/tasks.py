"""Celery tasks: thin shells that take ids and call the services (documents.services.*).

A surface over the services, as the views are: the services never import this module. They send
these tasks through ``documents.services.background``, which this module plugs them into below.
"""

from __future__ import annotations

import logging
import os
import random
import socket
from pathlib import Path
from typing import Any

from celery import Task, bootsteps, shared_task
from celery.signals import worker_ready
from django.conf import settings
from django.db import InterfaceError, OperationalError, close_old_connections

from documents.services.background import BackgroundTasks, tasks_connect
from documents.services.job_queue import job_fail_unfinished, jobs_requeue_orphans, jobs_sweep
from documents.services.jobs import job_run_now
from documents.services.reembed import nodes_embed_stale
from openfable.celery import app
from openfable.embeddings import EmbeddingDimensionError, EmbeddingError

logger = logging.getLogger(__name__)

# Failures worth retrying: the database or the embedding service briefly away. A wrong
# embedding size is a setting to fix, so it is recorded on the job at once instead.
DATABASE_ERRORS = (OperationalError, InterfaceError)
TRANSIENT_ERRORS = (*DATABASE_ERRORS, EmbeddingError)
MAX_RETRIES = 3  # for the embedding service, through Celery's own backoff below
_RETRY_OPTIONS: dict[str, Any] = {
    "autoretry_for": (EmbeddingError,),
    "dont_autoretry_for": (EmbeddingDimensionError,),
    "max_retries": MAX_RETRIES,
    "retry_backoff": 2,  # seconds before the first retry, doubling
    "retry_backoff_max": 60,
    "retry_jitter": True,
}
# The database away is waited for longer, about five minutes in all: a restart or a fail-over
# takes from seconds to a minute or two. Within Celery's schedule above (full jitter: 14 s at
# most, often under 5) a task gave up while the database was still down, and then could not even
# record that it had: the document showed "indexing" until the stall sweep, 15 minutes later.
DATABASE_RETRY_DELAYS = (1, 2, 4, 8, 15, 30, 30, 30, 30, 30, 30, 30, 30, 30)


def _retry_later(task: Task, error: Exception) -> Exception:
    """The retry to raise for a database error (the next delay of DATABASE_RETRY_DELAYS, ±20 %
    so that many workers do not come back at the same instant); the error itself once they are spent."""
    retries = task.request.retries
    delay = DATABASE_RETRY_DELAYS[min(retries, len(DATABASE_RETRY_DELAYS) - 1)]
    logger.warning("database unavailable (%s); retrying in about %d s", error, delay)
    return task.retry(
        exc=error,
        countdown=delay * random.uniform(0.8, 1.2),
        max_retries=len(DATABASE_RETRY_DELAYS),
        throw=False,
    )


class _IngestTask(Task):
    def on_failure(self, exc: Exception, task_id: str, args: Any, kwargs: Any, einfo: Any) -> None:
        # Celery gave up retrying: the job must not stay "running" forever.
        document_id = kwargs.get("document_id", args[0] if args else None)
        if document_id is None:
            return
        try:
            job_fail_unfinished(
                document_id=document_id, error=f"Gave up after {self.request.retries} retries: {exc}"
            )
        except DATABASE_ERRORS:
            logger.error(
                "document %s: could not record the failure, the database is still away; the job "
                "shows as failed after OPENFABLE_JOB_STALL_SECONDS without progress",
                document_id,
            )


# The broker name is the one messages carry (the task's first name): messages queued before an
# upgrade still find it.
@shared_task(
    name="documents.tasks.ingest_document", base=_IngestTask, bind=True, acks_late=True, **_RETRY_OPTIONS
)
def run_ingestion_job(self: Task, document_id: int) -> None:
    """Index the document's newest unfinished job. Safe to run twice: the tree is replaced, never appended."""
    try:
        run = job_run_now(document_id=document_id, retryable=TRANSIENT_ERRORS, worker=_worker_name())
    except DATABASE_ERRORS as error:
        raise _retry_later(self, error) from error
    if run is not None and run.error is not None:
        logger.warning("document %s: ingestion failed: %s", document_id, run.job.error)


@shared_task(bind=True, acks_late=True, **_RETRY_OPTIONS)
def embed_nodes(self: Task, node_ids: list[int]) -> None:
    """Re-embed nodes whose embedded text a person changed (a node edit); deleted ids are skipped."""
    try:
        nodes_embed_stale(node_ids=node_ids)
    except DATABASE_ERRORS as error:
        raise _retry_later(self, error) from error


# The services queue them through this seam (documents.services.background), never by name.
tasks_connect(BackgroundTasks(ingest_document=run_ingestion_job, embed_nodes=embed_nodes))


@worker_ready.connect
def _requeue_orphaned_jobs(**kwargs: Any) -> None:
    """A worker starting on this host takes back the jobs a dead process of this host left running,
    and sends the queued jobs whose task never reached the broker."""
    requeued = jobs_requeue_orphans(hostname=socket.gethostname(), alive=_process_alive)
    if requeued:
        logger.warning("queued again the ingestion of documents %s: their worker had died", requeued)
    _sweep_jobs()


def _sweep_jobs() -> None:
    """Jobs that nothing would ever finish: never sent to the broker (sent now), or running with no
    sign of life for OPENFABLE_JOB_STALL_SECONDS (failed, with a retry offered)."""
    try:
        jobs_sweep()
    except DATABASE_ERRORS as error:
        logger.warning("the job sweep could not reach the database (%s); it runs again shortly", error)
    finally:
        close_old_connections()  # the timer's thread keeps no connection between sweeps


class JobSweep(bootsteps.StartStopStep):
    """The worker's timer runs ``_sweep_jobs`` every OPENFABLE_JOB_SWEEP_SECONDS (no beat needed)."""

    requires = {"celery.worker.components:Timer"}

    def __init__(self, worker: Any, **kwargs: Any) -> None:
        super().__init__(worker, **kwargs)
        self.timer_entry: Any = None

    def start(self, worker: Any) -> None:
        self.timer_entry = worker.timer.call_repeatedly(settings.JOB_SWEEP_SECONDS, _sweep_jobs, priority=10)

    def stop(self, worker: Any) -> None:
        if self.timer_entry is not None:
            self.timer_entry.cancel()
            self.timer_entry = None


app.steps["worker"].add(JobSweep)


def _worker_name() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


def _process_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)  # signal 0: only asks whether the process exists
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # it exists, under another user
    # A killed pool child whose parent died too can linger as a zombie (nothing reaps it in some
    # containers): it exists, but runs nothing.
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return True
    return state not in {"Z", "X"}
