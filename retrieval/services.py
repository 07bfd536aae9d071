"""``retrieve()``: the one entry point of the query side (FABLE's online algorithm).

1. Document level. The vector path takes the top-K nodes through HNSW and keeps each document's
   best similarity. The lexical path ranks documents by BM25 over full-text search
   (``paths.lexical``): names and rare words of the query find the documents that mention them,
   which a small embedding model blurs. LLMselect scores a shortlist of documents (at most
   ``SHORTLIST_SIZE``, the best of the other two) from their shallow outline. All are fused on
   min-max normalised scores, weighted by ``document_path_weights()``.
2. Routing. The *selected* documents are those whose fused score is at least
   ``SELECTION_RATIO`` x the best one (at most ``MAX_SELECTED_DOCUMENTS``, in fused order); a
   query that names documents by their title is routed to those and the best-scored one instead
   (``route_to_named_documents``). If they fit the budget together they are returned whole (and
   the budget left takes the next documents); otherwise the node level runs on them.
3. Node level (``node_level``). LLMnavigate picks subtree roots from their outline;
   TreeExpansion scores every node of them from exact similarities, sharpened by the node-level
   BM25 of the lexical path. Fused; LLM-chosen nodes are
   packed first, then by score, without ancestor/descendant overlap; the chosen text comes back
   in document order.

The corpus a query searches (collection, documents, tags, what the user may read) is resolved
and validated by ``scope.resolve_scope``.

Modes: "vector" never calls an LLM; "llm" uses the LLM paths alone (vectors only shortlist
documents for LLMselect); "bipath" (the default with an LLM) uses both. An LLM failure never
fails a query: the vector paths carry it and the result says why. While the LLM endpoint cools
down after repeated failures (``openfable.llm_endpoints``), the LLM paths are not tried at all:
their reports say so and until when, and such an answer is not cached.
"""

from __future__ import annotations

import dataclasses
import re
import time
from collections import defaultdict
from collections.abc import Collection, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from django.conf import settings
from django.db import connection
from django.db.models import Func, IntegerField, Value
from django.db.models.functions import Lower

from documents.models import Document, Node, page_finder
from documents.selectors import corpus_version
from openfable.embeddings import get_embedder
from openfable.llm import LLMClient, LLMUsage, llm_configured
from openfable.tokens import count_tokens
from retrieval import cache
from retrieval.fusion import Fused, fuse
from retrieval.node_level import node_level_chunks
from retrieval.packing import whole_documents_fit
from retrieval.paths import lexical as lexical_paths
from retrieval.paths import llm as llm_paths
from retrieval.paths import vector as vector_paths
from retrieval.query_vectors import QueryVectors, embed_query_vectors
from retrieval.result import (
    LEXICAL,
    LLM_NAVIGATE,
    LLM_SELECT,
    MODES,
    PATH_NAMES,
    TREE_EXPANSION,
    VECTOR,
    Chunk,
    ChunkScores,
    DocumentHit,
    PathReport,
    RetrievalInputError,
    RetrievalResult,
)
from retrieval.scope import Scope, resolve_scope

__all__ = ["RetrievalInputError", "RetrievalResult", "retrieve", "select_documents"]

MAX_QUERY_CHARS = 4000
COOLDOWN_DETAIL = "cooldown_remaining_s"  # in an LLM path's detail: it was held back by a cool-down
SHORTLIST_SIZE = 20  # documents LLMselect reads: keeps its prompt bounded as the corpus grows
SELECTION_RATIO = 0.5  # routed documents: fused score >= this share of the best fused score
MAX_SELECTED_DOCUMENTS = 10
LEXICAL_TOP_DOCUMENTS = 20  # the lexical path's best documents that enter fusion
# The node level ranks by (the query without the titles it names) + this share of the whole query:
# 0.5 kept CUAD's gain and DragonBall's Summary questions, which 0 lost (README, "Recall" and
# "Measured and not kept").
PASSAGE_QUERY_KEEP = 0.5
# Query embeddings run here, beside the query's database work (see _Run._start_embedding).
_EMBEDDING_THREADS = ThreadPoolExecutor(max_workers=4, thread_name_prefix="query-embedding")


def document_path_weights() -> dict[str, float]:
    """Fusion weights of the document-level paths. The lexical weight is a setting
    (OPENFABLE_RETRIEVAL_LEXICAL_WEIGHT, default 2: on DragonBall and CUAD it found the gold
    documents that the vector path ranked below others, see the README's benchmark section)."""
    return {VECTOR: 1.0, LEXICAL: settings.RETRIEVAL_LEXICAL_WEIGHT, LLM_SELECT: 1.0}


def retrieve(
    *,
    query: str,
    token_budget: int,
    mode: str | None = None,
    collection: str | int | None = None,
    documents: Sequence[int] | None = None,
    tags: Sequence[str] | None = None,
    user: Any = None,
    use_cache: bool = True,
    query_embedding: np.ndarray | None = None,
) -> RetrievalResult:
    """The most relevant text for ``query`` within ``token_budget`` tokens, in document order.

    ``collection`` (slug or id), ``documents`` (ids) and ``tags`` (documents carrying all of
    them) restrict the corpus; ``user`` restricts it to the collections that user may read
    (None: no restriction, for trusted callers). ``query_embedding`` is the query's vector when
    the caller has it already (a benchmark over synthetic vectors); by default the configured
    embedder embeds ``query``. Raises ``RetrievalInputError`` for input the caller can fix; LLM
    failures never raise (see the module docstring).
    """
    started = time.perf_counter()
    query = _clean_query(query)
    budget = _check_budget(token_budget)
    mode = _resolve_mode(mode)
    scope = resolve_scope(collection=collection, documents=documents, tags=tags, user=user)
    version = corpus_version()
    uses_llm = mode != "vector" and llm_configured()
    key = cache.cache_key(
        query=query,
        token_budget=budget,
        mode=mode,
        filters=scope.filters,
        scope=scope.visibility,
        corpus_version=version,
        fingerprint=cache.settings_fingerprint(uses_llm=uses_llm),
    )
    if use_cache and (hit := cache.cache_get(key)) is not None:
        elapsed = round((time.perf_counter() - started) * 1000, 2)
        # No stage ran and no LLM was called for this answer: say so instead of replaying them.
        return dataclasses.replace(
            hit, cached=True, llm_usage=LLMUsage(), timings_ms={"cache": elapsed, "total": elapsed}
        )
    vector = _check_embedding(query_embedding)
    if vector is not None:
        use_cache = False  # the cache is keyed on the query text, not on a caller's vector
    run = _Run(
        query=query, budget=budget, mode=mode, scope=scope, uses_llm=uses_llm, started=started, vector=vector
    )
    result = run.execute(version)
    # A failed LLM call may be transient, a cool-down ends: do not pin a fallback answer in the cache.
    if use_cache and not any(path.failed or COOLDOWN_DETAIL in path.detail for path in result.paths):
        cache.cache_set(key, result)
    return result


def select_documents(fused: Sequence[Fused[int]]) -> list[int]:
    """The documents the budget is routed on: fused score >= SELECTION_RATIO x the best, in
    fused order, at most MAX_SELECTED_DOCUMENTS. A ratio rather than a fixed count: one clearly
    best document stands alone, near-ties travel together."""
    if not fused:
        return []
    best = fused[0].score
    if best <= 0:
        return [fused[0].key]
    chosen = [item.key for item in fused if item.score >= SELECTION_RATIO * best]
    return chosen[:MAX_SELECTED_DOCUMENTS]


def route_to_named_documents(fused: Sequence[Fused[int]], named: Collection[int]) -> list[int]:
    """The documents a query that names documents by their title is routed to: the best-scored
    one and the named ones, in fused order (at most MAX_SELECTED_DOCUMENTS); none when no path
    found a named one (the scores route alone then).

    A question that names its document wants that document, not its namesakes: "Green Fields
    Agriculture Co." scored within half of the "... Ltd." a question named and took 40% of its
    1K budget. A question naming two companies wants both, however far the second fell behind.
    The best-scored document stays whatever its name: the query may ask about something it does
    not name. Others still come in when these fit the budget whole (``extend_to_budget``).
    """
    if not fused or not any(item.key in named for item in fused):
        return []
    best = fused[0].key
    return [item.key for item in fused if item.key == best or item.key in named][:MAX_SELECTED_DOCUMENTS]


def extend_to_budget(
    selected: list[int], fused: Sequence[Fused[int]], *, sizes: Mapping[int, int], budget: int
) -> list[int]:
    """When the selected documents fit the budget whole, let the budget take the next documents
    in fused order too (those that still fit, at most MAX_SELECTED_DOCUMENTS): a large budget
    buys breadth, which questions spanning several documents need."""
    chosen = list(selected)
    used = sum(sizes[pk] for pk in chosen)
    for item in fused:
        if len(chosen) >= MAX_SELECTED_DOCUMENTS:
            break
        size = sizes.get(item.key)
        if item.key in chosen or size is None or used + size > budget:
            continue
        chosen.append(item.key)
        used += size
    return chosen


# An opening "According to ...," or "Based on ...,": up to the first comma that a lower-case word
# follows, so that the commas inside a name ("Greenfield, Fairview Court") stay in the clause.
_SOURCE_CLAUSE = re.compile(r"^\s*(?i:according\s+to|based\s+on)\b.*?,\s+(?=[a-z])", re.DOTALL)


def source_clause(query: str) -> tuple[str, str]:
    """The query's opening clause that cites its source, and the rest: ("According to the judgment
    of Greenfield, Fairview Court, ", "summarize the facts of H. Price's crimes."); ("", query)
    when it has none.

    The clause routes the query (the document level reads it all). Inside the documents it was
    routed to, its words pull towards the passages about the source itself, the judgment's header
    or the report's introduction, rather than towards the answer: the node-level BM25 leaves out
    those of its words the rest of the query does not repeat (``_Run._lexical_documents``).
    """
    found = _SOURCE_CLAUSE.match(query)
    if found is None:
        return "", query
    return query[: found.end()], query[found.end() :]


def take_out_titles(query: str, titles: Sequence[str]) -> tuple[str, list[str]]:
    """The passage query: ``query`` without the titles of the documents it names (see
    ``_Run._passage_vector``), and the titles it took out (none when the query stays whole).

    A title of several words is taken out however it is written; a one-word title ("JetWing")
    only as the title writes it and not as the query's first word, so that a query about
    volcanoes keeps its subject inside a document titled "Volcanoes". The query itself comes
    back when too little would be left (fewer than three words). The titles found by plain
    substring search (``_Run._documents_by_title_in_query``) can be false friends: a document
    titled "202" is "in" every query about 2021. Only a title taken out here counts as named.
    """
    rest, taken = query, []
    for title in sorted({title.strip() for title in titles if title.strip()}, key=len, reverse=True):
        if len(title.split()) > 1:
            rest, found = re.subn(re.escape(title), " ", rest, flags=re.IGNORECASE)
        else:
            rest, found = re.subn(rf"(?<=\W){re.escape(title)}\b", " ", rest)
        if found:
            taken.append(title)
    rest = re.sub(r"\(\s*\)|\[\s*\]", " ", rest)  # the brackets a title sat in
    rest = " ".join(rest.split()).strip(" ,;:-")
    if rest != query and len(re.findall(r"\w+", rest)) >= 3:
        return rest, sorted(taken)
    return query, []


# -- input ---------------------------------------------------------------------------------------


def _clean_query(query: object) -> str:
    if not isinstance(query, str) or not query.strip():
        raise RetrievalInputError("The query is empty. Type what you are looking for.")
    if "\x00" in query:
        # PostgreSQL cannot hold NUL in text: refused here, in words, not as a database error.
        raise RetrievalInputError("The query contains NUL characters; send plain text.")
    query = " ".join(query.split())
    if len(query) > MAX_QUERY_CHARS:
        raise RetrievalInputError(
            f"The query is {len(query):,} characters long; the limit is {MAX_QUERY_CHARS:,}. "
            "Shorten it to the question itself."
        )
    return query


def _check_budget(token_budget: object) -> int:
    low, high = settings.TOKEN_BUDGET_MIN, settings.TOKEN_BUDGET_MAX
    if isinstance(token_budget, bool) or not isinstance(token_budget, int):
        raise RetrievalInputError(
            f"The token budget must be a whole number of tokens between {low} and {high}, "
            f"got {token_budget!r}."
        )
    if not low <= token_budget <= high:
        raise RetrievalInputError(
            f"The token budget {token_budget} is outside the accepted range {low}–{high} tokens "
            "(OPENFABLE_TOKEN_BUDGET_MIN / _MAX). Choose a budget in that range."
        )
    return token_budget


def _check_embedding(vector: object) -> np.ndarray | None:
    if vector is None:
        return None
    array = np.asarray(vector, dtype=np.float32)
    dimensions = settings.EMBEDDING_DIMENSIONS
    if array.shape != (dimensions,) or not np.all(np.isfinite(array)):
        raise RetrievalInputError(
            f"The query embedding must be {dimensions} finite numbers (OPENFABLE_EMBEDDING_DIMENSIONS), "
            f"got an array of shape {array.shape}."
        )
    return array


def _resolve_mode(mode: str | None) -> str:
    if mode is None or (isinstance(mode, str) and not mode.strip()):
        return "bipath" if llm_configured() else "vector"
    mode = mode.strip().lower() if isinstance(mode, str) else mode
    if mode not in MODES:
        raise RetrievalInputError(f"Unknown mode {mode!r}. Use one of: {', '.join(MODES)}.")
    return mode


# -- the run ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _DocumentInfo:
    title: str
    token_count: int
    root_id: int | None
    has_excluded: bool  # a person excluded part of it from retrieval: never return it whole


def _document_rows(where: str, params: list[Any], *, order_limit: int | None = None) -> list[tuple[Any, ...]]:
    """(id, title, token_count, root_id, has_excluded) of the documents ``where`` (a condition on
    those columns) selects; with ``order_limit``, the first that many by id. A document excluded
    from retrieval as a whole has no root here: nothing to search. Plain SQL: this runs on every
    query, and the ORM's compilation of its subqueries took most of its time (README, "Latency on
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


@dataclass
class _Run:
    query: str
    budget: int
    mode: str
    scope: Scope
    uses_llm: bool
    started: float
    vector: np.ndarray | None = None  # the query's embedding, when the caller gave it
    timings: dict[str, float] = field(default_factory=dict)
    paths: dict[str, PathReport] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    usage: LLMUsage = field(default_factory=LLMUsage)
    llm_down: str = ""  # the LLM service failed: later LLM steps of this query are not tried
    llm_cooling: bool = False  # the LLM endpoint is cooling down: no LLM step of this query ran
    terms: list[str] = field(default_factory=list)  # the query's full-text search terms
    passage_terms: list[str] = field(default_factory=list)  # the passage query's search terms
    term_weights: dict[str, float] = field(default_factory=dict)  # node level: names (lexical.name_weights)
    named_titles: list[str] = field(default_factory=list)  # titles in scope the query names (take_out_titles)
    named_documents: set[int] = field(default_factory=set)  # the documents they name, one per title
    passage_text: str = ""  # the query without them (``take_out_titles``), when that differs
    embedding: Future[QueryVectors] | None = None  # the query's vectors, being computed
    passage_vector: np.ndarray | None = None  # the query's vector without its named titles
    lap: float = 0.0

    def execute(self, version: int) -> RetrievalResult:
        self.lap = self.started
        self.end_stage("validate")
        if self.mode == "vector" or not self.uses_llm:
            # Without an LLM, "vector" is also the default mode: name the cause, not the symptom.
            reason = "vector mode" if llm_configured() else "no LLM configured (set OPENFABLE_LLM_MODEL)"
            for name in (LLM_SELECT, LLM_NAVIGATE):
                self.paths[name] = PathReport(name, ran=False, reason=reason)
            if self.mode == "llm":
                self.notes.append("llm mode without a configured LLM: the vector paths answered instead.")
        self._start_embedding()
        self.end_stage("embed")  # the local model's whole time; a remote one's shows below
        lexical_scores = self._lexical_documents()  # while a remote embedder answers
        self.end_stage("lexical")
        vector = self._query_vector()
        self.end_stage("embed")
        top_k = settings.RETRIEVAL_TOP_K
        search = vector_paths.nearest_nodes(
            query_vector=vector,
            top_k=top_k,
            document_ids=self.scope.document_ids,
            collection_id=self.scope.collection_id,
            whole_collection=self.scope.whole_collection,
        )
        vector_scores = vector_paths.document_scores(search.hits)
        detail = {"strategy": search.strategy, "ef_search": search.ef_search, "top_k": top_k}
        self.paths[VECTOR] = PathReport(VECTOR, ran=True, candidates=len(vector_scores), detail=detail)
        self.end_stage("vector")
        retrieval_paths = {VECTOR: {pk: score.score for pk, score in vector_scores.items()}}
        if lexical_scores:
            retrieval_paths[LEXICAL] = lexical_scores

        weights = document_path_weights()
        shortlist = [
            item.key for item in fuse(retrieval_paths, weights={n: weights[n] for n in retrieval_paths})
        ]
        info = self._document_info(shortlist)
        self.end_stage("document_info")
        llm_scores = self._llm_select(shortlist, info) if self.uses_llm and self.mode != "vector" else None
        doc_paths: dict[str, dict[int, float]] = {}
        if llm_scores is not None:
            doc_paths[LLM_SELECT] = llm_scores
        if self.mode != "llm" or llm_scores is None:
            doc_paths.update(retrieval_paths)
        else:
            reason = "llm mode: used only to shortlist documents for LLMselect"
            for name in retrieval_paths:
                self.paths[name] = dataclasses.replace(self.paths[name], reason=reason)
        fused = fuse(doc_paths, {name: weights[name] for name in doc_paths})
        fused = [item for item in fused if item.key in info]  # a document deleted meanwhile
        ranks = {item.key: rank for rank, item in enumerate(fused)}
        selected = select_documents(fused)
        if self.named_documents and (named := route_to_named_documents(fused, self.named_documents)):
            if added := [info[pk].title for pk in named if pk not in selected]:
                self.notes.append(f"Searched because the query names it: {', '.join(added)}.")
            if left_out := [info[pk].title for pk in selected if pk not in named]:
                self.notes.append(
                    f"Not searched, because the query names other documents: {', '.join(left_out)}."
                )
            selected = named
        if selected and whole_documents_fit((info[pk].token_count for pk in selected), self.budget):
            selected = extend_to_budget(
                selected, fused, sizes={pk: d.token_count for pk, d in info.items()}, budget=self.budget
            )
        self.end_stage("fusion")

        chunks: list[Chunk] = []
        routing = "nodes"
        if not selected and LLM_SELECT in doc_paths and VECTOR not in doc_paths:
            self.notes.append("llm mode: LLMselect chose no document, so nothing was returned.")
        elif not selected:
            self.notes.append("No document matched: the scope holds no indexed text, or no path found any.")
        elif whole_documents_fit((info[pk].token_count for pk in selected), self.budget):
            chunks = self._whole_documents(selected, fused, ranks, info)
            routing = "documents" if chunks else "nodes"
        if routing == "nodes" and selected:
            titles = {pk: document.title for pk, document in info.items()}
            passage_vector = self._passage_vector(vector, selected, titles)
            chunks = node_level_chunks(
                self,
                selected=selected,
                vector=vector if passage_vector is None else passage_vector,
                ranks=ranks,
                titles=titles,
            )
            expansion = self.paths.get(TREE_EXPANSION)
            if passage_vector is not None and expansion is not None:
                # Say what ranked the leaves: the query without the titles it names.
                detail = {**expansion.detail, "passage_query": self.passage_text}
                self.paths[TREE_EXPANSION] = dataclasses.replace(expansion, detail=detail)
        else:
            why = (
                "not needed: the selected documents fit the budget whole" if selected else "no document found"
            )
            for name in (LLM_NAVIGATE, TREE_EXPANSION):
                self.paths.setdefault(name, PathReport(name, ran=False, reason=why))
        self.lap = self.started
        self.end_stage("total")

        hits = tuple(
            DocumentHit(
                document_id=item.key,
                title=info[item.key].title,
                rank=rank,
                score=item.score,
                path_scores=dict(item.raw),
                found_by=item.paths,
                token_count=info[item.key].token_count,
                selected=item.key in selected,
                vector_hits=getattr(vector_scores.get(item.key), "hits", 0),
            )
            for rank, item in enumerate(fused[: max(SHORTLIST_SIZE, len(selected))])
        )
        return RetrievalResult(
            query=self.query,
            token_budget=self.budget,
            mode=self.mode,
            routing="documents" if routing == "documents" else "nodes",
            paths=tuple(self.paths[name] for name in PATH_NAMES if name in self.paths),
            documents=hits,
            chunks=tuple(chunks),
            total_tokens=sum(chunk.token_count for chunk in chunks),
            timings_ms=self.timings,
            llm_usage=self.usage,
            corpus_version=version,
            filters=self.scope.filters,
            notes=tuple(self.notes),
        )

    def _lexical_documents(self) -> dict[int, float]:
        """The lexical path at the document level: the best ``LEXICAL_TOP_DOCUMENTS`` by BM25."""
        weight = settings.RETRIEVAL_LEXICAL_WEIGHT
        if weight <= 0 and settings.RETRIEVAL_LEXICAL_NODE_SHARE <= 0:
            reason = "turned off (OPENFABLE_RETRIEVAL_LEXICAL_WEIGHT and _NODE_SHARE are 0)"
            self.paths[LEXICAL] = PathReport(LEXICAL, ran=False, reason=reason)
            return {}
        # One round trip stems the query, its passage query and the names it gives.
        share = settings.RETRIEVAL_NAME_DOCUMENT_SHARE
        names = lexical_paths.capitalised_words(self.query) if share > 0 and weight > 0 else []
        extra = [self.passage_text] if self.passage_text else []
        clause, rest = source_clause(self.query) if settings.RETRIEVAL_SOURCE_CLAUSE else ("", "")
        cited = [clause, rest] if clause else []
        stemmed = lexical_paths.stem([self.query, *extra, *cited, *names])
        self.terms = stemmed[0]
        self.passage_terms = stemmed[1] if extra else []
        if cited:
            clause_terms, rest_terms = stemmed[1 + len(extra)], stemmed[2 + len(extra)]
            source_terms = sorted(set(clause_terms) - set(rest_terms))
        else:
            source_terms = []
        name_terms = {term for terms in stemmed[1 + len(extra) + len(cited) :] for term in terms}
        if not self.terms:
            reason = "the query has no searchable words (only stop words, numbers or symbols)"
            self.paths[LEXICAL] = PathReport(LEXICAL, ran=False, reason=reason)
            return {}
        detail: dict[str, Any] = {"terms": self.terms}
        if weight <= 0:
            reason = "document level turned off (OPENFABLE_RETRIEVAL_LEXICAL_WEIGHT is 0)"
            self.paths[LEXICAL] = PathReport(LEXICAL, ran=True, reason=reason, detail=detail)
            return {}
        found = lexical_paths.document_scores(
            self.terms, document_ids=self.scope.document_ids, best=LEXICAL_TOP_DOCUMENTS
        )
        best = sorted(found.scores.items(), key=lambda item: (-item[1], item[0]))
        detail["documents_in_scope"] = found.considered
        if share > 0:
            self.term_weights = lexical_paths.name_weights(self.terms, name_terms, found, share=share)
            if self.term_weights:
                detail["name_weights"] = {term: round(w, 3) for term, w in sorted(self.term_weights.items())}
        if source_terms:
            # Most of DragonBall's queries open so; the gain and its cost at larger budgets are
            # the README's vector-source-words row (a weight of 0.5 instead of 0 kept half of it).
            self.term_weights.update(dict.fromkeys(source_terms, 0.0))
            detail["source_terms"] = source_terms
        self.paths[LEXICAL] = PathReport(LEXICAL, ran=True, candidates=len(best), detail=detail)
        return dict(best)

    def _document_info(self, candidates: Sequence[int]) -> dict[int, _DocumentInfo]:
        """Titles, sizes and roots of the candidate documents, plus (when LLMselect can read
        the whole scope) every other indexed document in scope. Two queries at most."""
        info = {row[0]: _DocumentInfo(*row[1:]) for row in _document_rows("id = ANY(%s)", [list(candidates)])}
        if self.uses_llm and self.mode != "vector":
            where, params = "root_id IS NOT NULL", []
            if self.scope.document_ids is not None:
                where, params = "root_id IS NOT NULL AND id = ANY(%s)", [list(self.scope.document_ids)]
            others = _document_rows(where, params, order_limit=SHORTLIST_SIZE + 1)
            if len(others) <= SHORTLIST_SIZE:
                for row in others:
                    info.setdefault(row[0], _DocumentInfo(*row[1:]))
        return info

    def _llm_select(
        self, ranked: Sequence[int], info: Mapping[int, _DocumentInfo]
    ) -> dict[int, float] | None:
        """LLMselect over the best ``SHORTLIST_SIZE`` of the vector and lexical paths (topped up
        with other documents in scope when they find fewer)."""
        shortlist = [pk for pk in ranked if pk in info][:SHORTLIST_SIZE]
        shortlist += sorted(pk for pk in info if pk not in shortlist)[: SHORTLIST_SIZE - len(shortlist)]
        client = LLMClient.from_settings(
            respect_cooldown=True
        )  # built per query: settings (and tests' overrides) read now
        if self.llm_cooling_down(LLM_SELECT, client):
            if self.mode == "llm":
                self.notes.append("llm mode: the LLM is cooling down, so the vector paths answered instead.")
            return None
        outcome, outline = llm_paths.llm_select(
            client,
            query=self.query,
            documents=[(pk, info[pk].title) for pk in shortlist],
            max_depth=settings.RETRIEVAL_LLMSELECT_DEPTH,
            max_tokens=settings.RETRIEVAL_LLM_PROMPT_TOKENS,
            max_prompt_tokens=llm_paths.select_prompt_cap(settings.RETRIEVAL_LLM_QUERY_TOKENS),
        )
        self.end_stage("llm_select")
        scores = self.record_llm(LLM_SELECT, outcome, outline)
        if scores is None and self.mode == "llm":
            self.notes.append("llm mode: LLMselect failed, so the vector paths answered instead.")
        return scores

    def _whole_documents(
        self,
        selected: list[int],
        fused: list[Fused[int]],
        ranks: dict[int, int],
        info: dict[int, _DocumentInfo],
    ) -> list[Chunk]:
        if any(info[pk].has_excluded for pk in selected):
            return []  # the whole text would carry excluded parts: the node level packs the rest
        loaded = Document.objects.filter(pk__in=selected).values_list("pk", "content", "page_spans")
        contents = {pk: (content, page_spans) for pk, content, page_spans in loaded}
        by_key = {item.key: item for item in fused}
        chunks = []
        for pk in sorted(selected, key=ranks.__getitem__):
            item, (text, page_spans) = by_key[pk], contents[pk]
            chunks.append(
                Chunk.whole_document(
                    document_id=pk,
                    title=info[pk].title,
                    rank=ranks[pk],
                    root_id=info[pk].root_id,
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
            )
        self.end_stage("documents")
        # Document.token_count was written at upload; the budget is enforced on the text itself.
        if not whole_documents_fit((chunk.token_count for chunk in chunks), self.budget):
            self.notes.append("Stored document sizes were stale: the node level ran instead.")
            return []
        return chunks

    def record_llm(
        self, name: str, outcome: llm_paths.LLMPathOutcome, outline: llm_paths.Outline
    ) -> dict[int, float] | None:
        """Report an LLM path's outcome (usage, path report, notes); its scores, or None when it
        failed (a service failure also stops later LLM steps of this query)."""
        self.usage = self.usage.plus(outcome.usage)
        detail = {
            "outline_tokens": outline.tokens,
            "outline_omitted": outline.omitted,
            "prompt_tokens": outcome.prompt_tokens,
        }
        if outcome.failed:
            if outcome.service_failed:
                self.llm_down = outcome.error
            reason = f"LLM call failed: {outcome.error} — fell back to the vector path"
            self.paths[name] = PathReport(name, ran=True, failed=True, reason=reason, detail=detail)
            self.notes.append(f"{name}: {reason}")
            return None
        self.paths[name] = PathReport(
            name, ran=True, candidates=len(outcome.scores), dropped_ids=outcome.dropped_ids, detail=detail
        )
        if outcome.dropped_ids:
            self.notes.append(f"{name}: dropped {outcome.dropped_ids} id(s) the LLM invented.")
        if outline.omitted:
            self.notes.append(
                f"{name}: {outline.omitted} outline entries left out to stay within the prompt cap."
            )
        return outcome.scores

    def llm_cooling_down(self, name: str, client: LLMClient) -> bool:
        """True, with ``name`` reported as not run and why, when the LLM endpoint is cooling down
        after repeated failures: the path is not tried and no request is made."""
        cooldown = client.cooldown()
        if cooldown is None:
            return False
        reason = f"LLM {cooldown.describe()} — the vector paths answer meanwhile"
        detail = {COOLDOWN_DETAIL: round(cooldown.remaining_s, 1), "failed_requests": cooldown.failures}
        self.paths[name] = PathReport(name, ran=False, reason=reason, detail=detail)
        if not self.llm_cooling:  # one note for the query, however many LLM steps it skips
            self.notes.append(f"LLM paths not tried: the LLM is {cooldown.describe()}.")
            self.llm_cooling = True
        return True

    def _start_embedding(self) -> None:
        """Start embedding the query (with the titles it names that are not cached yet, in one
        batch; see ``retrieval.query_vectors``). A remote embedder answers in the background
        while the document-level lexical path runs in the database. The local model computes
        now: it already spreads over every core (OpenMP), and sharing them with the lexical path
        slowed both on 2 cores (README, "Latency on real corpora": overlap did not pay)."""
        if self.vector is not None:
            return  # the caller's own vector: no text to embed
        if settings.RETRIEVAL_PASSAGE_QUERY:
            in_query = self._documents_by_title_in_query()
            rest, self.named_titles = take_out_titles(self.query, list(in_query))
            if self.named_titles:
                self.passage_text = rest
                if settings.RETRIEVAL_NAMED_DOCUMENTS:
                    # A title two documents share names neither: their scores choose.
                    self.named_documents = {
                        in_query[title][0] for title in self.named_titles if len(in_query[title]) == 1
                    }
        embedder = get_embedder()
        if getattr(embedder, "uses_every_core", False):
            self.embedding = Future()
            self.embedding.set_result(embed_query_vectors(embedder, self.query, self.named_titles))
        else:
            self.embedding = _EMBEDDING_THREADS.submit(
                embed_query_vectors, embedder, self.query, self.named_titles
            )

    def _query_vector(self) -> np.ndarray:
        """The query's vector (waiting for the embedding started by ``_start_embedding``)."""
        if self.vector is None:
            assert self.embedding is not None, "_start_embedding() runs first"
            vectors = self.embedding.result()
            self.vector = vectors.query
            self.passage_vector = vectors.passage
        return self.vector

    def _documents_by_title_in_query(self) -> dict[str, list[int]]:
        """The documents in scope whose title the query contains (any case), by title: one scan
        of the titles, no embedding."""
        documents = Document.objects.filter(status=Document.Status.INDEXED)
        if self.scope.document_ids is not None:
            documents = documents.filter(pk__in=self.scope.document_ids)
        # PostgreSQL's strpos(query, title) > 0: the title occurs in the query.
        position = Func(
            Lower(Value(self.query)), Lower("title"), function="strpos", output_field=IntegerField()
        )
        found: dict[str, list[int]] = defaultdict(list)
        for pk, title in documents.annotate(at=position).filter(at__gt=0).values_list("pk", "title"):
            found[title].append(pk)
        return dict(found)

    def _passage_vector(
        self, vector: np.ndarray, selected: Sequence[int], titles: Mapping[int, str]
    ) -> np.ndarray | None:
        """The vector that ranks the nodes of the selected documents, when it differs from the
        query's own.

        A query often names its document ("… (Reseller Agreement between McDATA and RESELLER)",
        "… did Acme Government Solutions pay"): that routed it, and inside the document the name
        only pulls towards the passages that repeat it. So the node level ranks by the query's
        vector without the named titles' direction (``retrieval.query_vectors``), plus
        ``PASSAGE_QUERY_KEEP`` of the whole query's, and its lexical terms are those of the query
        without the titles' words (``take_out_titles``). (Measured alternatives, both worse: the rest
        alone, and ranking only the leaves so with the internal nodes by the whole query; the
        README's "Recall" section has the ablations.)
        """
        passage_vector = self.passage_vector
        if passage_vector is None or not any(titles[pk] in self.named_titles for pk in selected):
            return None
        if self.terms:
            self.terms = self.passage_terms or self.terms
        # Half of the whole query stays in: questions about the document as a whole ("summarise
        # Acme's year") still lean towards the sections that carry its title.
        mixed = passage_vector + PASSAGE_QUERY_KEEP * vector
        return mixed / float(np.linalg.norm(mixed))

    def end_stage(self, stage: str) -> None:
        """Add the milliseconds since the previous stage ended to ``stage``'s timing."""
        now = time.perf_counter()
        self.timings[stage] = round(self.timings.get(stage, 0.0) + (now - self.lap) * 1000, 2)
        self.lap = now
