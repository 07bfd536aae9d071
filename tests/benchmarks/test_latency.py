"""bench-latency on a small synthetic corpus: the tree shape, the rows it writes through the tree
service, real timed queries, and the cleanup."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from django.conf import settings
from django.core.management import call_command
from django.db import connection

from documents.ingestion.tree import LEAF, ROOT, SECTION, SUBSECTION
from documents.models import Collection, Document, DocumentTerm, IngestionJob, Node
from fable_benchmarks import BenchInputError
from fable_benchmarks.command import BenchCommand
from fable_benchmarks.corpus_latency import Dataset, bench_corpus_latency
from fable_benchmarks.latency import HNSW_INDEX, bench_latency, synthetic_rows, tree_template
from fable_benchmarks.report import format_corpus_latency, format_latency
from retrieval.result import RetrievalInputError
from retrieval.services import retrieve
from tests.benchmarks import run_bench


def test_tree_template_keeps_every_leaf_under_sections_and_subsections() -> None:
    template = tree_template(100)
    assert len(template) == 100 and template[0].kind == ROOT and template[0].parent is None
    kinds = [node.kind for node in template]
    assert kinds.count(SECTION) == 4 and kinds.count(SUBSECTION) == 12 and kinds.count(LEAF) == 83
    leaves = [node for node in template if node.kind == LEAF]
    assert [node.leaf for node in leaves] == list(range(83)), "leaves in document order"
    assert all(template[node.parent].kind == SUBSECTION for node in leaves if node.parent is not None)
    with pytest.raises(BenchInputError, match="too few"):
        tree_template(2)


def test_synthetic_rows_are_exact_spans_with_paths_and_token_sums() -> None:
    template = tree_template(12)
    leaf_texts = [f"leaf number {n} words." for n in range(sum(node.kind == LEAF for node in template))]
    content = "\n\n".join(leaf_texts)
    rows = synthetic_rows(template, title="Doc", leaf_texts=leaf_texts, leaf_tokens=[2] * len(leaf_texts))
    assert [row.order for row in rows] == list(range(len(template)))
    root = rows[0]
    assert (root.toc_path, root.start_char, root.end_char) == ("Doc", 0, len(content))
    assert root.token_count == 2 * len(leaf_texts)
    for row in rows:
        if row.kind == LEAF:
            assert row.content == content[row.start_char : row.end_char] and row.title == ""
            assert row.parent_order is not None and row.toc_path == rows[row.parent_order].toc_path
            assert row.embed_text == row.content
        else:
            assert row.content == "" and row.title and row.summary
            assert row.toc_path.endswith(row.title) and row.embed_text.startswith(row.toc_path)


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)  # the timed queries run as the server sees them: committed
def test_bench_latency_times_vector_mode_and_the_bare_index_then_deletes_its_corpus() -> None:
    # Large enough that the planner prefers the HNSW index to a sequential scan even when earlier
    # tests left dead rows behind (a few hundred nodes is not, and the plan check is asserted).
    report = bench_latency(nodes=2000, nodes_per_document=40, queries=8, budget=500)
    assert report["corpus"] == {"collection_nodes": 2000, "collection_documents": 50, "table_nodes": 2000}
    assert report["load"]["documents"] == 50 and report["load"]["write_s"] > 0
    assert report["queries"] == 8 and report["query_words"] >= 1
    for measure in ("vector_server", "vector_wall", "bare_topk", "bare_topk_default_ef", "query_embedding"):
        assert 0 < report[measure]["p50"] <= report[measure]["p95"]
    # The real embedding of each query text is timed and added to the server time.
    assert report["vector_server_with_embedding"]["p50"] > report["vector_server"]["p50"]
    assert {"vector", "lexical", "total"} <= set(report["vector_stages"])
    assert sum(report["vector_strategy"].values()) == 8
    assert report["bare_uses_hnsw"] is True, "the bare top-K must be an index scan, or it measures nothing"
    assert report["hnsw_recall_at_k"] >= 0.9, "at this size the index finds nearly the exact top-K"
    table = format_latency(report)
    assert "| vector mode, server-side (timings_ms.total) |" in table and "bare pgvector top-K" in table
    assert "| vector mode, server-side + the query text's real embedding |" in table
    assert report["collection"] is None
    for model in (Collection, Document, Node, DocumentTerm, IngestionJob):
        assert not model.objects.exists(), f"{model.__name__} rows left behind"


@pytest.mark.django_db(transaction=True)
@pytest.mark.slow
def test_a_kept_corpus_is_indexed_and_reused_and_the_index_survives_a_rebuild() -> None:
    report = bench_latency(
        nodes=160, nodes_per_document=40, queries=3, budget=500, keep=True, rebuild_index=True
    )
    slug = report["collection"]
    assert slug and "index_build_s" in report["load"]
    with connection.cursor() as cursor:
        cursor.execute("SELECT indexdef FROM pg_indexes WHERE indexname = %s", [HNSW_INDEX])
        (definition,) = cursor.fetchone() or ("",)
    assert "USING hnsw" in definition, "the dropped index is built again"
    documents = Document.objects.filter(collection__slug=slug)
    assert documents.count() == 4
    assert set(documents.values_list("status", "embedding_model")) == {(Document.Status.INDEXED, "synthetic")}
    assert set(IngestionJob.objects.values_list("status", "node_count")) == {
        (IngestionJob.Status.SUCCEEDED, 40)
    }
    assert DocumentTerm.objects.filter(document__in=documents).exists(), "the lexical index is written too"

    out = io.StringIO()
    call_command(BenchCommand(), "bench-latency", "--collection", slug, "--queries", "2", stdout=out)
    table = out.getvalue()
    assert "bench-latency: 160 synthetic nodes in 4 documents" in table
    assert f"Kept collection: {slug}" in table and "Load:" not in table, "nothing was loaded again"
    assert Collection.objects.filter(slug=slug).exists(), "a reused collection is never deleted"


@pytest.mark.django_db
def test_bench_latency_refuses_bad_input() -> None:
    code, result = run_bench("bench-latency", "--nodes", "5")
    assert code == 1 and "--nodes must be at least 10" in result["error"]
    code, result = run_bench("bench-latency", "--queries", "0")
    assert code == 1 and "--queries must be at least 1" in result["error"]
    code, result = run_bench("bench-latency", "--collection", "nope")
    assert code == 1 and result["error"] == "--collection nope: no such collection"


@pytest.mark.django_db
def test_a_query_embedding_of_the_wrong_shape_is_refused() -> None:
    with pytest.raises(RetrievalInputError, match=f"must be {settings.EMBEDDING_DIMENSIONS} finite numbers"):
        retrieve(query="anything", token_budget=500, query_embedding=np.zeros(3))


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)  # committed, as a server sees it; the index builds after commit
def test_bench_latency_on_ingested_corpora_times_each_collection_with_every_other_loaded(
    tmp_path: Path, settings: Any
) -> None:
    settings.DATA_DIR = tmp_path / "data"  # the passage cache goes here
    settings.RETRIEVAL_COLLECTION_INDEX_MIN_NODES = 2  # the tiny collections get their own index
    first = _dataset(tmp_path, "first", ["Copper mining in Chile", "Cardiology wards"])
    second = _dataset(tmp_path, "second", ["Wind farms at sea", "Grain harvests"])
    kept = bench_corpus_latency([Dataset(*first)], queries=2, budget=200)  # ingests it
    slug = kept["datasets"][0]["collection"]
    report = bench_corpus_latency([Dataset(*first, slug), Dataset(*second)], queries=2, budget=200)
    entries = report["datasets"]
    assert entries[0]["collection"] == slug, "named: reused, not ingested again"
    assert Collection.objects.count() == 2 and report["loaded"]["collections"] == 2
    for entry in entries:
        assert entry["queries"] == 2 and entry["documents"] == 2
        assert 0 < entry["server"]["p50"] <= entry["server"]["p95"]
        assert {"embed", "vector", "lexical", "total"} <= set(entry["stages"]), "the embedding is a stage"
        assert entry["stages"]["embed"]["p50"] > 0
        assert entry["strategy"] == {"hnsw_collection": 2}, "each query filtered to its collection's index"
        assert entry["collection_index"] in {"used", "not used by the plan"}
    table = format_corpus_latency(report)
    assert "2 collections loaded" in table and f"| {slug} |" in table and "| embed |" in table


def _dataset(tmp_path: Path, name: str, topics: list[str]) -> tuple[Path, Path]:
    docs, queries = tmp_path / f"{name}-docs.jsonl", tmp_path / f"{name}-queries.jsonl"
    records = [
        {
            "doc_id": f"{name}-{number}",
            "company_name": topic,
            "content": f"{topic}.\n\n" + " ".join(f"{topic} fact number {n} is recorded." for n in range(12)),
        }
        for number, topic in enumerate(topics)
    ]
    docs.write_text("".join(json.dumps(record) + "\n" for record in records))
    asked = [
        {
            "query": {"query_id": number, "query_type": "Factual", "content": f"What about {topic}?"},
            "ground_truth": {
                "doc_ids": [record["doc_id"]],
                "references": [f"{topic} fact number 3 is recorded."],
            },
        }
        for number, (topic, record) in enumerate(zip(topics, records, strict=True))
    ]
    queries.write_text("".join(json.dumps(record) + "\n" for record in asked))
    return docs, queries


@pytest.mark.django_db
def test_bench_latency_on_corpora_refuses_bad_input(tmp_path: Path) -> None:
    code, result = run_bench("bench-latency", "--dataset", "only-one.jsonl")
    assert code == 1 and "--dataset takes DOCS QUERIES [COLLECTION], got 1 value(s)" in result["error"]
    code, result = run_bench(
        "bench-latency", "--dataset", str(tmp_path / "a.jsonl"), str(tmp_path / "b.jsonl")
    )
    assert code == 1 and "no such file" in result["error"]


def test_every_latency_is_printed_beside_its_ratio_to_the_query_embedding() -> None:
    # Machines differ by 1.5-2.5x in absolute times; the ratio to the same run's embedding does not.
    def times(p50: float, p95: float) -> dict[str, float]:
        return {"p50": p50, "p95": p95}

    report: dict[str, Any] = {
        "corpus": {"collection_nodes": 10, "collection_documents": 1, "table_nodes": 10},
        "queries": 3, "budget": 500, "top_k": 50, "query_words": 5,
        "vector_server": times(30.0, 60.0), "vector_wall": times(31.0, 62.0),
        "query_embedding": times(20.0, 25.0), "vector_server_with_embedding": times(50.0, 80.0),
        "vector_stages": {"lexical": times(4.0, 9.0), "total": times(30.0, 60.0)},
        "vector_strategy": {"hnsw": 3}, "bare_topk": {**times(2.0, 4.0), "ef_search": 200},
        "bare_topk_default_ef": {**times(1.0, 2.0), "ef_search": 40}, "ratio_p50": 15.0,
        "bare_uses_hnsw": True, "hnsw_recall_at_k": 0.9, "target_p50_ms": 50.0, "meets_target": True,
        "target_with_embedding_p50_ms": 60.0, "meets_target_with_embedding": True,
    }  # fmt: skip
    table = format_latency(report)
    assert "| measure | p50 ms | p95 ms | x embedding p50 (p50 / p95) | note |" in table
    assert (
        "| vector mode, server-side + the query text's real embedding | 50.0 | 80.0 | 2.50 / 4.00 |" in table
    )
    assert "| vector mode, server-side (timings_ms.total) | 30.0 | 60.0 | 1.50 / 3.00 |" in table
    assert "| lexical | 4.0 | 9.0 | 0.20 / 0.45 |" in table

    entry = {
        "collection": "dragonball", "documents": 2, "nodes": 9, "queries": 3,
        "server": times(37.0, 50.0), "wall": times(38.0, 51.0), "strategy": {"hnsw_collection": 3},
        "collection_index": "used", "meets_target": True,
        "stages": {"embed": times(25.0, 30.0), "lexical": times(2.5, 5.0)},
    }  # fmt: skip
    corpus = {
        "loaded": {"collections": 1, "documents": 2, "nodes": 9}, "mode": "vector", "budget": 2000,
        "target_ms": {"p50": 50.0, "p95": 100.0}, "datasets": [entry],
    }  # fmt: skip
    table = format_corpus_latency(corpus)
    assert "| dragonball | 2 | 9 | 3 | 37.0 | 50.0 | 1.48 / 2.00 | 38.0 |" in table
    assert "| lexical | 2.5 / 5.0; 0.10 / 0.20 |" in table
