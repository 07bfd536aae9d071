from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from retrieval.fusion import agreement, fuse, normalise
from retrieval.outline import OutlineNode, SpanIndex


def test_normalise_maps_min_to_zero_and_max_to_one() -> None:
    assert normalise({"a": 2.0, "b": 4.0, "c": 10.0}) == {"a": 0.0, "b": 0.25, "c": 1.0}


def test_normalise_a_single_score_or_equal_scores_gives_one() -> None:
    assert normalise({7: 0.31}) == {7: 1.0}
    assert normalise({1: 0.5, 2: 0.5}) == {1: 1.0, 2: 1.0}
    assert normalise({}) == {}


def test_normalise_rejects_non_finite_scores() -> None:
    with pytest.raises(ValueError, match="finite"):
        normalise({1: math.nan})


def test_fuse_disjoint_paths_is_the_union_on_one_scale() -> None:
    # The LLM scores 0-10, the vectors give cosines: only normalised scores are comparable.
    fused = fuse({"llm": {1: 9.0, 2: 3.0}, "vector": {3: 0.82, 4: 0.80}})

    assert [item.key for item in fused] == [1, 3, 2, 4]
    assert [item.score for item in fused] == pytest.approx([0.5, 0.5, 0.0, 0.0])
    first = fused[0]
    assert first.paths == ("llm",)
    assert first.raw == {"llm": 9.0}
    assert first.normalised == {"llm": 1.0}


def test_fuse_rewards_agreement_between_paths() -> None:
    fused = fuse({"llm": {1: 10.0, 2: 8.0, 3: 0.0}, "vector": {2: 0.9, 4: 0.9, 5: 0.5}})

    by_key = {item.key: item for item in fused}
    assert fused[0].key == 2  # found by both paths
    assert by_key[2].paths == ("llm", "vector")
    assert by_key[2].raw == {"llm": 8.0, "vector": 0.9}
    assert by_key[2].normalised == pytest.approx({"llm": 0.8, "vector": 1.0})
    assert by_key[2].score == pytest.approx(0.9)


def test_fuse_a_single_candidate_scores_one() -> None:
    [only] = fuse({"vector": {42: 0.13}})

    assert (only.key, only.score, only.paths) == (42, 1.0, ("vector",))


def test_fuse_ties_break_by_key() -> None:
    fused = fuse({"vector": {9: 0.5, 3: 0.5, 5: 0.5}})

    assert [item.key for item in fused] == [3, 5, 9]
    assert {item.score for item in fused} == {1.0}


def test_fuse_weights_paths() -> None:
    fused = fuse({"llm": {1: 1.0, 2: 0.0}, "vector": {2: 1.0, 1: 0.0}}, weights={"llm": 3.0})

    assert [(item.key, item.score) for item in fused] == [(1, 0.75), (2, 0.25)]


def test_fuse_a_path_that_found_nothing_does_not_dilute_scores() -> None:
    fused = fuse({"llm": {}, "vector": {1: 0.9, 2: 0.1}})

    assert [(item.key, item.score) for item in fused] == [(1, 1.0), (2, 0.0)]


def test_fuse_nothing_found_is_empty() -> None:
    assert fuse({"llm": {}, "vector": {}}) == []
    assert fuse({}) == []


@pytest.mark.parametrize("weights", [{"llm": -1.0}, {"llm": math.nan}, {"lexical": 1.0}])
def test_fuse_rejects_bad_weights(weights: dict[str, float]) -> None:
    with pytest.raises(ValueError, match="path"):
        fuse({"llm": {1: 1.0}, "vector": {1: 1.0}}, weights=weights)


def test_fuse_keys_can_be_tuples() -> None:
    fused = fuse({"vector": {(1, 5): 0.4, (1, 2): 0.4}})

    assert [item.key for item in fused] == [(1, 2), (1, 5)]


_spans = st.tuples(st.integers(0, 40), st.integers(0, 12), st.integers(1, 2))


@settings(max_examples=300, deadline=None)
@given(st.lists(_spans, max_size=30))
def test_span_index_agrees_with_checking_every_kept_node(spans: list[tuple[int, int, int]]) -> None:
    index = SpanIndex()
    kept: list[OutlineNode] = []
    for node_id, (start, length, document_id) in enumerate(spans):
        outline = OutlineNode(node_id, document_id, None, 0, "root", 0, start, start + length, length, 0.0)
        expected = any(outline.overlaps(other) for other in kept)
        assert index.overlaps(outline) == expected
        if not expected:
            index.add(outline)
            kept.append(outline)


def test_agreement_is_the_share_of_llm_picks_the_reference_ranks_high_beyond_chance() -> None:
    # The LLM was shown 20 documents, the reference ranks 5 of them in its top: a pick at random
    # lands there a quarter of the time.
    reference = {key: 1.0 - key / 100 for key in range(1, 21)}
    shown = list(reference)

    def weight(*picks: int) -> float:
        return agreement(dict.fromkeys(picks, 1.0), reference, top=5, offered=shown).weight

    assert weight(1, 2, 3, 4) == 1.0  # every pick in the top
    assert weight(1, 2, 10, 11) == pytest.approx((0.5 - 0.25) / 0.75)
    assert weight(1, 10, 11, 12) == 0.0  # a quarter agreed: what picking at random gives
    assert weight(15) == 0.0 and weight() == 0.0
    agreed = agreement({1: 1.0, 4: 0.9, 9: 0.5}, reference, top=5, offered=shown)
    assert agreed.agreed == frozenset({1, 4})
    # At or below chance nothing is trusted, not even the picks that happen to agree.
    assert (
        agreement({1: 1.0, 10: 1.0, 11: 1.0, 12: 1.0}, reference, top=5, offered=shown).agreed == frozenset()
    )


def test_of_a_small_outline_the_top_is_its_best_quarter() -> None:
    # One short document's 8 nodes: a top of 20 would be all of them (agreeing would say nothing).
    reference = {key: 1.0 - key / 100 for key in range(1, 9)}
    shown = list(reference)
    assert agreement({1: 1.0}, reference, top=20, offered=shown).weight == 1.0
    assert agreement({2: 1.0}, reference, top=20, offered=shown).agreed == frozenset({2})
    assert agreement({5: 1.0}, reference, top=20, offered=shown).weight == 0.0
    # What the reference ranks but the LLM was not shown is not its top.
    assert agreement({3: 1.0}, {**reference, 0: 5.0}, top=20, offered=shown).weight == 0.0
    # Not told what was shown: the reference's keys and the picks.
    assert agreement({1: 1.0, 2: 1.0}, {**reference, 9: 0.1}, top=20).weight == 1.0
    assert agreement({}, reference, top=3).weight == 0.0
    assert agreement({1: 1.0}, {}, top=3).agreed == frozenset()


def test_an_llm_path_that_agrees_with_nothing_leaves_the_ranking_as_it_was() -> None:
    reference = {1: 0.9, 2: 0.5, 3: 0.1}
    llm = {3: 1.0}
    weight = agreement(llm, reference, top=2).weight
    fused = fuse({"llm": llm, "vector": reference}, {"llm": weight, "vector": 1.0})
    assert [item.key for item in fused] == [1, 2, 3]
