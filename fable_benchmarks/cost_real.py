"""`python -m fable_benchmarks bench-cost --real-llm`: what the LLM paths cost against a real model.

``bench-cost`` measures tokens against a scripted model that always answers well. This one points
the product's client at a real one, the local model ``OPENFABLE_LLM=local`` serves (Gemma 3 270M
through llama-cpp-python, started here from ``openfable.local_llm`` on a port of its own), and
measures what that costs on this machine (``local_model``: which of ``local_llm.MODELS``, by default
``OPENFABLE_LOCAL_LLM_MODEL``): per document indexed by the LLM builder and per
``bipath`` query, the calls, input and output tokens (from the ``usage`` the server returned),
wall time per call and per query, and every fallback the model caused (``openfable.llm.fallbacks``).

The documents are the ``ingest_limit`` shortest of each file (a 270M model on 2 cores reads about
a few hundred tokens a second); the queries are the first ``queries`` of the matching queries file
whose gold documents are among them. Fresh collections, deleted at the end; the embedder is the
configured one.
"""

from __future__ import annotations

import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from django.conf import settings
from django.test import override_settings
from django.utils import timezone

from documents.models import Collection, Document
from documents.services.collections import collection_create, collection_delete
from documents.services.documents import DocumentCreateResult, document_create
from documents.services.jobs import job_run_now
from fable_benchmarks import BenchInputError
from fable_benchmarks.datasets import BenchQuery, DatasetDocument, read_documents, read_queries
from openfable import local_llm
from openfable.llm import counts_since, fallback_counts
from openfable.llm_endpoints import forget_endpoints
from openfable.models import LLMCacheEntry
from retrieval.services import retrieve

Log = Callable[[str], None]


def bench_cost_real(
    *,
    datasets: Sequence[tuple[Path, Path]],
    ingest_limit: int = 2,
    queries: int = 5,
    budget: int = 2000,
    local_model: str = "",
    log: Log | None = None,
) -> dict[str, Any]:
    """``datasets``: (documents JSONL, queries JSONL) pairs."""
    say: Log = log or (lambda message: None)
    chosen = local_model_choice(local_model)
    # A model name of this run's own: no answer cached by an earlier run is reused, and the rows
    # this run writes are never asked for again: those made while it ran are deleted at the end.
    alias = f"{chosen}-bench-{uuid.uuid4().hex[:8]}"
    started = timezone.now()
    with local_model_server(chosen, alias, say) as url, _pointed_at(alias, url):
        report: dict[str, Any] = {"model": chosen, "base_url": url, "budget": budget}
        try:
            report["datasets"] = [
                _dataset(docs, queries_path, limit=ingest_limit, queries=queries, budget=budget, say=say)
                for docs, queries_path in datasets
            ]
        finally:
            report["cache_rows_deleted"] = LLMCacheEntry.objects.filter(created_at__gte=started).delete()[0]
    return report


def local_model_choice(name: str, *, flag: str = "--local-model") -> str:
    """The alias of the local model ``name`` (empty: OPENFABLE_LOCAL_LLM_MODEL's), or BenchInputError."""
    try:
        return local_llm.model_named(name or str(settings.LOCAL_LLM_MODEL)).alias
    except local_llm.UnknownModelError as error:
        raise BenchInputError(f"{flag}: {error}") from None


@contextmanager
def local_model_server(name: str, alias: str, say: Log) -> Iterator[str]:
    """The local model ``name`` served as ``OPENFABLE_LLM=local`` serves it (answering to
    ``alias``), on a free port, for the block: its base URL."""
    missing = local_llm.missing_packages(name)
    if missing:
        raise BenchInputError(f"the local model {name} needs {', '.join(missing)}: run make local-llm")
    model = local_llm.ensure_model(Path(settings.DATA_DIR), name)
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = int(sock.getsockname()[1])
    threads = int(settings.LOCAL_LLM_THREADS)
    server = subprocess.Popen(
        local_llm.server_command(sys.executable, model=model, port=port, threads=threads, alias=alias),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=local_llm.server_environment(),
    )
    url = local_llm.base_url(port)
    try:
        if not local_llm.wait_until_ready(url, timeout_s=120):
            raise BenchInputError("the local model server did not answer within 120 s")
        say(f"local model {name} at {url}")
        yield url
    finally:
        server.terminate()
        server.wait(timeout=30)


@contextmanager
def _pointed_at(alias: str, url: str) -> Iterator[None]:
    forget_endpoints()
    with override_settings(
        LLM_MODEL=alias,
        LLM_BASE_URL=url,
        LLM_API_KEY="",
        LLM_MAX_CONCURRENCY=1,
        LLM_TIMEOUT=180.0,
        LLM_BREAKER_THRESHOLD=0,
    ):
        yield


def shortest_documents(path: Path, count: int) -> list[DatasetDocument]:
    """The ``count`` shortest documents of a JSONL dataset: the real model's time grows with each."""
    return sorted(read_documents(path), key=lambda item: len(item.content))[:count]


def add_dataset_document(
    collection: Collection, item: DatasetDocument, *, builder: str
) -> DocumentCreateResult:
    """``item`` added to ``collection`` by the product's own service, not queued: the caller runs
    its job in this process."""
    return document_create(
        collection=collection,
        content=item.content,
        title=item.title,
        metadata={"doc_id": item.doc_id},
        builder=builder,
        queue=False,
    )


def _dataset(
    docs: Path, queries_path: Path, *, limit: int, queries: int, budget: int, say: Log
) -> dict[str, Any]:
    items = shortest_documents(docs, limit)
    collection = collection_create(name=f"bench-cost-real {docs.stem} {uuid.uuid4().hex[:6]}")
    try:
        before = fallback_counts()
        indexed, by_doc_id = [], {}
        for item in items:
            created = add_dataset_document(collection, item, builder=Document.Builder.LLM)
            started = time.perf_counter()
            run = job_run_now(document_id=created.document.pk)
            seconds = time.perf_counter() - started
            if run is None:
                raise BenchInputError(f"document {item.doc_id} had no ingestion job to run")
            created.document.refresh_from_db()
            indexed.append(_indexed(run.job, created.document, seconds))
            by_doc_id[item.doc_id] = created.document.pk
            say(f"{docs.name}: indexed {item.doc_id} in {seconds:.0f} s ({created.document.builder})")
        ingestion_fallbacks = counts_since(before)
        picked = [q for q in read_queries(queries_path) if set(q.doc_ids) & set(by_doc_id)][:queries]
        before = fallback_counts()
        measured = [_query(q, collection.pk, budget, say) for q in picked]
        return {
            "dataset": docs.name,
            "ingestion": _sum_ingestion(indexed) | {"fallbacks": _nonzero(ingestion_fallbacks)},
            "queries": _sum_queries(measured) | {"fallbacks": _nonzero(counts_since(before))},
        }
    finally:
        collection_delete(collection=collection)


def _indexed(job: Any, document: Document, seconds: float) -> dict[str, Any]:
    return {
        "document_tokens": document.token_count,
        "builder": document.builder,
        "calls": job.llm_calls,
        "prompt_tokens": job.llm_prompt_tokens,
        "completion_tokens": job.llm_completion_tokens,
        "seconds": seconds,
    }


def _query(query: BenchQuery, collection: int, budget: int, say: Log) -> dict[str, Any]:
    started = time.perf_counter()
    result = retrieve(
        query=query.text, token_budget=budget, mode="bipath", collection=collection, use_cache=False
    )
    seconds = time.perf_counter() - started
    llm_ms = float(result.timings_ms.get("llm_select", 0) + result.timings_ms.get("llm_navigate", 0))
    say(f"query {query.query_id}: {result.llm_usage.calls} calls, {seconds:.1f} s")
    return {
        "calls": result.llm_usage.calls,
        "prompt_tokens": result.llm_usage.prompt_tokens,
        "completion_tokens": result.llm_usage.completion_tokens,
        "seconds": seconds,
        "llm_seconds": llm_ms / 1000,
        "failed_paths": sum(1 for path in result.paths if path.failed),
    }


def _sum_ingestion(indexed: list[dict[str, Any]]) -> dict[str, Any]:
    calls = sum(row["calls"] for row in indexed) or 1
    seconds = sum(row["seconds"] for row in indexed)
    return {
        "documents": len(indexed),
        "document_tokens": sum(row["document_tokens"] for row in indexed),
        "structural_fallbacks": sum(row["builder"] != Document.Builder.LLM for row in indexed),
        "calls": sum(row["calls"] for row in indexed),
        "prompt_tokens": sum(row["prompt_tokens"] for row in indexed),
        "completion_tokens": sum(row["completion_tokens"] for row in indexed),
        "seconds": round(seconds, 1),
        "seconds_per_call": round(seconds / calls, 2),
    }


def _sum_queries(measured: list[dict[str, Any]]) -> dict[str, Any]:
    count = len(measured) or 1
    calls = sum(row["calls"] for row in measured)
    return {
        "queries": len(measured),
        "calls_per_query": round(calls / count, 2),
        "prompt_tokens_per_query": round(sum(row["prompt_tokens"] for row in measured) / count),
        "completion_tokens_per_query": round(sum(row["completion_tokens"] for row in measured) / count),
        "seconds_per_query": round(sum(row["seconds"] for row in measured) / count, 2),
        "llm_seconds_per_call": round(sum(row["llm_seconds"] for row in measured) / (calls or 1), 2),
        "failed_paths": sum(row["failed_paths"] for row in measured),
    }


def _nonzero(counts: dict[str, int]) -> dict[str, int]:
    return {kind: count for kind, count in counts.items() if count}
