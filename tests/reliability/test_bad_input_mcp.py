"""Bad input on the MCP tools (real HTTP, the SDK client): an isError result in words, nothing written."""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import pytest
from django.test import override_settings
from mcp_types import CallToolResult

from documents.models import Document
from tests.mcp_server.conftest import Person, connect, live_url, person, run_async
from tests.reliability import INJECTION, ONE_MEGABYTE_QUERY, SCRIPT, SQL, row_counts
from tests.reliability.bad_files import BAD_FILES, assert_failed_cleanly, stored_files

pytestmark = [pytest.mark.django_db(transaction=True)]
__all__ = ["live_url", "person"]  # fixtures, from the MCP tests

SMALL_LIMIT = 100

# (name, tool, arguments, message fragment); all rows run in one session against the live server.
ROWS: list[tuple[str, str, dict[str, Any], str]] = [
    ("empty text", "ingest_document", {"text": ""}, "empty"),
    ("whitespace-only text", "ingest_document", {"text": " \n\t "}, "empty"),
    ("text with NUL", "ingest_document", {"text": "abc\x00def"}, "NUL characters"),
    ("text 10x over the size limit", "ingest_document", {"text": "x" * 1000}, f"the limit is {SMALL_LIMIT}"),
    ("unknown collection", "ingest_document", {"text": "Hi.", "collection": "nope"}, "no collection"),
    ("over-long tag", "ingest_document", {"text": "Hi.", "tags": ["t" * 101]}, "at most 100"),
    ("budget 99", "query", {"query": "facts", "token_budget": 99}, "outside the accepted range"),
    ("budget 32001", "query", {"query": "facts", "token_budget": 32001}, "outside the accepted range"),
    ("budget -5", "query", {"query": "facts", "token_budget": -5}, "outside the accepted range"),
    ("budget 'lots'", "query", {"query": "facts", "token_budget": "lots"}, "token_budget"),
    ("budget '1e3'", "query", {"query": "facts", "token_budget": "1e3"}, "token_budget"),
    ("empty query", "query", {"query": ""}, "The query is empty"),
    ("1 MB query", "query", {"query": ONE_MEGABYTE_QUERY}, "the limit is 4,000"),
    ("query with NUL", "query", {"query": "tide\x00"}, "NUL characters"),
    ("tag filter with NUL", "query", {"query": "facts", "tags": ["a\x00"]}, "NUL characters"),
    ("unknown collection filter", "query", {"query": "facts", "collection": "nope"}, "no collection"),
    ("unknown document filter", "query", {"query": "facts", "documents": [999999]}, "No document"),
    ("unknown document", "get_document", {"document_id": 999999}, "no document"),
    ("unknown document tree", "get_tree", {"document_id": 999999}, "no document"),
    ("unknown node", "get_node", {"node_id": 999999}, "no node"),
    ("unknown job", "job_status", {"job_id": 999999}, "no ingestion job"),
    ("delete an unknown document", "delete_document", {"document_id": 999999}, "no document"),
    ("non-numeric document id", "get_document", {"document_id": "lots"}, "document_id"),
    ("list limit 0", "list_documents", {"limit": 0}, "limit"),
    ("collection '³' (isdigit, not int)", "list_documents", {"collection": "³"}, "no collection"),
    ("ingest into collection '³'", "ingest_document", {"text": "Hi.", "collection": "³"}, "no collection"),
    ("query collection '³'", "query", {"query": "facts", "collection": "³"}, "no collection"),
    ("list tag with NUL", "list_documents", {"tag": "a\x00b"}, "NUL character"),
    ("51 tags", "ingest_document", {"text": "Hi.", "tags": [f"t{i}" for i in range(51)]}, "at most 50"),
    ("tag with NUL", "ingest_document", {"text": "Hi.", "tags": ["a\x00b"]}, "NUL character"),
    (
        "query filtered by 51 tags",
        "query",
        {"query": "facts", "tags": [f"t{i}" for i in range(51)]},
        "Filter by fewer tags",
    ),
    ("list search with NUL", "list_documents", {"search": "a\x00b"}, "NUL character"),
]


def _text(result: CallToolResult) -> str:
    return " ".join(getattr(block, "text", "") for block in result.content)


def test_bad_input_is_an_error_result_in_words_and_writes_nothing(live_url: str, person: Person) -> None:
    before = row_counts()

    async def scenario() -> dict[str, str]:
        failures: dict[str, str] = {}
        async with connect(live_url, "streamable-http", person.key) as client:
            for name, tool, arguments, fragment in ROWS:
                result = await client.call_tool(tool, arguments)
                text = _text(result)
                if not result.is_error or fragment not in text or "Traceback" in text:
                    failures[name] = f"is_error={result.is_error}: {text[:300]}"
        return failures

    with override_settings(MAX_DOCUMENT_BYTES=SMALL_LIMIT):
        failures = run_async(scenario)
    assert failures == {}
    assert row_counts() == before


def test_payloads_and_prompt_injection_are_stored_and_returned_verbatim(
    live_url: str, person: Person
) -> None:
    async def scenario() -> list[dict[str, Any]]:
        answers = []
        async with connect(live_url, "streamable-http", person.key) as client:
            for text, title in [(INJECTION, "Note"), (f"Notes {SQL}", SCRIPT)]:
                added = await client.call_tool(
                    "ingest_document",
                    {"text": text, "title": title, "tags": [SQL], "collection": "volcanoes"},
                )
                assert not added.is_error, _text(added)
                assert isinstance(added.structured_content, dict)
                document_id = added.structured_content["document"]["document_id"]
                got = await client.call_tool("get_document", {"document_id": document_id})
                assert not got.is_error and isinstance(got.structured_content, dict)
                answers.append(got.structured_content)
        return answers

    injected, marked = run_async(scenario)
    assert injected["content"] == INJECTION and set(injected) == set(marked), "text cannot reshape the answer"
    assert (marked["title"], marked["tags"], marked["content"]) == (SCRIPT, [SQL], f"Notes {SQL}")


def test_an_offset_past_the_end_is_an_empty_page(live_url: str, person: Person) -> None:
    """10**20 is past any page (and past PostgreSQL's OFFSET, which would refuse it)."""

    async def scenario() -> CallToolResult:
        async with connect(live_url, "streamable-http", person.key) as client:
            return await client.call_tool("list_documents", {"offset": 10**20})

    result = run_async(scenario)
    assert not result.is_error, _text(result)
    assert isinstance(result.structured_content, dict)
    assert result.structured_content["documents"] == [] and result.structured_content["next_offset"] is None


# -- bad files (issue 21): refused at upload, or accepted and their job fails in words ------------


@pytest.mark.slow
def test_bad_files_are_refused_or_fail_their_job_in_words(
    live_url: str, person: Person, eager_tasks: None, file_storage: Path
) -> None:
    """All in one session: each file sent as base64 with wait=true (the job runs at the commit)."""

    async def scenario() -> dict[str, tuple[bool, str, dict[str, Any]]]:
        answers = {}
        async with connect(live_url, "streamable-http", person.key) as client:
            for bad in BAD_FILES:
                arguments = {
                    "content_base64": base64.b64encode(bad.data()).decode(),
                    "filename": bad.filename,
                    "wait": True,
                }
                with override_settings(**bad.settings):
                    result = await client.call_tool("ingest_document", arguments)
                answers[bad.name] = (result.is_error, _text(result), result.structured_content or {})
        return answers

    answers = run_async(scenario)
    for bad in BAD_FILES:
        is_error, text, answer = answers[bad.name]
        if bad.refused:
            assert is_error and bad.fragment in text and "Traceback" not in text, (bad.name, text)
            assert not Document.objects.filter(source_filename=bad.filename).exists()
            continue
        assert not is_error and answer["job"]["status"] == "failed", (bad.name, text)
        assert bad.fragment in answer["job"]["error"], (bad.name, answer["job"])
        assert_failed_cleanly(answer["document"]["document_id"], bad.fragment)
    assert not [path for path in stored_files(file_storage) if path.suffix == ".doc"]
