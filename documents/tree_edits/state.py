"""The plain data a tree edit works on: a node's stored fields, the diff an edit leaves, the error."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from documents.ingestion.tree import DEPTHS_BY_KIND, SUBSECTION
from openfable.errors import UserInputError

# The deepest an internal node may sit: subsections end at depth 3, only leaves reach MAX_DEPTH.
MAX_INTERNAL_DEPTH = max(DEPTHS_BY_KIND[SUBSECTION])


class NodeEditError(UserInputError):
    """A node edit that would break the tree or its text; the message says what to change."""


@dataclass
class NodeState:
    """A node's stored fields as the editor sees them (a leaf's text is ``text[start:end]``).

    ``id`` is the database id, or a negative key for a node this edit creates.
    """

    id: int
    parent_id: int | None
    kind: str
    depth: int
    ordinal: int
    order: int
    title: str
    summary: str
    toc_path: str
    start_char: int
    end_char: int
    token_count: int
    edited: bool
    excluded: bool
    embedding_stale: bool


# The fields of NodeState besides the id, in the order of its constructor: what a snapshot holds.
STATE_FIELDS: tuple[str, ...] = tuple(field.name for field in dataclasses.fields(NodeState))[1:]


@dataclass(frozen=True)
class TreeDiff:
    created: list[NodeState]  # parents before children
    deleted: list[NodeState]
    updated: list[tuple[NodeState, NodeState]]  # (before, after), only nodes with a change

    @property
    def empty(self) -> bool:
        return not (self.created or self.deleted or self.updated)


def changed_fields(before: NodeState, after: NodeState) -> list[str]:
    return [name for name in STATE_FIELDS if getattr(before, name) != getattr(after, name)]


@dataclass(frozen=True)
class MovePlace:
    """A place a node can move to: ``position`` among the other children of ``parent_id``."""

    parent_id: int
    position: int  # 0 = first
    after_id: int | None  # the sibling it lands after (None: first)
    last: bool  # after all the other children
