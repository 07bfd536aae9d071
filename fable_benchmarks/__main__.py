"""`python -m fable_benchmarks SUBCOMMAND ...`: the benchmarks' command line (fable_benchmarks.command)."""

from __future__ import annotations

import os
import sys


def main(argv: list[str] | None = None) -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "openfable.settings")
    import django

    django.setup()
    from fable_benchmarks.command import BenchCommand  # models load only after django.setup()

    args = sys.argv[1:] if argv is None else argv
    # Django names the program after these two words: "usage: python -m fable_benchmarks ...".
    BenchCommand().run_from_argv(["python -m", "fable_benchmarks", *args])


if __name__ == "__main__":
    main()
