"""`make run` boots the whole stack on a fresh data folder, serves pages, static files and the MCP
endpoint (uvicorn serving the ASGI app), starts a part that died again (the worker, the embedded
database, the embedded broker), and stops cleanly."""

from __future__ import annotations

import http.cookiejar
import json
import os
import queue
import re
import signal
import socket
import subprocess
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

import pytest

from openfable import embedded_broker
from tests.conftest import REPO_ROOT

pytestmark = pytest.mark.slow


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class _Output:
    """The lines a process prints, read on a thread of their own: a wait for a line that never
    comes ends at its timeout instead of blocking in ``readline`` for as long as the pipe is open."""

    def __init__(self, process: subprocess.Popen[str]) -> None:
        assert process.stdout is not None
        self.stream = process.stdout
        self.lines: queue.Queue[str | None] = queue.Queue()
        self.seen: list[str] = []
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self) -> None:
        for line in self.stream:
            self.lines.put(line)
        self.lines.put(None)

    def wait_for(self, needle: str, timeout: float) -> list[str]:
        """The lines up to the first holding ``needle``."""
        lines: list[str] = []
        deadline = time.monotonic() + timeout
        while (left := deadline - time.monotonic()) > 0:
            try:
                line = self.lines.get(timeout=left)
            except queue.Empty:
                break
            if line is None:
                break
            lines.append(line)
            self.seen.append(line)
            if needle in line:
                return lines
        raise AssertionError(f"never saw {needle!r}; output:\n{''.join(lines)}")

    def rest(self) -> str:
        """Everything printed, once the process has ended."""
        self.thread.join(timeout=30)
        while (line := self.lines.get_nowait() if not self.lines.empty() else None) is not None:
            self.seen.append(line)
        return "".join(self.seen)


def _signed_in(base_url: str, username: str, password: str) -> urllib.request.OpenerDirector:
    """An opener holding a session cookie (sessions live in the database)."""
    opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(http.cookiejar.CookieJar()))
    with opener.open(f"{base_url}/accounts/login/", timeout=10) as response:
        page = response.read().decode()
    csrf = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page)
    assert csrf, page
    form = {"username": username, "password": password, "csrfmiddlewaretoken": csrf.group(1)}
    with opener.open(
        f"{base_url}/accounts/login/", urllib.parse.urlencode(form).encode(), timeout=10
    ) as response:
        assert "/accounts/login/" not in response.url, "signed in"
    return opener


def _home_status(opener: urllib.request.OpenerDirector, base_url: str) -> int:
    try:
        with opener.open(f"{base_url}/", timeout=10) as response:
            return int(response.status)
    except urllib.error.HTTPError as error:
        return int(error.code)
    except OSError:
        return 0


def test_make_run_serves_the_home_page_and_admin_then_stops(tmp_path: Path) -> None:
    port = _free_port()
    data_dir = tmp_path / "var"
    env = {key: value for key, value in os.environ.items() if not key.startswith("OPENFABLE_")}
    env.update({"OPENFABLE_DATA_DIR": str(data_dir), "OPENFABLE_PORT": str(port), "PYTHONUNBUFFERED": "1"})
    process = subprocess.Popen(
        ["make", "--no-print-directory", "run"],
        cwd=REPO_ROOT,
        env=env,
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    printed = _Output(process)
    try:
        lines = printed.wait_for("OpenFable is running at", timeout=240)
        assert any("Log in as  admin / " in line for line in lines), "first run prints the admin login"
        body = ""
        for _ in range(60):
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=5) as response:
                    body = response.read().decode()
                break
            except OSError:
                time.sleep(0.5)
        assert "Sign in" in body and "OpenFable" in body, "the home page asks for a sign-in"
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/admin/login/", timeout=5) as response:
            assert response.status == 200
        # uvicorn serves the ASGI app: static files through WhiteNoise, and the MCP endpoint.
        with urllib.request.urlopen(
            f"http://127.0.0.1:{port}/static/vendor/htmx.min.js", timeout=5
        ) as response:
            assert response.status == 200 and b"htmx" in response.read()
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(
                urllib.request.Request(f"http://127.0.0.1:{port}/v1/mcp", method="POST"), timeout=5
            )
        assert refused.value.code == 401, "the MCP endpoint is served, behind the API tokens"
        assert (data_dir / "postgres" / "postmaster.pid").exists()

        # A worker that dies is started again; the web server and the database keep running.
        worker_pid = next(
            int(line.split("pid ")[1].rstrip(").\n")) for line in lines if "Started the worker" in line
        )
        os.kill(worker_pid, signal.SIGKILL)
        again = printed.wait_for("Started the worker", timeout=30)
        assert any("The worker exited with status -9; starting it again." in line for line in again)
        new_pid = int(again[-1].split("pid ")[1].rstrip(").\n"))
        assert new_pid != worker_pid
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/accounts/login/", timeout=5) as response:
            assert response.status == 200

        # The embedded database killed outright is started again too, and the pages answer
        # (the signed-in home page reads the session and the documents from the database).
        password = next(line for line in lines if "Log in as  admin / " in line).split(" / ")[1].strip()
        base_url = f"http://127.0.0.1:{port}"
        opener = _signed_in(base_url, "admin", password)
        assert _home_status(opener, base_url) == 200
        pid_file = data_dir / "postgres" / "postmaster.pid"
        postmaster = int(pid_file.read_text().split("\n", 1)[0])
        os.kill(postmaster, signal.SIGKILL)
        again = printed.wait_for("Started the database", timeout=60)
        assert any("The database stopped; starting it again." in line for line in again), again
        assert int(pid_file.read_text().split("\n", 1)[0]) != postmaster
        deadline = time.monotonic() + 30
        while _home_status(opener, base_url) != 200 and time.monotonic() < deadline:
            time.sleep(0.5)
        assert _home_status(opener, base_url) == 200, (
            "a query answers again, without restarting the web server"
        )

        # The embedded broker killed outright is started again, from its append-only file; the
        # worker and the web server reconnect by themselves (the health check pings the worker
        # through it).
        broker_pid = next(
            int(line.split("pid ")[1].split(",")[0]) for line in lines if "Started the broker" in line
        )
        os.kill(broker_pid, signal.SIGKILL)
        again = printed.wait_for("Started the broker", timeout=60)
        assert any("The broker exited with status -9; starting it again." in line for line in again), again
        deadline = time.monotonic() + 60
        while not _broker_and_worker_answer(base_url) and time.monotonic() < deadline:
            time.sleep(1)
        assert _broker_and_worker_answer(base_url), "the worker answers through the new broker"
    finally:
        os.killpg(process.pid, signal.SIGINT)  # what Ctrl-C in a terminal does
        process.wait(timeout=90)
    output = printed.rest()
    # make itself re-raises the SIGINT it received once its child has finished.
    assert process.returncode in (0, -signal.SIGINT), output
    assert "OpenFable stopped." in output
    assert not (data_dir / "postgres" / "postmaster.pid").exists(), "the embedded database was stopped"
    assert not embedded_broker.answers(embedded_broker.broker_dir(data_dir)), "the broker was stopped"
    assert (embedded_broker.broker_dir(data_dir) / "appendonly.aof").exists(), "its queue is on disk"


def _broker_and_worker_answer(base_url: str) -> bool:
    """The health check finds the broker and a worker answering (the rest may still warm up)."""
    try:
        with urllib.request.urlopen(f"{base_url}/v1/api/health", timeout=30) as response:
            body = response.read()
    except urllib.error.HTTPError as error:
        body = error.read()
    except OSError:
        return False
    checks = json.loads(body)["checks"]
    return bool(checks["broker"]["ok"] and checks["worker"]["ok"])
