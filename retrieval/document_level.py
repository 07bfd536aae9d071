"""The document level of ``retrieve()``, stage by stage: each takes plain values and returns one.

- ``named_titles``: the titles of documents in scope that the query names, and the query without
  them (the passage query);
- ``start_embedding``: the query's vectors, computed beside the lexical path;
- ``lexical_documents``: BM25 over full-text search ranks documents, and gives the node level its
  terms and their weights;
- ``vector_documents``: the nearest nodes through HNSW, each document's best similarity;
- ``document_info``: titles, sizes and roots of the candidates (and of the whole scope when
  LLMselect can read it all);
- ``llm_select_step``: LLMselect over the shortlist;
- ``whole_documents``: the selected documents' text, when they fit the budget whole.

Fusion and routing between them are pure (``retrieval.routing``); the node level is
``retrieval.node_level``.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from django.db import connection

from documents.models import Document, Node, page_finder
from documents.selectors import document_texts
from openfable.embeddings import Embedder
from openfable.llm import LLMClient
from openfable.token_counting import count_tokens
from retrieval.fusion import Fused
from retrieval.llm_steps import LLMStep, cooldown_step, outcome_step
from retrieval.packing import whole_documents_fit
from retrieval.paths import lexical as lexical_paths
from retrieval.paths import llm as llm_paths
from retrieval.paths import vector as vector_paths
from retrieval.query_settings import QuerySettings
from retrieval.query_vectors import QueryVectors, embed_query_vectors
from retrieval.result import LEXICAL, LLM_SELECT, VECTOR, Chunk, ChunkScores, PathReport
from retrieval.routing import DocumentFacts, source_clause, take_out_titles
from retrieval.scope import Scope

SHORTLIST_SIZE = 20  # documents LLMselect reads: keeps its prompt bounded as the corpus grows
LEXICAL_TOP_DOCUMENTS = 20  # the lexical path's best documents that enter fusion
# Query embeddings run here, beside the query's database work (see start_embedding).
_EMBEDDING_THREADS = ThreadPoolExecutor(max_workers=4, thread_name_prefix="query-embedding")


# -- the query's names and vectors ---------------------------------------------------------------


@dataclass(frozen=True)
class NamedTitles:
    """The titles in scope the query names (``take_out_titles``), the documents they name (one
    per title; none unless named routing is on) and the query without them ("" when the query
    names none)."""

    titles: tuple[str, ...] = ()
    documents: frozenset[int] = frozenset()
    passage_text: str = ""


def named_titles(*, query: str, scope: Scope, query_settings: QuerySettings) -> NamedTitles:
    """The titles the query names, when passages are ranked by the query without them."""
    if not query_settings.passage_query:
        return NamedTitles()
    in_query = documents_by_title_in_query(query=query, scope=scope)
    rest, titles = take_out_titles(query, list(in_query))
    if not titles:
        return NamedTitles()
    # A title two documents share names neither: their scores choose.
    documents = (
        frozenset(in_query[title][0] for title in titles if len(in_query[title]) == 1)
        if query_settings.named_documents
        else frozenset()
    )
    return NamedTitles(titles=tuple(titles), documents=documents, passage_text=rest)


def documents_by_title_in_query(*, query: str, scope: Scope) -> dict[str, list[int]]:
    """The documents in scope whose title the query contains (any case), by title: one scan of
    the titles, no embedding. Plain SQL: the ORM's compilation of it (a placeholder per document
    in scope) took 2-5 ms of a query, its run 0.1 ms."""
    document_table = connection.ops.quote_name(Document._meta.db_table)
    in_scope, scope_params = scope.documents_sql("id", collection_column="collection_id")
    sql = (
        f"SELECT id, title FROM {document_table} "
        f"WHERE status = %s AND strpos(lower(%s), lower(title)) > 0 AND {in_scope}"
    )
    params: list[Any] = [Document.Status.INDEXED.value, query, *scope_params]
    found: dict[str, list[int]] = defaultdict(list)
    with connection.cursor() as cursor:
        cursor.execute(sql + " ORDER BY id", params)
        for pk, title in cursor.fetchall():
            found[title].append(pk)
    return dict(found)


def start_embedding(embedder: Embedder, *, query: str, titles: Sequence[str]) -> Future[QueryVectors]:
    """Start embedding the query (with the titles it names that are not cached yet, in one
    batch; see ``retrieval.query_vectors``). A remote embedder answers in the background while
    the document-level lexical path runs in the database. The local model computes now: it
    already spreads over every core (OpenMP), and sharing them with the lexical path slowed both
    on 2 cores (docs/benchmarks.md, "Latency on real corpora": overlap did not pay)."""
    if getattr(embedder, "uses_every_core", False):
        done: Future[QueryVectors] = Future()
        done.set_result(embed_query_vectors(embedder, query, list(titles)))
        return done
    return _EMBEDDING_THREADS.submit(embed_query_vectors, embedder, query, list(titles))


# -- the lexical and vector paths ----------------------------------------------------------------


@dataclass(frozen=True)
class LexicalDocuments:
    """The lexical path at the document level: its report, the best documents by BM25, and what
    the node level needs: the query's terms (and the passage query's), and their weights."""

    report: PathReport
    scores: Mapping[int, float] = field(default_factory=dict)
    terms: tuple[str, ...] = ()
    passage_terms: tuple[str, ...] = ()
    term_weights: Mapping[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class _QueryWords:
    terms: list[str]  # the query's
    passage_terms: list[str]  # the passage query's
    source_terms: list[str]  # the source clause's that the rest of the query does not repeat
    name_terms: set[str]  # the names the query gives


def _query_words(query: str, passage_text: str, query_settings: QuerySettings) -> _QueryWords:
    """One round trip stems the query, its passage query, its source clause and the names it gives."""
    names_count = query_settings.name_document_share > 0 and query_settings.lexical_weight > 0
    names = lexical_paths.capitalised_words(query) if names_count else []
    extra = [passage_text] if passage_text else []
    clause, rest = source_clause(query) if query_settings.source_clause else ("", "")
    cited = [clause, rest] if clause else []
    stemmed = lexical_paths.stem([query, *extra, *cited, *names])
    source_terms: list[str] = []
    if cited:
        clause_terms, rest_terms = stemmed[1 + len(extra)], stemmed[2 + len(extra)]
        source_terms = sorted(set(clause_terms) - set(rest_terms))
    return _QueryWords(
        terms=stemmed[0],
        passage_terms=stemmed[1] if extra else [],
        source_terms=source_terms,
        name_terms={term for terms in stemmed[1 + len(extra) + len(cited) :] for term in terms},
    )


def lexical_documents(
    *, query: str, passage_text: str, scope: Scope, query_settings: QuerySettings
) -> LexicalDocuments:
    """The lexical path at the document level: the best ``LEXICAL_TOP_DOCUMENTS`` by BM25."""
    weight = query_settings.lexical_weight
    if weight <= 0 and query_settings.lexical_node_share <= 0:
        reason = "turned off (OPENFABLE_RETRIEVAL_LEXICAL_WEIGHT and _NODE_SHARE are 0)"
        return LexicalDocuments(PathReport(LEXICAL, ran=False, reason=reason))
    words = _query_words(query, passage_text, query_settings)
    if not words.terms:
        reason = "the query has no searchable words (only stop words, numbers or symbols)"
        return LexicalDocuments(PathReport(LEXICAL, ran=False, reason=reason))
    terms = tuple(words.terms)
    detail: dict[str, Any] = {"terms": words.terms}
    if weight <= 0:
        reason = "document level turned off (OPENFABLE_RETRIEVAL_LEXICAL_WEIGHT is 0)"
        report = PathReport(LEXICAL, ran=True, reason=reason, detail=detail)
        return LexicalDocuments(report, terms=terms, passage_terms=tuple(words.passage_terms))
    found = lexical_paths.document_scores(
        words.terms,
        document_ids=scope.document_ids,
        collection_ids=scope.whole_collections,
        collection_documents=scope.searchable_documents,
        best=LEXICAL_TOP_DOCUMENTS,
    )
    best = sorted(found.scores.items(), key=lambda item: (-item[1], item[0]))
    detail["documents_in_scope"] = found.considered
    if found.common_terms:  # past the common-term cut-off: counted, not scored (paths.lexical)
        detail["common_terms"] = sorted(found.common_terms)
    term_weights: dict[str, float] = {}
    if query_settings.name_document_share > 0:
        share = query_settings.name_document_share
        term_weights = lexical_paths.name_weights(words.terms, words.name_terms, found, share=share)
        if term_weights:
            detail["name_weights"] = {term: round(w, 3) for term, w in sorted(term_weights.items())}
    if words.source_terms:
        # Most of DragonBall's queries open so; the gain and its cost at larger budgets are
        # the vector-source-words row of docs/benchmarks.md (a weight of 0.5 instead of 0 kept half of it).
        term_weights.update(dict.fromkeys(words.source_terms, 0.0))
        detail["source_terms"] = words.source_terms
    return LexicalDocuments(
        PathReport(LEXICAL, ran=True, candidates=len(best), detail=detail),
        scores=dict(best),
        terms=terms,
        passage_terms=tuple(words.passage_terms),
        term_weights=term_weights,
    )


@dataclass(frozen=True)
class VectorDocuments:
    report: PathReport
    scores: Mapping[int, vector_paths.DocumentVectorScore]  # by document: best similarity, hits


def vector_documents(*, vector: np.ndarray, scope: Scope, top_k: int) -> VectorDocuments:
    """The vector path: the ``top_k`` nearest nodes, each document's best similarity."""
    search = vector_paths.nearest_nodes(
        query_vector=vector,
        top_k=top_k,
        document_ids=scope.document_ids,
        collection_ids=scope.whole_collections,
        collection_id=scope.collection_id,
        whole_collection=scope.whole_collection,
    )
    scores = vector_paths.vector_document_scores(search.hits)
    detail = {"strategy": search.strategy, "ef_search": search.ef_search, "top_k": top_k}
    return VectorDocuments(PathReport(VECTOR, ran=True, candidates=len(scores), detail=detail), scores)


# -- the candidate documents ---------------------------------------------------------------------


@dataclass(frozen=True)
class DocumentInfo(DocumentFacts):
    root_id: int | None
    has_excluded: bool  # a person excluded part of it from retrieval: never return it whole


def _document_rows(where: str, params: list[Any], *, order_limit: int | None = None) -> list[tuple[Any, ...]]:
    """(id, title, token_count, root_id, has_excluded) of the documents ``where`` (a condition on
    those columns) selects; with ``order_limit``, the first that many by id. A document excluded
    from retrieval as a whole has no root here: nothing to search. Plain SQL: this runs on every
    query, and the ORM's compilation of its subqueries took most of its time (docs/benchmarks.md, "Latency on
    real corpora": plain SQL on the hot path)."""
    document_table = connection.ops.quote_name(Document._meta.db_table)
    node_table = connection.ops.quote_name(Node._meta.db_table)
    rows_sql = (
        "SELECT d.id, d.title, d.token_count, "
        f"  (SELECT n.id FROM {node_table} n WHERE n.document_id = d.id AND n.kind = %s AND NOT n.excluded"
        "   LIMIT 1) AS root_id, "
        f"  EXISTS (SELECT 1 FROM {node_table} n WHERE n.document_id = d.id AND n.excluded) AS has_excluded "
        f"FROM {document_table} d"
    )
    sql = f"SELECT * FROM ({rows_sql}) AS documents WHERE {where}"  # PostgreSQL pushes `where` down
    if order_limit is not None:
        sql += f" ORDER BY id LIMIT {int(order_limit)}"
    with connection.cursor() as cursor:
        cursor.execute(sql, [Node.Kind.ROOT.value, *params])
        return list(cursor.fetchall())


def document_info(
    candidates: Sequence[int], *, scope: Scope, whole_scope: bool
) -> Mapping[int, DocumentInfo]:
    """Titles, sizes and roots of the candidate documents, plus (``whole_scope``: when LLMselect
    will read them) every other indexed document in scope if there are no more than
    ``SHORTLIST_SIZE``. Two queries at most."""
    info = {row[0]: DocumentInfo(*row[1:]) for row in _document_rows("id = ANY(%s)", [list(candidates)])}
    if whole_scope:
        in_scope, params = scope.documents_sql("id")
        others = _document_rows(f"root_id IS NOT NULL AND {in_scope}", params, order_limit=SHORTLIST_SIZE + 1)
        if len(others) <= SHORTLIST_SIZE:
            for row in others:
                info.setdefault(row[0], DocumentInfo(*row[1:]))
    return info


# -- LLMselect -----------------------------------------------------------------------------------


def llm_select_step(
    *,
    query: str,
    mode: str,
    ranked: Sequence[int],
    info: Mapping[int, DocumentInfo],
    query_settings: QuerySettings,
) -> LLMStep:
    """LLMselect over the best ``SHORTLIST_SIZE`` of the vector and lexical paths (topped up
    with other documents in scope when they find fewer)."""
    shortlist = [pk for pk in ranked if pk in info][:SHORTLIST_SIZE]
    shortlist += sorted(pk for pk in info if pk not in shortlist)[: SHORTLIST_SIZE - len(shortlist)]
    client = LLMClient.from_settings(respect_cooldown=True)  # built per query: settings read now
    if (cooling := cooldown_step(LLM_SELECT, client, noted=False)) is not None:
        if mode != "llm":
            return cooling
        note = "llm mode: the LLM is cooling down, so the vector paths answered instead."
        return LLMStep(report=cooling.report, notes=(*cooling.notes, note), cooling=True)
    outcome, outline = llm_paths.llm_select(
        client,
        query=query,
        documents=[(pk, info[pk].title) for pk in shortlist],
        max_depth=query_settings.llmselect_depth,
        max_tokens=query_settings.llm_prompt_tokens,
        max_prompt_tokens=llm_paths.select_prompt_cap(query_settings.llm_query_tokens),
    )
    step = outcome_step(LLM_SELECT, outcome, outline)
    if step.scores is None and mode == "llm":
        note = "llm mode: LLMselect failed, so the vector paths answered instead."
        return LLMStep(
            report=step.report, notes=(*step.notes, note), usage=step.usage, llm_down=step.llm_down
        )
    return step


# -- whole documents -----------------------------------------------------------------------------


@dataclass(frozen=True)
class WholeDocuments:
    """The selected documents returned whole, in fused order (none: the node level runs), and
    whether their text was read (``loaded``) and why not returned (``notes``)."""

    chunks: tuple[Chunk, ...] = ()
    loaded: bool = False
    notes: tuple[str, ...] = ()


def whole_documents(
    *,
    selected: Sequence[int],
    fused: Sequence[Fused[int]],
    ranks: Mapping[int, int],
    info: Mapping[int, DocumentInfo],
    budget: int,
) -> WholeDocuments:
    """The selected documents' whole text as chunks, when it fits ``budget`` and no part of them
    is excluded from retrieval."""
    if any(info[pk].has_excluded for pk in selected):
        return WholeDocuments()  # the whole text would carry excluded parts: the node level packs the rest
    contents = document_texts(selected)
    by_key = {item.key: item for item in fused}
    chunks = tuple(
        _whole_document(by_key[pk], *contents[pk], rank=ranks[pk], info=info[pk])
        for pk in sorted(selected, key=ranks.__getitem__)
    )
    # Document.token_count was written at upload; the budget is enforced on the text itself.
    if not whole_documents_fit((chunk.token_count for chunk in chunks), budget):
        return WholeDocuments(
            loaded=True, notes=("Stored document sizes were stale: the node level ran instead.",)
        )
    return WholeDocuments(chunks=chunks, loaded=True)


def _whole_document(item: Fused[int], text: str, page_spans: Any, *, rank: int, info: DocumentInfo) -> Chunk:
    return Chunk.whole_document(
        document_id=item.key,
        title=info.title,
        rank=rank,
        root_id=info.root_id,
        text=text,
        token_count=count_tokens(text),
        scores=ChunkScores(
            item.score,
            similarity=item.raw.get(VECTOR),
            lexical=item.raw.get(LEXICAL),
            llm=item.raw.get(LLM_SELECT),
        ),
        found_by=item.paths,
        pages=tuple(page_finder(page_spans)(0, len(text))),
    )
