"""System checks that stop a start on a wrong setting, naming the variable and the fix."""

from __future__ import annotations

import re
from typing import Any

from django.conf import settings
from django.core.checks import Error, Tags, register
from django.db import connections
from django.db.utils import DatabaseError

from openfable.embeddings import dimensions_mismatch


@register(Tags.compatibility)
def check_environment(app_configs: Any = None, **kwargs: Any) -> list[Error]:
    errors = [
        Error(problem.message, hint=problem.hint, id="openfable.E001", obj=problem.variable)
        for problem in settings.CONFIG_PROBLEMS
    ]
    # A deployment (its own database, DEBUG off) must bring its own key; the embedded
    # laptop mode keeps a generated one under the data folder.
    if settings.DATABASE_URL and not settings.DEBUG and not settings.SECRET_KEY_FROM_ENV:
        errors.append(
            Error(
                "OPENFABLE_SECRET_KEY is not set for a production start "
                "(OPENFABLE_DATABASE_URL is set and OPENFABLE_DEBUG is off).",
                hint="Set OPENFABLE_SECRET_KEY to a long random value, e.g. the output of "
                "`python -c 'import secrets; print(secrets.token_urlsafe(50))'`, "
                "or set OPENFABLE_DEBUG=true for a local run.",
                id="openfable.E002",
            )
        )
    if settings.TOKEN_BUDGET_MIN > settings.TOKEN_BUDGET_MAX:
        errors.append(
            Error(
                f"OPENFABLE_TOKEN_BUDGET_MIN ({settings.TOKEN_BUDGET_MIN}) is above "
                f"OPENFABLE_TOKEN_BUDGET_MAX ({settings.TOKEN_BUDGET_MAX}).",
                hint="Make the minimum budget no larger than the maximum.",
                id="openfable.E003",
            )
        )
    if settings.EMBEDDING_URL and not settings.EMBEDDING_MODEL:
        errors.append(
            Error(
                "OPENFABLE_EMBEDDING_URL is set but OPENFABLE_EMBEDDING_MODEL is empty.",
                hint="Name the model the endpoint serves, e.g. OPENFABLE_EMBEDDING_MODEL=bge-m3.",
                id="openfable.E004",
            )
        )
    for who, rate in [
        ("everyone", settings.API_THROTTLE_RATE),
        *settings.API_THROTTLE_RATES.items(),
    ]:
        if not _RATE.match(rate):
            errors.append(
                Error(
                    f"The API request rate {rate!r} for {who} is not a rate.",
                    hint="Write rates as a number per second, minute, hour or day, e.g. 1200/minute "
                    "(OPENFABLE_API_THROTTLE_RATE, OPENFABLE_API_THROTTLE_RATES=alice=100/minute).",
                    id="openfable.E006",
                )
            )
    return errors


_RATE = re.compile(r"^\d+/(s|m|h|d)[a-z]*$")


def stored_embedding_dimensions(using: str = "default") -> int | None:
    """Dimensions of the ``documents_node.embedding`` column, or None before migrations."""
    with connections[using].cursor() as cursor:
        cursor.execute(
            """
            SELECT a.atttypmod FROM pg_attribute a
            WHERE a.attrelid = to_regclass('documents_node') AND a.attname = 'embedding'
            """
        )
        row = cursor.fetchone()
    return int(row[0]) if row and row[0] and row[0] > 0 else None


@register(Tags.database)
def check_embedding_dimensions(app_configs: Any = None, databases: Any = None, **kwargs: Any) -> list[Error]:
    if not databases:
        return []
    errors: list[Error] = []
    for alias in databases:
        try:
            stored = stored_embedding_dimensions(alias)
        except DatabaseError:
            continue
        problem = dimensions_mismatch(configured=settings.EMBEDDING_DIMENSIONS, stored=stored)
        if problem:
            errors.append(Error(f"{problem} (database {alias!r})", id="openfable.E005"))
    return errors
