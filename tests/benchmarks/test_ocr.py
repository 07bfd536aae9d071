"""`python -m fable_benchmarks bench-ocr` on two generated scanned pages, through the real Tesseract."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from django.core.management import call_command

from fable_benchmarks.command import BenchCommand
from fable_benchmarks.ocr import scanned_pages, words_found
from tests.benchmarks import run_bench
from tests.documents.ingestion.scans import require_tesseract


def test_words_found_counts_the_drawn_words_in_order() -> None:
    assert words_found(["the", "buyer", "pays"], "The buyer, who pays.") == 1.0
    assert words_found(["the", "buyer", "pays"], "pays the") == pytest.approx(1 / 3)
    assert words_found(["a", "b"], "") == 0.0


def test_the_generated_scan_has_pictures_and_no_text() -> None:
    import pypdfium2 as pdfium

    data, words = scanned_pages(pages=2, dpi=100)
    document = pdfium.PdfDocument(data)
    assert len(document) == 2 and len(words) == 2 * 30 * 9
    assert all(page.get_textpage().count_chars() == 0 for page in document)


@pytest.mark.django_db  # the command line checks the database before any subcommand
@pytest.mark.slow
def test_bench_ocr_reports_pages_per_second_and_the_words_found(tmp_path: Path) -> None:
    require_tesseract()
    out = io.StringIO()
    call_command(
        BenchCommand(),
        "bench-ocr",
        "--pages",
        "2",
        "--dpi",
        "200",
        "--json",
        str(tmp_path / "ocr.json"),
        stdout=out,
    )
    assert out.getvalue().startswith("| scan | pages | seconds | pages/s |")
    (row,) = json.loads((tmp_path / "ocr.json").read_text())["rows"]
    assert row["dpi"] == 200 and row["pages"] == 2 and row["pages_per_second"] > 0
    assert row["words_found"] > 0.9, row  # clean typewritten scans: nearly every word
    assert 0 < row["text_layer_kb"] < row["original_kb"] / 5


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("arguments", "fragment"),
    [
        (["--pages", "0"], "--pages must be between 1 and 2000"),
        (["--dpi", "high"], "--dpi 'high': give whole numbers"),
        (["--dpi", "20"], "between 72 and 600"),
        (["--languages", "xqz"], "Tesseract has no xqz language data"),
    ],
)
def test_bench_ocr_says_what_was_wrong(arguments: list[str], fragment: str) -> None:
    status, answer = run_bench("bench-ocr", *arguments)
    assert status == 1 and fragment in answer["error"], answer
