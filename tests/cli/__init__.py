"""Running the `openfable` JSON command line in-process, as the tests of its subcommands do."""

from __future__ import annotations

import io
import json
from typing import Any

from django.core.management import call_command


def run_openfable(*args: str) -> tuple[int, dict[str, Any]]:
    """Run `manage.py openfable ARGS`; return (exit status, the one JSON object printed)."""
    out = io.StringIO()
    status = 0
    try:
        call_command("openfable", *args, stdout=out)
    except SystemExit as exit_:
        status = int(exit_.code or 0)
    return status, json.loads(out.getvalue())
