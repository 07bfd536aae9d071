"""`make run`: the whole app on one machine, no setup.

Starts the embedded PostgreSQL (through settings), migrates, creates a local admin account
on the first run (printing its login once), then runs the web server (uvicorn serving the
ASGI app: Django and the MCP endpoints) and a Celery worker side by side. Ctrl-C stops all
of it, the database included.
"""

from __future__ import annotations

import os
import secrets
import signal
import subprocess
import sys
import time
from types import FrameType

import django
from django.core.management import call_command
from django.core.management.base import SystemCheckError

SHUTDOWN_GRACE_SECONDS = 15
MAX_RESTARTS = 5  # a part that dies this often within RESTART_WINDOW_SECONDS stops everything
RESTART_WINDOW_SECONDS = 60
WEB_GRACEFUL_SECONDS = 5  # the web server's own grace for open connections, within the above


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
    children = {name: _start(name, command) for name, command in commands.items()}
    restarts: dict[str, list[float]] = {name: [] for name in commands}
    print(
        f"\nOpenFable is running at http://{host}:{port}/  (admin: http://{host}:{port}/admin/)", flush=True
    )
    print(f"MCP (with an API token): http://{host}:{port}/v1/mcp  (SSE: /v1/mcp/sse)", flush=True)
    print("Press Ctrl-C to stop the web server, the worker and the database.\n", flush=True)

    stopping = False

    def _request_stop(signum: int, frame: FrameType | None) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGINT, _request_stop)
    signal.signal(signal.SIGTERM, _request_stop)
    exit_code = 0
    while not stopping:
        for name, child in list(children.items()):
            if child.poll() is None or stopping:
                continue
            # A part that died is started again (the database and the other part keep running);
            # one that keeps dying is a fault to fix, not to hide: then everything stops.
            recent = [
                moment for moment in restarts[name] if time.monotonic() - moment < RESTART_WINDOW_SECONDS
            ]
            if len(recent) >= MAX_RESTARTS:
                print(
                    f"The {name} exited with status {child.returncode} {MAX_RESTARTS} times within "
                    f"{RESTART_WINDOW_SECONDS} s; stopping. Its output above says why.",
                    file=sys.stderr,
                )
                exit_code = 1
                stopping = True
                break
            print(
                f"The {name} exited with status {child.returncode}; starting it again.",
                file=sys.stderr,
                flush=True,
            )
            restarts[name] = [*recent, time.monotonic()]
            children[name] = _start(name, commands[name])
        time.sleep(0.3)

    _stop_children(list(children.values()))
    if not settings.DATABASE_URL:
        from django.db import connections

        from openfable.embedded_db import stop

        connections.close_all()
        stop(settings.EMBEDDED_DATABASE_DIR)
    print("OpenFable stopped.", flush=True)
    return exit_code


def _start(name: str, command: list[str]) -> subprocess.Popen[bytes]:
    child = subprocess.Popen(command)
    print(f"Started the {name} (pid {child.pid}).", flush=True)
    return child


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


def _stop_children(children: list[subprocess.Popen[bytes]]) -> None:
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
