"""Nodes as the query side sees them: plain, frozen data with no Django in sight.

The retrieval algorithms (``expansion``, ``packing``) take ``OutlineNode`` values
built by the service layer from ``documents.Node`` rows plus the query's cosine similarity,
so they can be tested on hand-built trees without a database.

Spans are half-open ``[start_char, end_char)`` offsets into the document text. A node's span
covers exactly its children's spans (``documents.ingestion.tree.check_tree``), so within one
document two nodes overlap exactly when one is an ancestor of the other; that is what lets
``SpanIndex`` enforce "no repeated text" from spans alone.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass

from documents.ingestion.tree import KINDS, LEAF


@dataclass(frozen=True, slots=True)
class OutlineNode:
    """One node of a document tree, with the query's cosine similarity to its embedding."""

    id: int
    document_id: int
    parent_id: int | None
    depth: int
    kind: str  # one of KINDS; a plain str so rows from the ORM pass straight through
    order: int  # pre-order index in its document
    start_char: int
    end_char: int
    token_count: int
    similarity: float  # cosine of the query to this node's embedding, in [-1, 1]

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"node {self.id}: unknown kind {self.kind!r}, expected one of {sorted(KINDS)}")
        if self.start_char > self.end_char:
            raise ValueError(
                f"node {self.id}: span ends ({self.end_char}) before it starts ({self.start_char})"
            )
        if self.token_count < 0:
            raise ValueError(f"node {self.id}: token_count cannot be negative ({self.token_count})")

    @property
    def is_leaf(self) -> bool:
        return self.kind == LEAF

    def overlaps(self, other: OutlineNode) -> bool:
        """True when the two nodes would repeat text: the same node, or intersecting spans."""
        if self.document_id != other.document_id:
            return False
        if self.id == other.id:
            return True
        return self.start_char < other.end_char and other.start_char < self.end_char


class SpanIndex:
    """The spans chosen so far, per document, answering "would this node repeat text?".

    Kept spans never overlap each other, so sorted by start their ends are sorted too, and
    only the last kept span starting before a new node's end can intersect it: each query
    is a binary search instead of a scan over everything kept.
    """

    def __init__(self) -> None:
        self._spans: dict[int, list[tuple[int, int]]] = {}
        self._ids: set[int] = set()

    def __contains__(self, node: object) -> bool:
        return isinstance(node, OutlineNode) and node.id in self._ids

    def overlaps(self, node: OutlineNode) -> bool:
        if node.id in self._ids:
            return True
        spans = self._spans.get(node.document_id)
        if not spans:
            return False
        # Index of the first kept span whose start is >= node.end_char; the one before it
        # is the last kept span that starts before this node ends.
        position = bisect.bisect_left(spans, (node.end_char, -1))
        if position == 0:
            return False
        start, end = spans[position - 1]
        return start < node.end_char and node.start_char < end

    def add(self, node: OutlineNode) -> None:
        if self.overlaps(node):
            raise ValueError(f"node {node.id} overlaps a node already kept")
        self._ids.add(node.id)
        bisect.insort(self._spans.setdefault(node.document_id, []), (node.start_char, node.end_char))
