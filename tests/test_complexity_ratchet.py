"""The complexity gate of `make lint` (scripts/complexity_ratchet.py): the list of functions still
at radon C or worse only shrinks, and none of them grows."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from types import ModuleType

from tests.conftest import REPO_ROOT

GATED = ["retrieval", "documents/ingestion", "fable_benchmarks"]


def _ratchet() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "complexity_ratchet", REPO_ROOT / "scripts" / "complexity_ratchet.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_a_new_grown_or_mended_function_each_fail_the_gate() -> None:
    ratchet = _ratchet()
    listed = {"a.py::old": 14, "a.py::mended": 12}
    assert ratchet.problems({"a.py::old": 14, "a.py::mended": 12}, listed) == []
    assert ratchet.problems({"a.py::old": 13, "a.py::mended": 12}, listed) == [], "better is fine"
    (grew,) = ratchet.problems({"a.py::old": 15, "a.py::mended": 12}, listed)
    assert "grew from complexity 14 to 15" in grew
    (new,) = ratchet.problems({"a.py::old": 14, "a.py::mended": 12, "a.py::new": 11}, listed)
    assert new.startswith("a.py::new is at complexity 11")
    (gone,) = ratchet.problems({"a.py::old": 14}, listed)
    assert gone.startswith("a.py::mended is below C now") and "delete its line" in gone


def test_the_tree_passes_its_own_gate() -> None:
    gate = subprocess.run(
        [sys.executable, "scripts/complexity_ratchet.py", *GATED],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert gate.returncode == 0, gate.stdout + gate.stderr
    assert f"scripts/complexity_ratchet.py {' '.join(GATED)}" in (REPO_ROOT / "Makefile").read_text()
