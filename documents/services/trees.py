"""Writes to document trees: the atomic tree swap, the lexical index, the corpus version, node edits.

Every write that changes what a query can find moves the corpus version in the same
transaction, so a cached query result never outlives the corpus it was computed on.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from django.db import connection, transaction
from django.db.models import F
from django.utils import timezone

from documents.ingestion.pipeline import TOC_SEPARATOR, NodeRow, embedding_text
from documents.ingestion.tree import LEAF, ROOT
from documents.models import CorpusVersion, Document, IngestionJob, Node
from openfable.celery import queue_task
from openfable.errors import UserInputError

NODE_TITLE_MAX_CHARS = 500


class NodeEditError(UserInputError):
    """A node edit that would break the tree or its text; the message says what to change."""


def corpus_version_bump() -> int:
    """Move the corpus version (call inside the transaction that changes the corpus)."""
    updated = CorpusVersion.objects.filter(pk=1).update(version=F("version") + 1)
    if not updated:
        CorpusVersion.objects.get_or_create(pk=1, defaults={"version": 1})
    return int(CorpusVersion.objects.values_list("version", flat=True).get(pk=1))


# Rebuilds the rows of documents.DocumentTerm for the documents given (parameter: id array) from
# their leaves' tsvectors (migration 0005 runs the same statement over every existing tree).
DOCUMENT_TERMS_SQL = (
    "INSERT INTO documents_documentterm (document_id, term, frequency) "
    "SELECT n.document_id, t.lexeme, sum(coalesce(array_length(t.positions, 1), 1)) "
    "FROM documents_node n CROSS JOIN LATERAL unnest(n.search) t "
    "WHERE n.kind = 'leaf' AND n.document_id = ANY(%s) "
    "GROUP BY n.document_id, t.lexeme"
)


def document_terms_refresh(document_ids: list[int]) -> None:
    """Rewrite the lexical index (``DocumentTerm``) of these documents from their current leaves.

    Call it in the transaction that writes a tree, so the index never disagrees with the nodes.
    """
    with connection.cursor() as cursor:
        cursor.execute("DELETE FROM documents_documentterm WHERE document_id = ANY(%s)", [document_ids])
        cursor.execute(DOCUMENT_TERMS_SQL, [document_ids])


@transaction.atomic
def document_tree_replace(
    *,
    document: Document,
    rows: list[NodeRow],
    vectors: np.ndarray,
    builder: str,
    embedding_model: str,
    job: IngestionJob | None = None,
) -> list[Node]:
    """Swap the document's tree for the new one in one transaction.

    ``rows`` come from ``documents.ingestion.pipeline.flatten_tree`` (pre-order, ``order`` =
    row index) and ``vectors`` hold one embedding per row. Queries see the old tree until the
    commit. Returns the saved nodes in ``rows`` order.
    """
    if not Document.objects.select_for_update().filter(pk=document.pk).exists():
        raise Document.DoesNotExist(f"document {document.pk} was deleted")
    with connection.cursor() as cursor:
        # One statement instead of Django's cascade collector walking the parent links.
        cursor.execute("DELETE FROM documents_node WHERE document_id = %s", [document.pk])
    saved: dict[int, Node] = {}
    for depth in sorted({row.depth for row in rows}):
        level = [row for row in rows if row.depth == depth]
        nodes = [
            Node(
                document=document,
                parent=saved[row.parent_order] if row.parent_order is not None else None,
                kind=row.kind,
                depth=row.depth,
                ordinal=row.ordinal,
                order=row.order,
                title=row.title[:NODE_TITLE_MAX_CHARS],
                summary=row.summary,
                toc_path=row.toc_path,
                start_char=row.start_char,
                end_char=row.end_char,
                content=row.content,
                token_count=row.token_count,
                embedding=vectors[row.order],
                edited=row.edited,
            )
            for row in level
        ]
        Node.objects.bulk_create(nodes, batch_size=500)
        saved.update((row.order, node) for row, node in zip(level, nodes, strict=True))
    document_terms_refresh([document.pk])
    Document.objects.filter(pk=document.pk).update(
        status=Document.Status.INDEXED,
        builder=builder,
        embedding_model=embedding_model,
        updated=timezone.now(),
    )
    if job is not None:
        IngestionJob.objects.filter(pk=job.pk).update(
            status=IngestionJob.Status.SUCCEEDED,
            stage=IngestionJob.Stage.DONE,
            progress=100,
            node_count=len(rows),
            chunk_count=sum(1 for row in rows if row.kind == LEAF),
            error="",
            finished=timezone.now(),
        )
    corpus_version_bump()
    return [saved[row.order] for row in rows]


# -- node edits ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class NodeEditResult:
    node: Node
    reembedding: list[int]  # ids of the nodes queued for re-embedding (their text changed)


_UNSET: str = "\x00unset"


@transaction.atomic
def node_update(*, node: Node, title: str = _UNSET, summary: str = _UNSET) -> NodeEditResult:
    """Change a node's title and/or summary: marks it edited, re-embeds what changed, moves the version.

    A title is part of the toc path of every node beneath it, and internal nodes are embedded
    from "toc path: summary", so a section's new title re-embeds its inner descendants too;
    leaves are embedded from their own text and only change their displayed path. The new
    vectors are computed in the background (``documents.tasks.embed_nodes``); until then the
    nodes keep their old vector and show ``embedding_stale``. The edit survives a re-index
    wherever the node's text still exists.
    """
    locked = Node.objects.select_for_update().select_related("document").get(pk=node.pk)
    title, summary = node_texts_clean(
        kind=locked.kind,
        title=locked.title if title is _UNSET else title,
        summary=locked.summary if summary is _UNSET else summary,
    )
    changes = {
        field: value
        for field, value in (("title", title), ("summary", summary))
        if value != getattr(locked, field)
    }
    if not changes:
        return NodeEditResult(node=locked, reembedding=[])

    embedded_before = _embedded_text(locked)
    for field, value in changes.items():
        setattr(locked, field, value)
    locked.edited = True
    locked.save(update_fields=[*changes, "edited"])
    stale = set(_refresh_embedding_texts(locked)) if "title" in changes else set()
    locked.refresh_from_db(fields=["toc_path"])
    if _embedded_text(locked) != embedded_before:
        stale.add(locked.pk)
    if stale:
        Node.objects.filter(pk__in=stale).update(embedding_stale=True)
        _queue_embedding(sorted(stale))
    corpus_version_bump()
    locked.refresh_from_db()
    return NodeEditResult(node=locked, reembedding=sorted(stale))


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
    if kind != LEAF and not title:
        raise NodeEditError("A section needs a title: it names the section in the table of contents.")
    return title, summary


def _refresh_embedding_texts(node: Node) -> list[int]:
    """Recompute the toc paths beneath ``node`` after its title changed; ids whose embedded text changed."""
    if node.kind == ROOT:
        return []  # the root's path is the document's title, not its own
    subtree = list(
        Node.objects.filter(
            document_id=node.document_id, start_char__gte=node.start_char, end_char__lte=node.end_char
        )
        .order_by("order")
        .only("id", "parent_id", "kind", "depth", "title", "summary", "toc_path", "content", "order")
    )
    assert node.parent_id is not None  # only the root has no parent, and it returned above
    paths: dict[int | None, str] = {}
    parent_path = Node.objects.filter(pk=node.parent_id).values_list("toc_path", flat=True).get()
    changed: list[Node] = []
    stale: list[int] = []
    for item in subtree:
        if item.pk != node.pk and item.parent_id not in paths:
            continue  # a sibling sharing the span boundary, not a descendant
        base = parent_path if item.pk == node.pk else paths[item.parent_id]
        path = base if item.kind == LEAF else f"{base}{TOC_SEPARATOR}{item.title}"
        paths[item.pk] = path
        if path != item.toc_path:
            old_text = _embedded_text(item)
            item.toc_path = path
            changed.append(item)
            if _embedded_text(item) != old_text:
                stale.append(item.pk)
    Node.objects.bulk_update(changed, ["toc_path"], batch_size=500)
    return stale


def _embedded_text(node: Node) -> str:
    return embedding_text(kind=node.kind, toc_path=node.toc_path, summary=node.summary, content=node.content)


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


def _queue_embedding(node_ids: list[int]) -> None:
    ids = sorted(node_ids)
    transaction.on_commit(lambda: queue_task("documents.tasks.embed_nodes", ids))
