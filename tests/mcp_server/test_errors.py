"""The MCP tools map the whole error family once (``mcp_server.tools._answer``): a user's mistake
and a service not answering (a lost database reads as the REST API's 503 error) come back as tool
errors with ``{"error": {"code", "message", "details"}}``; over real HTTP with the SDK's client.
A refusal for too many requests (429) is in test_rate_limit.py."""

from __future__ import annotations

import pytest
from django.db import OperationalError

from tests.mcp_server.conftest import Person, connect, run_async

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_lost_database_and_a_missing_document_are_tool_errors_with_their_codes(
    live_url: str, person: Person, monkeypatch: pytest.MonkeyPatch
) -> None:
    def lost(**kwargs: object) -> None:
        raise OperationalError("terminating connection due to administrator command")

    # The server runs in this process (a thread): its selector loses the database.
    monkeypatch.setattr("documents.selectors.document_list", lost)

    async def scenario() -> None:
        async with connect(live_url, "streamable-http", person.key) as client:
            away = await client.call_tool("list_documents", {})
            missing = await client.call_tool("get_document", {"document_id": 987654})
        assert away.is_error and isinstance(away.structured_content, dict)
        error = away.structured_content["error"]
        assert error["code"] == "database_unavailable" and "Try again in a moment" in error["message"]
        assert "terminating connection" not in str(away.content), "the database's own words stay in the log"
        assert missing.is_error and isinstance(missing.structured_content, dict)
        assert missing.structured_content["error"]["code"] == "not_found"

    run_async(scenario)
