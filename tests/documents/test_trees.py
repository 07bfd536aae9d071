"""node_update: a person's title or summary, re-embedded in the background, kept across re-indexing."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pytest

from documents.ingestion.tree import LEAF, ROOT, SECTION, SUBSECTION, TreeNode, check_tree
from documents.models import Document, Node
from documents.selectors import corpus_version
from documents.services.documents import document_create, document_reindex
from documents.services.jobs import job_run_now
from documents.services.nodes import NodeEditError, node_update
from documents.services.reembed import nodes_embed_stale
from openfable.embeddings import get_embedder
from tests.factories import CollectionFactory

pytestmark = pytest.mark.django_db

TEXT = (
    "# Field guide\n\nA short guide to volcanoes and their eruptions.\n\n"
    "## Formation\n\nVolcanoes form where magma reaches the surface.\n\n"
    "### Hotspots\n\nSome volcanoes sit far from plate edges, above plumes of hot mantle.\n\n"
    "## Eruptions\n\nShield volcanoes erupt gently. Stratovolcanoes erupt explosively.\n"
)


def _guide_tree() -> TreeNode:
    """Root, Formation (with Hotspots) and Eruptions, one leaf per paragraph, spans exact."""
    spans = []
    start = 0
    for paragraph in TEXT.split("\n\n"):
        end = start + len(paragraph) + (2 if start + len(paragraph) < len(TEXT) else 0)
        spans.append((start, min(end, len(TEXT))))
        start = end
    leaves = [TreeNode(kind=LEAF, start_char=a, end_char=b) for a, b in spans]
    hotspots = TreeNode(
        SUBSECTION, spans[4][0], spans[5][1], "Hotspots", "Volcanoes above mantle plumes.", leaves[4:6]
    )
    formation = TreeNode(
        SECTION,
        spans[2][0],
        spans[5][1],
        "Formation",
        "Where volcanoes form.",
        [leaves[2], leaves[3], hotspots],
    )
    eruptions = TreeNode(SECTION, spans[6][0], spans[7][1], "Eruptions", "How volcanoes erupt.", leaves[6:8])
    return TreeNode(ROOT, 0, len(TEXT), "Field guide", "Volcanoes.", [*leaves[0:2], formation, eruptions])


@pytest.fixture
def indexed() -> Document:
    """A document indexed through the agent path's tree (the shape here must not depend on a builder)."""
    document = document_create(
        collection=CollectionFactory.create(), content=TEXT, title="Guide", builder="agent", queue=False
    ).document
    tree = _guide_tree()
    check_tree(tree, TEXT)
    run = job_run_now(document_id=document.pk, tree=tree)
    assert run is not None and run.succeeded, run and run.job.error
    document.refresh_from_db()
    return document


def _node(document: Document, **filters: Any) -> Node:
    return Node.objects.get(document=document, **filters)


def test_a_new_section_title_renames_the_paths_beneath_it_and_re_embeds_what_changed(
    indexed: Document, django_capture_on_commit_callbacks: Callable[..., Any]
) -> None:
    formation = _node(indexed, kind=Node.Kind.SECTION, title="Formation")
    hotspots = _node(indexed, kind=Node.Kind.SUBSECTION, title="Hotspots")
    leaf = Node.objects.filter(
        document=indexed, kind=Node.Kind.LEAF, start_char__gte=hotspots.start_char
    ).first()
    assert leaf is not None
    old_vector = np.array(formation.embedding)
    before = corpus_version()

    with django_capture_on_commit_callbacks() as queued:
        result = node_update(node=formation, title="How volcanoes form")

    assert len(queued) == 1, "one background re-embedding, queued after the commit"
    formation.refresh_from_db()
    hotspots.refresh_from_db()
    leaf.refresh_from_db()
    assert formation.title == "How volcanoes form" and formation.edited
    assert formation.toc_path == "Guide › How volcanoes form"
    assert hotspots.toc_path == "Guide › How volcanoes form › Hotspots"
    assert leaf.toc_path == hotspots.toc_path
    # Internal nodes embed "toc path: summary": both changed; a leaf embeds its own text: not.
    assert sorted(result.reembedding) == sorted([formation.pk, hotspots.pk])
    assert formation.embedding_stale and hotspots.embedding_stale and not leaf.embedding_stale
    assert corpus_version() > before

    assert nodes_embed_stale(node_ids=result.reembedding) == 2
    formation.refresh_from_db()
    assert not formation.embedding_stale
    expected = get_embedder().embed_passages([f"{formation.toc_path}: {formation.summary}"])[0]
    assert np.allclose(np.array(formation.embedding), expected, atol=1e-5)
    assert not np.allclose(np.array(formation.embedding), old_vector, atol=1e-3)


def test_the_background_task_runs_after_the_commit(
    indexed: Document, eager_tasks: None, django_capture_on_commit_callbacks: Callable[..., Any]
) -> None:
    section = _node(indexed, kind=Node.Kind.SECTION, title="Eruptions")
    with django_capture_on_commit_callbacks(execute=True):
        node_update(node=section, summary="How and why volcanoes erupt.")
    section.refresh_from_db()
    assert (
        section.summary == "How and why volcanoes erupt." and section.edited and not section.embedding_stale
    )


def test_an_edit_survives_a_re_index_where_its_text_still_exists(indexed: Document) -> None:
    section = _node(indexed, kind=Node.Kind.SECTION, title="Eruptions")
    node_update(node=section, title="Eruption styles", summary="Gentle and explosive eruptions.")
    document_reindex(document=indexed, queue=False)
    run = job_run_now(document_id=indexed.pk)
    assert run is not None and run.succeeded
    rebuilt = Node.objects.get(document=indexed, kind=Node.Kind.SECTION, start_char=section.start_char)
    assert rebuilt.pk != section.pk, "a new tree"
    assert (rebuilt.title, rebuilt.summary, rebuilt.edited) == (
        "Eruption styles",
        "Gentle and explosive eruptions.",
        True,
    )


def test_a_vector_is_not_written_over_an_edit_made_while_it_was_computed(indexed: Document) -> None:
    section = _node(indexed, kind=Node.Kind.SECTION, title="Eruptions")
    first = node_update(node=section, summary="First wording.")
    real = get_embedder()

    class EditsWhileEmbedding:
        """The embedder of the first run, while a second edit lands (as a person could)."""

        model_name, dimensions = real.model_name, real.dimensions

        def embed_passages(self, texts: Sequence[str]) -> np.ndarray:
            Node.objects.filter(pk=section.pk).update(summary="Second wording.")
            return real.embed_passages(texts)

        def embed_query(self, text: str) -> np.ndarray:
            return real.embed_query(text)

    assert nodes_embed_stale(node_ids=first.reembedding, embedder=EditsWhileEmbedding()) == 0
    assert Node.objects.get(pk=section.pk).embedding_stale, "left for the second edit's own run"
    assert nodes_embed_stale(node_ids=first.reembedding) == 1
    assert not Node.objects.get(pk=section.pk).embedding_stale


@pytest.mark.parametrize(
    ("kind", "fields", "message"),
    [
        (Node.Kind.SECTION, {"title": "  "}, "A section needs a title"),
        (Node.Kind.SECTION, {"title": "t" * 501}, "titles hold at most 500"),
        (Node.Kind.SECTION, {"summary": "bad\x00byte"}, "NUL character"),
        (Node.Kind.SECTION, {"title": 7}, "A title is text"),
    ],
)
def test_bad_edits_are_refused_and_change_nothing(
    indexed: Document, kind: str, fields: dict[str, Any], message: str
) -> None:
    node = Node.objects.filter(document=indexed, kind=kind).first()
    assert node is not None
    before = corpus_version()
    with pytest.raises(NodeEditError, match=message):
        node_update(node=node, **fields)
    node.refresh_from_db()
    assert not node.edited and corpus_version() == before


def test_an_unchanged_value_is_no_edit(indexed: Document) -> None:
    section = _node(indexed, kind=Node.Kind.SECTION, title="Eruptions")
    before = corpus_version()
    result = node_update(node=section, title="Eruptions")
    assert result.reembedding == [] and not Node.objects.get(pk=section.pk).edited
    assert corpus_version() == before
