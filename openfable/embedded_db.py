"""The embedded PostgreSQL + pgvector server used when OPENFABLE_DATABASE_URL is not set.

The ``pgserver`` wheel ships PostgreSQL 16 with pgvector. We let it initialise and start
the cluster (it knows how to run as a non-root system user when we are root) but never
let it stop the server at interpreter exit: the web server, the Celery worker and every
``manage.py`` call share one running cluster, and ``openfable.runner`` (``make run``)
stops it explicitly on Ctrl-C.
"""

from __future__ import annotations

import logging
import os
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

DATABASE_NAME = "openfable"
_SUPERUSER = "postgres"

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class EmbeddedDatabase:
    data_dir: Path
    socket_dir: str

    def django_config(self, name: str = DATABASE_NAME) -> dict[str, object]:
        return {
            "ENGINE": "django.db.backends.postgresql",
            "NAME": name,
            "USER": _SUPERUSER,
            "PASSWORD": "",
            "HOST": self.socket_dir,
            "PORT": "",
            "CONN_MAX_AGE": 0,
        }

    def url(self, name: str = DATABASE_NAME) -> str:
        return f"postgresql://{_SUPERUSER}@/{name}?host={self.socket_dir}"


def _quiet_pgserver_imports() -> None:
    # platformdirs warns about a missing XDG_RUNTIME_DIR on servers; pgserver only needs a
    # writable lock folder, so give it one under the system temp dir.
    if "XDG_RUNTIME_DIR" not in os.environ:
        runtime_dir = Path(f"/tmp/openfable-runtime-{os.getuid()}")
        runtime_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        runtime_dir.chmod(0o700)
        os.environ["XDG_RUNTIME_DIR"] = str(runtime_dir)


def ensure_running(data_dir: Path) -> EmbeddedDatabase:
    """Start (initialising on first use) the cluster under ``data_dir``; return how to reach it.

    Cheap when the server is already up: pgserver only reads ``postmaster.pid``.
    """
    _quiet_pgserver_imports()
    import pgserver

    data_dir = data_dir.expanduser().resolve()
    data_dir.parent.mkdir(parents=True, exist_ok=True)
    server = pgserver.get_server(data_dir, cleanup_mode=None)
    info = server.get_postmaster_info()
    socket_dir = str(info.socket_dir) if info.socket_dir is not None else str(data_dir)
    database = EmbeddedDatabase(data_dir=data_dir, socket_dir=socket_dir)
    _ensure_database(database)
    return database


def _ensure_database(database: EmbeddedDatabase) -> None:
    import psycopg

    with psycopg.connect(database.url(_SUPERUSER), autocommit=True) as connection:
        exists = connection.execute(
            "SELECT 1 FROM pg_database WHERE datname = %s", [DATABASE_NAME]
        ).fetchone()
        if not exists:
            connection.execute(f'CREATE DATABASE "{DATABASE_NAME}"')


def is_running(data_dir: Path) -> bool:
    return (data_dir.expanduser().resolve() / "postmaster.pid").exists()


def stop(data_dir: Path) -> None:
    """Stop the cluster cleanly (fast shutdown: active sessions are rolled back)."""
    _quiet_pgserver_imports()
    from pgserver import _commands

    data_dir = data_dir.expanduser().resolve()
    if not is_running(data_dir):
        return
    user = "pgserver" if os.geteuid() == 0 else None
    try:
        pg_ctl = _commands.pg_ctl  # type: ignore[attr-defined]  # generated at import by pgserver
        pg_ctl(["-w", "-m", "fast", "stop"], pgdata=data_dir, user=user, timeout=60)
    except (subprocess.CalledProcessError, subprocess.TimeoutExpired) as error:
        logger.warning("pg_ctl stop failed: %s", error)
    # The postmaster removes its pid file as the very last step of a shutdown: wait for it, so a
    # caller (make run's Ctrl-C, CI's cleanup) knows the server is gone when this returns.
    deadline = time.monotonic() + 15
    while is_running(data_dir) and time.monotonic() < deadline:
        time.sleep(0.1)
    if is_running(data_dir):
        logger.warning("the embedded PostgreSQL under %s is still running after the stop", data_dir)
