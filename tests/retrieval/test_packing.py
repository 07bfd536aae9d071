from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from retrieval.outline import OutlineNode
from retrieval.packing import Candidate, pack, whole_documents_fit
from tests.retrieval.outline_factory import Tree, build, forests, leaf, node


def _cut(candidate: Candidate, budget: int) -> Candidate | None:
    return dataclasses.replace(candidate, token_count=budget)


def _never_cut(candidate: Candidate, budget: int) -> Candidate | None:
    raise AssertionError("truncate must not be called when something fits")


def _candidate(outline: OutlineNode, score: float, *, from_llm: bool = False) -> Candidate:
    return Candidate(node=outline, score=score, token_count=outline.token_count, from_llm=from_llm)


def _tree() -> Tree:
    # Tokens: a=10 b=20 | c=30 d=40 ; sec1=30 sec2=70 root=100.
    return build(
        node(
            "root",
            0.5,
            node("sec1", 0.5, leaf("a", 0.5, tokens=10), leaf("b", 0.5, tokens=20)),
            node("sec2", 0.5, leaf("c", 0.5, tokens=30), leaf("d", 0.5, tokens=40)),
        )
    )


def _names(tree: Tree, candidates: tuple[Candidate, ...]) -> list[str]:
    names = {outline.id: name for name, outline in tree.by_name.items()}
    return [names[candidate.node.id] for candidate in candidates]


def test_fills_by_score_and_returns_document_order() -> None:
    t = _tree()
    candidates = [_candidate(t["d"], 0.9), _candidate(t["a"], 0.8), _candidate(t["c"], 0.7)]

    result = pack(candidates, budget=60, truncate=_never_cut)

    assert _names(t, result.chosen) == ["a", "d"]  # c (0.7) no longer fits after d and a
    assert result.total_tokens == 50
    assert result.tokens_left == 10
    assert not result.truncated
    assert [(s.candidate.node.id, s.reason) for s in result.skipped] == [(t["c"].id, "over_budget")]


def test_skips_what_does_not_fit_and_continues_with_smaller() -> None:
    t = _tree()
    candidates = [_candidate(t["root"], 0.99), _candidate(t["d"], 0.9), _candidate(t["b"], 0.1)]

    result = pack(candidates, budget=45, truncate=_never_cut)

    assert _names(t, result.chosen) == ["d"]
    # b would fit the budget but not what d left over; root is too big from the start.
    assert {s.reason for s in result.skipped} == {"over_budget"}

    result = pack(candidates, budget=60, truncate=_never_cut)
    assert _names(t, result.chosen) == ["b", "d"]


def test_an_internal_node_chosen_whole_excludes_descendants_and_ancestors() -> None:
    t = _tree()
    candidates = [
        _candidate(t["sec2"], 0.9),
        _candidate(t["c"], 0.8),
        _candidate(t["root"], 0.7),
        _candidate(t["a"], 0.6),
        _candidate(t["d"], 0.5),
    ]

    result = pack(candidates, budget=100, truncate=_never_cut)

    assert _names(t, result.chosen) == ["a", "sec2"]
    overlapping = {s.candidate.node.id for s in result.skipped if s.reason == "overlap"}
    assert overlapping == {t["c"].id, t["d"].id, t["root"].id}
    assert result.total_tokens == 80


def test_a_repeated_node_is_taken_once_and_other_documents_never_overlap() -> None:
    t = _tree()
    # Same spans, another document: never an overlap.
    other = build(node("root", 0.5, leaf("a", 0.5, tokens=10)), document_id=2, first_id=100)
    candidates = [
        _candidate(t["a"], 0.9),
        _candidate(t["a"], 0.8),
        _candidate(other["root"], 0.7),
        _candidate(t["root"], 0.6),
    ]

    result = pack(candidates, budget=1000, truncate=_never_cut, document_rank={1: 0, 2: 1})

    assert [c.node.id for c in result.chosen] == [t["a"].id, other["root"].id]
    assert [(s.candidate.node.id, s.reason) for s in result.skipped] == [
        (t["a"].id, "overlap"),
        (t["root"].id, "overlap"),
    ]


def test_llm_chosen_candidates_go_first() -> None:
    t = _tree()
    candidates = [_candidate(t["c"], 0.99), _candidate(t["d"], 0.2, from_llm=True), _candidate(t["b"], 0.95)]

    result = pack(candidates, budget=60, truncate=_never_cut)

    # d (LLM-chosen, low score) takes 40 first; then b (20) fits, c (30) no longer does.
    assert _names(t, result.chosen) == ["b", "d"]
    assert result.chosen[1].from_llm


def test_nothing_fits_cuts_the_best_leaf() -> None:
    t = _tree()
    candidates = [_candidate(t["sec2"], 0.99), _candidate(t["c"], 0.9), _candidate(t["d"], 0.8)]

    result = pack(candidates, budget=5, truncate=_cut)

    assert _names(t, result.chosen) == ["c"]  # the best leaf, not the better-scored section
    assert result.truncated
    assert result.chosen[0].truncated
    assert result.total_tokens == 5
    assert t["c"].id not in {s.candidate.node.id for s in result.skipped}


def test_a_truncate_that_fails_or_overshoots_returns_nothing() -> None:
    t = _tree()
    candidates = [_candidate(t["c"], 0.9)]

    assert pack(candidates, budget=5, truncate=lambda c, b: None).chosen == ()
    overshoot = pack(candidates, budget=5, truncate=lambda c, b: dataclasses.replace(c, token_count=b + 1))
    assert overshoot.chosen == ()
    assert overshoot.total_tokens == 0
    assert not overshoot.truncated


def test_zero_budget_returns_nothing_and_negative_budget_is_an_error() -> None:
    t = _tree()
    result = pack([_candidate(t["a"], 0.9)], budget=0, truncate=_never_cut)
    assert (result.chosen, result.total_tokens) == ((), 0)

    with pytest.raises(ValueError, match="negative"):
        pack([], budget=-1, truncate=_never_cut)


def test_output_orders_by_document_rank_then_offset() -> None:
    first = build(node("root", 0.5, leaf("x1", 0.5), leaf("x2", 0.5)), document_id=1, first_id=1)
    second = build(node("root", 0.5, leaf("y1", 0.5), leaf("y2", 0.5)), document_id=2, first_id=10)
    candidates = [
        _candidate(first["x2"], 0.9),
        _candidate(second["y2"], 0.8),
        _candidate(first["x1"], 0.7),
        _candidate(second["y1"], 0.6),
    ]

    result = pack(candidates, budget=1000, truncate=_never_cut, document_rank={2: 0, 1: 1})

    assert [c.node.id for c in result.chosen] == [
        second["y1"].id,
        second["y2"].id,
        first["x1"].id,
        first["x2"].id,
    ]


def test_ties_break_by_document_rank_then_offset() -> None:
    first = build(node("root", 0.5, leaf("x1", 0.5), leaf("x2", 0.5)), document_id=1, first_id=1)
    second = build(node("root", 0.5, leaf("y1", 0.5)), document_id=2, first_id=10)
    candidates = [_candidate(first["x2"], 0.5), _candidate(first["x1"], 0.5), _candidate(second["y1"], 0.5)]

    result = pack(candidates, budget=10, truncate=_never_cut, document_rank={2: 0, 1: 1})
    assert [c.node.id for c in result.chosen] == [second["y1"].id]

    result = pack(candidates, budget=10, truncate=_never_cut, document_rank={1: 0, 2: 1})
    assert [c.node.id for c in result.chosen] == [first["x1"].id]


def test_per_path_scores_are_carried_along() -> None:
    t = _tree()
    candidate = dataclasses.replace(_candidate(t["a"], 0.9), path_scores={"tree": 0.9, "llm": 1.0})

    [chosen] = pack([candidate], budget=100, truncate=_never_cut).chosen

    assert chosen.path_scores == {"tree": 0.9, "llm": 1.0}


def test_whole_documents_fit() -> None:
    # The engine's routing rule (retrieval.services): the selected documents go whole when
    # their stored sizes sum to the budget or less; the node level runs otherwise.
    assert whole_documents_fit([400, 600], 1000)
    assert not whole_documents_fit([400, 601], 1000)
    assert whole_documents_fit(iter([400, 600]), 1000)  # the engine passes a generator
    assert whole_documents_fit([], 100)


@st.composite
def _packing_problems(draw: st.DrawFn) -> tuple[list[Candidate], int, dict[int, int]]:
    trees = draw(forests())
    nodes = [outline for tree in trees for outline in tree]
    chosen = draw(st.lists(st.sampled_from(nodes), min_size=1, max_size=len(nodes), unique_by=lambda n: n.id))
    candidates = [
        Candidate(
            node=outline,
            score=draw(st.floats(0, 1)),
            token_count=outline.token_count,
            from_llm=draw(st.booleans()),
        )
        for outline in chosen
    ]
    ranks = draw(st.permutations(range(1, len(trees) + 1)))
    return candidates, draw(st.integers(0, 400)), {doc: rank for rank, doc in enumerate(ranks)}


@settings(max_examples=300, deadline=None)
@given(_packing_problems())
def test_packing_invariants_on_random_trees(problem: tuple[list[Candidate], int, dict[int, int]]) -> None:
    candidates, budget, ranks = problem

    result = pack(candidates, budget=budget, truncate=_cut, document_rank=ranks)

    assert result.total_tokens == sum(c.token_count for c in result.chosen) <= budget
    # No repeated text: no chosen node contains another.
    for i, one in enumerate(result.chosen):
        for other in result.chosen[i + 1 :]:
            assert not one.node.overlaps(other.node)
    # Document order.
    positions = [(ranks[c.node.document_id], c.node.start_char) for c in result.chosen]
    assert positions == sorted(positions)
    if result.truncated:
        assert len(result.chosen) == 1
        return
    # Greedy is maximal: everything left out overlaps what was chosen or no longer fits.
    for skipped in result.skipped:
        if skipped.reason == "overlap":
            assert any(skipped.candidate.node.overlaps(c.node) for c in result.chosen)
        else:
            assert skipped.candidate.token_count > result.tokens_left


def test_max_chunks_stops_after_that_many_best_first() -> None:
    t = _tree()
    candidates = [_candidate(t["d"], 0.9), _candidate(t["a"], 0.8), _candidate(t["c"], 0.7)]

    result = pack(candidates, budget=1000, truncate=_never_cut, max_chunks=2)

    assert _names(t, result.chosen) == ["a", "d"]  # the two best, in document order
    assert result.total_tokens == 50


def test_max_chunks_skips_overlaps_without_counting_them() -> None:
    t = _tree()
    candidates = [_candidate(t["sec2"], 0.9), _candidate(t["d"], 0.8), _candidate(t["a"], 0.7)]

    result = pack(candidates, budget=1000, truncate=_never_cut, max_chunks=2)

    assert _names(t, result.chosen) == ["a", "sec2"]  # d lies inside sec2: skipped, a comes in
