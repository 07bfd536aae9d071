"""``extract_isolated``: the same result, in a child process with a memory cap and a hard time limit."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from documents.ingestion.extraction import ExtractionError, ExtractionLimits, extract
from documents.ingestion.extraction.isolated import extract_isolated
from tests.documents.ingestion import document_files as files


@pytest.mark.parametrize(
    ("filename", "make"),
    [
        ("report.pdf", files.report_pdf),
        ("headings.docx", files.heading_docx),
        ("page.html", lambda: b"<html><body><h1>Terms</h1><p>The fee is paid monthly.</p></body></html>"),
        ("notes.md", lambda: b"# Terms\n\nThe fee is paid monthly.\n"),
    ],
)
def test_same_result_as_in_process(filename: str, make: Callable[[], bytes]) -> None:
    # The child loads only the reader of the file's format: each format still finds its own.
    data = make()
    assert extract_isolated(data, filename=filename) == extract(data, filename=filename)


def test_pdf_decompression_bomb_is_stopped_by_the_memory_cap() -> None:
    bomb = files.bomb_pdf(inflated_bytes=100_000_000)  # ~100 KB on disk
    assert len(bomb) < 200_000
    with pytest.raises(
        ExtractionError, match=r"needs more than 32 MB of memory to read \(a decompression bomb\?\)"
    ) as error:
        extract_isolated(bomb, filename="bomb.pdf", max_memory_bytes=32 * 1024 * 1024)
    assert error.value.code == "too_large"


def test_a_reader_past_its_time_is_killed() -> None:
    with pytest.raises(ExtractionError, match=r"took longer than 0\.001 seconds") as error:
        extract_isolated(
            files.report_pdf(),
            filename="slow.pdf",
            limits=ExtractionLimits(max_seconds=0.001),
            grace_seconds=0,
        )
    assert error.value.code == "too_slow"


def test_the_readers_own_errors_come_back_with_their_code() -> None:
    with pytest.raises(ExtractionError, match="password-protected") as error:
        extract_isolated(files.encrypted_pdf(), filename="secret.pdf")
    assert error.value.code == "encrypted"


def test_progress_comes_back_from_the_child_page_by_page() -> None:
    seen: list[tuple[int, int]] = []
    extract_isolated(
        files.report_pdf(pages=3), filename="report.pdf", on_progress=lambda *step: seen.append(step)
    )
    assert seen == [(1, 3), (2, 3), (3, 3)]
