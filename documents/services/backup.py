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
import binascii
import hashlib
import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any, TextIO

import numpy as np
from django.db import transaction
from django.db.models import Prefetch
from django.utils import timezone

from documents.ingestion.pipeline import TOC_SEPARATOR, FlatNodeRow, embedding_text
from documents.ingestion.tree import KINDS, LEAF, MAX_DEPTH, TreeNode, check_tree
from documents.models import Collection, Document, Node
from documents.services.collections import collection_create, slug_is_reserved
from documents.services.documents import document_create, document_original_restore
from documents.services.jobs import require_embedder_fits_stored_vectors
from documents.services.trees import NODE_SUMMARY_MAX_CHARS, NODE_TITLE_MAX_CHARS, document_tree_replace
from openfable.embeddings import Embedder, check_vectors, get_embedder
from openfable.errors import ConflictError, UserInputError
from openfable.tokens import count_tokens

FORMAT = "openfable-collection"
FORMAT_VERSION = 1
EMBED_BATCH = 128  # texts per embedding call when vectors are recomputed
_EXPORT_CHUNK = 50  # documents read (and their nodes prefetched) per round trip

_DOCUMENT_FIELDS = ("title", "source_filename", "tags", "metadata", "builder", "status", "embedding_model")
_NODE_FIELDS = ("kind", "depth", "ordinal", "order", "title", "summary", "toc_path", "start_char", "end_char")
_NODE_FLAGS = ("edited", "excluded")
# What a node's text fields hold at most: titles and summaries as edits allow them, the path as
# the deepest tree of the longest titles makes it.
_NODE_TEXT_LIMITS = {
    "title": NODE_TITLE_MAX_CHARS,
    "summary": NODE_SUMMARY_MAX_CHARS,
    "toc_path": (MAX_DEPTH + 1) * (NODE_TITLE_MAX_CHARS + len(TOC_SEPARATOR)),
}


class BackupFileError(UserInputError):
    """The file to import is not a valid export; the message names the line and the problem."""

    code = "invalid_backup"


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
    node_fields = [*_NODE_FIELDS, *_NODE_FLAGS, "parent_id", "id", "document_id", "embedding_stale"]
    nodes = Node.objects.order_by("order").only(*node_fields, *(["embedding"] if with_vectors else []))
    documents = (
        Document.objects.filter(collection=collection)
        .exclude(content="")
        .order_by("created", "id")
        .only("id", "content", "content_hash", "format", "page_spans", "original", *_DOCUMENT_FIELDS)
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
        row: dict[str, Any] = {field: getattr(node, field) for field in _NODE_FIELDS}
        row["parent_order"] = order_of[node.parent_id] if node.parent_id is not None else None
        row.update((flag, getattr(node, flag)) for flag in _NODE_FLAGS)
        if with_vectors:
            vector = None if node.embedding_stale or node.embedding is None else node.embedding
            row["embedding"] = None if vector is None else np.asarray(vector, dtype=np.float32).tolist()
        rows.append(row)
    return {
        **{field: getattr(document, field) for field in _DOCUMENT_FIELDS},
        "content": document.content,
        # The text's own hash, which import checks: an uploaded file's document is known by the
        # hash of the file's bytes, which the export does not carry.
        "content_hash": hashlib.sha256(document.content.encode("utf-8", "surrogatepass")).hexdigest(),
        "format": document.format,
        "page_spans": document.page_spans,
        **({"original": _original_entry(document)} if document.original else {}),
        "nodes": rows,
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
            entry = _parse(text, number, dimensions=header["embedding"]["dimensions"])
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
    header = _json(text, number)
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
            slug = _free_slug(f"imported-{slug}")
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


def _free_slug(base: str) -> str:
    slug, suffix = base, 1
    while Collection.objects.filter(slug=slug).exists():
        suffix += 1
        slug = f"{base}-{suffix}"
    return slug


def _json(text: str, number: int) -> Any:
    try:
        return json.loads(text)
    except RecursionError:
        raise BackupFileError(
            f"Line {number} is nested too deeply to read (about a thousand levels or more); an "
            "export never is."
        ) from None
    except ValueError as error:
        raise BackupFileError(f"Line {number} is not valid JSON ({error}).") from None


def _parse(text: str, number: int, *, dimensions: int) -> dict[str, Any]:
    """A document line with every field present and of the right type, its hash checked."""
    entry = _json(text, number)
    if not isinstance(entry, dict):
        raise BackupFileError(f"Line {number}: expected a document (a JSON object).")
    for field, kind in (
        ("title", str),
        ("source_filename", str),
        ("content", str),
        ("content_hash", str),
        ("builder", str),
        ("status", str),
        ("embedding_model", str),
        ("tags", list),
        ("metadata", dict),
        ("nodes", list),
    ):
        if not isinstance(entry.get(field), kind):
            raise BackupFileError(
                f"Line {number}: the document's {field!r} is missing or not a {kind.__name__}."
            )
        if kind is str and field != "content" and "\x00" in entry[field]:
            raise BackupFileError(f"Line {number}: the document's {field!r} holds a NUL character.")
    if hashlib.sha256(entry["content"].encode("utf-8", "surrogatepass")).hexdigest() != entry["content_hash"]:
        raise BackupFileError(
            f"Line {number}: the content of {entry['title']!r} does not match its content_hash; the file "
            "was changed or damaged after the export."
        )
    if entry["builder"] not in {"", *Document.Builder.values}:
        raise BackupFileError(f"Line {number}: unknown builder {entry['builder']!r}.")
    _check_pages(entry, number)
    _check_original(entry, number)
    if entry["nodes"]:
        _check_rows(entry, number, dimensions=dimensions)
    return entry


def _check_rows(entry: dict[str, Any], number: int, *, dimensions: int) -> None:
    """Rebuild the tree from its rows and check it as ingestion does (``check_tree``)."""
    built: list[TreeNode] = []
    for index, row in enumerate(entry["nodes"]):
        where = f"Line {number}: node {index} of {entry['title']!r}"
        if not isinstance(row, dict):
            raise BackupFileError(f"{where} is not a JSON object.")
        for field in _NODE_FIELDS:
            kind: type | tuple[type, ...] = str if field in {"kind", "title", "summary", "toc_path"} else int
            if not isinstance(row.get(field), kind) or isinstance(row.get(field), bool):
                raise BackupFileError(f"{where}: {field!r} is missing or of the wrong type.")
        if not all(isinstance(row.get(flag), bool) for flag in _NODE_FLAGS):
            raise BackupFileError(f"{where}: 'edited' and 'excluded' must be true or false.")
        for field, limit in _NODE_TEXT_LIMITS.items():
            if len(row[field]) > limit:
                raise BackupFileError(
                    f"{where}: its {field} is {len(row[field]):,} characters; a node's {field} holds "
                    f"at most {limit:,}."
                )
            if "\x00" in row[field]:
                raise BackupFileError(f"{where}: its {field} holds a NUL character.")
        if row.get("embedding") is not None:
            _check_vector(row["embedding"], dimensions=dimensions, where=where)
        if row["kind"] not in KINDS:
            raise BackupFileError(f"{where}: unknown kind {row['kind']!r}.")
        if row["order"] != index:
            raise BackupFileError(f"{where}: its order is {row['order']}; rows are in pre-order, from 0.")
        parent = row.get("parent_order")
        node = TreeNode(
            kind=row["kind"],
            start_char=row["start_char"],
            end_char=row["end_char"],
            title=row["title"],
            summary=row["summary"],
        )
        if index == 0:
            if parent is not None:
                raise BackupFileError(f"{where}: the first node is the root and has no parent.")
        elif not isinstance(parent, int) or isinstance(parent, bool) or not 0 <= parent < index:
            raise BackupFileError(f"{where}: its parent_order must name an earlier node.")
        else:
            siblings = built[parent].children
            if row["ordinal"] != len(siblings) or row["depth"] != entry["nodes"][parent]["depth"] + 1:
                raise BackupFileError(f"{where}: its ordinal or depth does not fit its parent.")
            siblings.append(node)
        built.append(node)
    walked = [id(node) for node, _depth in built[0].walk()]
    if walked != [id(node) for node in built]:
        raise BackupFileError(f"Line {number}: the nodes of {entry['title']!r} are not in pre-order.")
    if any(
        row["depth"] != depth for row, (_node, depth) in zip(entry["nodes"], built[0].walk(), strict=True)
    ):
        raise BackupFileError(f"Line {number}: the root of {entry['title']!r} must have depth 0.")
    try:
        check_tree(built[0], entry["content"])
    except UserInputError as error:
        raise BackupFileError(
            f"Line {number}: the tree of {entry['title']!r} is not valid: {error}."
        ) from None


def _check_vector(vector: object, *, dimensions: int, where: str) -> None:
    """A vector a query can be compared with: ``dimensions`` finite numbers, not all zero (a zero
    vector has no direction: its cosine is NaN, and every query on the collection would fail)."""
    if not isinstance(vector, list) or not all(
        isinstance(value, int | float) and not isinstance(value, bool) for value in vector
    ):
        raise BackupFileError(f"{where}: its embedding must be a list of numbers.")
    if len(vector) != dimensions:
        raise BackupFileError(
            f"{where}: its embedding has {len(vector)} numbers; the header says {dimensions}."
        )
    try:
        with np.errstate(over="ignore", under="ignore"):
            stored = np.asarray(vector, dtype=np.float64).astype(np.float32)  # as pgvector holds it
            # pgvector sums the squares in single precision for the cosine: it must be a number above 0.
            length = np.sum(stored * stored, dtype=np.float32)
    except OverflowError:  # an integer beyond any float
        stored, length = np.array([np.inf]), np.float32(np.inf)
    if not np.isfinite(stored).all():
        raise BackupFileError(f"{where}: its embedding holds NaN, infinite or too large numbers.")
    if not 0 < length < np.inf:
        raise BackupFileError(
            f"{where}: its embedding is all zeros (or so small or large that its length is), which no "
            "query can be compared with. Export the collection again, or remove the embedding and "
            "it is computed on import."
        )


def _check_pages(entry: dict[str, Any], number: int) -> None:
    """The format and page map (written since issue 21; older exports have neither): a known
    format, and pages that partition the text in order."""
    entry.setdefault("format", Document.Format.TEXT)
    entry.setdefault("page_spans", [])
    if entry["format"] not in Document.Format.values:
        raise BackupFileError(f"Line {number}: unknown format {entry['format']!r}.")
    spans = entry["page_spans"]
    expected_start = 0
    for span in spans if isinstance(spans, list) else [None]:
        if not (
            isinstance(span, list)
            and len(span) == 3
            and all(type(value) is int for value in span)
            and span[1] == expected_start
            and span[1] <= span[2] <= len(entry["content"])
        ):
            raise BackupFileError(
                f"Line {number}: the page map of {entry['title']!r} is not a list of [page, start, end] "
                "that runs through the text in order; export the collection again."
            )
        expected_start = span[2]
    if spans and expected_start != len(entry["content"]):
        raise BackupFileError(
            f"Line {number}: the page map of {entry['title']!r} stops before the text ends."
        )


def _check_original(entry: dict[str, Any], number: int) -> None:
    """The uploaded file (written since issue 21; optional): its bytes decoded and checked
    against their hash, kept as ``entry["original_bytes"]``."""
    original = entry.get("original")
    if original is None:
        return
    where = f"Line {number}: the original file of {entry['title']!r}"
    if not (
        isinstance(original, dict)
        and all(isinstance(original.get(field), str) for field in ("name", "sha256", "base64"))
    ):
        raise BackupFileError(f"{where} needs a name, a sha256 and its base64 content.")
    if entry.get("format") == Document.Format.TEXT:
        raise BackupFileError(f"{where} belongs to a text document; only PDF, Word and HTML keep one.")
    try:
        data = base64.b64decode(original["base64"], validate=True)
    except (binascii.Error, ValueError):
        raise BackupFileError(f"{where} is not valid base64; export the collection again.") from None
    if hashlib.sha256(data).hexdigest() != original["sha256"]:
        raise BackupFileError(
            f"{where} does not match its sha256; the file was changed or damaged after the export."
        )
    entry["original_bytes"] = data


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
