"""Per-collection HNSW indexes: a partial index over one collection's nodes.

A query is usually filtered to one collection. pgvector 0.6 applies a WHERE clause after the
index scan, so the corpus-wide index starves on a collection that is a small share of the table
(its beam fills with other collections' nodes) and the vector path must scan the collection's
nodes exactly, a cost that grows with the collection. A partial index ``WHERE collection_id = N``
holds only that collection's nodes: the scan stays an index scan of ``ef_search`` rows however
large the collection and the table grow.

- ``collection_index_ensure`` builds the index once the collection holds
  ``RETRIEVAL_COLLECTION_INDEX_MIN_NODES`` embedded nodes (below that an exact scan is cheap: a few
  milliseconds). Called after every tree swap commits; after the first build, PostgreSQL keeps the
  index up to date on every insert like any other. The build is ``CONCURRENTLY`` outside a
  transaction (writers go on meanwhile) and holds an advisory lock, so two workers finishing
  trees at once build it once; an index left invalid by a failed build is dropped and built again.
- ``collection_index_drop`` removes it (a deleted collection, a re-embedding that retypes the column).
- The vector path uses it only when PostgreSQL marks it valid (``documents.selectors.collection_index_ready``).

The definition (opclass, m, ef_construction) is the corpus-wide index's own, read from the model.
"""

from __future__ import annotations

import logging

from django.conf import settings
from django.db import DatabaseError, connection
from django.db.models import Q
from pgvector.django import HnswIndex

from documents.models import COLLECTION_INDEX_PREFIX, HNSW_INDEX_NAME, Document, Node, collection_index_name
from documents.selectors import collection_index_state, forget_collection_index_states

log = logging.getLogger(__name__)

_ADVISORY_LOCK_BASE = 0x0F4B1E00000000  # + collection id: one build per collection at a time


def corpus_index() -> HnswIndex:
    """The corpus-wide HNSW index as the model declares it: the one definition (m,
    ef_construction, opclass) every HNSW index of the node table is built from."""
    corpus = next(index for index in Node._meta.indexes if index.name == HNSW_INDEX_NAME)
    assert isinstance(corpus, HnswIndex), "Node declares its HNSW index"
    return corpus


def collection_index(collection_id: int) -> HnswIndex:
    """The partial index of one collection, defined like the corpus-wide index of the model."""
    corpus = corpus_index()
    return HnswIndex(
        name=collection_index_name(collection_id),
        fields=list(corpus.fields),
        m=corpus.m,
        ef_construction=corpus.ef_construction,
        opclasses=list(corpus.opclasses),
        condition=Q(collection_id=int(collection_id)),
    )


def collection_index_ensure(collection_id: int) -> bool:
    """Build the collection's index if it is due and missing (or left invalid). True when this
    call built it. Outside a transaction a database error is logged, not raised: the vector path
    works without the index (exact scans), and the build is tried again after the next tree swap."""
    name = collection_index_name(collection_id)
    try:
        state = collection_index_state(collection_id)
        if state == "valid" or _embedded_nodes(collection_id) < settings.RETRIEVAL_COLLECTION_INDEX_MIN_NODES:
            return False
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_try_advisory_lock(%s)", [_ADVISORY_LOCK_BASE + int(collection_id)])
            row = cursor.fetchone()
        if not (row and row[0]):
            return False  # another process is building it right now
        try:
            concurrently = not connection.in_atomic_block  # CONCURRENTLY cannot run in a transaction
            state = collection_index_state(collection_id)  # again, now that no one else builds it
            if state == "valid":
                return False
            if state == "invalid":  # a build that failed or was interrupted
                _drop(name, concurrently=concurrently)
            if not concurrently:
                # Inside a transaction (a re-embedding, a test), PostgreSQL refuses CREATE INDEX
                # while deferred foreign-key checks of rows written in it are pending: run them now.
                with connection.cursor() as cursor:
                    cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")
            with connection.schema_editor(atomic=False) as editor:
                index = collection_index(collection_id)
                editor.execute(index.create_sql(Node, editor, concurrently=concurrently))
            forget_collection_index_states()
            return True
        finally:
            with connection.cursor() as cursor:
                cursor.execute("SELECT pg_advisory_unlock(%s)", [_ADVISORY_LOCK_BASE + int(collection_id)])
    except DatabaseError as exc:
        if connection.in_atomic_block:
            raise  # the caller's transaction is broken now: it must know
        log.warning("building the HNSW index of collection %s failed: %s", collection_id, exc)
        return False


def collection_index_drop(collection_id: int) -> None:
    _drop(collection_index_name(collection_id), concurrently=not connection.in_atomic_block)


def collection_indexes_drop_all() -> list[int]:
    """Drop every per-collection index; the ids of the collections that had one."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT indexname FROM pg_indexes WHERE tablename = %s AND indexname LIKE %s",
            [Node._meta.db_table, COLLECTION_INDEX_PREFIX + "%"],
        )
        names = [row[0] for row in cursor.fetchall()]
    for name in names:
        _drop(name, concurrently=not connection.in_atomic_block)
    return [int(name.removeprefix(COLLECTION_INDEX_PREFIX)) for name in names]


def _embedded_nodes(collection_id: int) -> int:
    # Through the collection's documents and the node table's document index: no scan of the
    # whole table while the collection is still small.
    return Node.objects.filter(
        document__in=Document.objects.filter(collection_id=collection_id).values("pk"),
        embedding__isnull=False,
    ).count()


def _drop(name: str, *, concurrently: bool) -> None:
    keyword = " CONCURRENTLY" if concurrently else ""
    with connection.cursor() as cursor:
        cursor.execute(f"DROP INDEX{keyword} IF EXISTS {connection.ops.quote_name(name)}")
    forget_collection_index_states()
