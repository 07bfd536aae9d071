"""The lexical path: BM25 over PostgreSQL full-text search.

``Node.search`` is a generated tsvector (``documents.models.SEARCH_CONFIG`` stemming: a leaf's
own text, an internal node's title and summary) under the GIN index ``node_search_gin``.

Why BM25 and not ``ts_rank``: ``ts_rank`` has no inverse document frequency, so a word found in
every document ("company", "agreement") counts as much as the name that singles out the one
document a query is about -- and names are exactly what dense embeddings of a small model blur.
BM25 weighs each query word by its rarity. PostgreSQL supplies the term statistics (from the
inverted index ``DocumentTerm`` at the document level, from the nodes' tsvectors at the node
level); the arithmetic below is the textbook Okapi BM25 (k1 = ``K1``, b = ``B``):

    idf(t)      = ln(1 + (N - df(t) + 0.5) / (df(t) + 0.5))
    BM25(d, q)  = sum over query terms t in d of
                  idf(t) * tf(t, d) * (K1 + 1) / (tf(t, d) + K1 * (1 - B + B * len(d) / avglen))

Two levels, two notions of "document":

- ``document_scores`` (document level): a document's term frequency is the sum over its leaves
  (``DocumentTerm``: a narrow table read through its (term, document) index, because scanning
  the wide node rows that hold a common word cost tens of milliseconds at 100K nodes), its
  length its token count; N and df count the indexed documents in scope. Names and rare terms
  of the query pick the documents that mention them.
- ``node_scores`` (node level): every node of the selected documents is a BM25 document of its
  own, its length the number of distinct terms in its tsvector; N and df count those nodes only.
  A word that names the selected document itself appears in many of its nodes and so weighs
  little there, while the words that single out one passage ("CEO", "dividend") weigh most.

Common terms at the document level (``common_term_cutoff``). A word that most documents of a
large scope hold says little about which document a query is about, and its postings are what
cost: on the 1M-node synthetic corpus every word is in about two thirds of the 10,000 documents,
so a five-word query read some 35,000 postings (docs/benchmarks.md, "Synthetic corpora"). As search engines
do for common terms (Lucene's common-terms query, Elasticsearch's ``cutoff_frequency``), a term
held by more than ``common_term_cutoff(N)`` documents in scope -- at least
``COMMON_TERM_MIN_DOCUMENTS``, and ``COMMON_TERM_SHARE`` of N -- does not select documents: the
document level ranks by the query's other terms (BM25 exactly as below, with the same N and
lengths), and a query whose every term is common gets no documents from it (the vector path picks
them, and node-level BM25 still weighs every term inside them). A scope of fewer than
``COMMON_TERM_MIN_DOCUMENTS`` documents has no common term, so every collection of the benchmarks
ranks exactly as without the cut-off.

Where the statistics come from. A large scope of whole collections (a query filtered to one, a
user's unfiltered query, the whole corpus) reads N, the mean length and each query term's document
frequency from what the index keeps per collection (``documents.services.search_index``: the term
dictionary ``CollectionTerm`` and ``CollectionSearchStats``): a few rows whatever the collections
hold, as a search engine's term dictionary holds each term's document frequency. Any other scope
(a documents or tags filter, or one within the cut-off's floor, where counting is cheaper) counts
them over its documents; there, whether a term is common is counted up to the cut-off and no
further.

Names at the node level (``name_weights``). A name the query gives ("According to the judgment of
Preston, Lancaster, Court, what crimes did M. Harris commit?") routed it to its document; inside
that document the name occurs in a few passages (the heading, the parties), so BM25 ranks those
first, whatever the question asks. A query word written with a capital (not the first word) whose
term few documents in scope contain counts at the node level by that share:
``weight = min(1, documents containing it / (share x documents in scope))`` with ``share`` =
``OPENFABLE_RETRIEVAL_NAME_DOCUMENT_SHARE``. Capitalised words most documents use ("Court",
"Company") keep their weight, and so do numbers, lower-case words and common terms (whose count
stops at the cut-off).
"""

from __future__ import annotations

import math
import re
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from django.db import connection

from documents.models import (
    SEARCH_CONFIG,
    CollectionSearchStats,
    CollectionTerm,
    DocumentTerm,
    Node,
    SearchableDocument,
)
from retrieval.scope import documents_condition

K1 = 1.2
B = 0.75

# The common-term cut-off (module docstring): a term held by more than
# max(COMMON_TERM_MIN_DOCUMENTS, COMMON_TERM_SHARE x N) documents in scope selects none. The floor
# keeps scopes whose postings are cheap anyway (every benchmark collection: at most a few hundred
# documents) exact; the share is conservative next to the 0.1 % that Elasticsearch's documentation
# suggests for ``cutoff_frequency``.
COMMON_TERM_MIN_DOCUMENTS = 1000
COMMON_TERM_SHARE = 0.1

# A node's tsvector cut down to the query's terms (SQL parameter: the terms as text[]): mark them
# with weight A, keep only A. Unnesting that gives one row per query term present, instead of
# one per distinct word of the node, which is what keeps common query words affordable.
QUERY_TERMS_ONLY = "ts_filter(setweight(n.search, 'A', %s::text[]), '{a}')"


# A word as the query writes it, apostrophes and inner dots kept ("O'Brien", "M.Harris").
_WORD = re.compile(r"[^\W\d_][\w'’.]*")


@dataclass(frozen=True, slots=True)
class LexicalScores:
    scores: dict[int, float]  # id (document or node) -> BM25, only those matching a query term
    considered: int  # N: documents or nodes the statistics were taken over
    # How many of those documents or nodes hold each query term (absent: none, unless common).
    document_frequency: dict[str, int] = field(default_factory=dict)
    # Document level: the query terms past the common-term cut-off (held by more documents than
    # it; not counted further, and left out of ``scores`` and ``document_frequency``).
    common_terms: frozenset[str] = frozenset()


def stem(texts: Sequence[str]) -> list[list[str]]:
    """Each text's search terms, stemmed and without stop words as the index stores them, all in
    one round trip to the database."""
    if not texts:
        return []
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT tsvector_to_array(to_tsvector(%s::regconfig, text)) "
            "FROM unnest(%s::text[]) WITH ORDINALITY AS given (text, position) ORDER BY position",
            [SEARCH_CONFIG, list(texts)],
        )
        return [sorted(terms or []) for (terms,) in cursor.fetchall()]


def capitalised_words(query: str) -> list[str]:
    """The query's capitalised words, its first word left out (a question starts with a capital
    whatever it asks): the names it gives."""
    words = _WORD.findall(query)[1:]
    return sorted({word.strip(".") for word in words if word[0].isupper()} - {""})


def name_weights(
    terms: Sequence[str], names: set[str], found: LexicalScores, *, share: float
) -> dict[str, float]:
    """Node-level weights of the query's ``terms`` (see the module docstring): a name term (in
    ``names``) that fewer than ``share`` of the documents in scope hold weighs that fraction of
    ``share``; every other term 1. ``found`` is the document-level result (N and frequencies)."""
    if share <= 0 or found.considered <= 0:
        return {}
    limit = share * found.considered
    return {
        term: min(1.0, found.document_frequency.get(term, 0) / limit)
        for term in terms
        if term in names and term not in found.common_terms and found.document_frequency.get(term, 0) < limit
    }


def common_term_cutoff(considered: int) -> int:
    """How many documents of a scope of ``considered`` may hold a term before it is common (see
    the module docstring): ``COMMON_TERM_MIN_DOCUMENTS``, or ``COMMON_TERM_SHARE`` of the scope."""
    return max(COMMON_TERM_MIN_DOCUMENTS, math.ceil(COMMON_TERM_SHARE * considered))


def selecting_terms(document_frequency: Mapping[str, int], *, considered: int) -> set[str]:
    """The terms that select documents at the document level: those at or under the cut-off."""
    cutoff = common_term_cutoff(considered)
    return {term for term, held in document_frequency.items() if held <= cutoff}


def document_frequencies(frequencies: Mapping[int, Mapping[str, int]]) -> dict[str, int]:
    """How many items of ``frequencies`` (item -> term -> frequency) hold each term."""
    holding: dict[str, int] = defaultdict(int)
    for terms in frequencies.values():
        for term in terms:
            holding[term] += 1
    return dict(holding)


def bm25(
    frequencies: Mapping[int, Mapping[str, int]],
    lengths: Mapping[int, float],
    *,
    considered: int,
    average_length: float,
    term_weights: Mapping[str, float] | None = None,
    document_frequency: Mapping[str, int] | None = None,
) -> dict[int, float]:
    """Okapi BM25 of every item in ``frequencies`` (item -> term -> frequency).

    Document frequencies are counted from ``frequencies`` itself (unless the caller counted them
    already: ``document_frequency``), so it must hold every item of the ``considered`` that
    contains a query term (the others score 0 and may be left out). ``term_weights`` scale a
    term's contribution (absent: 1; see ``name_weights``).
    """
    weights = term_weights or {}
    if document_frequency is None:
        document_frequency = document_frequencies(frequencies)
    idf = {
        term: math.log(1 + (considered - df + 0.5) / (df + 0.5)) for term, df in document_frequency.items()
    }
    average = average_length if average_length > 0 else 1.0
    scores: dict[int, float] = {}
    for item, terms in frequencies.items():
        norm = K1 * (1 - B + B * lengths.get(item, average) / average)
        scores[item] = sum(
            weights.get(term, 1.0) * idf[term] * tf * (K1 + 1) / (tf + norm) for term, tf in terms.items()
        )
    return scores


def searchable_documents_sql(
    document_ids: Sequence[int] | None = None, *, collection_ids: Sequence[int] | None = None
) -> tuple[str, list[Any]]:
    """SQL (and its parameters) of (id, length) of the documents a query can search
    (``SearchableDocument``: those holding a root not excluded from retrieval) among these
    documents, or of these collections, read through its primary key or its collection's index.
    Plain SQL, as the rest: the ORM's compilation of it cost as much as running it (docs/benchmarks.md,
    "Latency on real corpora")."""
    searchable_table = connection.ops.quote_name(SearchableDocument._meta.db_table)
    in_scope, params = documents_condition(
        "document_id",
        document_ids=document_ids,
        collection_ids=collection_ids,
        collection_column="collection_id",
    )
    return f"SELECT document_id, length FROM {searchable_table} WHERE {in_scope}", params


def document_scores(
    terms: Sequence[str],
    *,
    document_ids: Sequence[int] | None,
    collection_ids: Sequence[int] | None = None,
    collection_documents: int = 0,
    best: int | None = None,
) -> LexicalScores:
    """BM25 of the indexed documents in scope holding a query term; with ``best``, only the best
    that many (ties by id), and how many documents hold each term.

    The scope: ``document_ids``, listed (a documents or tags filter); else every document of
    ``collection_ids`` (a query filtered to a collection, or a user's unfiltered one), of which
    ``collection_documents`` are searchable; else the whole corpus. The statistics of a large
    scope of whole collections, or of the corpus, come from the collections' own
    (``_dictionary_statistics``); those of a list, or of collections within the cut-off's floor,
    are counted over the documents (``_counted_statistics``).
    Either way one query over the inverted index ``DocumentTerm`` (a document's term frequencies
    summed over its leaves), read through its (term, document) index, with BM25 summed in the
    database (``bm25``'s formula, in SQL): a common word's postings never leave it. Terms past the
    common-term cut-off (module docstring) are reported in ``common_terms`` instead of scored.
    Both ways give the same scores, to floating-point rounding (the mean length is divided in a
    different order).
    """
    if not terms or (document_ids is not None and not document_ids):
        return LexicalScores({}, 0)  # an empty scope (a user who sees no collection) finds nothing
    # Counting is the cheaper of the two for a scope within the cut-off's floor (every benchmark
    # collection: 1.9 ms against 2.5 for DragonBall's 108 documents, the larger statement costing
    # more to plan than the few postings cost to count).
    size = len(document_ids) if document_ids is not None else collection_documents
    if document_ids is not None or (collection_ids is not None and size <= COMMON_TERM_MIN_DOCUMENTS):
        scope_sql, scope_params = searchable_documents_sql(document_ids, collection_ids=collection_ids)
        statistics, params = _counted_statistics(terms, scope_sql, scope_params, size)
    else:
        statistics, params = _dictionary_statistics(terms, collection_ids)
    limit = "" if best is None else f" LIMIT {int(best)}"
    with connection.cursor() as cursor:
        cursor.execute(
            f"WITH {statistics}, "
            "scored AS (SELECT p.document_id, sum(idf.idf * p.tf * (%s + 1) "
            "                  / (p.tf + %s * (1 - %s + %s * p.length / stats.average))) AS score "
            "           FROM postings p JOIN idf USING (term) CROSS JOIN stats GROUP BY p.document_id), "
            f"top AS (SELECT document_id, score FROM scored ORDER BY score DESC, document_id{limit}) "
            "SELECT 'document', document_id, score, NULL FROM top "
            "UNION ALL SELECT 'term', NULL, df, term FROM idf "
            "UNION ALL SELECT 'common', NULL, held, term FROM common "
            "UNION ALL SELECT 'scope', NULL, considered, NULL FROM stats",
            [*params, K1, K1, B, B],
        )
        return _document_rows_scores(cursor.fetchall())


# Both kinds of statistics below end in the same four relations, which ``document_scores`` reads:
#   stats (considered, average, cutoff): N, the mean length, the common-term cut-off;
#   common (term, held): the query's terms past the cut-off;
#   idf (term, df, idf): the others that some document in scope holds;
#   postings (document_id, term, tf, length): those terms' postings in scope.
_IDF = "ln(1 + (stats.considered - h.df + 0.5) / (h.df + 0.5))"


def _dictionary_statistics(
    terms: Sequence[str], collection_ids: Sequence[int] | None
) -> tuple[str, list[Any]]:
    """Statistics of whole collections (None: every one) read from what the index keeps for
    each (``CollectionSearchStats``, ``CollectionTerm``): a few rows, whatever their size."""
    in_scope, scope_params = "", []
    if collection_ids is not None:
        in_scope, scope_params = "collection_id = ANY(%s) AND ", [list(collection_ids)]
    stats_table = connection.ops.quote_name(CollectionSearchStats._meta.db_table)
    dictionary_table = connection.ops.quote_name(CollectionTerm._meta.db_table)
    term_table = connection.ops.quote_name(DocumentTerm._meta.db_table)
    searchable_table = connection.ops.quote_name(SearchableDocument._meta.db_table)
    sql = (
        "stats AS MATERIALIZED (SELECT coalesce(sum(documents), 0) AS considered, "
        "    coalesce(nullif(sum(tokens)::float8 / nullif(sum(documents), 0), 0), 1) AS average, "
        "    greatest(%s, ceil(%s * coalesce(sum(documents), 0)))::int AS cutoff "
        f"  FROM {stats_table} WHERE {in_scope}true), "
        "held AS MATERIALIZED (SELECT term, sum(documents) AS df "
        f"  FROM {dictionary_table} WHERE {in_scope}term = ANY(%s::text[]) GROUP BY term HAVING sum(documents) > 0), "
        "common AS (SELECT term, df AS held FROM held CROSS JOIN stats WHERE df > cutoff), "
        f"idf AS MATERIALIZED (SELECT h.term, h.df, {_IDF} AS idf FROM held h CROSS JOIN stats WHERE h.df <= stats.cutoff), "
        "postings AS MATERIALIZED ("
        "  SELECT t.document_id, t.term, t.frequency::float8 AS tf, s.length::float8 AS length "
        f"  FROM {term_table} t JOIN {searchable_table} s ON s.document_id = t.document_id "
        f"  WHERE {in_scope.replace('collection_id', 's.collection_id')}t.term = ANY(ARRAY(SELECT term FROM idf)))"
    )
    params = [
        COMMON_TERM_MIN_DOCUMENTS, COMMON_TERM_SHARE, *scope_params,
        *scope_params, list(terms),
        *scope_params,
    ]  # fmt: skip
    return sql, params


def _counted_statistics(
    terms: Sequence[str], scope_sql: str, scope_params: list[Any], size: int
) -> tuple[str, list[Any]]:
    """Statistics of the searchable documents ``scope_sql`` reads (``searchable_documents_sql``:
    a list, or small collections; ``size`` of them at most), counted over them.

    A list no longer than the cut-off's floor has no common term: the query is the exhaustive
    one. A longer one counts each term's postings in scope up to the cut-off and no further, and
    only the terms at or under it are read for BM25. The count reads the term's own postings,
    which lie together in the (term, document) index, and checks each against the scope's ids
    hashed once: ``IS TRUE`` keeps the planner from turning the check into a join that probes the
    index once per scope id (at 1M nodes that touched 36,000 pages a query, 900 then)."""
    term_table = connection.ops.quote_name(DocumentTerm._meta.db_table)
    small = size <= COMMON_TERM_MIN_DOCUMENTS
    selecting, common, common_params = (
        "%s",
        "common AS (SELECT NULL::text AS term, 0 AS held WHERE false), ",
        [],
    )
    if not small:
        selecting = "ARRAY(SELECT term FROM unnest(%s::text[]) AS q (term) WHERE term NOT IN (SELECT term FROM common))"
        common = (
            "counted AS MATERIALIZED (SELECT q.term, (SELECT count(*) FROM ("
            f"    SELECT FROM {term_table} t WHERE t.term = q.term AND (t.document_id IN (SELECT id FROM scope)) IS TRUE "
            "     LIMIT stats.cutoff + 1) AS held) AS held "
            "  FROM unnest(%s::text[]) AS q (term) CROSS JOIN stats WHERE stats.considered > stats.cutoff), "
            "common AS (SELECT term, held FROM counted CROSS JOIN stats WHERE held > cutoff), "
        )
        common_params = [list(terms)]
    sql = (
        f"scope (id, length) AS MATERIALIZED ({scope_sql}), "
        "stats AS (SELECT count(*) AS considered, "
        "          coalesce(nullif(avg(length), 0), 1)::float8 AS average, "
        "          greatest(%s, ceil(%s * count(*)))::int AS cutoff FROM scope), "
        f"{common}"
        "postings AS MATERIALIZED ("
        "  SELECT t.document_id, t.term, t.frequency::float8 AS tf, s.length::float8 AS length "
        f"  FROM {term_table} t JOIN scope s ON s.id = t.document_id WHERE t.term = ANY({selecting})), "
        "holding AS (SELECT term, count(*) AS df FROM postings GROUP BY term), "
        f"idf AS (SELECT h.term, h.df, {_IDF} AS idf FROM holding h CROSS JOIN stats)"
    )
    params = [*scope_params, COMMON_TERM_MIN_DOCUMENTS, COMMON_TERM_SHARE, *common_params, list(terms)]
    return sql, params


def _document_rows_scores(rows: Sequence[tuple[Any, ...]]) -> LexicalScores:
    """``document_scores``' answer, one row per document, per term and for the scope."""
    scores = {int(key): float(value) for kind, key, value, _ in rows if kind == "document"}
    holding = {str(term): int(value) for kind, _, value, term in rows if kind == "term"}
    considered = next(int(value) for kind, _, value, _ in rows if kind == "scope")
    common = frozenset(str(term) for kind, _, _, term in rows if kind == "common")
    return LexicalScores(scores, considered, holding, common)


def node_scores(
    terms: Sequence[str], *, document_ids: Sequence[int], term_weights: Mapping[str, float] | None = None
) -> LexicalScores:
    """BM25 of every node of these documents, each node a BM25 document of its own (see the
    module docstring); one query. Nodes without a query term are left out (score 0), and so are
    nodes excluded from retrieval (``DocumentTerm`` counts no excluded leaf either) and the roots:
    a root's title is its document's, which the query names to route to it (the document level's
    job); scored here, it out-scored every passage and, as the best score every other is divided
    by, flattened their differences (CUAD recall fell by points when roots took the documents'
    titles; docs/how-it-works.md, "Querying"). ``term_weights``: see ``bm25``."""
    if not terms or not document_ids:
        return LexicalScores({}, 0)
    node_table = connection.ops.quote_name(Node._meta.db_table)
    with connection.cursor() as cursor:
        cursor.execute(
            "WITH nodes AS MATERIALIZED ("
            f"  SELECT id, search, length(search) AS terms FROM {node_table} "
            "   WHERE document_id = ANY(%s) AND NOT excluded AND depth > 0), "
            "stats AS (SELECT count(*) AS considered, coalesce(avg(terms), 0) AS average FROM nodes) "
            "SELECT stats.considered, stats.average, n.id, t.lexeme, "
            "       coalesce(array_length(t.positions, 1), 1), n.terms "
            f"FROM stats LEFT JOIN (nodes n CROSS JOIN LATERAL unnest({QUERY_TERMS_ONLY}) t) ON true",
            [list(document_ids), list(terms)],
        )
        return _bm25_of_rows(cursor.fetchall(), term_weights)


def _bm25_of_rows(
    rows: Sequence[tuple[Any, ...]], term_weights: Mapping[str, float] | None = None
) -> LexicalScores:
    """BM25 from the rows both queries return: (N, mean length, id, term, frequency, length),
    the first two the same on every row; a lone row with a NULL id means no item holds a term.
    Also how many items hold each term (``document_frequency``)."""
    considered, average_length = int(rows[0][0]), float(rows[0][1])
    frequencies: dict[int, dict[str, int]] = defaultdict(dict)
    lengths: dict[int, float] = {}
    for _, _, item, term, frequency, length in rows:
        if item is not None:
            frequencies[item][term] = int(frequency)
            lengths[item] = float(length)
    holding = document_frequencies(frequencies)
    scores = bm25(
        frequencies, lengths, considered=considered, average_length=average_length,
        term_weights=term_weights, document_frequency=holding,
    )  # fmt: skip
    return LexicalScores(scores, considered, holding)
