"""bench-ingest-large: one document at the size limit, made from dataset documents, indexed and timed."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from django.core.management import call_command

from documents.models import Collection, Document
from fable_benchmarks.command import BenchCommand
from fable_benchmarks.large_document import large_document_text
from tests.benchmarks import run_bench

CLAUSE = "The supplier delivers the goods within {n} days of each order, at its own cost and risk."


def _dataset(tmp_path: Path) -> Path:
    docs = tmp_path / "docs.jsonl"
    rows = [
        {
            "doc_id": n,
            "company_name": f"Contract {n}",
            "content": "\n\n".join(CLAUSE.format(n=f"{n}{k}") for k in range(8)),
        }
        for n in range(3)
    ]
    docs.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return docs


def test_the_text_reaches_the_size_never_passes_it_and_repeats_no_paragraph(tmp_path: Path) -> None:
    text = large_document_text([_dataset(tmp_path)], size=20_000)
    assert 19_000 < len(text.encode("utf-8")) <= 20_000
    assert text.startswith("# Contract 0\n\n") and "\n\n[2] The supplier" in text
    # Headings come back each round, each above a paragraph marked with its round.
    paragraphs = [part for part in text.split("\n\n") if part.strip() and not part.startswith("# ")]
    assert len(set(paragraphs)) == len(paragraphs), "a repeated block would be embedded once"


@pytest.mark.django_db
def test_bench_ingest_large_refuses_a_missing_file_or_a_negative_size(tmp_path: Path) -> None:
    code, result = run_bench("bench-ingest-large", "--docs", str(tmp_path / "missing.jsonl"))
    assert code == 1 and result["error"] == f"--docs {tmp_path / 'missing.jsonl'}: no such file"
    code, result = run_bench("bench-ingest-large", "--docs", str(_dataset(tmp_path)), "--megabytes", "-1")
    assert code == 1 and "--megabytes" in result["error"]


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)  # the heartbeat is watched from a connection of its own
def test_bench_ingest_large_prints_minutes_memory_and_time_per_token(tmp_path: Path) -> None:
    out = io.StringIO()
    json_path = tmp_path / "large.json"
    call_command(
        BenchCommand(), "bench-ingest-large", "--docs", str(_dataset(tmp_path)), "--megabytes", "0.03",
        "--json", str(json_path), stdout=out,
    )  # fmt: skip
    assert "| bytes | tokens | nodes | status | minutes |" in out.getvalue()
    row = json.loads(json_path.read_text())["rows"][0]
    assert row["status"] == "succeeded" and 29_000 < row["document_bytes"] <= 30_000
    assert row["nodes"] > 10 and row["minutes"] > 0 and row["peak_rss_mb"] >= row["rss_before_mb"] > 0
    assert 0 < row["builder_us_per_token"] < row["model_us_per_token"]
    assert row["silent_stage"] in ("", "queued", "chunking", "building_tree", "embedding", "saving")
    assert not Collection.objects.exists() and not Document.objects.exists(), "nothing is left behind"
