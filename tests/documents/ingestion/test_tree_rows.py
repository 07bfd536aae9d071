"""From a built tree to the rows that are saved: what each node is embedded from."""

from __future__ import annotations

from documents.ingestion.tree import LEAF, ROOT, SECTION, SUBSECTION, TreeNode
from documents.ingestion.tree_rows import flatten_tree

TEXT = "1. Term\nThis runs two years.\n2. Price\nTen euros.\nPaid monthly.\n"


def _tree() -> TreeNode:
    one = TreeNode(kind=SECTION, start_char=0, end_char=29, title="1. Term", summary="It runs two years.")
    one.children = [TreeNode(kind=LEAF, start_char=0, end_char=29)]
    two = TreeNode(kind=SECTION, start_char=29, end_char=len(TEXT), title="2. Price", summary="Ten euros.")
    two.children = [
        TreeNode(kind=LEAF, start_char=29, end_char=48),
        TreeNode(kind=LEAF, start_char=48, end_char=len(TEXT)),
    ]
    return TreeNode(
        kind=ROOT, start_char=0, end_char=len(TEXT), title="Deal", summary="A deal.", children=[one, two]
    )


def test_a_section_holding_one_passage_is_embedded_from_that_passage() -> None:
    rows = flatten_tree(_tree(), text=TEXT, document_title="Deal", count_tokens=len)
    by_title = {row.title: row for row in rows if row.kind != LEAF}
    leaves = [row for row in rows if row.kind == LEAF]
    # One passage: the same text as its leaf, so the same vector and no second model call.
    assert by_title["1. Term"].embed_text == leaves[0].embed_text == TEXT[0:29]
    # Two passages, and the root: their table-of-contents path and summary, as before.
    assert by_title["2. Price"].embed_text == "Deal › 2. Price: Ten euros."
    assert by_title["Deal"].embed_text == "Deal: A deal."


def test_a_section_whose_summary_a_person_wrote_keeps_it() -> None:
    tree = _tree()
    edited = frozenset({id(tree.children[0])})
    rows = flatten_tree(tree, text=TEXT, document_title="Deal", count_tokens=len, edited=edited)
    assert (
        next(row for row in rows if row.title == "1. Term").embed_text == "Deal › 1. Term: It runs two years."
    )


def test_a_subsection_over_a_subsection_is_no_passage() -> None:
    inner = TreeNode(kind=SUBSECTION, start_char=0, end_char=len(TEXT), title="Inner", summary="In.")
    inner.children = [
        TreeNode(kind=LEAF, start_char=0, end_char=29),
        TreeNode(kind=LEAF, start_char=29, end_char=len(TEXT)),
    ]
    outer = TreeNode(
        kind=SECTION, start_char=0, end_char=len(TEXT), title="Outer", summary="Out.", children=[inner]
    )
    root = TreeNode(
        kind=ROOT, start_char=0, end_char=len(TEXT), title="Deal", summary="A deal.", children=[outer]
    )
    rows = flatten_tree(root, text=TEXT, document_title="Deal", count_tokens=len)
    assert next(row for row in rows if row.title == "Outer").embed_text == "Deal › Outer: Out."
