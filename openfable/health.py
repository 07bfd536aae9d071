"""Is every part the app needs answering? One function, read by the REST API, MCP and the CLI.

Each check is cheap and bounded: the database (a query under a statement timeout), pgvector (the
extension is installed), the broker (a connection with a timeout), a live worker (a ping that
waits at most ``WORKER_PING_SECONDS``), the embedder (one tiny embedding, no paid LLM call), and
whether an LLM is configured (its absence is not a failure: the vector paths work alone).
A worker that misses the ping but wrote a heartbeat lately (``openfable.worker_heartbeat``) is
alive and busy, and the check passes: only a worker with neither is down.

Probes: this whole check (``GET /v1/api/health``) is the readiness probe, it fails while any part
the app needs is away. ``GET /v1/api/health/live`` is the liveness probe of a web process: it
answers 200 as long as the process serves requests, whatever the database or the worker do, so
that a database restart never restarts the web servers. A worker's liveness is its own heartbeat
(``openfable worker-alive``), never a ping, which a busy worker may answer late.

The endpoint needs no sign-in, so anyone can call it in a burst: one probe runs at a time in a
process, its answer is kept for ``CACHE_SECONDS``, and requests that come while a probe runs get
the last answer instead of starting their own. The broker probes use a Celery app of their own
(``openfable.celery.probe_app``): the worker ping once waited on the producer pool that uploads
queue their tasks through, and a burst of 25 pings held every connection of it, hanging the
health check and every upload after it.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings
from django.db import connection, transaction

WORKER_PING_SECONDS = 1.0
PROBE_TIMEOUT_SECONDS = 2.0  # the database's statement timeout, the broker's connection timeout
CACHE_SECONDS = 3.0  # an answer this young is given again without probing
# A request that finds a probe running and no earlier answer waits this long for it: longer than
# every check's own bound added up (the embedder's first call loads a local model).
WAIT_FOR_PROBE_SECONDS = 30.0

_probing = threading.Lock()
_last: tuple[float, Health] | None = None


@dataclass(frozen=True)
class Check:
    name: str
    ok: bool
    detail: str
    milliseconds: float


@dataclass(frozen=True)
class Health:
    checks: list[Check] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return all(check.ok for check in self.checks)

    def to_dict(self) -> dict[str, Any]:
        return {
            "status": "ok" if self.ok else "unavailable",
            "failed": [check.name for check in self.checks if not check.ok],
            "checks": {
                check.name: {"ok": check.ok, "detail": check.detail, "ms": round(check.milliseconds, 1)}
                for check in self.checks
            },
        }


def health(*, max_age: float = CACHE_SECONDS) -> Health:
    """Every part's state, probed at most once per ``max_age`` seconds and by one caller at a time."""
    if (answer := _answer_within(max_age)) is not None:
        return answer
    if not _probing.acquire(blocking=False):
        # Another request is probing: the last answer (a few seconds old) stands for now.
        if (last := _last) is not None:
            return last[1]
        if not _probing.acquire(timeout=WAIT_FOR_PROBE_SECONDS):
            return Health(
                checks=[
                    Check("health", False, "another health check is still running; ask again shortly", 0.0)
                ]
            )
    try:
        # Waited for a probe that has just finished: its answer is the one to give.
        if (answer := _answer_within(max_age)) is not None:
            return answer
        return _remember(_probe())
    finally:
        _probing.release()


def _answer_within(max_age: float) -> Health | None:
    last = _last
    return last[1] if last is not None and time.monotonic() - last[0] < max_age else None


def _remember(answer: Health) -> Health:
    global _last
    _last = (time.monotonic(), answer)
    return answer


def _probe() -> Health:
    return Health(
        checks=[
            _timed("database", _database),
            _timed("pgvector", _pgvector),
            _timed("broker", _broker),
            _timed("worker", _worker),
            _timed("embeddings", _embeddings),
            _timed("llm", _llm),
        ]
    )


def _timed(name: str, check: Callable[[], str]) -> Check:
    started = time.perf_counter()
    try:
        detail, ok = check(), True
    except Exception as error:  # a health check reports every failure, it never raises
        detail, ok = f"{type(error).__name__}: {error}".strip()[:500], False
    return Check(name=name, ok=ok, detail=detail, milliseconds=(time.perf_counter() - started) * 1000)


def _database() -> str:
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("SELECT set_config('statement_timeout', %s, true)", [f"{PROBE_TIMEOUT_SECONDS}s"])
        cursor.execute("SELECT version()")
        version = cursor.fetchone()
    return str(version[0]).split(" on ")[0] if version else "answered"


def _pgvector() -> str:
    with connection.cursor() as cursor:
        cursor.execute("SELECT extversion FROM pg_extension WHERE extname = 'vector'")
        row = cursor.fetchone()
    if row is None:
        raise RuntimeError("the vector extension is not installed; run `python manage.py migrate`")
    return f"pgvector {row[0]}"


def _broker() -> str:
    from openfable.celery import probe_app

    with probe_app() as probe, probe.connection_for_write() as broker:
        broker.ensure_connection(max_retries=1, timeout=PROBE_TIMEOUT_SECONDS)
        return broker.as_uri()


def _worker() -> str:
    """A worker that answers a ping is alive; one that does not answer in time but wrote a
    heartbeat lately is alive and busy (its main process was late: a pool embedding a long
    document on a small machine), not dead; with neither, none is running."""
    from openfable.celery import app, probe_app
    from openfable.worker_heartbeat import heartbeat_stale_after, live_workers

    if app.conf.task_always_eager:
        return "tasks run inline (OPENFABLE_CELERY_EAGER)"
    with probe_app() as probe:
        replies = probe.control.ping(timeout=WORKER_PING_SECONDS) or []
    if replies:
        return f"{len(replies)} worker(s) answered"
    alive = live_workers()
    if alive:
        newest = alive[0]
        running = sum(worker.active_tasks for worker in alive)
        return (
            f"{len(alive)} worker(s) alive but busy: no answer to a ping within "
            f"{WORKER_PING_SECONDS:.0f} s, last heartbeat {newest.seconds_since_beat:.0f} s ago, "
            f"{running} task(s) running"
        )
    stale = heartbeat_stale_after().total_seconds()
    raise RuntimeError(
        f"no Celery worker answered within {WORKER_PING_SECONDS:.0f} s and none wrote a heartbeat "
        f"in the last {stale:.0f} s; start one (make run does)"
    )


def _embeddings() -> str:
    from openfable.embeddings import get_embedder

    embedder = get_embedder()
    vector = embedder.embed_query("health check")
    if len(vector) != embedder.dimensions:
        raise RuntimeError(f"got {len(vector)} dimensions, expected {embedder.dimensions}")
    return f"{embedder.model_name} ({embedder.dimensions} dimensions)"


def _llm() -> str:
    model = getattr(settings, "LLM_MODEL", "")
    return f"configured: {model}" if model else "none configured: structural builder and vector paths"
