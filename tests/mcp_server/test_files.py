"""Files through MCP: ingest_document with content_base64 and filename, pages on nodes and chunks."""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from tests.documents.ingestion import document_files as files
from tests.mcp_server.conftest import Person, connect, run_async

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]


async def _call(client: Client, tool: str, **arguments: Any) -> dict[str, Any]:
    result = await client.call_tool(tool, arguments)
    assert not result.is_error, result.content
    assert isinstance(result.structured_content, dict)
    return result.structured_content


def _text(result: Any) -> str:
    return " ".join(getattr(block, "text", "") for block in result.content)


def test_a_pdf_sent_as_base64_is_indexed_with_its_pages(
    live_url: str, person: Person, eager_tasks: None, file_storage: Path
) -> None:
    data = base64.b64encode(files.report_pdf(pages=3)).decode()

    async def scenario() -> None:
        async with connect(live_url, "streamable-http", person.key) as client:
            added = await _call(
                client, "ingest_document", content_base64=data, filename="report.pdf", wait=True
            )
            document = added["document"]
            assert added["job"]["status"] == "succeeded", added["job"]
            assert document["format"] == "pdf" and document["page_count"] == 3
            assert document["title"] == "report"
            tree = await _call(client, "get_tree", document_id=document["document_id"], flat=True)
            payment = next(node for node in tree["nodes"] if node["title"] == "3. Payment")
            assert payment["pages"] == [3]
            node = await _call(client, "get_node", node_id=payment["id"])
            assert node["pages"] == [3]
            found = await _call(
                client, "query", query="When does the buyer pay each invoice?", token_budget=150
            )
            assert found["chunks"] and all(chunk["pages"] for chunk in found["chunks"])

    run_async(scenario)


def test_bad_files_come_back_as_tool_errors_in_words(
    live_url: str, person: Person, file_storage: Path
) -> None:
    async def scenario() -> None:
        async with connect(live_url, "streamable-http", person.key) as client:
            not_base64 = await client.call_tool(
                "ingest_document", {"content_base64": "%%% not base64 %%%", "filename": "a.pdf"}
            )
            assert not_base64.is_error and "not valid base64" in _text(not_base64)
            nameless = await client.call_tool(
                "ingest_document", {"content_base64": base64.b64encode(b"%PDF-1.7").decode()}
            )
            assert nameless.is_error and "file's name" in _text(nameless)
            old_word = await client.call_tool(
                "ingest_document",
                {
                    "content_base64": base64.b64encode(
                        b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + b"\0" * 64
                    ).decode(),
                    "filename": "old.doc",
                },
            )
            assert old_word.is_error and "save it as .docx or PDF" in _text(old_word)

    run_async(scenario)


def test_a_file_name_with_nul_and_a_right_to_left_override_is_stored_clean(
    live_url: str, person: Person, file_storage: Path
) -> None:
    """Before: a NUL in the filename failed at the database (an unhandled error with its
    traceback), and a right-to-left override survived into the name a download saves under."""
    data = base64.b64encode(b"# Invoice\n\nPay within thirty days.\n").decode()

    async def scenario() -> None:
        async with connect(live_url, "streamable-http", person.key) as client:
            added = await _call(
                client, "ingest_document", content_base64=data, filename="invoice_\u202efdp.exe\x00.md"
            )
            assert added["document"]["source_filename"] == "invoice_fdp.exe.md"
            assert added["document"]["title"] == "invoice_fdp.exe"
            titled = await _call(
                client, "ingest_document", text="Tides turn twice a day.", title="Tide\u202e\x00 tables\u200b"
            )
            assert titled["document"]["title"] == "Tide tables"

    run_async(scenario)
