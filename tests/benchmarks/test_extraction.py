"""`python -m fable_benchmarks bench-extract` on small PDFs made in the test, with references a plain reader misses."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path

import pytest
from django.core.management import call_command

from fable_benchmarks.command import BenchCommand
from fable_benchmarks.extraction import _pdfplumber_clean, normalise, read_pdf_list
from tests.benchmarks import run_bench
from tests.documents.ingestion import document_files as files

# Found only when the line-end hyphen is joined ("deliv-" / "ery").
HYPHENATED = f"{files.CLAUSES[1]} and the goods are ready for delivery on the first working day."
PLAIN = files.SECOND[2]  # one line: every reader finds it
# Found only when the two columns are read one after the other.
COLUMN = " ".join(files.LEFT_COLUMN[:3])


def _dataset(tmp_path: Path) -> Path:
    (tmp_path / "pdf").mkdir()
    (tmp_path / "pdf" / "report.pdf").write_bytes(files.report_pdf(pages=3))
    (tmp_path / "pdf" / "columns.pdf").write_bytes(files.two_column_pdf())
    listing = tmp_path / "pdfs.jsonl"
    listing.write_text('{"doc_id": 0, "file": "report.pdf"}\n{"doc_id": 1, "file": "columns.pdf"}\n')
    # The dataset's own text export, which the "reference" row reads.
    (tmp_path / "docs.jsonl").write_text(
        json.dumps({"doc_id": 0, "content": f"{files.CLAUSES[0]} {HYPHENATED} {PLAIN}"})
        + "\n"
        + json.dumps({"doc_id": 1, "content": " ".join(files.LEFT_COLUMN + files.RIGHT_COLUMN)})
        + "\n"
    )
    queries = [
        {
            "query": {"query_id": 1, "content": "q"},
            "ground_truth": {"doc_ids": [0], "references": [HYPHENATED, PLAIN]},
        },
        {"query": {"query_id": 2, "content": "q"}, "ground_truth": {"doc_ids": [1], "references": [COLUMN]}},
    ]
    (tmp_path / "queries.jsonl").write_text("".join(json.dumps(query) + "\n" for query in queries))
    return listing


def _rows(table: str) -> dict[str, list[str]]:
    rows = {}
    for line in table.splitlines()[2:]:
        cells = [cell.strip() for cell in line.strip("|").split("|")]
        rows[cells[0]] = cells
    return rows


@pytest.mark.django_db  # the command line checks the database before any subcommand
def test_bench_extract_compares_candidates_on_generated_pdfs(tmp_path: Path) -> None:
    listing = _dataset(tmp_path)
    out = io.StringIO()
    call_command(
        BenchCommand(),
        "bench-extract",
        "--files",
        str(listing),
        "--candidates",
        "pypdfium2,pypdfium2+clean,reference",
        "--json",
        str(tmp_path / "extract.json"),
        stdout=out,
    )
    rows = _rows(out.getvalue())
    assert list(rows) == ["pypdfium2", "pypdfium2+clean", "reference"]
    # Plain PDFium keeps "deliv-" and reads the columns row by row: only the one-line reference.
    assert rows["pypdfium2"][6].endswith("(1/3)")
    assert rows["pypdfium2+clean"][6] == "100.0% (3/3)"
    assert rows["reference"][6] == "100.0% (3/3)"
    assert rows["pypdfium2"][2] == rows["pypdfium2+clean"][2] == "4"  # pages
    assert re.fullmatch(r"\d+(\.\d)?", rows["pypdfium2+clean"][3])  # pages per second
    saved = json.loads((tmp_path / "extract.json").read_text())["rows"]
    assert [row["found"] for row in saved] == [1, 3, 3]
    assert all(row["peak_rss_mb"] > 10 and row["failures"] == 0 for row in saved)


def test_pdfplumber_candidate_gets_the_same_cleaning(tmp_path: Path) -> None:
    text, pages = _pdfplumber_clean(files.report_pdf(pages=3), "report.pdf")
    assert pages == 3
    assert "ready for delivery on the first working day" in text
    assert "ACME Supply Agreement" not in text and "Page 2 of 3" not in text
    columns, _ = _pdfplumber_clean(files.two_column_pdf(), "columns.pdf")
    assert COLUMN in " ".join(columns.split())


def test_normalisation_reads_export_artefacts_as_the_same_text() -> None:
    assert normalise("the \u201cnon- exclusive\u201d\u00a0licence \u2013 sub\u200bsections") == (
        'the "non-exclusive" licence - subsections'
    )
    assert normalise("non- exclusive \u2013", strict=True) == "non- exclusive \u2013"


@pytest.mark.django_db
def test_bench_extract_refuses_bad_input_in_words(tmp_path: Path) -> None:
    listing = _dataset(tmp_path)
    code, result = run_bench("bench-extract", "--files", str(tmp_path / "missing.jsonl"))
    assert code == 1 and "no such file" in result["error"]
    code, result = run_bench("bench-extract", "--files", str(listing), "--candidates", "pymupdf")
    assert code == 1 and "unknown pymupdf" in result["error"]
    (tmp_path / "bad.jsonl").write_text('{"doc_id": 3, "file": "absent.pdf"}\n')
    code, result = run_bench("bench-extract", "--files", str(tmp_path / "bad.jsonl"))
    assert code == 1 and "absent.pdf is neither beside the list nor in its pdf/ folder" in result["error"]
    assert [file.doc_id for file in read_pdf_list(listing)] == [0, 1]
