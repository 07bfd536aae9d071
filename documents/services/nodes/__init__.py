"""Every write to one node of a document's tree, and undo: what every surface calls.

- ``texts``: a node's title and summary (``node_update``, checked by ``node_texts_clean``);
- ``edits``: the tree edits (``node_split``, ``node_merge``, ``node_move``, ``nodes_group``,
  ``node_dissolve``, ``node_exclude``), a PATCH's title, summary and exclusion at once
  (``node_change``), and undo of the latest edit (``edit_undo``);
- ``summary``: a section's summary written again by the LLM (``node_summary_regenerate``).

Each edit runs on the tree in memory (``documents.tree_edits``, pure) and is recorded through
``documents.services.history`` (locks, versions, the edit record).
"""

from __future__ import annotations

from documents.services.nodes.edits import (
    TreeEditResult,
    edit_undo,
    node_change,
    node_dissolve,
    node_exclude,
    node_merge,
    node_move,
    node_split,
    nodes_group,
)
from documents.services.nodes.summary import (
    LLMNotConfiguredError,
    SummaryModelError,
    node_summary_regenerate,
)
from documents.services.nodes.texts import NodeEditResult, node_texts_clean, node_update
from documents.tree_edits import NodeEditError

__all__ = [
    "LLMNotConfiguredError",
    "NodeEditError",
    "NodeEditResult",
    "SummaryModelError",
    "TreeEditResult",
    "edit_undo",
    "node_change",
    "node_dissolve",
    "node_exclude",
    "node_merge",
    "node_move",
    "node_split",
    "node_summary_regenerate",
    "node_texts_clean",
    "node_update",
    "nodes_group",
]
