"""Running the `openfable` JSON command line in-process, as the tests of its subcommands do."""

from __future__ import annotations

import io
import json
from typing import Any

from django.core.management import call_command


def run_openfable(*args: str) -> tuple[int, dict[str, Any]]:
    """Run `manage.py openfable ARGS`; return (exit status, the one JSON object printed:
    the answer on stdout, or the error on stderr)."""
    out, err = io.StringIO(), io.StringIO()
    status = 0
    try:
        call_command("openfable", *args, stdout=out, stderr=err)
    except SystemExit as exit_:
        status = int(exit_.code or 0)
    if status == 0:
        return status, json.loads(out.getvalue())
    # An error is one JSON object on stderr (its last line: progress lines may come first), and
    # nothing on stdout.
    assert out.getvalue() == "", out.getvalue()
    return status, json.loads(err.getvalue().strip().splitlines()[-1])
