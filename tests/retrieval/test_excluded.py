"""Nodes a person excluded from retrieval: never found, never returned, not even inside a section
taken whole; back as soon as they are included again."""

from __future__ import annotations

import numpy as np
import pytest
from django.conf import settings

from documents.ingestion.tree import LEAF
from documents.models import Document, Node
from documents.services.nodes import node_exclude
from retrieval.node_level import partly_excluded
from retrieval.paths.vector import ScoredNodeRow
from retrieval.result import RetrievalResult
from retrieval.services import retrieve
from tests.factories import DocumentFactory
from tests.fakes.llm.server import hash_vector
from tests.trees import sec, sec_text, sec_tree, tree_save

pytestmark = pytest.mark.django_db

KINGFISHER = "A kingfisher dived twice into the brook and came up with a minnow."
NOTES = sec(
    "Field notes",
    "A morning at the marsh.",
    sec(
        "Birds",
        "Birds seen from the hide.",
        "A grey heron stood still in the reeds at dawn, waiting for fish.",
        KINGFISHER,
    ),
    sec(
        "Plants",
        "Plants along the ditch.",
        "Marsh marigolds flowered along the ditch in bright yellow clumps.",
        "Reed mace stood tall beside the open water.",
    ),
)


@pytest.fixture
def notes() -> Document:
    document = DocumentFactory.create(title="Notes", content=sec_text(NOTES))
    tree_save(document, sec_tree(NOTES))
    return document


def ask(query: str, *, like: str, budget: int = 100) -> RetrievalResult:
    """A vector-mode query whose embedding is the hash vector of ``like`` (a node's embedded text)."""
    vector = np.array(hash_vector(like, settings.EMBEDDING_DIMENSIONS), dtype=np.float32)
    return retrieve(query=query, token_budget=budget, mode="vector", query_embedding=vector, use_cache=False)


def returned_text(result: RetrievalResult) -> str:
    return "\n".join(chunk.text for chunk in result.chunks)


def test_an_excluded_leaf_vanishes_from_results_and_comes_back_when_included(notes: Document) -> None:
    kingfisher = Node.objects.get(document=notes, kind=LEAF, content__startswith=KINGFISHER)
    found = ask("kingfisher dived into the brook", like=KINGFISHER)
    assert "kingfisher" in returned_text(found) and found.routing == "documents", "the note fits whole"

    node_exclude(node=kingfisher, excluded=True)
    hidden = ask("kingfisher dived into the brook", like=KINGFISHER)
    assert "kingfisher" not in returned_text(hidden)
    assert hidden.routing == "nodes", "a document with an excluded part is never returned whole"
    assert kingfisher.pk not in {chunk.node_id for chunk in hidden.chunks}
    birds = Node.objects.get(document=notes, title="Birds")
    assert birds.pk not in {chunk.node_id for chunk in hidden.chunks}, (
        "a section holding it is not packed whole"
    )
    assert "grey heron" in returned_text(hidden), "its sibling is still there"

    node_exclude(node=kingfisher, excluded=False)
    back = ask("kingfisher dived into the brook", like=KINGFISHER)
    assert "kingfisher" in returned_text(back)


def test_an_excluded_section_takes_its_subtree_with_it(notes: Document) -> None:
    node_exclude(node=Node.objects.get(document=notes, title="Birds"), excluded=True)
    result = ask("heron kingfisher birds", like=KINGFISHER, budget=1000)
    text = returned_text(result)
    assert "heron" not in text and "kingfisher" not in text
    assert "Marsh marigolds" in text and "Reed mace" in text, "the rest of the document still answers"


def test_a_document_excluded_at_its_root_is_not_found_at_all(notes: Document) -> None:
    node_exclude(node=Node.objects.get(document=notes, kind=Node.Kind.ROOT), excluded=True)
    result = ask("kingfisher", like=KINGFISHER, budget=1000)
    assert result.chunks == () and not any(hit.document_id == notes.pk for hit in result.documents)


def _row(node_id: int, parent: int | None, kind: str, start: int, end: int) -> ScoredNodeRow:
    return ScoredNodeRow(node_id, 1, parent, 0, kind, node_id, start, end, 1, "", "", "", 0.0)


def test_partly_excluded_finds_every_section_above_missing_text() -> None:
    # root(0-30) > A(0-20) > [leaf 0-10, B(10-20) > [leaf 10-15, (excluded leaf 15-20)]], leaf 20-30
    rows = [
        _row(1, None, "root", 0, 30),
        _row(2, 1, "section", 0, 20),
        _row(3, 2, LEAF, 0, 10),
        _row(4, 2, "subsection", 10, 20),
        _row(5, 4, LEAF, 10, 15),
        _row(7, 1, LEAF, 20, 30),
    ]
    assert partly_excluded(rows) == {1, 2, 4}
    assert partly_excluded([*rows[:5], _row(6, 4, LEAF, 15, 20), rows[5]]) == set()
