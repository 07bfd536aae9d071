"""The production shape: docker-compose.yml is accepted by Compose itself.

Compose (Debian's docker-compose, installed by scripts/system-deps.sh) parses and validates
the file without a Docker engine, which these machines do not run.
"""

from __future__ import annotations

import os
import subprocess

from tests.conftest import REPO_ROOT


def _config(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["docker-compose", "--profile", "tei", "config"],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_docker_compose_config_accepts_the_file() -> None:
    result = _config({**os.environ, "OPENFABLE_SECRET_KEY": "s" * 50})
    assert result.returncode == 0, result.stderr
    for service in ("db", "redis", "web", "worker", "tei"):
        assert f"\n  {service}:\n" in result.stdout
    assert "pgvector/pgvector:pg17" in result.stdout
    assert "pg_isready" in result.stdout


def test_docker_compose_refuses_a_missing_secret_key() -> None:
    env = {key: value for key, value in os.environ.items() if key != "OPENFABLE_SECRET_KEY"}
    result = _config(env)
    assert result.returncode != 0
    assert "OPENFABLE_SECRET_KEY" in result.stderr
