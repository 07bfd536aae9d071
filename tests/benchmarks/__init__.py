"""Running the benchmarks' command line (`python -m fable_benchmarks`) in-process, as their tests do."""

from __future__ import annotations

import io
import json
from typing import Any

from django.core.management import call_command

from fable_benchmarks.command import BenchCommand


def run_bench(*args: str) -> tuple[int, dict[str, Any]]:
    """Run `python -m fable_benchmarks ARGS`; return (exit status, the one JSON object printed:
    the answer on stdout, or the error on stderr)."""
    out, err = io.StringIO(), io.StringIO()
    status = 0
    try:
        call_command(BenchCommand(), *args, stdout=out, stderr=err)
    except SystemExit as exit_:
        status = int(exit_.code or 0)
    if status == 0:
        return status, json.loads(out.getvalue())
    # An error is one JSON object on stderr (its last line: progress lines may come first), and
    # nothing on stdout.
    assert out.getvalue() == "", out.getvalue()
    return status, json.loads(err.getvalue().strip().splitlines()[-1])
