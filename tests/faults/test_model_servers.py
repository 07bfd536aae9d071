"""The LLM and the embedding server failing in the middle of an ingestion, over real HTTP.

A scripted OpenAI-compatible server (tests/fakes/llm/server.py) plays both services. The first
calls of a re-index succeed; then the server answers HTTP 500, 429, a body that is not JSON, an
answer that is not JSON, or nothing within the timeout. The job runs through ``job_run_now``, the
sequence the Celery task runs. What must hold: the client retries a bounded number of times, with
backoff (counted and timed on the server); then the LLM builder falls back to the structural one
and the job says why, or (embeddings, which have no fallback) the job fails with the error and the
previous tree keeps serving, whole, until a retry succeeds once the server is healthy again. No
tree is ever half-written and no node is left without its tree.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from typing import Any

import pytest
from pytest_django.fixtures import Settings as SettingsWrapper

from documents.models import Document, IngestionJob, Node
from documents.services.documents import document_create, document_reindex, job_retry
from documents.services.jobs import job_run_now
from openfable.embeddings import LOCAL_DIMENSIONS, get_embedder
from openfable.models import LLMCacheEntry
from retrieval.services import retrieve
from tests.factories import CollectionFactory
from tests.fakes.llm import answers, reading
from tests.fakes.llm.server import (
    EMBEDDINGS_PATH,
    RecordedRequest,
    ScriptedOpenAIServer,
    StatusReply,
    delay,
    status,
)

pytestmark = [pytest.mark.faults, pytest.mark.slow, pytest.mark.django_db]

TEXT = "".join(
    f"Paragraph {n} of the charter says that member {n} pays {n + 2} units a year and may leave "
    f"after {n % 4 + 1} years' notice given in writing to the board.\n"
    for n in range(14)
)
CLIENT_RETRIES = 2  # after the first attempt: three requests for one failing call
RETRY_BASE_DELAY = 0.2  # the first backoff waits at least half of it
TIMEOUT = 1.0

# What the server answers once it breaks, and the words the job's record must carry about it.
FAULTS: dict[str, tuple[Any, str]] = {
    "http-500": (status(500, "the model server crashed"), "HTTP 500"),
    "http-429": (status(429, "rate limited"), "HTTP 429"),
    "body-not-json": (StatusReply(200, body='{"choices": [{"mess'), "HTTP 500"),
    "timeout": (delay(TIMEOUT * 3), f"no answer within {TIMEOUT:g} s (timeout)"),
}


@pytest.fixture
def server(settings: SettingsWrapper) -> Iterator[ScriptedOpenAIServer]:
    """One scripted server as both the LLM and the embedding endpoint, retries made quick."""
    with ScriptedOpenAIServer(embedding_dimensions=LOCAL_DIMENSIONS) as scripted:
        settings.LLM_MODEL = "scripted-model"
        settings.LLM_BASE_URL = scripted.base_url
        settings.LLM_TIMEOUT = TIMEOUT
        settings.LLM_MAX_RETRIES = CLIENT_RETRIES
        settings.LLM_RETRY_BASE_DELAY = RETRY_BASE_DELAY
        settings.LLM_TREE_RETRIES = 1
        settings.LLM_MAX_CONCURRENCY = 1
        settings.EMBEDDING_URL = scripted.base_url
        settings.EMBEDDING_MODEL = "scripted-embedding"
        settings.EMBEDDING_DIMENSIONS = LOCAL_DIMENSIONS
        settings.EMBEDDING_BATCH_SIZE = 4  # several requests per ingestion: room to break mid-way
        settings.EMBEDDING_TIMEOUT = TIMEOUT
        settings.EMBEDDING_MAX_RETRIES = CLIENT_RETRIES
        settings.EMBEDDING_RETRY_BASE_DELAY = RETRY_BASE_DELAY
        get_embedder.cache_clear()
        LLMCacheEntry.objects.all().delete()
        try:
            yield scripted
        finally:
            get_embedder.cache_clear()


class _BreakableModel:
    """A competent model whose answers to one prompt (by schema name) turn into ``fault`` while broken."""

    def __init__(self, broken_schema: str, fault: Any) -> None:
        self.broken_schema, self.fault, self.broken = broken_schema, fault, False

    def __call__(self, request: dict[str, Any]) -> Any:
        if self.broken and reading.schema_name(request) == self.broken_schema:
            return self.fault
        return answers.simple_answer(request)


def _tree(document: Document) -> list[tuple[int, int | None, str, str, str]]:
    return list(
        Node.objects.filter(document=document)
        .order_by("order")
        .values_list("pk", "parent_id", "kind", "title", "content")
    )


def _assert_whole_tree(document: Document, job: IngestionJob) -> None:
    """One root, every parent in the same tree, the leaves cover the text once, the job counted them."""
    nodes = _tree(document)
    ids = {pk for pk, *_ in nodes}
    assert [kind for _, parent, kind, *_ in nodes if parent is None] == ["root"]
    assert all(parent in ids for _, parent, *_ in nodes if parent is not None), "orphan nodes"
    assert "".join(content for *_, kind, _, content in nodes if kind == "leaf") == TEXT
    assert job.node_count == len(nodes)
    # Nothing of an earlier tree lingers beside this one.
    assert Node.objects.count() == Node.objects.filter(document=document).count()


def _served_node_ids(document: Document) -> set[int]:
    result = retrieve(query="notice given to the board", token_budget=120, mode="vector", use_cache=False)
    assert result.chunks, "the document is served"
    return {chunk.node_id for chunk in result.chunks if chunk.node_id is not None}


def _gaps(requests: list[RecordedRequest]) -> list[float]:
    return [later.received_at - earlier.received_at for earlier, later in itertools.pairwise(requests)]


def _indexed_document() -> tuple[Document, IngestionJob]:
    document = document_create(
        collection=CollectionFactory.create(), content=TEXT, title="Charter", queue=False
    ).document
    run = job_run_now(document_id=document.pk)
    assert run is not None and run.succeeded, run and run.job.error
    document.refresh_from_db()
    return document, run.job


@pytest.mark.parametrize("fault", [*FAULTS, "answer-not-json"], ids=lambda name: name)
def test_the_llm_failing_mid_reindex_falls_back_to_the_structural_builder_and_says_why(
    server: ScriptedOpenAIServer, fault: str
) -> None:
    reply, named = FAULTS.get(fault, ("{not json at all", "not valid JSON"))
    model = _BreakableModel("document_tree", reply)
    server.chat_default = model
    document, _ = _indexed_document()
    assert document.builder == Document.Builder.LLM
    old_tree = _tree(document)

    LLMCacheEntry.objects.all().delete()  # else the re-index would be answered from the cache
    model.broken = True
    job = document_reindex(document=document, queue=False)
    asked_before = len(server.chat_requests)
    run = job_run_now(document_id=document.pk)
    assert run is not None and run.succeeded and run.error is None

    asked = [reading.schema_name(body) for body in server.chat_requests[asked_before:]]
    # The chunking call went through; the tree call broke.
    assert asked[0] == "chunk_markers", asked
    tree_calls = [
        r
        for r in server.requests_to("/v1/chat/completions")
        if reading.schema_name(r.body) == "document_tree"
    ]
    tree_calls = tree_calls[-asked.count("document_tree") :]
    if fault == "answer-not-json":
        # Every request was answered (200); the builder re-asked once with the error fed back.
        assert len(tree_calls) == 1 + 1
    else:
        assert len(tree_calls) == 1 + CLIENT_RETRIES, "bounded retries"
        assert min(_gaps(tree_calls)) >= RETRY_BASE_DELAY / 2, "backoff between the attempts"

    job.refresh_from_db()
    document.refresh_from_db()
    assert job.status == IngestionJob.Status.SUCCEEDED and document.status == Document.Status.INDEXED
    assert document.builder == Document.Builder.STRUCTURAL
    assert job.fallback_reason.startswith("Fell back to the structural builder")
    assert named in job.fallback_reason, job.fallback_reason
    _assert_whole_tree(document, job)
    assert not {pk for pk, *_ in old_tree} & {pk for pk, *_ in _tree(document)}

    # Healthy again: asking for the LLM builder gets it.
    model.broken = False
    document_reindex(document=document, builder="llm", queue=False)
    again = job_run_now(document_id=document.pk)
    assert again is not None and again.succeeded and not again.job.fallback_reason
    document.refresh_from_db()
    assert document.builder == Document.Builder.LLM
    _assert_whole_tree(document, again.job)


@pytest.mark.parametrize("fault", FAULTS, ids=lambda name: name)
def test_the_embedding_server_failing_mid_reindex_fails_the_job_keeps_the_old_tree_and_a_retry_succeeds(
    server: ScriptedOpenAIServer, settings: SettingsWrapper, fault: str
) -> None:
    settings.LLM_MODEL = ""  # the structural builder: embeddings are the only remote calls
    reply, named = FAULTS[fault]
    document, _ = _indexed_document()
    old_tree = _tree(document)
    assert _served_node_ids(document) <= {pk for pk, *_ in old_tree}

    embedded_before = len(server.embedding_requests)
    server.script_embeddings(None, reply, reply, reply)  # one batch goes through, the next fails
    job = document_reindex(document=document, queue=False)
    run = job_run_now(document_id=document.pk)
    assert run is not None and not run.succeeded

    calls = server.requests_to(EMBEDDINGS_PATH)[embedded_before:]
    assert len(calls) == 1 + 1 + CLIENT_RETRIES, "one good batch, then bounded retries of the bad one"
    assert min(_gaps(calls[1:])) >= RETRY_BASE_DELAY / 2, "backoff between the attempts"
    job.refresh_from_db()
    assert job.status == IngestionJob.Status.FAILED
    assert job.error.startswith("EmbeddingError: The embedding service at " + server.base_url)
    assert f"failed {1 + CLIENT_RETRIES} attempts in a row" in job.error and named in job.error, job.error
    # Nothing half-written: the previous tree, node for node, and it still answers queries.
    assert _tree(document) == old_tree
    assert _served_node_ids(document) <= {pk for pk, *_ in old_tree}
    assert Node.objects.count() == len(old_tree)

    # The server is healthy again (its script ran dry): the retry the failure offers succeeds.
    retried = job_retry(job=job, queue=False)
    again = job_run_now(document_id=document.pk)
    assert again is not None and again.succeeded and again.job.pk == retried.pk
    document.refresh_from_db()
    assert document.status == Document.Status.INDEXED
    _assert_whole_tree(document, again.job)
    new_ids = {pk for pk, *_ in _tree(document)}
    assert not new_ids & {pk for pk, *_ in old_tree}
    assert _served_node_ids(document) <= new_ids
