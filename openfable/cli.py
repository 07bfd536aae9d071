"""The `openfable` console script: the same as `python manage.py openfable ...`, named `openfable`."""

from __future__ import annotations

import os
import sys


def main() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "openfable.settings")
    import django
    from django.core.management import get_commands, load_command_class

    django.setup()
    # Found the way manage.py finds it (the cli app sits above this package in the layers).
    command = load_command_class(get_commands()["openfable"], "openfable")
    command.run_standalone(sys.argv[1:])  # type: ignore[attr-defined]


if __name__ == "__main__":
    main()
