"""The production shape: docker-compose.yml is accepted by Compose itself.

Compose (Debian's docker-compose, installed by scripts/system-deps.sh) parses and validates
the file without a Docker engine, which these machines do not run.
"""

from __future__ import annotations

import os
import secrets
import subprocess
import sys

import pytest
from django.db import connection

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


def test_the_web_app_and_the_worker_share_the_uploaded_files() -> None:
    """The web app stores an upload's original under DATA_DIR/files; the worker reads it there."""
    import yaml

    result = _config({**os.environ, "OPENFABLE_SECRET_KEY": "s" * 50})
    services = yaml.safe_load(result.stdout)["services"]
    for name in ("web", "worker"):
        volumes = [str(volume) for volume in services[name]["volumes"]]
        assert any(volume.startswith("files:/app/var/files") for volume in volumes), (name, volumes)
    dockerfile = (REPO_ROOT / "Dockerfile").read_text()
    assert "OPENFABLE_DATA_DIR=/app/var" in dockerfile and "mkdir -p /app/var/files" in dockerfile


def test_docker_compose_refuses_a_missing_secret_key() -> None:
    env = {key: value for key, value in os.environ.items() if key != "OPENFABLE_SECRET_KEY"}
    result = _config(env)
    assert result.returncode != 0
    assert "OPENFABLE_SECRET_KEY" in result.stderr


@pytest.mark.django_db
@pytest.mark.slow
def test_a_production_start_passes_the_deploy_checks() -> None:
    """Debug off with a database URL: secure cookies, HTTPS redirect and HSTS, no warning."""
    db = connection.settings_dict
    env = {key: value for key, value in os.environ.items() if not key.startswith("OPENFABLE_")}
    env |= {
        "OPENFABLE_DATABASE_URL": f"postgresql://{db['USER']}@/{db['NAME']}?host={db['HOST']}",
        "OPENFABLE_SECRET_KEY": secrets.token_urlsafe(50),
    }
    command = [sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"]
    result = subprocess.run(command, cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    plain_http = subprocess.run(
        command,
        cwd=REPO_ROOT,
        env=env | {"OPENFABLE_HTTPS": "false"},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert plain_http.returncode != 0 and "SESSION_COOKIE_SECURE" in plain_http.stderr, "the switch is honest"
