"""Backup and restore of a collection as one JSON Lines file (``openfable export`` / ``import``).

The file: a header line (format, version, the collection, the embedding model and size, when),
then one line per document: its fields and its whole tree as rows in pre-order (what the
database ids point at is carried by ``order`` / ``parent_order``; vectors only when asked).

Import goes through the services, never raw SQL: ``document_create`` stores each document and
``document_tree_replace`` writes its tree, so the lexical index, the tree version, the job and
the document's status follow as after an ingestion. Every line is checked (JSON, fields, the
content hash, a tree whose leaves partition the content) and a refusal names the line; the
whole import is one transaction, so a refused file writes nothing.
"""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any, TextIO

import numpy as np
from django.db import transaction
from django.db.models import Prefetch
from django.utils import timezone

from documents.ingestion.tree import LEAF
from documents.ingestion.tree_rows import FlatNodeRow, embedding_text
from documents.models import Collection, Document, Node
from documents.services.backup_format import (
    DOCUMENT_FIELDS,
    FORMAT,
    FORMAT_VERSION,
    NODE_FIELDS,
    NODE_FLAGS,
    BackupFileError,
    document_line,
    json_line,
)
from documents.services.collections import collection_create, slug_free, slug_is_reserved
from documents.services.documents import (
    document_create,
    document_original_restore,
    document_text_layer_restore,
)
from documents.services.jobs import require_embedder_fits_stored_vectors
from documents.services.trees import document_tree_replace
from openfable.embeddings import Embedder, check_vectors, get_embedder
from openfable.errors import ConflictError, UserInputError
from openfable.token_counting import count_tokens

EMBED_BATCH = 128  # texts per embedding call when vectors are recomputed
_EXPORT_CHUNK = 50  # documents read (and their nodes prefetched) per round trip


@dataclass(frozen=True)
class ExportResult:
    documents: int
    nodes: int
    with_vectors: bool


@dataclass(frozen=True)
class ImportResult:
    collection: Collection
    documents: int
    nodes: int
    vectors_carried: int  # nodes whose vector came from the file
    vectors_computed: int  # nodes embedded with the configured embedder


# -- export ----------------------------------------------------------------------------------------


def collection_export(
    *, collection: Collection, out: TextIO, with_vectors: bool = False, embedder: Embedder | None = None
) -> ExportResult:
    """Write ``collection`` to ``out`` as JSON Lines, one document at a time.

    Two queries per chunk of documents (the documents, then all their nodes), never one per
    document; the vectors are read only when ``with_vectors``. A node waiting to be re-embedded
    after an edit (``embedding_stale``) is written without its vector, so import computes it.
    An uploaded file goes as its extracted text with its page map, and the file itself (base64,
    with its hash), which import stores again; one whose text was never read (its extraction
    failed) has no tree to restore and is left out.
    """
    embedder = embedder or get_embedder()
    header = {
        "format": FORMAT,
        "version": FORMAT_VERSION,
        "collection": {"name": collection.name, "slug": collection.slug},
        "embedding": {"model": embedder.model_name, "dimensions": int(embedder.dimensions)},
        "with_vectors": with_vectors,
        "exported_at": timezone.now().isoformat(),
    }
    out.write(_line(header))
    node_fields = [*NODE_FIELDS, *NODE_FLAGS, "parent_id", "id", "document_id", "embedding_stale"]
    nodes = Node.objects.order_by("order").only(*node_fields, *(["embedding"] if with_vectors else []))
    documents = (
        Document.objects.filter(collection=collection)
        .exclude(content="")
        .order_by("created", "id")
        .only(
            "id",
            "content",
            "content_hash",
            "format",
            "page_spans",
            "original",
            "recognised_pages",
            "text_layer",
            *DOCUMENT_FIELDS,
        )
        .prefetch_related(Prefetch("nodes", queryset=nodes))
    )
    document_count = node_count = 0
    for document in documents.iterator(chunk_size=_EXPORT_CHUNK):
        entry = _document_entry(document, with_vectors=with_vectors)
        out.write(_line(entry))
        document_count += 1
        node_count += len(entry["nodes"])
    return ExportResult(documents=document_count, nodes=node_count, with_vectors=with_vectors)


def _document_entry(document: Document, *, with_vectors: bool) -> dict[str, Any]:
    nodes = list(document.nodes.all())
    order_of = {node.pk: node.order for node in nodes}
    rows = []
    for node in nodes:
        row: dict[str, Any] = {field: getattr(node, field) for field in NODE_FIELDS}
        row["parent_order"] = order_of[node.parent_id] if node.parent_id is not None else None
        row.update((flag, getattr(node, flag)) for flag in NODE_FLAGS)
        if with_vectors:
            vector = None if node.embedding_stale or node.embedding is None else node.embedding
            row["embedding"] = None if vector is None else np.asarray(vector, dtype=np.float32).tolist()
        rows.append(row)
    return {
        **{field: getattr(document, field) for field in DOCUMENT_FIELDS},
        "content": document.content,
        # The text's own hash, which import checks: an uploaded file's document is known by the
        # hash of the file's bytes, which the export does not carry.
        "content_hash": hashlib.sha256(document.content.encode("utf-8", "surrogatepass")).hexdigest(),
        "format": document.format,
        "page_spans": document.page_spans,
        **({"original": _original_entry(document)} if document.original else {}),
        **(_text_layer_entry(document) if document.recognised_pages and document.text_layer else {}),
        "nodes": rows,
    }


def _text_layer_entry(document: Document) -> dict[str, Any]:
    """The pages read by OCR and their text layer, so that a restored document still says so and
    still marks passages on those pages (its text is not read again)."""
    with document.text_layer.open("rb") as file:
        data = file.read()
    return {
        "recognised_pages": list(document.recognised_pages),
        "text_layer": {
            "sha256": hashlib.sha256(data).hexdigest(),
            "base64": base64.b64encode(data).decode("ascii"),
        },
    }


def _original_entry(document: Document) -> dict[str, Any]:
    """The uploaded file, so that a restored document can be downloaded, shown page by page and
    re-indexed from it as before."""
    with document.original.open("rb") as file:
        data = file.read()
    return {
        "name": document.source_filename or (document.original.name or "").rsplit("/", 1)[-1],
        "sha256": hashlib.sha256(data).hexdigest(),
        "base64": base64.b64encode(data).decode("ascii"),
    }


def _line(value: dict[str, Any]) -> str:
    return json.dumps(value, ensure_ascii=False, allow_nan=False) + "\n"


# -- import ----------------------------------------------------------------------------------------


@transaction.atomic
def collection_import(
    *, lines: Iterable[str], slug: str = "", name: str = "", embedder: Embedder | None = None
) -> ImportResult:
    """Restore an export into a new collection (or an existing empty one); one transaction.

    ``slug`` / ``name`` default to the exported collection's (then an existing collection of that
    slug is used only when it is empty and of no user: ``_target_collection``). Vectors in the file are kept when
    the configured embedding model and size match the header; otherwise every node is embedded
    again, in batches, from the text ingestion embeds it from. ``BackupFileError`` names the
    line of the first problem, ``ConflictError`` a target collection that already has documents.
    """
    embedder = embedder or get_embedder()
    numbered = enumerate(lines, start=1)
    header = _header(numbered)
    collection = _target_collection(
        slug=slug or header["collection"]["slug"],
        name=name or header["collection"]["name"],
        chosen=bool(slug),
    )
    carry = header["with_vectors"] and header["embedding"] == {
        "model": embedder.model_name,
        "dimensions": int(embedder.dimensions),
    }
    require_embedder_fits_stored_vectors(embedder)
    first_line: dict[str, int] = {}  # content hash -> the line that brought it
    documents = nodes = carried = computed = 0
    stored: list[str] = []  # original files written so far: storage has no transactions
    try:
        for number, text in numbered:
            if not text.strip():
                continue
            entry = document_line(text, number, dimensions=header["embedding"]["dimensions"])
            try:
                restored = _document_import(
                    entry, collection=collection, embedder=embedder, carry=carry, stored=stored
                )
            except BackupFileError:
                raise
            except UserInputError as error:
                raise BackupFileError(f"Line {number}: {error}", code=error.code) from None
            if restored is None:
                raise BackupFileError(
                    f"Line {number}: the document {entry['title']!r} has the same text as the one on "
                    f"line {first_line[entry['content_hash']]}; a collection holds each text once."
                )
            first_line[entry["content_hash"]] = number
            documents += 1
            nodes += restored[0]
            carried += restored[1]
            computed += restored[2]
    except BaseException:
        # The transaction takes the rows back; the files written for them go too.
        storage = Document._meta.get_field("original").storage
        for name in stored:
            storage.delete(name)
        raise
    return ImportResult(
        collection=collection,
        documents=documents,
        nodes=nodes,
        vectors_carried=carried,
        vectors_computed=computed,
    )


def _header(numbered: Iterator[tuple[int, str]]) -> dict[str, Any]:
    number, text = next(numbered, (1, ""))
    if not text.strip():
        raise BackupFileError("Line 1: the file is empty; expected the header of an `openfable export`.")
    header = json_line(text, number)
    if not isinstance(header, dict) or header.get("format") != FORMAT:
        raise BackupFileError(
            f"Line 1: not an `openfable export` file (its header has no format {FORMAT!r})."
        )
    if header.get("version") != FORMAT_VERSION:
        raise BackupFileError(
            f"Line 1: format version {header.get('version')!r} is not supported; this OpenFable reads "
            f"version {FORMAT_VERSION}. Export the collection again with this version."
        )
    collection, embedding = header.get("collection"), header.get("embedding")
    if not (
        isinstance(collection, dict)
        and isinstance(collection.get("slug"), str)
        and isinstance(collection.get("name"), str)
        and isinstance(embedding, dict)
        and isinstance(embedding.get("model"), str)
        and isinstance(embedding.get("dimensions"), int)
        and isinstance(header.get("with_vectors"), bool)
    ):
        raise BackupFileError(
            "Line 1: the header lacks the collection (name, slug), the embedding (model, dimensions) "
            "or with_vectors."
        )
    if "\x00" in collection["name"]:
        raise BackupFileError("Line 1: the collection's name holds a NUL character.")
    return header


def _target_collection(*, slug: str, name: str, chosen: bool) -> Collection:
    """Where the documents go. ``chosen``: the caller named the slug (``--collection``), a new
    collection or an existing empty one. Otherwise the slug is the file's, and names a collection
    in this database only by chance: a new one, or an existing empty one of no user (never a
    user's, who would find the documents in their corpus)."""
    existing = Collection.objects.select_for_update().filter(slug=slug).first()
    if existing is None:
        if not chosen and slug_is_reserved(slug):
            # An export of a default collection: its slug is kept for default collections, so
            # the documents come back in a new collection beside it (the summary names it).
            slug = slug_free(f"imported-{slug}")
        return collection_create(name=name, slug=slug)
    if not chosen and existing.owner_id is not None:
        raise ConflictError(
            f"The collection {slug!r} already exists and belongs to a user; without --collection, "
            "import restores only into a new collection or an empty one of no user. Pass "
            "--collection with a new slug (or with this one, to restore into that user's collection)."
        )
    held = existing.documents.count()
    if held:
        raise ConflictError(
            f"The collection {slug!r} already exists and holds {held} document(s); import restores "
            "into a new or empty collection only. Choose another slug with --collection."
        )
    return existing


def _document_import(
    entry: dict[str, Any], *, collection: Collection, embedder: Embedder, carry: bool, stored: list[str]
) -> tuple[int, int, int] | None:
    """Create one document and write its tree; (nodes, vectors carried, vectors computed), or
    None when the collection already holds its text."""
    has_tree = bool(entry["nodes"])
    created = document_create(
        collection=collection,
        content=entry["content"],
        title=entry["title"],
        source_filename=entry["source_filename"],
        tags=entry["tags"],
        metadata=entry["metadata"],
        builder=entry["builder"],
        # A document exported before its tree was built is indexed again after the commit.
        queue=not has_tree,
    )
    if not created.created:
        return None
    if entry["format"] != Document.Format.TEXT or entry["page_spans"]:
        # Its text was read from a file (not exported): the format and pages it was read with.
        Document.objects.filter(pk=created.document.pk).update(
            format=entry["format"], page_spans=entry["page_spans"]
        )
        created.document.format, created.document.page_spans = entry["format"], entry["page_spans"]
    if "original_bytes" in entry:
        document_original_restore(
            document=created.document, data=entry["original_bytes"], filename=entry["original"]["name"]
        )
        stored.append(created.document.original.name or "")
    if "text_layer_bytes" in entry:
        document_text_layer_restore(
            document=created.document, pages=entry["recognised_pages"], data=entry["text_layer_bytes"]
        )
        stored.append(created.document.text_layer.name or "")
    if not has_tree:
        return 0, 0, 0
    document = created.document
    rows = _node_rows(entry)
    vectors = np.zeros((len(rows), int(embedder.dimensions)), dtype=np.float32)
    missing = list(range(len(rows)))
    if carry:
        missing = []
        for index, row in enumerate(entry["nodes"]):
            if row.get("embedding") is None:
                missing.append(index)
            else:
                vectors[index] = check_vectors(
                    [row["embedding"]], count=1, dimensions=vectors.shape[1], model_name=embedder.model_name
                )[0]
    for start in range(0, len(missing), EMBED_BATCH):
        batch = missing[start : start + EMBED_BATCH]
        vectors[batch] = check_vectors(
            embedder.embed_passages([rows[index].embed_text for index in batch]),
            count=len(batch),
            dimensions=vectors.shape[1],
            model_name=embedder.model_name,
        )
    keeps_model = carry and not missing and entry["embedding_model"]
    document_tree_replace(
        document=document,
        rows=rows,
        vectors=vectors,
        builder=entry["builder"],
        embedding_model=entry["embedding_model"] if keeps_model else embedder.model_name,
        job=created.job,
    )
    return len(rows), len(rows) - len(missing), len(missing)


def _node_rows(entry: dict[str, Any]) -> list[FlatNodeRow]:
    content: str = entry["content"]
    rows = []
    for row in entry["nodes"]:
        span = content[row["start_char"] : row["end_char"]]
        leaf_text = span if row["kind"] == LEAF else ""
        rows.append(
            FlatNodeRow(
                order=row["order"],
                parent_order=row["parent_order"],
                kind=row["kind"],
                depth=row["depth"],
                ordinal=row["ordinal"],
                title=row["title"],
                summary=row["summary"],
                toc_path=row["toc_path"],
                start_char=row["start_char"],
                end_char=row["end_char"],
                content=leaf_text,
                token_count=count_tokens(span),
                embed_text=embedding_text(
                    kind=row["kind"], toc_path=row["toc_path"], summary=row["summary"], content=leaf_text
                ),
                edited=row["edited"],
                excluded=row["excluded"],
            )
        )
    return rows
