"""`python -m fable_benchmarks bench-latency --dataset DOCS QUERIES [COLLECTION]`: latency on real, ingested corpora.

What a deployment sees: several collections loaded in one table, each query filtered to one of
them, its text embedded by the configured embedder. For each dataset (a DragonBall-format pair of
JSONL files, as bench-retrieval reads) the collection is reused when named (its documents are
checked against the file) or else ingested now (structural builder, the passage cache of
bench-retrieval) and kept, so the next run can name it. Then every collection stays loaded while
each dataset's queries run through ``retrieval.services.retrieve`` in ``vector`` mode, filtered
to that dataset's collection, without the query cache: the server-side ``timings_ms`` (the query
embedding included: its ``embed`` stage), each stage, and the wall time of the call.

Rounds alternate between the datasets (one query of each in turn), as a shared server would
serve them, after a few warm-up queries per dataset that are not counted.
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from django.conf import settings
from django.db import connection
from django.db.models import Count

from documents.models import Collection, Node, collection_index_name
from documents.selectors import collection_index_ready, collection_list, document_list
from fable_benchmarks import BenchInputError
from fable_benchmarks.datasets import read_documents, read_queries
from fable_benchmarks.metrics import percentile
from fable_benchmarks.retrieval import collection_for, stratified_sample
from retrieval import services
from retrieval.paths import vector as vector_paths

Log = Callable[[str], None]
WARM_UP_QUERIES = 5
TARGET_P50_MS = 50.0
TARGET_P95_MS = 100.0


@dataclass(frozen=True)
class Dataset:
    docs: Path
    queries: Path
    collection: str = ""  # a collection that already holds these documents; else ingest them


def bench_corpus_latency(
    datasets: Sequence[Dataset],
    *,
    queries: int = 200,
    budget: int = 2000,
    log: Log | None = None,
) -> dict[str, Any]:
    say: Log = log or (lambda message: None)
    loaded: list[tuple[Dataset, Collection, list[str]]] = []
    for dataset in datasets:
        records = read_documents(dataset.docs)
        answerable = [query for query in read_queries(dataset.queries) if query.references]
        texts = [query.text for query in stratified_sample(answerable, queries)]
        if not texts:
            raise BenchInputError(f"{dataset.queries}: no query with references")
        collection, _, ingestion = collection_for(
            records, collection_slug=dataset.collection, needed=["vector"], say=say
        )
        if collection is None:  # collection_for ingests for "vector": never None here
            raise BenchInputError(f"{dataset.docs}: nothing to query")
        if not ingestion.get("reused"):
            say(f"{dataset.docs}: ingested into {collection.slug} (kept: name it next time)")
        loaded.append((dataset, collection, texts))

    with connection.cursor() as cursor:
        # Fresh statistics, as a running deployment's autovacuum keeps them: the plans are the real ones.
        for table in ("documents_node", "documents_document", "documents_documentterm"):
            cursor.execute(f"ANALYZE {table}")
    all_documents = document_list(user=None)
    report: dict[str, Any] = {
        "budget": budget,
        "mode": "vector",
        "loaded": {
            "collections": collection_list(user=None).count(),
            "documents": all_documents.count(),
            "nodes": all_documents.aggregate(nodes=Count("nodes"))["nodes"],
        },
        "target_ms": {"p50": TARGET_P50_MS, "p95": TARGET_P95_MS},
        "datasets": [],
    }

    def run(collection: Collection, text: str) -> tuple[float, Any]:
        tick = time.perf_counter()
        result = services.retrieve(
            query=text, token_budget=budget, mode="vector", collection=collection.slug, use_cache=False
        )
        return (time.perf_counter() - tick) * 1000, result

    for _, collection, texts in loaded:
        for text in texts[:WARM_UP_QUERIES]:
            run(collection, text)
    wall: dict[str, list[float]] = defaultdict(list)
    stages: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    strategies: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    rounds = max(len(texts) for _, _, texts in loaded)
    say(f"timing {sum(len(texts) for _, _, texts in loaded)} queries over {len(loaded)} collections")
    for number in range(rounds):
        for _, collection, texts in loaded:
            if number >= len(texts):
                continue
            ms, result = run(collection, texts[number])
            wall[collection.slug].append(ms)
            for stage, value in dict(result.timings_ms).items():
                stages[collection.slug][stage].append(float(value))
            path = result.path("vector")
            strategy = str((path.detail or {}).get("strategy", "?")) if path else "?"
            strategies[collection.slug][strategy] += 1

    for dataset, collection, texts in loaded:
        in_collection = document_list(user=None, collection=collection)
        server = stages[collection.slug]["total"]
        entry = {
            "docs": str(dataset.docs),
            "queries_file": str(dataset.queries),
            "collection": collection.slug,
            "documents": in_collection.count(),
            "nodes": in_collection.aggregate(nodes=Count("nodes"))["nodes"],
            "queries": len(texts),
            "server": _summary(server),
            "wall": _summary(wall[collection.slug]),
            "stages": {stage: _summary(values) for stage, values in stages[collection.slug].items()},
            "strategy": dict(strategies[collection.slug]),
            "collection_index": _collection_index_plan(collection),
        }
        entry["meets_target"] = (
            entry["server"]["p50"] <= TARGET_P50_MS and entry["server"]["p95"] <= TARGET_P95_MS
        )
        report["datasets"].append(entry)
    return report


def _collection_index_plan(collection: Collection) -> str:
    """Whether the collection has its own HNSW index and PostgreSQL's plan for its filtered scan
    uses it (the vector path's strategy says which scan it chose; this shows the planner agrees)."""
    if not collection_index_ready(collection.pk):
        return "none"
    root = (
        Node.objects.filter(collection_id=collection.pk, embedding__isnull=False)
        .values_list("embedding", flat=True)
        .first()
    )
    literal = vector_paths.vector_literal(np.asarray(root))
    sql = vector_paths.collection_hnsw_sql(collection.pk)
    with connection.cursor() as cursor:
        cursor.execute("EXPLAIN " + sql, vector_paths.hnsw_params(literal, limit=settings.RETRIEVAL_TOP_K))
        plan = "\n".join(row[0] for row in cursor.fetchall())
    return "used" if collection_index_name(collection.pk) in plan else "not used by the plan"


def _summary(values: Sequence[float]) -> dict[str, float]:
    return {"p50": round(percentile(values, 50), 2), "p95": round(percentile(values, 95), 2)}
