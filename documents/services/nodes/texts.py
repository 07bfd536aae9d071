"""A node's title and summary: checked (``node_texts_clean``) and written (``node_update``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.db import transaction

from documents.ingestion.tree import LEAF
from documents.models import Node, TreeEdit
from documents.services.history import edit_session_open, edit_session_save
from documents.services.trees import (
    NODE_SUMMARY_MAX_CHARS,
    NODE_TITLE_MAX_CHARS,
    corpus_version_bump,
    queue_embedding,
)
from documents.tree_edits import NodeEditError


@dataclass(frozen=True)
class NodeEditResult:
    node: Node
    reembedding: list[int]  # ids of the nodes queued for re-embedding (their text changed)
    edit: TreeEdit | None = None  # the history entry (None when nothing changed)


_UNSET: str = "\x00unset"


@transaction.atomic
def node_update(
    *,
    node: Node,
    title: str = _UNSET,
    summary: str = _UNSET,
    user: Any = None,
    expected_version: int | None = None,
) -> NodeEditResult:
    """Change a node's title and/or summary: marks it edited, re-embeds what changed, moves the version.

    A title is part of the toc path of every node beneath it, and internal nodes are embedded
    from "toc path: summary", so a section's new title re-embeds its inner descendants too;
    leaves are embedded from their own text and only change their displayed path. The new
    vectors are computed in the background (``documents.tasks.embed_nodes``); until then the
    nodes keep their old vector and show ``embedding_stale``. The edit survives a re-index
    wherever the node's text still exists. Recorded in the document's history (``TreeEdit``,
    undone by ``nodes.edit_undo``); ``expected_version`` (the document's ``tree_version`` the
    caller saw) refuses the edit with ``ConflictError`` when someone changed the tree since.
    """
    session = edit_session_open(document_id=node.document_id, expected_version=expected_version)
    current = session.tree.require(node.pk)
    title, summary = node_texts_clean(
        kind=current.kind,
        title=current.title if title is _UNSET else title,
        summary=current.summary if summary is _UNSET else summary,
    )
    changes = {
        field: value
        for field, value in (("title", title), ("summary", summary))
        if value != getattr(current, field)
    }
    saved = None
    if changes:
        session.tree.set_texts(current.id, title=title, summary=summary)
        saved = edit_session_save(
            session,
            operation=TreeEdit.Operation.UPDATE,
            arguments={"node": node.pk, **changes},
            user=user,
            reshaped=False,
        )
    if saved is None:
        return NodeEditResult(node=Node.objects.get(pk=node.pk), reembedding=[])
    if saved.reembedding:
        queue_embedding(saved.reembedding)
    corpus_version_bump()
    return NodeEditResult(node=Node.objects.get(pk=node.pk), reembedding=saved.reembedding, edit=saved.edit)


def node_texts_clean(*, kind: str, title: object, summary: object) -> tuple[str, str]:
    """A node's title and summary checked and normalised; ``NodeEditError`` says what is wrong.

    Separate from ``node_update`` so a form can show the same messages before anything is written.
    """
    title = _clean_node_text(title, what="title").replace("\n", " ")
    summary = _clean_node_text(summary, what="summary")
    if len(title) > NODE_TITLE_MAX_CHARS:
        raise NodeEditError(
            f"The title is {len(title)} characters; titles hold at most {NODE_TITLE_MAX_CHARS}."
        )
    if len(summary) > NODE_SUMMARY_MAX_CHARS:
        raise NodeEditError(
            f"The summary is {len(summary):,} characters; summaries hold at most {NODE_SUMMARY_MAX_CHARS:,}."
        )
    if kind != LEAF and not title:
        raise NodeEditError("A section needs a title: it names the section in the table of contents.")
    return title, summary


def _clean_node_text(value: object, *, what: str) -> str:
    if not isinstance(value, str):
        raise NodeEditError(f"A {what} is text, not {type(value).__name__}.")
    value = value.strip()
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as error:
        raise NodeEditError(
            f"The {what} has an invalid character at position {error.start}; remove it."
        ) from None
    if "\x00" in value:
        raise NodeEditError(f"The {what} contains a NUL character; remove it.")
    return value
