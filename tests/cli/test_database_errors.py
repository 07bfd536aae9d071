"""Every command on a database that is unmigrated or unreachable prints one sentence saying what to
do, as {"error": ...} with exit status 1: never a traceback."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator

import psycopg
import pytest
from django.db import connection

from tests.conftest import REPO_ROOT


def _openfable(database_url: str, *args: str) -> subprocess.CompletedProcess[str]:
    return _python(database_url, "manage.py", "openfable", *args)


def _python(database_url: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {key: value for key, value in os.environ.items() if not key.startswith("OPENFABLE_")}
    env |= {"OPENFABLE_DATABASE_URL": database_url, "OPENFABLE_SECRET_KEY": "test-only-secret"}
    return subprocess.run(
        [sys.executable, *args],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.fixture
def empty_database() -> Iterator[str]:
    """A database that exists on the test server but was never migrated."""
    settings_dict = connection.settings_dict
    name = f"openfable_empty_{uuid.uuid4().hex[:8]}"
    admin_url = f"postgresql://{settings_dict['USER']}@/postgres?host={settings_dict['HOST']}"
    with psycopg.connect(admin_url, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    try:
        yield f"postgresql://{settings_dict['USER']}@/{name}?host={settings_dict['HOST']}"
    finally:
        with psycopg.connect(admin_url, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.mark.django_db
@pytest.mark.parametrize(
    "command",
    [
        ["manage.py", "openfable", "query", "what is a volcano"],
        ["-m", "fable_benchmarks", "bench-latency", "--nodes", "100"],  # the benchmarks' own command
        ["manage.py", "openfable", "reembed"],
    ],
)
@pytest.mark.slow
def test_an_unmigrated_database_is_named_with_the_fix(empty_database: str, command: list[str]) -> None:
    result = _python(empty_database, *command)
    assert result.returncode == 1, result.stderr
    assert result.stdout == "", "an error goes to stderr"
    answer = json.loads(result.stderr.strip().splitlines()[-1])
    assert (
        "not set up" in answer["error"]
        and "manage.py migrate" in answer["error"]
        and "make run" in answer["error"]
    )
    assert answer["code"] == "not_migrated"
    assert "Traceback" not in result.stderr


def test_an_unreachable_database_is_named_with_the_fix() -> None:
    # Port 9 (discard) on loopback: nothing listens, the connection is refused at once.
    result = _openfable("postgresql://nobody@127.0.0.1:9/openfable", "query", "anything")
    assert result.returncode == 1, result.stderr
    assert result.stdout == "", "an error goes to stderr"
    answer = json.loads(result.stderr.strip().splitlines()[-1])
    assert "Cannot reach the database" in answer["error"] and "OPENFABLE_DATABASE_URL" in answer["error"]
    assert "Traceback" not in result.stderr


@pytest.mark.django_db
def test_a_database_lost_during_a_command_is_one_sentence(monkeypatch: pytest.MonkeyPatch) -> None:
    from django.db import OperationalError

    from tests.cli import run_openfable

    def lost(**kwargs: object) -> None:
        raise OperationalError("server closed the connection unexpectedly")

    monkeypatch.setattr("cli.retrieval.retrieve", lost)
    status, answer = run_openfable("query", "anything")
    assert status == 1 and answer["code"] == "unavailable"
    assert answer["error"].startswith("Cannot reach the database (server closed the connection unexpectedly)")


@pytest.mark.django_db
def test_pages_and_the_api_answer_503_when_the_database_goes_away(monkeypatch: pytest.MonkeyPatch) -> None:
    from django.db import OperationalError
    from django.test import Client
    from rest_framework.test import APIClient

    from openfable.api_tokens import token_create
    from tests.factories import UserFactory

    def lost(**kwargs: object) -> None:
        raise OperationalError("terminating connection due to administrator command")

    user = UserFactory.create()
    _, key = token_create(user=user, name="t")
    monkeypatch.setattr("documents.selectors.document_list", lost)
    browser = Client()
    browser.force_login(user)
    page = browser.get("/")
    assert page.status_code == 503 and "The database is not answering right now" in page.content.decode()
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Bearer {key}")
    answer = api.get("/v1/api/documents")
    assert answer.status_code == 503 and answer.json()["error"]["code"] == "database_unavailable"
