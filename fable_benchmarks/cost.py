"""`python -m fable_benchmarks bench-cost`: what the LLM paths cost in tokens, measured over real HTTP.

The product's LLM client is pointed at a scripted model (``tests.fakes.llm``) that speaks
OpenAI's chat-completions protocol on 127.0.0.1 and answers every prompt validly, with outputs of
the size a competent model writes. Each run uses a model name of its own, so no answer cached by
an earlier run is reused; the LLM cache rows it wrote are deleted at the end, with its throw-away
collections. Tokens are counted twice: by the server, from the requests it received
(``openfable.token_counting``, cl100k_base, plus OpenAI's chat framing), and by the client, from the
``usage`` the server returned (``IngestionJob.llm_*``, ``RetrievalResult.llm_usage``).

1. Ingestion: the first ``ingest_limit`` documents of each JSONL file go through
   ``document_create`` and ``job_run_now`` with the LLM tree builder, as any ingestion does. The
   embedder is a hash embedder (``HashEmbedder``): vectors cost no LLM token, and the local model
   would only make the run slower. Reported: LLM input and output tokens per document token.
2. Re-indexing unchanged text: every one of those documents is re-indexed (``document_reindex``
   then ``job_run_now``). The prompts are the same, so the LLM cache (keyed by a hash of model,
   messages and schema) should answer them all: target 0 tokens and 0 requests.
3. Per query: one synthetic corpus of ``max(scope_sizes)`` documents (``latency.generate_corpus``:
   written through the tree service with cheap clustered vectors), then ``queries`` real queries
   per scope size through ``retrieval.services.retrieve`` in ``bipath`` mode, scoped to the first
   N documents, each with a vector near a random document in scope and five words of one of its
   leaves as text. Reported: LLM input tokens per query (LLMselect + LLMnavigate), which must stay
   under a constant however many documents are in scope (``TARGET_QUERY_INPUT_TOKENS``).
"""

from __future__ import annotations

import hashlib
import math
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
from django.conf import settings
from django.test import override_settings
from django.utils import timezone

from documents.ingestion.tree import LEAF
from documents.models import Document
from documents.selectors import document_list, document_nodes
from documents.services.collections import collection_create, collection_delete
from documents.services.documents import document_create, document_reindex
from documents.services.jobs import JobRun, job_run_now
from fable_benchmarks import BenchInputError
from fable_benchmarks.datasets import read_documents
from fable_benchmarks.latency import generate_corpus
from openfable.llm import LLMClient
from openfable.models import LLMCacheEntry
from retrieval.result import LLM_NAVIGATE, LLM_SELECT
from retrieval.services import retrieve
from tests.fakes.llm.model import FableModelServer, ServedCall

Log = Callable[[str], None]
COST_MARK = "bench-cost"
# The answers of the two LLM paths of a query, by the schema the server answered with.
SELECT_SCHEMA, NAVIGATE_SCHEMA = "document_selection", "node_selection"
TARGET_QUERY_INPUT_TOKENS = 8000
TARGET_REINDEX_TOKENS = 0
QUERY_WORDS = 5


class HashEmbedder:
    """Deterministic unit vectors from a hash of the text: ingestion without the embedding model
    (this benchmark counts LLM tokens; embeddings cost none)."""

    model_name = f"{COST_MARK}-hash"

    def __init__(self, dimensions: int) -> None:
        self.dimensions = dimensions

    def embed_passages(self, texts: Sequence[str]) -> np.ndarray:
        rows = [self._vector(text) for text in texts]
        return np.stack(rows) if rows else np.zeros((0, self.dimensions), dtype=np.float32)

    def embed_query(self, text: str) -> np.ndarray:
        return self._vector(text)

    def _vector(self, text: str) -> np.ndarray:
        seed = int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "little")
        vector = np.random.default_rng(seed).standard_normal(self.dimensions).astype(np.float32)
        return vector / np.linalg.norm(vector)


def bench_cost(
    *,
    docs: Sequence[Path],
    ingest_limit: int = 5,
    scope_sizes: Sequence[int] = (10, 100, 1000),
    queries: int = 10,
    budget: int = 2000,
    nodes_per_document: int = 30,
    log: Log | None = None,
    seed: int = 0,
) -> dict[str, Any]:
    say: Log = log or (lambda message: None)
    model = f"{COST_MARK}-{uuid.uuid4().hex[:8]}"  # a fresh model name: no earlier answer is cached
    report: dict[str, Any] = {
        "model": model,
        "budget": budget,
        "target_query_input_tokens": TARGET_QUERY_INPUT_TOKENS,
    }
    # The rows written from here on are this run's (its model name is new); they are deleted by
    # time, as bench-cost --real-llm does: a key cannot be recomputed from what the server got
    # (strict structured output is sent the schema without its length bounds, the key has them).
    started = timezone.now()
    with FableModelServer(model=model) as server, _llm_pointed_at(server, model):
        report["context_window"] = LLMClient.from_settings().context_window()
        try:
            embedder = HashEmbedder(int(settings.EMBEDDING_DIMENSIONS))
            report["ingestion"] = []
            report["reindex"] = []
            for path in docs:
                ingested, reindexed = _ingestion_costs(
                    path, limit=ingest_limit, embedder=embedder, server=server, say=say
                )
                report["ingestion"].append(ingested)
                report["reindex"].append(reindexed)
            report["queries"], report["load"] = _query_costs(
                scope_sizes=scope_sizes,
                queries=queries,
                budget=budget,
                nodes_per_document=nodes_per_document,
                server=server,
                rng=np.random.default_rng(seed),
                say=say,
            )
        finally:
            report["cache_rows_deleted"] = LLMCacheEntry.objects.filter(created_at__gte=started).delete()[0]
    return report


@contextmanager
def _llm_pointed_at(server: FableModelServer, model: str) -> Iterator[None]:
    with override_settings(LLM_MODEL=model, LLM_BASE_URL=server.base_url, LLM_API_KEY=""):
        yield


# -- ingestion and re-indexing -------------------------------------------------------------------


def _ingestion_costs(
    path: Path, *, limit: int, embedder: HashEmbedder, server: FableModelServer, say: Log
) -> tuple[dict[str, Any], dict[str, Any]]:
    items = read_documents(path, limit)
    collection = collection_create(name=f"{COST_MARK} {path.stem} {uuid.uuid4().hex[:6]}")
    try:
        documents: list[Document] = []
        first = _Tally(dataset=path.name)
        for item in items:
            created = document_create(
                collection=collection,
                content=item.content,
                title=item.title,
                metadata={"doc_id": item.doc_id},
                builder=Document.Builder.LLM,
                queue=False,
            )
            if not created.created:
                continue  # the same text twice in the file: indexed once
            first.add(_run_job(created.document.pk, embedder=embedder, server=server), created.document)
            documents.append(created.document)
            say(f"{path.name}: indexed {len(documents)}/{len(items)} with the LLM builder")
        again = _Tally(dataset=path.name)
        for document in documents:
            document_reindex(document=document, builder=Document.Builder.LLM, queue=False)
            again.add(_run_job(document.pk, embedder=embedder, server=server), document)
        say(f"{path.name}: re-indexed {len(documents)} unchanged documents")
        return first.as_json(), again.as_json()
    finally:
        collection_delete(collection=collection)


def _run_job(
    document_id: int, *, embedder: HashEmbedder, server: FableModelServer
) -> tuple[JobRun, list[ServedCall]]:
    mark = server.call_count()
    run = job_run_now(document_id=document_id, embedder=embedder)
    if run is None:
        raise BenchInputError(f"document {document_id} had no ingestion job to run")
    return run, server.calls_since(mark)


class _Tally:
    """Sums over the jobs of one dataset: the client's view (the job) and the server's."""

    def __init__(self, *, dataset: str) -> None:
        self.dataset = dataset
        self.totals = dict.fromkeys(
            (
                "documents", "document_tokens", "chunks", "llm_calls", "cached_calls", "prompt_tokens",
                "completion_tokens", "server_requests", "server_prompt_tokens", "server_completion_tokens",
                "fallbacks", "failed",
            ),
            0,
        )  # fmt: skip

    def add(self, outcome: tuple[JobRun, list[ServedCall]], document: Document) -> None:
        run, served = outcome
        job, totals = run.job, self.totals
        totals["documents"] += 1
        totals["document_tokens"] += document.token_count
        totals["chunks"] += job.chunk_count
        totals["llm_calls"] += job.llm_calls
        totals["cached_calls"] += job.llm_cached_calls
        totals["prompt_tokens"] += job.llm_prompt_tokens
        totals["completion_tokens"] += job.llm_completion_tokens
        totals["server_requests"] += len(served)
        totals["server_prompt_tokens"] += sum(call.prompt_tokens for call in served)
        totals["server_completion_tokens"] += sum(call.completion_tokens for call in served)
        totals["fallbacks"] += int(bool(job.fallback_reason))
        totals["failed"] += int(not run.succeeded)

    def as_json(self) -> dict[str, Any]:
        totals = self.totals
        tokens = totals["document_tokens"] or 1
        return {
            "dataset": self.dataset,
            **totals,
            "input_per_document_token": round(totals["server_prompt_tokens"] / tokens, 3),
            "output_per_document_token": round(totals["server_completion_tokens"] / tokens, 3),
            "client_agrees": (totals["prompt_tokens"], totals["completion_tokens"])
            == (totals["server_prompt_tokens"], totals["server_completion_tokens"]),
        }


# -- queries -------------------------------------------------------------------------------------


def _query_costs(
    *,
    scope_sizes: Sequence[int],
    queries: int,
    budget: int,
    nodes_per_document: int,
    server: FableModelServer,
    rng: np.random.Generator,
    say: Log,
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    largest = max(scope_sizes)
    dims = int(settings.EMBEDDING_DIMENSIONS)
    collection, centres, load = generate_corpus(
        nodes=largest * nodes_per_document,
        per_document=nodes_per_document,
        dims=dims,
        rng=rng,
        rebuild_index=False,
        say=say,
    )
    try:
        # generate_corpus creates the documents in the order of ``centres``.
        documents = list(document_list(user=None, collection=collection).order_by("pk"))
        rows = []
        for size in sorted(scope_sizes):
            scope = documents[:size]
            say(f"{queries} bipath queries over {size} documents")
            measured = []
            for _ in range(queries):
                target = int(rng.integers(0, size))
                vector = _near(centres[target], rng)
                mark = server.call_count()
                result = retrieve(
                    query=_query_text(scope[target], rng),
                    token_budget=budget,
                    mode="bipath",
                    documents=[document.pk for document in scope],
                    use_cache=False,
                    query_embedding=vector,
                )
                measured.append(_one_query(result, server.calls_since(mark)))
            rows.append(_scope_row(size, measured))
        return rows, load
    finally:
        collection_delete(collection=collection)


def _near(centre: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """A query vector near a document's centre, as far from it as its leaves are (cf. latency)."""
    dims = centre.shape[0]
    vector = centre + np.asarray(rng.standard_normal(dims), dtype=np.float32) * (0.9 / math.sqrt(dims))
    return np.asarray(vector / np.linalg.norm(vector), dtype=np.float32)


def _query_text(document: Document, rng: np.random.Generator) -> str:
    leaves = list(document_nodes(document=document).filter(kind=LEAF).values_list("content", flat=True))
    words = leaves[int(rng.integers(0, len(leaves)))].rstrip(".").split()
    return " ".join(rng.choice(words, size=min(QUERY_WORDS, len(words)), replace=False))


def _one_query(result: Any, served: list[ServedCall]) -> dict[str, Any]:
    return {
        "calls": len(served),
        "input": sum(call.prompt_tokens for call in served),
        "output": sum(call.completion_tokens for call in served),
        "select_input": _prompt_tokens(served, SELECT_SCHEMA),
        "navigate_input": _prompt_tokens(served, NAVIGATE_SCHEMA),
        "select_outline": _outline_tokens(result, LLM_SELECT),
        "navigate_outline": _outline_tokens(result, LLM_NAVIGATE),
        "client_input": result.llm_usage.prompt_tokens,
        "failed_paths": [path.name for path in result.paths if path.failed],
    }


def _prompt_tokens(served: list[ServedCall], schema: str) -> int:
    """The prompt tokens of the calls that answered with ``schema``."""
    return sum(call.prompt_tokens for call in served if call.schema == schema)


def _outline_tokens(result: Any, path_name: str) -> int:
    """The tokens of the outline the LLM path showed the model (0 when the path did not run)."""
    path = result.path(path_name)
    return int((path.detail or {}).get("outline_tokens", 0)) if path else 0


def _scope_row(size: int, measured: list[dict[str, Any]]) -> dict[str, Any]:
    def mean(key: str) -> float:
        return round(sum(m[key] for m in measured) / max(1, len(measured)), 1)

    def most(key: str) -> int:
        return max((int(m[key]) for m in measured), default=0)

    return {
        "documents_in_scope": size,
        "queries": len(measured),
        "calls_per_query": mean("calls"),
        "input_mean": mean("input"),
        "input_max": most("input"),
        "output_mean": mean("output"),
        "select_input_max": most("select_input"),
        "navigate_input_max": most("navigate_input"),
        "select_outline_max": most("select_outline"),
        "navigate_outline_max": most("navigate_outline"),
        "client_agrees": all(m["client_input"] == m["input"] for m in measured),
        "failed_paths": sorted({name for m in measured for name in m["failed_paths"]}),
        "meets_target": most("input") <= TARGET_QUERY_INPUT_TOKENS,
    }
