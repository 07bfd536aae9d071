"""A PDF indexed by a real Celery worker (prefork pool, the session's Redis broker, the test database):
the job's extracting stage runs the extractor's own child process from inside the pool's child,
reads the original from the storage the upload wrote to, and saves the text, pages and tree."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from documents.models import Document, IngestionJob, Node
from documents.services.documents import document_create
from tests.documents.ingestion import document_files as files
from tests.factories import CollectionFactory
from tests.faults.processes import stop_process, wait_for
from tests.faults.test_worker_killed import _start_worker

pytestmark = [pytest.mark.faults, pytest.mark.slow]


@pytest.fixture
def worker_folder(tmp_path: Path, settings: Any) -> Path:
    """A file storage of the test's own, shared with the worker it starts (which finds it under
    its OPENFABLE_DATA_DIR)."""
    settings.STORAGES = {
        **settings.STORAGES,
        "default": {
            "BACKEND": "django.core.files.storage.FileSystemStorage",
            "OPTIONS": {"location": str(tmp_path / "files")},
        },
    }
    return tmp_path


@pytest.mark.django_db(transaction=True)
def test_a_worker_reads_an_uploaded_pdf_and_indexes_it_with_its_pages(
    worker_folder: Path, broker_url: str
) -> None:
    document = document_create(
        collection=CollectionFactory.create(), content=files.report_pdf(pages=3), source_filename="report.pdf"
    ).document
    worker = _start_worker(worker_folder, {"OPENFABLE_BROKER_URL": broker_url}, "worker.log")
    try:
        wait_for(
            lambda: IngestionJob.objects.filter(
                document=document, status__in=["succeeded", "failed"]
            ).exists(),
            timeout=180,
            what="the worker to index the PDF",
        )
    finally:
        stop_process(worker)
    job = IngestionJob.objects.get(document=document)
    log = (worker_folder / "worker.log").read_text(errors="replace")
    assert job.status == IngestionJob.Status.SUCCEEDED, f"{job.error}\n{log[-3000:]}"
    assert "extract" in job.timings
    document.refresh_from_db()
    assert document.status == Document.Status.INDEXED and [span[0] for span in document.page_spans] == [
        1,
        2,
        3,
    ]
    section = Node.objects.get(document=document, title="3. Payment")
    assert document.pages_of(section.start_char, section.end_char) == [3]
