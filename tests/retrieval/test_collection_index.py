"""Per-collection HNSW indexes: the trigger that fills Node.collection, the build after a tree
swap, the vector path's use of them, and their removal with the collection."""

from __future__ import annotations

import importlib
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
from django.conf import settings
from django.db import connection
from django.test import override_settings

from documents.models import Collection, Document, Node, collection_index_name
from documents.selectors import collection_index_ready, collection_index_state
from documents.services.collection_indexes import collection_index_drop, collection_index_ensure
from documents.services.collections import collection_delete
from retrieval.paths import vector
from retrieval.paths.vector import nearest_nodes
from retrieval.scope import resolve_scope
from tests.factories import CollectionFactory, DocumentFactory
from tests.plans import query_plan
from tests.trees import sec, sec_text, sec_tree, tree_save

pytestmark = pytest.mark.django_db

DIMENSIONS: int = settings.EMBEDDING_DIMENSIONS


def _unit(seed: int, count: int) -> np.ndarray:
    vectors = np.random.default_rng(seed).normal(size=(count, DIMENSIONS)).astype(np.float32)
    return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


def _document(collection: Collection, vectors: np.ndarray) -> tuple[Document, list[Node]]:
    """A root with one 1-character leaf per vector (the root gets the first vector too)."""
    spec = sec("Root", "", *["x"] * len(vectors))
    document = DocumentFactory.create(collection=collection, content=sec_text(spec, separator=""))
    nodes = tree_save(document, sec_tree(spec, separator=""), vectors=np.vstack([vectors[:1], vectors]))
    return document, nodes


def test_every_node_carries_its_documents_collection_whoever_writes_it() -> None:
    first, second = CollectionFactory.create(), CollectionFactory.create()
    document, nodes = _document(first, _unit(1, 3))
    assert set(Node.objects.filter(document=document).values_list("collection_id", flat=True)) == {first.pk}
    # A writer that does not know the column (a plain insert) cannot leave it wrong.
    with connection.cursor() as cursor:
        cursor.execute("UPDATE documents_node SET collection_id = %s WHERE id = %s", [second.pk, nodes[1].pk])
    assert Node.objects.get(pk=nodes[1].pk).collection_id == first.pk
    # A document that moves takes its nodes along.
    Document.objects.filter(pk=document.pk).update(collection=second)
    assert set(Node.objects.filter(document=document).values_list("collection_id", flat=True)) == {second.pk}


def test_the_index_is_built_once_the_collection_is_large_enough(
    django_capture_on_commit_callbacks: Any,
) -> None:
    collection = CollectionFactory.create()
    with override_settings(RETRIEVAL_COLLECTION_INDEX_MIN_NODES=10):
        with django_capture_on_commit_callbacks(execute=True):
            _document(collection, _unit(2, 4))  # 5 nodes: not yet
        assert collection_index_state(collection.pk) == "missing"
        with django_capture_on_commit_callbacks(execute=True):
            _document(collection, _unit(3, 6))  # 12 nodes: after the tree swap commits
        assert collection_index_ready(collection.pk)
        assert collection_index_ensure(collection.pk) is False  # already there: nothing to do
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT indexdef FROM pg_indexes WHERE indexname = %s", [collection_index_name(collection.pk)]
        )
        definition = cursor.fetchone()[0]
    # The corpus-wide index's definition, restricted to this collection.
    assert "USING hnsw (embedding vector_cosine_ops)" in definition
    assert "m='16'" in definition and "ef_construction='64'" in definition
    assert f"WHERE (collection_id = {collection.pk})" in definition
    collection_index_drop(collection.pk)
    assert collection_index_state(collection.pk) == "missing"


@override_settings(RETRIEVAL_COLLECTION_INDEX_MIN_NODES=1)
def test_the_planner_uses_the_collection_index_for_its_own_filter() -> None:
    collection = CollectionFactory.create()
    _document(collection, _unit(4, 20))
    collection_index_ensure(collection.pk)
    query = vector.vector_literal(_unit(5, 1)[0])
    sql = vector.collection_hnsw_sql(collection.pk)
    plan = query_plan(sql, vector.hnsw_params(query, limit=10), without_seqscan=True)
    assert collection_index_name(collection.pk) in plan, plan


@override_settings(RETRIEVAL_COLLECTION_INDEX_MIN_NODES=1)
@pytest.mark.slow
def test_a_small_collection_in_a_large_table_is_searched_through_its_index_and_never_starved() -> None:
    big, small = CollectionFactory.create(), CollectionFactory.create()
    noise = _unit(6, 400)
    _document(big, noise)  # the query's neighbours are all here
    small_document, small_nodes = _document(small, _unit(7, 30))
    collection_index_ensure(small.pk)
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE documents_node")
    scope = resolve_scope(collection=small.slug, documents=None, tags=None, user=None)
    assert scope.collection_id == small.pk and scope.whole_collection
    assert scope.document_ids is None and scope.whole_collections == (small.pk,)  # none listed
    search = nearest_nodes(
        query_vector=noise[5], top_k=10, collection_ids=scope.whole_collections,
        collection_id=scope.collection_id, whole_collection=True,
    )  # fmt: skip
    assert search.strategy == vector.HNSW_COLLECTION
    assert search.ef_search == vector.ef_search_for(10)
    # The exact top 10 of the small collection, though every one of them is far from the query.
    node_vectors = {node.pk: np.asarray(node.embedding) for node in small_nodes}
    similarity = {pk: float(v @ noise[5]) for pk, v in node_vectors.items()}
    expected = sorted(similarity, key=lambda pk: (-similarity[pk], pk))[:10]
    assert [hit.node_id for hit in search.hits] == expected
    assert {hit.document_id for hit in search.hits} == {small_document.pk}


@override_settings(RETRIEVAL_COLLECTION_INDEX_MIN_NODES=1)
def test_a_subset_of_an_indexed_collection_is_scanned_exactly_when_small(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    collection = CollectionFactory.create()
    first, _ = _document(collection, _unit(8, 50))
    second, second_nodes = _document(collection, _unit(9, 5))
    collection_index_ensure(collection.pk)
    scope = resolve_scope(collection=collection.slug, documents=[second.pk], tags=None, user=None)
    assert scope.collection_id == collection.pk and not scope.whole_collection
    query = _unit(10, 1)[0]
    search = nearest_nodes(
        query_vector=query, top_k=10, document_ids=scope.document_ids, collection_id=collection.pk
    )
    assert search.strategy == vector.EXACT
    assert {hit.node_id for hit in search.hits} == {node.pk for node in second_nodes}
    # Counted as large: through the collection's index, filtered, and still complete.
    monkeypatch.setattr(vector, "SUBSET_EXACT_MAX_NODES", 0)
    search = nearest_nodes(
        query_vector=query, top_k=10, document_ids=scope.document_ids, collection_id=collection.pk
    )
    assert search.strategy in {vector.HNSW_COLLECTION, vector.EXACT_FALLBACK}
    assert {hit.node_id for hit in search.hits} == {node.pk for node in second_nodes}
    assert first.pk not in {hit.document_id for hit in search.hits}


def test_without_its_index_a_collection_keeps_the_scans_it_had() -> None:
    collection = CollectionFactory.create()
    document, nodes = _document(collection, _unit(11, 8))
    assert collection_index_state(collection.pk) == "missing"
    search = nearest_nodes(
        query_vector=_unit(12, 1)[0], top_k=50, document_ids=[document.pk],
        collection_id=collection.pk, whole_collection=True,
    )  # fmt: skip
    assert search.strategy == vector.EXACT
    assert len(search.hits) == len(nodes)


def test_deleting_the_collection_drops_its_index(django_capture_on_commit_callbacks: Any) -> None:
    collection = CollectionFactory.create()
    _document(collection, _unit(13, 4))
    with override_settings(RETRIEVAL_COLLECTION_INDEX_MIN_NODES=1):
        assert collection_index_ensure(collection.pk)
    with django_capture_on_commit_callbacks(execute=True):
        collection_delete(collection=collection)
    assert collection_index_state(collection.pk) == "missing"


@pytest.mark.django_db(transaction=True)  # the migration builds CONCURRENTLY, outside any transaction
def test_the_migration_builds_the_indexes_the_service_would(settings: Any) -> None:
    migration = importlib.import_module("documents.migrations.0011_collection_indexes")
    settings.RETRIEVAL_COLLECTION_INDEX_MIN_NODES = 1_000_000  # no index from the tree swaps
    large, small = CollectionFactory.create(), CollectionFactory.create()
    _document(large, _unit(14, 6))
    _document(small, _unit(15, 2))
    settings.RETRIEVAL_COLLECTION_INDEX_MIN_NODES = 5
    try:
        migration.build(None, SimpleNamespace(connection=connection))
        assert collection_index_ready(large.pk) and collection_index_state(small.pk) == "missing"
        built = _definition(large.pk)
        collection_index_drop(large.pk)
        assert collection_index_ensure(large.pk)
        assert _definition(large.pk) == built, "the migration's frozen definition is the service's"
    finally:
        collection_index_drop(large.pk)


def _definition(collection_id: int) -> str:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT indexdef FROM pg_indexes WHERE indexname = %s", [collection_index_name(collection_id)]
        )
        row = cursor.fetchone()
    return str(row[0]) if row else ""
