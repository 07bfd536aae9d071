"""The node level of ``retrieve()``: which passages of the selected documents fill the budget.

LLMnavigate picks subtree roots from the documents' outline; TreeExpansion scores every node from
exact similarities, each node's similarity sharpened by its BM25 among the selected documents'
nodes (``hybrid_similarity``). The two are fused, LLMnavigate weighed by its agreement with TreeExpansion
(``_llm_trust``: only its picks TreeExpansion ranks high too count); packed by fused score
("llm" mode: the LLM's picks first), without ancestor/descendant overlap, and the chosen text
comes back in document order. Nodes excluded
from retrieval never arrive here, and a section holding excluded text is never packed whole
(``partly_excluded``): its included children are.
"""

from __future__ import annotations

import dataclasses
import math
from collections import defaultdict
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from documents.ingestion.tree import LEAF
from documents.models import page_finder
from documents.selectors import document_texts
from openfable.llm import Fallback, LLMClient, LLMUsage, count_fallback
from openfable.token_counting import count_tokens, truncate_to_tokens
from retrieval.expansion import ExpansionWeights, NodeScore, tree_expansion
from retrieval.fusion import Fused, agreement, fuse
from retrieval.llm_steps import LLMStep, cooldown_step, outcome_step
from retrieval.outline import OutlineNode
from retrieval.packing import Candidate, PackResult, pack_exact
from retrieval.paths import lexical as lexical_paths
from retrieval.paths import llm as llm_paths
from retrieval.paths import vector as vector_paths
from retrieval.query_settings import QuerySettings
from retrieval.result import (
    LEXICAL,
    LLM_NAVIGATE,
    TREE_EXPANSION,
    Chunk,
    ChunkScores,
    PathReport,
)
from retrieval.timings import Laps

NODE_PATH_WEIGHTS = {LLM_NAVIGATE: 1.0, TREE_EXPANSION: 1.0}
# LLMnavigate's picks are trusted as far as TreeExpansion ranks them this high (``_llm_trust``).
AGREEMENT_TOP_NODES = 20


@dataclass(frozen=True)
class NavigatePlan:
    """What decides whether LLMnavigate runs: ``reported``, its report when it was already
    reported as not to run (vector mode, no LLM); ``llm_down``, the LLM service failed earlier in this query;
    ``cooling_noted``, a cool-down was noted already; ``prompt_cap``, the prompt tokens left to it
    once LLMselect's are counted (sent or answered from the cache alike, so the same query always
    gets the same outline)."""

    reported: PathReport | None
    llm_down: str
    cooling_noted: bool
    prompt_cap: int


@dataclass(frozen=True)
class NodeTerms:
    """The lexical path's part at the node level: the query's search terms (none: it does not
    run), their weights (``lexical.name_weights``, the source clause's words) and the lexical path's
    report, which learns how many nodes matched."""

    terms: tuple[str, ...]
    weights: Mapping[str, float]
    report: PathReport | None


@dataclass(frozen=True)
class NodeLevel:
    """What the node level returned: the chunks in document order, the reports of the paths it
    ran (or updated), its notes, the LLM usage it spent and its stage timings."""

    chunks: tuple[Chunk, ...]
    reports: Mapping[str, PathReport]
    notes: tuple[str, ...]
    usage: LLMUsage
    timings: Mapping[str, float]


@dataclass(frozen=True)
class _Nodes:
    """The selected documents' included nodes with their similarity, texts and page maps."""

    rows: Mapping[int, vector_paths.ScoredNodeRow]
    outline: Mapping[int, OutlineNode]
    contents: Mapping[int, str]
    pages: Mapping[int, Callable[[int, int], list[int]]]

    def text(self, node_id: int) -> str:
        row = self.rows[node_id]
        return self.contents[row.document_id][row.start_char : row.end_char]


@dataclass(frozen=True)
class _Expansion:
    scores: Mapping[int, NodeScore]  # TreeExpansion's, by node
    lexical: Mapping[int, float]  # node-level BM25, by node (empty: it did not run)
    reports: Mapping[str, PathReport]


def node_level_chunks(
    *,
    query: str,
    mode: str,
    budget: int,
    selected: Sequence[int],
    vector: np.ndarray,
    ranks: Mapping[int, int],
    titles: Mapping[int, str],
    terms: NodeTerms,
    navigate: NavigatePlan,
    query_settings: QuerySettings,
    max_chunks: int | None = None,
) -> NodeLevel:
    """The chosen passages of the ``selected`` documents within ``budget`` tokens, in document
    order: LLMnavigate (unless the LLM is down) and TreeExpansion fused, then packed exactly.

    ``vector`` ranks the nodes; ``ranks`` are the documents' fused ranks, ``titles`` their titles.
    ``max_chunks``: the query's ``top_k``, the most passages packed (None: as many as fit).
    """
    laps = Laps()
    nodes = _fetch_nodes(selected, vector)
    laps.end("fetch_nodes")
    step = _llm_navigate(query, budget, selected, titles, nodes, navigate, query_settings)
    if step.report.ran:
        laps.end("llm_navigate")
    if _llm_alone(mode, step):
        reason = "llm mode: the LLM paths alone"
        expansion = _Expansion({}, {}, {TREE_EXPANSION: PathReport(TREE_EXPANSION, ran=False, reason=reason)})
    else:
        expansion = _tree_expansion(nodes, selected, terms, query_settings, laps)
    node_paths = _node_paths(step, expansion)
    node_paths, weights, trusted = _llm_trust(node_paths, offered=step.offered)
    node_fused = fuse(node_paths, weights)
    packed, texts = _pack(
        node_fused, nodes, budget=budget, ranks=ranks, trusted=trusted, max_chunks=max_chunks
    )
    laps.end("packing")
    cut = ("Nothing fitted the budget whole: the best passage was cut to fit.",) if packed.truncated else ()
    found_by = {item.key: item.paths for item in node_fused}
    chunks = tuple(
        _node_chunk(
            c, nodes.rows[c.node.id], texts[c.node.id], expansion, titles, ranks, found_by, nodes.pages
        )
        for c in packed.chosen
    )
    return NodeLevel(
        chunks=chunks,
        reports={LLM_NAVIGATE: step.report, **expansion.reports},
        notes=step.notes + cut,
        usage=step.usage,
        timings=laps.timings,
    )


def _llm_alone(mode: str, step: LLMStep) -> bool:
    """Whether LLMnavigate's picks stand alone ("llm" mode); not when it picked nothing it was
    shown (a small model's invented ids): TreeExpansion chooses then, as when the call fails."""
    if mode != "llm" or step.scores is None:
        return False
    if not step.scores:
        count_fallback(Fallback.NO_PICKS)
    return bool(step.scores)


def _node_paths(step: LLMStep, expansion: _Expansion) -> dict[str, Mapping[int, float]]:
    """The node-level paths that scored nodes: LLMnavigate when it answered, TreeExpansion when it ran."""
    paths: dict[str, Mapping[int, float]] = {}
    if step.scores is not None:
        paths[LLM_NAVIGATE] = step.scores
    if expansion.reports[TREE_EXPANSION].ran:
        paths[TREE_EXPANSION] = {node_id: score.total for node_id, score in expansion.scores.items()}
    return paths


def _llm_trust(
    paths: Mapping[str, Mapping[int, float]], *, offered: Collection[int]
) -> tuple[dict[str, Mapping[int, float]], dict[str, float], frozenset[int]]:
    """The node paths to fuse, their weights, and the LLM's picks packed first.

    Beside TreeExpansion, LLMnavigate keeps only its picks that TreeExpansion ranks in its top
    ``AGREEMENT_TOP_NODES`` of the ``offered`` nodes its outline showed, weighed by how far its
    picks agree beyond chance (``fusion.agreement``); they lead through the fused score, not by
    jumping the packing order. Packed first, a pick TreeExpansion ranked 15th (a section of 400
    tokens) took a 500-token budget from its first passages (DragonBall, docs/benchmarks.md); a
    strong model's agreed picks still lead, by the weight its agreement earns. Alone ("llm"
    mode), its picks are all it has, and are packed first.
    """
    weights = {name: NODE_PATH_WEIGHTS[name] for name in paths}
    llm = paths.get(LLM_NAVIGATE, {})
    if TREE_EXPANSION not in paths:
        return dict(paths), weights, frozenset(llm)
    if LLM_NAVIGATE not in paths:
        return dict(paths), weights, frozenset()
    agreed = agreement(llm, paths[TREE_EXPANSION], top=AGREEMENT_TOP_NODES, offered=offered)
    weights[LLM_NAVIGATE] *= agreed.weight
    return {**paths, LLM_NAVIGATE: agreed.trusted(llm)}, weights, frozenset()


def _fetch_nodes(selected: Sequence[int], vector: np.ndarray) -> _Nodes:
    rows = {
        row.id: row
        for row in vector_paths.nodes_with_similarity(document_ids=list(selected), query_vector=vector)
    }
    # The texts and page maps in one read: each chunk's pages come with it, no query per chunk.
    loaded = document_texts(selected)
    return _Nodes(
        rows=rows,
        outline={node_id: row.outline_node() for node_id, row in rows.items()},
        contents={pk: content for pk, (content, _) in loaded.items()},
        pages={pk: page_finder(page_spans) for pk, (_, page_spans) in loaded.items()},
    )


def _llm_navigate(
    query: str,
    budget: int,
    selected: Sequence[int],
    titles: Mapping[int, str],
    nodes: _Nodes,
    plan: NavigatePlan,
    query_settings: QuerySettings,
) -> LLMStep:
    """LLMnavigate's step (its report as given when it was reported already: vector mode, no LLM)."""
    if plan.llm_down:
        reason = f"not tried: the LLM failed earlier in this query ({plan.llm_down})"
        return LLMStep(report=PathReport(LLM_NAVIGATE, ran=False, reason=reason))
    if plan.reported is not None:
        return LLMStep(report=plan.reported)
    client = LLMClient.from_settings(respect_cooldown=True)
    if (cooling := cooldown_step(LLM_NAVIGATE, client, noted=plan.cooling_noted)) is not None:
        return cooling
    outcome, outline = llm_paths.llm_navigate(
        client,
        query=query,
        documents=[(pk, titles[pk]) for pk in selected],
        rows=list(nodes.rows.values()),
        contents=nodes.contents,
        max_tokens=query_settings.llm_prompt_tokens,
        max_prompt_tokens=plan.prompt_cap,
        token_budget=budget,
    )
    return outcome_step(LLM_NAVIGATE, outcome, outline)


def _tree_expansion(
    nodes: _Nodes, selected: Sequence[int], terms: NodeTerms, query_settings: QuerySettings, laps: Laps
) -> _Expansion:
    """TreeExpansion over every node, each node's similarity sharpened by its BM25 among the
    selected documents' nodes (when the lexical path has a share and the query has terms)."""
    share = query_settings.lexical_node_share
    lexical: dict[int, float] = {}
    reports: dict[str, PathReport] = {}
    if share > 0 and terms.terms and terms.report is not None:
        lexical = lexical_paths.node_scores(
            list(terms.terms), document_ids=list(selected), term_weights=dict(terms.weights)
        ).scores
        detail = {**terms.report.detail, "nodes_matched": len(lexical)}
        reports[LEXICAL] = dataclasses.replace(terms.report, detail=detail)
        laps.end("lexical_nodes")
    similarity = hybrid_similarity(
        {node_id: node.similarity for node_id, node in nodes.outline.items()}, lexical, share=share
    )
    weights = ExpansionWeights(
        query_settings.alpha, query_settings.beta, query_settings.gamma, query_settings.decay
    )
    expansion = tree_expansion(
        # Built from the rows, not copied with dataclasses.replace: a third of the time, per node.
        (row.outline_node(similarity[node_id]) for node_id, row in nodes.rows.items()),
        weights=weights,
    )
    reports[TREE_EXPANSION] = PathReport(TREE_EXPANSION, ran=True, candidates=len(expansion))
    laps.end("tree_expansion")
    return _Expansion(expansion, lexical, reports)


def _pack(
    node_fused: Sequence[Fused[int]],
    nodes: _Nodes,
    *,
    budget: int,
    ranks: Mapping[int, int],
    trusted: frozenset[int],
    max_chunks: int | None = None,
) -> tuple[PackResult, dict[int, str]]:
    """The LLM's ``trusted`` picks first, then by fused score, without overlap, counted exactly."""
    partial = partly_excluded(nodes.rows.values())
    candidates = [
        Candidate(
            node=nodes.outline[item.key],
            score=item.score,
            token_count=_estimated_tokens(nodes.rows[item.key]),
            from_llm=item.key in trusted,
            path_scores=dict(item.raw),
        )
        for item in node_fused
        if item.key not in partial  # its whole text would carry excluded text; its children still count
    ]
    return pack_exact(
        candidates,
        budget=budget,
        text_of=nodes.text,
        count=count_tokens,
        cut=truncate_to_tokens,
        document_rank=ranks,
        max_chunks=max_chunks,
    )


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
    expansion: _Expansion,
    titles: Mapping[int, str],
    ranks: Mapping[int, int],
    found_by: Mapping[int, tuple[str, ...]],
    pages: Mapping[int, Callable[[int, int], list[int]]],
) -> Chunk:
    score = expansion.scores.get(row.id)
    lexical = expansion.lexical
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
