"""bench-cost --real-llm's ingestion loop, against the scripted server: each document indexed by
the LLM builder and by the structural one, a row per document, and a time limit that stops
between documents (the command itself runs against the real model: ``tests/real_llm``'s
territory, hours on a CPU)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from documents.models import Collection, Document
from fable_benchmarks.cost_real import Deadline, index_documents
from fable_benchmarks.datasets import DatasetDocument
from fable_benchmarks.report import format_cost_real
from openfable.models import LLMCacheEntry
from tests.fakes.llm import answers
from tests.fakes.llm.server import ScriptedOpenAIServer

pytestmark = pytest.mark.django_db

ITEMS = [
    DatasetDocument(
        doc_id=number,
        title=f"Report {number}",
        content=(
            f"Report {number} covers the revenue of the year.\n\n"
            "The board met four times and approved the budget.\n\n"
            "Suppliers were audited for their emissions.\n"
        ),
    )
    for number in (7, 8)
]


@pytest.fixture
def llm(scripted_llm: ScriptedOpenAIServer) -> Iterator[ScriptedOpenAIServer]:
    LLMCacheEntry.objects.all().delete()  # every answer comes from the server: the calls are counted
    yield scripted_llm


def test_each_document_is_built_by_both_builders_and_timed(llm: ScriptedOpenAIServer) -> None:
    llm.script_chat(*[answers.simple_answer] * 8)
    collection = Collection.objects.create(name="cost", slug="cost")
    said: list[str] = []
    rows, by_doc_id = index_documents(collection, ITEMS, "docs.jsonl", deadline=Deadline(0), say=said.append)
    assert [row["doc_id"] for row in rows] == [7, 8] and set(by_doc_id) == {7, 8}
    for row in rows:
        assert row["builder"] == Document.Builder.LLM and row["calls"] >= 1
        assert row["prompt_tokens"] > 0 and row["seconds"] > 0 and row["structural_seconds"] > 0
    # The LLM-built documents stay for the queries; the structural ones are gone with their collection.
    assert set(collection.documents.values_list("builder", flat=True)) == {Document.Builder.LLM}
    assert Collection.objects.count() == 1
    assert "structural builder" in said[0]


def test_the_time_limit_stops_between_documents(llm: ScriptedOpenAIServer) -> None:
    llm.script_chat(*[answers.simple_answer] * 8)
    collection = Collection.objects.create(name="cost", slug="cost")
    said: list[str] = []
    rows, _ = index_documents(collection, ITEMS, "docs.jsonl", deadline=Deadline(0.001), say=said.append)
    assert [row["doc_id"] for row in rows] == [7], "the first document is indexed whole, then none"
    assert said[-1] == "docs.jsonl: time limit, 1 of 2 documents indexed"


def test_the_report_prints_the_builders_side_by_side() -> None:
    ingestion = {
        "documents": 2, "document_tokens": 1000, "calls": 6, "prompt_tokens": 4000, "completion_tokens": 40,
        "structural_fallbacks": 1, "seconds": 150.0, "seconds_per_call": 25.0, "structural_seconds": 3.0,
        "time_against_structural": 50.0, "fallbacks": {"structural": 1, "builder_retry": 4},
    }  # fmt: skip
    queries = {
        "queries": 0, "calls_per_query": 0.0, "prompt_tokens_per_query": 0, "completion_tokens_per_query": 0,
        "seconds_per_query": 0.0, "llm_seconds_per_call": 0.0, "failed_paths": 0, "fallbacks": {},
    }  # fmt: skip
    report = {
        "model": "gemma-3-270m",
        "budget": 2000,
        "datasets": [
            {
                "dataset": "docs_en.jsonl", "ingestion": ingestion, "queries": queries, "skipped_documents": 40,
                "time_limit": {"seconds": 3600.0, "indexed": 2, "of": 68},
            }
        ],
    }  # fmt: skip
    table = format_cost_real(report)
    assert "docs_en.jsonl: the 40 shortest documents skipped (--skip-documents)." in table
    assert "docs_en.jsonl: time limit of 3600 s: 2 of 68 documents indexed." in table
    assert "| docs_en.jsonl | 2 | 1,000 | 6 | 4.00 / 0.040 | 150.0 | 3.0 | 50.0x | 1 of 2 |" in table
    assert "builder_retry 4, structural 1 |" in table
