"""A document's tree in memory while a person edits it: plain data, no Django, no database.

Every tree edit (``documents.services.nodes``) loads the document's
nodes into an ``EditTree``, changes its shape (split, merge, move, group, dissolve, exclude,
retitle), lets ``settle`` recompute everything that follows from the shape (depth, kind, ordinal,
pre-order, spans, toc paths, token counts, which embeddings went stale), checks the result with
``documents.ingestion.tree.check_tree`` and hands ``diff`` to the writer, so only the nodes that
changed are written. ``restore`` puts back the nodes an earlier edit touched (undo).

Each operation refuses, with a ``NodeEditError`` that says what to do instead, an edit that
would break the tree: the leaves in pre-order must stay exact, contiguous slices covering the
document text; depth at most 4; kinds follow depth (1: section, 2-3: subsection).

Exclusion is stored on every node it covers: a node is excluded when a person excluded it or a
node above it, so retrieval filters on one column. ``settle`` keeps that true (a node moved into
an excluded section is excluded too).
"""

from __future__ import annotations

from documents.tree_edits.edits import EditTree
from documents.tree_edits.shape import TreeShape
from documents.tree_edits.state import (
    MAX_INTERNAL_DEPTH,
    STATE_FIELDS,
    MovePlace,
    NodeEditError,
    NodeState,
    TreeDiff,
    changed_fields,
)

__all__ = [
    "MAX_INTERNAL_DEPTH",
    "STATE_FIELDS",
    "EditTree",
    "MovePlace",
    "NodeEditError",
    "NodeState",
    "TreeDiff",
    "TreeShape",
    "changed_fields",
]
