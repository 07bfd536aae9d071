"""Files on the REST API: a multipart PDF, Word or HTML upload, its pages on every node and
chunk, and the original downloaded back, only by those who may see the document."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from documents.services.jobs import job_run_now
from tests.api.conftest import People
from tests.documents.ingestion import document_files as files

pytestmark = pytest.mark.django_db

API = "/v1/api"


def _upload(people: People, data: bytes, name: str) -> dict[str, Any]:
    response = people.client(people.owner).post(
        f"{API}/documents",
        {"file": SimpleUploadedFile(name, data), "collection": "volcanoes"},
        format="multipart",
    )
    assert response.status_code == 202, response.json()
    body: dict[str, Any] = response.json()
    return body


def test_a_pdf_upload_answers_at_once_then_its_nodes_carry_their_pages(
    people: People, file_storage: Path
) -> None:
    data = files.report_pdf(pages=3)
    body = _upload(people, data, "report.pdf")
    document = body["document"]
    assert document["status"] == "queued" and document["format"] == "pdf" and body["job"]["stage"] == "queued"
    assert job_run_now(document_id=document["id"]).succeeded  # type: ignore[union-attr]

    member = people.client(people.member)
    shown = member.get(f"{API}/documents/{document['id']}").json()
    assert shown["page_count"] == 3 and "Delivery of Goods" in shown["content"]
    tree = member.get(f"{API}/documents/{document['id']}/tree?flat=true").json()
    assert tree[0]["pages"] == [1, 2, 3]
    section = next(node for node in tree if node["title"] == "3. Payment")
    assert section["pages"] == [3]
    node = member.get(f"{API}/nodes/{section['id']}").json()
    assert node["pages"] == [3] and node["content"].startswith("## 3. Payment")

    found = member.post(
        f"{API}/query", {"query": "When does the buyer pay each invoice?", "token_budget": 120}, format="json"
    ).json()
    assert found["chunks"] and all(chunk["pages"] for chunk in found["chunks"])
    assert all(chunk["pages"] for chunk in found["result"]["chunks"])
    whole = member.post(
        f"{API}/query",
        {"query": "When does the buyer pay each invoice?", "token_budget": 4000},
        format="json",
    ).json()
    assert whole["routing"] == "document_level" and [chunk["pages"] for chunk in whole["chunks"]] == [
        [1, 2, 3]
    ]

    # The original, byte for byte, to the member; a 404 to a stranger.
    original = member.get(shown["original"])
    assert original.status_code == 200 and original["Content-Type"] == "application/pdf"
    assert b"".join(original.streaming_content) == data  # type: ignore[attr-defined]
    assert original["Content-Disposition"] == 'attachment; filename="report.pdf"'
    assert people.client(people.stranger).get(shown["original"]).status_code == 404


def test_a_text_document_downloads_as_its_text_and_has_no_pages(people: People) -> None:
    body = _upload(people, b"# Notes\n\nPlain words.\n", "notes.md")
    assert body["document"]["format"] == "markdown" and body["document"]["page_count"] == 0
    response = people.client(people.owner).get(body["document"]["original"])
    assert response.status_code == 200 and response.content == b"# Notes\n\nPlain words.\n"
    assert response["Content-Type"].startswith("text/markdown")


def test_a_file_named_pdf_that_is_word_is_read_as_word_and_says_so(
    people: People, file_storage: Path
) -> None:
    body = _upload(people, files.heading_docx(), "contract.pdf")
    assert body["document"]["format"] == "docx"
    assert "named as a PDF but its content is a Word" in body["document"]["format_note"]


def test_an_uploaded_html_page_downloads_as_an_attachment_never_rendered(
    people: People, file_storage: Path
) -> None:
    body = _upload(people, files.ARTICLE_PAGE, "page.html")
    response = people.client(people.owner).get(body["document"]["original"])
    assert response["Content-Disposition"].startswith("attachment")
    assert response["X-Content-Type-Options"] == "nosniff"
