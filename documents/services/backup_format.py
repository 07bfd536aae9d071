"""The export file's format: its name and version, the fields each document line and node row
carries, and the checks of a document line on import (JSON, fields and types, the content's hash,
a tree whose leaves partition the content, vectors, page maps and original files). Every refusal
is a ``BackupFileError`` naming the line and the problem. Writing and reading the file is
``documents.services.backup``.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
from typing import Any

import numpy as np

from documents.ingestion.tree import KINDS, MAX_DEPTH, TreeNode, check_tree
from documents.ingestion.tree_rows import TOC_SEPARATOR
from documents.models import Document
from documents.services.trees import NODE_SUMMARY_MAX_CHARS, NODE_TITLE_MAX_CHARS
from openfable.errors import UserInputError

FORMAT = "openfable-collection"
FORMAT_VERSION = 1

DOCUMENT_FIELDS = ("title", "source_filename", "tags", "metadata", "builder", "status", "embedding_model")
NODE_FIELDS = ("kind", "depth", "ordinal", "order", "title", "summary", "toc_path", "start_char", "end_char")
NODE_FLAGS = ("edited", "excluded")
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


def json_line(text: str, number: int) -> Any:
    try:
        return json.loads(text)
    except RecursionError:
        raise BackupFileError(
            f"Line {number} is nested too deeply to read (about a thousand levels or more); an "
            "export never is."
        ) from None
    except ValueError as error:
        raise BackupFileError(f"Line {number} is not valid JSON ({error}).") from None


def document_line(text: str, number: int, *, dimensions: int) -> dict[str, Any]:
    """A document line with every field present and of the right type, its hash checked."""
    entry = json_line(text, number)
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
    _check_text_layer(entry, number)
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
        for field in NODE_FIELDS:
            kind: type | tuple[type, ...] = str if field in {"kind", "title", "summary", "toc_path"} else int
            if not isinstance(row.get(field), kind) or isinstance(row.get(field), bool):
                raise BackupFileError(f"{where}: {field!r} is missing or of the wrong type.")
        if not all(isinstance(row.get(flag), bool) for flag in NODE_FLAGS):
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


def _check_text_layer(entry: dict[str, Any], number: int) -> None:
    """The pages read by OCR and their text layer (optional, written since OCR): the pages among
    the document's own, the layer decoded and checked against its hash, kept as
    ``entry["text_layer_bytes"]``."""
    pages, layer = entry.get("recognised_pages"), entry.get("text_layer")
    if pages is None and layer is None:
        return
    where = f"Line {number}: the pages of {entry['title']!r} read by OCR"
    own = {span[0] for span in entry.get("page_spans") or []}
    if not (
        isinstance(pages, list)
        and pages
        and all(isinstance(page, int) and not isinstance(page, bool) and page in own for page in pages)
    ):
        raise BackupFileError(f"{where} must be a list of its pages; export the collection again.")
    if not (
        isinstance(layer, dict) and all(isinstance(layer.get(field), str) for field in ("sha256", "base64"))
    ):
        raise BackupFileError(f"{where} need their text layer: a sha256 and its base64 content.")
    try:
        data = base64.b64decode(layer["base64"], validate=True)
    except (binascii.Error, ValueError):
        raise BackupFileError(
            f"{where}: the text layer is not valid base64; export the collection again."
        ) from None
    if hashlib.sha256(data).hexdigest() != layer["sha256"]:
        raise BackupFileError(
            f"{where}: the text layer does not match its sha256; the file was changed or damaged after the export."
        )
    entry["text_layer_bytes"] = data


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
