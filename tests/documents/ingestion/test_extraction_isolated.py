"""``extract_isolated``: the same result, in a child process with a memory cap and a hard time limit."""

from __future__ import annotations

import pytest

from documents.ingestion.extraction import ExtractionError, ExtractionLimits, extract
from documents.ingestion.extraction.isolated import extract_isolated
from tests.documents.ingestion import document_files as files


def test_same_result_as_in_process() -> None:
    data = files.report_pdf()
    assert extract_isolated(data, filename="report.pdf") == extract(data, filename="report.pdf")


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
