"""Files through the one write path: PDF, Word and HTML uploads stored with their original, read
by the job's first stage ("extracting"), their text, pages and tree saved together."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from documents.models import Document, IngestionJob, Node, pages_of
from documents.services import jobs
from documents.services.document_input import DocumentInputError, UnsupportedFileError
from documents.services.documents import document_create, document_delete, document_reindex
from documents.services.jobs import job_run_now
from tests.documents.ingestion import document_files as files
from tests.factories import CollectionFactory

pytestmark = pytest.mark.django_db


def _upload(data: bytes, filename: str) -> Document:
    return document_create(
        collection=CollectionFactory.create(), content=data, source_filename=filename, queue=False
    ).document


def test_a_pdf_is_stored_with_its_original_and_read_by_the_job(file_storage: Path) -> None:
    data = files.report_pdf(pages=3)
    document = _upload(data, "report.pdf")
    # Stored at once, text not yet read: the original is kept, the format told from the content.
    assert document.status == Document.Status.QUEUED and document.content == ""
    assert document.format == "pdf" and document.content_hash == hashlib.sha256(data).hexdigest()
    assert document.title == "report"
    with document.original.open("rb") as stored:
        assert stored.read() == data
    assert Path(document.original.path).is_relative_to(file_storage)

    run = job_run_now(document_id=document.pk)
    assert run is not None and run.succeeded, run and run.job.error
    document.refresh_from_db()
    assert "Delivery of Goods" in document.content and "agreement binds" in document.content
    assert [span[0] for span in document.page_spans] == [1, 2, 3]
    assert document.token_count > 0 and "extract" in run.job.timings
    nodes = list(Node.objects.filter(document=document).order_by("order"))
    leaves = [node for node in nodes if node.kind == "leaf"]
    assert all(leaf.content == document.content[leaf.start_char : leaf.end_char] for leaf in leaves)
    # The headings extraction wrote are sections of the tree.
    assert {"1. Definitions", "2. Delivery of Goods"} <= {
        node.title for node in nodes if node.kind == "section"
    }
    page_two = next(node for node in nodes if node.title == "2. Delivery of Goods")
    assert document.pages_of(page_two.start_char, page_two.end_char) == [2]
    assert document.pages_of(0, len(document.content)) == [1, 2, 3]


def test_the_same_file_twice_is_one_document(file_storage: Path) -> None:
    collection = CollectionFactory.create()
    data = files.heading_docx()
    first = document_create(collection=collection, content=data, source_filename="a.docx", queue=False)
    again = document_create(collection=collection, content=data, source_filename="b.docx", queue=False)
    assert again.created is False and again.document.pk == first.document.pk
    assert Document.objects.filter(collection=collection).count() == 1


@pytest.mark.parametrize(
    ("data", "filename", "error", "code"),
    [
        (b" \n", "empty.pdf", DocumentInputError, "invalid_input"),
        (
            b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + b"\0" * 100,
            "old.doc",
            UnsupportedFileError,
            "unsupported_format",
        ),
        (b"PK\x03\x04 this is no zip", "damaged.docx", DocumentInputError, "corrupt"),
        (b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR", "photo.png", UnsupportedFileError, "unsupported_format"),
    ],
)
def test_what_detection_sees_is_refused_at_once_and_nothing_is_written(
    file_storage: Path, data: bytes, filename: str, error: type[Exception], code: str
) -> None:
    with pytest.raises(error) as raised:
        _upload(data, filename)
    assert raised.value.code == code  # type: ignore[attr-defined]
    assert not Document.objects.exists()
    assert not any(file_storage.rglob("*.*"))


def test_a_file_over_the_file_limit_is_refused(file_storage: Path, settings: object) -> None:
    settings.MAX_FILE_BYTES = 1000  # type: ignore[attr-defined]
    with pytest.raises(DocumentInputError, match="OPENFABLE_MAX_FILE_BYTES") as raised:
        _upload(files.report_pdf(pages=1), "big.pdf")
    assert raised.value.status == 413 and not Document.objects.exists()


def test_an_encrypted_pdf_fails_its_job_in_words_and_a_retry_is_offered(file_storage: Path) -> None:
    document = _upload(files.encrypted_pdf(), "secret.pdf")
    run = job_run_now(document_id=document.pk)
    assert run is not None and not run.succeeded
    assert "password" in run.job.error and "secret.pdf" in run.job.error
    document.refresh_from_db()
    assert document.status == Document.Status.FAILED and document.content == ""
    assert not Node.objects.filter(document=document).exists()


def test_a_reindex_whose_extraction_fails_keeps_the_previous_text_and_tree(
    file_storage: Path, settings: object
) -> None:
    document = _upload(files.report_pdf(pages=2), "report.pdf")
    assert job_run_now(document_id=document.pk).succeeded  # type: ignore[union-attr]
    document.refresh_from_db()
    text, spans = document.content, document.page_spans
    nodes = list(Node.objects.filter(document=document).values_list("pk", flat=True))
    settings.MAX_PAGES = 1  # type: ignore[attr-defined]
    document_reindex(document=document, queue=False)
    run = job_run_now(document_id=document.pk)
    assert run is not None and not run.succeeded and "page" in run.job.error
    document.refresh_from_db()
    assert document.content == text and document.page_spans == spans
    assert list(Node.objects.filter(document=document).values_list("pk", flat=True)) == nodes


def test_deleting_a_document_removes_its_original(
    file_storage: Path, django_capture_on_commit_callbacks: object
) -> None:
    document = _upload(files.ARTICLE_PAGE, "page.html")
    path = Path(document.original.path)
    assert path.exists() and document.format == "html"
    with django_capture_on_commit_callbacks(execute=True):  # type: ignore[operator]
        document_delete(document=document)
    assert not path.exists()


def test_markdown_and_text_files_are_their_own_text() -> None:
    document = _upload(b"# Notes\n\nSome text.\n", "notes.md")
    assert document.content == "# Notes\n\nSome text.\n" and not document.original
    assert document.format == "markdown" and document.page_spans == []


def test_a_name_that_lies_is_read_by_content_and_noted(file_storage: Path) -> None:
    document = _upload(files.heading_docx(), "contract.pdf")
    assert document.format == "docx"
    assert "named as a PDF" in document.format_note


def test_pages_of_touches_every_page_of_a_range() -> None:
    spans = [[1, 0, 10], [2, 10, 10], [3, 10, 25]]
    assert pages_of(spans, 0, 5) == [1]
    assert pages_of(spans, 5, 12) == [1, 2, 3]
    assert pages_of(spans, 10, 12) == [3]
    assert pages_of(spans, 20, 20) == [3]
    assert pages_of([], 0, 5) == []


def test_a_job_reports_the_extracting_stage_page_by_page(
    file_storage: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    document = _upload(files.report_pdf(pages=3), "report.pdf")
    reports: list[tuple[str, float, int, int]] = []
    original = jobs.job_progress

    def spy(job: IngestionJob, stage: str, fraction: float = 0.0, *, done: int = 0, total: int = 0) -> None:
        reports.append((stage, round(fraction, 2), done, total))
        original(job, stage, fraction, done=done, total=total)

    monkeypatch.setattr(jobs, "job_progress", spy)
    assert job_run_now(document_id=document.pk).succeeded  # type: ignore[union-attr]
    extracting = [
        (fraction, done, total) for stage, fraction, done, total in reports if stage == "extracting"
    ]
    assert reports[0][0] == "extracting"
    # Page by page, with the pages counted for the corpus page ("Reading the file: page 2 of 3").
    assert extracting == [(0.0, 0, 0), (0.33, 1, 3), (0.67, 2, 3), (1.0, 3, 3)]


@pytest.mark.slow
def test_an_export_carries_a_files_text_and_pages_and_imports_them(file_storage: Path) -> None:
    import io
    import json

    from documents.services import backup, backup_format

    source = CollectionFactory.create(slug="reports")
    document = document_create(
        collection=source, content=files.report_pdf(pages=2), source_filename="report.pdf", queue=False
    ).document
    assert job_run_now(document_id=document.pk).succeeded  # type: ignore[union-attr]
    failed = document_create(
        collection=source, content=files.encrypted_pdf(), source_filename="secret.pdf", queue=False
    ).document
    assert not job_run_now(document_id=failed.pk).succeeded  # type: ignore[union-attr]
    document.refresh_from_db()

    out = io.StringIO()
    result = backup.collection_export(collection=source, out=out)
    assert result.documents == 1, "a file whose text was never read has nothing to export"
    header, line = out.getvalue().splitlines()
    entry = json.loads(line)
    assert entry["format"] == "pdf" and entry["page_spans"] == document.page_spans
    assert backup_format.document_line(line, 2, dimensions=384)["page_spans"] == document.page_spans

    # The original file goes too: the restored document can be downloaded, shown page by page
    # and re-indexed from it.
    with document.original.open("rb") as uploaded:
        data = uploaded.read()
    assert entry["original"]["name"] == "report.pdf"
    assert entry["original"]["sha256"] == hashlib.sha256(data).hexdigest()

    restored = backup.collection_import(lines=[header, line], slug="restored", name="Restored")
    copy = Document.objects.get(collection=restored.collection)
    assert (
        copy.content == document.content and copy.format == "pdf" and copy.page_spans == document.page_spans
    )
    assert copy.pages_of(0, len(copy.content)) == [1, 2]
    with copy.original.open("rb") as stored:
        assert stored.read() == data
    # Known by the file's hash again, as an upload is: the same file uploaded later is this one.
    again = document_create(
        collection=restored.collection, content=data, source_filename="r.pdf", queue=False
    )
    assert not again.created and again.document.pk == copy.pk
    document_reindex(document=copy, queue=False)
    assert job_run_now(document_id=copy.pk).succeeded  # type: ignore[union-attr]
    copy.refresh_from_db()
    assert copy.content == document.content

    entry["nodes"] = []  # restored without its tree: stored, queued for indexing from its text
    restored = backup.collection_import(lines=[header, json.dumps(entry)], slug="restored-2", name="R2")
    assert Document.objects.get(collection=restored.collection).original

    stored_before = sorted(p.name for p in file_storage.rglob("*") if p.is_file())
    damaged = {**entry, "original": {**entry["original"], "sha256": "0" * 64}}
    with pytest.raises(backup_format.BackupFileError, match="original file of 'report' does not match"):
        backup.collection_import(lines=[header, json.dumps(entry), json.dumps(damaged)], slug="refused")
    # The whole import is refused: no row, and no file left behind by its first line.
    assert not Document.objects.filter(collection__slug="refused").exists()
    assert sorted(p.name for p in file_storage.rglob("*") if p.is_file()) == stored_before

    entry["page_spans"] = [[1, 0, 5]]
    with pytest.raises(backup_format.BackupFileError, match="page map"):
        backup_format.document_line(json.dumps(entry), 2, dimensions=384)
