"""`openfable reembed`: every vector recomputed, and the column resized when the model's size changes.

The size switch uses the scripted OpenAI-compatible server (16-dimensional hash vectors) and then
switches back to the local 384-dimensional model, so the test database is left as other tests
expect it (the test transaction is rolled back too; DDL in PostgreSQL is transactional).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
from django.db import connection
from pgvector.django import CosineDistance
from pytest_django.fixtures import Settings as SettingsWrapper

from documents.ingestion.pipeline import embedding_text
from documents.models import CorpusVersion, Document, Node
from documents.selectors import collection_index_ready
from documents.services.collection_indexes import collection_index_ensure
from documents.services.documents import document_create
from documents.services.jobs import document_index, job_claim
from documents.services.reembed import nodes_reembed
from openfable.checks import stored_embedding_dimensions
from openfable.embeddings import LOCAL_DIMENSIONS, LOCAL_MODEL_NAME, get_embedder
from tests.cli import run_openfable as run
from tests.factories import CollectionFactory
from tests.fakes.llm.server import ScriptedOpenAIServer

TEXT = (
    "# Field guide\n\nA short guide to volcanoes and their eruptions.\n\n"
    "## Formation\n\nVolcanoes form where magma reaches the surface. Most sit on plate boundaries.\n\n"
    "## Eruptions\n\nShield volcanoes erupt gently. "
    "Stratovolcanoes erupt explosively and build steep cones.\n"
)


def indexed_document() -> Document:
    document = document_create(collection=CollectionFactory.create(), content=TEXT, queue=False).document
    job = job_claim(document_id=document.pk)
    assert job is not None
    document_index(job=job)
    document.refresh_from_db()
    return document


def node_texts() -> dict[int, str]:
    return {
        node.pk: embedding_text(
            kind=node.kind, toc_path=node.toc_path, summary=node.summary, content=node.content
        )
        for node in Node.objects.all()
    }


def _size(node: Node) -> int:
    return 0 if node.embedding is None else len(node.embedding)


def hnsw_definition() -> str | None:
    with connection.cursor() as cursor:
        cursor.execute("SELECT indexdef FROM pg_indexes WHERE indexname = 'node_embedding_hnsw'")
        row = cursor.fetchone()
    return row[0] if row else None


def use_local_model(settings: SettingsWrapper) -> None:
    settings.EMBEDDING_URL = ""
    settings.EMBEDDING_MODEL = LOCAL_MODEL_NAME
    settings.EMBEDDING_DIMENSIONS = LOCAL_DIMENSIONS
    get_embedder.cache_clear()


@pytest.fixture
def local_model(settings: SettingsWrapper) -> Any:
    use_local_model(settings)
    yield
    get_embedder.cache_clear()


@pytest.mark.django_db
@pytest.mark.usefixtures("local_model")
def test_reembed_with_the_same_model_recomputes_every_vector() -> None:
    document = indexed_document()
    Document.objects.filter(pk=document.pk).update(embedding_model="an older model")
    Node.objects.update(embedding=[1.0] + [0.0] * (LOCAL_DIMENSIONS - 1))  # stale vectors to overwrite
    version = CorpusVersion.objects.get(pk=1).version

    status, answer = run("reembed", "--batch-size", "3")
    assert status == 0, answer
    count = Node.objects.count()
    assert answer["nodes"] == count and answer["documents"] == 1
    assert answer["old_dimensions"] == answer["new_dimensions"] == LOCAL_DIMENSIONS
    assert answer["column_changed"] is False and answer["model"] == LOCAL_MODEL_NAME
    assert answer["seconds"] >= 0

    texts = node_texts()
    expected = get_embedder().embed_passages(list(texts.values()))
    stored = {node.pk: np.asarray(node.embedding) for node in Node.objects.all()}
    for (pk, _), vector in zip(texts.items(), expected, strict=True):
        assert np.allclose(stored[pk], vector, atol=1e-5)
    assert Document.objects.get(pk=document.pk).embedding_model == LOCAL_MODEL_NAME
    assert CorpusVersion.objects.get(pk=1).version > version, "query caches must not outlive the vectors"
    assert hnsw_definition() is not None


@pytest.mark.django_db
@pytest.mark.usefixtures("local_model")
def test_nodes_edited_while_embedding_are_embedded_again_before_the_swap() -> None:
    indexed_document()
    section = Node.objects.filter(kind="section").first()
    assert section is not None
    edits: list[int] = []

    def edit_during_the_first_phase(done: int, total: int) -> None:
        if not edits:  # after the first batch, a person edits a summary
            Node.objects.filter(pk=section.pk).update(summary="Edited while re-embedding.")
            edits.append(done)

    result = nodes_reembed(embedder=get_embedder(), batch_size=2, progress=edit_during_the_first_phase)
    assert edits and result.nodes == Node.objects.count()
    section.refresh_from_db()
    expected = get_embedder().embed_passages([f"{section.toc_path}: Edited while re-embedding."])[0]
    assert np.allclose(np.asarray(section.embedding), expected, atol=1e-5)


@pytest.mark.django_db
def test_reembed_switches_the_column_to_a_new_size_and_back(
    settings: SettingsWrapper, scripted_openai: ScriptedOpenAIServer
) -> None:
    use_local_model(settings)
    document = indexed_document()
    count = Node.objects.count()
    assert stored_embedding_dimensions() == LOCAL_DIMENSIONS
    settings.RETRIEVAL_COLLECTION_INDEX_MIN_NODES = 1
    assert collection_index_ensure(document.collection_id), "the collection has its own index too"
    try:
        settings.EMBEDDING_URL = scripted_openai.base_url
        settings.EMBEDDING_MODEL = "tiny"
        settings.EMBEDDING_DIMENSIONS = 16
        get_embedder.cache_clear()

        status, answer = run("reembed", "--dimensions", "16", "--batch-size", "3")
        assert status == 0, answer
        assert answer == {
            **answer,
            "nodes": count,
            "documents": 1,
            "old_dimensions": LOCAL_DIMENSIONS,
            "new_dimensions": 16,
            "column_changed": True,
            "model": "tiny",
        }
        assert stored_embedding_dimensions() == 16
        nodes = list(Node.objects.all())
        assert len(nodes) == count and all(
            node.embedding is not None and len(node.embedding) == 16 for node in nodes
        )
        assert len(scripted_openai.embedding_requests) == math.ceil(count / 3), "one request per batch"
        definition = hnsw_definition()
        assert definition is not None
        assert "USING hnsw (embedding vector_cosine_ops)" in definition
        assert "m='16'" in definition and "ef_construction='64'" in definition
        assert collection_index_ready(document.collection_id), "dropped with the column, built again"
        assert Document.objects.get(pk=document.pk).embedding_model == "tiny"
        # The resized column answers nearest-neighbour queries: a leaf is nearest to itself.
        leaf = Node.objects.filter(kind="leaf").order_by("order").last()
        assert leaf is not None and leaf.embedding is not None
        nearest = Node.objects.order_by(CosineDistance("embedding", list(leaf.embedding))).first()
        assert nearest is not None and nearest.pk == leaf.pk
    finally:
        use_local_model(settings)
        if stored_embedding_dimensions() != LOCAL_DIMENSIONS:
            status, back = run("reembed")
            assert status == 0, back

    assert back["old_dimensions"] == 16 and back["new_dimensions"] == LOCAL_DIMENSIONS
    assert stored_embedding_dimensions() == LOCAL_DIMENSIONS
    assert all(_size(node) == LOCAL_DIMENSIONS for node in Node.objects.all())
    assert hnsw_definition() is not None and collection_index_ready(document.collection_id)
    assert Document.objects.get(pk=document.pk).embedding_model == LOCAL_MODEL_NAME


@pytest.mark.django_db
def test_reembed_refuses_a_model_whose_size_is_not_the_configured_one(settings: SettingsWrapper) -> None:
    use_local_model(settings)
    indexed_document()
    try:
        settings.EMBEDDING_DIMENSIONS = 16  # the local model makes 384
        get_embedder.cache_clear()
        status, answer = run("reembed")
        assert status == 1
        assert "makes 384-dimensional vectors but OPENFABLE_EMBEDDING_DIMENSIONS is 16" in answer["error"]
        status, answer = run("reembed", "--dimensions", "1024")
        assert status == 1
        assert "--dimensions 1024 does not match OPENFABLE_EMBEDDING_DIMENSIONS=16" in answer["error"]
    finally:
        use_local_model(settings)
    assert stored_embedding_dimensions() == LOCAL_DIMENSIONS
    assert all(_size(node) == LOCAL_DIMENSIONS for node in Node.objects.all())
