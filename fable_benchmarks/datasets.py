"""DragonBall-format JSONL datasets, the input of every benchmark: pure, no Django.

Two files, one JSON object a line (blank lines skipped):

- documents: ``{"doc_id", "company_name", "content", ...}`` (the CUAD set uses the same shape);
- queries: ``{"query": {"query_id", "query_type", "content"}, "ground_truth": {"doc_ids",
  "references"}}``.

A line that is not JSON, or a document without ``doc_id`` or ``content``, is refused with its
file and line number (``BenchInputError``), never a traceback.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fable_benchmarks import BenchInputError


@dataclass(frozen=True, slots=True)
class DatasetDocument:
    doc_id: Any  # the dataset's own id (a number in DragonBall, a string in CUAD)
    title: str  # company_name, else the doc_id
    content: str  # "" for a file: its text is what the job extracts from it
    file: Path | None = None  # the original (a PDF, Word or HTML file), uploaded as it is
    domain: str = ""  # "Finance", "Law", "Medical", "Contracts": what kind of names it goes by


@dataclass(frozen=True)
class BenchQuery:
    query_id: Any
    query_type: str
    text: str
    doc_ids: tuple[Any, ...]
    references: tuple[str, ...]


def read_jsonl(path: Path, limit: int = 0) -> list[dict[str, Any]]:
    """The first ``limit`` objects of the file (0: all of them)."""
    records: list[dict[str, Any]] = []
    try:
        with path.open(encoding="utf-8") as lines:
            for number, line in enumerate(lines, 1):
                if not line.strip():
                    continue
                try:
                    record = json.loads(line)
                except ValueError as error:
                    raise BenchInputError(f"{path}:{number}: not a JSON line ({error})") from None
                if not isinstance(record, dict):
                    raise BenchInputError(
                        f"{path}:{number}: expected a JSON object, not {type(record).__name__}"
                    )
                records.append(record)
                if limit and len(records) >= limit:
                    break
    except UnicodeDecodeError as error:
        raise BenchInputError(f"{path}: not UTF-8 text (byte {error.start}); save it as UTF-8") from None
    return records


def read_documents(path: Path, limit: int = 0) -> list[DatasetDocument]:
    """The documents of a DragonBall-format file, in file order."""
    documents = []
    for number, record in enumerate(read_jsonl(path, limit), 1):
        if "doc_id" not in record or not isinstance(record.get("content"), str):
            raise BenchInputError(
                f'{path}: document {number} needs "doc_id" and a "content" string '
                '(DragonBall format: {"doc_id", "company_name", "content"})'
            )
        title = str(record.get("company_name") or record["doc_id"] or "")
        documents.append(
            DatasetDocument(
                doc_id=record["doc_id"],
                title=title,
                content=record["content"],
                domain=str(record.get("domain") or ""),
            )
        )
    return documents


def read_file_list(path: Path, limit: int = 0) -> list[tuple[Any, Path]]:
    """``(doc_id, file)`` of a files list: ``{"doc_id", "file"}`` a line, the file beside the list
    or in its ``pdf/`` folder (as ``shared/datasets/cuad/pdfs.jsonl`` lays them out)."""
    files = []
    for number, record in enumerate(read_jsonl(path, limit), 1):
        name = record.get("file")
        if "doc_id" not in record or not isinstance(name, str) or not name:
            raise BenchInputError(
                f'{path}: line {number} needs "doc_id" and "file" ({{"doc_id": 0, "file": "a.pdf"}})'
            )
        for folder in (path.parent, path.parent / "pdf"):
            if (folder / name).is_file():
                files.append((record["doc_id"], folder / name))
                break
        else:
            raise BenchInputError(
                f"{path}: line {number}: {name} is neither beside the list nor in its pdf/ folder"
            )
    if not files:
        raise BenchInputError(f"{path}: no files listed")
    return files


def read_file_documents(
    path: Path, *, titles: dict[Any, str] | None = None, limit: int = 0
) -> list[DatasetDocument]:
    """The files of a files list as documents to upload, titled as ``titles`` says (the text
    dataset's company_name, so that a file and its text export are the same document to the
    engine), else by the file's name."""
    return [
        DatasetDocument(doc_id=doc_id, title=(titles or {}).get(doc_id) or file.stem, content="", file=file)
        for doc_id, file in read_file_list(path, limit)
    ]


def read_queries(path: Path) -> list[BenchQuery]:
    return parse_queries(read_jsonl(path))


def parse_queries(records: Sequence[dict[str, Any]]) -> list[BenchQuery]:
    """Queries from DragonBall records; blank references are dropped, missing fields read as empty."""
    queries = []
    for number, record in enumerate(records):
        query = record.get("query") or {}
        truth = record.get("ground_truth") or {}
        queries.append(
            BenchQuery(
                query_id=query.get("query_id", number),
                query_type=str(query.get("query_type") or "(none)"),
                text=str(query.get("content") or ""),
                doc_ids=tuple(truth.get("doc_ids") or ()),
                references=tuple(str(ref) for ref in truth.get("references") or () if str(ref).strip()),
            )
        )
    return queries
