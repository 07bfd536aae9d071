"""Scanned PDFs through the one write path: the job reads their pages by OCR (the real Tesseract),
the text is found by a query, the original downloads byte for byte, a passage is marked on its
page's picture, every surface says the text was recognised, and OCR off keeps the old refusal."""

from __future__ import annotations

import re
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from django.test import Client
from django.urls import reverse
from django.utils import timezone
from rest_framework.test import APIClient

from documents.models import Document, IngestionJob, Node
from documents.presenters import document_present
from documents.services.documents import document_create, document_delete
from documents.services.extracting import document_extract
from documents.services.jobs import job_run_now
from openfable.api_tokens import token_create
from retrieval.services import retrieve
from tests.documents.ingestion.scans import (
    LEFT,
    SCANNED_PAGES,
    TYPED_PAGE,
    WIDTH,
    line_top,
    mixed_pdf,
    require_tesseract,
    scanned_pdf,
)
from tests.factories import CollectionFactory, UserFactory

pytestmark = [pytest.mark.django_db, pytest.mark.slow]


@pytest.fixture(autouse=True)
def _tesseract() -> None:
    require_tesseract()


def _words(text: str) -> str:
    return " ".join(re.findall(r"[a-z]+", text.lower()))


def _upload(data: bytes, filename: str, owner: Any = None) -> Document:
    collection = CollectionFactory.create(owner=owner or UserFactory.create())
    return document_create(
        collection=collection, content=data, source_filename=filename, queue=False
    ).document


def _indexed(data: bytes, filename: str, owner: Any = None) -> Document:
    document = _upload(data, filename, owner)
    run = job_run_now(document_id=document.pk)
    assert run is not None and run.succeeded, run and run.job.error
    document.refresh_from_db()
    return document


def test_a_scanned_pdf_is_read_by_ocr_and_found_by_a_query(file_storage: Path) -> None:
    owner = UserFactory.create()
    data = scanned_pdf()
    document = _indexed(data, "harvest.pdf", owner)
    assert document.recognised_pages == [1, 2, 3]
    assert [span[0] for span in document.page_spans] == [1, 2, 3]
    for lines in SCANNED_PAGES:
        assert all(_words(line) in _words(document.content) for line in lines), document.content
    assert document.text_layer and Path(document.text_layer.path).is_file()

    result = retrieve(query="How did the reservoirs affect irrigation spending?", token_budget=200)
    hit = next(chunk for chunk in result.chunks if "reservoirs" in chunk.text)
    assert hit.document_id == document.pk and 2 in hit.pages
    # The page map places the recognised text: the sentence on page 2 lies on page 2.
    start = document.content.index("reservoirs")
    assert document.pages_of(start, start + len("reservoirs")) == [2]

    # The original is what was uploaded, byte for byte; the OCR's PDF is only read from.
    client = Client()
    client.force_login(owner)
    download = client.get(reverse("documents:original", args=[document.pk]))
    assert b"".join(download.streaming_content) == data  # type: ignore[attr-defined]


def test_a_passage_read_by_ocr_is_marked_where_it_is_on_the_page_picture(
    file_storage: Path, django_capture_on_commit_callbacks: Any
) -> None:
    owner = UserFactory.create()
    document = _indexed(scanned_pdf(), "harvest.pdf", owner)
    leaf = next(
        node for node in Node.objects.filter(document=document, kind="leaf") if "reservoirs" in node.content
    )
    client = Client()
    client.force_login(owner)
    page = client.get(f"{reverse('documents:detail', args=[document.pk])}?node={leaf.pk}").content.decode()
    assert f'src="{reverse("documents:page-image", args=[document.pk, 2])}"' in page
    boxes = [
        tuple(float(value) for value in match)
        for match in re.findall(r'<rect x="([\d.]+)" y="([\d.]+)" width="([\d.]+)" height="([\d.]+)"/>', page)
    ]
    # The words of page 2 where they were drawn on its picture: every box on one of the lines
    # (within the letters' ascent), every line marked, each starting at the left margin.
    drawn = [line_top(row) for row in range(len(SCANNED_PAGES[1]))]
    lines: dict[int, list[float]] = {}
    for left, top, _, _ in boxes:
        row = min(range(len(drawn)), key=lambda row: abs(top - drawn[row]))
        assert abs(top - drawn[row]) < 0.015, (top, drawn)
        lines.setdefault(row, []).append(left)
    assert sorted(lines) == [0, 1, 2], boxes
    assert all(abs(min(lefts) - LEFT / WIDTH) < 0.01 for lefts in lines.values()), boxes
    assert "was recognised from the page images (OCR)" in page

    layer = Path(document.text_layer.path)
    with django_capture_on_commit_callbacks(execute=True):
        document_delete(document=document)
    assert not layer.exists(), "the text layer goes with its document"


def test_a_typed_pdf_with_a_scanned_page_gets_both(file_storage: Path, admin_client: Client) -> None:
    document = _indexed(mixed_pdf(), "letter.pdf")
    assert document.recognised_pages == [2]
    (first, _, first_end), (second, second_start, second_end) = document.page_spans
    assert (first, second) == (1, 2)
    assert all(line in document.content[:first_end] for line in TYPED_PAGE)
    scanned = _words(document.content[second_start:second_end])
    assert all(_words(line) in scanned for line in SCANNED_PAGES[0]), scanned
    presented = document_present(document)
    assert presented["recognised_pages"] == [2]
    assert presented["ocr_note"].startswith("The text of page 2 was recognised")
    admin_page = admin_client.get(reverse("admin:documents_document_change", args=[document.pk]))
    assert "The text of page 2 was recognised" in admin_page.content.decode()


def test_the_api_says_which_pages_were_recognised(file_storage: Path) -> None:
    owner = UserFactory.create()
    document = _indexed(scanned_pdf(SCANNED_PAGES[:2]), "harvest.pdf", owner)
    _, key = token_create(user=owner, name="tests")
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Bearer {key}")
    answer = api.get(reverse("api:document", args=[document.pk])).json()
    assert answer["recognised_pages"] == [1, 2]
    assert answer["ocr_note"].startswith("The text of all 2 pages was recognised from the page images")


def test_with_ocr_off_a_scan_is_refused_as_before(file_storage: Path, settings: Any) -> None:
    settings.OCR = "off"
    document = _upload(scanned_pdf(), "harvest.pdf")
    run = job_run_now(document_id=document.pk)
    assert run is not None and not run.succeeded
    assert "has no text layer (a scanned PDF?): its pages are images. Run it through OCR" in run.job.error
    document.refresh_from_db()
    assert document.recognised_pages == [] and not document.text_layer


def test_a_language_tesseract_lacks_fails_the_job_saying_what_to_install(
    file_storage: Path, settings: Any
) -> None:
    settings.OCR_LANGUAGES = ("xqz",)
    run = job_run_now(document_id=_upload(scanned_pdf(), "harvest.pdf").pk)
    assert run is not None and not run.succeeded
    assert (
        "OCR is on (OPENFABLE_OCR) but cannot run here: Tesseract has no xqz language data" in run.job.error
    )


def test_each_page_recognised_is_reported_and_said_on_the_corpus_page(file_storage: Path) -> None:
    owner = UserFactory.create()
    document = _upload(scanned_pdf(), "harvest.pdf", owner)
    read: list[tuple[int, int]] = []
    recognised: list[tuple[int, int]] = []
    document_extract(
        document=document,
        on_progress=lambda *pages: read.append(pages),
        on_recognise=lambda *pages: recognised.append(pages),
    )
    assert read[-1] == (3, 3) and recognised == [(0, 3), (1, 3), (2, 3), (3, 3)]

    # A job in that stage, as the worker records it: the corpus page says which page it is on.
    IngestionJob.objects.filter(document=document).update(
        status="running",
        stage="recognising",
        progress=6,
        stage_done=1,
        stage_total=3,
        started=timezone.now(),
        stage_started=timezone.now() - timedelta(seconds=1),
    )
    client = Client()
    client.force_login(owner)
    assert "Recognising text: page 2 of 3" in client.get(reverse("documents:home")).content.decode()


def test_an_export_carries_the_pages_read_by_ocr_and_their_text_layer(file_storage: Path) -> None:
    import io
    import json

    from documents.services import backup, backup_format

    source = CollectionFactory.create(slug="scans")
    document = document_create(
        collection=source, content=mixed_pdf(), source_filename="letter.pdf", queue=False
    ).document
    assert job_run_now(document_id=document.pk).succeeded  # type: ignore[union-attr]
    document.refresh_from_db()
    out = io.StringIO()
    backup.collection_export(collection=source, out=out)
    header, line = out.getvalue().splitlines()
    entry = json.loads(line)
    assert entry["recognised_pages"] == [2]

    restored = backup.collection_import(lines=[header, line], slug="restored", name="Restored")
    copy = Document.objects.get(collection=restored.collection)
    assert copy.recognised_pages == [2] and copy.text_layer.name != document.text_layer.name
    with copy.text_layer.open("rb") as mine, document.text_layer.open("rb") as theirs:
        assert mine.read() == theirs.read()
    assert document_present(copy)["ocr_note"] == document_present(document)["ocr_note"]

    for damaged, fragment in (
        ({**entry, "recognised_pages": [9]}, "must be a list of its pages"),
        ({**entry, "text_layer": {**entry["text_layer"], "sha256": "0" * 64}}, "does not match its sha256"),
    ):
        with pytest.raises(backup_format.BackupFileError, match=fragment):
            backup.collection_import(lines=[header, json.dumps(damaged)], slug="refused")


def test_reading_the_file_again_replaces_its_text_layer(
    file_storage: Path, django_capture_on_commit_callbacks: Any
) -> None:
    from documents.services.documents import document_reindex

    document = _indexed(scanned_pdf(SCANNED_PAGES[:1]), "harvest.pdf")
    first = Path(document.text_layer.path)
    document_reindex(document=document, queue=False)
    with django_capture_on_commit_callbacks(execute=True):
        assert job_run_now(document_id=document.pk).succeeded  # type: ignore[union-attr]
    document.refresh_from_db()
    assert Path(document.text_layer.path).is_file() and document.recognised_pages == [1]
    assert Path(document.text_layer.path) != first and not first.exists(), "the old one is removed"
