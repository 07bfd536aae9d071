"""Every MCP tool declares what it answers (``mcp_server.schemas`` as its outputSchema), in the
fields the REST API's serializers declare for the same entities; and arguments that do not fit a
tool's input schema come back as the structured error every other mistake is, over real HTTP with
the SDK's client (which also checks each answer against the tool's outputSchema)."""

from __future__ import annotations

from typing import Any

import pytest

from api.serializers import (
    CollectionSerializer,
    DocumentMetaSerializer,
    DocumentSerializer,
    JobSerializer,
    JobStepSerializer,
    NodeSerializer,
    TreeNodeSerializer,
)
from mcp_server.tools import TOOL_NAMES
from tests.mcp_server.conftest import GUIDE, Person, connect, run_async

pytestmark = pytest.mark.django_db(transaction=True)


def _tools(live_url: str, key: str) -> dict[str, Any]:
    async def listing() -> dict[str, Any]:
        async with connect(live_url, "streamable-http", key) as client:
            return {tool.name: tool for tool in (await client.list_tools()).tools}

    tools: dict[str, Any] = run_async(listing)
    return tools


def _properties(schema: dict[str, Any], name: str | None = None) -> set[str]:
    found = schema["$defs"][name] if name else schema
    return set(found["properties"])


def test_every_tool_declares_the_fields_it_answers(live_url: str, person: Person) -> None:
    tools = _tools(live_url, person.key)
    assert sorted(tools) == sorted(TOOL_NAMES)
    for name, tool in tools.items():
        schema = tool.output_schema
        assert schema["type"] == "object" and schema["properties"], name
        assert schema["required"], f"{name} says which fields are always there"
        if name != "query":  # the query's report grows with its retrieval paths (mcp_server.schemas)
            assert schema["additionalProperties"] is False, name

    # The entities: the REST API's fields (its schema), field for field; the REST API adds only
    # `original`, its link to the file.
    document = tools["get_document"].output_schema
    assert _properties(document) | {"original"} == set(DocumentSerializer().fields)
    page = tools["list_documents"].output_schema
    assert _properties(page, "DocumentEntry") | {"original"} == set(DocumentMetaSerializer().fields)
    assert _properties(tools["get_node"].output_schema) == set(NodeSerializer().fields)
    job = tools["job_status"].output_schema
    assert _properties(job) == set(JobSerializer().fields)
    assert _properties(job, "JobStep") == set(JobStepSerializer().fields)
    collections = tools["list_collections"].output_schema
    assert _properties(collections, "Collection") == set(CollectionSerializer().fields)
    tree = tools["get_tree"].output_schema
    assert _properties(tree, "TreeNode") == set(TreeNodeSerializer().fields)
    assert _properties(page) == {
        "count",
        "offset",
        "limit",
        "next_offset",
        "documents",
    }
    assert {"chunks", "documents", "routing", "result"} <= set(tools["query"].output_schema["required"])


def test_answers_fit_their_schemas_and_bad_arguments_are_structured_errors(
    live_url: str, person: Person, eager_tasks: None
) -> None:
    async def scenario() -> dict[str, Any]:
        async with connect(live_url, "streamable-http", person.key) as client:
            # The SDK's client checks each answer against the tool's outputSchema (closed schemas:
            # a field the schema does not declare fails the call).
            added = await client.call_tool("ingest_document", {"text": GUIDE, "wait": True})
            document_id = added.structured_content["document"]["id"]
            answers = {
                "added": added,
                "document": await client.call_tool("get_document", {"document_id": document_id}),
                "tree": await client.call_tool("get_tree", {"document_id": document_id}),
                "page": await client.call_tool("list_documents", {"limit": 1}),
                "budget": await client.call_tool("query", {"query": "lava", "token_budget": "lots"}),
                "mode": await client.call_tool("query", {"query": "lava", "mode": "bogus"}),
                "both": await client.call_tool(
                    "list_documents", {"limit": 0, "status": "lost", "offset": "first"}
                ),
            }
        return answers

    answers = run_async(scenario)
    for name in ("added", "document", "tree", "page"):
        assert not answers[name].is_error, answers[name].content
    assert answers["tree"].structured_content["nodes"][0]["kind"] == "root"

    budget = answers["budget"]
    assert budget.is_error and budget.structured_content is not None
    error = budget.structured_content["error"]
    assert error["code"] == "invalid" and list(error["details"]) == ["token_budget"]
    assert error["message"].startswith("The arguments of query are not valid (token_budget: ")
    assert budget.content[0].text == error["message"], "the text says the same, for a model that reads it"

    mode = answers["mode"].structured_content["error"]
    assert mode["code"] == "invalid" and list(mode["details"]) == ["mode"]
    assert "'bipath'" in mode["details"]["mode"][0]

    both = answers["both"].structured_content["error"]
    assert sorted(both["details"]) == ["limit", "offset", "status"], "every field it refused"
