"""`openfable export | import`: a collection with edits round-trips exactly; a bad file writes nothing."""

from __future__ import annotations

import io
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from documents.ingestion.tree_rows import embedding_text
from documents.models import Collection, Document, DocumentTerm, Node
from documents.services import backup
from documents.services.collections import collection_default
from documents.services.documents import document_create
from documents.services.nodes import node_exclude, node_update
from documents.services.reembed import nodes_embed_stale
from openfable.embeddings import Embedder, get_embedder
from tests.cli import run_openfable
from tests.factories import CollectionFactory, UserFactory
from tests.trees import hash_embed, sec, sec_text, sec_tree, tree_save

pytestmark = pytest.mark.django_db

GUIDE = sec(
    "Field guide",
    "Volcanoes and their eruptions.",
    sec("Formation", "Where volcanoes form.", "Magma reaches the surface.", "Most sit on plate boundaries."),
    sec("Eruptions", "How they erupt.", "Shield volcanoes erupt gently.", "Stratovolcanoes explode."),
)
TIDES = sec("Tide tables", "Tides.", "High tide comes twice a day.", "The moon pulls the water.")
DOCUMENT_FIELDS = (
    "title", "source_filename", "content", "content_hash", "token_count", "tags", "metadata", "builder", "status",
)  # fmt: skip
NODE_FIELDS = (
    "kind", "depth", "ordinal", "order", "title", "summary", "toc_path", "start_char", "end_char", "content",
    "token_count", "edited", "excluded", "embedding_stale", "parent__order",
)  # fmt: skip


class _HashEmbedder:
    """The configured model's name and size with deterministic hash vectors (no model to load)."""

    def __init__(self) -> None:
        self.model_name = get_embedder().model_name
        self.dimensions = get_embedder().dimensions

    def embed_passages(self, texts: Sequence[str]) -> np.ndarray:
        return hash_embed(list(texts))

    def embed_query(self, text: str) -> np.ndarray:
        return hash_embed([text])[0]


class _Counting:
    """Wraps the configured embedder and counts the texts it is asked to embed."""

    def __init__(self, inner: Embedder) -> None:
        self.inner, self.model_name, self.dimensions, self.calls = (
            inner,
            inner.model_name,
            inner.dimensions,
            0,
        )

    def embed_passages(self, texts: Sequence[str]) -> np.ndarray:
        self.calls += 1
        return self.inner.embed_passages(texts)

    def embed_query(self, text: str) -> np.ndarray:
        return self.inner.embed_query(text)


@pytest.fixture
def source() -> Collection:
    """Two documents, one with a section retitled (its stale vectors re-embedded) and a section excluded."""
    collection = CollectionFactory.create(slug="volcanoes", name="Volcanoes")
    for spec, tags in ((GUIDE, ["geology", "guide"]), (TIDES, [])):
        document = document_create(
            collection=collection,
            content=sec_text(spec),
            title=spec.title,
            source_filename=f"{spec.title}.md",
            tags=tags,
            metadata={"source": "field"},
            queue=False,
        ).document
        tree_save(document, sec_tree(spec))
    guide = Document.objects.get(title="Field guide")
    formation = Node.objects.get(document=guide, title="Formation")
    edited = node_update(node=formation, title="How volcanoes form")
    nodes_embed_stale(node_ids=edited.reembedding, embedder=_HashEmbedder())
    node_exclude(node=Node.objects.get(document=guide, title="Eruptions"))
    return collection


def _snapshot(collection: Collection) -> dict[str, Any]:
    documents = {}
    for document in collection.documents.order_by("content_hash"):
        nodes = list(Node.objects.filter(document=document).order_by("order").values(*NODE_FIELDS))
        terms = sorted(DocumentTerm.objects.filter(document=document).values_list("term", "frequency"))
        documents[document.content_hash] = {
            **{field: getattr(document, field) for field in DOCUMENT_FIELDS},
            "nodes": nodes,
            "terms": terms,
        }
    return documents


def _vectors(collection: Collection) -> list[np.ndarray]:
    nodes = Node.objects.filter(document__collection=collection).order_by("document__content_hash", "order")
    return [np.asarray(vector) for vector in nodes.values_list("embedding", flat=True)]


def _export(tmp_path: Path, *extra: str) -> Path:
    path = tmp_path / "volcanoes.jsonl"
    status, answer = run_openfable("export", "volcanoes", "--output", str(path), *extra)
    assert status == 0, answer
    assert answer == {
        "collection": "volcanoes",
        "output": str(path),
        "documents": 2,
        "nodes": 10,
        "with_vectors": bool(extra),
    }
    return path


def test_round_trip_with_vectors_carries_them_without_embedding(
    source: Collection, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, django_assert_max_num_queries: Any
) -> None:
    path = _export(tmp_path, "--with-vectors")
    header, *documents = (json.loads(line) for line in path.read_text(encoding="utf-8").splitlines())
    assert header["version"] == backup.FORMAT_VERSION and header["collection"]["slug"] == "volcanoes"
    assert len(documents) == 2 and "id" not in documents[0]["nodes"][0]
    # Few queries whatever the number of documents: the collection, the documents, their nodes.
    with django_assert_max_num_queries(6):
        backup.collection_export(collection=source, out=io.StringIO(), with_vectors=True)

    counting = _Counting(get_embedder())
    monkeypatch.setattr(backup, "get_embedder", lambda: counting)
    status, answer = run_openfable("import", str(path), "--collection", "restored", "--name", "Restored")
    assert status == 0, answer
    assert answer["documents"] == 2 and answer["nodes"] == 10
    assert answer["vectors_carried"] == 10 and answer["vectors_computed"] == 0 and counting.calls == 0
    restored = Collection.objects.get(slug="restored")
    assert restored.name == "Restored"
    assert _snapshot(restored) == _snapshot(source)
    for got, expected in zip(_vectors(restored), _vectors(source), strict=True):
        assert np.array_equal(got, expected)
    excluded = Node.objects.filter(document__collection=restored, excluded=True)
    assert sorted(excluded.values_list("order", flat=True)) == [4, 5, 6]


@pytest.mark.slow
def test_round_trip_without_vectors_recomputes_them(source: Collection, tmp_path: Path) -> None:
    path = _export(tmp_path)
    _header, *documents = (json.loads(line) for line in path.read_text(encoding="utf-8").splitlines())
    assert not any("embedding" in node for document in documents for node in document["nodes"])
    before = _snapshot(source)
    source.documents.all().delete()  # the same collection, emptied, takes the import back
    status, answer = run_openfable("import", str(path))
    assert status == 0, answer
    assert answer["collection"] == "volcanoes" and answer["vectors_computed"] == 10
    assert _snapshot(source) == before
    nodes = Node.objects.filter(document__collection=source).order_by("document__content_hash", "order")
    texts = [
        embedding_text(kind=node.kind, toc_path=node.toc_path, summary=node.summary, content=node.content)
        for node in nodes
    ]
    fresh = get_embedder().embed_passages(texts)
    assert np.allclose(np.array(_vectors(source)), fresh, atol=1e-5)
    assert {document.embedding_model for document in source.documents.all()} == {get_embedder().model_name}


def _refused(path: Path, *extra: str) -> dict[str, Any]:
    collections, documents = Collection.objects.count(), Document.objects.count()
    status, answer = run_openfable("import", str(path), *extra)
    assert status == 1, answer
    assert (Collection.objects.count(), Document.objects.count()) == (collections, documents)
    return answer


def _rewrite(path: Path, line: int, change: Any) -> None:
    lines = path.read_text(encoding="utf-8").splitlines()
    lines[line - 1] = change(lines[line - 1])
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def test_refuses_a_bad_file_naming_the_line_and_writing_nothing(source: Collection, tmp_path: Path) -> None:
    path = _export(tmp_path)
    answer = _refused(path)  # the exported collection still holds its documents
    assert answer["code"] == "conflict" and "'volcanoes' already exists" in answer["error"]

    original = path.read_text(encoding="utf-8")
    _rewrite(path, 1, lambda line: line.replace('"version": 1', '"version": 99'))
    answer = _refused(path, "--collection", "copy")
    assert "Line 1" in answer["error"] and "version 99" in answer["error"]

    path.write_text(original, encoding="utf-8")
    _rewrite(path, 3, lambda line: line[:-5])
    answer = _refused(path, "--collection", "copy")
    assert answer["code"] == "invalid_backup" and "Line 3 is not valid JSON" in answer["error"]

    path.write_text(original, encoding="utf-8")
    _rewrite(path, 2, lambda line: line.replace("twice a day", "once a day").replace("Magma", "Lava"))
    answer = _refused(path, "--collection", "copy")
    assert "Line 2" in answer["error"] and "content_hash" in answer["error"]

    path.write_text(original, encoding="utf-8")

    def shift_leaf(line: str) -> str:
        entry = json.loads(line)
        entry["nodes"][-1]["start_char"] += 1
        return json.dumps(entry)

    _rewrite(path, 3, shift_leaf)
    answer = _refused(path, "--collection", "copy")
    assert "Line 3" in answer["error"] and "gap or overlap" in answer["error"]
    assert not Collection.objects.filter(slug="copy").exists()


def test_without_collection_import_never_restores_into_a_users_collection(
    source: Collection, tmp_path: Path
) -> None:
    """An empty collection of the export's slug that a user owns (theirs, or made to catch it) is
    refused: the documents would land in that user's corpus. --collection names it on purpose."""
    path = _export(tmp_path, "--with-vectors")
    source.documents.all().delete()
    source.owner = UserFactory.create()
    source.save(update_fields=["owner"])
    answer = _refused(path)
    assert answer["code"] == "conflict" and "belongs to a user" in answer["error"], answer
    assert "--collection" in answer["error"]
    status, answer = run_openfable("import", str(path), "--collection", "volcanoes")
    assert status == 0 and answer["collection"] == "volcanoes" and answer["documents"] == 2, answer


def test_an_export_of_a_default_collection_imports_under_a_free_slug(tmp_path: Path) -> None:
    """Default slugs are kept for default collections: the copy gets a slug of its own."""
    user = UserFactory.create()
    default = collection_default(user=user)
    document_create(collection=default, content=sec_text(TIDES), title="Tides", queue=False)
    path = tmp_path / "default.jsonl"
    status, answer = run_openfable("export", default.slug, "--output", str(path))
    assert status == 0, answer
    slug = default.slug
    default.delete()
    status, answer = run_openfable("import", str(path))
    assert status == 0 and answer["collection"] == f"imported-{slug}", answer
    restored = Collection.objects.get(slug=f"imported-{slug}")
    assert restored.owner is None and not restored.is_default and restored.documents.count() == 1
