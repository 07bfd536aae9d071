"""A Celery worker's heartbeat: busy is not dead.

A worker answers the health check's ping from its main process; with every pool slot embedding a
long document on a small machine, that answer can take longer than the ping waits (25 of 25 health
checks answered 503 during one indexing run), and a liveness probe reading that would restart a
worker that was working. So a thread of the worker's main process writes a row
(``openfable.models.WorkerHeartbeat``) every ``OPENFABLE_WORKER_HEARTBEAT_SECONDS``, whatever the
pool is doing; the health check (``openfable.health``) takes a heartbeat younger than
``HEARTBEAT_MISSED`` beats as a live worker, busy. A thread, not the worker's timer: the timer
runs the job sweep too, and one slow sweep must not look like a dead worker.

Started and stopped by a bootstep of the worker (``HeartbeatStep``, added in ``openfable.celery``);
a worker that stops deletes its row, so the health check says at once that none is left.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from celery import bootsteps
from django.conf import settings
from django.db import DatabaseError, close_old_connections
from django.utils import timezone

logger = logging.getLogger(__name__)

# A worker is taken as gone once this many beats in a row are missing: one late beat (a slow
# database, a starved machine) is not a death.
HEARTBEAT_MISSED = 6
# Rows of workers gone this long are deleted by the next beat of any worker.
FORGET_AFTER = timedelta(days=1)


@dataclass(frozen=True)
class LiveWorker:
    name: str
    seconds_since_beat: float
    active_tasks: int


def heartbeat_stale_after() -> timedelta:
    """How old a heartbeat may be while its worker still counts as alive."""
    return timedelta(seconds=HEARTBEAT_MISSED * settings.WORKER_HEARTBEAT_SECONDS)


def heartbeat_write(*, name: str, started_at: datetime, active_tasks: int) -> None:
    """Record that the worker ``name`` is alive now, running ``active_tasks`` tasks."""
    from openfable.models import WorkerHeartbeat

    now = timezone.now()
    WorkerHeartbeat.objects.update_or_create(
        name=name,
        defaults={
            "hostname": name.rsplit(":", 1)[0],
            "started_at": started_at,
            "beat_at": now,
            "active_tasks": active_tasks,
        },
    )
    WorkerHeartbeat.objects.filter(beat_at__lt=now - FORGET_AFTER).delete()


def heartbeat_delete(*, name: str) -> None:
    """The worker ``name`` stops: it is no longer alive, say so at once."""
    from openfable.models import WorkerHeartbeat

    WorkerHeartbeat.objects.filter(name=name).delete()


def live_workers(*, hostname: str | None = None) -> list[LiveWorker]:
    """The workers (of ``hostname``, else all) whose last heartbeat is recent enough, newest first."""
    from openfable.models import WorkerHeartbeat

    now = timezone.now()
    rows = WorkerHeartbeat.objects.filter(beat_at__gte=now - heartbeat_stale_after())
    if hostname is not None:
        rows = rows.filter(hostname=hostname)
    return [
        LiveWorker(
            name=row.name,
            seconds_since_beat=max(0.0, (now - row.beat_at).total_seconds()),
            active_tasks=row.active_tasks,
        )
        for row in rows.order_by("-beat_at")
    ]


def worker_name() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


class _Beating:
    """The thread that beats until it is told to stop."""

    def __init__(self, *, name: str, active_tasks: Any) -> None:
        self.name = name
        self.started_at = timezone.now()
        self._active_tasks = active_tasks
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="openfable-heartbeat", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=10)
        try:
            heartbeat_delete(name=self.name)
        except DatabaseError as error:
            logger.warning("could not delete this worker's heartbeat (%s); it grows stale instead", error)
        finally:
            close_old_connections()

    def _run(self) -> None:
        while True:
            try:
                heartbeat_write(name=self.name, started_at=self.started_at, active_tasks=self._active_tasks())
            except DatabaseError as error:
                logger.warning("could not write this worker's heartbeat (%s); trying again", error)
            finally:
                close_old_connections()  # the thread keeps no connection between beats
            if self._stop.wait(settings.WORKER_HEARTBEAT_SECONDS):
                return


def _active_tasks() -> int:
    # The main process's own record of the requests its pool is running (prefork or not).
    from celery.worker import state

    return len(state.active_requests)


class HeartbeatStep(bootsteps.StartStopStep):
    """Beats while the worker runs (``openfable.celery`` adds it to every worker)."""

    def __init__(self, worker: Any, **kwargs: Any) -> None:
        super().__init__(worker, **kwargs)
        self.beating: _Beating | None = None

    def start(self, worker: Any) -> None:
        self.beating = _Beating(name=worker_name(), active_tasks=_active_tasks)
        self.beating.start()

    def stop(self, worker: Any) -> None:
        if self.beating is not None:
            self.beating.stop()
            self.beating = None

    # A cold shutdown (a second Ctrl-C, a worker told to terminate) terminates the steps instead of
    # stopping them, and Celery's own terminate only stops a step's ``obj``, which this step has
    # none of: without this the thread went on beating for a worker that had stopped (a worker
    # in a thread of a longer-lived process kept "alive" for good).
    terminate = stop
