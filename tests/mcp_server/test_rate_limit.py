"""One request rate per user across the REST API and the MCP tools, over real HTTP against the ASGI
app (uvicorn): calls on either count against the other, and a throttled MCP call is a tool error
saying when to try again."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx2
import pytest
from django.core.cache import caches
from pytest_django.fixtures import Settings

from tests.mcp_server.conftest import Person, connect, run_async

pytestmark = pytest.mark.django_db(transaction=True)

RATE = 3


@pytest.fixture
def slow_person(person: Person, settings: Settings) -> Iterator[Person]:
    settings.API_THROTTLE_RATES = {person.user.username: f"{RATE}/minute"}
    counts = caches["rate_limit"]  # shared by the server's thread and this one
    counts.clear()
    yield person
    counts.clear()


def _rest(live_url: str, person: Person) -> int:
    with httpx2.Client(base_url=live_url, timeout=30) as http:
        answer = http.get("/v1/api/documents", headers={"Authorization": f"Bearer {person.key}"})
    return int(answer.status_code)


def _mcp_calls(live_url: str, person: Person, count: int) -> list[Any]:
    async def scenario() -> list[Any]:
        async with connect(live_url, "streamable-http", person.key) as client:
            return [await client.call_tool("list_collections", {}) for _ in range(count)]

    return list(run_async(scenario))


def test_rest_requests_count_against_mcp_calls(live_url: str, slow_person: Person) -> None:
    assert [_rest(live_url, slow_person) for _ in range(RATE)] == [200] * RATE
    assert _rest(live_url, slow_person) == 429
    (throttled,) = _mcp_calls(live_url, slow_person, 1)
    assert throttled.is_error, "MCP answered while the same user is throttled on REST"
    error = throttled.structured_content["error"]
    assert error["code"] == "throttled" and error["details"]["retry_after_seconds"] > 0
    assert "Try again in" in throttled.content[0].text and "every surface together" in error["message"]


def test_mcp_calls_count_against_rest_requests(live_url: str, slow_person: Person) -> None:
    answers = _mcp_calls(live_url, slow_person, RATE + 1)
    assert [answer.is_error for answer in answers] == [False] * RATE + [True]
    refused = _rest(live_url, slow_person)
    assert refused == 429, "the REST API answered while the same user is throttled on MCP"
