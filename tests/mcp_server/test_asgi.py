"""The ASGI app: MCP at /v1/mcp behind the API tokens and the allowed hosts, Django for the rest."""

from __future__ import annotations

import socket
import time

import httpx2
import pytest
from pytest_django.fixtures import Settings
from starlette.testclient import TestClient

from tests.mcp_server.conftest import TRANSPORTS, Person, connect, run_async

pytestmark = pytest.mark.django_db(transaction=True)

INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "tests", "version": "1"},
    },
}
MCP_HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


def test_every_mcp_endpoint_refuses_a_request_without_a_token(live_url: str, person: Person) -> None:
    with httpx2.Client(base_url=live_url, timeout=10) as http:
        answers = [
            http.post("/v1/mcp", json=INITIALIZE, headers=MCP_HEADERS),
            http.get("/v1/mcp/sse"),
            http.post("/v1/mcp/messages/?session_id=0", json=INITIALIZE),
            http.post("/v1/mcp", json=INITIALIZE, headers={**MCP_HEADERS, "Authorization": "Basic eDp5"}),
        ]
    for answer in answers:
        assert answer.status_code == 401, answer.text
        assert answer.headers["www-authenticate"] == "Bearer"
        assert answer.json()["error"]["data"]["code"] == "not_authenticated"


def test_an_unknown_or_revoked_token_is_refused(live_url: str, person: Person) -> None:
    run_async(person.revoke)
    with httpx2.Client(base_url=live_url, timeout=10) as http:
        for key in (person.key, "of_not-a-key", "something-else"):
            headers = {**MCP_HEADERS, "Authorization": f"Bearer {key}"}
            answer = http.post("/v1/mcp", json=INITIALIZE, headers=headers)
            assert answer.status_code == 401, answer.text
            assert answer.headers["www-authenticate"] == 'Bearer error="invalid_token"'
            assert "revoked" in answer.json()["error"]["data"]["message"]
            assert http.get("/v1/mcp/sse", headers={"Authorization": f"Bearer {key}"}).status_code == 401


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_the_sdk_client_cannot_connect_without_a_valid_token(
    live_url: str, person: Person, transport: str
) -> None:
    async def attempt(key: str | None) -> None:
        async with connect(live_url, transport, key) as client:
            await client.list_tools()

    with pytest.raises(Exception):  # noqa: B017 (the SDK surfaces a 401 as its transport's error)
        run_async(attempt, None)
    run_async(person.revoke)
    with pytest.raises(Exception):  # noqa: B017
        run_async(attempt, person.key)


def test_a_token_revoked_during_a_session_stops_the_next_call(live_url: str, person: Person) -> None:
    async def scenario() -> None:
        async with connect(live_url, "streamable-http", person.key) as client:
            await client.list_tools()
            await person.revoke()
            with pytest.raises(Exception):  # noqa: B017
                await client.call_tool("list_documents", {})

    run_async(scenario)


def test_an_sse_session_answers_only_the_token_that_opened_it(live_url: str, person: Person) -> None:
    from openfable.api_tokens import token_create

    _, other_key = token_create(user=person.user, name="another program")
    with httpx2.Client(base_url=live_url, timeout=10) as http:
        own = {"Authorization": f"Bearer {person.key}"}
        with http.stream("GET", "/v1/mcp/sse", headers=own) as events:
            lines = events.iter_lines()  # kept: a collected line iterator would close the stream
            endpoint = next(line for line in lines if line.startswith("data: "))[len("data: ") :]
            assert endpoint.startswith("/v1/mcp/messages/?session_id=")
            other = http.post(endpoint, json=INITIALIZE, headers={"Authorization": f"Bearer {other_key}"})
            assert other.status_code == 404
            assert http.post(endpoint, json=INITIALIZE, headers=own).status_code == 202


def test_a_host_not_in_allowed_hosts_is_refused(live_url: str, person: Person) -> None:
    headers = {**MCP_HEADERS, "Authorization": f"Bearer {person.key}", "Host": "rebound.example"}
    with httpx2.Client(base_url=live_url, timeout=10) as http:
        answer = http.post("/v1/mcp", json=INITIALIZE, headers=headers)
    assert answer.status_code == 421
    assert answer.json()["error"]["data"]["code"] == "invalid_host"


def test_an_origin_of_another_site_is_refused(live_url: str, person: Person) -> None:
    # The SDK's DNS-rebinding protection, armed with the names in ALLOWED_HOSTS.
    headers = {**MCP_HEADERS, "Authorization": f"Bearer {person.key}", "Origin": "http://rebound.example"}
    with httpx2.Client(base_url=live_url, timeout=10) as http:
        assert http.post("/v1/mcp", json=INITIALIZE, headers=headers).status_code == 403
        same_site = {**headers, "Origin": live_url}
        assert http.post("/v1/mcp", json=INITIALIZE, headers=same_site).status_code == 200


def test_an_origin_on_another_port_of_the_same_host_is_refused(live_url: str, person: Person) -> None:
    # Before: only the host was compared, so a page of another local app (any port) got through.
    port = int(live_url.rsplit(":", 1)[1])
    other = live_url.replace(f":{port}", f":{port + 1 if port < 65535 else port - 1}")
    headers = {**MCP_HEADERS, "Authorization": f"Bearer {person.key}", "Origin": other}
    with httpx2.Client(base_url=live_url, timeout=10) as http:
        for path in ("/v1/mcp", "/v1/mcp/sse"):
            answer = http.post(path, json=INITIALIZE, headers=headers)
            assert answer.status_code == 403, (path, answer.text)
            assert answer.json()["error"]["data"]["code"] == "invalid_origin"
            assert "same scheme, host and port" in answer.json()["error"]["message"]
        https = {**headers, "Origin": live_url.replace("http://", "https://")}
        assert http.post("/v1/mcp", json=INITIALIZE, headers=https).status_code == 403


def test_everything_else_is_django_with_its_static_files(live_url: str) -> None:
    with httpx2.Client(base_url=live_url, timeout=10) as http:
        home = http.get("/")
        login = http.get("/accounts/login/")
        script = http.get("/static/vendor/htmx.min.js")
    assert home.status_code == 302 and "/accounts/login/" in home.headers["location"]
    assert login.status_code == 200 and "csrfmiddlewaretoken" in login.text
    assert script.status_code == 200 and "htmx" in script.text


def test_without_the_lifespan_the_mcp_endpoints_say_what_is_missing(person: Person) -> None:
    from django.core.asgi import get_asgi_application

    from mcp_server.asgi import with_mcp

    # No `with` block: the test client sends no lifespan events, like `uvicorn --lifespan off`.
    client = TestClient(with_mcp(get_asgi_application()), base_url="http://127.0.0.1:8000")
    answer = client.post("/v1/mcp", json=INITIALIZE, headers={"Authorization": f"Bearer {person.key}"})
    assert answer.status_code == 503
    assert "lifespan" in answer.json()["error"]["data"]["message"]


def _raw_request(live_url: str, head: str, body: bytes, *, wait: float = 10.0) -> tuple[int, float, bytes]:
    """Send ``head`` and part of a body over a socket, never the rest; the status of the answer,
    how long it took, and the answer's bytes. No answer within ``wait`` fails the test."""
    host, port = live_url.removeprefix("http://").split(":")
    started = time.monotonic()
    with socket.create_connection((host, int(port)), timeout=wait) as sock:
        sock.sendall(head.replace("\n", "\r\n").encode() + b"\r\n" + body)
        answer = b""
        try:
            while b"}}" not in answer:  # the end of the error body
                chunk = sock.recv(65536)
                if not chunk:
                    break
                answer += chunk
        except TimeoutError:
            if not answer:
                pytest.fail(f"no answer within {wait} s: the server waited for the whole body")
    status = int(answer.split(b" ", 2)[1])
    return status, time.monotonic() - started, answer


def test_an_upload_declared_too_large_is_refused_before_its_body_is_read(
    live_url: str, person: Person, settings: Settings
) -> None:
    # Twelve files of 45 MB, declared: over the ten files of OPENFABLE_MAX_FILE_BYTES a multipart
    # body may carry. The server answers 413 without waiting for them (before: it read the whole
    # body first, 36 s for 450 MB). Only the first kilobyte is ever sent.
    declared = 12 * 45 * 1024 * 1024
    assert declared > settings.MULTIPART_MAX_BYTES
    head = (
        "POST /v1/api/documents HTTP/1.1\nHost: 127.0.0.1\n"
        f"Authorization: Bearer {person.key}\n"
        "Content-Type: multipart/form-data; boundary=xyz\n"
        f"Content-Length: {declared}\n"
    )
    status, seconds, answer = _raw_request(live_url, head, b"--xyz\r\n" + b"a" * 1024)
    assert status == 413 and seconds < 5, (status, seconds)
    assert b'"too_large"' in answer and b"Send fewer or smaller files" in answer


def test_a_chunked_body_is_read_only_until_it_passes_the_limit(
    live_url: str, person: Person, settings: Settings
) -> None:
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 10_000
    chunk = b'{"text": "' + b"a" * 20_000
    head = (
        "POST /v1/api/documents HTTP/1.1\nHost: 127.0.0.1\n"
        f"Authorization: Bearer {person.key}\n"
        "Content-Type: application/json\nTransfer-Encoding: chunked\n"
    )
    # One chunk over the limit, and the body never ends: the answer cannot wait for its end.
    status, _, answer = _raw_request(live_url, head, f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n")
    assert status == 413 and b'"too_large"' in answer
