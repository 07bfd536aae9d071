"""Keeping ingestion jobs moving: a job's task sent to the broker once its transaction commits,
a failure recorded, and the worker's sweep of the jobs nothing would ever finish (never sent,
stalled, or orphaned by a worker killed as a whole). Running a job is ``documents.services.jobs``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import partial

from django.conf import settings
from django.db import transaction
from django.utils import timezone
from kombu.exceptions import ChannelError, KombuError

from documents.models import Document, IngestionJob
from documents.services.background import ingestion_send

logger = logging.getLogger(__name__)

BROKER_TIMEOUT_SECONDS = 5.0  # the sweep's wait for the broker, when it counts the queue


def job_fail(*, job: IngestionJob, error: str, stalled_before: datetime | None = None) -> bool:
    """Record a failure: the old tree (if any) stays and keeps serving queries; False when the
    job had finished meanwhile (nothing is changed then).

    The job and its document change in one transaction, the document row locked first (the
    order ``document_tree_replace`` takes them in), so they never disagree: a failed job leaves
    a failed document, never one still "indexing". ``stalled_before``: only if the job's
    heartbeat is still older than that (the sweep), and a document locked by a tree being saved
    right now is skipped, not waited for: its worker is alive.
    """
    with transaction.atomic():
        document = Document.objects.select_for_update(skip_locked=stalled_before is not None)
        if not document.filter(pk=job.document_id).exists():
            return False  # deleted, or (the sweep) its tree is being saved
        unfinished = IngestionJob.objects.select_for_update().filter(
            pk=job.pk, status__in=[IngestionJob.Status.QUEUED, IngestionJob.Status.RUNNING]
        )
        if stalled_before is not None:
            unfinished = unfinished.filter(status=IngestionJob.Status.RUNNING, heartbeat__lt=stalled_before)
        if not unfinished.update(
            status=IngestionJob.Status.FAILED, error=error[:10_000], finished=timezone.now()
        ):
            return False
        Document.objects.filter(pk=job.document_id).update(status=Document.Status.FAILED)
    return True


def job_wait(*, job: IngestionJob, timeout: float, poll_seconds: float = 0.25) -> IngestionJob:
    """The job once it has finished, or as it is after ``timeout`` seconds (a worker runs it)."""
    deadline = time.monotonic() + timeout
    while True:
        job.refresh_from_db()
        if job.status in (IngestionJob.Status.SUCCEEDED, IngestionJob.Status.FAILED):
            return job
        if time.monotonic() >= deadline:
            return job
        time.sleep(poll_seconds)


def jobs_fail_stalled() -> int:
    """Fail the running jobs that showed no sign of life for OPENFABLE_JOB_STALL_SECONDS.

    A worker killed mid-job (out of memory, SIGKILL, a lost machine) cannot say so, and with the
    filesystem broker its message is gone: without this the document would show "indexing"
    forever. Its previous tree is untouched and keeps serving; the failure offers a retry. A write,
    so no read calls it: the worker's sweep does (``jobs_sweep``).
    """
    cutoff = timezone.now() - timedelta(seconds=settings.JOB_STALL_SECONDS)
    stalled = list(IngestionJob.objects.filter(status=IngestionJob.Status.RUNNING, heartbeat__lt=cutoff))
    minutes = max(1, round(settings.JOB_STALL_SECONDS / 60))
    failed = 0
    for job in stalled:
        # Every stage beats every few seconds (chunking block by block), so a job this quiet has
        # lost its worker. Checked again under lock: a beat since the read above keeps it alive.
        if job_fail(
            job=job,
            error=f"The worker stopped while indexing (no sign of life for {minutes} min): it was "
            "probably restarted or ran out of memory. The previous tree is intact; retry to index it again.",
            stalled_before=cutoff,
        ):
            logger.warning("job %s of document %s stalled; marked it failed", job.pk, job.document_id)
            failed += 1
    return failed


@dataclass(frozen=True)
class JobsSwept:
    sent: list[int]  # documents whose job's message never reached the broker or was lost, sent now
    failed: int  # running jobs with no sign of life for OPENFABLE_JOB_STALL_SECONDS, failed now


def jobs_sweep() -> JobsSwept:
    """The jobs nothing would ever finish: the unsent ones and those whose message was lost sent
    (again), the stalled ones failed.

    Run by the worker at start and every OPENFABLE_JOB_SWEEP_SECONDS (``documents.tasks``, under
    ``make run`` and docker-compose alike), and by `openfable sweep` for a person without a
    worker. Never by a page or an endpoint that shows jobs: a read writes nothing.
    """
    return JobsSwept(sent=jobs_requeue_unsent() + jobs_requeue_lost(), failed=jobs_fail_stalled())


def jobs_requeue_orphans(*, hostname: str, alive: Callable[[int], bool]) -> list[int]:
    """Put back in the queue the running jobs of this host whose process is gone; their documents' ids.

    Called when a worker starts: a worker killed as a whole (SIGKILL, out of memory) takes its
    task with it under the filesystem broker, and leaves it unacknowledged under Redis until the
    visibility timeout (OPENFABLE_BROKER_VISIBILITY_SECONDS). A job claimed by a process of this host that no longer exists is such a job: it is
    queued again and its task sent anew, so it is redelivered at once instead of "indexing"
    forever. The previous tree served queries all along (the swap happens at the very end).
    """
    orphans = []
    for job in IngestionJob.objects.filter(
        status=IngestionJob.Status.RUNNING, worker__startswith=f"{hostname}:"
    ).only("pk", "document_id", "worker"):
        pid = job.worker.rsplit(":", 1)[1]
        if pid.isdigit() and not alive(int(pid)):
            orphans.append(job)
    for job in orphans:
        logger.warning(
            "job %s of document %s lost its worker (%s); queueing it again",
            job.pk,
            job.document_id,
            job.worker,
        )
        with transaction.atomic():
            IngestionJob.objects.filter(pk=job.pk, status=IngestionJob.Status.RUNNING).update(
                status=IngestionJob.Status.QUEUED,
                worker="",
                stage=IngestionJob.Stage.QUEUED,
                progress=0,
                stage_done=0,
                stage_total=0,
                stage_started=None,
                heartbeat=None,  # not sent yet (job_send)
            )
            Document.objects.filter(pk=job.document_id).update(status=Document.Status.QUEUED)
            transaction.on_commit(partial(job_send, job_id=job.pk, document_id=job.document_id))
    return [job.document_id for job in orphans]


def job_send(*, job_id: int, document_id: int) -> None:
    """Send the job's task to the broker, then note on the job when it went (its ``heartbeat``).

    Called once the job's transaction has committed, and again for a job whose message was lost.
    On a queued job the heartbeat says when a runner was last handed it: its message sent, or
    (``queue=False``) the caller running it in-process. A job still without one after
    ``OPENFABLE_JOB_UNSENT_SECONDS`` was committed but never sent (the broker failed, or the
    request that made it hung on the broker): ``jobs_requeue_unsent`` sends it again. A broker
    that fails here is logged, not raised: the job is safely in the database.
    """
    try:
        ingestion_send(document_id=document_id)
    except (KombuError, OSError):
        logger.exception(
            "document %s: its ingestion could not be queued; the worker's sweep will", document_id
        )
        return
    # The time of the last send: the lost-message sweep counts from it.
    IngestionJob.objects.filter(pk=job_id, status=IngestionJob.Status.QUEUED).update(heartbeat=timezone.now())


def jobs_requeue_unsent(*, older_than: float | None = None) -> list[int]:
    """Send again the queued jobs whose task never reached the broker; their documents' ids.

    Run by the worker when it starts and on its timer (``documents.tasks``). ``older_than``
    (default OPENFABLE_JOB_UNSENT_SECONDS) leaves alone a job whose request is committing and
    sending it right now.
    """
    seconds = settings.JOB_UNSENT_SECONDS if older_than is None else older_than
    cutoff = timezone.now() - timedelta(seconds=seconds)
    unsent = list(
        IngestionJob.objects.filter(
            status=IngestionJob.Status.QUEUED, heartbeat__isnull=True, created__lt=cutoff
        ).values_list("pk", "document_id")
    )
    for job_id, document_id in unsent:
        logger.warning("job %s of document %s was never queued; queueing it now", job_id, document_id)
        job_send(job_id=job_id, document_id=document_id)
    return [document_id for _, document_id in unsent]


def jobs_requeue_lost(*, older_than: float | None = None) -> list[int]:
    """Send again the queued jobs whose message is no longer in the broker; their documents' ids.

        A message can be lost after it was sent: a worker that died between fetching it and claiming
        the job (kombu's filesystem transport deleted the file, then failed to read it: the job stayed
        queued for good), a broker that lost its last second of writes in a crash, a queue someone
        purged. The heartbeat does not tell such a job from one still waiting its turn, so the queue
        is counted instead: every queued job that was sent has its message waiting in the broker's
        queue (or, for the milliseconds between fetching and claiming, in a worker's hands). When the
        queue holds fewer messages than there are such jobs, that many are missing, and they are the
        ones sent longest ago: the queue is first in, first out, so a later message cannot have
        overtaken an earlier one that is still there. Those are sent again, at most that many: a long
        queue with every message in it sends nothing, and the worst a miscount does is send one job
        twice: its second message finds the job done, or claims it again and the first run stops
    without saving (``job_run_now``), so work is repeated but nothing is lost or built twice.

        ``older_than`` (default OPENFABLE_JOB_SWEEP_SECONDS) leaves alone a job sent this recently,
        so that a lost message is sent again within one or two sweeps (a minute by default). Nothing
        is sent when the broker cannot be reached: the next sweep counts again.
    """
    seconds = settings.JOB_SWEEP_SECONDS if older_than is None else older_than
    cutoff = timezone.now() - timedelta(seconds=seconds)
    # The jobs before the messages: a job sent between the two reads adds a message only, never
    # a job the count would take for lost.
    sent = list(
        IngestionJob.objects.filter(status=IngestionJob.Status.QUEUED, heartbeat__isnull=False)
        .order_by("heartbeat", "pk")
        .values_list("pk", "document_id", "heartbeat")
    )
    if not sent:
        return []
    waiting = _messages_waiting()
    if waiting is None or waiting >= len(sent):
        return []
    lost = [(job_id, document_id) for job_id, document_id, beat in sent if beat is not None and beat < cutoff]
    lost = lost[: len(sent) - waiting]
    for job_id, document_id in lost:
        logger.warning(
            "job %s of document %s is queued but its message is gone (%d jobs queued, %d messages); "
            "sending it again",
            job_id,
            document_id,
            len(sent),
            waiting,
        )
        job_send(job_id=job_id, document_id=document_id)
    return [document_id for _, document_id in lost]


def _messages_waiting() -> int | None:
    """How many messages the tasks' queue holds now; None when the broker cannot be reached."""
    from openfable.celery import app

    try:
        with app.connection_for_read() as connection:
            # Bounded: the channel below would otherwise wait for a broker that is down for good.
            connection.ensure_connection(max_retries=1, timeout=BROKER_TIMEOUT_SECONDS)
            try:
                declared = connection.default_channel.queue_declare(
                    queue=app.conf.task_default_queue, passive=True
                )
            except ChannelError:
                return 0  # Redis keeps no empty list: a queue never used or drained is "not found"
            return int(declared.message_count)
    except (KombuError, OSError) as error:
        logger.warning("the sweep could not count the broker's messages (%s); it tries again later", error)
        return None


def job_resend_stuck(*, job: IngestionJob) -> bool:
    """Send a queued job's message again once its transaction commits, when it may be lost;
    whether it will be sent.

    A person who re-indexes (or uploads again) a document whose job sits queued is asking for it to
    run: its message may be the lost one the sweep has not come to yet. Sent when the job was
    never sent; or when its last message went more than OPENFABLE_JOB_SWEEP_SECONDS ago and the
    broker's queue holds fewer messages than there are queued jobs that were sent (the sweep's
    count, ``jobs_requeue_lost``), or cannot be counted. A job merely waiting its turn in a long
    queue is left there: a second message would reach it while it runs and start it over.
    """
    if job.status != IngestionJob.Status.QUEUED:
        return False
    if job.heartbeat is not None:
        cutoff = timezone.now() - timedelta(seconds=settings.JOB_SWEEP_SECONDS)
        if job.heartbeat >= cutoff:
            return False
        waiting = _messages_waiting()
        sent = IngestionJob.objects.filter(status=IngestionJob.Status.QUEUED, heartbeat__isnull=False)
        if waiting is not None and waiting >= sent.count():
            return False
    transaction.on_commit(partial(job_send, job_id=job.pk, document_id=job.document_id))
    return True


def job_fail_unfinished(*, document_id: int, error: str) -> None:
    """Mark the document's unfinished jobs failed (a runner gave up on them); a retry stays available."""
    for job in IngestionJob.objects.filter(
        document_id=document_id, status__in=[IngestionJob.Status.QUEUED, IngestionJob.Status.RUNNING]
    ):
        job_fail(job=job, error=error)
