"""The peers' indexes: hybrid ranking (BM25 and dense fused), scoped to one document, and
parent-child packing over a tree's leaves and their parent sections."""

from __future__ import annotations

import numpy as np
import pytest

from fable_benchmarks.baselines import pack_ranked
from fable_benchmarks.peers import ChunkIndex, ParentChild

TEXTS = [
    "The supplier may assign this agreement with written consent.",  # doc a
    "Quarterly revenue grew in the north.",  # doc a
    "Neither party may assign this agreement without consent.",  # doc b
    "The weather was fine all week.",  # doc b
]
# Dense vectors that disagree with BM25: chunk 3 is "closest" to the query vector.
VECTORS = np.array([[0.6, 0.8], [0.8, 0.6], [1.0, 0.0], [0.0, 1.0]], dtype=np.float32)
QUERY_VECTOR = np.array([0.0, 1.0], dtype=np.float32)


def index() -> ChunkIndex:
    return ChunkIndex(texts=TEXTS, owners=["a", "a", "b", "b"], token_counts=[12, 8, 11, 7], vectors=VECTORS)


def test_hybrid_fuses_bm25_and_dense_rankings() -> None:
    chunks = index()
    query = "May a party assign the agreement without consent?"
    bm25 = chunks.bm25_order(query).tolist()
    dense = chunks.dense_order(QUERY_VECTOR).tolist()
    assert bm25[0] == 2 and set(bm25) == {0, 2}, "BM25 ranks only the chunks sharing a term"
    assert dense == [3, 0, 1, 2]
    # 1 / (60 + rank) summed: 0, second in both (0.03226), beats 2, first and last (0.03202), and 3,
    # first in the dense ranking only (0.01639)
    assert chunks.hybrid_order(query, QUERY_VECTOR).tolist() == [0, 2, 3, 1]


def test_scoped_rankings_hold_only_that_documents_chunks() -> None:
    chunks = index()
    query = "May a party assign the agreement without consent?"
    assert chunks.bm25_order(query, "b").tolist() == [2]
    assert chunks.dense_order(QUERY_VECTOR, "b").tolist() == [3, 2]
    # ranks within the document: 2 is first by BM25 and second dense, 3 only dense first
    assert chunks.hybrid_order(query, QUERY_VECTOR, "b").tolist() == [2, 3]
    assert chunks.hybrid_order(query, QUERY_VECTOR, "missing").tolist() == []


def test_parent_child_returns_the_section_or_the_leaf_when_it_does_not_fit() -> None:
    # leaves 0 and 1 under section 0 (20 tokens), 2 under section 1 (300 tokens), 3 under the root
    leaves = index()
    tree = ParentChild(leaves, [0, 0, 1, None], [("section zero", 20), ("section one", 300)])
    items = tree.items
    assert items.texts[4:] == ["section zero", "section one"]
    assert items.owners[4:] == ["a", "b"]
    assert items.inside == [4, 4, 5, None, None, None]
    order = tree.order("May a party assign the agreement without consent?", QUERY_VECTOR)
    # hybrid order of the leaves is 0, 2, 3, 1: each preceded by its section the first time
    assert order == [4, 0, 5, 2, 3, 1]
    picked = pack_ranked(order, items.token_counts, 100, inside=items.inside)
    # section zero (holding 0 and 1), section one does not fit so leaf 2 alone, then leaf 3
    assert picked == [4, 2, 3]
    assert [items.texts[i] for i in picked] == ["section zero", TEXTS[2], TEXTS[3]]


def test_parent_child_checks_its_inputs() -> None:
    with pytest.raises(ValueError, match="one entry per leaf"):
        ParentChild(index(), [0], [("s", 1)])
