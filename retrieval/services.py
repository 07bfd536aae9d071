"""``retrieve()``: the one entry point of the query side (FABLE's online algorithm).

1. Document level. The vector path takes the top-K nodes through HNSW and keeps each document's
   best similarity. The lexical path ranks documents by BM25 over full-text search
   (``paths.lexical``): names and rare words of the query find the documents that mention them,
   which a small embedding model blurs. LLMselect scores a shortlist of documents (at most
   ``SHORTLIST_SIZE``, the best of the other two) from their shallow outline (``document_level``). All are fused on
   min-max normalised scores, weighted by ``document_path_weights()``; beside the other paths,
   LLMselect keeps only the picks they rank high too, weighted by its agreement beyond chance.
2. Routing. The *selected* documents are those whose fused score is at least
   ``SELECTION_RATIO`` x the best one (at most ``MAX_SELECTED_DOCUMENTS``, in fused order), and
   in bipath mode those the other paths select without LLMselect (it adds, never takes away); a
   query that names documents by their title is routed to those and the best-scored one instead
   (``route_to_named_documents``). If they fit the budget together they are returned whole (and
   the budget left takes the next documents); otherwise the node level runs on them. The rules
   are pure (``routing``).
3. Node level (``node_level``). LLMnavigate picks subtree roots from their outline;
   TreeExpansion scores every node of them from exact similarities, sharpened by the node-level
   BM25 of the lexical path. Fused (LLMnavigate's picks that TreeExpansion ranks high too,
   weighted by its agreement beyond chance); packed by score ("llm" mode: the LLM's picks first),
   without ancestor/descendant overlap; the chosen text comes back in document order.

The corpus a query searches (collection, documents, tags, what the user may read) is resolved
and validated by ``scope.resolve_scope``.

Modes: "vector" never calls an LLM; "llm" uses the LLM paths alone (vectors only shortlist
documents for LLMselect); "bipath" (the default with an LLM) uses both. An LLM failure never
fails a query: the vector paths carry it and the result says why. While the LLM endpoint cools
down after repeated failures (``openfable.llm_endpoints``), the LLM paths are not tried at all:
their reports say so and until when, and such an answer is not cached.

Each stage is a function that takes plain values and returns a frozen value; ``_answer`` below
runs them in order and is the only place their outcomes meet. The settings a query runs under
are one value too (``query_settings.QuerySettings``), read once per query.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any

import numpy as np

from documents.selectors import corpus_version, document_sources
from openfable.embeddings import get_embedder
from openfable.llm import LLMUsage, llm_configured
from retrieval import cache
from retrieval.document_level import (
    SHORTLIST_SIZE,
    DocumentInfo,
    LexicalDocuments,
    NamedTitles,
    VectorDocuments,
    WholeDocuments,
    document_info,
    lexical_documents,
    llm_select_step,
    named_titles,
    start_embedding,
    vector_documents,
    whole_documents,
)
from retrieval.fusion import fuse
from retrieval.llm_steps import COOLDOWN_DETAIL, LLMStep
from retrieval.node_level import NavigatePlan, NodeLevel, NodeTerms, node_level_chunks
from retrieval.query_input import (
    MAX_QUERY_CHARS,
    check_embedding,
    check_limits,
    check_order,
    clean_query,
    resolve_mode,
)
from retrieval.query_settings import QuerySettings
from retrieval.query_vectors import QueryVectors
from retrieval.result import (
    LEXICAL,
    LLM_NAVIGATE,
    LLM_SELECT,
    PATH_NAMES,
    TREE_EXPANSION,
    VECTOR,
    Chunk,
    DocumentHit,
    PathReport,
    RetrievalInputError,
    RetrievalResult,
    chunks_in_order,
)
from retrieval.routing import (
    Routing,
    extend_to_budget,
    route_documents,
    route_to_named_documents,
    select_documents,
    source_clause,
    take_out_titles,
)
from retrieval.scope import Scope, resolve_scope
from retrieval.timings import Laps

# The pure rules live in ``retrieval.routing``; named here too, where callers have found them.
__all__ = [
    "MAX_QUERY_CHARS",
    "QuerySettings",
    "RetrievalInputError",
    "RetrievalResult",
    "extend_to_budget",
    "retrieve",
    "route_to_named_documents",
    "select_documents",
    "source_clause",
    "take_out_titles",
]

# The node level ranks by (the query without the titles it names) + this share of the whole query:
# 0.5 kept CUAD's gain and DragonBall's Summary questions, which 0 lost (docs/benchmarks.md, "Recall" and
# "Measured and not kept").
PASSAGE_QUERY_KEEP = 0.5


def document_path_weights(query_settings: QuerySettings) -> dict[str, float]:
    """Fusion weights of the document-level paths. The lexical weight is a setting
    (OPENFABLE_RETRIEVAL_LEXICAL_WEIGHT, default 2: on DragonBall and CUAD it found the gold
    documents that the vector path ranked below others, see docs/benchmarks.md)."""
    return {VECTOR: 1.0, LEXICAL: query_settings.lexical_weight, LLM_SELECT: 1.0}


def retrieve(
    *,
    query: str,
    token_budget: int | None = None,
    top_k: int | None = None,
    order: str | None = None,
    mode: str | None = None,
    collection: str | int | None = None,
    documents: Sequence[int] | None = None,
    tags: Sequence[str] | None = None,
    user: Any = None,
    use_cache: bool = True,
    query_embedding: np.ndarray | None = None,
    query_settings: QuerySettings | None = None,
) -> RetrievalResult:
    """The most relevant text for ``query`` within ``token_budget`` tokens, in document order.

    ``top_k`` asks for at most that many passages instead of a budget (not both; neither: the
    default budget): the node level packs them by score under the largest budget, and never
    returns documents whole. ``order`` is the order of the chunks: "document" (the default) or
    "score" (best first).
    ``collection`` (slug or id), ``documents`` (ids) and ``tags`` (documents carrying all of
    them) restrict the corpus; ``user`` restricts it to the collections that user may read
    (None: no restriction, for trusted callers). ``query_embedding`` is the query's vector when
    the caller has it already (a benchmark over synthetic vectors); by default the configured
    embedder embeds ``query``. ``query_settings``: the settings to run under (a benchmark's
    ablation); by default the configured ones. Raises ``RetrievalInputError`` for input the
    caller can fix; LLM failures never raise (see the module docstring).
    """
    started = time.perf_counter()
    query = clean_query(query)
    budget, top_k = check_limits(token_budget=token_budget, top_k=top_k)
    order = check_order(order)
    mode = resolve_mode(mode)
    request = _Query(
        text=query,
        budget=budget,
        top_k=top_k,
        mode=mode,
        scope=resolve_scope(collection=collection, documents=documents, tags=tags, user=user),
        corpus_version=corpus_version(),
        settings=query_settings or QuerySettings.from_settings(),
        uses_llm=mode != "vector" and llm_configured(),
    )
    key = cache.cache_key(
        query=request.text,
        token_budget=request.budget,
        mode=request.mode,
        filters=request.scope.filters,
        scope=request.scope.visibility,
        corpus_version=request.corpus_version,
        fingerprint=cache.settings_fingerprint(uses_llm=request.uses_llm, query_settings=request.settings),
        top_k=request.top_k,
    )
    if use_cache and (hit := cache.cache_get(key)) is not None:
        elapsed = round((time.perf_counter() - started) * 1000, 2)
        # No stage ran and no LLM was called for this answer: say so instead of replaying them.
        return _presented(
            dataclasses.replace(
                hit, cached=True, llm_usage=LLMUsage(), timings_ms={"cache": elapsed, "total": elapsed}
            ),
            order,
        )
    vector = check_embedding(query_embedding)
    if vector is not None:
        use_cache = False  # the cache is keyed on the query text, not on a caller's vector
    result = _answer(request, vector=vector, laps=Laps(started))
    # A failed LLM call may be transient, a cool-down ends: do not pin a fallback answer in the cache.
    if use_cache and not any(path.failed or COOLDOWN_DETAIL in path.detail for path in result.paths):
        cache.cache_set(key, result)
    return _presented(result, order)


def _presented(result: RetrievalResult, order: str) -> RetrievalResult:
    """The result as this caller asked for it: its chunks in ``order`` (the cache keeps them in
    document order, so both orders share one packing)."""
    return dataclasses.replace(result, chunks=chunks_in_order(result.chunks, order), order=order)


# -- the stages -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Query:
    """One query, checked: what every stage may read."""

    text: str
    budget: int
    top_k: int | None  # the most passages to return (None: as many as fit the budget)
    mode: str
    scope: Scope
    corpus_version: int
    settings: QuerySettings
    uses_llm: bool  # the mode may call the LLM and one is configured


@dataclass(frozen=True)
class _DocumentLevel:
    lexical: LexicalDocuments
    vector: VectorDocuments
    info: Mapping[int, DocumentInfo]
    select: LLMStep | None  # None: LLMselect was not to run (vector mode, no LLM)
    routing: Routing


@dataclass(frozen=True)
class _Chunks:
    chunks: tuple[Chunk, ...]
    routing: str  # "documents" (returned whole) or "nodes"
    reports: Mapping[str, PathReport]  # the reports of the paths that ran after routing
    notes: tuple[str, ...]
    usage: LLMUsage


def _answer(request: _Query, *, vector: np.ndarray | None, laps: Laps) -> RetrievalResult:
    """Run the stages of one query in order and put their outcomes together."""
    laps.end("validate")
    paths, notes = _llm_not_used(request)
    named = _named_titles(request, vector)
    laps.end("titles")
    pending = _start_embedding(request, vector, named)
    laps.end("embed")  # the local model's whole time; a remote one's shows below
    lexical = lexical_documents(  # while a remote embedder answers
        query=request.text,
        passage_text=named.passage_text,
        scope=request.scope,
        query_settings=request.settings,
    )
    laps.end("lexical")
    embedded = pending.result()
    laps.end("embed")
    documents = _document_level(request, embedded.query, lexical, named, laps)
    paths.update(_document_reports(request, documents))
    notes += documents.select.notes if documents.select is not None else ()
    notes += documents.routing.notes
    found = _chunks(request, documents, embedded, named, paths, laps)
    paths.update(found.reports)
    return _result(request, documents, found, paths, notes + found.notes, laps.with_total())


def _llm_not_used(request: _Query) -> tuple[dict[str, PathReport], tuple[str, ...]]:
    """The LLM paths' reports (and a note) when the query does not use the LLM."""
    if request.uses_llm:
        return {}, ()
    # Without an LLM, "vector" is also the default mode: name the cause, not the symptom.
    reason = "vector mode" if llm_configured() else "no LLM configured (set OPENFABLE_LLM_MODEL)"
    paths = {name: PathReport(name, ran=False, reason=reason) for name in (LLM_SELECT, LLM_NAVIGATE)}
    if request.mode == "llm":
        return paths, ("llm mode without a configured LLM: the vector paths answered instead.",)
    return paths, ()


def _named_titles(request: _Query, vector: np.ndarray | None) -> NamedTitles:
    """The titles the query names (none looked for when the caller gives its own vector)."""
    if vector is not None:
        return NamedTitles()
    return named_titles(query=request.text, scope=request.scope, query_settings=request.settings)


def _start_embedding(request: _Query, vector: np.ndarray | None, named: NamedTitles) -> Future[QueryVectors]:
    """The query's vectors on their way (the caller's own: at once)."""
    if vector is not None:  # no text to embed
        given: Future[QueryVectors] = Future()
        given.set_result(QueryVectors(query=vector, passage=None, titles_embedded=0))
        return given
    return start_embedding(get_embedder(), query=request.text, titles=named.titles)


def _document_level(
    request: _Query, vector: np.ndarray, lexical: LexicalDocuments, named: NamedTitles, laps: Laps
) -> _DocumentLevel:
    """The vector path, LLMselect over the shortlist of both paths, then fusion and routing."""
    found = vector_documents(vector=vector, scope=request.scope, top_k=request.settings.top_k)
    laps.end("vector")
    retrieval_paths = {VECTOR: {pk: score.score for pk, score in found.scores.items()}}
    if lexical.scores:
        retrieval_paths[LEXICAL] = dict(lexical.scores)
    weights = document_path_weights(request.settings)
    shortlist = [item.key for item in fuse(retrieval_paths, weights={n: weights[n] for n in retrieval_paths})]
    info = document_info(shortlist, scope=request.scope, whole_scope=request.uses_llm)
    laps.end("document_info")
    select = None
    if request.uses_llm:
        select = llm_select_step(
            query=request.text,
            mode=request.mode,
            ranked=shortlist,
            info=info,
            query_settings=request.settings,
        )
        if not select.cooling:
            laps.end("llm_select")
    routing = route_documents(
        mode=request.mode,
        retrieval_paths=retrieval_paths,
        llm_scores=select.scores if select is not None else None,
        llm_offered=select.offered if select is not None else (),
        weights=weights,
        facts=info,
        named_documents=named.documents,
        budget=request.budget,
    )
    laps.end("fusion")
    return _DocumentLevel(lexical, found, info, select, routing)


def _document_reports(request: _Query, documents: _DocumentLevel) -> dict[str, PathReport]:
    """The document-level paths' reports. In "llm" mode with LLMselect's answer, the vector (and
    lexical) path only shortlisted documents for it: their reports say so."""
    reports = {LEXICAL: documents.lexical.report, VECTOR: documents.vector.report}
    if documents.select is not None:
        reports[LLM_SELECT] = documents.select.report
    if request.mode == "llm" and LLM_SELECT in documents.routing.path_names:
        reason = "llm mode: used only to shortlist documents for LLMselect"
        shortlisted = (VECTOR, LEXICAL) if documents.lexical.scores else (VECTOR,)
        for name in shortlisted:
            reports[name] = dataclasses.replace(reports[name], reason=reason)
    return reports


def _chunks(
    request: _Query,
    documents: _DocumentLevel,
    embedded: QueryVectors,
    named: NamedTitles,
    paths: Mapping[str, PathReport],
    laps: Laps,
) -> _Chunks:
    """The selected documents whole when they fit the budget, else the node level's passages."""
    routing = documents.routing
    whole = WholeDocuments()
    if routing.whole and request.top_k is None:  # top_k asks for passages, never documents whole
        whole = whole_documents(
            selected=routing.selected,
            fused=routing.fused,
            ranks=routing.ranks,
            info=documents.info,
            budget=request.budget,
        )
        if whole.loaded:
            laps.end("documents")
    if whole.chunks:
        return _Chunks(
            whole.chunks,
            "documents",
            _not_needed(paths, "the selected documents fit the budget whole"),
            whole.notes,
            LLMUsage(),
        )
    if not routing.selected:
        return _Chunks((), "nodes", _not_needed(paths, "no document found"), whole.notes, LLMUsage())
    nodes = _node_level(request, documents, embedded, named, paths)
    laps.add(nodes.timings)
    return _Chunks(nodes.chunks, "nodes", nodes.reports, whole.notes + nodes.notes, nodes.usage)


def _not_needed(paths: Mapping[str, PathReport], why: str) -> dict[str, PathReport]:
    """The node-level paths' reports when the node level did not run (unless reported already)."""
    return {
        name: PathReport(name, ran=False, reason=why)
        for name in (LLM_NAVIGATE, TREE_EXPANSION)
        if name not in paths
    }


def _node_level(
    request: _Query,
    documents: _DocumentLevel,
    embedded: QueryVectors,
    named: NamedTitles,
    paths: Mapping[str, PathReport],
) -> NodeLevel:
    """The node level on the selected documents, ranked by the passage vector when the query
    names them (``_passage_vector``)."""
    routing, lexical = documents.routing, documents.lexical
    titles = {pk: document.title for pk, document in documents.info.items()}
    passage_vector = _passage_vector(embedded, routing.selected, titles, named.titles)
    terms = lexical.terms
    if passage_vector is not None and terms:
        terms = lexical.passage_terms or terms
    nodes = node_level_chunks(
        query=request.text,
        mode=request.mode,
        budget=request.budget,
        selected=routing.selected,
        vector=embedded.query if passage_vector is None else passage_vector,
        ranks=routing.ranks,
        titles=titles,
        terms=NodeTerms(terms, lexical.term_weights, paths.get(LEXICAL)),
        navigate=_navigate_plan(request, documents.select, paths),
        query_settings=request.settings,
        max_chunks=request.top_k,
    )
    if passage_vector is None:
        return nodes
    return _with_passage_query(nodes, named.passage_text)


def _navigate_plan(request: _Query, select: LLMStep | None, paths: Mapping[str, PathReport]) -> NavigatePlan:
    """What LLMselect left LLMnavigate: whether the LLM is down or cooling, and the prompt tokens
    left of the query's allowance once LLMselect's prompt is counted."""
    selected = paths.get(LLM_SELECT)
    spent = int(selected.detail.get("prompt_tokens", 0)) if selected is not None else 0
    return NavigatePlan(
        reported=paths.get(LLM_NAVIGATE),
        llm_down=select.llm_down if select is not None else "",
        cooling_noted=select is not None and select.cooling,
        prompt_cap=request.settings.llm_query_tokens - spent,
    )


def _with_passage_query(nodes: NodeLevel, passage_text: str) -> NodeLevel:
    """Say what ranked the leaves: the query without the titles it names."""
    expansion = nodes.reports.get(TREE_EXPANSION)
    if expansion is None or not expansion.ran:
        return nodes
    detail = {**expansion.detail, "passage_query": passage_text}
    return dataclasses.replace(
        nodes, reports={**nodes.reports, TREE_EXPANSION: dataclasses.replace(expansion, detail=detail)}
    )


def _passage_vector(
    embedded: QueryVectors, selected: Sequence[int], titles: Mapping[int, str], named_titles: Sequence[str]
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
    docs/benchmarks.md's "Ablations" section has them.)
    """
    if embedded.passage is None or not any(titles[pk] in named_titles for pk in selected):
        return None
    # Half of the whole query stays in: questions about the document as a whole ("summarise
    # Acme's year") still lean towards the sections that carry its title.
    mixed = embedded.passage + PASSAGE_QUERY_KEEP * embedded.query
    return mixed / float(np.linalg.norm(mixed))


def _result(
    request: _Query,
    documents: _DocumentLevel,
    found: _Chunks,
    paths: Mapping[str, PathReport],
    notes: tuple[str, ...],
    timings: dict[str, float],
) -> RetrievalResult:
    routing, info = documents.routing, documents.info
    selected = routing.selected
    shown = max(SHORTLIST_SIZE, len(selected))
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
            vector_hits=getattr(documents.vector.scores.get(item.key), "hits", 0),
        )
        for rank, item in enumerate(routing.fused)
        # The shortlist, and every selected document (a named one may rank lower): each chunk's
        # document is in the answer's ``documents``.
        if rank < shown or item.key in selected
    )
    usage = documents.select.usage if documents.select is not None else LLMUsage()
    return RetrievalResult(
        query=request.text,
        token_budget=request.budget,
        mode=request.mode,
        routing="documents" if found.routing == "documents" else "nodes",
        paths=tuple(paths[name] for name in PATH_NAMES if name in paths),
        documents=hits,
        chunks=found.chunks,
        total_tokens=sum(chunk.token_count for chunk in found.chunks),
        timings_ms=timings,
        llm_usage=usage.plus(found.usage),
        corpus_version=request.corpus_version,
        filters=request.scope.filters,
        notes=notes,
        top_k=request.top_k,
        # What citing them needs (file name, tags, metadata), in one read. Cached with the rest:
        # an edit of a document's tags or metadata moves the corpus version, and so the cache key.
        sources=document_sources(selected),
    )
