"""`manage.py openfable <subcommand>`: OpenFable's JSON command line (also the `openfable` script).

Each subcommand prints exactly one JSON object on stdout, or with ``--format table`` the same as
text for a person (``cli.render``; benchmarks print tables). Any of the project's errors
(``openfable.errors.OpenFableError``: a mistake a user can fix, or a service that is not
answering) prints {"error": "...", "code": "..."} on stderr and exits with status 1; so does a
database that cannot be reached or was never migrated, with one sentence saying what to do.
Never a traceback. Progress (``index --wait``) goes to stderr too: stdout carries only the answer.

The `openfable` script runs ``Command.run_standalone``: the same subcommands under their own
name ("usage: openfable ..."), without Django's options for management commands.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from typing import Any

from django.core.management.base import BaseCommand, CommandParser
from django.db import DatabaseError, connection, connections
from django.db.migrations.executor import MigrationExecutor

from cli import backup as backup_cli
from cli import corpus as corpus_cli
from cli import documents as documents_cli
from cli import retrieval as retrieval_cli
from cli.render import render_table
from openfable.errors import OpenFableError, ServiceUnavailableError

# Each `register(subparsers)` adds parsers that set `handler=callable(options)`, returning a dict
# (printed as one JSON object) or the text of a table. The benchmarks are not here: they are a
# developer's tool with dependencies of their own (dev extras), and extend this command from
# above (`python -m fable_benchmarks`, fable_benchmarks/__main__.py), so the product runs without them.
Registrar = Callable[[Any], None]
SUBCOMMANDS: tuple[Registrar, ...] = (
    documents_cli.register,
    corpus_cli.register,
    retrieval_cli.register,
    backup_cli.register,
)


class Command(BaseCommand):
    help = "OpenFable's JSON command line: indexing, agent ingestion steps, re-embedding, queries, backups."
    requires_system_checks: list[str] = []  # a wrong setting is reported by the handler, as JSON
    subcommands: tuple[Registrar, ...] = SUBCOMMANDS

    def add_arguments(self, parser: CommandParser) -> None:
        subparsers = parser.add_subparsers(dest="subcommand", required=True, metavar="SUBCOMMAND")
        for register in self.subcommands:
            register(subparsers)
        for subparser in _leaves(subparsers):
            subparser.add_argument(
                "--format",
                choices=FORMATS,
                default="json",
                help="json: one JSON object (the default); table: text for a person",
            )

    def run_standalone(self, argv: list[str], prog: str = "openfable") -> None:
        """Run as the program ``prog`` (the `openfable` script): its own usage line and help, and
        only the subcommands' options (Django's --settings, --traceback, ... are not for users)."""
        self._called_from_command_line = True
        parser = CommandParser(prog=prog, description=self.help, called_from_command_line=True)
        self.add_arguments(parser)
        options = vars(parser.parse_args(argv))
        try:
            self.execute(no_color=False, force_color=False, skip_checks=True, **options)
        finally:
            connections.close_all()

    def handle(self, *args: Any, **options: Any) -> None:
        handler: Callable[[dict[str, Any]], dict[str, Any] | str] = options.pop("handler")
        output_format = options.pop("format", "json")
        try:
            database_ready()
            try:
                result = handler(options)
            except DatabaseError as error:  # the database went away while the command ran
                raise _unavailable(error) from None
        except OpenFableError as error:
            answer: dict[str, Any] = {"error": str(error), "code": error.code}
            if error.details:
                answer["details"] = error.details
            # On stderr, as JSON whatever the format: stdout stays empty, so a pipe reading it
            # never takes an error for an answer; the exit status says which it was.
            self.stderr.style_func = None
            self.stderr.write(json.dumps(answer, ensure_ascii=False, default=str))
            sys.exit(1)
        if isinstance(result, str):
            self.stdout.write(result)
        elif output_format == "table":
            self.stdout.write(render_table(result))
        else:
            self.stdout.write(json.dumps(result, ensure_ascii=False, default=str))


FORMATS = ("json", "table")


def _leaves(subparsers: Any) -> list[Any]:
    """Every parser that runs a handler: each subcommand, or each subcommand of a group
    (`collection create`)."""
    found = []
    for parser in dict.fromkeys(subparsers.choices.values()):
        groups = [action for action in parser._actions if isinstance(action, argparse._SubParsersAction)]
        found.extend(_leaves(groups[0]) if groups else [parser])
    return found


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
