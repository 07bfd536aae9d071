"""Starting and watching the real processes the fault tests break: free ports, waiting for a
condition, the environment a child process of the app runs with, a private PostgreSQL cluster."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import REPO_ROOT


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def answers(port: int) -> bool:
    """Something listens on 127.0.0.1:port."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return True
    except OSError:
        return False


def wait_for(condition: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.2)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")


@contextmanager
def redis_server(folder: Path) -> Iterator[str]:
    """Debian's redis-server on a free port, without persistence; yields its URL, stopped after."""
    if shutil.which("redis-server") is None:
        pytest.fail("redis-server is missing: `make test` installs it (scripts/system-deps.sh)")
    port = free_port()
    server = subprocess.Popen(
        ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"],
        cwd=folder,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_for(lambda: answers(port), timeout=20, what="redis-server to listen")
        yield f"redis://127.0.0.1:{port}/0"
    finally:
        server.terminate()
        server.wait(timeout=20)


def app_environment(**openfable: str) -> dict[str, str]:
    """This process's environment without its OPENFABLE_* settings, plus the ones given
    (``database_url="…"`` becomes ``OPENFABLE_DATABASE_URL``)."""
    env = {key: value for key, value in os.environ.items() if not key.startswith("OPENFABLE_")}
    env |= {f"OPENFABLE_{name.upper()}": value for name, value in openfable.items()}
    return env


def manage(env: Mapping[str, str], *args: str, timeout: float = 180) -> subprocess.CompletedProcess[str]:
    """``python manage.py ARGS`` in a child process with ``env``."""
    return subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=REPO_ROOT,
        env=dict(env),
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def stop_process(process: subprocess.Popen[bytes], *, grace: float = 30) -> None:
    """SIGTERM, then SIGKILL to its whole process group if it does not end within ``grace``."""
    if process.poll() is not None:
        return
    process.terminate()
    try:
        process.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, 9)
        process.wait(timeout=30)


@dataclass
class PrivateCluster:
    """A PostgreSQL + pgvector cluster of one test's own, made and started the way the app makes
    its embedded one (``openfable.embedded_db``), so a test may stop it without disturbing the
    shared cluster other test runs use. It listens on a Unix socket in its own folder.

    The folder must not be under pytest's temporary root: run as root, PostgreSQL runs as another
    user (pgserver's), and every pytest session closes /tmp/pytest-of-root to other users again,
    which would leave the server unreachable for ``pg_ctl`` mid-test (see ``private_cluster``)."""

    data_dir: Path
    said: str = ""  # what the last start wrote to stderr

    def start(self, **openfable: str) -> str:
        """Start it (initialising it the first time) in a child process, as the app's start-up
        does, with these OPENFABLE_* settings (see ``app_environment``); the URL of its
        ``openfable`` database."""
        script = (
            "import sys; from pathlib import Path; from openfable.embedded_db import ensure_running; "
            "print(ensure_running(Path(sys.argv[1])).url())"
        )
        done = subprocess.run(
            [sys.executable, "-c", script, str(self.data_dir)],
            cwd=REPO_ROOT,
            env=app_environment(**openfable),
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, done.stderr
        self.said = done.stderr
        return done.stdout.strip().splitlines()[-1]

    def stop(self) -> None:
        """``pg_ctl stop -m fast``: sessions are ended, the socket goes away."""
        from openfable.embedded_db import is_running, stop

        stop(self.data_dir)
        assert not is_running(self.data_dir), "the private cluster did not stop"
