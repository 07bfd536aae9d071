"""bench-latency on a small synthetic corpus: it times real queries and cleans up after itself."""

from __future__ import annotations

import numpy as np
import pytest
from django.conf import settings

from documents.models import Collection, Node
from retrieval.bench.latency_bench import bench_latency, format_latency
from retrieval.result import RetrievalInputError
from retrieval.services import retrieve

# The loader writes with COPY on its own connection: the test needs committed transactions.
pytestmark = pytest.mark.django_db(transaction=True)


def test_bench_latency_times_vector_mode_and_the_bare_index_then_deletes_its_corpus() -> None:
    report = bench_latency(nodes=400, nodes_per_document=40, queries=8, budget=500)
    assert report["corpus"]["collection_nodes"] == 400
    assert report["queries"] == 8 and report["query_words"] >= 1
    for measure in ("vector_server", "vector_wall", "bare_topk"):
        assert report[measure]["p50"] > 0
    assert {"vector", "lexical", "total"} <= set(report["vector_stages"])
    assert report["bare_uses_hnsw"] in (True, False) and 0 <= report["hnsw_recall_at_k"] <= 1
    table = format_latency(report)
    assert "| vector mode, server-side (timings_ms.total) |" in table and "bare pgvector top-K" in table
    assert report["collection"] is None
    assert not Collection.objects.exists() and not Node.objects.exists()


def test_a_query_embedding_of_the_wrong_shape_is_refused() -> None:
    with pytest.raises(RetrievalInputError, match=f"must be {settings.EMBEDDING_DIMENSIONS} finite numbers"):
        retrieve(query="anything", token_budget=500, query_embedding=np.zeros(3))
