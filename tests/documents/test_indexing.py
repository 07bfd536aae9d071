"""Ingestion end to end on real PostgreSQL with real local embeddings (structural builder)."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterator, Sequence

import numpy as np
import pytest
from celery.contrib.testing.worker import start_worker

from documents.models import Document, IngestionJob, Node
from documents.services.documents import document_create, document_reindex
from documents.services.job_queue import job_fail
from documents.services.jobs import MemoEmbedder, document_index, job_claim
from openfable.celery import app as celery_app
from openfable.embeddings import Embedder, RemoteEmbedder, get_embedder
from openfable.tokens import count_tokens
from tests.factories import CollectionFactory
from tests.fakes.llm.server import ScriptedOpenAIServer

TEXT = (
    "# Field guide\n\nA short guide to volcanoes and their eruptions.\n\n"
    "## Formation\n\nVolcanoes form where magma reaches the surface. Most sit on plate boundaries.\n\n"
    "## Eruptions\n\nShield volcanoes erupt gently. "
    "Stratovolcanoes erupt explosively and build steep cones.\n"
)


def _index(document: Document) -> IngestionJob:
    job = job_claim(document_id=document.pk)
    assert job is not None
    document_index(job=job)
    job.refresh_from_db()
    document.refresh_from_db()
    return job


@pytest.mark.django_db
def test_structural_ingestion_saves_an_embedded_tree_whose_leaves_are_exact_slices() -> None:
    document = document_create(
        collection=CollectionFactory.create(), content=TEXT, title="Volcano guide", queue=False
    ).document
    job = _index(document)
    assert job.status == IngestionJob.Status.SUCCEEDED and job.progress == 100 and job.stage == "done"
    assert document.status == Document.Status.INDEXED and document.builder == Document.Builder.STRUCTURAL
    assert document.embedding_model == "multilingual-e5-small"
    nodes = list(Node.objects.filter(document=document).order_by("order"))
    assert nodes[0].kind == "root" and nodes[0].depth == 0 and nodes[0].toc_path == "Volcano guide"
    assert nodes[0].title == "Volcano guide"  # the document's title, not the text's "Field guide"
    leaves = [node for node in nodes if node.kind == "leaf"]
    assert "".join(leaf.content for leaf in leaves) == TEXT
    assert all(leaf.content == TEXT[leaf.start_char : leaf.end_char] for leaf in leaves)
    sections = [node for node in nodes if node.kind == "section"]
    assert {"Formation", "Eruptions"} <= {section.title for section in sections}
    assert all(" › " in section.toc_path for section in sections)
    assert all(
        node.embedding is not None and abs(np.linalg.norm(node.embedding) - 1) < 1e-3 for node in nodes
    )
    assert job.node_count == len(nodes) and job.chunk_count == len(leaves)
    assert set(job.timings) >= {"build", "embed", "save"}


@pytest.mark.django_db
def test_a_document_titled_without_words_keeps_the_title_its_text_gives() -> None:
    document = document_create(
        collection=CollectionFactory.create(), content=TEXT, title="2024-07", queue=False
    ).document
    _index(document)
    root = Node.objects.get(document=document, depth=0)
    assert root.title == "Field guide"


# Paragraphs of about half a leaf to a leaf, on two topics: most become a leaf of their own.
PARAGRAPHS = "\n\n".join(
    [
        "Volcanoes form where magma from the mantle reaches the surface of the Earth. Most of them sit "
        "on the boundaries of tectonic plates, where one plate sinks beneath another or two plates "
        "pull apart and let molten rock rise through the crust.",
        "Shield volcanoes erupt gently, with runny lava that spreads far and builds broad, low slopes. "
        "Stratovolcanoes erupt explosively: their sticky magma traps gas until the pressure blows "
        "the top apart and throws ash and rock high into the sky.",
        "Ash from a large eruption can travel around the planet and cool the climate for a year or two, "
        "as it did after Tambora erupted in 1815 and Europe had a year without a summer.",
        "Sourdough bread rises with wild yeast and lactic acid bacteria instead of baker's yeast. The "
        "starter is a mixture of flour and water that is fed every day until it bubbles and smells "
        "pleasantly sour.",
        "A long, cold fermentation in the refrigerator gives the dough more flavour and a more open "
        "crumb. Bake it in a very hot covered pot, then take the lid off so the crust can brown.",
    ]
)


class RecordingEmbedder:
    """The real local model, recording every passage that reaches it."""

    def __init__(self, inner: Embedder) -> None:
        self.inner = inner
        self.model_name = inner.model_name
        self.dimensions = inner.dimensions
        self.calls: list[list[str]] = []

    def embed_passages(self, texts: Sequence[str]) -> np.ndarray:
        self.calls.append(list(texts))
        return self.inner.embed_passages(texts)

    def embed_query(self, text: str) -> np.ndarray:
        return self.inner.embed_query(text)


@pytest.mark.django_db
def test_a_leaf_that_is_a_whole_paragraph_goes_through_the_model_once_and_keeps_its_exact_vector() -> None:
    document = document_create(
        collection=CollectionFactory.create(), content=PARAGRAPHS, title="Two topics", queue=False
    ).document
    job = job_claim(document_id=document.pk)
    assert job is not None
    recorder = RecordingEmbedder(get_embedder())
    document_index(job=job, embedder=recorder)
    nodes = list(Node.objects.filter(document=document).order_by("order"))
    leaves = [node for node in nodes if node.kind == "leaf"]
    assert "".join(leaf.content for leaf in leaves) == PARAGRAPHS

    builder_texts, *pipeline_calls = recorder.calls
    pipeline_texts = [text for call in pipeline_calls for text in call]
    seen = Counter(builder_texts + pipeline_texts)
    # No text went through the model twice, and every leaf's own text went through it once.
    assert max(seen.values()) == 1
    assert all(seen[leaf.content] == 1 for leaf in leaves)
    # Leaves that are exactly one paragraph took the builder's vector: only the others, and the
    # internal nodes, were embedded after the build.
    whole = [leaf for leaf in leaves if leaf.content in builder_texts]
    assert len(whole) >= 2
    assert not any(leaf.content in pipeline_texts for leaf in whole)
    assert len(pipeline_texts) == len(nodes) - len(whole)
    # The job says what the model was handed, against the document's own size.
    job.refresh_from_db()
    assert job.document_tokens == count_tokens(PARAGRAPHS)
    assert job.embedded_tokens == sum(count_tokens(text) for text in builder_texts + pipeline_texts)

    # A reused vector is the vector a fresh embedding of the leaf's text gives.
    fresh = get_embedder().embed_passages([leaf.content for leaf in leaves])
    stored = np.stack([np.asarray(leaf.embedding, dtype=np.float32) for leaf in leaves])
    assert np.allclose(stored, fresh, atol=1e-5)


def test_memo_embedder_embeds_each_distinct_text_once_in_order() -> None:
    recorder = RecordingEmbedder(get_embedder())
    memo = MemoEmbedder(recorder)
    first = memo.embed_passages(["alpha beta", "gamma", "alpha beta"])
    second = memo.embed_passages(["gamma", "delta", "alpha beta"])
    # Three of the six texts asked for went through the model; the other three came from the memo.
    assert recorder.calls == [["alpha beta", "gamma"], ["delta"]]
    assert memo.tokens_sent == sum(count_tokens(text) for text in ("alpha beta", "gamma", "delta"))
    fresh = get_embedder().embed_passages(["alpha beta", "gamma", "delta"])
    assert np.allclose(first, fresh[[0, 1, 0]], atol=1e-5) and np.allclose(
        second, fresh[[1, 2, 0]], atol=1e-5
    )
    assert memo.embed_passages([]).shape == (0, memo.dimensions)
    assert np.allclose(memo.embed_query("lava"), get_embedder().embed_query("lava"), atol=1e-6)


@pytest.mark.django_db
def test_reindex_replaces_the_tree_and_keeps_a_persons_edits() -> None:
    document = document_create(collection=CollectionFactory.create(), content=TEXT, queue=False).document
    _index(document)
    section = Node.objects.get(document=document, kind="section", title="Eruptions")
    Node.objects.filter(pk=section.pk).update(
        title="How volcanoes erupt", summary="Edited by a person.", edited=True
    )
    old_ids = set(Node.objects.filter(document=document).values_list("pk", flat=True))
    document_reindex(document=document, queue=False)
    _index(document)
    new_nodes = Node.objects.filter(document=document)
    assert old_ids.isdisjoint(new_nodes.values_list("pk", flat=True)), "the tree was replaced, not appended"
    kept = new_nodes.get(kind="section", start_char=section.start_char, end_char=section.end_char)
    assert kept.edited and kept.title == "How volcanoes erupt" and kept.summary == "Edited by a person."
    assert new_nodes.filter(toc_path__endswith="How volcanoes erupt").exists()


@pytest.mark.django_db
@pytest.mark.slow
def test_a_failed_reindex_keeps_the_old_tree_shows_the_error_and_can_be_retried(
    scripted_openai: ScriptedOpenAIServer,
) -> None:
    document = document_create(collection=CollectionFactory.create(), content=TEXT, queue=False).document
    _index(document)
    old_tree = list(Node.objects.filter(document=document).values_list("pk", "content"))

    document_reindex(document=document, queue=False)
    job = job_claim(document_id=document.pk)
    assert job is not None
    broken = RemoteEmbedder(
        url=scripted_openai.base_url, model="tiny", api_key="", dimensions=384, batch_size=8
    )
    with pytest.raises(Exception) as failure:  # the server answers 16-dimensional vectors
        document_index(job=job, embedder=broken)
    job_fail(job=job, error=str(failure.value))
    job.refresh_from_db()
    document.refresh_from_db()
    assert job.status == IngestionJob.Status.FAILED and "OPENFABLE_EMBEDDING_DIMENSIONS" in job.error
    assert document.status == Document.Status.FAILED
    assert list(Node.objects.filter(document=document).values_list("pk", "content")) == old_tree

    document_reindex(document=document, queue=False)
    retried = _index(document)
    assert retried.status == IngestionJob.Status.SUCCEEDED and document.status == Document.Status.INDEXED


@pytest.mark.django_db
def test_a_dimension_mismatch_is_refused_before_any_write(scripted_openai: ScriptedOpenAIServer) -> None:
    document = document_create(collection=CollectionFactory.create(), content=TEXT, queue=False).document
    job = job_claim(document_id=document.pk)
    assert job is not None
    wrong = RemoteEmbedder(
        url=scripted_openai.base_url, model="big", api_key="", dimensions=1024, batch_size=8
    )
    with pytest.raises(Exception, match=r"OPENFABLE_EMBEDDING_DIMENSIONS=384 .*reembed"):
        document_index(job=job, embedder=wrong)
    assert not Node.objects.filter(document=document).exists()
    assert scripted_openai.embedding_requests == [], "refused before calling the embedder"


@pytest.fixture
def celery_worker_thread() -> Iterator[None]:
    """A real Celery worker (in a thread) consuming real messages from an in-memory broker."""
    previous = celery_app.conf.broker_url
    celery_app.conf.broker_url = "memory://"
    # The app keeps the connection pool of the broker it first published to (an earlier test may
    # have); drop it, as Celery does after a fork, so this test publishes to the memory broker.
    celery_app._after_fork()
    try:
        with start_worker(celery_app, pool="solo", perform_ping_check=False, shutdown_timeout=30):
            yield
    finally:
        celery_app.conf.broker_url = previous
        celery_app._after_fork()


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_ingestion_end_to_end_through_a_real_celery_worker(celery_worker_thread: None) -> None:
    result = document_create(collection=CollectionFactory.create(), content=TEXT, title="Through Celery")
    assert result.job is not None
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        job = IngestionJob.objects.get(pk=result.job.pk)
        if job.status in (IngestionJob.Status.SUCCEEDED, IngestionJob.Status.FAILED):
            break
        time.sleep(0.2)
    assert job.status == IngestionJob.Status.SUCCEEDED, job.error
    document = Document.objects.get(pk=result.document.pk)
    assert document.status == Document.Status.INDEXED
    assert Node.objects.filter(document=document, kind="leaf").count() >= 3
