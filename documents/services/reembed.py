"""Re-embedding: every node after a change of model (``nodes_reembed``), or the nodes a person's
edit changed (``nodes_embed_stale``).

``nodes_reembed`` re-embeds every node with the configured embedder, changing the vector
column's size if needed.

Used by ``manage.py openfable reembed`` after the embedding model or OPENFABLE_EMBEDDING_DIMENSIONS
changed (the system check openfable.E005 points here).

Two phases, so queries keep working on the old vectors for as long as possible:

1. embed every node into memory, outside any transaction (the slow part: minutes to hours);
2. swap, in one transaction: lock the node table against writes, embed whatever changed
   meanwhile, then (when the size changes) drop the HNSW index, retype the column, write every
   vector, recreate the index; record the model on the documents and move the corpus version.

A failure in either phase leaves the corpus exactly as it was.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import numpy as np
from django.conf import settings
from django.db import connection, transaction

from documents.ingestion.tree_rows import embedding_text
from documents.models import HNSW_INDEX_NAME, Document, Node
from documents.services.collection_indexes import (
    collection_index_ensure,
    collection_indexes_drop_all,
    corpus_index,
)
from documents.services.trees import corpus_version_bump
from openfable.checks import stored_embedding_dimensions
from openfable.embeddings import Embedder, check_vectors, get_embedder
from openfable.errors import UserInputError

DEFAULT_BATCH_SIZE = 256
_READ_CHUNK = 2000  # rows per server-side cursor fetch while hashing texts

Progress = Callable[[int, int], None]  # (nodes embedded so far, total)


class ReembedError(UserInputError):
    """Re-embedding cannot start with this configuration; the message names the fix."""


@dataclass(frozen=True)
class ReembedResult:
    nodes: int
    documents: int
    old_dimensions: int
    new_dimensions: int
    model: str
    column_changed: bool
    seconds: float


@dataclass
class _Embedded:
    digest: bytes  # of the text the vector was computed from
    vector: np.ndarray


def nodes_reembed(
    *, embedder: Embedder, batch_size: int = DEFAULT_BATCH_SIZE, progress: Progress | None = None
) -> ReembedResult:
    """Recompute every node's vector with ``embedder`` and store it (see the module docstring)."""
    started = time.perf_counter()
    new_dimensions = int(embedder.dimensions)
    if new_dimensions != settings.EMBEDDING_DIMENSIONS:
        raise ReembedError(
            f"The embedding model {embedder.model_name!r} makes {new_dimensions}-dimensional vectors but "
            f"OPENFABLE_EMBEDDING_DIMENSIONS is {settings.EMBEDDING_DIMENSIONS}. Set "
            f"OPENFABLE_EMBEDDING_DIMENSIONS={new_dimensions} for this model, or configure a model that "
            f"makes {settings.EMBEDDING_DIMENSIONS}-dimensional vectors (OPENFABLE_EMBEDDING_URL, "
            "OPENFABLE_EMBEDDING_MODEL), and run reembed again."
        )
    if batch_size < 1:
        raise ReembedError(f"The batch size must be at least 1, got {batch_size}.")
    old_dimensions = stored_embedding_dimensions(connection.alias)
    if old_dimensions is None:
        raise ReembedError("The node table does not exist yet; run `python manage.py migrate` first.")

    total = Node.objects.count()
    embedded = _embed_nodes(
        _node_texts(), embedder=embedder, batch_size=batch_size, total=total, progress=progress
    )

    column_changed = old_dimensions != new_dimensions
    with transaction.atomic():
        # Writers (re-indexing, edits) wait until the swap is done; readers go on meanwhile.
        _execute(f"LOCK TABLE {_table()} IN EXCLUSIVE MODE")
        _catch_up(embedded, embedder=embedder, batch_size=batch_size)
        if column_changed:
            # Deferred foreign-key checks still pending from this transaction (nodes saved earlier
            # in it, e.g. by a caller's own transaction) make PostgreSQL refuse ALTER TABLE: run them now.
            _execute("SET CONSTRAINTS ALL IMMEDIATE")
            _drop_hnsw_index()
            # The per-collection indexes too: rebuilt once over the new vectors below, not row by row.
            rebuild = collection_indexes_drop_all()
            # USING NULL: old vectors cannot be cast to the new size, and every row is rewritten next.
            _execute(
                f"ALTER TABLE {_table()} ALTER COLUMN embedding TYPE vector({new_dimensions}) USING NULL"
            )
        _write_vectors(embedded, batch_size=batch_size)
        if column_changed:
            # Built once over the finished column: far faster than updating the graph row by row.
            _create_hnsw_index()
            for collection_id in rebuild:
                collection_index_ensure(collection_id)
        indexed = Document.objects.filter(pk__in=Node.objects.values("document_id"))
        documents = indexed.update(embedding_model=embedder.model_name)
        corpus_version_bump()
    return ReembedResult(
        nodes=len(embedded),
        documents=documents,
        old_dimensions=old_dimensions,
        new_dimensions=new_dimensions,
        model=embedder.model_name,
        column_changed=column_changed,
        seconds=round(time.perf_counter() - started, 3),
    )


def nodes_embed_stale(*, node_ids: list[int], embedder: Embedder | None = None) -> int:
    """Embed the given nodes that an edit marked stale, from their current text; returns how many.

    The vectors are computed outside any transaction, then written only to nodes whose text is
    still the one embedded (a second edit meanwhile queues its own run), and the corpus version
    moves so cached results made with the old vectors are not served.
    """
    stale = list(
        Node.objects.filter(pk__in=node_ids, embedding_stale=True)
        .order_by("pk")
        .values_list("pk", "kind", "toc_path", "summary", "content")
    )
    if not stale:
        return 0
    embedder = embedder or get_embedder()
    texts = {
        pk: embedding_text(kind=kind, toc_path=toc, summary=summary, content=content)
        for pk, kind, toc, summary, content in stale
    }
    vectors = check_vectors(
        embedder.embed_passages(list(texts.values())),
        count=len(texts),
        dimensions=embedder.dimensions,
        model_name=embedder.model_name,
    )
    written = 0
    with transaction.atomic():
        current = (
            Node.objects.select_for_update()
            .filter(pk__in=list(texts))
            .only("pk", "kind", "toc_path", "summary", "content", "embedding", "embedding_stale")
        )
        changed = []
        by_id = dict(zip(texts, vectors, strict=True))
        for node in current:
            text = embedding_text(
                kind=node.kind, toc_path=node.toc_path, summary=node.summary, content=node.content
            )
            if text == texts[node.pk]:
                node.embedding = by_id[node.pk]
                node.embedding_stale = False
                changed.append(node)
        Node.objects.bulk_update(changed, ["embedding", "embedding_stale"], batch_size=500)
        written = len(changed)
        if written:
            corpus_version_bump()
    return written


def _node_texts() -> Iterator[tuple[int, str]]:
    """(node id, the text it is embedded from), streamed with a server-side cursor."""
    rows = (
        Node.objects.order_by("pk")
        .values_list("pk", "kind", "toc_path", "summary", "content")
        .iterator(chunk_size=_READ_CHUNK)
    )
    for pk, kind, toc_path, summary, content in rows:
        yield pk, embedding_text(kind=kind, toc_path=toc_path, summary=summary, content=content)


def _digest(text: str) -> bytes:
    return hashlib.blake2b(text.encode("utf-8"), digest_size=16).digest()


def _embed_nodes(
    texts: Iterator[tuple[int, str]],
    *,
    embedder: Embedder,
    batch_size: int,
    total: int,
    progress: Progress | None = None,
) -> dict[int, _Embedded]:
    embedded: dict[int, _Embedded] = {}
    batch: list[tuple[int, str]] = []

    def flush() -> None:
        vectors = check_vectors(
            embedder.embed_passages([text for _, text in batch]),
            count=len(batch),
            dimensions=embedder.dimensions,
            model_name=embedder.model_name,
        )
        for (pk, text), vector in zip(batch, vectors, strict=True):
            embedded[pk] = _Embedded(digest=_digest(text), vector=vector)
        batch.clear()
        if progress:
            progress(len(embedded), total)

    for item in texts:
        batch.append(item)
        if len(batch) >= batch_size:
            flush()
    if batch:
        flush()
    return embedded


def _catch_up(embedded: dict[int, _Embedded], *, embedder: Embedder, batch_size: int) -> None:
    """Embed nodes created or edited while phase 1 ran; forget nodes deleted meanwhile."""
    seen: set[int] = set()
    stale: list[tuple[int, str]] = []
    for pk, text in _node_texts():
        seen.add(pk)
        known = embedded.get(pk)
        if known is None or known.digest != _digest(text):
            stale.append((pk, text))
    for pk in set(embedded) - seen:
        del embedded[pk]
    if stale:
        embedded.update(_embed_nodes(iter(stale), embedder=embedder, batch_size=batch_size, total=len(stale)))


def _write_vectors(embedded: dict[int, _Embedded], *, batch_size: int) -> None:
    # One UPDATE per batch from two parallel arrays. Not bulk_update: Django casts its CASE to the
    # model field's vector(N), and N is fixed at import time from the old settings.
    ids = sorted(embedded)
    sql = (
        f"UPDATE {_table()} AS node SET embedding = batch.embedding::vector "
        "FROM unnest(%s::bigint[], %s::text[]) AS batch(id, embedding) WHERE node.id = batch.id"
    )
    step = max(batch_size, 500)
    with connection.cursor() as cursor:
        for start in range(0, len(ids), step):
            part = ids[start : start + step]
            cursor.execute(sql, [part, [_vector_text(embedded[pk].vector) for pk in part]])


def _vector_text(vector: np.ndarray) -> str:
    # Python floats print the shortest text that reads back as the same float32 value.
    return "[" + ",".join(map(str, vector.tolist())) + "]"


def _drop_hnsw_index() -> None:
    _execute(f"DROP INDEX IF EXISTS {connection.ops.quote_name(HNSW_INDEX_NAME)}")


def _create_hnsw_index() -> None:
    # From the model's own HnswIndex, so the definition (m, ef_construction, opclass) lives in one place.
    with connection.schema_editor() as editor:
        editor.add_index(Node, corpus_index())


def _table() -> str:
    return connection.ops.quote_name(Node._meta.db_table)


def _execute(sql: str) -> None:
    with connection.cursor() as cursor:
        cursor.execute(sql)
