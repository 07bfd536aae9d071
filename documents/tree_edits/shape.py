"""A document's tree loaded for editing: reading it, recomputing what follows from its shape
(``settle``), checking it (``validate``), the rows that changed (``diff``) and undo (``restore``).

The edits a person makes are in ``documents.tree_edits.edits.EditTree``, built on this class.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from documents.ingestion.tree import LEAF, MAX_DEPTH, TreeNode, TreeShapeError, check_tree, kind_for_depth
from documents.ingestion.tree_rows import TOC_SEPARATOR, embedding_text
from documents.tree_edits.state import (
    MAX_INTERNAL_DEPTH,
    STATE_FIELDS,
    NodeEditError,
    NodeState,
    TreeDiff,
)
from openfable.errors import ConflictError, NotFoundError


class TreeShape:
    """The nodes of one document, their children in order, and the state they were loaded in."""

    def __init__(self, nodes: Iterable[NodeState], *, text: str, count_tokens: Callable[[str], int]):
        self.text = text
        self._count_tokens = count_tokens
        self.before: dict[int, NodeState] = {node.id: node for node in nodes}
        self.nodes: dict[int, NodeState] = {
            key: dataclasses.replace(node) for key, node in self.before.items()
        }
        roots = [node.id for node in self.nodes.values() if node.parent_id is None]
        if len(roots) != 1:
            raise ConflictError("This document has no tree yet; wait until it is indexed, then edit it.")
        self.root_id = roots[0]
        self.children: dict[int, list[int]] = {}
        self._link()
        # New node -> the node whose stored vector it starts with until it is re-embedded.
        self.vector_from: dict[int, int] = {}
        self._next_key = -1

    # -- reading ---------------------------------------------------------------------------------

    def require(self, node_id: int) -> NodeState:
        node = self.nodes.get(node_id)
        if node is None:
            raise NotFoundError(
                f"Node {node_id} is not in this document's tree (an edit or a re-index replaced it). "
                "Reload the tree and choose again."
            )
        return node

    def label(self, node: NodeState) -> str:
        """How a message names a node: 'the section "Formation"', 'leaf 12 ("Volcanoes form…")'."""
        if node.kind == LEAF:
            words = " ".join(self.text[node.start_char : node.end_char].split()[:6])
            return f'leaf {node.id} ("{words}…")'
        return f'the {node.kind} "{node.title}"'

    def subtree(self, node_id: int) -> list[int]:
        """``node_id`` and everything beneath it, in pre-order."""
        found = [node_id]
        for child in self.children[node_id]:
            found.extend(self.subtree(child))
        return found

    def ancestors(self, node_id: int) -> list[int]:
        """The parent, its parent, ... up to the root."""
        found = []
        parent = self.nodes[node_id].parent_id
        while parent is not None:
            found.append(parent)
            parent = self.nodes[parent].parent_id
        return found

    def leaves_in_order(self) -> list[NodeState]:
        return [self.nodes[key] for key in self.subtree(self.root_id) if self.nodes[key].kind == LEAF]

    # -- after an edit -----------------------------------------------------------------------------

    def settle(self) -> None:
        """Recompute what follows from the shape: depth, kind, ordinal, order, spans, exclusion, toc
        paths, token counts, and ``embedding_stale`` where the embedded text changed.

        A stored value is kept where nothing it depends on changed, so an edit touches only
        the nodes it changes.
        """
        self._settle_spans(self.root_id)
        order = 0
        stack: list[tuple[int, int, int]] = [(self.root_id, 0, 0)]  # (key, depth, ordinal)
        while stack:
            key, depth, ordinal = stack.pop()
            node = self.nodes[key]
            parent = self.nodes[node.parent_id] if node.parent_id is not None else None
            node.depth, node.ordinal, node.order = depth, ordinal, order
            order += 1
            if node.kind != LEAF:
                node.kind = kind_for_depth(depth, is_leaf=False)
            if parent is not None:
                node.excluded = node.excluded or parent.excluded
                node.toc_path = self._toc_path(node, parent)
            was = self.before.get(key)
            span_changed = was is None or (was.start_char, was.end_char) != (node.start_char, node.end_char)
            if span_changed:
                node.token_count = self._count_tokens(self.text[node.start_char : node.end_char])
            if was is None or self.embedded_text(node) != self.embedded_text(was):
                node.embedding_stale = True
            stack.extend(
                (child, depth + 1, index) for index, child in reversed(list(enumerate(self.children[key])))
            )

    def validate(self) -> None:
        """Raise ``NodeEditError`` unless the tree is well formed over the text (``check_tree``)."""
        try:
            check_tree(self._tree_node(self.root_id), self.text)
        except TreeShapeError as error:
            raise NodeEditError(f"The edit would break the tree ({error}); nothing was changed.") from None

    def diff(self) -> TreeDiff:
        created = sorted(
            (node for key, node in self.nodes.items() if key not in self.before), key=lambda n: n.depth
        )
        deleted = [node for key, node in self.before.items() if key not in self.nodes]
        updated = [
            (self.before[key], node)
            for key, node in self.nodes.items()
            if key in self.before and node != self.before[key]
        ]
        return TreeDiff(created=created, deleted=deleted, updated=updated)

    def restore(self, *, before: list[Mapping[str, Any]], after: list[Mapping[str, Any]]) -> None:
        """Undo an edit recorded as ``before`` / ``after`` rows (``id`` plus the fields it changed;
        whole rows for the nodes it created or deleted): the touched nodes get their old values,
        the nodes it created go, the nodes it deleted come back with their ids.

        ``ConflictError`` when the tree is no longer as that edit left it (then undo cannot be exact).
        """
        after_ids = {row["id"] for row in after}
        before_ids = {row["id"] for row in before}
        for row in after:
            node = self.nodes.get(row["id"])
            differs = node is None or any(
                getattr(node, name) != value
                for name, value in row.items()
                if name in STATE_FIELDS and name != "embedding_stale"  # re-embedding moves it freely
            )
            if differs:
                raise ConflictError(
                    "The tree changed since this edit in a way undo cannot follow; reload the tree and "
                    "make the change by hand."
                )
        for key in after_ids - before_ids:
            del self.nodes[key]
        for row in before:
            values = {name: value for name, value in row.items() if name in STATE_FIELDS}
            if row["id"] in self.nodes:
                for name, value in values.items():
                    setattr(self.nodes[row["id"]], name, value)
            else:
                self.nodes[row["id"]] = NodeState(id=row["id"], **values)
        self._link()
        self.validate()
        if not self._numbered_by_shape():
            raise ConflictError(
                "The restored tree does not number its nodes by its shape; reload the tree and make the "
                "change by hand."
            )

    @staticmethod
    def embedded_text_of(node: NodeState, text: str) -> str:
        return embedding_text(
            kind=node.kind,
            toc_path=node.toc_path,
            summary=node.summary,
            content=text[node.start_char : node.end_char] if node.kind == LEAF else "",
        )

    def embedded_text(self, node: NodeState) -> str:
        """What the node is embedded from (``documents.ingestion.tree_rows.embedding_text``)."""
        return self.embedded_text_of(node, self.text)

    # -- helpers -----------------------------------------------------------------------------------

    def _link(self) -> None:
        self.children = {key: [] for key in self.nodes}
        for node in sorted(self.nodes.values(), key=lambda n: (n.ordinal, n.order)):
            if node.parent_id is not None:
                self.children[node.parent_id].append(node.id)

    def _index(self, node_id: int) -> int:
        parent = self.nodes[node_id].parent_id
        assert parent is not None
        return self.children[parent].index(node_id)

    def _new_node(self, like: NodeState, **fields: Any) -> NodeState:
        key, self._next_key = self._next_key, self._next_key - 1
        node = dataclasses.replace(
            like, id=key, edited=False, excluded=False, embedding_stale=True, token_count=0, **fields
        )
        self.nodes[key] = node
        self.children[key] = []
        return node

    def _insert(self, node: NodeState, *, parent_id: int | None, index: int) -> None:
        assert parent_id is not None
        node.parent_id = parent_id
        self.nodes[node.id] = node
        self.children.setdefault(node.id, [])
        self.children[parent_id].insert(index, node.id)

    def _remove(self, node_id: int) -> None:
        parent = self.nodes[node_id].parent_id
        assert parent is not None
        self.children[parent].remove(node_id)
        for key in self.subtree(node_id):
            del self.nodes[key]
            self.children.pop(key, None)

    def _check_depths(self, node_id: int, *, shift: int, doing: str) -> None:
        """Refuse when shifting this subtree by ``shift`` levels puts a node deeper than allowed."""
        problem = self._depth_problem(node_id, shift=shift, doing=doing)
        if problem is not None:
            raise NodeEditError(problem)

    def _depth_problem(self, node_id: int, *, shift: int, doing: str) -> str | None:
        for key in self.subtree(node_id):
            node = self.nodes[key]
            depth = node.depth + shift
            limit = MAX_DEPTH if node.kind == LEAF else MAX_INTERNAL_DEPTH
            if depth > limit:
                what = "a leaf" if node.kind == LEAF else "a section"
                return (
                    f"{doing} would put {what} ({self.label(node)}) at depth {depth}; a tree holds at "
                    f"most {MAX_DEPTH} levels below the root, sections at most {MAX_INTERNAL_DEPTH}. "
                    "Choose a place higher up, or dissolve a section inside it first."
                )
        return None

    def _numbered_by_shape(self) -> bool:
        """Whether every node's depth, ordinal and order are those of its place in the tree."""
        order = 0
        stack: list[tuple[int, int, int]] = [(self.root_id, 0, 0)]
        while stack:
            key, depth, ordinal = stack.pop()
            node = self.nodes[key]
            if (node.depth, node.ordinal, node.order) != (depth, ordinal, order):
                return False
            order += 1
            stack.extend(
                (child, depth + 1, index) for index, child in reversed(list(enumerate(self.children[key])))
            )
        return order == len(self.nodes)

    def _settle_spans(self, key: int) -> None:
        children = self.children[key]
        for child in children:
            self._settle_spans(child)
        node = self.nodes[key]
        if node.kind != LEAF and children:
            node.start_char = self.nodes[children[0]].start_char
            node.end_char = self.nodes[children[-1]].end_char

    def _toc_path(self, node: NodeState, parent: NodeState) -> str:
        was = self.before.get(node.id)
        old_parent = self.before.get(parent.id)
        unchanged = (
            was is not None
            and old_parent is not None
            and was.parent_id == parent.id
            and was.title == node.title
            and (was.kind == LEAF) == (node.kind == LEAF)
            and old_parent.toc_path == parent.toc_path
        )
        if unchanged:
            assert was is not None
            return was.toc_path  # as stored: an edit elsewhere never rewrites it
        return parent.toc_path if node.kind == LEAF else f"{parent.toc_path}{TOC_SEPARATOR}{node.title}"

    def _tree_node(self, key: int) -> TreeNode:
        node = self.nodes[key]
        return TreeNode(
            kind=node.kind,
            start_char=node.start_char,
            end_char=node.end_char,
            title=node.title,
            summary=node.summary,
            children=[self._tree_node(child) for child in self.children[key]],
        )
