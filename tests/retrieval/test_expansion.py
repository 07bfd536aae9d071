from __future__ import annotations

import dataclasses
import math
import time

import pytest
from hypothesis import given, settings

from retrieval.expansion import ExpansionWeights, NodeScore, tree_expansion
from retrieval.outline import OutlineNode
from tests.retrieval.outline_factory import Tree, build, forests, leaf, node


def _scores(tree: Tree, weights: ExpansionWeights | None = None) -> dict[int, NodeScore]:
    return tree_expansion(tree.nodes, weights=weights or ExpansionWeights())


def test_terms_follow_the_documented_formulas() -> None:
    tree = build(node("root", 0.5, node("sec", 0.6, leaf("a", 0.9, tokens=10), leaf("b", 0.3, tokens=30))))
    scores = _scores(tree)

    root, sec, a, b = (scores[tree[name].id] for name in ("root", "sec", "a", "b"))
    # S_inh(root) = δ·s(root); S_child(sec) is the token-weighted mean of its leaves.
    assert dataclasses.astuple(root) == pytest.approx((0.5, 0.4, 0.6, 0.5))
    assert dataclasses.astuple(sec) == pytest.approx((0.6, 0.4, 0.45, (0.6 + 0.4 + 0.45) / 3))
    assert dataclasses.astuple(a) == pytest.approx((0.9, 0.48, 0.9, (0.9 + 0.48 + 0.9) / 3))
    assert dataclasses.astuple(b) == pytest.approx((0.3, 0.48, 0.3, 0.36))


def test_inheritance_decays_per_level_from_the_best_ancestor() -> None:
    tree = build(node("root", 0.2, node("sec", 0.9, node("sub", 0.1, leaf("deep", 0.0)))))
    scores = _scores(tree)

    assert scores[tree["sub"].id].inherited == pytest.approx(0.9 * 0.8)
    assert scores[tree["deep"].id].inherited == pytest.approx(0.9 * 0.8**2)


def test_child_support_is_discounted_per_level_below() -> None:
    tree = build(node("root", 0.0, node("sec", 0.0, node("sub", 0.0, leaf("x", 1.0)))))
    scores = _scores(tree)

    assert scores[tree["sub"].id].child == pytest.approx(1.0)
    assert scores[tree["sec"].id].child == pytest.approx(0.8)
    assert scores[tree["root"].id].child == pytest.approx(0.64)


def test_a_strong_leaf_deep_in_the_tree_beats_weak_shallow_nodes() -> None:
    tree = build(
        node(
            "root",
            0.4,
            node("weak section", 0.35, leaf("w1", 0.3), leaf("w2", 0.35)),
            leaf("shallow leaf", 0.4),
            node("sec", 0.3, node("sub", 0.3, leaf("strong", 0.9), leaf("filler", 0.1))),
        )
    )
    scores = _scores(tree)

    # The engine fuses and packs by these totals (retrieval.node_level): the strong leaf leads.
    assert max(tree.nodes, key=lambda n: scores[n.id].total) == tree["strong"]
    assert tree["strong"].depth == 3
    for shallow in ("weak section", "shallow leaf", "w1", "w2", "sec", "root"):
        assert scores[tree["strong"].id].total > scores[tree[shallow].id].total


def test_child_support_changes_which_section_ranks_higher() -> None:
    tree = build(
        node(
            "root",
            0.5,
            node("one relevant child", 0.7, leaf("hit", 0.9), leaf("miss1", 0.1), leaf("miss2", 0.1)),
            node("all relevant", 0.6, leaf("r1", 0.8), leaf("r2", 0.8), leaf("r3", 0.8)),
        )
    )
    one, every = tree["one relevant child"], tree["all relevant"]

    without_children = _scores(tree, ExpansionWeights(gamma=0.0))
    assert without_children[one.id].total > without_children[every.id].total

    default = _scores(tree)
    assert default[every.id].total > default[one.id].total


def test_a_leaf_is_not_penalised_for_having_no_children() -> None:
    tree = build(node("root", 0.1, leaf("lone", 0.7)))

    assert _scores(tree)[tree["lone"].id].child == pytest.approx(0.7)


def test_negative_and_nan_similarities_count_as_zero() -> None:
    tree = build(node("root", -0.5, leaf("nan", math.nan), leaf("big", 1.2)))
    scores = _scores(tree)

    assert scores[tree["root"].id].similarity == 0.0
    assert scores[tree["nan"].id].similarity == 0.0
    assert scores[tree["big"].id].similarity == 1.0


def test_documents_are_scored_independently() -> None:
    first = build(node("root", 0.5, leaf("a", 0.9)), document_id=1, first_id=1)
    second = build(node("root", 0.99, leaf("b", 0.1)), document_id=2, first_id=100)

    alone = _scores(first)
    together = tree_expansion([*first.nodes, *second.nodes])

    for outline in first:
        assert together[outline.id] == alone[outline.id]


def test_every_node_must_be_given_with_its_parent() -> None:
    tree = build(node("root", 0.5, node("sec", 0.5, leaf("a", 0.9))))
    without_section = [outline for outline in tree if outline.id != tree["sec"].id]

    with pytest.raises(ValueError, match="pass every node"):
        tree_expansion(without_section)


def test_duplicate_nodes_and_cycles_are_rejected() -> None:
    tree = build(node("root", 0.5, leaf("a", 0.9)))
    with pytest.raises(ValueError, match="twice"):
        tree_expansion([*tree.nodes, tree["a"]])

    loop = [
        OutlineNode(1, 1, 2, 1, "section", 0, 0, 10, 3, 0.5),
        OutlineNode(2, 1, 1, 2, "subsection", 1, 0, 10, 3, 0.5),
    ]
    with pytest.raises(ValueError, match="cycle"):
        tree_expansion(loop)


@pytest.mark.parametrize(
    ("field", "value"), [("alpha", -0.1), ("gamma", math.inf), ("decay", 1.5), ("decay", -0.1)]
)
def test_weights_are_validated(field: str, value: float) -> None:
    with pytest.raises(ValueError, match=field):
        ExpansionWeights(**{field: value})


def test_all_weights_zero_is_rejected() -> None:
    with pytest.raises(ValueError, match="positive"):
        ExpansionWeights(alpha=0, beta=0, gamma=0)


def test_large_documents_are_scored_in_linear_time() -> None:
    # A wide tree and a deep chain: neither may be quadratic nor hit a recursion limit.
    wide = build(node("root", 0.5, *(node("", 0.4, *(leaf("", 0.3) for _ in range(50))) for _ in range(200))))
    first = len(wide.nodes) + 1
    deep = [
        OutlineNode(first + i, 2, None if i == 0 else first + i - 1, i, "subsection", i, 0, 10, 3, 0.5)
        for i in range(3000)
    ]

    # CPU time of this process, not the wall clock: other work on a busy machine does not count.
    started = time.process_time()
    scores = tree_expansion([*wide.nodes, *deep])
    assert len(scores) == len(wide.nodes) + len(deep) > 13_000
    assert time.process_time() - started < 2.0


def _reference(nodes: list[OutlineNode], weights: ExpansionWeights) -> dict[int, NodeScore]:
    """The docstring's definitions, computed the slow, obvious way (walking every ancestor)."""
    by_id = {outline.id: outline for outline in nodes}
    s = {outline.id: min(1.0, max(0.0, outline.similarity)) for outline in nodes}
    kids: dict[int, list[OutlineNode]] = {outline.id: [] for outline in nodes}
    for outline in nodes:
        if outline.parent_id is not None:
            kids[outline.parent_id].append(outline)

    def inherited(outline: OutlineNode) -> float:
        if outline.parent_id is None:
            return weights.decay * s[outline.id]
        best, distance = 0.0, 0
        parent_id: int | None = outline.parent_id
        while parent_id is not None:
            distance += 1
            best = max(best, s[parent_id] * weights.decay**distance)
            parent_id = by_id[parent_id].parent_id
        return best

    def child(outline: OutlineNode) -> float:
        children = kids[outline.id]
        if not children:
            return s[outline.id]
        weight = [max(1, c.token_count) for c in children]
        support = [max(s[c.id], weights.decay * child(c)) for c in children]
        return sum(w * r for w, r in zip(weight, support, strict=True)) / sum(weight)

    result = {}
    for outline in nodes:
        sim, inh, ch = s[outline.id], inherited(outline), child(outline)
        total = weights.alpha * sim + weights.beta * inh + weights.gamma * ch
        result[outline.id] = NodeScore(sim, inh, ch, total)
    return result


@settings(max_examples=150, deadline=None)
@given(forests())
def test_matches_the_definitions_on_random_forests(trees: list[Tree]) -> None:
    nodes = [outline for tree in trees for outline in tree]
    weights = ExpansionWeights(alpha=0.2, beta=0.3, gamma=0.5, decay=0.7)

    scores = tree_expansion(nodes, weights=weights)
    expected = _reference(nodes, weights)

    assert scores.keys() == expected.keys()
    for node_id, score in scores.items():
        assert dataclasses.astuple(score) == pytest.approx(dataclasses.astuple(expected[node_id]))
        assert 0.0 <= score.total <= 1.0 + 1e-9
