"""Migrations apply to an empty database (a fresh one, reached through OPENFABLE_DATABASE_URL)."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid

import psycopg
import pytest
from django.db import connection

from tests.conftest import REPO_ROOT


@pytest.mark.django_db
@pytest.mark.slow
def test_migrations_apply_to_an_empty_database() -> None:
    db = connection.settings_dict
    name = f"openfable_migrate_{uuid.uuid4().hex[:8]}"
    admin_url = f"postgresql://{db['USER']}@/postgres?host={db['HOST']}"
    with psycopg.connect(admin_url, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    try:
        env = {key: value for key, value in os.environ.items() if not key.startswith("OPENFABLE_")}
        env["OPENFABLE_DATABASE_URL"] = f"postgresql://{db['USER']}@/{name}?host={db['HOST']}"
        env["OPENFABLE_DEBUG"] = "true"
        result = subprocess.run(
            [sys.executable, "manage.py", "migrate", "--noinput"],
            cwd=REPO_ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert result.returncode == 0, result.stderr
        with psycopg.connect(env["OPENFABLE_DATABASE_URL"]) as fresh:
            tables = {
                row[0] for row in fresh.execute("SELECT tablename FROM pg_tables WHERE schemaname='public'")
            }
            indexes = {row[0] for row in fresh.execute("SELECT indexname FROM pg_indexes")}
        assert {
            "documents_collection",
            "documents_document",
            "documents_node",
            "documents_ingestionjob",
            "openfable_llmcacheentry",  # the LLM response cache: no createcachetable needed
        } <= tables
        assert "node_embedding_hnsw" in indexes
    finally:
        with psycopg.connect(admin_url, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
