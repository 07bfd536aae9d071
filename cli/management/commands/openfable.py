"""`manage.py openfable <subcommand>`: OpenFable's JSON command line (also the `openfable` script).

Each subcommand prints exactly one JSON object on stdout (benchmarks print tables). A mistake
a user can fix (``openfable.errors.UserInputError``, which every such error subclasses) prints
{"error": "...", "code": "..."} and exits with status 1; so does a database that cannot be
reached or was never migrated, with one sentence saying what to do. Never a traceback.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from importlib import import_module
from typing import Any

from django.core.management.base import BaseCommand, CommandParser
from django.db import DatabaseError, connection
from django.db.migrations.executor import MigrationExecutor

from openfable.errors import ServiceUnavailableError, UserInputError

# Modules exposing `register(subparsers)`; each parser sets `handler=callable(options)` that
# returns a dict (printed as one JSON object) or the text of a table. Named, not imported, so
# the benchmarks (the layer above every surface) can plug their commands in from above.
SUBCOMMAND_MODULES = ["cli.documents", "cli.corpus", "cli.retrieval", "cli.backup", "fable_benchmarks.cli"]


class Command(BaseCommand):
    help = "OpenFable's JSON command line: indexing, agent ingestion steps, re-embedding, queries and benchmarks."
    requires_system_checks: list[str] = []  # a wrong setting is reported by the handler, as JSON

    def add_arguments(self, parser: CommandParser) -> None:
        subparsers = parser.add_subparsers(dest="subcommand", required=True, metavar="SUBCOMMAND")
        for module_name in SUBCOMMAND_MODULES:
            import_module(module_name).register(subparsers)

    def handle(self, *args: Any, **options: Any) -> None:
        handler: Callable[[dict[str, Any]], dict[str, Any] | str] = options.pop("handler")
        try:
            database_ready()
            try:
                result = handler(options)
            except DatabaseError as error:  # the database went away while the command ran
                raise _unavailable(error) from None
        except UserInputError as error:
            answer: dict[str, Any] = {"error": str(error), "code": error.code}
            if error.details:
                answer["details"] = error.details
            self.stdout.write(json.dumps(answer, ensure_ascii=False, default=str))
            sys.exit(1)
        if isinstance(result, str):
            self.stdout.write(result)
        else:
            self.stdout.write(json.dumps(result, ensure_ascii=False, default=str))


def _unavailable(error: DatabaseError) -> ServiceUnavailableError:
    reason = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
    return ServiceUnavailableError(
        f"Cannot reach the database ({reason}). Start it (`make run` starts the embedded one) or "
        "fix OPENFABLE_DATABASE_URL, then run the command again."
    )


def database_ready() -> None:
    """Raise ``ServiceUnavailableError`` with what to do when the database is unreachable or unmigrated."""
    try:
        connection.ensure_connection()
        executor = MigrationExecutor(connection)
        pending = executor.migration_plan(executor.loader.graph.leaf_nodes())
    except DatabaseError as error:
        raise _unavailable(error) from None
    if pending:
        raise ServiceUnavailableError(
            f"The database is not set up ({len(pending)} migration(s) not applied). Run `make run` once, "
            "or `python manage.py migrate`, then run the command again.",
            code="not_migrated",
        )
