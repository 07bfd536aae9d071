"""The vector side of retrieval: nearest nodes through HNSW, and exact node similarities.

Document level (``nearest_nodes``): the top-K nodes by cosine similarity, then the best score per
document (``vector_document_scores``). pgvector 0.6 has no iterative index scan: an HNSW scan returns at
most ``hnsw.ef_search`` rows and a WHERE clause filters *after* it, so a selective filter can
starve the result. Hence:

- no filter: the HNSW index, ``ef_search`` = 4·K (at least 40, at most pgvector's 1000);
- a scope inside one collection that has its own partial index
  (``documents.services.collection_indexes``): that index, ``ef_search`` = 4·K for the whole
  collection (its beam holds no other collection's nodes, however large the table grows); a
  subset of it (a documents or tags filter) is scanned exactly when small
  (<= ``SUBSET_EXACT_MAX_NODES``), else through that index with the widest beam;
- a filter over few nodes (<= ``EXACT_SCAN_MAX_NODES``): an exact scan restricted to those
  documents (through the ``document`` b-tree index, cheap at that size, and never starved),
  unless the scope is large and a sizeable share of the corpus (``_index_first``), which tries
  the index first;
- a filter over many nodes: HNSW over-fetching ``EF_SEARCH_MAX`` candidates, then filtered.

An index scan that still comes back with fewer than K rows while more exist (a filter, or a beam
spent on dead tuples of replaced nodes not yet vacuumed) is widened once, then replaced by the
exact scan: a short answer is never returned silently.

Node level (``nodes_with_similarity``): every node of the selected documents with its exact
similarity, in one query: TreeExpansion must see the whole tree, not what the index returned.

Nodes a person excluded from retrieval (``Node.excluded``, set on the whole excluded subtree) are
left out by every query here; the HNSW scan filters them after the index like any filter.

Similarity is ``1 - cosine distance``; embeddings are L2-normalised, so it is the cosine itself.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import psycopg
from django.db import connection, transaction

from documents.models import Node
from documents.selectors import collection_index_ready
from retrieval.outline import OutlineNode
from retrieval.scope import documents_condition

EF_SEARCH_MIN = 40  # pgvector's default: never search a thinner beam than the stock setting
EF_SEARCH_MAX = 1000  # pgvector's upper bound for hnsw.ef_search
# Below this many nodes in the filtered scope, an exact scan is never starved and cheap enough:
# it grows with the scope (not the corpus): docs/benchmarks.md, "Latency on real corpora" (the vector stage).
EXACT_SCAN_MAX_NODES = 20_000
# A scope this large that is also this share of the corpus tries the index first: a beam of
# EF_SEARCH_MAX then holds a few hundred of its nodes. Measured on CUAD (a third of the corpus's
# nodes): through the index in under half the exact scan's time. When the beam comes back short anyway (the query's
# neighbours lie elsewhere), the exact scan makes up for it, as for any filtered index scan.
INDEX_FIRST_MIN_NODES = 5_000
INDEX_FIRST_MIN_SHARE = 0.1

# A subset of an indexed collection (a documents or tags filter) this small is scanned exactly.
SUBSET_EXACT_MAX_NODES = 5_000
# How long a query trusts what this process last saw of a collection index (see collection_index_ready).
INDEX_STATE_MAX_AGE_S = 10.0

HNSW = "hnsw"
HNSW_FILTERED = "hnsw_filtered"
HNSW_COLLECTION = "hnsw_collection"  # the collection's own partial index
EXACT = "exact"
EXACT_FALLBACK = "exact_fallback"  # the filtered HNSW scan came back short


@dataclass(frozen=True, slots=True)
class NodeHit:
    node_id: int
    document_id: int
    similarity: float


@dataclass(frozen=True, slots=True)
class VectorSearch:
    hits: tuple[NodeHit, ...]  # best first; ties by node id, so runs are reproducible
    strategy: str  # HNSW, HNSW_FILTERED, EXACT or EXACT_FALLBACK
    ef_search: int | None  # the beam width the index scan used, when it did
    fetched: int  # rows the database returned before the cut to K


@dataclass(frozen=True, slots=True)
class DocumentVectorScore:
    document_id: int
    score: float  # the best similarity of any of its nodes among the hits
    hits: int  # how many of the top-K nodes are in this document
    best_node_id: int


@dataclass(frozen=True, slots=True)
class ScoredNodeRow:
    """A node of a selected document with its exact similarity to the query."""

    id: int
    document_id: int
    parent_id: int | None
    depth: int
    kind: str
    order: int
    start_char: int
    end_char: int
    token_count: int
    title: str
    summary: str
    toc_path: str
    similarity: float  # 0.0 for a node without an embedding

    def outline_node(self, similarity: float | None = None) -> OutlineNode:
        """The node as TreeExpansion and packing see it, with its cosine (or ``similarity``)."""
        return OutlineNode(
            id=self.id,
            document_id=self.document_id,
            parent_id=self.parent_id,
            depth=self.depth,
            kind=self.kind,
            order=self.order,
            start_char=self.start_char,
            end_char=self.end_char,
            token_count=self.token_count,
            similarity=self.similarity if similarity is None else similarity,
        )


def vector_literal(vector: np.ndarray | Sequence[float]) -> str:
    """pgvector's text form ``[x,y,...]``, for raw SQL with a ``%s::vector`` parameter (a list's
    own repr, written in C, less its spaces: a third faster than joining the numbers' reprs)."""
    return repr(np.asarray(vector, dtype=np.float32).tolist()).replace(" ", "")


def ef_search_for(top_k: int) -> int:
    return min(EF_SEARCH_MAX, max(EF_SEARCH_MIN, top_k * 4))


@dataclass(frozen=True)
class NodeScope:
    """The documents whose nodes a search keeps: a condition on ``document_id``, its parameters."""

    condition: str
    params: list[Any]


def hnsw_sql(condition: str | None = None) -> str:
    """The index scan (``condition``: on ``document_id``, applied to what the index returns).
    ORDER BY the bare ``<=>`` operator (here by its output column, the same expression) is what
    lets the planner use HNSW; the vector is sent and parsed once."""
    table = connection.ops.quote_name(Node._meta.db_table)
    where = f"WHERE {condition} AND NOT excluded" if condition else "WHERE NOT excluded"
    return (
        f"SELECT id, document_id, 1 - distance AS similarity FROM ("
        f"  SELECT id, document_id, embedding <=> %s::vector AS distance FROM {table} {where} "
        "   ORDER BY distance LIMIT %s) AS nearest"
    )


def hnsw_params(query: str, *, limit: int, scope: NodeScope | None = None) -> list[Any]:
    return [query, *(scope.params if scope is not None else []), limit]


def collection_hnsw_sql(collection_id: int, condition: str | None = None) -> str:
    """The scan of one collection's own index. The id is written into the statement, not bound:
    the planner matches a partial index only against a predicate it can see."""
    table = connection.ops.quote_name(Node._meta.db_table)
    where = f"{condition} AND " if condition else ""
    return (
        f"SELECT id, document_id, 1 - distance AS similarity FROM ("
        f"  SELECT id, document_id, embedding <=> %s::vector AS distance FROM {table} "
        f"  WHERE collection_id = {int(collection_id)} AND {where}NOT excluded "
        "   ORDER BY distance LIMIT %s) AS nearest"
    )


def exact_sql(condition: str | None = None) -> str:
    """Exact top-K (``condition``: within some documents): ordering by the similarity
    expression, not the bare operator, keeps the planner off the HNSW index, so nothing can
    starve the scan."""
    table = connection.ops.quote_name(Node._meta.db_table)
    where = f"{condition} AND " if condition else ""
    return (
        f"SELECT id, document_id, 1 - (embedding <=> %s::vector) AS similarity FROM {table} "
        f"WHERE {where}NOT excluded AND embedding IS NOT NULL ORDER BY similarity DESC, id LIMIT %s"
    )


def nearest_nodes(
    *,
    query_vector: np.ndarray,
    top_k: int,
    document_ids: Sequence[int] | None = None,
    collection_ids: Sequence[int] | None = None,
    collection_id: int | None = None,
    whole_collection: bool = False,
) -> VectorSearch:
    """The ``top_k`` nodes nearest the query: within ``document_ids``, else within every
    document of ``collection_ids`` (not listed: the statements keep to them), else in the corpus.

    ``collection_id``: the one collection those documents lie in, when the caller knows it;
    ``whole_collection``: they are all of its documents (a query filtered to the collection).
    """
    if document_ids is not None and not document_ids:
        return VectorSearch(hits=(), strategy=EXACT, ef_search=None, fetched=0)
    query = vector_literal(query_vector)
    scope = None
    if document_ids is not None or collection_ids is not None:
        listed = sorted(set(document_ids)) if document_ids is not None else None
        scope = NodeScope(
            *documents_condition("document_id", document_ids=listed, collection_ids=collection_ids)
        )
    if (
        scope is not None
        and collection_id is not None
        and collection_index_ready(collection_id, max_age_s=INDEX_STATE_MAX_AGE_S)
    ):
        return _collection_search(query, scope, top_k, collection_id=collection_id, whole=whole_collection)
    return _corpus_search(query, scope, top_k)


def _corpus_search(query: str, scope: NodeScope | None, top_k: int) -> VectorSearch:
    """Through the corpus-wide index, or an exact scan of a small scope (None: all)."""
    in_scope: int | None = None
    if scope is not None:
        in_scope = _embedded_node_count(scope)
        if in_scope <= EXACT_SCAN_MAX_NODES and not _index_first(in_scope):
            return _exact_search(query, scope, top_k)
    # Unfiltered: a beam of 4·K. Filtered: the filter applies to what the index returns, so
    # over-fetch the widest beam pgvector allows (such a scope is a sizeable share of the corpus).
    ef_search = ef_search_for(top_k) if scope is None else EF_SEARCH_MAX
    return _index_search(
        hnsw_sql(scope.condition if scope is not None else None), hnsw_params(query, limit=top_k, scope=scope),
        ef_search, HNSW if scope is None else HNSW_FILTERED, query=query, top_k=top_k, scope=scope,
        in_scope=in_scope,
    )  # fmt: skip


def _collection_search(
    query: str, scope: NodeScope, top_k: int, *, collection_id: int, whole: bool
) -> VectorSearch:
    """Through the collection's own index: its beam holds the collection's nodes only, so a beam
    of 4·K is enough for the whole collection however large the table grows (``whole``: the
    documents are all of the collection's)."""
    subset_nodes = None if whole else _embedded_node_count(scope)
    if subset_nodes is not None and subset_nodes <= SUBSET_EXACT_MAX_NODES:
        return _exact_search(query, scope, top_k)
    scan = None if whole else scope  # the collection's own index holds its nodes alone
    sql = collection_hnsw_sql(collection_id, scan.condition if scan is not None else None)
    ef_search = ef_search_for(top_k) if whole else EF_SEARCH_MAX
    return _index_search(
        sql, hnsw_params(query, limit=top_k, scope=scan), ef_search, HNSW_COLLECTION,
        query=query, top_k=top_k, scope=scope, in_scope=subset_nodes,
    )  # fmt: skip


def _exact_search(query: str, scope: NodeScope, top_k: int) -> VectorSearch:
    return _search(_fetch(*_exact_statement(query, scope, top_k)), top_k, EXACT, None)


def _exact_statement(query: str, scope: NodeScope | None, top_k: int) -> tuple[str, list[Any]]:
    if scope is None:
        return exact_sql(), [query, top_k]
    return exact_sql(scope.condition), [query, *scope.params, top_k]


def _index_search(
    sql: str,
    params: list[Any],
    ef_search: int,
    strategy: str,
    *,
    query: str,
    top_k: int,
    scope: NodeScope | None,
    in_scope: int | None,
) -> VectorSearch:
    """An index scan; when it comes back short while more nodes exist, widened once, then
    replaced by the exact scan of the scope (None: the whole corpus)."""
    # The beam (ef_search) is the over-fetch: the index yields up to that many candidates, the
    # filter drops some, LIMIT stops at K.
    rows = _index_scan(sql, params, ef_search)
    if len(rows) >= top_k:
        return _search(rows, top_k, strategy, ef_search)
    # Short. Often there is simply no more (a small corpus); otherwise the beam was spent on rows
    # the filter dropped, or on dead tuples (replaced nodes the index keeps until VACUUM).
    available = in_scope if in_scope is not None else _embedded_node_count(scope)
    if len(rows) >= available:
        return _search(rows, top_k, strategy, ef_search)
    if ef_search < EF_SEARCH_MAX:
        ef_search = EF_SEARCH_MAX
        rows = _index_scan(sql, params, ef_search)
        if len(rows) >= min(top_k, available):
            return _search(rows, top_k, strategy, ef_search)
    return _search(_fetch(*_exact_statement(query, scope, top_k)), top_k, EXACT_FALLBACK, None)


def vector_document_scores(hits: Sequence[NodeHit]) -> dict[int, DocumentVectorScore]:
    """Best similarity per document (FABLE's "max score per document"), with its hit count.

    No bonus for several hits yet: it would favour long documents, and whether it helps is for
    the benchmarks to show. ``hits`` is reported so the effect can be measured.
    """
    best: dict[int, NodeHit] = {}
    counts: dict[int, int] = {}
    for hit in hits:
        counts[hit.document_id] = counts.get(hit.document_id, 0) + 1
        current = best.get(hit.document_id)
        if current is None or (hit.similarity, -hit.node_id) > (current.similarity, -current.node_id):
            best[hit.document_id] = hit
    return {
        document_id: DocumentVectorScore(
            document_id=document_id,
            score=hit.similarity,
            hits=counts[document_id],
            best_node_id=hit.node_id,
        )
        for document_id, hit in best.items()
    }


# ScoredNodeRow's fields, in order.
_NODE_ROW_COLUMNS = 'id, document_id, parent_id, depth, kind, "order", start_char, end_char, token_count, title, summary, toc_path'


def nodes_with_similarity(*, document_ids: Sequence[int], query_vector: np.ndarray) -> list[ScoredNodeRow]:
    """Every node of these documents with its exact similarity to the query: one query, no N+1.
    Nodes excluded from retrieval are left out.

    The leaf text (``content``) stays in the database: chunk text is sliced from the document.
    Plain SQL: the ORM's compilation and vector conversion took a quarter of this call's time
    (docs/benchmarks.md, "Latency on real corpora": plain SQL on the hot path).
    """
    table = connection.ops.quote_name(Node._meta.db_table)
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT {_NODE_ROW_COLUMNS}, coalesce(1 - (embedding <=> %s::vector), 0) FROM {table} "
            'WHERE document_id = ANY(%s) AND NOT excluded ORDER BY document_id, "order"',
            [vector_literal(query_vector), list(document_ids)],
        )
        return [ScoredNodeRow(*row) for row in cursor.fetchall()]


def _index_first(in_scope: int) -> bool:
    """Whether a filtered scope of ``in_scope`` nodes tries the HNSW index before an exact scan:
    large and a sizeable share of the corpus (PostgreSQL's row estimate, no count of its own)."""
    if in_scope < INDEX_FIRST_MIN_NODES:
        return False
    with connection.cursor() as cursor:
        cursor.execute("SELECT reltuples FROM pg_class WHERE oid = %s::regclass", [Node._meta.db_table])
        row = cursor.fetchone()
    corpus = float(row[0]) if row and row[0] and row[0] > 0 else float(in_scope)
    return in_scope >= INDEX_FIRST_MIN_SHARE * corpus


def _embedded_node_count(scope: NodeScope | None) -> int:
    table = connection.ops.quote_name(Node._meta.db_table)
    where, params = (f"{scope.condition} AND ", scope.params) if scope is not None else ("", [])
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT count(*) FROM {table} WHERE {where}NOT excluded AND embedding IS NOT NULL", params
        )
        row = cursor.fetchone()
    return int(row[0]) if row else 0


def _index_scan(sql: str, params: list[Any], ef_search: int) -> list[tuple[int, int, float | None]]:
    """The index scan under a beam of ``ef_search``, set for this scan alone.

    ``set_config(..., true)`` is SET LOCAL: it lasts until the transaction ends, so the wider beam
    does not leak to other queries on this connection (and it takes a bound parameter; SET does
    not). Sent with the scan as one message: PostgreSQL runs a message's statements as one
    transaction (an implicit one in autocommit), which ends after the scan; one round trip
    instead of four (BEGIN, the setting, the scan, COMMIT) on every query.
    """
    beam = "SELECT set_config('hnsw.ef_search', %s, true)"
    with connection.cursor() as cursor:
        if _sends_statements_together(cursor):
            cursor.execute(f"{beam}; {sql}", [str(ef_search), *params])
            cursor.nextset()
            return list(cursor.fetchall())
    # Server-side binding (OPTIONS "server_side_binding") sends one statement per message.
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(beam, [str(ef_search)])
        cursor.execute(sql, params)
        return list(cursor.fetchall())


def _sends_statements_together(cursor: Any) -> bool:
    """Whether the cursor binds parameters client-side (Django's default), which sends a query
    through the simple protocol: several statements may share a message."""
    return isinstance(cursor.cursor, psycopg.ClientCursor)


def _fetch(sql: str, params: list[Any]) -> list[tuple[int, int, float | None]]:
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return list(cursor.fetchall())


def _search(
    rows: list[tuple[int, int, float | None]], top_k: int, strategy: str, ef_search: int | None
) -> VectorSearch:
    hits = [
        NodeHit(node_id=int(node_id), document_id=int(document_id), similarity=float(similarity))
        for node_id, document_id, similarity in rows
        if similarity is not None  # a node without an embedding has no distance
    ]
    # The index returns distance order only; the id tie-break makes equal scores reproducible.
    hits.sort(key=lambda hit: (-hit.similarity, hit.node_id))
    return VectorSearch(hits=tuple(hits[:top_k]), strategy=strategy, ef_search=ef_search, fetched=len(rows))
