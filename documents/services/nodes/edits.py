"""Edits of a document's tree shape, exclusion from retrieval, and undo: what every surface calls.

Each edit is one keyword-only function under ``transaction.atomic`` that

- locks the document, and with ``expected_version`` (the ``Document.tree_version`` the caller
  loaded) refuses with ``ConflictError`` when someone changed the tree since;
- applies the edit to the tree in memory and checks it there (``documents.tree_edits.EditTree``): the
  leaves, read in pre-order, still partition the document text exactly, depth <= 4, kinds
  follow depth. An edit that would break that is refused with a ``NodeEditError`` whose message
  says what to do instead, and nothing is written;
- writes only the nodes that changed, records one ``TreeEdit`` (who, what, every touched node
  before and after) and moves the tree version and the corpus version;
- marks the nodes whose embedded text changed ``embedding_stale`` and re-embeds them in the
  background after the commit (internal nodes embed "toc path: summary", so a changed title or
  place re-embeds the sections beneath; leaves embed their own text).

Titles, summaries (``texts.node_update``) and exclusions survive a re-index wherever their text
still exists. The structural edits here (split, merge, move, group, dissolve) do not: a re-index
builds the shape anew, and clears the document's history.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from django.db import transaction

from documents.models import Document, Node, TreeEdit
from documents.services.history import (
    EditSession,
    SavedEdit,
    edit_session_open,
    edit_session_save,
    edit_session_undo,
)
from documents.services.nodes.texts import node_texts_clean, node_update
from documents.services.search_index import search_index_refresh
from documents.services.trees import corpus_version_bump, queue_embedding
from documents.tree_edits import NodeEditError
from openfable.errors import ConflictError


@dataclass(frozen=True)
class TreeEditResult:
    edit: TreeEdit | None  # the history entry written (undone, for edit_undo); None: nothing changed
    node: Node | None  # the node the edit made or acted on, as it is now (None after dissolve/undo)
    tree_version: int  # the document's tree version now: pass it as expected_version next time
    reembedding: list[int] = field(default_factory=list)  # ids queued for re-embedding
    created: list[int] = field(default_factory=list)  # ids of the nodes the edit made (split, group)


@transaction.atomic
def node_split(
    *,
    node: Node,
    position: int,
    snap: bool = True,
    user: Any = None,
    expected_version: int | None = None,
) -> TreeEditResult:
    """Split a leaf in two at ``position``, a character offset of the document strictly inside it.

    With ``snap`` the cut moves to the nearest sentence boundary inside the leaf (refused for a
    one-sentence leaf); ``snap=False`` cuts exactly at ``position``. The leaf keeps its id as the
    first half; the second half is new (``created``) and starts with the leaf's old vector until
    it is re-embedded. Does not survive a re-index.
    """
    session = _open(node, expected_version)
    cut = session.tree.sentence_cut(node.pk, position) if snap else position
    second = session.tree.split(node.pk, cut)
    arguments = {"node": node.pk, "position": position, "snap": snap, "cut": cut}
    saved = edit_session_save(session, operation=TreeEdit.Operation.SPLIT, arguments=arguments, user=user)
    return _finish(session, saved, node_key=node.pk, created=[second])


@transaction.atomic
def node_merge(*, node: Node, user: Any = None, expected_version: int | None = None) -> TreeEditResult:
    """Merge a leaf with the next leaf of the same section (refused when the next sibling is a
    section or there is none). The leaf keeps its id; the next one goes. Does not survive a re-index."""
    session = _open(node, expected_version)
    removed = session.tree.merge(node.pk)
    arguments = {"node": node.pk, "merged": removed}
    saved = edit_session_save(session, operation=TreeEdit.Operation.MERGE, arguments=arguments, user=user)
    return _finish(session, saved, node_key=node.pk)


@transaction.atomic
def node_move(
    *,
    node: Node,
    parent: Node,
    position: int | None = None,
    user: Any = None,
    expected_version: int | None = None,
) -> TreeEditResult:
    """Move ``node`` with its subtree to ``position`` among the other children of ``parent`` (0 =
    first; None = the place under ``parent`` where the text stays in order, else last), or to
    another place among its siblings. ``selectors.node_move_places`` lists every place this takes.

    The leaves must still read in text order afterwards, so a node can move only where its text
    already sits: to the end of the section before it, the start of the section after it, or up
    to its parent's level at its own place. Refused otherwise, and when it would go into its own
    subtree, under a leaf, deeper than 4 levels, or leave its section empty. Kinds follow the new
    depth (a section moved under another becomes a subsection). Does not survive a re-index.
    """
    session = _open(node, expected_version)
    if parent.document_id != node.document_id:
        raise NodeEditError("A node can only move within its own document; choose a parent in the same tree.")
    session.tree.move(node.pk, parent.pk, position)
    arguments = {"node": node.pk, "parent": parent.pk, "position": position}
    saved = edit_session_save(session, operation=TreeEdit.Operation.MOVE, arguments=arguments, user=user)
    return _finish(session, saved, node_key=node.pk)


@transaction.atomic
def nodes_group(
    *,
    first: Node,
    last: Node,
    title: str,
    summary: str = "",
    user: Any = None,
    expected_version: int | None = None,
) -> TreeEditResult:
    """Put the consecutive siblings from ``first`` to ``last`` into a new section (a subsection
    below depth 1) with this title and summary, at their place. Does not survive a re-index
    (its title does, when a rebuilt section spans the same text)."""
    session = _open(first, expected_version)
    if last.document_id != first.document_id:
        raise NodeEditError("The first and the last node of a group must be in the same document.")
    title, summary = node_texts_clean(kind=Node.Kind.SECTION, title=title, summary=summary)
    section = session.tree.group(first.pk, last.pk, title=title, summary=summary)
    arguments = {"first": first.pk, "last": last.pk, "title": title, "summary": summary}
    saved = edit_session_save(session, operation=TreeEdit.Operation.GROUP, arguments=arguments, user=user)
    return _finish(session, saved, node_key=section, created=[section])


@transaction.atomic
def node_dissolve(*, node: Node, user: Any = None, expected_version: int | None = None) -> TreeEditResult:
    """Remove a section: its children move up into its parent, at its place. Does not survive a re-index."""
    session = _open(node, expected_version)
    session.tree.dissolve(node.pk)
    saved = edit_session_save(
        session, operation=TreeEdit.Operation.DISSOLVE, arguments={"node": node.pk}, user=user
    )
    return _finish(session, saved, node_key=None)


@transaction.atomic
def node_exclude(
    *, node: Node, excluded: bool = True, user: Any = None, expected_version: int | None = None
) -> TreeEditResult:
    """Exclude a node and everything beneath it from retrieval (``excluded=True``), or include
    them again (refused inside an excluded section: include that section instead).

    Excluded text is never returned by a query, and a section holding excluded text is never
    returned whole. Survives a re-index wherever the node's text still exists.
    """
    if not isinstance(excluded, bool):
        raise NodeEditError(f"excluded is true or false, not {excluded!r}.")
    session = _open(node, expected_version)
    session.tree.set_excluded(node.pk, excluded)
    operation = TreeEdit.Operation.EXCLUDE if excluded else TreeEdit.Operation.INCLUDE
    saved = edit_session_save(session, operation=operation, arguments={"node": node.pk}, user=user)
    return _finish(session, saved, node_key=node.pk)


@transaction.atomic
def node_change(
    *,
    node: Node,
    user: Any = None,
    expected_version: int | None = None,
    excluded: bool | None = None,
    **texts: str,
) -> Node:
    """A node's ``title`` and/or ``summary`` (``texts``) and its exclusion, all or nothing: one PATCH.

    One transaction: a refused exclusion leaves the new title unwritten too. ``expected_version``
    is checked once, by the first change; the document stays locked from there to the commit,
    so no other edit can come between the two (each is recorded in the history, and undone, on
    its own).
    """
    unknown = sorted(set(texts) - {"title", "summary"})
    if unknown:
        raise NodeEditError(f"A node has no field {unknown[0]!r} to change; use title or summary.")
    if texts:
        node_update(node=node, user=user, expected_version=expected_version, **texts)
        expected_version = None  # checked just now, under the lock held to the commit
    if excluded is not None:
        node_exclude(node=node, excluded=excluded, user=user, expected_version=expected_version)
    return Node.objects.defer("embedding").get(pk=node.pk)


@transaction.atomic
def edit_undo(*, document: Document, user: Any = None, expected_version: int | None = None) -> TreeEditResult:
    """Undo the document's latest edit not yet undone, exactly: the nodes it touched get their old
    fields back, nodes it deleted return with their ids and vectors, nodes it made go.

    Call again to undo the one before. ``ConflictError`` when there is nothing to undo (none
    since the last re-index, which clears the history).
    """
    session = edit_session_open(document_id=document.pk, expected_version=expected_version)
    edit = (
        TreeEdit.objects.select_for_update()
        .filter(document_id=document.pk, undone=False)
        .order_by("-id")
        .first()
    )
    if edit is None:
        raise ConflictError(
            "There is no edit of this document left to undo (a re-index clears its history).",
            code="nothing_to_undo",
        )
    saved = edit_session_undo(session, edit, user=user)
    return _finish(session, saved, node_key=None)


def _open(node: Node, expected_version: int | None) -> EditSession:
    session = edit_session_open(document_id=node.document_id, expected_version=expected_version)
    session.tree.require(node.pk)
    return session


def _finish(
    session: EditSession, saved: SavedEdit | None, *, node_key: int | None, created: list[int] | None = None
) -> TreeEditResult:
    """After the write: lexical index, corpus version, re-embedding, and what the caller gets back."""
    document = session.document
    if saved is None:
        node = Node.objects.defer("embedding").get(pk=node_key) if node_key is not None else None
        return TreeEditResult(edit=None, node=node, tree_version=document.tree_version)
    if saved.leaves_changed:
        search_index_refresh([document.pk])
    if saved.reembedding:
        queue_embedding(saved.reembedding)
    corpus_version_bump()
    node = Node.objects.defer("embedding").get(pk=saved.node_id(node_key)) if node_key is not None else None
    return TreeEditResult(
        edit=saved.edit,
        node=node,
        tree_version=document.tree_version,
        reembedding=saved.reembedding,
        created=[saved.node_id(key) for key in created or []],
    )
