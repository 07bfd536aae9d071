"""Django's ORM from the event loop, the way Django itself runs a sync view under ASGI.

MCP tools and the token check run in the ASGI event loop, while the services and selectors are
synchronous ORM code. Each call gets a thread of its own (a ``ThreadSensitiveContext``, as
Django's ``ASGIHandler`` opens per request), so a long call, an ingestion waited on or a tree
being embedded, never holds up another client's call, and a transaction never spans threads.
The thread's connections are closed when the call ends: the thread ends with it, and a
connection left open there would linger until garbage collection.
"""

from __future__ import annotations

from collections.abc import Callable

from asgiref.sync import ThreadSensitiveContext, sync_to_async
from django.db import connections


async def run_sync[**P, R](function: Callable[P, R], /, *args: P.args, **kwargs: P.kwargs) -> R:
    """``function(*args, **kwargs)`` in a thread of its own; its database connections closed after."""

    def call() -> R:
        try:
            return function(*args, **kwargs)
        finally:
            connections.close_all()

    async with ThreadSensitiveContext():
        return await sync_to_async(call, thread_sensitive=True)()
