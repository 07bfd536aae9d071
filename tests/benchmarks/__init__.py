"""Running the benchmarks' command line (`python -m fable_benchmarks`) in-process, as their tests do."""

from __future__ import annotations

import io
import json
from typing import Any

from django.core.management import call_command

from fable_benchmarks.command import BenchCommand


def run_bench(*args: str) -> tuple[int, dict[str, Any]]:
    """Run `python -m fable_benchmarks ARGS`; return (exit status, the one JSON object printed)."""
    out = io.StringIO()
    status = 0
    try:
        call_command(BenchCommand(), *args, stdout=out)
    except SystemExit as exit_:
        status = int(exit_.code or 0)
    return status, json.loads(out.getvalue())
