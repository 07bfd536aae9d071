"""A small indexed document with a three-level tree, saved through the real write path (no embedder)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest

from documents.models import Collection, Document, Node
from documents.services.documents import document_create
from tests.factories import CollectionFactory, UserFactory
from tests.trees import hash_embed, sec, sec_text, sec_tree, tree_save

SPEC = sec(
    "Root",
    "All of it.",
    sec("Alpha", "The first part.", sec("Inner", "Deeper.", "One fact here.", "Two facts here.")),
    sec("Beta", "The second part.", "Three facts here."),
)


@dataclass
class Tree:
    """The document and its nodes by name (pre-order: root, alpha, inner, leaf1, leaf2, beta, leaf3)."""

    owner: Any
    collection: Collection
    document: Document
    root: Node
    alpha: Node
    inner: Node
    leaf1: Node
    leaf2: Node
    beta: Node
    leaf3: Node


def tree_make(owner: Any = None) -> Tree:
    owner = owner or UserFactory.create()
    collection = CollectionFactory.create(name="Facts", slug="facts", owner=owner)
    document = document_create(
        collection=collection, content=sec_text(SPEC), title="Facts", queue=False, user=owner
    ).document
    nodes = tree_save(document, sec_tree(SPEC))
    return Tree(owner, collection, document, *nodes)


@pytest.fixture
def tree(db: None) -> Tree:
    return tree_make()


class _HashQueryEmbedder:
    """Embeds a query the way ``tests.trees.hash_embed`` embedded the tree: no model to load."""

    def embed_query(self, text: str) -> Any:
        return hash_embed([text])[0]


@pytest.fixture
def hash_queries(monkeypatch: pytest.MonkeyPatch) -> None:
    """Queries are embedded with hash vectors (the accepted-budget rows run a real retrieval)."""
    monkeypatch.setattr("retrieval.services.get_embedder", _HashQueryEmbedder)
