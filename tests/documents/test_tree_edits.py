"""The in-memory tree every edit is applied to (documents.tree_edits): plain data, no database."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from documents.ingestion.tree import LEAF, SUBSECTION
from documents.ingestion.tree_rows import flatten_tree
from documents.tree_edits import EditTree, NodeEditError, NodeState
from openfable.errors import ConflictError
from tests.trees import Sec, sec, sec_text, sec_tree

SPEC = sec(
    "Root",
    "All of it.",
    sec("First", "One.", "Alpha one. Alpha two. Alpha three.", "Beta one."),
    sec("Second", "Two.", "Gamma one. Gamma two.", "Delta one."),
)
TEXT = sec_text(SPEC)


def edit_tree() -> EditTree:
    return tree_of(SPEC)


def leaf_at(tree: EditTree, opening: str) -> NodeState:
    return next(
        node
        for node in tree.nodes.values()
        if node.kind == LEAF and TEXT[node.start_char :].startswith(opening)
    )


def test_sentence_cut_takes_the_nearest_sentence_start() -> None:
    tree = edit_tree()
    alpha = leaf_at(tree, "Alpha")
    two, three = TEXT.index("Alpha two"), TEXT.index("Alpha three")
    assert tree.sentence_cut(alpha.id, two + 2) == two
    assert tree.sentence_cut(alpha.id, three - 1) == three
    with pytest.raises(NodeEditError, match="is one sentence"):
        tree.sentence_cut(leaf_at(tree, "Beta").id, TEXT.index("Beta") + 2)


def test_settle_renumbers_and_only_what_changed_is_in_the_diff() -> None:
    tree = edit_tree()
    alpha = leaf_at(tree, "Alpha")
    second = tree.split(alpha.id, TEXT.index("Alpha two"))
    tree.settle()
    tree.validate()
    diff = tree.diff()
    assert [node.id for node in diff.created] == [second]
    changed = {
        after.id: [
            name for name in ("order", "ordinal", "end_char") if getattr(after, name) != getattr(before, name)
        ]
        for before, after in diff.updated
    }
    assert changed[alpha.id] == ["end_char"]
    assert all("order" in fields for key, fields in changed.items() if key != alpha.id)
    assert tree.nodes[second].embedding_stale and tree.nodes[alpha.id].embedding_stale


def test_settle_keeps_a_stored_toc_path_nothing_touched() -> None:
    tree = edit_tree()
    first = next(node for node in tree.nodes.values() if node.title == "First")
    first.toc_path = tree.before[first.id].toc_path = "Doc › First (as the builder wrote it)"
    tree.set_texts(leaf_at(tree, "Gamma").id, title="", summary="A note")
    tree.settle()
    assert tree.nodes[first.id].toc_path == "Doc › First (as the builder wrote it)"


def test_moving_a_section_into_the_next_makes_it_a_subsection_with_new_paths() -> None:
    tree = edit_tree()
    first = next(node for node in tree.nodes.values() if node.title == "First")
    second = next(node for node in tree.nodes.values() if node.title == "Second")
    tree.move(first.id, second.id, 0)
    tree.settle()
    tree.validate()
    assert (first.kind, first.depth, first.toc_path) == (SUBSECTION, 2, "Doc › Second › First")
    assert leaf_at(tree, "Alpha").toc_path == "Doc › Second › First"
    assert first.embedding_stale and not leaf_at(tree, "Alpha").embedding_stale


def test_restore_refuses_a_tree_that_moved_on() -> None:
    tree = edit_tree()
    alpha = leaf_at(tree, "Alpha")
    with pytest.raises(ConflictError, match="changed since this edit"):
        tree.restore(before=[{"id": alpha.id, "end_char": 5}], after=[{"id": alpha.id, "end_char": 7}])


# -- where a node can move: the places offered are exactly the places the move takes ---------------

DEEP = sec(
    "Root",
    "All of it.",
    "Preamble.",
    sec(
        "One", "1.", "One a.", sec("One-one", "1.1", "One-one a.", sec("Deep", "1.1.1", "Deep a.")), "One b."
    ),
    sec("Two", "2.", sec("Two-one", "2.1", "Two-one a.", "Two-one b."), sec("Two-two", "2.2", "Two-two a.")),
    "Tail.",
)


def tree_of(spec: Sec) -> EditTree:
    text = sec_text(spec)
    rows = flatten_tree(sec_tree(spec), text=text, document_title="Doc", count_tokens=len)
    states = [
        NodeState(
            id=row.order + 1,
            parent_id=None if row.parent_order is None else row.parent_order + 1,
            kind=row.kind,
            depth=row.depth,
            ordinal=row.ordinal,
            order=row.order,
            title=row.title,
            summary=row.summary,
            toc_path=row.toc_path,
            start_char=row.start_char,
            end_char=row.end_char,
            token_count=row.token_count,
            edited=False,
            excluded=False,
            embedding_stale=False,
        )
        for row in rows
    ]
    return EditTree(states, text=text, count_tokens=len)


def moves_that_keep_the_tree(spec: Sec, node_id: int) -> set[tuple[int, int]]:
    """By brute force, independent of the move's own checks: every (parent, position) where the
    node, put there by hand, leaves a tree ``check_tree`` accepts (the text still partitioned in
    order, depths and kinds right, no empty section), besides where it is now."""
    found: set[tuple[int, int]] = set()
    probe = tree_of(spec)
    node = probe.nodes[node_id]
    if node.parent_id is None:
        return found
    here = (node.parent_id, probe.children[node.parent_id].index(node_id))
    for parent_id, parent in probe.nodes.items():
        if parent.kind == LEAF or parent_id in probe.subtree(node_id):
            continue
        others = [key for key in probe.children[parent_id] if key != node_id]
        for position in range(len(others) + 1):
            tree = tree_of(spec)
            moved = tree.nodes[node_id]
            assert moved.parent_id is not None
            tree.children[moved.parent_id].remove(node_id)
            tree.children[parent_id].insert(position, node_id)
            moved.parent_id = parent_id
            try:
                tree.settle()
                tree.validate()
            except NodeEditError:
                continue
            if (parent_id, position) != here:
                found.add((parent_id, position))
    return found


def check_places_match_brute_force(spec: Sec) -> None:
    for node_id in tree_of(spec).nodes:
        tree = tree_of(spec)
        offered = tree.move_places(node_id)
        assert {(place.parent_id, place.position) for place in offered} == moves_that_keep_the_tree(
            spec, node_id
        ), f"node {node_id}"
        # One place per parent, so a menu of parents (with the default place) says it all.
        assert len({place.parent_id for place in offered}) == len(offered)
        for place in offered:
            moved = tree_of(spec)
            assert moved.move_default_position(node_id, place.parent_id) == place.position
            moved.move(node_id, place.parent_id, None)  # the default place is the offered one
            moved.settle()
            moved.validate()
            assert [leaf.start_char for leaf in moved.leaves_in_order()] == [
                leaf.start_char for leaf in tree.leaves_in_order()
            ]


def test_the_places_offered_are_exactly_the_moves_that_keep_the_text_in_order() -> None:
    check_places_match_brute_force(DEEP)
    check_places_match_brute_force(SPEC)


def test_a_section_can_go_to_the_end_of_the_one_before_or_the_start_of_the_one_after() -> None:
    tree = tree_of(DEEP)
    by_title = {node.title: node.id for node in tree.nodes.values() if node.title}
    places = {(tree.nodes[p.parent_id].title, p.position) for p in tree.move_places(by_title["Two-one"])}
    # Up to the root between One and Two, to the end of One (after "One b."), or to the start of
    # Two-two; not into One-one (its text comes before "One b.") nor into Deep (too deep, and
    # out of order).
    assert places == {("Root", 2), ("One", 3), ("Two-two", 0)}
    assert tree.move_places(tree.root_id) == []


@settings(max_examples=30, deadline=None)
@given(st.data())
def test_random_trees_offer_exactly_the_moves_that_keep_the_tree(data: st.DataObject) -> None:
    count = iter(range(1000))

    def children(depth: int) -> list[Sec | str]:
        found: list[Sec | str] = []
        for _ in range(data.draw(st.integers(1, 3))):
            if depth < 3 and data.draw(st.booleans()):
                found.append(sec(f"S{next(count)}", "s", *children(depth + 1)))
            else:
                found.append(f"Leaf {next(count)}.")
        return found

    check_places_match_brute_force(sec("Root", "r", *children(0)))
