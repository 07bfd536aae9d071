"""`openfable export | import`: a collection to one JSON Lines file and back (see documents.services.backup)."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from documents.selectors import collection_get
from documents.services.backup import collection_export, collection_import
from openfable.errors import UserInputError

STDIO = "-"


def register(subparsers: Any) -> None:
    export = subparsers.add_parser(
        "export",
        help="write a collection (documents, trees, edits) to one JSON Lines file",
        description="A header line, then one line per document with its whole tree. With --output - the "
        "file goes to standard output and the summary to standard error.",
    )
    export.add_argument("collection", metavar="COLLECTION", help="collection slug or id")
    export.add_argument(
        "--output",
        metavar="PATH",
        default="",
        help="the file to write, or - for standard output (default: SLUG.jsonl here)",
    )
    export.add_argument("--with-vectors", action="store_true", help="add each node's embedding")
    export.set_defaults(handler=handle_export)

    restore = subparsers.add_parser(
        "import",
        help="restore an `openfable export` file into a new or empty collection",
        description="Vectors in the file are kept when the configured embedding model and size match "
        "its header; otherwise every node is embedded again. A refused file writes nothing.",
    )
    restore.add_argument("path", metavar="PATH", help="the exported file, or - for standard input")
    restore.add_argument(
        "--collection",
        metavar="SLUG",
        default="",
        help="the target collection, new or empty (default: the exported slug when no collection has it "
        "or an empty one of no user does; a default collection's export comes back as imported-SLUG)",
    )
    restore.add_argument(
        "--name", default="", help="its name when it is created (default: the exported name)"
    )
    restore.set_defaults(handler=handle_import)


def handle_export(options: dict[str, Any]) -> dict[str, Any] | str:
    collection = collection_get(user=None, collection=options["collection"])
    output = options["output"] or f"{collection.slug}.jsonl"
    if output == STDIO:
        result = collection_export(
            collection=collection, out=sys.stdout, with_vectors=options["with_vectors"]
        )
        summary = _export_summary(collection.slug, output, result)
        # Standard output carries the file itself; the summary goes beside it.
        print(json.dumps(summary, ensure_ascii=False), file=sys.stderr, flush=True)
        return ""
    path = Path(output)
    partial = path.with_name(path.name + ".partial")
    try:
        # Written beside the target and renamed when complete: a failed export leaves no half file.
        with partial.open("w", encoding="utf-8") as out:
            result = collection_export(collection=collection, out=out, with_vectors=options["with_vectors"])
        os.replace(partial, path)
    except OSError as error:
        partial.unlink(missing_ok=True)
        raise UserInputError(f"Cannot write {output}: {error.strerror or error}.") from None
    except BaseException:
        partial.unlink(missing_ok=True)
        raise
    return _export_summary(collection.slug, str(path), result)


def _export_summary(slug: str, output: str, result: Any) -> dict[str, Any]:
    return {
        "collection": slug,
        "output": output,
        "documents": result.documents,
        "nodes": result.nodes,
        "with_vectors": result.with_vectors,
    }


def handle_import(options: dict[str, Any]) -> dict[str, Any]:
    path = options["path"]
    try:
        result = collection_import(lines=_lines(path), slug=options["collection"], name=options["name"])
    except OSError as error:
        raise UserInputError(f"Cannot read {path}: {error.strerror or error}.") from None
    except UnicodeDecodeError as error:
        raise UserInputError(f"{path} is not UTF-8 text (invalid byte at position {error.start}).") from None
    return {
        "collection": result.collection.slug,
        "collection_id": result.collection.pk,
        "input": path,
        "documents": result.documents,
        "nodes": result.nodes,
        "vectors_carried": result.vectors_carried,
        "vectors_computed": result.vectors_computed,
    }


def _lines(path: str) -> Iterator[str]:
    if path == STDIO:
        yield from sys.stdin
        return
    with open(path, encoding="utf-8") as source:
        yield from source
