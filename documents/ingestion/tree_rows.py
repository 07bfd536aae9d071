"""From a built tree to the rows that are saved: pure, no Django.

``flatten_tree`` walks a ``TreeNode`` in pre-order and produces ``FlatNodeRow`` objects with
everything the database needs (order, ordinal, parent, toc path, exact leaf text, token
counts) and the text each node is embedded from: internal nodes embed
"toc path: summary", leaves embed their own text; ``apply_edits`` carries a person's edits over to
a rebuilt tree. The pipeline that calls it (read, build, embed, save) is
``documents.services.jobs.document_index``.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from typing import NamedTuple, Self

from documents.ingestion.tree import LEAF, TreeNode

TOC_SEPARATOR = " › "


@dataclass
class FlatNodeRow:
    order: int
    parent_order: int | None
    kind: str
    depth: int
    ordinal: int
    title: str
    summary: str
    toc_path: str
    start_char: int
    end_char: int
    content: str
    token_count: int
    embed_text: str
    edited: bool = False
    excluded: bool = False  # left out of retrieval (a person excluded it or a node above it)


def flatten_tree(
    root: TreeNode,
    *,
    text: str,
    document_title: str,
    count_tokens: Callable[[str], int],
    edited: frozenset[int] = frozenset(),
    excluded: Collection[int] | None = None,
) -> list[FlatNodeRow]:
    """Rows in pre-order; ``edited`` holds ``id()`` of tree nodes that carry a person's edit.

    ``excluded`` holds ``id()`` of tree nodes a person excluded from retrieval (by default
    those ``apply_edits`` found, when ``edited`` is its result); their subtrees are excluded too.
    """
    if excluded is None:
        excluded = edited.excluded if isinstance(edited, AppliedEdits) else frozenset()
    rows: list[FlatNodeRow] = []

    def visit(node: TreeNode, depth: int, ordinal: int, parent: FlatNodeRow | None) -> None:
        if parent is None:
            toc_path = document_title or node.title
        elif node.kind == LEAF:
            toc_path = parent.toc_path
        else:
            toc_path = f"{parent.toc_path}{TOC_SEPARATOR}{node.title}"
        span_text = text[node.start_char : node.end_char]
        row = FlatNodeRow(
            order=len(rows),
            parent_order=parent.order if parent else None,
            kind=node.kind,
            depth=depth,
            ordinal=ordinal,
            title=node.title,
            summary=node.summary,
            toc_path=toc_path,
            start_char=node.start_char,
            end_char=node.end_char,
            content=span_text if node.kind == LEAF else "",
            token_count=count_tokens(span_text),
            embed_text="",
            edited=id(node) in edited,
            excluded=id(node) in excluded or (parent is not None and parent.excluded),
        )
        row.embed_text = embedding_text(
            kind=row.kind, toc_path=row.toc_path, summary=row.summary, content=row.content
        )
        rows.append(row)
        for index, child in enumerate(node.children):
            visit(child, depth + 1, index, row)

    visit(root, 0, 0, None)
    _one_passage_sections_embed_their_passage(rows)
    return rows


def _one_passage_sections_embed_their_passage(rows: list[FlatNodeRow]) -> None:
    """A section that holds one passage ("12.7 Severability" and its sentence) is embedded from
    that passage: the same text, so the same vector, and no second trip through the model for
    a "toc path: summary" that restates it. Every titled heading is a node, and one-passage
    sections are a third of a contract's sections: their summaries were most of what ingestion
    embedded beyond the document itself. A section a person wrote a summary for keeps it."""
    children: dict[int, list[FlatNodeRow]] = {}
    for row in rows:
        if row.parent_order is not None:
            children.setdefault(row.parent_order, []).append(row)
    for row in rows:
        held = children.get(row.order, [])
        one_passage = len(held) == 1 and held[0].kind == LEAF
        if row.kind != LEAF and row.parent_order is not None and not row.edited and one_passage:
            row.embed_text = held[0].embed_text


def embedding_text(*, kind: str, toc_path: str, summary: str, content: str) -> str:
    """What a node is embedded from: a leaf its own text, an internal node "toc path: summary"."""
    if kind == LEAF:
        return content
    return f"{toc_path}: {summary}" if summary else toc_path


class NodeEdit(NamedTuple):
    """What a person set on a node, carried over to a rebuilt tree (see ``apply_edits``)."""

    title: str
    summary: str
    edited: bool = True  # the title and summary are a person's
    excluded: bool = False  # a person excluded it (or a node above it) from retrieval


class AppliedEdits(frozenset[int]):
    """``id()`` of the tree nodes that took a person's title and summary (what ``flatten_tree``
    marks edited); ``excluded``: ``id()`` of those a person excluded from retrieval."""

    excluded: frozenset[int]

    def __new__(cls, edited: Collection[int] = (), excluded: Collection[int] = ()) -> Self:
        applied = super().__new__(cls, edited)
        applied.excluded = frozenset(excluded)
        return applied


def apply_edits(
    root: TreeNode, *, text: str, edits: Mapping[str, NodeEdit | tuple[str, str]]
) -> AppliedEdits:
    """Carry a person's titles, summaries and exclusions over to a freshly built tree.

    ``edits`` maps ``edit_key(kind, span text)`` of each edited node to a ``NodeEdit`` (or a
    plain (title, summary) pair); a new node of the same kind spanning the same text takes it,
    so edits survive a re-index wherever their span still exists. Returns ``id()`` of the nodes
    that took a title and summary, and (``.excluded``) of those that stay excluded.
    Structural edits (split, merge, move, group, dissolve) do not survive: the builder decides
    the new tree's shape.
    """
    taken: set[int] = set()
    excluded: set[int] = set()
    for node, _depth in root.walk():
        found = edits.get(edit_key(node.kind, text[node.start_char : node.end_char]))
        if found is None:
            continue
        edit = NodeEdit(*found)
        if edit.edited:
            node.title, node.summary = edit.title, edit.summary
            taken.add(id(node))
        if edit.excluded:
            excluded.add(id(node))
    return AppliedEdits(taken, excluded)


def edit_key(kind: str, span_text: str) -> str:
    return f"{kind}\x00{span_text}"
