"""bench-ingest: indexing through the public services, failures counted, the table and the cleanup."""

from __future__ import annotations

import io
import json
from collections.abc import Sequence
from datetime import timedelta
from pathlib import Path

import numpy as np
import pytest
from django.core.management import call_command
from django.utils import timezone

from documents.models import Collection, IngestionJob
from documents.services.collections import collection_create
from fable_benchmarks.command import BenchCommand
from fable_benchmarks.datasets import DatasetDocument
from fable_benchmarks.ingest import EstimateWatch, estimate_swing, index_dataset_document
from tests.benchmarks import run_bench
from tests.documents.ingestion import document_files

pytestmark = pytest.mark.django_db


class WrongSizeEmbedder:
    """Vectors of 3 numbers: refused before any write, so the job fails without the model."""

    model_name, dimensions = "wrong-size", 3

    def embed_passages(self, texts: Sequence[str]) -> np.ndarray:
        return np.ones((len(texts), 3), dtype=np.float32)

    def embed_query(self, text: str) -> np.ndarray:
        return np.ones(3, dtype=np.float32)


def test_a_failed_document_is_returned_not_raised_and_a_repeat_is_not_run_again() -> None:
    collection = collection_create(name="bench ingest unit")
    item = DatasetDocument(doc_id="d-1", title="Acme", content="Acme Mining was founded in 1998 in Perth.")
    indexed = index_dataset_document(collection=collection, item=item, embedder=WrongSizeEmbedder())
    assert indexed.created and indexed.error is not None and "3-dimensional" in str(indexed.error)
    assert indexed.document.metadata == {"doc_id": "d-1"} and indexed.document.title == "Acme"
    (job,) = IngestionJob.objects.filter(document=indexed.document)
    assert job.status == IngestionJob.Status.FAILED and job.error

    again = index_dataset_document(collection=collection, item=item, embedder=WrongSizeEmbedder())
    assert not again.created and again.document.pk == indexed.document.pk and again.error is None
    assert IngestionJob.objects.filter(document=indexed.document).count() == 1, "nothing was run again"


def test_bench_ingest_refuses_a_missing_file_or_a_negative_limit(tmp_path: Path) -> None:
    code, result = run_bench("bench-ingest", "--docs", str(tmp_path / "missing.jsonl"))
    assert code == 1 and result["error"] == f"--docs {tmp_path / 'missing.jsonl'}: no such file"
    docs = tmp_path / "docs.jsonl"
    docs.write_text(json.dumps({"doc_id": 1, "content": "text"}) + "\n")
    code, result = run_bench("bench-ingest", "--docs", str(docs), "--limit", "-1")
    assert code == 1 and "--limit" in result["error"]
    assert not Collection.objects.exists()


@pytest.mark.slow
def test_bench_ingest_prints_a_table_and_cleans_up(shared_dir: Path, tmp_path: Path) -> None:
    out = io.StringIO()
    json_path = tmp_path / "bench.json"
    call_command(
        BenchCommand(), "bench-ingest", "--docs", str(shared_dir / "datasets/dragonball/docs_en.jsonl"),
        "--limit", "2", "--json", str(json_path), stdout=out,
    )  # fmt: skip
    table = out.getvalue()
    assert "| dataset | docs | failed | nodes |" in table and "| docs_en.jsonl | 2 | 0 |" in table
    row = json.loads(json_path.read_text())["rows"][0]
    assert row["documents"] == 2 and row["failed"] == 0 and row["nodes"] > 2
    assert row["baseline_embed_s"] > 0 and row["overhead"] > 0
    assert row["one_pass_s"] > 0 and row["job_per_one_pass"] > 0, "one pass over the passages, timed"
    assert row["embed_s"] > 0 and row["build_s"] > 0, "the jobs' own stage timings are summed"
    assert row["estimate_swing"] >= 1.0 and "| estimate swing |" in table
    assert not Collection.objects.exists(), "the throw-away collection is deleted"


@pytest.mark.slow
def test_bench_ingest_from_files_times_extraction_in(tmp_path: Path, file_storage: Path) -> None:
    (tmp_path / "pdf").mkdir()
    lines = [f"Clause {n}. The supplier delivers lot {n} to the buyer within ten days." for n in range(20)]
    (tmp_path / "pdf" / "a.pdf").write_bytes(document_files.plain_pdf(lines, pages=2))
    files = tmp_path / "pdfs.jsonl"
    files.write_text(json.dumps({"doc_id": 7, "file": "a.pdf"}) + "\n")
    out = io.StringIO()
    call_command(
        BenchCommand(),
        "bench-ingest",
        "--files",
        str(files),
        "--json",
        str(tmp_path / "out.json"),
        stdout=out,
    )
    assert "| pages | extract s |" in out.getvalue()
    row = json.loads((tmp_path / "out.json").read_text())["rows"][0]
    assert row["dataset"] == "pdfs.jsonl" and row["documents"] == 1 and row["failed"] == 0
    # Uploaded as the file: the job read its two pages, and that time is in the pipeline's.
    assert row["pages"] == 2 and 0 < row["extract_s"] < row["pipeline_s"]
    assert not Collection.objects.exists()
    code, result = run_bench("bench-ingest")
    assert code == 1 and "--docs" in result["error"] and "--files" in result["error"]


def test_the_estimate_swing_compares_a_steps_whole_length_once_it_has_run_ten_seconds() -> None:
    samples = [
        ("embedding", 2.0, 500.0),  # the first seconds: too few passages to hold a person to
        ("embedding", 10.0, 30.0),  # 40 s in all
        ("embedding", 20.0, 40.0),  # 60 s
        ("embedding", 30.0, 50.0),  # 80 s: twice the first settled estimate
        ("building_tree", 12.0, 12.0),  # another step, steady at 24 s
        ("building_tree", 18.0, 6.0),
    ]
    assert estimate_swing(samples) == pytest.approx(2.0)
    assert estimate_swing(samples[:2]) == 1.0
    assert estimate_swing([]) == 1.0


def test_the_watch_reads_the_time_left_the_pages_show() -> None:
    started = timezone.now() - timedelta(seconds=20)
    job = IngestionJob(stage="embedding", progress=50, stage_done=10, stage_total=40, stage_started=started)
    watch = EstimateWatch()
    watch(job)
    ((stage, elapsed, left),) = watch.samples
    # A quarter of the passages in 20 s: 60 s left at that rate, as the corpus page says.
    assert stage == "embedding" and elapsed == pytest.approx(20, abs=1) and left == pytest.approx(60, abs=3)
    watch(IngestionJob(stage="embedding", progress=50, stage_done=0, stage_total=40, stage_started=started))
    assert len(watch.samples) == 1, "no rate yet, no estimate recorded"
