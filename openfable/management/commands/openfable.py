"""`manage.py openfable <subcommand>`: OpenFable's JSON command line (also the `openfable` script).

Each subcommand prints exactly one JSON object on stdout. Errors a user can fix print
{"error": "..."} saying what to fix, and exit with status 1. Subcommands live with the code
they drive (documents/cli.py, documents/bench.py, retrieval/cli.py); this module only
collects and dispatches them.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from importlib import import_module
from typing import Any

from django.core.management.base import BaseCommand, CommandParser

# Modules exposing `register(subparsers)`; each parser sets `handler=callable(options)` that
# returns a dict (printed as one JSON object) or, for benchmarks, the text of a table.
SUBCOMMAND_MODULES = ["documents.cli", "documents.bench", "retrieval.cli"]


class CommandInputError(Exception):
    """Bad input to a subcommand: printed as {"error": message}, exit status 1."""


class Command(BaseCommand):
    help = "OpenFable's JSON command line: agent ingestion steps, re-embedding, queries and benchmarks."

    def add_arguments(self, parser: CommandParser) -> None:
        subparsers = parser.add_subparsers(dest="subcommand", required=True, metavar="SUBCOMMAND")
        for module_name in SUBCOMMAND_MODULES:
            import_module(module_name).register(subparsers)

    def handle(self, *args: Any, **options: Any) -> None:
        handler: Callable[[dict[str, Any]], dict[str, Any] | str] = options.pop("handler")
        try:
            result = handler(options)
        except CommandInputError as error:
            self.stdout.write(json.dumps({"error": str(error)}, ensure_ascii=False))
            sys.exit(1)
        if isinstance(result, str):
            self.stdout.write(result)
        else:
            self.stdout.write(json.dumps(result, ensure_ascii=False, default=str))
