"""``retrieve()``: the one entry point of the query side (FABLE's online algorithm).

1. Document level. The vector path takes the top-K nodes through HNSW and keeps each document's
   best similarity. LLMselect scores a vector-shortlisted set of documents (at most
   ``SHORTLIST_SIZE``) from their shallow outline. Both are fused on min-max normalised scores.
2. Routing. The *selected* documents are those whose fused score is at least
   ``SELECTION_RATIO`` x the best one (at most ``MAX_SELECTED_DOCUMENTS``, in fused order). If
   they fit the budget together they are returned whole; otherwise the node level runs on them.
3. Node level. LLMnavigate picks subtree roots from their outline; TreeExpansion scores every
   node of them from exact similarities. Fused; LLM-chosen nodes are packed first, then by score,
   without ancestor/descendant overlap; the chosen text comes back in document order.

Modes: "vector" never calls an LLM; "llm" uses the LLM paths alone (vectors only shortlist
documents for LLMselect); "bipath" (the default with an LLM) uses both. An LLM failure never
fails a query: the vector paths carry it and the result says why.
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from django.conf import settings
from django.db.models import F, Func, OuterRef, Q, QuerySet, Subquery

from documents.models import Collection, Document, Node
from documents.selectors import corpus_version
from openfable.embeddings import get_embedder
from openfable.llm import LLMClient, llm_configured
from openfable.tokens import count_tokens, truncate_to_tokens
from retrieval import cache
from retrieval.expansion import ExpansionWeights, NodeScore, tree_expansion
from retrieval.fusion import Fused, fuse
from retrieval.packing import Candidate, pack_exact
from retrieval.paths import llm as llm_paths
from retrieval.paths import vector as vector_paths
from retrieval.result import (
    LLM_NAVIGATE,
    LLM_SELECT,
    MODES,
    PATH_NAMES,
    TREE_EXPANSION,
    VECTOR,
    Chunk,
    ChunkScores,
    DocumentHit,
    LLMUsage,
    PathReport,
    RetrievalInputError,
    RetrievalResult,
)

__all__ = ["RetrievalInputError", "RetrievalResult", "retrieve", "select_documents"]

MAX_QUERY_CHARS = 4000
SHORTLIST_SIZE = 20  # documents LLMselect reads: keeps its prompt bounded as the corpus grows
SELECTION_RATIO = 0.5  # routed documents: fused score >= this share of the best fused score
MAX_SELECTED_DOCUMENTS = 10
# Equal weights: neither path is known to be better; the benchmarks will say otherwise.
DOCUMENT_PATH_WEIGHTS = {VECTOR: 1.0, LLM_SELECT: 1.0}
NODE_PATH_WEIGHTS = {LLM_NAVIGATE: 1.0, TREE_EXPANSION: 1.0}


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
) -> RetrievalResult:
    """The most relevant text for ``query`` within ``token_budget`` tokens, in document order.

    ``collection`` (slug or id), ``documents`` (ids) and ``tags`` (documents carrying all of
    them) restrict the corpus; ``user`` restricts it to the collections that user may read
    (None: no restriction, for trusted callers). Raises ``RetrievalInputError`` for input the
    caller can fix; LLM failures never raise (see the module docstring).
    """
    started = time.perf_counter()
    query = _clean_query(query)
    budget = _check_budget(token_budget)
    mode = _resolve_mode(mode)
    scope = _resolve_scope(collection=collection, documents=documents, tags=tags, user=user)
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
    run = _Run(query=query, budget=budget, mode=mode, scope=scope, uses_llm=uses_llm, started=started)
    result = run.execute(version)
    # A failed LLM call may be transient: do not pin its fallback answer in the cache.
    if use_cache and not any(path.failed for path in result.paths):
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


# -- input ---------------------------------------------------------------------------------------


def _clean_query(query: object) -> str:
    if not isinstance(query, str) or not query.strip():
        raise RetrievalInputError("The query is empty. Type what you are looking for.")
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


def _resolve_mode(mode: str | None) -> str:
    if mode is None or (isinstance(mode, str) and not mode.strip()):
        return "bipath" if llm_configured() else "vector"
    mode = mode.strip().lower() if isinstance(mode, str) else mode
    if mode not in MODES:
        raise RetrievalInputError(f"Unknown mode {mode!r}. Use one of: {', '.join(MODES)}.")
    return mode


@dataclass(frozen=True)
class _Scope:
    document_ids: list[int] | None  # None: the whole corpus
    filters: dict[str, Any]  # normalised, echoed in the result and part of the cache key
    visibility: str  # "all", "public" or "user:<id>"


def _visible_collections(user: Any) -> tuple[QuerySet[Collection] | None, str]:
    """Collections a user may read: shared ones (no owner), their own, those they belong to.
    No user (trusted internal callers) and superusers see everything."""
    if user is None or getattr(user, "is_superuser", False):
        return None, "all"
    if not getattr(user, "is_authenticated", False):
        return Collection.objects.filter(owner__isnull=True), "public"
    readable = Q(owner__isnull=True) | Q(owner=user) | Q(members=user)
    return Collection.objects.filter(readable).distinct(), f"user:{user.pk}"


def _resolve_scope(
    *, collection: str | int | None, documents: Sequence[int] | None, tags: Sequence[str] | None, user: Any
) -> _Scope:
    collections, visibility = _visible_collections(user)
    visible = (
        Document.objects.all() if collections is None else Document.objects.filter(collection__in=collections)
    )
    selected = visible
    filters: dict[str, Any] = {}
    if collection is not None and collection != "":
        found = _find_collection(collection, collections)
        selected = selected.filter(collection=found)
        filters["collection"] = found.slug
    if isinstance(documents, str | int):
        documents = [documents]  # one id given bare
    if isinstance(tags, str):
        tags = [tags]  # one tag given bare, not a sequence of characters
    if documents:
        ids = sorted({_document_id(value) for value in documents})
        existing = set(visible.filter(pk__in=ids).values_list("pk", flat=True))
        missing = [str(pk) for pk in ids if pk not in existing]
        if missing:
            raise RetrievalInputError(
                f"No document with id {', '.join(missing)}. Use the ids of existing documents "
                "(see the document list), or leave the documents filter out."
            )
        selected = selected.filter(pk__in=ids)
        filters["documents"] = ids
    if tags:
        wanted = sorted({str(tag).strip() for tag in tags if str(tag).strip()})
        known = set(
            visible.filter(tags__overlap=wanted)
            .annotate(tag=Func(F("tags"), function="unnest"))
            .values_list("tag", flat=True)
        )
        unknown = [tag for tag in wanted if tag not in known]
        if unknown:
            raise RetrievalInputError(
                f"No document has the tag {', '.join(repr(tag) for tag in unknown)}. "
                "Check the spelling (tags are case-sensitive) or leave the tag filter out."
            )
        if wanted:
            selected = selected.filter(tags__contains=wanted)
            filters["tags"] = wanted
    if not filters and collections is None:
        return _Scope(document_ids=None, filters={}, visibility=visibility)
    ids = list(selected.order_by("pk").values_list("pk", flat=True))
    if not ids and filters:
        described = "; ".join(f"{name}: {value}" for name, value in filters.items())
        raise RetrievalInputError(
            f"No document matches all the filters together ({described}). Loosen one of them."
        )
    return _Scope(document_ids=ids, filters=filters, visibility=visibility)


def _find_collection(value: str | int, readable: QuerySet[Collection] | None) -> Collection:
    pool = Collection.objects.all() if readable is None else readable
    found: Collection | None = None
    if isinstance(value, str):
        found = pool.filter(slug=value.strip()).first()
    if found is None and (pk := _as_id(value)) is not None:
        found = pool.filter(pk=pk).first()
    if found is None:
        raise RetrievalInputError(
            f"There is no collection {value!r}. Use the slug or id of an existing collection "
            "(see the collection list), or leave the collection filter out."
        )
    return found


def _document_id(value: object) -> int:
    number = _as_id(value)
    if number is None:
        raise RetrievalInputError(f"Document ids are positive whole numbers; {value!r} is not one.")
    return number


def _as_id(value: object) -> int | None:
    """A primary key, or None; out-of-range numbers would make PostgreSQL raise, not match."""
    if isinstance(value, str) and value.strip().isdigit():
        value = int(value.strip())
    if isinstance(value, int) and not isinstance(value, bool) and 0 < value < 2**63:
        return value
    return None


# -- the run ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _DocumentInfo:
    title: str
    token_count: int
    root_id: int | None


@dataclass
class _Run:
    query: str
    budget: int
    mode: str
    scope: _Scope
    uses_llm: bool
    started: float
    timings: dict[str, float] = field(default_factory=dict)
    paths: dict[str, PathReport] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    usage: LLMUsage = field(default_factory=LLMUsage)
    llm_down: str = ""  # the LLM service failed: later LLM steps of this query are not tried
    lap: float = 0.0

    def execute(self, version: int) -> RetrievalResult:
        self.lap = self.started
        self._time("validate")
        if self.mode == "vector" or not self.uses_llm:
            # Without an LLM, "vector" is also the default mode: name the cause, not the symptom.
            reason = "vector mode" if llm_configured() else "no LLM configured (set OPENFABLE_LLM_MODEL)"
            for name in (LLM_SELECT, LLM_NAVIGATE):
                self.paths[name] = PathReport(name, ran=False, reason=reason)
            if self.mode == "llm":
                self.notes.append("llm mode without a configured LLM: the vector paths answered instead.")
        vector = get_embedder().embed_query(self.query)
        self._time("embed")
        top_k = settings.RETRIEVAL_TOP_K
        search = vector_paths.nearest_nodes(
            query_vector=vector, top_k=top_k, document_ids=self.scope.document_ids
        )
        vector_scores = vector_paths.document_scores(search.hits)
        detail = {"strategy": search.strategy, "ef_search": search.ef_search, "top_k": top_k}
        self.paths[VECTOR] = PathReport(VECTOR, ran=True, candidates=len(vector_scores), detail=detail)
        self._time("vector")

        info = self._document_info(vector_scores)
        self._time("document_info")
        llm_scores = (
            self._llm_select(vector_scores, info) if self.uses_llm and self.mode != "vector" else None
        )
        doc_paths: dict[str, dict[int, float]] = {}
        if llm_scores is not None:
            doc_paths[LLM_SELECT] = llm_scores
        if self.mode != "llm" or llm_scores is None:
            doc_paths[VECTOR] = {pk: score.score for pk, score in vector_scores.items()}
        else:
            reason = "llm mode: used only to shortlist documents for LLMselect"
            self.paths[VECTOR] = dataclasses.replace(self.paths[VECTOR], reason=reason)
        fused = fuse(doc_paths, {name: DOCUMENT_PATH_WEIGHTS[name] for name in doc_paths})
        fused = [item for item in fused if item.key in info]  # a document deleted meanwhile
        ranks = {item.key: rank for rank, item in enumerate(fused)}
        selected = select_documents(fused)
        self._time("fusion")

        chunks: list[Chunk] = []
        routing = "nodes"
        if not selected and LLM_SELECT in doc_paths and VECTOR not in doc_paths:
            self.notes.append("llm mode: LLMselect chose no document, so nothing was returned.")
        elif not selected:
            self.notes.append("No document matched: the scope holds no indexed text, or no path found any.")
        elif sum(info[pk].token_count for pk in selected) <= self.budget:
            chunks = self._whole_documents(selected, fused, ranks, info)
            routing = "documents" if chunks else "nodes"
        if routing == "nodes" and selected:
            chunks = self._node_level(selected, vector, ranks, info)
        else:
            why = (
                "not needed: the selected documents fit the budget whole" if selected else "no document found"
            )
            for name in (LLM_NAVIGATE, TREE_EXPANSION):
                self.paths.setdefault(name, PathReport(name, ran=False, reason=why))
        self.lap = self.started
        self._time("total")

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

    def _document_info(self, vector_scores: Mapping[int, object]) -> dict[int, _DocumentInfo]:
        """Titles, sizes and roots of the vector path's documents, plus (when LLMselect can read
        the whole scope) every other indexed document in scope. Two queries at most."""
        root = Node.objects.filter(document=OuterRef("pk"), kind=Node.Kind.ROOT).values("pk")[:1]
        rows = Document.objects.annotate(root_id=Subquery(root)).values_list(
            "pk", "title", "token_count", "root_id"
        )
        info = {row[0]: _DocumentInfo(*row[1:]) for row in rows.filter(pk__in=list(vector_scores))}
        if self.uses_llm and self.mode != "vector":
            in_scope = rows.filter(root_id__isnull=False)
            if self.scope.document_ids is not None:
                in_scope = in_scope.filter(pk__in=self.scope.document_ids)
            others = list(in_scope.order_by("pk")[: SHORTLIST_SIZE + 1])
            if len(others) <= SHORTLIST_SIZE:
                for row in others:
                    info.setdefault(row[0], _DocumentInfo(*row[1:]))
        return info

    def _llm_select(
        self, vector_scores: Mapping[int, vector_paths.DocumentVectorScore], info: Mapping[int, _DocumentInfo]
    ) -> dict[int, float] | None:
        ranked = sorted(vector_scores.values(), key=lambda score: (-score.score, score.document_id))
        shortlist = [score.document_id for score in ranked[:SHORTLIST_SIZE]]
        shortlist += sorted(pk for pk in info if pk not in vector_scores)[: SHORTLIST_SIZE - len(shortlist)]
        outcome, outline = llm_paths.llm_select(
            LLMClient.from_settings(),  # built per query: settings (and tests' overrides) read now
            query=self.query,
            documents=[(pk, info[pk].title) for pk in shortlist],
            max_depth=settings.RETRIEVAL_LLMSELECT_DEPTH,
            max_tokens=settings.RETRIEVAL_LLM_PROMPT_TOKENS,
        )
        self._time("llm_select")
        scores = self._record_llm(LLM_SELECT, outcome, outline)
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
        contents = dict(Document.objects.filter(pk__in=selected).values_list("pk", "content"))
        by_key = {item.key: item for item in fused}
        chunks = []
        for pk in sorted(selected, key=ranks.__getitem__):
            item, text = by_key[pk], contents[pk]
            chunks.append(
                Chunk.whole_document(
                    document_id=pk,
                    title=info[pk].title,
                    rank=ranks[pk],
                    root_id=info[pk].root_id,
                    text=text,
                    token_count=count_tokens(text),
                    scores=ChunkScores(
                        item.score, similarity=item.raw.get(VECTOR), llm=item.raw.get(LLM_SELECT)
                    ),
                    found_by=item.paths,
                )
            )
        self._time("documents")
        # Document.token_count was written at upload; the budget is enforced on the text itself.
        if sum(chunk.token_count for chunk in chunks) > self.budget:
            self.notes.append("Stored document sizes were stale: the node level ran instead.")
            return []
        return chunks

    def _node_level(
        self, selected: list[int], vector: np.ndarray, ranks: dict[int, int], info: dict[int, _DocumentInfo]
    ) -> list[Chunk]:
        rows = {
            row.id: row
            for row in vector_paths.nodes_with_similarity(document_ids=selected, query_vector=vector)
        }
        contents = dict(Document.objects.filter(pk__in=selected).values_list("pk", "content"))
        nodes = {node_id: row.outline_node() for node_id, row in rows.items()}
        self._time("fetch_nodes")

        node_paths: dict[str, dict[int, float]] = {}
        if LLM_NAVIGATE not in self.paths and not self.llm_down:
            outcome, outline = llm_paths.llm_navigate(
                LLMClient.from_settings(),
                query=self.query,
                documents=[(pk, info[pk].title) for pk in selected],
                rows=list(rows.values()),
                contents=contents,
                max_tokens=settings.RETRIEVAL_LLM_PROMPT_TOKENS,
                token_budget=self.budget,
            )
            self._time("llm_navigate")
            if (navigate := self._record_llm(LLM_NAVIGATE, outcome, outline)) is not None:
                node_paths[LLM_NAVIGATE] = navigate
        elif self.llm_down:
            reason = f"not tried: the LLM failed earlier in this query ({self.llm_down})"
            self.paths[LLM_NAVIGATE] = PathReport(LLM_NAVIGATE, ran=False, reason=reason)
        expansion: dict[int, NodeScore] = {}
        if self.mode == "llm" and LLM_NAVIGATE in node_paths:
            reason = "llm mode: the LLM paths alone"
            self.paths[TREE_EXPANSION] = PathReport(TREE_EXPANSION, ran=False, reason=reason)
        else:
            weights = ExpansionWeights(
                settings.RETRIEVAL_ALPHA,
                settings.RETRIEVAL_BETA,
                settings.RETRIEVAL_GAMMA,
                settings.RETRIEVAL_DECAY,
            )
            expansion = tree_expansion(nodes.values(), weights=weights)
            node_paths[TREE_EXPANSION] = {node_id: score.total for node_id, score in expansion.items()}
            self.paths[TREE_EXPANSION] = PathReport(TREE_EXPANSION, ran=True, candidates=len(expansion))
            self._time("tree_expansion")

        node_fused = fuse(node_paths, {name: NODE_PATH_WEIGHTS[name] for name in node_paths})
        candidates = [
            Candidate(
                node=nodes[item.key],
                score=item.score,
                token_count=_estimated_tokens(rows[item.key]),
                from_llm=LLM_NAVIGATE in item.paths,
                path_scores=dict(item.raw),
            )
            for item in node_fused
        ]
        packed, texts = pack_exact(
            candidates,
            budget=self.budget,
            text_of=lambda node_id: contents[rows[node_id].document_id][
                rows[node_id].start_char : rows[node_id].end_char
            ],
            count=count_tokens,
            cut=truncate_to_tokens,
            document_rank=ranks,
        )
        self._time("packing")
        if packed.truncated:
            self.notes.append("Nothing fitted the budget whole: the best passage was cut to fit.")
        found_by = {item.key: item.paths for item in node_fused}
        return [
            _node_chunk(c, rows[c.node.id], texts[c.node.id], expansion, info, ranks, found_by)
            for c in packed.chosen
        ]

    def _record_llm(
        self, name: str, outcome: llm_paths.LLMPathOutcome, outline: llm_paths.Outline
    ) -> dict[int, float] | None:
        self.usage = self.usage.plus(outcome.usage)
        detail = {"outline_tokens": outline.tokens, "outline_omitted": outline.omitted}
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

    def _time(self, stage: str) -> None:
        now = time.perf_counter()
        self.timings[stage] = round((now - self.lap) * 1000, 2)
        self.lap = now


def _estimated_tokens(row: vector_paths.NodeRow) -> int:
    # A missing count (0) must not make a node look free: ~4 characters per token until counted.
    return row.token_count or math.ceil((row.end_char - row.start_char) / 4)


def _node_chunk(
    candidate: Candidate,
    row: vector_paths.NodeRow,
    text: str,
    expansion: Mapping[int, NodeScore],
    info: Mapping[int, _DocumentInfo],
    ranks: Mapping[int, int],
    found_by: Mapping[int, tuple[str, ...]],
) -> Chunk:
    score = expansion.get(row.id)
    return Chunk(
        node_id=row.id,
        document_id=row.document_id,
        document_title=info[row.document_id].title,
        document_rank=ranks[row.document_id],
        toc_path=row.toc_path or row.title,
        kind=row.kind,
        start_char=row.start_char,
        end_char=row.start_char + len(text),
        token_count=candidate.token_count,
        text=text,
        scores=ChunkScores(
            fused=candidate.score,
            similarity=row.similarity,
            inherited=score.inherited if score else None,
            child=score.child if score else None,
            tree_expansion=score.total if score else None,
            llm=candidate.path_scores.get(LLM_NAVIGATE),
        ),
        found_by=found_by[row.id],
        truncated=candidate.truncated,
    )
