"""PostgreSQL query plans, for the tests that prove a query uses its index."""

from __future__ import annotations

from typing import Any

from django.db import connection


def query_plan(sql: str, params: list[Any], *, without_seqscan: bool = False) -> str:
    """The EXPLAIN output of ``sql``. ``without_seqscan``: the test tables are tiny, where a
    sequential scan always wins; forbidding it (for this transaction) shows whether the index
    can serve the query at all."""
    with connection.cursor() as cursor:
        if without_seqscan:
            cursor.execute("SET LOCAL enable_seqscan = off")
        cursor.execute("EXPLAIN " + sql, params)
        return "\n".join(row[0] for row in cursor.fetchall())
