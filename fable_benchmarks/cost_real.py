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
whose gold documents are among them. Each document is also indexed by the structural builder, on
the same machine in the same run, so the report gives the LLM builder's time against it. Fresh
collections, deleted at the end; the embedder is the configured one.

All of a dataset's documents take hours of a CPU model, more than one sitting: ``time_limit_s``
stops indexing once it has passed (the report says how many were indexed), and
``skip_documents`` starts after that many of the shortest, so a later run indexes the rest. Each
document's row is in the report: the parts' sums are the whole's.
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
from openfable.runner import stop_children
from retrieval.services import retrieve

Log = Callable[[str], None]


def bench_cost_real(
    *,
    datasets: Sequence[tuple[Path, Path]],
    ingest_limit: int = 2,
    queries: int = 5,
    budget: int = 2000,
    local_model: str = "",
    skip_documents: int = 0,
    time_limit_s: float = 0.0,
    log: Log | None = None,
) -> dict[str, Any]:
    """``datasets``: (documents JSONL, queries JSONL) pairs."""
    say: Log = log or (lambda message: None)
    chosen = local_model_choice(local_model)
    # A model name of this run's own: no answer cached by an earlier run is reused, and the rows
    # this run writes are never asked for again: those made while it ran are deleted at the end.
    alias = f"{chosen}-bench-{uuid.uuid4().hex[:8]}"
    started = timezone.now()
    deadline = Deadline(time_limit_s)
    with local_model_server(chosen, alias, say) as url, _pointed_at(alias, url):
        report: dict[str, Any] = {"model": chosen, "base_url": url, "budget": budget}
        try:
            report["datasets"] = [
                _dataset(
                    shortest_documents(docs, ingest_limit)[skip_documents:], docs.name, queries_path,
                    queries=queries, budget=budget, deadline=deadline, say=say,
                ) | {"skipped_documents": skip_documents}
                for docs, queries_path in datasets
            ]  # fmt: skip
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
        # Killed if it does not stop in time: the report is made by then and must not be lost to
        # a server still writing an answer nobody waits for.
        stop_children([server])


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


class Deadline:
    """``seconds`` from now (0: never): no further document is indexed once it has passed (the
    one in hand is finished)."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.ends = time.monotonic() + seconds if seconds else None

    def passed(self) -> bool:
        return self.ends is not None and time.monotonic() >= self.ends


def _dataset(
    items: Sequence[DatasetDocument],
    name: str,
    queries_path: Path,
    *,
    queries: int,
    budget: int,
    deadline: Deadline,
    say: Log,
) -> dict[str, Any]:
    """``items`` indexed by the LLM builder (then by the structural one, for its time), and
    ``queries`` bipath queries about them."""
    collection = collection_create(name=f"bench-cost-real {Path(name).stem} {uuid.uuid4().hex[:6]}")
    try:
        before = fallback_counts()
        indexed, by_doc_id = index_documents(collection, items, name, deadline=deadline, say=say)
        ingestion_fallbacks = counts_since(before)
        picked = [q for q in read_queries(queries_path) if set(q.doc_ids) & set(by_doc_id)][:queries]
        before = fallback_counts()
        measured = [_query(q, collection.pk, budget, say) for q in picked]
        report = {
            "dataset": name,
            "ingestion": _sum_ingestion(indexed) | {"fallbacks": _nonzero(ingestion_fallbacks)},
            "queries": _sum_queries(measured) | {"fallbacks": _nonzero(counts_since(before))},
            "documents": indexed,
        }
        if len(indexed) < len(items):
            report["time_limit"] = {"seconds": deadline.seconds, "indexed": len(indexed), "of": len(items)}
        return report
    finally:
        collection_delete(collection=collection)


def index_documents(
    collection: Collection, items: Sequence[DatasetDocument], name: str, *, deadline: Deadline, say: Log
) -> tuple[list[dict[str, Any]], dict[Any, int]]:
    """Each of ``items`` indexed into ``collection`` by the LLM builder, then into a collection of
    its own by the structural builder, one after the other, until ``deadline``: a row per
    document (both times), and the LLM-built documents' ids by doc_id."""
    indexed: list[dict[str, Any]] = []
    by_doc_id: dict[Any, int] = {}
    structural = collection_create(name=f"{collection.name} structural")
    try:
        for item in items:
            built, seconds, job = _index(collection, item, Document.Builder.LLM)
            _, structural_seconds, _ = _index(structural, item, Document.Builder.STRUCTURAL)
            indexed.append(_indexed(item, job, built, seconds, structural_seconds))
            by_doc_id[item.doc_id] = built.pk
            say(
                f"{name}: indexed {item.doc_id} in {seconds:.0f} s ({built.builder}); "
                f"structural builder {structural_seconds:.1f} s"
            )
            if deadline.passed() and len(indexed) < len(items):
                say(f"{name}: time limit, {len(indexed)} of {len(items)} documents indexed")
                break
    finally:
        collection_delete(collection=structural)
    return indexed, by_doc_id


def _index(collection: Collection, item: DatasetDocument, builder: str) -> tuple[Document, float, Any]:
    """``item`` added by ``builder`` and its job run here: the document, the job's wall time, the job."""
    created = add_dataset_document(collection, item, builder=builder)
    started = time.perf_counter()
    run = job_run_now(document_id=created.document.pk)
    seconds = time.perf_counter() - started
    if run is None:
        raise BenchInputError(f"document {item.doc_id} had no ingestion job to run")
    created.document.refresh_from_db()
    return created.document, seconds, run.job


def _indexed(
    item: DatasetDocument, job: Any, document: Document, seconds: float, structural_seconds: float
) -> dict[str, Any]:
    return {
        "doc_id": item.doc_id,
        "document_tokens": document.token_count,
        "builder": document.builder,
        "calls": job.llm_calls,
        "prompt_tokens": job.llm_prompt_tokens,
        "completion_tokens": job.llm_completion_tokens,
        "seconds": round(seconds, 2),
        "structural_seconds": round(structural_seconds, 2),
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
    totals = {key: sum(row[key] for row in indexed) for key in _SUMMED}
    seconds, structural = totals["seconds"], totals["structural_seconds"]
    return {
        "documents": len(indexed),
        **{key: totals[key] for key in ("document_tokens", "calls", "prompt_tokens", "completion_tokens")},
        "structural_fallbacks": sum(row["builder"] != Document.Builder.LLM for row in indexed),
        "seconds": round(seconds, 1),
        "seconds_per_call": round(seconds / (totals["calls"] or 1), 2),
        "structural_seconds": round(structural, 1),
        "time_against_structural": round(seconds / structural, 1) if structural else None,
    }


# A document row's numbers that add up over documents.
_SUMMED = ("document_tokens", "calls", "prompt_tokens", "completion_tokens", "seconds", "structural_seconds")


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
