"""Writing a person's tree edit: lock, load, write only what changed, record it so it can be undone.

``edit_session_open`` locks the document (edits of one document run one after another), checks
the tree version the caller edited and loads the nodes into an ``EditTree``; the caller changes
that tree; ``edit_session_save`` settles and validates it, writes the difference in a few
statements and records a ``TreeEdit``; ``edit_session_undo`` puts back what an edit changed.
Moving the corpus version, refreshing the lexical index and queueing re-embedding stay with the
callers (``documents.services.nodes``), in the same transaction.

Node ``order`` is unique per document through a deferrable constraint: the write defers it,
renumbers the nodes in one pass, and checks it again before it returns (``_ORDER_UNIQUE``), so
a broken numbering fails the edit, never a later commit. Writes are one statement per kind of
change (bulk updates grouped by the fields that changed), never one per node.

Cost: renumbering is what an edit near the start of a long document pays for. ``order`` is
indexed, so every renumbered row is a non-HOT update, and PostgreSQL then adds the new row
version to every index, the HNSW graph included (~0.75 ms a row on these 2 busy cores): on a
4,000-node document a split near the start took 3.1 s, group/dissolve 4.5-5 s, the same split
near the end 0.3 s, exclude 0.3 s, a retitle 0.1 s; 11-21 queries (one more per 1,000 renumbered rows).
Making that cheap needs ``order`` to leave room between positions (or the vectors to live in
their own table), which changes what ``order`` means to every reader.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.db import connection
from django.utils import timezone

from documents.ingestion.tree import LEAF
from documents.models import Document, Node, TreeEdit
from documents.selectors import document_edit_tree
from documents.tree_edits import STATE_FIELDS, EditTree, NodeState, TreeDiff, changed_fields
from openfable.errors import ConflictError, NotFoundError, UserInputError

UPDATE_BATCH = 1000
_ORDER_UNIQUE = "node_order_unique_per_document"  # DEFERRABLE INITIALLY IMMEDIATE (documents.models)


@dataclass
class EditSession:
    document: Document  # locked; only id, content, tree_version and embedding_model are loaded
    tree: EditTree


@dataclass(frozen=True)
class SavedEdit:
    edit: TreeEdit
    ids: dict[int, int]  # key in the EditTree -> node id (a node the edit created got its id here)
    reembedding: list[int]  # ids of the nodes marked embedding_stale: queue them after the commit
    leaves_changed: bool  # a leaf's text or exclusion changed: the lexical index needs a refresh

    def node_id(self, key: int) -> int:
        return self.ids.get(key, key)


def edit_session_open(*, document_id: int, expected_version: int | None) -> EditSession:
    """Lock the document, check ``expected_version`` (None: any) and load its tree."""
    if expected_version is not None and (
        isinstance(expected_version, bool) or not isinstance(expected_version, int)
    ):
        raise UserInputError(
            f"The expected tree version must be a whole number, got {expected_version!r}.",
            code="invalid_version",
        )
    document = (
        Document.objects.select_for_update()
        .only("pk", "content", "tree_version", "embedding_model")
        .filter(pk=document_id)
        .first()
    )
    if document is None:
        raise NotFoundError(f"There is no document {document_id!r}; it may have been deleted.")
    if expected_version is not None and document.tree_version != expected_version:
        raise ConflictError(
            f"Someone else changed this document's tree since you loaded it (it is at version "
            f"{document.tree_version}, you edited version {expected_version}). Reload the tree and "
            "make your edit again.",
            details={"tree_version": document.tree_version, "expected_version": expected_version},
        )
    tree = document_edit_tree(document_id=document_id, content=document.content)
    return EditSession(document=document, tree=tree)


def edit_session_save(
    session: EditSession,
    *,
    operation: str,
    arguments: Mapping[str, Any],
    user: Any = None,
    reshaped: bool = True,
) -> SavedEdit | None:
    """Settle, validate and write the session's tree; record the edit. None when nothing changed.

    ``reshaped=False``: the edit changed only texts, never the shape, so the shape is not checked
    again (a title can always be corrected, whatever a past writer left).
    """
    tree = session.tree
    tree.settle()
    if reshaped:
        tree.validate()
    diff = tree.diff()
    if diff.empty:
        return None
    text = tree.text
    text_changed = {
        after.id
        for before, after in diff.updated
        if EditTree.embedded_text_of(before, text) != EditTree.embedded_text_of(after, text)
    }
    kept = _vectors(
        [node.id for node in diff.deleted] + sorted(text_changed) + list(tree.vector_from.values())
    )
    new_vectors = {key: kept.get(source) for key, source in tree.vector_from.items() if key in tree.nodes}
    ids = _write(session.document, diff, vectors=new_vectors)
    before = [
        {**_row(node, STATE_FIELDS, ids), "embedding": _floats(kept.get(node.id))} for node in diff.deleted
    ]
    after = [_row(node, STATE_FIELDS, ids) for node in diff.created]
    for old, new in diff.updated:
        fields = changed_fields(old, new)
        row = _row(old, fields, ids)
        if new.id in text_changed:
            row.update(embedding=_floats(kept.get(new.id)), embedding_stale=old.embedding_stale)
        before.append(row)
        after.append(_row(new, fields, ids))
    edit = TreeEdit.objects.create(
        document_id=session.document.pk,
        user_id=_user_id(user),
        operation=operation,
        arguments=dict(arguments),
        before=before,
        after=after,
        tree_version=_version_bump(session.document),
        embedding_model=session.document.embedding_model,
    )
    return SavedEdit(
        edit=edit, ids=ids, reembedding=_reembedding(diff, text, ids), leaves_changed=_leaves_changed(diff)
    )


def edit_session_undo(session: EditSession, edit: TreeEdit, *, user: Any = None) -> SavedEdit:
    """Put back the nodes ``edit`` touched, exactly (the same ids, and the vectors it kept when
    the embedding model is still the same); mark it undone and move the tree version."""
    tree = session.tree
    tree.restore(before=edit.before, after=edit.after)
    usable = edit.embedding_model == session.document.embedding_model
    vectors: dict[int, Any] = {}
    for row in edit.before:
        if "embedding" not in row:
            continue
        vector = row["embedding"]
        if usable and (vector is None or len(vector) == settings.EMBEDDING_DIMENSIONS):
            vectors[row["id"]] = vector
        else:  # made by another model: embed the restored text again instead
            tree.nodes[row["id"]].embedding_stale = True
    diff = tree.diff()
    ids = _write(session.document, diff, vectors=vectors)
    edit.undone, edit.undone_at, edit.undone_by_id = True, timezone.now(), _user_id(user)
    edit.save(update_fields=["undone", "undone_at", "undone_by"])
    _version_bump(session.document)
    return SavedEdit(
        edit=edit,
        ids=ids,
        reembedding=_reembedding(diff, tree.text, ids),
        leaves_changed=_leaves_changed(diff),
    )


# -- writing ---------------------------------------------------------------------------------------


def _write(document: Document, diff: TreeDiff, *, vectors: Mapping[int, Any]) -> dict[int, int]:
    """Write ``diff``: create, update, delete (the order check deferred while renumbering). ``vectors``: embeddings to write for
    created nodes (by key) and restored ones (by id). Returns key -> id of the created nodes."""
    renumbering = any(before.order != after.order for before, after in diff.updated)
    if renumbering:
        _set_order_check("DEFERRED")

    ids: dict[int, int] = {}
    for depth in sorted({node.depth for node in diff.created}):
        level = [node for node in diff.created if node.depth == depth]
        made = [_node(document, node, ids, embedding=vectors.get(node.id)) for node in level]
        for node, row in zip(level, made, strict=True):
            if node.id > 0:
                row.pk = node.id  # restored by undo: the same id it had
        Node.objects.bulk_create(made)
        ids.update((node.id, row.pk) for node, row in zip(level, made, strict=True) if node.id < 0)

    by_fields: dict[tuple[str, ...], list[Node]] = defaultdict(list)
    for before, after in diff.updated:
        names = {"parent" if name == "parent_id" else name for name in changed_fields(before, after)}
        if after.kind == LEAF and names & {"start_char", "end_char"}:
            names.add("content")
        if after.id in vectors:
            names.add("embedding")
        row = _node(document, after, ids, embedding=vectors.get(after.id))
        row.pk = after.id
        by_fields[tuple(sorted(names))].append(row)
    for fields, rows in by_fields.items():
        Node.objects.bulk_update(rows, fields, batch_size=UPDATE_BATCH)

    if diff.deleted:
        # Last, once nothing points at them any more; one statement, no cascade collector.
        table = connection.ops.quote_name(Node._meta.db_table)
        with connection.cursor() as cursor:
            cursor.execute(f"DELETE FROM {table} WHERE id = ANY(%s)", [[node.id for node in diff.deleted]])
    if renumbering:
        _set_order_check("IMMEDIATE")  # checks the numbering now
    return ids


def _set_order_check(mode: str) -> None:
    with connection.cursor() as cursor:
        cursor.execute(f"SET CONSTRAINTS {connection.ops.quote_name(_ORDER_UNIQUE)} {mode}")


def _node(document: Document, state: NodeState, ids: Mapping[int, int], *, embedding: Any) -> Node:
    text = document.content
    return Node(
        document_id=document.pk,
        parent_id=ids.get(state.parent_id, state.parent_id) if state.parent_id is not None else None,
        kind=state.kind,
        depth=state.depth,
        ordinal=state.ordinal,
        order=state.order,
        title=state.title,
        summary=state.summary,
        toc_path=state.toc_path,
        start_char=state.start_char,
        end_char=state.end_char,
        content=text[state.start_char : state.end_char] if state.kind == LEAF else "",
        token_count=state.token_count,
        embedding=embedding,
        edited=state.edited,
        excluded=state.excluded,
        embedding_stale=state.embedding_stale,
    )


def _version_bump(document: Document) -> int:
    document.tree_version += 1
    Document.objects.filter(pk=document.pk).update(tree_version=document.tree_version)
    return document.tree_version


def _vectors(node_ids: Sequence[int]) -> dict[int, Any]:
    if not node_ids:
        return {}
    return dict(Node.objects.filter(pk__in=set(node_ids)).values_list("pk", "embedding"))


def _floats(vector: Any) -> list[float] | None:
    # JSON holds the float32 values exactly: a double prints the shortest text that reads back as it.
    return None if vector is None else [float(value) for value in vector]


def _row(node: NodeState, fields: Sequence[str], ids: Mapping[int, int]) -> dict[str, Any]:
    row: dict[str, Any] = {"id": ids.get(node.id, node.id)}
    for name in fields:
        value = getattr(node, name)
        row[name] = ids.get(value, value) if name == "parent_id" and value is not None else value
    return row


def _reembedding(diff: TreeDiff, text: str, ids: Mapping[int, int]) -> list[int]:
    """Nodes this write left stale whose text changed or that were not stale before: re-embed them."""
    found = [ids.get(node.id, node.id) for node in diff.created if node.embedding_stale]
    for before, after in diff.updated:
        if after.embedding_stale and (
            not before.embedding_stale
            or EditTree.embedded_text_of(before, text) != EditTree.embedded_text_of(after, text)
        ):
            found.append(after.id)
    return sorted(found)


def _leaves_changed(diff: TreeDiff) -> bool:
    if any(node.kind == LEAF for node in [*diff.created, *diff.deleted]):
        return True
    watched = {"start_char", "end_char", "excluded"}
    return any(
        after.kind == LEAF and watched.intersection(changed_fields(before, after))
        for before, after in diff.updated
    )


def _user_id(user: Any) -> int | None:
    return getattr(user, "pk", None) if getattr(user, "is_authenticated", False) else None
