"""MCP and collections shared by invitation (documents.services.sharing): an agent is told of an
offer, and the offered collection stays out of its searches until the person accepts it."""

from __future__ import annotations

from typing import Any

import pytest
from rest_framework.test import APIClient

from openfable.api_tokens import token_create
from tests.factories import CollectionFactory, UserFactory
from tests.mcp_server.conftest import connect, run_async


def _client(user: Any) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {token_create(user=user, name='tests')[1]}")
    return client


@pytest.mark.django_db(transaction=True)
def test_an_agent_is_told_of_an_invitation_but_does_not_search_it(live_url: str) -> None:
    """Through MCP (over HTTP): list_collections names the offer; the collection stays out of reach."""
    owner, member = UserFactory.create(), UserFactory.create()
    CollectionFactory.create(owner=member, slug="mine")
    _client(owner).post("/v1/api/collections", {"name": "Offer", "members": [member.username]}, format="json")
    key = token_create(user=member, name="agent")[1]

    async def scenario() -> tuple[Any, Any]:
        async with connect(live_url, "streamable-http", key) as client:
            listed = await client.call_tool("list_collections", {})
            documents = await client.call_tool("list_documents", {"collection": "offer"})
            return listed.structured_content, documents

    listed, documents = run_async(scenario)
    assert [entry["slug"] for entry in listed["collections"]] == ["mine"]
    assert listed["invitations"] == [{"slug": "offer", "name": "Offer", "invited_by": owner.username}]
    assert documents.is_error and documents.structured_content["error"]["code"] == "not_found"
