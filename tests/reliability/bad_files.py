"""The bad files of issue 21, shared by every surface's table (api, mcp, cli, web).

Each is either refused at upload, from what the content shows at once (``detect_format``: an
old .doc, a damaged zip, a file over the size limit), or accepted and then fails its job with
one sentence (what only reading the file shows: a password, no text layer, a truncated PDF, too
many pages, a zip bomb). Either way nothing is half-written: a refusal stores no row and no
file; a failed job leaves a failed document with no text and no tree, and a retry.
"""

from __future__ import annotations

import io
import re
import zipfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from documents.models import Document, IngestionJob, Node
from tests.documents.ingestion import document_files as files

OLD_WORD = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + b"\0" * 64


def docx_bomb() -> bytes:
    """A real Word file with 5 MB of zeros packed into ~5 KB beside it (ratio > 100)."""
    source = zipfile.ZipFile(io.BytesIO(files.heading_docx()))
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", compression=zipfile.ZIP_DEFLATED) as bomb:
        for item in source.infolist():
            bomb.writestr(item, source.read(item.filename))
        bomb.writestr("word/media/padding.bin", b"\0" * 5_000_000)
    return out.getvalue()


@dataclass(frozen=True)
class BadFile:
    name: str
    filename: str
    data: Callable[[], bytes]
    refused: bool  # at upload; else accepted, and its job fails
    fragment: str  # in the refusal or the job's error
    settings: dict[str, Any] = field(default_factory=dict)


BAD_FILES = [
    BadFile("encrypted PDF", "secret.pdf", files.encrypted_pdf, False, "password-protected"),
    BadFile("image-only PDF (a scan)", "scan.pdf", files.image_only_pdf, False, "no text layer"),
    BadFile(
        "truncated PDF", "cut.pdf", lambda: files.report_pdf(pages=2)[:700], False, "damaged or truncated PDF"
    ),
    BadFile(
        "PDF over OPENFABLE_MAX_PAGES",
        "long.pdf",
        lambda: files.report_pdf(pages=3),
        False,
        "has 3 pages; the limit is 2",
        {"MAX_PAGES": 2},
    ),
    BadFile("DOCX zip bomb", "bomb.docx", docx_bomb, False, "zip bomb"),
    BadFile("old Word .doc", "old.doc", lambda: OLD_WORD, True, "save it as .docx or PDF"),
    BadFile(
        "damaged .docx (cut short)",
        "cut.docx",
        lambda: files.heading_docx()[:500],
        True,
        "damaged or truncated zip",
    ),
    BadFile(
        "file over OPENFABLE_MAX_FILE_BYTES",
        "big.pdf",
        lambda: files.report_pdf(pages=1),
        True,
        "OPENFABLE_MAX_FILE_BYTES",
        {"MAX_FILE_BYTES": 1000},
    ),
]
IDS = [bad.name for bad in BAD_FILES]
# Accepted by its content, the disagreement said on the document (not refused).
WORD_NAMED_PDF = ("contract.pdf", files.heading_docx, "named as a PDF but its content is a Word")


def stored_files(folder: Path) -> list[Path]:
    return [path for path in folder.rglob("*") if path.is_file()] if folder.exists() else []


def assert_failed_cleanly(document_id: int, fragment: str) -> None:
    """The job failed with the sentence, the document is failed with no text and no tree, and
    a retry is offered (the failed job is the latest)."""
    document = Document.objects.get(pk=document_id)
    job = IngestionJob.objects.filter(document=document).latest("created")
    assert job.status == IngestionJob.Status.FAILED and fragment in job.error, job.error
    assert "Traceback" not in job.error and not re.match(r"\w+Error: ", job.error), job.error
    assert document.status == Document.Status.FAILED
    assert document.content == "" and document.page_spans == []
    assert not Node.objects.filter(document=document).exists()
