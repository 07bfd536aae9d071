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
from dataclasses import dataclass, field
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
    loaded = [_load(dataset, queries=queries, say=say) for dataset in datasets]
    _analyze()
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
    timings = _time_all(loaded, budget=budget, say=say)
    report["datasets"] = [timings.entry(item) for item in loaded]
    return report


def _time_all(loaded: Sequence[_Loaded], *, budget: int, say: Log) -> _Timings:
    """A few queries to warm each collection up, then every query timed."""
    timings = _Timings(budget)
    for item in loaded:
        for text in item.texts[:WARM_UP_QUERIES]:
            timings.run(item.collection, text)
    say(f"timing {sum(len(item.texts) for item in loaded)} queries over {len(loaded)} collections")
    # Round robin over the collections, so that none has the caches to itself.
    for number in range(max(len(item.texts) for item in loaded)):
        for item in loaded:
            if number < len(item.texts):
                timings.time(item.collection, item.texts[number])
    return timings


@dataclass(frozen=True)
class _Loaded:
    dataset: Dataset
    collection: Collection
    texts: list[str]  # the queries to ask of it


def _load(dataset: Dataset, *, queries: int, say: Log) -> _Loaded:
    """The dataset's collection (ingested now unless named) and a sample of its queries."""
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
    return _Loaded(dataset, collection, texts)


def _analyze() -> None:
    with connection.cursor() as cursor:
        # Fresh statistics, as a running deployment's autovacuum keeps them: the plans are the real ones.
        for table in ("documents_node", "documents_document", "documents_documentterm"):
            cursor.execute(f"ANALYZE {table}")


@dataclass
class _Timings:
    """Per collection: each query's wall time, the server's stage timings, and the strategy the
    vector path chose."""

    budget: int
    wall: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    stages: dict[str, dict[str, list[float]]] = field(
        default_factory=lambda: defaultdict(lambda: defaultdict(list))
    )
    strategies: dict[str, dict[str, int]] = field(
        default_factory=lambda: defaultdict(lambda: defaultdict(int))
    )

    def run(self, collection: Collection, text: str) -> tuple[float, Any]:
        tick = time.perf_counter()
        result = services.retrieve(
            query=text, token_budget=self.budget, mode="vector", collection=collection.slug, use_cache=False
        )
        return (time.perf_counter() - tick) * 1000, result

    def time(self, collection: Collection, text: str) -> None:
        ms, result = self.run(collection, text)
        self.wall[collection.slug].append(ms)
        for stage, value in dict(result.timings_ms).items():
            self.stages[collection.slug][stage].append(float(value))
        path = result.path("vector")
        strategy = str((path.detail or {}).get("strategy", "?")) if path else "?"
        self.strategies[collection.slug][strategy] += 1

    def entry(self, item: _Loaded) -> dict[str, Any]:
        """One dataset's row of the report."""
        slug = item.collection.slug
        in_collection = document_list(user=None, collection=item.collection)
        server = _summary(self.stages[slug]["total"])
        return {
            "docs": str(item.dataset.docs),
            "queries_file": str(item.dataset.queries),
            "collection": slug,
            "documents": in_collection.count(),
            "nodes": in_collection.aggregate(nodes=Count("nodes"))["nodes"],
            "queries": len(item.texts),
            "server": server,
            "wall": _summary(self.wall[slug]),
            "stages": {stage: _summary(values) for stage, values in self.stages[slug].items()},
            "strategy": dict(self.strategies[slug]),
            "collection_index": _collection_index_plan(item.collection),
            "meets_target": server["p50"] <= TARGET_P50_MS and server["p95"] <= TARGET_P95_MS,
        }


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
