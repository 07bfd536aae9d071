"""bench-cost: the scripted model's answers pass the product's own validation, and the command
measures ingestion, re-indexing and queries over real HTTP, then cleans up after itself."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from django.core.management import call_command

from documents.ingestion.boundaries import chunk_spans, locate_markers
from documents.ingestion.prompts import chunking_messages, tree_messages
from documents.ingestion.tree_schema import tree_from_json
from documents.models import Collection, Document
from fable_benchmarks.command import BenchCommand
from fable_benchmarks.report import COST_INGEST_HEADER, COST_QUERY_HEADER, COST_REINDEX_HEADER
from openfable.models import LLMCacheEntry
from openfable.token_counting import count_tokens
from tests.benchmarks import run_bench
from tests.fakes.llm import answers, model

TOPICS = ("revenue", "governance", "litigation", "hiring", "suppliers", "emissions")


def _document(name: str, paragraphs: int) -> str:
    lines = []
    for number in range(paragraphs):
        topic = TOPICS[number % len(TOPICS)]
        if number % 3 == 0:
            lines.append(f"{number // 3 + 1}. {name} {topic.title()}")
        sentence = (
            f"In year {2000 + number} {name} reported changes in {topic} across its {number + 2} divisions."
        )
        lines.append(" ".join([sentence] * 4))
    return "\n\n".join(lines)


def _request(messages: list[dict[str, str]], schema: str) -> dict[str, object]:
    return {"messages": messages, "response_format": {"type": "json_schema", "json_schema": {"name": schema}}}


def test_the_scripted_answers_pass_the_builders_validation_and_have_realistic_sizes() -> None:
    text = _document("Acme", 24)
    markers = answers.answer(_request(chunking_messages(text), "chunk_markers"))["markers"]
    chunks = chunk_spans(text, locate_markers(text, markers))
    words = [len(text[start:end].split()) for start, end in chunks]
    assert len(chunks) >= 4 and max(words) < 300, "chunks of about the 150 words the prompt asks for"

    tree_json = answers.answer(_request(tree_messages(text=text, chunks=chunks), "document_tree"))
    tree = tree_from_json(tree_json, text=text, chunks=chunks)  # raises when invalid
    assert tree.children and all(0 < len(child.title.split()) <= 10 for child in tree.children)
    assert all(20 <= len(child.summary.split()) <= 60 for child in tree.children), "two-sentence summaries"

    messages = [{"role": "user", "content": "one two three"}]
    assert model.messages_tokens(messages) == count_tokens("one two three") + 3 + 3
    with pytest.raises(answers.UnknownPromptError, match="no answer for schema 'other'"):
        answers.answer(_request(messages, "other"))


@pytest.mark.django_db(transaction=True)  # the client's worker threads write the LLM cache themselves
@pytest.mark.slow
def test_bench_cost_counts_the_tokens_and_reindexing_unchanged_text_costs_none(tmp_path: Path) -> None:
    docs = tmp_path / "docs.jsonl"
    rows = [
        {"doc_id": 1, "company_name": "Acme Mining", "content": _document("Acme", 12)},
        {"doc_id": 2, "company_name": "Borealis Shipping", "content": _document("Borealis", 30)},
    ]
    docs.write_text("\n".join(json.dumps(row) for row in rows))
    out, numbers = io.StringIO(), tmp_path / "cost.json"
    # Rows another test's worker threads committed may already be here; the run must remove its own.
    kept_before = set(LLMCacheEntry.objects.values_list("key", flat=True))
    call_command(
        BenchCommand(), "bench-cost", "--docs", str(docs), "--ingest-limit", "2", "--scopes", "3,12",
        "--queries", "2", "--nodes-per-document", "12", "--budget", "300", "--json", str(numbers), stdout=out,
    )  # fmt: skip
    table = out.getvalue()
    for header in (COST_INGEST_HEADER, COST_REINDEX_HEADER, COST_QUERY_HEADER):
        assert "| " + " | ".join(header) + " |" in table
    report = json.loads(numbers.read_text())

    (ingested,) = report["ingestion"]
    assert ingested["documents"] == 2 and ingested["fallbacks"] == 0 and ingested["failed"] == 0
    assert ingested["server_requests"] >= 4, "chunking and a tree per document, over HTTP"
    assert ingested["input_per_document_token"] > 0 and ingested["output_per_document_token"] > 0
    assert ingested["client_agrees"], "the jobs' token counts are the usage the server returned"

    (reindexed,) = report["reindex"]
    assert reindexed["documents"] == 2 and reindexed["llm_calls"] == ingested["llm_calls"]
    assert reindexed["cached_calls"] == reindexed["llm_calls"], "every prompt answered from the cache"
    assert (reindexed["server_requests"], reindexed["server_prompt_tokens"]) == (0, 0)
    assert "| docs.jsonl | 2 | " in table and " | 0 | 0 | 0 |" in table, "the re-index row shows 0"

    assert [row["documents_in_scope"] for row in report["queries"]] == [3, 12]
    for row in report["queries"]:
        assert row["calls_per_query"] == 2.0 and not row["failed_paths"], "LLMselect and LLMnavigate ran"
        assert 0 < row["input_max"] <= report["target_query_input_tokens"] and row["meets_target"]
        assert row["client_agrees"]

    left = set(LLMCacheEntry.objects.values_list("key", flat=True))
    assert report["cache_rows_deleted"] > 0 and left <= kept_before, "its cache rows are gone"
    assert not Collection.objects.exists() and not Document.objects.exists(), "its collections are gone"


@pytest.mark.django_db
def test_bench_cost_refuses_bad_input(tmp_path: Path) -> None:
    code, result = run_bench("bench-cost", "--docs", str(tmp_path / "missing.jsonl"))
    assert code == 1 and result["error"].endswith("missing.jsonl: no such file")
    docs = tmp_path / "docs.jsonl"
    docs.write_text('{"doc_id": 1, "content": "text"}\n')
    code, result = run_bench("bench-cost", "--docs", str(docs), "--scopes", "ten")
    assert code == 1 and "--scopes" in result["error"]
    code, result = run_bench("bench-cost", "--docs", str(docs), "--queries", "0")
    assert code == 1 and result["error"] == "--queries must be at least 1 (0 with --real-llm: ingestion only)"
    real = ("bench-cost", "--real-llm", "--docs", str(docs), "--queries-file", str(docs))
    code, result = run_bench(*real, "--skip-documents", "-1")
    assert code == 1 and result["error"] == "--skip-documents and --time-limit must be 0 (none) or more"
