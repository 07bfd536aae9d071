"""The benchmarks' command: the product's `openfable` command with the ``bench-*`` subcommands instead.

The same behaviour (one JSON object on stdout, a user's mistake as ``{"error": ...}`` with exit
status 1, the database checked first). The benchmarks live outside the product (their
dependencies, pygal and locust, are in the dev extras), so they extend the product's command
from above instead of the product loading them by name. Run it as `python -m fable_benchmarks`.
"""

from __future__ import annotations

from cli.management.commands.openfable import Command
from fable_benchmarks import cli as bench_cli


class BenchCommand(Command):
    help = "OpenFable's benchmarks: bench-ingest, bench-retrieval, bench-latency, bench-load, bench-cost, ..."
    subcommands = (bench_cli.register,)
