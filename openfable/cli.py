"""The `openfable` console script: the same as `python manage.py openfable ...`."""

from __future__ import annotations

import os
import sys


def main() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "openfable.settings")
    from django.core.management import execute_from_command_line

    execute_from_command_line(["openfable", "openfable", *sys.argv[1:]])


if __name__ == "__main__":
    main()
