"""The node level of ``retrieve()``: which passages of the selected documents fill the budget.

LLMnavigate picks subtree roots from the documents' outline; TreeExpansion scores every node from
exact similarities, each node's similarity sharpened by its BM25 among the selected documents'
nodes (``hybrid_similarity``). The two are fused; LLM-chosen nodes are packed first, then by score, without
ancestor/descendant overlap, and the chosen text comes back in document order. Nodes excluded
from retrieval never arrive here, and a section holding excluded text is never packed whole
(``partly_excluded``): its included children are.
"""

from __future__ import annotations

import dataclasses
import math
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping
from typing import Protocol

import numpy as np
from django.conf import settings

from documents.ingestion.tree import LEAF
from documents.models import Document, page_finder
from openfable.llm import LLMClient
from openfable.tokens import count_tokens, truncate_to_tokens
from retrieval.expansion import ExpansionWeights, NodeScore, tree_expansion
from retrieval.fusion import fuse
from retrieval.packing import Candidate, pack_exact
from retrieval.paths import lexical as lexical_paths
from retrieval.paths import llm as llm_paths
from retrieval.paths import vector as vector_paths
from retrieval.result import (
    LEXICAL,
    LLM_NAVIGATE,
    LLM_SELECT,
    TREE_EXPANSION,
    Chunk,
    ChunkScores,
    PathReport,
)

NODE_PATH_WEIGHTS = {LLM_NAVIGATE: 1.0, TREE_EXPANSION: 1.0}


class NodeLevelRun(Protocol):
    """What the node level reads from a query's run, and the reports it writes back into it."""

    query: str
    budget: int
    mode: str
    paths: dict[str, PathReport]
    notes: list[str]
    llm_down: str
    terms: list[str]
    term_weights: dict[str, float]

    def end_stage(self, stage: str) -> None: ...

    def llm_cooling_down(self, name: str, client: LLMClient) -> bool: ...

    def record_llm(
        self, name: str, outcome: llm_paths.LLMPathOutcome, outline: llm_paths.Outline
    ) -> dict[int, float] | None: ...


def node_level_chunks(
    run: NodeLevelRun,
    *,
    selected: list[int],
    vector: np.ndarray,
    ranks: dict[int, int],
    titles: Mapping[int, str],
) -> list[Chunk]:
    """The chosen passages of the ``selected`` documents within ``run.budget``, in document
    order: LLMnavigate (unless the LLM is down) and TreeExpansion fused, then packed exactly.

    ``ranks`` are the documents' fused ranks, ``titles`` their titles; path reports, notes and
    stage timings go to ``run``.
    """
    rows = {
        row.id: row for row in vector_paths.nodes_with_similarity(document_ids=selected, query_vector=vector)
    }
    # The texts and page maps in one read: each chunk's pages come with it, no query per chunk.
    loaded = list(Document.objects.filter(pk__in=selected).values_list("pk", "content", "page_spans"))
    contents = {pk: content for pk, content, _ in loaded}
    pages = {pk: page_finder(page_spans) for pk, _, page_spans in loaded}
    run.end_stage("fetch_nodes")
    nodes = {node_id: row.outline_node() for node_id, row in rows.items()}

    node_paths: dict[str, dict[int, float]] = {}
    client = (
        LLMClient.from_settings(respect_cooldown=True)
        if LLM_NAVIGATE not in run.paths and not run.llm_down
        else None
    )
    if client is not None and not run.llm_cooling_down(LLM_NAVIGATE, client):
        outcome, outline = llm_paths.llm_navigate(
            client,
            query=run.query,
            documents=[(pk, titles[pk]) for pk in selected],
            rows=list(rows.values()),
            contents=contents,
            max_tokens=settings.RETRIEVAL_LLM_PROMPT_TOKENS,
            max_prompt_tokens=_navigate_prompt_cap(run),
            token_budget=run.budget,
        )
        run.end_stage("llm_navigate")
        if (navigate := run.record_llm(LLM_NAVIGATE, outcome, outline)) is not None:
            node_paths[LLM_NAVIGATE] = navigate
    elif run.llm_down:
        reason = f"not tried: the LLM failed earlier in this query ({run.llm_down})"
        run.paths[LLM_NAVIGATE] = PathReport(LLM_NAVIGATE, ran=False, reason=reason)
    expansion: dict[int, NodeScore] = {}
    lexical: dict[int, float] = {}
    if run.mode == "llm" and LLM_NAVIGATE in node_paths:
        reason = "llm mode: the LLM paths alone"
        run.paths[TREE_EXPANSION] = PathReport(TREE_EXPANSION, ran=False, reason=reason)
    else:
        weights = ExpansionWeights(
            settings.RETRIEVAL_ALPHA,
            settings.RETRIEVAL_BETA,
            settings.RETRIEVAL_GAMMA,
            settings.RETRIEVAL_DECAY,
        )
        share = settings.RETRIEVAL_LEXICAL_NODE_SHARE
        if share > 0 and run.terms:
            lexical = lexical_paths.node_scores(
                run.terms, document_ids=selected, term_weights=run.term_weights
            ).scores
            report = run.paths[LEXICAL]
            detail = {**report.detail, "nodes_matched": len(lexical)}
            run.paths[LEXICAL] = dataclasses.replace(report, detail=detail)
            run.end_stage("lexical_nodes")
        similarity = hybrid_similarity(
            {node_id: node.similarity for node_id, node in nodes.items()}, lexical, share=share
        )
        expansion = tree_expansion(
            (dataclasses.replace(node, similarity=similarity[node_id]) for node_id, node in nodes.items()),
            weights=weights,
        )
        node_paths[TREE_EXPANSION] = {node_id: score.total for node_id, score in expansion.items()}
        run.paths[TREE_EXPANSION] = PathReport(TREE_EXPANSION, ran=True, candidates=len(expansion))
        run.end_stage("tree_expansion")

    node_fused = fuse(node_paths, {name: NODE_PATH_WEIGHTS[name] for name in node_paths})
    partial = partly_excluded(rows.values())
    candidates = [
        Candidate(
            node=nodes[item.key],
            score=item.score,
            token_count=_estimated_tokens(rows[item.key]),
            from_llm=LLM_NAVIGATE in item.paths,
            path_scores=dict(item.raw),
        )
        for item in node_fused
        if item.key not in partial  # its whole text would carry excluded text; its children still count
    ]
    packed, texts = pack_exact(
        candidates,
        budget=run.budget,
        text_of=lambda node_id: contents[rows[node_id].document_id][
            rows[node_id].start_char : rows[node_id].end_char
        ],
        count=count_tokens,
        cut=truncate_to_tokens,
        document_rank=ranks,
    )
    run.end_stage("packing")
    if packed.truncated:
        run.notes.append("Nothing fitted the budget whole: the best passage was cut to fit.")
    found_by = {item.key: item.paths for item in node_fused}
    return [
        _node_chunk(c, rows[c.node.id], texts[c.node.id], expansion, lexical, titles, ranks, found_by, pages)
        for c in packed.chosen
    ]


def _navigate_prompt_cap(run: NodeLevelRun) -> int:
    """What is left of the query's prompt allowance once LLMselect's prompt is counted (sent or
    answered from the cache alike, so the same query always gets the same outline)."""
    select = run.paths.get(LLM_SELECT)
    spent = int((select.detail or {}).get("prompt_tokens", 0)) if select is not None else 0
    return settings.RETRIEVAL_LLM_QUERY_TOKENS - spent


def hybrid_similarity(
    cosine: Mapping[int, float], lexical: Mapping[int, float], *, share: float
) -> dict[int, float]:
    """The similarity TreeExpansion propagates: ``(1 - share) * cosine + share * BM25 / max BM25``.

    A small model's cosines sit in a narrow band, and a passage that repeats the query's names
    outscores the one that answers it; the lexical share lifts the nodes holding the query's
    rarer words (a node without any keeps ``(1 - share) * cosine``). With no lexical scores
    (share 0, or no query term found) the cosine is used as is.
    """
    best = max(lexical.values(), default=0.0)
    if share <= 0 or best <= 0:
        return dict(cosine)
    return {
        node_id: (1 - share) * value + share * lexical.get(node_id, 0.0) / best
        for node_id, value in cosine.items()
    }


def partly_excluded(rows: Iterable[vector_paths.ScoredNodeRow]) -> set[int]:
    """Internal nodes holding text excluded from retrieval, which must never be returned whole.

    ``rows`` are a tree's included nodes (excluded ones never reach the query side), in pre-order:
    a node whose included children do not cover its span lost text to an exclusion, and so did
    every ancestor of such a node.
    """
    ordered = list(rows)
    covered: dict[int, int] = defaultdict(int)
    for row in ordered:
        if row.parent_id is not None:
            covered[row.parent_id] += row.end_char - row.start_char
    partial = {
        row.id for row in ordered if row.kind != LEAF and covered[row.id] < row.end_char - row.start_char
    }
    for row in reversed(ordered):  # descendants come before their ancestors
        if row.id in partial and row.parent_id is not None:
            partial.add(row.parent_id)
    return partial


def _estimated_tokens(row: vector_paths.ScoredNodeRow) -> int:
    # A missing count (0) must not make a node look free: ~4 characters per token until counted.
    return row.token_count or math.ceil((row.end_char - row.start_char) / 4)


def _node_chunk(
    candidate: Candidate,
    row: vector_paths.ScoredNodeRow,
    text: str,
    expansion: Mapping[int, NodeScore],
    lexical: Mapping[int, float],
    titles: Mapping[int, str],
    ranks: Mapping[int, int],
    found_by: Mapping[int, tuple[str, ...]],
    pages: Mapping[int, Callable[[int, int], list[int]]],
) -> Chunk:
    score = expansion.get(row.id)
    return Chunk(
        node_id=row.id,
        document_id=row.document_id,
        document_title=titles[row.document_id],
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
            lexical=lexical.get(row.id, 0.0) if lexical else None,
            inherited=score.inherited if score else None,
            child=score.child if score else None,
            tree_expansion=score.total if score else None,
            llm=candidate.path_scores.get(LLM_NAVIGATE),
        ),
        found_by=found_by[row.id],
        truncated=candidate.truncated,
        pages=tuple(pages[row.document_id](row.start_char, row.start_char + len(text))),
    )
