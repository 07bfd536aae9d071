"""The product installs and runs without the benchmarks (fable_benchmarks, pygal, locust).

The benchmarks are a developer's tool (`python -m fable_benchmarks`, dev extras). The product
once loaded them by name from its command line, so they and pygal shipped in every install; a
lost dependency of theirs would have broken `openfable` itself.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import tomllib

import pytest
from django.db import connection

from tests.conftest import REPO_ROOT

BENCHMARKS_ONLY = ("fable_benchmarks", "pygal", "locust")
PRODUCT_PACKAGES = ("openfable", "documents", "retrieval", "cli", "api", "mcp_server", "web")

# Run in a fresh interpreter where importing the benchmarks or their dependencies fails, as in an
# install without them: every module of the product is imported, Django's checks pass, and the
# product's command line runs a real command against the test database.
_WITHOUT_BENCHMARKS = textwrap.dedent(
    f"""
    import importlib, importlib.abc, pkgutil, sys

    class WithoutBenchmarks(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] in {BENCHMARKS_ONLY!r}:
                raise ModuleNotFoundError(f"No module named {{name!r}} (not installed)", name=name)
            return None

    sys.meta_path.insert(0, WithoutBenchmarks())
    import django

    django.setup()
    imported = 0
    for package in {PRODUCT_PACKAGES!r}:
        for module in pkgutil.walk_packages(importlib.import_module(package).__path__, package + "."):
            importlib.import_module(module.name)
            imported += 1
    from django.core.management import call_command

    call_command("check")
    print("imported", imported, file=sys.stderr)
    call_command("openfable", "list")
    """
)


def _python(*args: str) -> subprocess.CompletedProcess[str]:
    db = connection.settings_dict
    env = {key: value for key, value in os.environ.items() if not key.startswith("OPENFABLE_")}
    env |= {
        "DJANGO_SETTINGS_MODULE": "openfable.settings",
        "OPENFABLE_DATABASE_URL": f"postgresql://{db['USER']}@/{db['NAME']}?host={db['HOST']}",
        "OPENFABLE_SECRET_KEY": "test-only-secret",
    }
    return subprocess.run(
        [sys.executable, *args], cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=180
    )


@pytest.mark.slow
@pytest.mark.django_db
def test_the_product_imports_and_runs_without_the_benchmarks() -> None:
    result = _python("-c", _WITHOUT_BENCHMARKS)
    assert result.returncode == 0, result.stderr[-3000:]
    assert int(result.stderr.split("imported ")[1].split()[0]) > 100, "every product module was imported"
    assert "documents" in json.loads(result.stdout.splitlines()[-1]), result.stdout  # after the checks


@pytest.mark.slow
@pytest.mark.django_db
def test_the_product_command_has_no_benchmarks_and_the_benchmarks_command_has_them() -> None:
    product = _python("manage.py", "openfable", "--help")
    assert product.returncode == 0 and "query" in product.stdout and "bench-" not in product.stdout
    bench = _python("-m", "fable_benchmarks", "--help")
    assert bench.returncode == 0, bench.stderr[-3000:]
    assert "bench-retrieval" in bench.stdout and "usage: python -m fable_benchmarks" in bench.stdout


def test_the_benchmarks_and_their_dependencies_are_left_out_of_the_install() -> None:
    project = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]
    names = [requirement.split(">")[0].split("[")[0] for requirement in project["dependencies"]]
    assert not {"pygal", "locust"} & set(names)
    assert {"pygal>=3.1", "locust>=2.47"} <= set(project["optional-dependencies"]["dev"])
    packages = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]
    assert not any(pattern.startswith("fable") for pattern in packages["find"]["include"])
    assert "fable_benchmarks" in (REPO_ROOT / ".dockerignore").read_text().split()
    assert "fable_benchmarks" not in (REPO_ROOT / "Dockerfile").read_text()
