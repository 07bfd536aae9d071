"""The indexes the flat baselines and the peers rank from (see ``baselines`` for the chunking, the
fusion and the packing): chunks with their BM25 index and their passage vectors, and the engine's
leaves with their parent sections for ``parent-child``. Pure: no Django, no database.

A query may be scoped to one document (``bench-retrieval --scoped``): each ranking is then of
that document's chunks only, as a vector store's metadata filter returns them, and the fusion
ranks within it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from fable_benchmarks.baselines import BM25Ranker, DenseRanker, reciprocal_rank_fusion


class ChunkIndex:
    """Chunks of many documents, ranked by BM25, by dense similarity, or both fused (RRF)."""

    def __init__(
        self,
        *,
        texts: Sequence[str],
        owners: Sequence[Any],
        token_counts: Sequence[int],
        vectors: np.ndarray | None = None,
        lexical: bool = True,
    ) -> None:
        if not len(texts) == len(owners) == len(token_counts):
            raise ValueError("texts, owners and token_counts must be of one length")
        self.texts = list(texts)
        self.owners = list(owners)
        self.token_counts = list(token_counts)
        self._bm25 = BM25Ranker(self.texts) if lexical else None
        self._dense = DenseRanker(vectors) if vectors is not None else None
        positions: dict[Any, list[int]] = {}
        for index, owner in enumerate(self.owners):
            positions.setdefault(owner, []).append(index)
        self._mask = {owner: _mask(len(self.texts), indices) for owner, indices in positions.items()}

    def bm25_order(self, query: str, within: Any = None) -> np.ndarray:
        if self._bm25 is None:
            raise ValueError("this index has no BM25 ranking")
        return self._within(self._bm25.rank(query), within)

    def dense_order(self, vector: np.ndarray, within: Any = None) -> np.ndarray:
        if self._dense is None:
            raise ValueError("this index has no vectors")
        return self._within(self._dense.rank(vector), within)

    def hybrid_order(self, query: str, vector: np.ndarray, within: Any = None) -> np.ndarray:
        """BM25's and the dense ranking fused by reciprocal rank fusion (k = 60)."""
        return reciprocal_rank_fusion([self.bm25_order(query, within), self.dense_order(vector, within)])

    def _within(self, order: np.ndarray, owner: Any) -> np.ndarray:
        if owner is None:
            return order
        mask = self._mask.get(owner)
        if mask is None:
            return np.zeros(0, dtype=np.int64)
        return order[mask[order]]


def _mask(size: int, indices: list[int]) -> np.ndarray:
    mask = np.zeros(size, dtype=bool)
    mask[indices] = True
    return mask


@dataclass(frozen=True)
class Packable:
    """What ``baselines.pack_ranked`` packs for ``parent-child``: the leaves, then the parent
    sections, as one list of items."""

    texts: list[str]
    owners: list[Any]
    token_counts: list[int]
    inside: list[int | None]  # per item: the parent section item that holds it


class ParentChild:
    """LlamaIndex's auto-merging and LangChain's parent-document idea over the engine's own tree:
    the leaves are ranked (BM25 and dense fused, as the hybrid peers rank their chunks) and each
    is replaced by its parent section, once; a leaf whose parent does not fit the budget left, or
    hangs from the document's root, is returned alone.

    ``leaves`` ranks the leaves; ``parent_of[i]``: the index in ``parents`` of leaf i's parent, None
    for a leaf under the root; ``parents``: (text, tokens) of each parent section."""

    def __init__(
        self, leaves: ChunkIndex, parent_of: Sequence[int | None], parents: Sequence[tuple[str, int]]
    ) -> None:
        if len(parent_of) != len(leaves.texts):
            raise ValueError("parent_of needs one entry per leaf")
        self.leaves = leaves
        self.parent_of = list(parent_of)
        size = len(leaves.texts)
        owner_of_parent: dict[int, Any] = {}
        for leaf, parent in enumerate(self.parent_of):
            if parent is not None:
                owner_of_parent.setdefault(parent, leaves.owners[leaf])
        self.items = Packable(
            texts=leaves.texts + [text for text, _ in parents],
            owners=leaves.owners + [owner_of_parent.get(index) for index in range(len(parents))],
            token_counts=leaves.token_counts + [tokens for _, tokens in parents],
            inside=[None if parent is None else size + parent for parent in self.parent_of]
            + [None] * len(parents),
        )

    def order(self, query: str, vector: np.ndarray, within: Any = None) -> list[int]:
        """Items to pack, best first: each ranked leaf preceded by its parent section the first
        time that section comes up (``pack_ranked`` then takes the section, or the leaf alone
        when the section does not fit)."""
        size = len(self.leaves.texts)
        seen: set[int] = set()
        items: list[int] = []
        for leaf in self.leaves.hybrid_order(query, vector, within).tolist():
            parent = self.parent_of[leaf]
            if parent is not None and parent not in seen:
                seen.add(parent)
                items.append(size + parent)
            items.append(leaf)
        return items
