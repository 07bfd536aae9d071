"""The complexity gate of ``make lint``: no function at radon complexity C (11) or worse, except
the ones still listed in ``scripts/complexity_allowed.txt``, and those no worse than listed.

Fails on a function at C or worse that is not on the list, on one whose complexity grew past
its listed number, and on a listed one that is now below C or gone (delete its line: the list
only shrinks). Run as ``python scripts/complexity_ratchet.py retrieval documents/ingestion``.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ALLOWED = Path(__file__).resolve().parent / "complexity_allowed.txt"


def measured(paths: list[str]) -> dict[str, int]:
    """``path::qualified.name`` -> complexity of every function at C or worse under ``paths``."""
    result = subprocess.run(
        [sys.executable, "-m", "radon", "cc", "--min", "C", "--json", *paths],
        capture_output=True,
        text=True,
        check=True,
    )
    found: dict[str, int] = {}
    for path, blocks in json.loads(result.stdout).items():
        if isinstance(blocks, dict):  # radon reports a file it cannot parse as {"error": ...}
            raise SystemExit(f"radon could not read {path}: {blocks.get('error')}")
        for block in blocks:
            name = f"{block['classname']}.{block['name']}" if block.get("classname") else block["name"]
            found[f"{path}::{name}"] = block["complexity"]
    return found


def allowed(paths: list[str]) -> dict[str, int]:
    """The listed functions under ``paths``: ``path::name complexity`` a line, ``#`` comments."""
    listed: dict[str, int] = {}
    for line in ALLOWED.read_text(encoding="utf-8").splitlines():
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        key, complexity = line.rsplit(maxsplit=1)
        if any(key.startswith(f"{path.rstrip('/')}/") for path in paths):
            listed[key] = int(complexity)
    return listed


def problems(found: dict[str, int], listed: dict[str, int]) -> list[str]:
    lines = []
    for key, complexity in sorted(found.items()):
        if key not in listed:
            lines.append(f"{key} is at complexity {complexity} (C or worse): split it into stages")
        elif complexity > listed[key]:
            lines.append(f"{key} grew from complexity {listed[key]} to {complexity}")
    for key in sorted(listed.keys() - found.keys()):
        lines.append(f"{key} is below C now (or gone): delete its line from {ALLOWED.name}")
    return lines


def main(paths: list[str]) -> int:
    found = problems(measured(paths), allowed(paths))
    for line in found:
        print(line)
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
