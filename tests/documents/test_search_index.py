"""The lexical index's statistics (``documents.services.search_index``) stay the sums they stand
for through every write that changes a tree: builds, re-indexes, edits and their undo,
exclusions, deletions, and two builds of one collection at once."""

from __future__ import annotations

import threading
from collections import Counter
from typing import Any

import pytest
from django.db import connection

from documents.models import (
    Collection,
    CollectionSearchStats,
    CollectionTerm,
    Document,
    DocumentTerm,
    Node,
    SearchableDocument,
)
from documents.services.collections import collection_create, collection_delete
from documents.services.documents import document_delete
from documents.services.nodes import edit_undo, node_exclude, node_split
from tests.factories import DocumentFactory
from tests.trees import Sec, sec, sec_text, sec_tree, tree_save

pytestmark = pytest.mark.django_db


def recounted() -> dict[str, Any]:
    """The statistics counted afresh from the trees and postings they sum."""
    searchable = {
        document.pk: (document.collection_id, document.token_count)
        for document in Document.objects.filter(
            pk__in=Node.objects.filter(kind=Node.Kind.ROOT, excluded=False).values("document_id")
        )
    }
    collections: dict[int, tuple[int, int]] = {}
    for collection_id, length in searchable.values():
        documents, tokens = collections.get(collection_id, (0, 0))
        collections[collection_id] = (documents + 1, tokens + length)
    terms = Counter(
        (collection_id, term)
        for collection_id, term in DocumentTerm.objects.values_list("document__collection_id", "term")
    )
    return {"searchable": searchable, "collections": collections, "terms": dict(terms)}


def kept() -> dict[str, Any]:
    """The statistics as the index keeps them (a term no document holds any more may keep a 0)."""
    return {
        "searchable": {
            row.document_id: (row.collection_id, row.length) for row in SearchableDocument.objects.all()
        },
        "collections": {
            row.collection_id: (row.documents, row.tokens)
            for row in CollectionSearchStats.objects.all()
            if row.documents or row.tokens
        },
        "terms": {
            (row.collection_id, row.term): row.documents
            for row in CollectionTerm.objects.all()
            if row.documents
        },
    }


def assert_in_step() -> None:
    assert kept() == recounted()


def spec(title: str, *paragraphs: str) -> Sec:
    return sec(title, "", sec("Part one", "", *paragraphs), sec("Part two", "", "The valve room is locked."))


def build(collection: Collection, title: str, *paragraphs: str) -> Document:
    tree = spec(title, *paragraphs)
    document = DocumentFactory.create(collection=collection, title=title, content=sec_text(tree))
    Document.objects.filter(pk=document.pk).update(token_count=len(document.content.split()))
    document.refresh_from_db()
    tree_save(document, sec_tree(tree))
    return document


def leaf(document: Document, opening: str) -> Node:
    return Node.objects.get(document=document, kind=Node.Kind.LEAF, content__startswith=opening)


def test_the_statistics_follow_builds_edits_undo_exclusions_and_deletions() -> None:
    plant, office = collection_create(name="Plant"), collection_create(name="Office")
    pumps = build(plant, "Pumps", "The pump hums all day. The pump needs oil.", "Spare pump parts.")
    seals = build(plant, "Seals", "Valve seals wear out. Seals are cheap.")
    memo = build(office, "Memo", "The pump in the office is a coffee machine.")
    assert_in_step()
    assert CollectionSearchStats.objects.get(collection=plant).documents == 2
    assert CollectionTerm.objects.get(collection=plant, term="pump").documents == 1
    assert CollectionTerm.objects.get(collection=plant, term="valv").documents == 2

    # An edit that changes the leaves, and its undo.
    hums = leaf(pumps, "The pump hums")
    node_split(node=hums, position=hums.start_char + 3, snap=False)  # "The" + " pump hums..."
    assert_in_step()
    edit_undo(document=pumps)
    assert_in_step()

    # A section excluded and included again; then the whole document (its root).
    part = Node.objects.get(document=seals, title="Part one")
    node_exclude(node=part, excluded=True)
    assert_in_step()
    assert CollectionTerm.objects.get(collection=plant, term="seal").documents == 0
    node_exclude(node=part, excluded=False)
    root = Node.objects.get(document=seals, kind=Node.Kind.ROOT)
    node_exclude(node=root, excluded=True)
    assert_in_step()
    assert not SearchableDocument.objects.filter(document=seals).exists()
    assert CollectionSearchStats.objects.get(collection=plant).documents == 1
    node_exclude(node=root, excluded=False)
    assert_in_step()

    # A new tree over new text (a re-index), then the document and a collection deleted.
    tree = spec("Pumps", "Pumps are serviced twice a year.")
    Document.objects.filter(pk=pumps.pk).update(content=sec_text(tree), token_count=9)
    pumps.refresh_from_db()
    tree_save(pumps, sec_tree(tree))
    assert_in_step()
    assert SearchableDocument.objects.get(document=pumps).length == 9
    document_delete(document=seals)
    assert_in_step()
    collection_delete(collection=office)
    assert_in_step()
    assert not CollectionTerm.objects.filter(collection_id=office.pk).exists()
    assert not CollectionSearchStats.objects.filter(collection_id=office.pk).exists()
    assert not Document.objects.filter(pk=memo.pk).exists()


@pytest.mark.django_db(transaction=True)
def test_two_builds_of_one_collection_at_once_add_up() -> None:
    """Many terms in common, saved by two threads at the same moment: each waits for the
    other's index write to commit (no deadlock, no lost count)."""
    plant = collection_create(name="Plant")
    words = " ".join(f"word{n}" for n in range(300))
    specs = [spec(f"Doc {n}", f"{words} pump{n}.", f"Shared {words}.") for n in range(2)]
    documents = []
    for tree in specs:
        document = DocumentFactory.create(collection=plant, content=sec_text(tree))
        documents.append(document)
    start = threading.Barrier(2)
    errors: list[BaseException] = []

    def save(document: Document, tree: Sec) -> None:
        try:
            start.wait(10)
            tree_save(document, sec_tree(tree))
        except BaseException as error:  # reported below, in the test's thread
            errors.append(error)
        finally:
            connection.close()

    threads = [threading.Thread(target=save, args=pair) for pair in zip(documents, specs, strict=True)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert errors == []
    assert_in_step()
    assert CollectionTerm.objects.get(collection=plant, term="word7").documents == 2
    assert CollectionSearchStats.objects.get(collection=plant).documents == 2
