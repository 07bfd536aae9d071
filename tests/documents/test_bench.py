"""bench-ingest runs end to end on a real dataset file and prints its table (no timing asserted)."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from django.core.management import call_command

from documents.models import Collection

pytestmark = [pytest.mark.django_db, pytest.mark.slow]


def test_bench_ingest_prints_a_table_and_cleans_up(shared_dir: Path, tmp_path: Path) -> None:
    out = io.StringIO()
    json_path = tmp_path / "bench.json"
    call_command(
        "openfable", "bench-ingest", "--docs", str(shared_dir / "datasets/dragonball/docs_en.jsonl"),
        "--limit", "2", "--json", str(json_path), stdout=out,
    )  # fmt: skip
    table = out.getvalue()
    assert "| dataset | docs | failed | nodes |" in table and "| docs_en.jsonl | 2 | 0 |" in table
    row = json.loads(json_path.read_text())["rows"][0]
    assert row["documents"] == 2 and row["failed"] == 0 and row["nodes"] > 2
    assert row["baseline_embed_s"] > 0 and row["overhead"] > 0
    assert not Collection.objects.exists(), "the throw-away collection is deleted"
