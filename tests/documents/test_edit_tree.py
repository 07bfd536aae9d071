"""The in-memory tree every edit is applied to (documents.tree_edits): plain data, no database."""

from __future__ import annotations

import pytest

from documents.ingestion.pipeline import flatten_tree
from documents.ingestion.tree import LEAF, SUBSECTION
from documents.tree_edits import EditTree, NodeEditError, NodeState
from openfable.errors import ConflictError
from tests.trees import sec, sec_text, sec_tree

SPEC = sec(
    "Root",
    "All of it.",
    sec("First", "One.", "Alpha one. Alpha two. Alpha three.", "Beta one."),
    sec("Second", "Two.", "Gamma one. Gamma two.", "Delta one."),
)
TEXT = sec_text(SPEC)


def edit_tree() -> EditTree:
    rows = flatten_tree(sec_tree(SPEC), text=TEXT, document_title="Doc", count_tokens=len)
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
    return EditTree(states, text=TEXT, count_tokens=len)


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
