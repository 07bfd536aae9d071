"""Ingestion end to end on real PostgreSQL with real local embeddings (structural builder)."""

from __future__ import annotations

import time
from collections.abc import Iterator

import numpy as np
import pytest
from celery.contrib.testing.worker import start_worker

from documents.indexing import claim_job, document_index, job_fail
from documents.models import Document, IngestionJob, Node
from documents.services import document_create, document_reindex
from openfable.celery import app as celery_app
from openfable.embeddings import RemoteEmbedder
from tests.factories import CollectionFactory
from tests.fakes.openai_server import ScriptedOpenAIServer

TEXT = (
    "# Field guide\n\nA short guide to volcanoes and their eruptions.\n\n"
    "## Formation\n\nVolcanoes form where magma reaches the surface. Most sit on plate boundaries.\n\n"
    "## Eruptions\n\nShield volcanoes erupt gently. "
    "Stratovolcanoes erupt explosively and build steep cones.\n"
)


def _index(document: Document) -> IngestionJob:
    job = claim_job(document_id=document.pk)
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
def test_a_failed_reindex_keeps_the_old_tree_shows_the_error_and_can_be_retried(
    scripted_openai: ScriptedOpenAIServer,
) -> None:
    document = document_create(collection=CollectionFactory.create(), content=TEXT, queue=False).document
    _index(document)
    old_tree = list(Node.objects.filter(document=document).values_list("pk", "content"))

    document_reindex(document=document, queue=False)
    job = claim_job(document_id=document.pk)
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
    job = claim_job(document_id=document.pk)
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
    try:
        with start_worker(celery_app, pool="solo", perform_ping_check=False, shutdown_timeout=30):
            yield
    finally:
        celery_app.conf.broker_url = previous


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
