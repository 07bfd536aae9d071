"""Is every part the app needs answering? One function, read by the REST API, MCP and the CLI.

Each check is cheap and bounded: the database (a query), pgvector (the extension is installed),
the broker (a connection), a live worker (a ping that waits at most ``WORKER_PING_SECONDS``),
the embedder (one tiny embedding, no paid LLM call), and whether an LLM is configured (its
absence is not a failure: the vector paths work alone).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings
from django.db import connection

WORKER_PING_SECONDS = 1.0


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


def health() -> Health:
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
    with connection.cursor() as cursor:
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
    from openfable.celery import app

    with app.connection_for_write() as broker:
        broker.ensure_connection(max_retries=1, timeout=2)
        return broker.as_uri()


def _worker() -> str:
    from openfable.celery import app

    if app.conf.task_always_eager:
        return "tasks run inline (OPENFABLE_CELERY_EAGER)"
    replies = app.control.ping(timeout=WORKER_PING_SECONDS) or []
    if not replies:
        raise RuntimeError(
            f"no Celery worker answered within {WORKER_PING_SECONDS:.0f} s; start one (make run does)"
        )
    return f"{len(replies)} worker(s) answered"


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
