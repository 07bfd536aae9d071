"""The corpus schema on real PostgreSQL + pgvector: constraints and the HNSW index."""

from __future__ import annotations

import numpy as np
import pytest
from django.conf import settings
from django.db import IntegrityError, connection, transaction
from pgvector.django import CosineDistance

from documents.models import Node
from tests.factories import DocumentFactory, IngestionJobFactory, NodeFactory
from tests.plans import query_plan

pytestmark = pytest.mark.django_db


def _violates(**fields: object) -> bool:
    try:
        with transaction.atomic():
            NodeFactory.create(**fields)
    except IntegrityError:
        return True
    return False


def test_vector_extension_is_installed() -> None:
    with connection.cursor() as cursor:
        cursor.execute("SELECT extversion FROM pg_extension WHERE extname = 'vector'")
        assert cursor.fetchone() is not None


def test_node_constraints_reject_bad_rows() -> None:
    document = DocumentFactory.create()
    root = NodeFactory.create(document=document, order=0)
    assert _violates(document=document, order=1, kind="chapter")  # unknown kind
    assert _violates(document=document, order=1, kind="leaf", depth=5, parent=root)  # too deep
    assert _violates(document=document, order=1, kind="root", depth=1)  # root not at depth 0
    assert _violates(
        document=document, order=1, kind="section", depth=2, parent=root
    )  # section below depth 1
    assert _violates(document=document, order=1, kind="leaf", depth=1, parent=None)  # orphan
    assert _violates(document=document, order=0, kind="leaf", depth=1, parent=root)  # duplicate order
    assert _violates(document=document, order=1, kind="leaf", depth=1, parent=root, start_char=9, end_char=3)
    assert _violates(document=document, order=1)  # a second root
    assert not _violates(document=document, order=1, kind="leaf", depth=1, parent=root)


def test_document_content_is_unique_per_collection() -> None:
    document = DocumentFactory.create()
    with pytest.raises(IntegrityError), transaction.atomic():
        DocumentFactory.create(collection=document.collection, content=document.content)
    DocumentFactory.create(content=document.content)  # another collection may hold the same text


def test_job_progress_is_a_percentage() -> None:
    with pytest.raises(IntegrityError), transaction.atomic():
        IngestionJobFactory.create(progress=101)


@pytest.mark.slow
def test_nearest_neighbour_query_uses_the_hnsw_index() -> None:
    document = DocumentFactory.create()
    root = NodeFactory.create(document=document, order=0)
    rng = np.random.default_rng(7)
    vectors = rng.normal(size=(2000, settings.EMBEDDING_DIMENSIONS)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    Node.objects.bulk_create(
        Node(
            document=document,
            parent=root,
            kind="leaf",
            depth=1,
            ordinal=i,
            order=i + 1,
            start_char=0,
            end_char=0,
            embedding=vector,
        )
        for i, vector in enumerate(vectors)
    )
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE documents_node")
    plan = query_plan(
        "SELECT id FROM documents_node ORDER BY embedding <=> %s::vector LIMIT 10", [str(vectors[0].tolist())]
    )
    assert "node_embedding_hnsw" in plan, plan
    nearest = Node.objects.order_by(CosineDistance("embedding", vectors[0])).first()
    assert nearest is not None and nearest.order == 1
