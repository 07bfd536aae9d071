"""The SSE endpoint under a real web server (uvicorn, as ``make run`` starts it), read through its log:
a stream refused for its Origin is a complete 403, and stopping the server with a stream open
closes the stream; neither leaves "Exception in ASGI application" behind."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx2
import pytest
from django.db import connection

from openfable.api_tokens import token_create
from openfable.runner import _web_server_command
from tests.conftest import REPO_ROOT
from tests.factories import UserFactory
from tests.faults.processes import answers, app_environment, free_port, stop_process, wait_for

pytestmark = [pytest.mark.faults, pytest.mark.slow, pytest.mark.django_db(transaction=True)]


class _WebServer:
    def __init__(self, process: subprocess.Popen[bytes], url: str, log: Path) -> None:
        self.process, self.url, self.log = process, url, log

    def output(self) -> str:
        return self.log.read_text(errors="replace")


@pytest.fixture
def web_server(tmp_path: Path) -> Iterator[_WebServer]:
    """uvicorn serving the ASGI app on the test database, its output in a file."""
    db = connection.settings_dict
    env = app_environment(
        database_url=f"postgresql://{db['USER']}@/{db['NAME']}?host={db['HOST']}",
        data_dir=str(tmp_path / "data"),
        debug="true",
    )
    port = free_port()
    log = tmp_path / "web.log"
    process = subprocess.Popen(
        _web_server_command(sys.executable, host="127.0.0.1", port=str(port)),
        cwd=REPO_ROOT,
        env=env,
        start_new_session=True,
        stdout=log.open("wb"),
        stderr=subprocess.STDOUT,
    )
    try:
        wait_for(lambda: answers(port) or process.poll() is not None, timeout=90, what="the web server")
        assert process.poll() is None, log.read_text()
        yield _WebServer(process, f"http://127.0.0.1:{port}", log)
    finally:
        stop_process(process)


def test_an_sse_stream_refused_for_its_origin_answers_403_and_logs_no_exception(
    web_server: _WebServer,
) -> None:
    _, key = token_create(user=UserFactory.create(), name="sse log test")
    headers = {"Authorization": f"Bearer {key}", "Origin": "http://rebound.example"}
    with httpx2.Client(base_url=web_server.url, timeout=10) as http:
        for _ in range(3):
            refused = http.get("/v1/mcp/sse", headers=headers)
            assert refused.status_code == 403, refused.text
            assert refused.json()["error"]["data"]["code"] == "invalid_origin"
        # The same server still opens a stream for a client of its own site.
        own = {"Authorization": f"Bearer {key}"}
        with http.stream("GET", "/v1/mcp/sse", headers=own) as events:
            assert events.status_code == 200
            assert any(line.startswith("event: endpoint") for line in events.iter_lines())
    time.sleep(0.5)  # the server writes its log after the response
    output = web_server.output()
    assert "Exception in ASGI application" not in output, output
    assert "Traceback" not in output, output


def test_stopping_the_server_with_an_sse_stream_open_closes_it_cleanly(web_server: _WebServer) -> None:
    _, key = token_create(user=UserFactory.create(), name="sse log test")
    headers = {"Authorization": f"Bearer {key}"}
    with (
        httpx2.Client(base_url=web_server.url, timeout=30) as http,
        http.stream("GET", "/v1/mcp/sse", headers=headers) as events,
    ):
        lines = events.iter_lines()
        assert next(line for line in lines if line.startswith("event: ")) == "event: endpoint"
        web_server.process.send_signal(signal.SIGINT)  # what Ctrl-C does to make run's parts
        # The stream ends as a complete response (a cut one raises here: incomplete chunked read).
        assert not [line for line in lines if line.startswith("event: message")]
    assert web_server.process.wait(timeout=30) == 0, web_server.output()
    output = web_server.output()
    assert "Exception in ASGI application" not in output, output
    assert "Traceback" not in output, output
    assert "Finished server process" in output, output
