"""The real ASGI app (Django + MCP) served by uvicorn on a loopback port, and MCP SDK clients for it.

The server runs in a thread of this process, so it reads and writes the test database; tests
that use it are ``django_db(transaction=True)``: the server's threads see only committed rows.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import anyio
import httpx2
import pytest
import uvicorn
from mcp import Client
from mcp.client.sse import sse_client
from mcp.client.streamable_http import streamable_http_client

from documents.models import Collection
from mcp_server.sync import run_sync
from openfable.api_tokens import token_create, token_revoke
from tests.factories import CollectionFactory, UserFactory

# Each transport with the SDK's default negotiation (the 2026-07-28 protocol) and with the
# initialize handshake of earlier clients ("-legacy").
TRANSPORTS = ["streamable-http", "streamable-http-legacy", "sse", "sse-legacy"]

GUIDE = (
    "# Field guide\n\nA short guide to volcanoes and their eruptions.\n\n"
    "## Formation\n\nVolcanoes form where magma reaches the surface. Most sit on plate boundaries.\n\n"
    "## Eruptions\n\nShield volcanoes erupt gently. Stratovolcanoes erupt explosively and build steep cones.\n"
)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture(scope="module")
def live_url(django_db_setup: None) -> Iterator[str]:
    """The base URL of ``with_mcp(get_asgi_application())`` under uvicorn, lifespan on."""
    from django.core.asgi import get_asgi_application

    from mcp_server.asgi import with_mcp

    port = _free_port()
    config = uvicorn.Config(
        with_mcp(get_asgi_application()),
        host="127.0.0.1",
        port=port,
        lifespan="on",
        log_level="warning",
        timeout_graceful_shutdown=2,
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, name="uvicorn-mcp-tests", daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("uvicorn did not start")
        time.sleep(0.05)
    yield f"http://127.0.0.1:{port}"
    server.should_exit = True
    thread.join(timeout=15)


@dataclass
class Person:
    """A user with a collection of their own and an API token."""

    user: Any
    collection: Collection
    token: Any
    key: str

    async def revoke(self) -> None:
        # From the event loop: through run_sync, which closes the thread's connection after.
        await run_sync(token_revoke, token=self.token)


@pytest.fixture
def person(transactional_db: None) -> Person:
    user = UserFactory.create()
    collection = CollectionFactory.create(name="Volcanoes", slug="volcanoes", owner=user)
    token, key = token_create(user=user, name="mcp tests")
    return Person(user=user, collection=collection, token=token, key=key)


@asynccontextmanager
async def connect(base_url: str, transport: str, key: str | None) -> AsyncIterator[Client]:
    """An MCP SDK client over real HTTP; ``key`` goes in ``Authorization: Bearer``."""
    headers = {"Authorization": f"Bearer {key}"} if key is not None else {}
    mode = "legacy" if transport.endswith("-legacy") else "auto"
    if transport.startswith("sse"):
        sse = sse_client(f"{base_url}/v1/mcp/sse", headers=headers, timeout=30)
        async with Client(sse, mode=mode) as client:
            yield client
        return
    async with (
        httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30, read=300)) as http,
        Client(streamable_http_client(f"{base_url}/v1/mcp", http_client=http), mode=mode) as client,
    ):
        yield client


def run_async(function: Any, *args: Any) -> Any:
    """``anyio.run(function, *args)`` on a thread of its own.

    Playwright's sync API (the browser tests, earlier in the same session) keeps an event loop
    running on the main thread, and a loop cannot be started inside another: a fresh thread has none.
    """
    outcome: dict[str, Any] = {}

    def target() -> None:
        try:
            outcome["value"] = anyio.run(function, *args)
        except BaseException as error:  # re-raised on the caller's thread, assertion errors included
            outcome["error"] = error

    thread = threading.Thread(target=target, name="mcp-test-client")
    thread.start()
    thread.join()
    if "error" in outcome:
        raise outcome["error"]
    return outcome.get("value")
