"""How far the node level trusts LLMnavigate beside TreeExpansion (``node_level._llm_trust``), on
plain data: which picks count, what they weigh, and which are packed first."""

from __future__ import annotations

import pytest

from retrieval.fusion import fuse
from retrieval.node_level import _llm_trust
from retrieval.result import LLM_NAVIGATE, TREE_EXPANSION

# 80 nodes shown; TreeExpansion ranks them 1 (best) to 80, so its top 20 is nodes 1 to 20.
TREE = {node: 1.0 - node / 100 for node in range(1, 81)}


def test_agreed_picks_lead_by_their_weight_and_never_jump_the_packing_order() -> None:
    # One pick TreeExpansion ranks 15th, one it ranks 70th: agreement beyond chance (a half
    # against a quarter), which the first earned and the second must not share.
    llm = {15: 1.0, 70: 1.0}
    paths, weights, first = _llm_trust({LLM_NAVIGATE: llm, TREE_EXPANSION: TREE}, offered=list(TREE))
    assert paths[LLM_NAVIGATE] == {15: 1.0} and paths[TREE_EXPANSION] == TREE
    assert weights[LLM_NAVIGATE] == pytest.approx(1 / 3) and weights[TREE_EXPANSION] == 1.0
    # Packed first, node 15 (a section of 400 tokens, say) would take a small budget from node 1;
    # now it is packed by its fused score like any other node.
    assert first == frozenset()
    fused = {item.key: item for item in fuse(paths, weights)}
    assert fused[70].paths == (TREE_EXPANSION,)
    assert fused[15].score > fused[5].score  # the agreed pick moves up, as far as its weight takes it


def test_picks_at_chance_weigh_nothing_and_alone_they_are_all_there_is() -> None:
    at_chance = {2: 1.0, 40: 1.0, 60: 1.0, 75: 1.0}  # a quarter in TreeExpansion's top quarter
    paths, weights, first = _llm_trust({LLM_NAVIGATE: at_chance, TREE_EXPANSION: TREE}, offered=list(TREE))
    assert weights[LLM_NAVIGATE] == 0.0 and paths[LLM_NAVIGATE] == {} and first == frozenset()
    # "llm" mode: LLMnavigate alone, its picks packed first.
    paths, weights, first = _llm_trust({LLM_NAVIGATE: at_chance}, offered=list(TREE))
    assert paths == {LLM_NAVIGATE: at_chance} and first == frozenset(at_chance)
    # LLMnavigate did not answer: TreeExpansion alone.
    assert _llm_trust({TREE_EXPANSION: TREE}, offered=())[2] == frozenset()
