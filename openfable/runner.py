"""`make run`: the whole app on one machine, no setup.

Starts the embedded PostgreSQL (through settings), migrates, creates a local admin account
on the first run (printing its login once), then runs the web server (uvicorn serving the
ASGI app: Django and the MCP endpoints) and a Celery worker side by side, on the embedded Redis
broker it starts first (``openfable.embedded_broker``); with ``OPENFABLE_LLM=local`` the local
model's server too (``openfable.local_llm``). It watches them all (the embedded database too): a
part that dies is started again, one that keeps dying stops everything. Ctrl-C stops all of it:
the web server, the worker and the local model first, then the broker and the database.
"""

from __future__ import annotations

import os
import secrets
import signal
import subprocess
import sys
import time
from pathlib import Path
from types import FrameType

import django
import psutil
from django.core.management import call_command
from django.core.management.base import SystemCheckError

from openfable import embedded_broker, local_llm
from openfable.embedded_db import live_postmaster, postmaster_pid, stop
from openfable.startup import StartupError

SHUTDOWN_GRACE_SECONDS = 15
MAX_RESTARTS = 5  # a part that dies this often within RESTART_WINDOW_SECONDS stops everything
RESTART_WINDOW_SECONDS = 60
WEB_GRACEFUL_SECONDS = 5  # the web server's own grace for open connections, within the above
LOCAL_MODEL = "local model server"  # OPENFABLE_LLM=local (openfable.local_llm)


def main() -> int:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "openfable.settings")
    django.setup()
    from django.conf import settings

    try:
        call_command("check", "--database", "default")
    except SystemCheckError as error:
        print(error, file=sys.stderr)
        return 1
    call_command("migrate", interactive=False, verbosity=0)
    _ensure_admin_account()

    host = os.environ.get("OPENFABLE_HOST", "127.0.0.1")
    port = os.environ.get("OPENFABLE_PORT", "8000")
    python = sys.executable
    commands = {
        "web server": _web_server_command(python, host=host, port=port),
        "worker": worker_command(python),
    }
    if settings.LOCAL_LLM:  # OPENFABLE_LLM=local: the model server is one more supervised part
        try:
            commands[LOCAL_MODEL] = _local_model_command(python)
        except StartupError as error:
            print(f"OpenFable cannot start: {error}", file=sys.stderr, flush=True)
            return 1
    # The embedded broker first: the web server queues tasks and the worker reads them from it.
    broker_dir = None if settings.BROKER_URL_FROM_ENV else settings.EMBEDDED_BROKER_DIR
    broker = None
    if broker_dir is not None:
        try:
            broker = _start_broker(broker_dir)
        except StartupError as error:
            print(f"OpenFable cannot start: {error}", file=sys.stderr, flush=True)
            return 1
    children = {name: _start(name, command) for name, command in commands.items()}
    if LOCAL_MODEL in children:
        _say_when_model_ready(settings.LLM_BASE_URL)
    restarts: dict[str, list[float]] = {name: [] for name in [*commands, "broker", "database"]}
    database_dir = None if settings.DATABASE_URL else settings.EMBEDDED_DATABASE_DIR
    print(
        f"\nOpenFable is running at http://{host}:{port}/  (admin: http://{host}:{port}/admin/)", flush=True
    )
    print(f"MCP (with an API token): http://{host}:{port}/v1/mcp  (SSE: /v1/mcp/sse)", flush=True)
    parts = (
        "the web server, the worker, the local model, "
        if LOCAL_MODEL in children
        else "the web server, the worker, "
    )
    print(f"Press Ctrl-C to stop {parts}the broker and the database.\n", flush=True)

    stopping = False

    def _request_stop(signum: int, frame: FrameType | None) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGINT, _request_stop)
    signal.signal(signal.SIGTERM, _request_stop)
    exit_code = 0
    while not stopping:
        # The embedded database is a part like the others: killed, it is started again (the web
        # server and the worker reconnect on their next query), by the same rule.
        if database_dir is not None and live_postmaster(database_dir) is None:
            if not _may_restart("database", restarts, status="stopped"):
                exit_code, stopping = 1, True
                break
            _restart_database(database_dir)
        # The broker too: the worker and the web server reconnect by themselves, and what was
        # queued is read back from its append-only file.
        if broker_dir is not None and (broker is None or broker.poll() is not None):
            status = "did not start" if broker is None else f"exited with status {broker.returncode}"
            if broker is not None and (said := embedded_broker.log_tail(broker_dir)):
                print(said, file=sys.stderr, flush=True)
            if not _may_restart("broker", restarts, status=status):
                exit_code, stopping = 1, True
                break
            try:
                broker = _start_broker(broker_dir)
            except StartupError as error:  # counted: the next turn tries again, by the same rule
                print(f"The broker did not start again: {error}", file=sys.stderr, flush=True)
                broker = None
        for name, child in list(children.items()):
            if child.poll() is None or stopping:
                continue
            # A part that died is started again (the database and the other part keep running);
            # one that keeps dying is a fault to fix, not to hide: then everything stops.
            if not _may_restart(name, restarts, status=f"exited with status {child.returncode}"):
                exit_code, stopping = 1, True
                break
            children[name] = _start(name, commands[name])
        time.sleep(0.3)

    stop_children(list(children.values()))
    # After the worker: on its way out it hands the messages it held back to the broker.
    if broker is not None:
        embedded_broker.stop(broker)
    if not settings.DATABASE_URL:
        from django.db import connections

        connections.close_all()
        stop(settings.EMBEDDED_DATABASE_DIR)
    print("OpenFable stopped.", flush=True)
    return exit_code


def _may_restart(name: str, restarts: dict[str, list[float]], *, status: str) -> bool:
    """Note a restart of ``name``; False (said why) when it already needed MAX_RESTARTS of them
    within RESTART_WINDOW_SECONDS."""
    now = time.monotonic()
    recent = [moment for moment in restarts[name] if now - moment < RESTART_WINDOW_SECONDS]
    if len(recent) >= MAX_RESTARTS:
        print(
            f"The {name} {status} {MAX_RESTARTS} times within {RESTART_WINDOW_SECONDS} s; stopping. "
            "Its output above says why.",
            file=sys.stderr,
            flush=True,
        )
        return False
    print(f"The {name} {status}; starting it again.", file=sys.stderr, flush=True)
    restarts[name] = [*recent, now]
    return True


def _restart_database(data_dir: Path) -> None:
    # The dead postmaster must be gone from the process table first (a zombie until its parent
    # reaps it): pgserver and PostgreSQL's own lock file would take it for a running server.
    dead = postmaster_pid(data_dir)
    deadline = time.monotonic() + 10
    while dead is not None and psutil.pid_exists(dead) and time.monotonic() < deadline:
        time.sleep(0.1)
    # In a child process, as each part's own start-up does: pgserver keeps one handle per data
    # folder in a process, and the one in this process still believes the old postmaster runs.
    script = (
        "import sys; from pathlib import Path; from openfable.embedded_db import ensure_running\n"
        "from openfable.startup import StartupError\n"
        "try:\n    ensure_running(Path(sys.argv[1]))\n"
        "except StartupError as error:\n    sys.exit(str(error))"
    )
    try:
        started = subprocess.run(
            [sys.executable, "-c", script, str(data_dir)], capture_output=True, text=True, timeout=120
        )
    except subprocess.TimeoutExpired:
        started = None
    if started is None or started.returncode != 0:
        # Counted as a restart: the next turn tries again, and gives up by the same rule.
        said = (started.stderr.strip().splitlines() or ["(no output)"])[-1] if started else "timed out"
        print(f"The database did not start again: {said}", file=sys.stderr, flush=True)
        return
    print(f"Started the database (pid {live_postmaster(data_dir)}).", flush=True)


def _start_broker(folder: Path) -> subprocess.Popen[bytes]:
    broker = embedded_broker.start(folder)
    print(f"Started the broker (pid {broker.pid}, {embedded_broker.socket_path(folder)}).", flush=True)
    return broker


def _start(name: str, command: list[str]) -> subprocess.Popen[bytes]:
    child = subprocess.Popen(command, env=local_llm.server_environment() if name == LOCAL_MODEL else None)
    print(f"Started the {name} (pid {child.pid}).", flush=True)
    return child


def _local_model_command(python: str) -> list[str]:
    """The local model's server (``openfable.local_llm``), the model assembled first if need be."""
    from django.conf import settings

    model = local_llm.ensure_model(settings.DATA_DIR, settings.LOCAL_LLM_MODEL)
    return local_llm.server_command(
        python,
        model=model,
        alias=settings.LOCAL_LLM_MODEL,
        port=settings.LOCAL_LLM_PORT,
        threads=settings.LOCAL_LLM_THREADS,
        context=max(local_llm.DEFAULT_CONTEXT, settings.LLM_CONTEXT_WINDOW),
    )


def _say_when_model_ready(url: str) -> None:
    # The web server and the worker do not wait for it: a call made while it loads is retried.
    from django.conf import settings

    if local_llm.wait_until_ready(url, timeout_s=60):
        print(f"The local model answers at {url} ({settings.LOCAL_LLM_MODEL}).", flush=True)
    else:
        print(f"The local model did not answer at {url} within 60 s; its output above says why.", flush=True)


def worker_command(python: str = sys.executable) -> list[str]:
    """The Celery worker, as docker-compose.yml's worker service runs it."""
    return [python, "-m", "celery", "-A", "openfable", "worker", "--loglevel", "INFO", "--concurrency", "2"]


def _web_server_command(python: str, *, host: str, port: str) -> list[str]:
    """uvicorn serving the ASGI app: Django (its static files through WhiteNoise) and the MCP
    endpoints, which need the lifespan on (it runs their session manager)."""
    from django.conf import settings

    # uvicorn takes the client's address from X-Forwarded-For when the connection comes from
    # 127.0.0.1, by default: any local program (or a proxy on this host) would choose the address
    # the sign-in lockout counts. Only OPENFABLE_BEHIND_PROXY=true says a proxy sets that header.
    proxy_headers = [] if settings.BEHIND_PROXY else ["--no-proxy-headers"]
    return [
        python,
        "-m",
        "uvicorn",
        "openfable.asgi:application",
        "--host",
        host,
        "--port",
        port,
        "--lifespan",
        "on",
        # Open SSE streams (MCP clients) would otherwise hold Ctrl-C up until they disconnect.
        "--timeout-graceful-shutdown",
        str(WEB_GRACEFUL_SECONDS),
        *proxy_headers,
    ]


def _ensure_admin_account() -> None:
    from django.contrib.auth import get_user_model

    user_model = get_user_model()
    if user_model.objects.filter(is_superuser=True).exists():
        return
    password = secrets.token_urlsafe(12)
    user_model.objects.create_superuser(username="admin", email="", password=password)
    # Printed once: later runs find the account and say nothing.
    print(f"\nCreated a local admin account. Log in as  admin / {password}\n", flush=True)


def stop_children(children: list[subprocess.Popen[bytes]]) -> None:
    """SIGTERM each child still running, then SIGKILL the ones still there after the grace time
    (a model server mid-answer may not stop on SIGTERM until it has written the answer)."""
    for child in children:
        if child.poll() is None:
            child.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + SHUTDOWN_GRACE_SECONDS
    for child in children:
        try:
            child.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()


if __name__ == "__main__":
    sys.exit(main())
