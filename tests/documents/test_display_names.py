"""Document titles and file names lose their control and formatting characters in one place
(``documents.services.document_input``, through ``openfable.display_text``) whichever surface sent
them: the REST API, the corpus page, the command line (here) and MCP
(tests/mcp_server/test_files.py). ``invoice_<RLO>fdp.exe`` is stored, shown and downloaded as
``invoice_fdp.exe``, never as a name that reads ".pdf" and saves as ".exe"; a NUL is dropped
instead of failing at the database."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client
from rest_framework.test import APIClient

from documents.files import download_name
from documents.models import Document
from documents.services.documents import document_create, document_update
from tests.cli import run_openfable
from tests.documents.ingestion import document_files as files
from tests.factories import CollectionFactory, UserFactory

pytestmark = pytest.mark.django_db
DISGUISED = "invoice_\u202efdp.exe"  # reads "invoice_exe.pdf" on a page
CLEAN = "invoice_fdp.exe"


def test_the_service_cleans_a_file_name_and_a_title(file_storage: Path) -> None:
    document = document_create(
        collection=CollectionFactory.create(),
        content=files.report_pdf(pages=1),
        title="Q3\u202e report\x00\x07",
        source_filename=f"\x00{DISGUISED}\x00",
        queue=False,
    ).document
    document.refresh_from_db()
    assert (document.title, document.source_filename) == ("Q3 report", CLEAN)
    assert str(document.original.name).endswith(CLEAN)
    document_update(document=document, title="Renamed\u2067 again\u2069")
    document.refresh_from_db()
    assert document.title == "Renamed again"


def test_a_title_taken_from_the_file_name_or_first_line_is_clean() -> None:
    collection = CollectionFactory.create()
    named = document_create(collection=collection, content=b"Tides.", source_filename=DISGUISED, queue=False)
    assert named.document.title == "invoice_fdp"
    first_line = document_create(collection=collection, content="\u202eTide\u200b tables\nText.", queue=False)
    assert first_line.document.title == "Tide tables"


def test_the_rest_api_stores_and_downloads_the_clean_name(file_storage: Path) -> None:
    owner = UserFactory.create()
    CollectionFactory.create(owner=owner, slug="bills")
    client = APIClient()
    client.force_authenticate(owner)
    answer = client.post(
        "/v1/api/documents",
        {"file": SimpleUploadedFile(DISGUISED, files.report_pdf(pages=1)), "collection": "bills"},
        format="multipart",
    )
    assert answer.status_code == 202, answer.content
    body = answer.json()["document"]
    assert body["source_filename"] == CLEAN and "\u202e" not in body["title"]
    download = client.get(f"/v1/api/documents/{body['document_id']}/original")
    assert download.status_code == 200
    assert f'filename="{CLEAN}"' in download["Content-Disposition"]


def test_the_corpus_page_stores_the_clean_name(file_storage: Path) -> None:
    owner = UserFactory.create()
    collection = CollectionFactory.create(owner=owner)
    client = Client()
    client.force_login(owner)
    response = client.post(
        "/",
        {
            "collection": collection.slug,
            "uploads": [SimpleUploadedFile(DISGUISED, files.report_pdf(pages=1))],
        },
    )
    assert response.status_code == 302, response.content.decode()[-2000:]
    assert Document.objects.get(collection=collection).source_filename == CLEAN


def test_the_command_line_stores_the_clean_name(tmp_path: Path, file_storage: Path) -> None:
    path = tmp_path / "notes\u202etxt.md"
    path.write_text("# Notes\n\nTides turn twice a day.\n")
    status, answer = run_openfable("index", str(path))
    assert status == 0, answer
    (entry,) = answer["documents"]
    assert entry["source_filename"] == "notestxt.md" and entry["title"] == "notestxt"


def test_a_name_stored_before_the_cleaning_downloads_clean() -> None:
    document: Any = Document(source_filename=DISGUISED, title="x", format=Document.Format.PDF)
    assert download_name(document) == CLEAN
