"""The MCP tools over real HTTP, with the SDK's own client, on both transports."""

from __future__ import annotations

from typing import Any

import pytest
from mcp import Client
from mcp_types import CallToolResult

from documents.services.documents import document_create
from documents.services.jobs import job_run_now
from mcp_server.tools import TOOL_NAMES
from tests.mcp_server.conftest import GUIDE, TRANSPORTS, Person, connect, run_async

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]


async def _call(client: Client, tool: str, **arguments: Any) -> dict[str, Any]:
    result = await client.call_tool(tool, arguments)
    assert not result.is_error, _text(result)
    assert isinstance(result.structured_content, dict)
    return result.structured_content


def _text(result: CallToolResult) -> str:
    return " ".join(getattr(block, "text", "") for block in result.content)


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_lists_every_tool_with_a_description_and_schema(
    live_url: str, person: Person, transport: str
) -> None:
    async def scenario() -> None:
        async with connect(live_url, transport, person.key) as client:
            tools = {tool.name: tool for tool in (await client.list_tools()).tools}
        assert sorted(tools) == sorted(TOOL_NAMES)
        assert all(tool.description and tool.input_schema["type"] == "object" for tool in tools.values())
        assert tools["query"].input_schema["required"] == ["query"]
        assert tools["delete_document"].annotations is not None
        assert tools["delete_document"].annotations.destructive_hint is True

    run_async(scenario)


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_ingest_with_wait_returns_it_indexed_and_query_finds_it(
    live_url: str, person: Person, transport: str, eager_tasks: None
) -> None:
    async def scenario() -> None:
        async with connect(live_url, transport, person.key) as client:
            added = await _call(
                client, "ingest_document", text=GUIDE, collection="volcanoes", tags=["geology"], wait=True
            )
            document = added["document"]
            assert added["created"] is True
            assert document["status"] == "indexed" and document["node_count"] > 3
            assert document["collection"] == "volcanoes" and document["tags"] == ["geology"]
            assert added["job"]["status"] == "succeeded" and added["job"]["finished"] is not None

            found = await _call(client, "query", query="How do shield volcanoes erupt?", token_budget=200)
            assert found["chunks"], found
            assert found["total_tokens"] <= 200
            assert any("Shield volcanoes erupt gently" in chunk["content"] for chunk in found["chunks"])
            assert all(chunk["document_id"] == document["document_id"] for chunk in found["chunks"])
            assert "text" not in found["result"]["chunks"][0], "each passage is sent once"
            assert found["result"]["paths_run"]

            again = await _call(client, "ingest_document", text=GUIDE, collection="volcanoes")
            assert again["created"] is False and again["job"] is None
            assert again["document"]["document_id"] == document["document_id"]

    run_async(scenario)


def test_reading_tools_answer_what_the_rest_api_would(
    live_url: str, person: Person, eager_tasks: None
) -> None:
    async def scenario() -> None:
        async with connect(live_url, "streamable-http", person.key) as client:
            added = await _call(client, "ingest_document", text=GUIDE, title="Guide", wait=True)
            document_id = added["document"]["document_id"]

            listed = await _call(client, "list_documents", status="indexed")
            assert listed["count"] == 1 and listed["documents"][0]["document_id"] == document_id
            assert "content" not in listed["documents"][0]
            collections = await _call(client, "list_collections")
            assert {entry["slug"] for entry in collections["collections"]} >= {"volcanoes"}

            whole = await _call(client, "get_document", document_id=document_id)
            assert whole["content"] == GUIDE and whole["latest_job"]["status"] == "succeeded"
            meta = await _call(client, "get_document", document_id=document_id, meta_only=True)
            assert "content" not in meta

            nested = await _call(client, "get_tree", document_id=document_id)
            (root,) = nested["nodes"]
            assert root["kind"] == "root" and root["children"]
            flat = await _call(client, "get_tree", document_id=document_id, flat=True)
            leaf = next(node for node in flat["nodes"] if node["kind"] == "leaf")
            node = await _call(client, "get_node", node_id=leaf["id"])
            assert node["content"] == GUIDE[leaf["start_char"] : leaf["end_char"]]

            job = await _call(client, "job_status", job_id=added["job"]["id"])
            assert job["status"] == "succeeded" and job["node_count"] == len(flat["nodes"])

            deleted = await _call(client, "delete_document", document_id=document_id)
            assert deleted["deleted"] is True
            gone = await client.call_tool("get_document", {"document_id": document_id})
            assert gone.is_error

    run_async(scenario)


@pytest.mark.parametrize("transport", ["streamable-http", "sse"])
def test_agent_path_saves_the_agents_own_tree(live_url: str, person: Person, transport: str) -> None:
    async def scenario() -> None:
        async with connect(live_url, transport, person.key) as client:
            planned = await _call(client, "plan_document", text=GUIDE, collection="volcanoes", title="Guide")
            document_id = planned["document_id"]
            assert planned["created"] is True and planned["status"] == "queued"
            assert "apply_chunks" in planned["instructions"]["next"]
            assert "markers_file" not in planned["instructions"]

            chunked = await _call(
                client,
                "apply_chunks",
                document_id=document_id,
                markers=["# Field guide", "## Formation", "## Eruptions"],
            )
            assert chunked["chunk_count"] == 3
            assert "apply_tree" in chunked["instructions"]["next"]
            assert chunked["instructions"]["tree_schema"]["required"] == ["title", "summary", "sections"]

            tree = {
                "title": "Field guide to volcanoes",
                "summary": "How volcanoes form and how they erupt.",
                "sections": [
                    {
                        "title": "Introduction",
                        "summary": "What the guide covers.",
                        "chunks": [0],
                        "sections": [],
                    },
                    {
                        "title": "Formation",
                        "summary": "Magma reaching the surface at plate boundaries.",
                        "chunks": [1],
                        "sections": [],
                    },
                    {
                        "title": "Eruptions",
                        "summary": "Gentle shield volcanoes and explosive stratovolcanoes.",
                        "chunks": [2],
                        "sections": [],
                    },
                ],
            }
            saved = await _call(client, "apply_tree", document_id=document_id, tree=tree)
            assert saved["status"] == "indexed" and saved["builder"] == "agent"
            assert saved["leaves"] == 3
            assert [section["title"] for section in saved["sections"]] == [
                "Introduction",
                "Formation",
                "Eruptions",
            ]

            found = await _call(client, "query", query="explosive stratovolcanoes", documents=[document_id])
            assert any("Stratovolcanoes erupt explosively" in chunk["content"] for chunk in found["chunks"])

    run_async(scenario)


def test_user_errors_come_back_as_tool_errors_with_the_services_message(
    live_url: str, person: Person
) -> None:
    async def scenario() -> None:
        async with connect(live_url, "streamable-http", person.key) as client:
            missing = await client.call_tool("get_document", {"document_id": 987654})
            assert missing.is_error
            assert "There is no document 987654" in _text(missing)
            assert missing.structured_content == {
                "error": {"code": "not_found", "message": _text(missing), "details": {}}
            }

            budget = await client.call_tool("query", {"query": "volcanoes", "token_budget": 5})
            assert budget.is_error and "token budget" in _text(budget).lower()

            empty = await client.call_tool("ingest_document", {"text": "   "})
            assert empty.is_error and "empty" in _text(empty)

            planned = await _call(client, "plan_document", text=GUIDE)
            document_id = planned["document_id"]
            early = await client.call_tool("apply_tree", {"document_id": document_id, "tree": {"title": "x"}})
            assert early.is_error and "call apply_chunks" in _text(early).lower()

            wrong = await client.call_tool(
                "apply_chunks", {"document_id": document_id, "markers": ["## Nowhere in the text"]}
            )
            assert wrong.is_error and _text(wrong).endswith(
                f"Fix that marker and apply the markers again. Next: Call apply_chunks with "
                f"document_id={document_id} and markers: the opening words of each chunk, in document order."
            )
            assert wrong.structured_content is not None
            assert wrong.structured_content["error"]["details"]["next_step"] == "apply_chunks"
            assert "Traceback" not in _text(wrong)

            await _call(client, "apply_chunks", document_id=document_id, markers=["## Formation"])
            bad_tree = await client.call_tool(
                "apply_tree",
                {"document_id": document_id, "tree": {"title": "T", "summary": "S", "sections": []}},
            )
            assert bad_tree.is_error and "Fix the tree and apply it again. Next: Call apply_tree" in _text(
                bad_tree
            )

    run_async(scenario)


def test_agent_steps_on_a_document_another_builder_made_are_refused(live_url: str, person: Person) -> None:
    document = document_create(
        collection=person.collection, content=GUIDE, builder="structural", queue=False
    ).document
    run = job_run_now(document_id=document.pk)
    assert run is not None and run.succeeded

    async def scenario() -> None:
        async with connect(live_url, "streamable-http", person.key) as client:
            refused = await client.call_tool(
                "apply_chunks", {"document_id": document.pk, "markers": ["## Formation"]}
            )
            assert refused.is_error
            assert f"Document {document.pk} is not in the agent path" in _text(refused)
            assert "structural builder" in _text(refused) and "Next: Call plan_document" in _text(refused)
            assert refused.structured_content is not None
            assert refused.structured_content["error"]["code"] == "not_in_agent_path"
            early = await client.call_tool("apply_tree", {"document_id": document.pk, "tree": {"title": "x"}})
            assert early.is_error and "not in the agent path" in _text(early)
            # Planning the same text hands that document to the agent; its steps then run.
            planned = await _call(client, "plan_document", text=GUIDE, collection="volcanoes")
            assert planned["document_id"] == document.pk and planned["created"] is False
            chunked = await _call(client, "apply_chunks", document_id=document.pk, markers=["## Formation"])
            assert chunked["chunk_count"] == 2

    run_async(scenario)
    document.refresh_from_db()
    assert "agent" not in document.metadata and document.builder == "structural"


def test_a_strangers_documents_read_as_absent(live_url: str, person: Person, eager_tasks: None) -> None:
    from openfable.api_tokens import token_create
    from tests.factories import UserFactory

    _, stranger_key = token_create(user=UserFactory.create(), name="stranger")

    async def scenario() -> None:
        async with connect(live_url, "streamable-http", person.key) as client:
            added = await _call(client, "plan_document", text=GUIDE, collection="volcanoes")
        async with connect(live_url, "streamable-http", stranger_key) as client:
            hidden = await client.call_tool("get_document", {"document_id": added["document_id"]})
            assert hidden.is_error and "There is no document" in _text(hidden)
            listed = await _call(client, "list_documents")
            assert listed["count"] == 0
            foreign = await client.call_tool("ingest_document", {"text": GUIDE, "collection": "volcanoes"})
            assert foreign.is_error and "no collection" in _text(foreign)

    run_async(scenario)


def test_a_crash_is_reported_without_its_text_or_traceback(
    live_url: str, person: Person, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(**_: Any) -> None:
        raise RuntimeError("secret connection string postgres://x:y@db")

    monkeypatch.setattr("mcp_server.actions.retrieve", broken)

    async def scenario() -> None:
        async with connect(live_url, "streamable-http", person.key) as client:
            crashed = await client.call_tool("query", {"query": "volcanoes"})
        assert crashed.is_error
        assert _text(crashed) == "Error executing tool query"

    run_async(scenario)
