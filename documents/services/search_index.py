"""The lexical index and its statistics, written in the transaction that changes a tree.

What a query's document-level BM25 reads (``retrieval.paths.lexical``), kept here and nowhere else:

- ``DocumentTerm``, the postings: each document's term frequencies, summed over its leaves (those
  excluded from retrieval left out);
- ``SearchableDocument``: the documents a query can search (a root not excluded from
  retrieval), with their collection and length;
- per collection, the term dictionary (``CollectionTerm``: how many documents hold each term)
  and ``CollectionSearchStats`` (how many documents a query can search, and their total length).

The last two are sums over the first two, kept by adding what changed rather than counted per
query: at a million nodes, counting a common term's holders and the scope's length cost a query
more than everything else it did (docs/benchmarks.md, "Synthetic corpora"). A change is a signed difference
added with ``INSERT ... ON CONFLICT DO UPDATE``. Writers of one collection's index take a lock
on it first (``_COLLECTIONS_LOCK_SQL``) and hold it to their commit: two of them otherwise lock the
same dictionary rows in different orders across their statements, and deadlock. They were already
serialised from their corpus-version bump to their commit; now from their index write.
"""

from __future__ import annotations

from collections.abc import Sequence

from django.db import connection

# Writers of these documents' collections' index one at a time, to the end of the transaction
# (parameters: the lock space, the document id array); sorted, so that two writers of several
# collections take them in the same order.
_COLLECTIONS_LOCK_SQL = (
    "SELECT pg_advisory_xact_lock(%s::int, collection_id::int) FROM ("
    "  SELECT DISTINCT collection_id FROM documents_document WHERE id = ANY(%s) ORDER BY collection_id) AS c"
)
_LOCK_SPACE = 0x5EA2C4  # the advisory lock's first key: a space of its own

# The collections' statistics moved by what the documents took away or brought (the CTE
# ``moved`` holds (collection_id, documents, tokens) rows).
_STATS_ADD = (
    "INSERT INTO documents_collectionsearchstats AS stats (collection_id, documents, tokens) "
    "SELECT collection_id, sum(documents), sum(tokens) FROM moved GROUP BY collection_id "
    "ON CONFLICT (collection_id) DO UPDATE "
    "SET documents = stats.documents + excluded.documents, tokens = stats.tokens + excluded.tokens"
)
# Add the signed counts of the CTE ``counts`` (collection_id, term, documents) to the dictionary.
_TERMS_ADD = (
    "INSERT INTO documents_collectionterm AS held (collection_id, term, documents) "
    "SELECT collection_id, term, documents FROM counts "
    "ON CONFLICT (term, collection_id) DO UPDATE SET documents = held.documents + excluded.documents"
)

# The documents leave the index (parameter: document id array, twice): their postings go and
# their terms' counts drop by one; they are no longer searchable, and their collections'
# statistics drop by them.
_REMOVE_SQL = (
    "WITH removed AS (DELETE FROM documents_documentterm WHERE document_id = ANY(%s) "
    "                 RETURNING document_id, term), "
    "counts AS (SELECT d.collection_id, r.term, -count(*) AS documents "
    "           FROM removed r JOIN documents_document d ON d.id = r.document_id GROUP BY d.collection_id, r.term), "
    f"terms AS ({_TERMS_ADD}), "
    "moved AS (DELETE FROM documents_searchabledocument WHERE document_id = ANY(%s) "
    "          RETURNING collection_id, -1 AS documents, -length::bigint AS tokens) "
    f"{_STATS_ADD}"
)

# The documents enter the index as their trees are now (parameter: document id array, twice):
# their postings are read from their leaves' tsvectors (migration 0005 ran the same SELECT over
# every tree stored then) and their terms' counts rise by one; each with a root not excluded from
# retrieval is searchable, at its current token count, and its collection's statistics rise by it.
_ADD_SQL = (
    "WITH added AS ("
    "  INSERT INTO documents_documentterm (document_id, term, frequency) "
    "  SELECT n.document_id, t.lexeme, sum(coalesce(array_length(t.positions, 1), 1)) "
    "  FROM documents_node n CROSS JOIN LATERAL unnest(n.search) t "
    "  WHERE n.kind = 'leaf' AND NOT n.excluded AND n.document_id = ANY(%s) "
    "  GROUP BY n.document_id, t.lexeme RETURNING document_id, term), "
    "counts AS (SELECT d.collection_id, a.term, count(*) AS documents "
    "           FROM added a JOIN documents_document d ON d.id = a.document_id GROUP BY d.collection_id, a.term), "
    f"terms AS ({_TERMS_ADD}), "
    "moved AS ("
    "  INSERT INTO documents_searchabledocument (document_id, collection_id, length) "
    "  SELECT d.id, d.collection_id, d.token_count FROM documents_document d WHERE d.id = ANY(%s) AND EXISTS ("
    "    SELECT 1 FROM documents_node n WHERE n.document_id = d.id AND n.kind = 'root' AND NOT n.excluded) "
    "  RETURNING collection_id, 1 AS documents, length::bigint AS tokens) "
    f"{_STATS_ADD}"
)


def search_index_refresh(document_ids: Sequence[int]) -> None:
    """Rewrite these documents' postings and searchability from their current trees, and their
    collections' statistics with them.

    Call it in the transaction that writes a tree, after the document's ``token_count`` is final,
    so the index never disagrees with the nodes.
    """
    ids = sorted(set(document_ids))
    with connection.cursor() as cursor:
        cursor.execute(_COLLECTIONS_LOCK_SQL, [_LOCK_SPACE, ids])
        cursor.execute(_REMOVE_SQL, [ids, ids])
        cursor.execute(_ADD_SQL, [ids, ids])


def search_index_remove(document_ids: Sequence[int]) -> None:
    """Take these documents out of the index and their collections' statistics (before they
    are deleted, in the same transaction)."""
    ids = sorted(set(document_ids))
    with connection.cursor() as cursor:
        cursor.execute(_COLLECTIONS_LOCK_SQL, [_LOCK_SPACE, ids])
        cursor.execute(_REMOVE_SQL, [ids, ids])
