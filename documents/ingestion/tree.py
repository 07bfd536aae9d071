"""Plain-data document trees shared by every builder (LLM, structural, agent).

A tree is built from ``TreeNode`` objects before anything touches the database, so
builders, validation and invariants can be tested without Django.

Shape rules (checked by ``check_tree``):
- the root has depth 0; sections depth 1; subsections depth 2-3; leaves depth 1-4;
- every node's span ``[start_char, end_char)`` covers exactly its children's spans;
- the leaves, in pre-order, partition the document text: no gap, no overlap.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

from openfable.errors import UserInputError

ROOT = "root"
SECTION = "section"
SUBSECTION = "subsection"
LEAF = "leaf"
KINDS = (ROOT, SECTION, SUBSECTION, LEAF)
MAX_DEPTH = 4

# Which kinds may sit at which depth.
DEPTHS_BY_KIND: dict[str, range] = {
    ROOT: range(0, 1),
    SECTION: range(1, 2),
    SUBSECTION: range(2, MAX_DEPTH),
    LEAF: range(1, MAX_DEPTH + 1),
}


@dataclass
class TreeNode:
    kind: str
    start_char: int
    end_char: int
    title: str = ""
    summary: str = ""
    children: list[TreeNode] = field(default_factory=list)

    def walk(self, depth: int = 0) -> Iterator[tuple[TreeNode, int]]:
        """Pre-order traversal yielding ``(node, depth)``."""
        yield self, depth
        for child in self.children:
            yield from child.walk(depth + 1)

    def leaves(self) -> list[TreeNode]:
        return [node for node, _ in self.walk() if node.kind == LEAF]


def kind_for_depth(depth: int, *, is_leaf: bool) -> str:
    if is_leaf:
        return LEAF
    if depth == 0:
        return ROOT
    if depth == 1:
        return SECTION
    return SUBSECTION


class TreeShapeError(UserInputError):
    """The tree breaks one of the shape rules; the message says which node and why."""


def check_tree(root: TreeNode, text: str) -> None:
    """Raise ``TreeShapeError`` unless ``root`` is a well-formed tree over ``text``."""
    if root.kind != ROOT:
        raise TreeShapeError(f"the top node must be the root, not a {root.kind}")
    cursor = 0  # where the next leaf must start: the leaves tile the text in order
    for node, depth in root.walk():
        _check_node(node, depth)
        if node.kind == LEAF:
            cursor = _checked_leaf_end(node, cursor)
        else:
            _check_internal(node)
    if cursor != len(text):
        raise TreeShapeError(f"leaves end at character {cursor}, the text has {len(text)}")


def _check_node(node: TreeNode, depth: int) -> None:
    """What every node must be: a known kind, at a depth its kind may sit, a span in order."""
    if node.kind not in KINDS:
        raise TreeShapeError(f"unknown node kind {node.kind!r}")
    if depth not in DEPTHS_BY_KIND[node.kind]:
        raise TreeShapeError(f"a {node.kind} cannot sit at depth {depth} ({node.title!r})")
    if node.start_char > node.end_char:
        raise TreeShapeError(f"node {node.title!r} ends before it starts")


def _checked_leaf_end(leaf: TreeNode, cursor: int) -> int:
    """Where the next leaf must start, once ``leaf`` is found to start at ``cursor``."""
    if leaf.children:
        raise TreeShapeError("a leaf cannot have children")
    if leaf.start_char != cursor:
        raise TreeShapeError(
            f"leaves leave a gap or overlap at character {cursor} (next leaf starts at {leaf.start_char})"
        )
    return leaf.end_char


def _check_internal(node: TreeNode) -> None:
    if not node.children:
        raise TreeShapeError(f"internal node {node.title!r} has no children")
    if node.start_char != node.children[0].start_char or node.end_char != node.children[-1].end_char:
        raise TreeShapeError(f"internal node {node.title!r} does not span exactly its children")
