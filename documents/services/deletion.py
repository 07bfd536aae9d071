"""What deleting documents takes besides their rows: their nodes cleared under a lock, and their
stored original files and page images removed once the deletion commits. Shared by deleting a
document and deleting a whole collection."""

from __future__ import annotations

from functools import partial

from django.db import connection, transaction
from django.db.models import QuerySet

from documents.models import Document
from documents.page_images import page_images_delete
from documents.services.search_index import search_index_remove


def documents_clear(documents: QuerySet[Document]) -> None:
    """Make these documents ready to delete; the caller deletes them (or their collection) next,
    in the same transaction: their nodes are gone (``_lock_and_clear_nodes``) and their files go
    after the commit (``_files_delete_on_commit``)."""
    _lock_and_clear_nodes(documents)
    _files_delete_on_commit(documents)


def _files_delete_on_commit(documents: QuerySet[Document]) -> None:
    """The stored original files of these documents (and the text layers of their pages read by
    OCR), and the page images drawn from them, go
    once their rows are gone for good."""
    files = list(documents.exclude(original="").values_list("pk", "original", "text_layer"))
    if files:
        names = [name for _, original, layer in files for name in (original, layer) if name]
        transaction.on_commit(partial(_files_delete, names))
        transaction.on_commit(partial(page_images_delete, [pk for pk, _, _ in files]))


def _files_delete(names: list[str]) -> None:
    storage = Document._meta.get_field("original").storage
    for name in names:
        storage.delete(name)


def _lock_and_clear_nodes(documents: QuerySet[Document]) -> None:
    """Lock these documents' rows (by id, the order every writer takes them in), then delete
    their nodes in one statement; the caller deletes the documents next, in the same transaction.

    A tree being saved (``document_tree_replace``) holds its document's row until it commits.
    Waiting for it here means the nodes it wrote are seen and deleted with the rest; before, the
    delete read the old nodes, the swap committed new ones, and the commit failed on the foreign
    key (IntegrityError, a 500), or the two took the nodes and the document in opposite orders
    (a deadlock). A build that reaches its save after this finds its document gone and stops
    quietly, as does one still embedding (its job row is gone at its next heartbeat).
    """
    ids = list(documents.select_for_update().order_by("pk").values_list("pk", flat=True))
    if ids:
        search_index_remove(ids)  # their collections' term counts and lengths drop with them
        with connection.cursor() as cursor:
            # One statement instead of Django's cascade collector walking the parent links.
            cursor.execute("DELETE FROM documents_node WHERE document_id = ANY(%s)", [ids])
