"""`openfable index report.pdf notes.docx page.html`: files of every format, read by content."""

from __future__ import annotations

from pathlib import Path

import pytest

from documents.models import Document
from tests.cli import run_openfable
from tests.documents.ingestion import document_files as files

pytestmark = pytest.mark.django_db


def _write(folder: Path, name: str, data: bytes) -> str:
    path = folder / name
    path.write_bytes(data)
    return str(path)


@pytest.mark.slow
def test_index_wait_reads_a_pdf_a_word_file_and_a_page(tmp_path: Path, file_storage: Path) -> None:
    status, answer = run_openfable(
        "index",
        _write(tmp_path, "report.pdf", files.report_pdf(pages=2)),
        _write(tmp_path, "notes.docx", files.heading_docx()),
        _write(tmp_path, "page.html", files.ARTICLE_PAGE),
        "--wait",
    )
    assert status == 0, answer
    entries = {entry["title"]: entry for entry in answer["documents"]}
    assert {name: entry["format"] for name, entry in entries.items()} == {
        "report": "pdf",
        "notes": "docx",
        "page": "html",
    }
    assert all(entry["job"]["status"] == "succeeded" for entry in entries.values()), answer
    assert entries["report"]["page_count"] == 2 and entries["report"]["node_count"] > 2
    page = Document.objects.get(pk=entries["page"]["document_id"])
    assert "Warranty terms" in page.content and "Cookie settings" not in page.content

    status, tree = run_openfable("tree", str(entries["report"]["document_id"]), "--flat")
    assert status == 0 and tree["nodes"][0]["pages"] == [1, 2]
    status, found = run_openfable("query", "When does the buyer pay each invoice?", "--budget", "150")
    assert status == 0 and any(chunk["pages"] for chunk in found["chunks"]), found


def test_a_file_that_fails_its_extraction_says_why(tmp_path: Path, file_storage: Path) -> None:
    status, answer = run_openfable("index", _write(tmp_path, "scan.pdf", files.image_only_pdf()), "--wait")
    assert status == 0, answer
    (entry,) = answer["documents"]
    assert entry["status"] == "failed" and "no text layer" in entry["job"]["error"]


def test_a_batch_with_a_refused_file_stores_none_and_keeps_no_file(
    tmp_path: Path, file_storage: Path
) -> None:
    status, answer = run_openfable(
        "index",
        _write(tmp_path, "report.pdf", files.report_pdf(pages=1)),
        _write(tmp_path, "old.doc", b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + b"\0" * 64),
    )
    assert status == 1 and "old.doc" in answer["error"] and ".docx or PDF" in answer["error"]
    assert not Document.objects.exists()
    assert not [path for path in file_storage.rglob("*") if path.is_file()]


def test_plan_sends_a_pdf_to_index_instead(tmp_path: Path, file_storage: Path) -> None:
    status, answer = run_openfable("plan", _write(tmp_path, "report.pdf", files.report_pdf(pages=1)))
    assert status == 1 and "openfable index" in answer["error"]
    assert not Document.objects.exists()
