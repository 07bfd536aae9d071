"""TreeExpansion: score every node of the selected documents using the tree around it.

Input: *all* nodes of the selected documents, each with the query's cosine similarity. Not
only what an approximate vector index returned: HNSW's ef_search caps its results, and a
node missing from the input could neither be scored nor pass relevance up or down. A node
whose parent is not in the input is an error, not something to skip quietly.

Definitions (d(v) is the depth of v, root = 0; δ is ``ExpansionWeights.decay``):

    s(v)         = min(1, max(0, sim(v)))
                   the cosine, clipped: a negative cosine carries no relevance.

    S_sim(v)     = s(v)
                   no decay on a node's own similarity: a strong leaf deep in the tree must
                   not lose to weak shallow nodes just for being deep. The depth decay acts
                   on relevance that travels along the tree (the next two terms), one factor
                   δ per level travelled.

    S_inh(v)     = max over proper ancestors a of v of  s(a) · δ^(d(v) - d(a))
    S_inh(root)  = δ · s(root)
                   relevance inherited from the context above; the nearest relevant
                   ancestor counts most. The root has no context and is treated as its own
                   parent, so it is neither favoured over nor penalised against its children.
                   Computed top-down: S_inh(v) = δ · max(s(p), S_inh(p)), p = parent(v).

    S_child(leaf) = s(leaf)
                   a leaf's support is its own text, so leaves are not penalised for having
                   no children (the same holds for any node given without children).
    S_child(v)   = Σ_c w(c) · R(c) / Σ_c w(c)     over the children c of an internal v,
        R(c)     = max(s(c), δ · S_child(c))       (for a leaf child, R(c) = s(c)),
        w(c)     = max(1, token_count(c))
                   the token-weighted mean support of the children: the share of v's text
                   that is relevant. A section whose children are all relevant outranks one
                   with a single relevant child, which is what packing an internal node
                   whole needs. Support from grandchildren is discounted by δ per level.
                   Computed bottom-up.

    S(v)         = α · S_sim(v) + β · S_inh(v) + γ · S_child(v)

Defaults α = β = γ = 1/3 and δ = 0.8 (``ExpansionWeights``). With the defaults and s in
[0, 1], S(v) is in [0, 1]. Everything is one top-down and one bottom-up pass: O(n).
"""  # noqa: RUF002 -- the Greek letters are the paper's notation, kept for docs/how-it-works.md

from __future__ import annotations

import math
from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from retrieval.outline import OutlineNode


@dataclass(frozen=True, slots=True)
class ExpansionWeights:
    """α, β, γ weigh similarity, inherited and child support; ``decay`` is δ per tree level."""  # noqa: RUF002

    alpha: float = 1 / 3
    beta: float = 1 / 3
    gamma: float = 1 / 3
    decay: float = 0.8

    def __post_init__(self) -> None:
        for name in ("alpha", "beta", "gamma"):
            value = getattr(self, name)
            if not math.isfinite(value) or value < 0:
                raise ValueError(f"expansion weight {name} must be a finite number >= 0, got {value}")
        if self.alpha + self.beta + self.gamma == 0:
            raise ValueError("at least one of the expansion weights alpha, beta, gamma must be positive")
        if not 0 <= self.decay <= 1:
            raise ValueError(f"expansion decay must be in [0, 1], got {self.decay}")


DEFAULT_WEIGHTS = ExpansionWeights()


@dataclass(frozen=True, slots=True)
class NodeScore:
    similarity: float  # S_sim
    inherited: float  # S_inh
    child: float  # S_child
    total: float  # S


def tree_expansion(
    nodes: Iterable[OutlineNode], *, weights: ExpansionWeights = DEFAULT_WEIGHTS
) -> dict[int, NodeScore]:
    """Score every node; returns ``{node id: NodeScore}``. See the module docstring."""
    by_id = _index(nodes)
    children = _children(by_id)
    top_down = _top_down_order(by_id, children)
    clipped = {node_id: _clip(node.similarity) for node_id, node in by_id.items()}
    inherited = _inherited(by_id, top_down, clipped, weights.decay)
    support = _child_support(by_id, children, top_down, clipped, weights.decay)
    return {
        node_id: NodeScore(
            similarity=clipped[node_id],
            inherited=inherited[node_id],
            child=support[node_id],
            total=weights.alpha * clipped[node_id]
            + weights.beta * inherited[node_id]
            + weights.gamma * support[node_id],
        )
        for node_id in by_id
    }


def _clip(similarity: float) -> float:
    if math.isnan(similarity):
        return 0.0
    return min(1.0, max(0.0, similarity))


def _index(nodes: Iterable[OutlineNode]) -> dict[int, OutlineNode]:
    by_id: dict[int, OutlineNode] = {}
    for node in nodes:
        if node.id in by_id:
            raise ValueError(f"node {node.id} is given twice")
        by_id[node.id] = node
    return by_id


def _children(by_id: Mapping[int, OutlineNode]) -> dict[int, list[int]]:
    children: dict[int, list[int]] = {node_id: [] for node_id in by_id}
    for node in by_id.values():
        if node.parent_id is None:
            continue
        if node.parent_id not in by_id:
            # Scoring a partial tree silently is the pitfall this module exists to avoid.
            raise ValueError(
                f"node {node.id} has parent {node.parent_id}, which is not among the nodes given: "
                "pass every node of the selected documents"
            )
        children[node.parent_id].append(node.id)
    return children


def _top_down_order(by_id: Mapping[int, OutlineNode], children: Mapping[int, list[int]]) -> list[int]:
    """Breadth-first from the roots: every parent comes before its children."""
    queue = deque(node_id for node_id, node in by_id.items() if node.parent_id is None)
    order: list[int] = []
    while queue:
        node_id = queue.popleft()
        order.append(node_id)
        queue.extend(children[node_id])
    if len(order) != len(by_id):
        raise ValueError("the nodes' parent links form a cycle: some nodes are not reachable from a root")
    return order


def _inherited(
    by_id: Mapping[int, OutlineNode], top_down: Sequence[int], clipped: Mapping[int, float], decay: float
) -> dict[int, float]:
    inherited: dict[int, float] = {}
    for node_id in top_down:
        parent_id = by_id[node_id].parent_id
        if parent_id is None:
            inherited[node_id] = decay * clipped[node_id]
        else:
            inherited[node_id] = decay * max(clipped[parent_id], inherited[parent_id])
    return inherited


def _child_support(
    by_id: Mapping[int, OutlineNode],
    children: Mapping[int, list[int]],
    top_down: Sequence[int],
    clipped: Mapping[int, float],
    decay: float,
) -> dict[int, float]:
    support: dict[int, float] = {}
    for node_id in reversed(top_down):  # children before parents
        kids = children[node_id]
        if not kids:
            # A leaf, or an internal node left childless: its support is its own text.
            support[node_id] = clipped[node_id]
            continue
        weighted = 0.0
        total_weight = 0
        for kid in kids:
            weight = max(1, by_id[kid].token_count)
            weighted += weight * max(clipped[kid], decay * support[kid])
            total_weight += weight
        support[node_id] = weighted / total_weight
    return support
