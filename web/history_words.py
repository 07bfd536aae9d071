"""A tree edit in words for the document page's history: which node, what was done, and for a
changed title or summary the text before and after. Pure: it reads the values the selector
``documents.selectors.document_history_shown`` pulled from each ``TreeEdit``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from documents.ingestion.heading_titles import without_heading_marks

LABEL_CHARS = 60  # a node with no title is named by the opening of its text
CHANGED_FIELDS = ("title", "summary")  # the fields a person writes; shown before -> after


@dataclass(frozen=True)
class FieldChange:
    field: str
    before: str
    after: str


@dataclass(frozen=True)
class EditWords:
    action: str  # "Changed", "Split", "Moved", ... : says what was done
    node: str  # the node it was done to, by its title (or its text's opening)
    detail: str  # the rest of the sentence: "under “Payment”", "" when nothing more to say
    changes: tuple[FieldChange, ...]


def edit_words(
    *,
    operation: str,
    arguments: dict[str, Any],
    node_before: dict[str, Any] | None,
    node_after: dict[str, Any] | None,
    node_title: str | None,
    node_text: str | None,
    parent_title: str | None,
) -> EditWords:
    """``node_before``/``node_after``: the edited node's rows in the edit's ``before``/``after``
    (None when it has none there); ``node_title``/``node_text``: the node as it is now (None when
    it is gone); ``parent_title``: the new parent's title, for a move."""
    before, after = node_before or {}, node_after or {}
    name = _name(node_title or before.get("title") or "", node_text or "")
    changes = tuple(
        FieldChange(field, str(before[field]), str(after[field]))
        for field in CHANGED_FIELDS
        if field in before and field in after and before[field] != after[field]
    )
    if operation == "update":
        return EditWords("Changed", name, "", changes)
    if operation == "split":
        return EditWords("Split", name, "in two", ())
    if operation == "merge":
        return EditWords("Merged", name, "with the passage after it", ())
    if operation == "move":
        return EditWords("Moved", name, f"under “{_name(parent_title or '', '')}”", ())
    if operation == "group":
        return EditWords("Grouped", "", f"passages into a new section “{arguments.get('title', '')}”", ())
    if operation == "dissolve":
        return EditWords("Dissolved", name, "(its parts moved up a level)", ())
    if operation == "exclude":
        return EditWords("Excluded", name, "from retrieval", ())
    if operation == "include":
        return EditWords("Included", name, "in retrieval again", ())
    return EditWords(operation.capitalize(), name, "", changes)


def _name(title: str, text: str) -> str:
    if title.strip():
        return title.strip()
    opening = " ".join(without_heading_marks(text).split())
    if not opening:
        return "a node since removed"
    return opening if len(opening) <= LABEL_CHARS else opening[: LABEL_CHARS - 1].rstrip() + "…"


def edit_words_of(edit: Any) -> EditWords:
    """``edit_words`` of a ``TreeEdit`` read through ``document_history_shown``."""
    return edit_words(
        operation=edit.operation,
        arguments=edit.arguments,
        node_before=edit.node_before,
        node_after=edit.node_after,
        node_title=edit.node_title,
        node_text=edit.node_text,
        parent_title=edit.parent_title,
    )
