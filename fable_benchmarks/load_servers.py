"""The servers `python -m fable_benchmarks bench-load` runs against, as docker-compose.yml starts them.

gunicorn with uvicorn workers (the ASGI app: Django and the MCP server) and a Celery worker, each
in its own process group, on the database this process uses (the test database under pytest),
with debug off and plain HTTP. They get a private data folder, so their Celery queue (the
embedded broker, started in it as `make run` starts it) is theirs alone, and the caller's other
settings (LLM, embeddings, a broker URL if it names one).
"""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import quote

import environ
import httpx
from django.conf import settings
from django.db import connection

from openfable import embedded_broker
from openfable.errors import ServiceUnavailableError
from openfable.runner import worker_command

Log = Callable[[str], None]
READY_TIMEOUT_SECONDS = 240.0  # two web workers and a Celery worker importing Django on a busy machine
SERVER_GRACE_SECONDS = 20  # then the process groups are killed (a Celery task mid-document included)
SERVER_LOG_PROBLEMS = re.compile(r"Traceback|WORKER TIMEOUT|Internal Server Error")


def _database_url() -> str:
    """The database this process uses (the test database under pytest), as OPENFABLE_DATABASE_URL."""
    db = connection.settings_dict
    if settings.DATABASE_URL and environ.Env.db_url_config(settings.DATABASE_URL)["NAME"] == db["NAME"]:
        return str(settings.DATABASE_URL)  # keeps its options (sslmode, ...)
    auth = quote(str(db.get("USER") or ""), safe="")
    if db.get("PASSWORD"):
        auth += ":" + quote(str(db["PASSWORD"]), safe="")
    host, port, name = str(db.get("HOST") or ""), str(db.get("PORT") or ""), quote(str(db["NAME"]), safe="")
    if host.startswith("/"):  # a socket folder (the embedded server)
        return f"postgresql://{auth}@/{name}?host={quote(host, safe='/')}"
    return f"postgresql://{auth}@{host}{':' + port if port else ''}/{name}"


def server_environment(data_dir: Path, *, unthrottled: str) -> dict[str, str]:
    """The caller's environment (its LLM and embedding settings) with the production switches."""
    environment = {
        key: value
        for key, value in os.environ.items()
        if key not in ("DJANGO_ALLOW_ASYNC_UNSAFE", "OPENFABLE_TEST_DATABASE_NAME")
    }
    rates = {**settings.API_THROTTLE_RATES, unthrottled: "1000000/minute"}
    return environment | {
        "DJANGO_SETTINGS_MODULE": "openfable.settings",
        "OPENFABLE_DATABASE_URL": _database_url(),
        "OPENFABLE_DATA_DIR": str(data_dir),
        "OPENFABLE_SECRET_KEY": settings.SECRET_KEY,
        "OPENFABLE_DEBUG": "false",
        "OPENFABLE_HTTPS": "false",
        "OPENFABLE_API_THROTTLE_RATES": ",".join(f"{user}={rate}" for user, rate in rates.items()),
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",
        "PYTHONUNBUFFERED": "1",
    }


def web_command(*, port: int, workers: int) -> list[str]:
    """docker-compose.yml's web command (tests/benchmarks/test_load.py keeps the two alike)."""
    return [
        sys.executable, "-m", "gunicorn", "openfable.asgi:application",
        "--worker-class", "uvicorn_worker.UvicornWorker",
        "--workers", str(workers),
        "--bind", f"127.0.0.1:{port}",
        "--timeout", "120",
        "--graceful-timeout", "10",
        "--keep-alive", "5",
    ]  # fmt: skip


WEB_POOL_SIZE = "20"  # docker-compose.yml's default OPENFABLE_DATABASE_POOL_SIZE


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def servers(folder: Path, *, web_workers: int, unthrottled: str, log: Log) -> Iterator[str]:
    """The Celery worker and the web server, each in its own process group; yields the base URL."""
    environment = server_environment(folder / "var", unthrottled=unthrottled)
    port = _free_port()
    started: list[tuple[str, subprocess.Popen[bytes]]] = []
    broker = None
    try:
        if not environment.get("OPENFABLE_BROKER_URL"):
            broker = embedded_broker.start(embedded_broker.broker_dir(folder / "var"))
        for name, command in (
            ("worker", worker_command()),
            ("web", web_command(port=port, workers=web_workers)),
        ):
            # As docker-compose.yml runs them: the web workers draw connections from a pool.
            pool = {"OPENFABLE_DATABASE_POOL_SIZE": WEB_POOL_SIZE} if name == "web" else {}
            process = subprocess.Popen(
                command,
                cwd=settings.BASE_DIR,
                env=environment | pool,
                start_new_session=True,  # the stop takes its children (web workers, pool) too
                stdout=(folder / f"{name}.log").open("wb"),
                stderr=subprocess.STDOUT,
            )
            started.append((name, process))
        base_url = f"http://127.0.0.1:{port}"
        _wait_until_healthy(base_url, started, folder)
        log(f"servers ready at {base_url} (logs in {folder})")
        yield base_url
    finally:
        for _name, process in started:
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGTERM)
        deadline = time.monotonic() + SERVER_GRACE_SECONDS
        for _name, process in started:
            try:
                process.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait(timeout=10)
        if broker is not None:  # last, as make run stops it: the worker hands its messages back
            embedded_broker.stop(broker)


def _wait_until_healthy(
    base_url: str, started: Sequence[tuple[str, subprocess.Popen[bytes]]], folder: Path
) -> None:
    deadline = time.monotonic() + READY_TIMEOUT_SECONDS
    last = "no answer yet"
    while time.monotonic() < deadline:
        for name, process in started:
            if process.poll() is not None:
                raise ServiceUnavailableError(
                    f"The {name} server exited with status {process.returncode} while starting; "
                    f"its log: {folder / (name + '.log')}"
                )
        try:
            answer = httpx.get(f"{base_url}/v1/api/health", timeout=30)
            if answer.status_code == 200:
                return
            last = f"HTTP {answer.status_code}: {answer.text[:300]}"
        except httpx.TransportError as error:
            last = f"{type(error).__name__}: {error}"
        time.sleep(1)
    raise ServiceUnavailableError(
        f"The servers were not healthy after {READY_TIMEOUT_SECONDS:.0f} s ({last}); logs in {folder}"
    )


def server_log_problems(path: Path) -> list[str]:
    if not path.exists():
        return []
    return [
        line.strip()[:300]
        for line in path.read_text(errors="replace").splitlines()
        if SERVER_LOG_PROBLEMS.search(line)
    ]
