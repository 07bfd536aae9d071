"""Where answers are kept: the cache a client reads before calling and writes after.

The default is :class:`DatabaseLLMCache`, one row per answer in ``openfable.models.LLMCacheEntry``
(a table ``migrate`` makes). Beside the answers it keeps the response format an endpoint was found
to take (``FORMAT_KEY_PREFIX``), so web and workers share what one of them learned.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from typing import Any, Protocol

CACHE_KEY_PREFIX = "openfable:llm:v1:"
# The response format an endpoint was found to take, stored beside the answers (see
# LLMClient._learn_format).
FORMAT_KEY_PREFIX = "openfable:llm-format:v1:"


class CacheLike(Protocol):
    """The part of Django's cache API the client uses (tests inject a dict-backed one)."""

    def get(self, key: str, default: Any = None) -> Any: ...

    def set(self, key: str, value: Any) -> None: ...


class DatabaseLLMCache:
    """The default cache: one ``LLMCacheEntry`` row per answer, in the project's database.

    ``get`` is one primary-key lookup; ``set`` one upsert (two identical calls racing both
    store, the later answer wins). Inside a caller's transaction each query runs in a
    savepoint, so a failing cache query cannot abort the caller's work.
    """

    def get(self, key: str, default: Any = None) -> Any:
        from openfable.models import LLMCacheEntry

        with _contained():
            value = LLMCacheEntry.objects.filter(key=key).values_list("value", flat=True).first()
        return default if value is None else value

    def set(self, key: str, value: Any) -> None:
        from openfable.models import LLMCacheEntry

        with _contained():
            LLMCacheEntry.objects.bulk_create(
                [LLMCacheEntry(key=key, value=value)],
                update_conflicts=True,
                unique_fields=["key"],
                update_fields=["value", "created_at"],
            )


@contextmanager
def _contained() -> Iterator[None]:
    from django.db import connection, transaction

    # Outside a transaction (autocommit) a failed query harms nothing and needs no savepoint.
    with transaction.atomic() if connection.in_atomic_block else nullcontext():
        yield
