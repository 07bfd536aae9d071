"""The embedded PostgreSQL + pgvector server used when OPENFABLE_DATABASE_URL is not set.

The ``pgserver`` wheel ships PostgreSQL 16 with pgvector. We let it initialise and start
the cluster (it knows how to run as a non-root system user when we are root) but never
let it stop the server at interpreter exit: the web server, the Celery worker and every
``manage.py`` call share one running cluster, and ``openfable.runner`` (``make run``)
stops it explicitly on Ctrl-C.
"""

from __future__ import annotations

import errno
import logging
import os
import re
import shutil
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from openfable.startup import StartupError, disk_problem, ensure_folder, free_space

DATABASE_NAME = "openfable"
_SUPERUSER = "postgres"
# initdb writes about 40 MB (a 16 MB WAL segment among it); the first start needs a little more.
NEW_CLUSTER_BYTES = 64_000_000
# What PostgreSQL, initdb and pg_ctl say when the disk is the problem, and the errno it means.
_DISK_MESSAGES = {
    "No space left on device": errno.ENOSPC,
    "Disk quota exceeded": errno.EDQUOT,
    "Read-only file system": errno.EROFS,
    "Permission denied": errno.EACCES,
}

logger = logging.getLogger(__name__)

# The server's settings of our own, in a file the cluster's postgresql.conf includes, written
# before each start (``_settings_write``). PostgreSQL's default buffer cache (128 MB) holds a
# tenth of the HNSW index of a million nodes: every query then copied index pages in from the
# kernel's cache, which cost a 1M-node query more than all the rest of its vector search (docs/benchmarks.md,
# "Synthetic corpora"). A quarter of the memory, PostgreSQL's documented starting point, within
# [SHARED_BUFFERS_MIN_MB, SHARED_BUFFERS_MAX_MB]; OPENFABLE_EMBEDDED_SHARED_BUFFERS_MB sets it.
# The kernel hands the pages over as they are first used: a small corpus never takes them.
SETTINGS_FILE = "openfable.conf"
_INCLUDE = f"include_if_exists = '{SETTINGS_FILE}'\n"
SHARED_BUFFERS_MIN_MB = 128
SHARED_BUFFERS_MAX_MB = 4096


# Importing the settings starts the server: every process of `make run`, each manage.py call and the
# worker find it running. The test suite turns this off before the settings load
# (tests/embedded_database.py) and starts the server in the fixture that sets up the test
# database, so that collecting tests, or running those that never touch the database, starts none.
START_WITH_SETTINGS = True


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


def planned(data_dir: Path) -> EmbeddedDatabase:
    """How the server under ``data_dir`` is reached once started, without starting it: through a
    socket in the data folder, pgserver's first choice (``ensure_running`` says where it is)."""
    data_dir = data_dir.expanduser().resolve()
    return EmbeddedDatabase(data_dir=data_dir, socket_dir=str(data_dir))


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

    Cheap when the server is already up: pgserver only reads ``postmaster.pid``. A disk that
    cannot hold the cluster (read-only, full, not ours) or a server that will not start raises
    ``StartupError`` saying so, instead of pgserver's traceback.
    """
    _quiet_pgserver_imports()
    import pgserver

    data_dir = data_dir.expanduser().resolve()
    ensure_folder(data_dir.parent)
    if not (data_dir / "PG_VERSION").exists() and _free_bytes(data_dir.parent) < NEW_CLUSTER_BYTES:
        raise StartupError(
            f"the disk holding {data_dir} has {free_space(data_dir.parent)} free, and a new embedded "
            f"database needs about {NEW_CLUSTER_BYTES // 1_000_000} MB; free some space or point "
            "OPENFABLE_DATA_DIR at another disk."
        )
    fresh = not (data_dir / "PG_VERSION").exists()
    if not fresh and not is_running(data_dir):
        _settings_write(data_dir)
    server = _start(pgserver, data_dir)
    if fresh:  # initdb has just made it and started it with PostgreSQL's defaults
        _settings_write(data_dir)
        stop(data_dir)
        server = _start(pgserver, data_dir)
    info = server.get_postmaster_info()
    socket_dir = str(info.socket_dir) if info.socket_dir is not None else str(data_dir)
    database = EmbeddedDatabase(data_dir=data_dir, socket_dir=socket_dir)
    _ensure_database(database)
    return database


def _start(pgserver: Any, data_dir: Path) -> Any:
    """Start the cluster (pgserver: ``initdb`` first when there is none). Should it not start with
    our settings (a buffer cache the machine cannot give), it starts with PostgreSQL's own."""

    def attempt() -> Any:
        # pgserver keeps one handle per folder and hands it back without starting anything:
        # after a stop or a failed start, a new one is what starts the server again.
        pgserver.postgres_server.PostgresServer._instances.pop(data_dir, None)
        return pgserver.get_server(data_dir, cleanup_mode=None)

    with _pgserver_messages() as said:
        try:
            try:
                return attempt()
            except subprocess.CalledProcessError:
                settings = data_dir / SETTINGS_FILE
                if not settings.exists():
                    raise
                logger.warning(
                    "the embedded PostgreSQL did not start with %s (%s); starting it with "
                    "PostgreSQL's defaults",
                    settings,
                    settings.read_text().strip().replace("\n", "; "),
                )
                settings.unlink()
                return attempt()
        except OSError as error:
            raise disk_problem(error, data_dir, what="the embedded database folder") from error
        except (subprocess.CalledProcessError, subprocess.TimeoutExpired) as error:
            raise _start_failure(data_dir, "\n".join(said)) from error


def shared_buffers_mb() -> int:
    """The buffer cache the embedded server starts with, in MB (see ``SETTINGS_FILE``)."""
    given = os.environ.get("OPENFABLE_EMBEDDED_SHARED_BUFFERS_MB", "").strip()
    if given:
        if not given.isdecimal() or int(given) < 1:
            raise StartupError(
                f"OPENFABLE_EMBEDDED_SHARED_BUFFERS_MB is {given!r}; give a whole number of megabytes, e.g. 1024."
            )
        return int(given)
    import psutil  # pgserver's own dependency

    quarter = psutil.virtual_memory().total // 4 // 1_048_576
    return max(SHARED_BUFFERS_MIN_MB, min(SHARED_BUFFERS_MAX_MB, quarter))


def _settings_write(data_dir: Path) -> None:
    """Write our settings for the cluster's next start, and include them from its configuration."""
    (data_dir / SETTINGS_FILE).write_text(f"shared_buffers = '{shared_buffers_mb()}MB'\n")
    configuration = data_dir / "postgresql.conf"
    if _INCLUDE not in configuration.read_text():
        with configuration.open("a") as file:
            file.write(
                "\n# OpenFable's settings (openfable/embedded_db.py), rewritten at each start\n" + _INCLUDE
            )


def _free_bytes(path: Path) -> int:
    try:
        return shutil.disk_usage(path).free
    except OSError:
        return NEW_CLUSTER_BYTES  # unknown: let initdb try and say what went wrong


@contextmanager
def _pgserver_messages() -> Iterator[list[str]]:
    """What pgserver logs while it runs initdb and pg_ctl (their stderr and the server's log on a
    failure), kept for ``_start_failure`` instead of printed: before Django configures logging,
    Python would print each of those long records to stderr."""
    said: list[str] = []

    class _Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            said.append(record.getMessage())

    handler = _Keep(logging.WARNING)
    pgserver_logger = logging.getLogger("pgserver")
    pgserver_logger.addHandler(handler)
    try:
        yield said
    finally:
        pgserver_logger.removeHandler(handler)


def _start_failure(data_dir: Path, said: str) -> StartupError:
    """Why initdb or the server's start failed, from what they printed and the server's log."""
    log = data_dir / "log"
    with suppress(OSError):
        said += "\n" + log.read_text(errors="replace")[-20_000:]
    for message, code in _DISK_MESSAGES.items():
        if message in said:
            return disk_problem(OSError(code, message), data_dir, what="the embedded database folder")
    reasons = re.findall(r"(?:FATAL|PANIC|ERROR|initdb: error): +(.+)", said)
    reason = f" ({reasons[-1].strip()})" if reasons else ""
    where = f"see its log {log}, or" if log.exists() else "or"
    return StartupError(
        f"the embedded PostgreSQL under {data_dir} did not start{reason}; {where} set "
        "OPENFABLE_DATABASE_URL to use another server."
    )


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


def postmaster_pid(data_dir: Path) -> int | None:
    """The pid ``postmaster.pid`` names (alive or not); None without that file."""
    try:
        return int((data_dir.expanduser().resolve() / "postmaster.pid").read_text().split("\n", 1)[0])
    except (OSError, ValueError):
        return None


def live_postmaster(data_dir: Path) -> int | None:
    """The pid of the postmaster that ``postmaster.pid`` names, if that process is alive; else None.

    A postmaster killed outright (SIGKILL, the out-of-memory killer) leaves its pid file behind,
    so ``is_running`` still says yes; this asks the process table. A zombie counts as dead: it
    serves nothing.
    """
    import psutil  # pgserver's own dependency

    pid = postmaster_pid(data_dir)
    try:
        return pid if pid is not None and psutil.Process(pid).status() != psutil.STATUS_ZOMBIE else None
    except psutil.Error:
        return None


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
