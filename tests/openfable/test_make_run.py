"""`make run` boots the whole stack on a fresh data folder, serves pages, static files and the MCP
endpoint (uvicorn serving the ASGI app), starts a part that died again, and stops cleanly."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from tests.conftest import REPO_ROOT

pytestmark = pytest.mark.slow


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _wait_for_line(process: subprocess.Popen[str], needle: str, timeout: float) -> list[str]:
    lines: list[str] = []
    deadline = time.monotonic() + timeout
    assert process.stdout is not None
    while time.monotonic() < deadline:
        line = process.stdout.readline()
        if not line:
            if process.poll() is not None:
                break
            continue
        lines.append(line)
        if needle in line:
            return lines
    raise AssertionError(f"never saw {needle!r}; output:\n{''.join(lines)}")


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
    try:
        lines = _wait_for_line(process, "OpenFable is running at", timeout=240)
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
        again = _wait_for_line(process, "Started the worker", timeout=30)
        assert any("The worker exited with status -9; starting it again." in line for line in again)
        new_pid = int(again[-1].split("pid ")[1].rstrip(").\n"))
        assert new_pid != worker_pid
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/accounts/login/", timeout=5) as response:
            assert response.status == 200
    finally:
        os.killpg(process.pid, signal.SIGINT)  # what Ctrl-C in a terminal does
        output, _ = process.communicate(timeout=90)
    # make itself re-raises the SIGINT it received once its child has finished.
    assert process.returncode in (0, -signal.SIGINT), output
    assert "OpenFable stopped." in output
    assert not (data_dir / "postgres" / "postmaster.pid").exists(), "the embedded database was stopped"
