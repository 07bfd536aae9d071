"""The MCP query tool takes ``top_k`` and ``order`` as POST /query does, and refuses both limits
at once in the same words."""

from __future__ import annotations

import pytest
from mcp import Client

from documents.services.documents import document_create
from documents.services.jobs import job_run_now
from tests.mcp_server.conftest import GUIDE, Person, connect, run_async

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]


def test_query_with_top_k_by_score_and_both_limits_refused(live_url: str, person: Person) -> None:
    document = document_create(
        collection=person.collection, content=GUIDE, title="Guide", queue=False
    ).document
    assert (run := job_run_now(document_id=document.pk)) is not None and run.succeeded

    async def scenario(client: Client) -> None:
        found = await client.call_tool(
            "query", {"query": "How do volcanoes erupt?", "top_k": 2, "order": "score"}
        )
        assert not found.is_error
        answer = found.structured_content
        assert isinstance(answer, dict)
        assert len(answer["chunks"]) == 2 and answer["result"]["top_k"] == 2
        assert answer["chunks"][0]["score"] >= answer["chunks"][1]["score"]
        assert answer["documents"][0]["document_id"] == document.pk and "tags" in answer["documents"][0]

        both = await client.call_tool("query", {"query": "volcanoes", "top_k": 2, "token_budget": 500})
        assert both.is_error
        assert "Send token_budget or top_k, not both" in " ".join(
            getattr(b, "text", "") for b in both.content
        )

    async def connected() -> None:
        async with connect(live_url, "streamable-http", person.key) as client:
            await scenario(client)

    run_async(connected)
