"""Reading DragonBall-format JSONL: documents, queries, and the messages for a broken file."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fable_benchmarks import BenchInputError
from fable_benchmarks.datasets import (
    BenchQuery,
    DatasetDocument,
    parse_queries,
    read_documents,
    read_jsonl,
    read_queries,
)
from openfable.errors import UserInputError


def _write(path: Path, *lines: str) -> Path:
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_read_documents_takes_the_title_from_the_company_then_the_id_and_keeps_the_domain(
    tmp_path: Path,
) -> None:
    path = _write(
        tmp_path / "docs.jsonl",
        json.dumps({"doc_id": 1, "company_name": "Acme", "content": "Acme text."}),
        "",  # blank lines are skipped
        json.dumps({"doc_id": "c-2", "content": "Contract text.", "domain": "law"}),
        json.dumps({"doc_id": 3, "company_name": "", "content": "Third."}),
    )
    assert read_documents(path) == [
        DatasetDocument(doc_id=1, title="Acme", content="Acme text."),
        DatasetDocument(doc_id="c-2", title="c-2", content="Contract text.", domain="law"),
        DatasetDocument(doc_id=3, title="3", content="Third."),
    ]
    assert [document.doc_id for document in read_documents(path, limit=2)] == [1, "c-2"]


def test_a_broken_line_is_named_by_file_and_line(tmp_path: Path) -> None:
    path = _write(tmp_path / "docs.jsonl", json.dumps({"doc_id": 1, "content": "ok"}), "", "{not json")
    with pytest.raises(BenchInputError, match=r"docs\.jsonl:3: not a JSON line"):
        read_jsonl(path)
    assert issubclass(BenchInputError, UserInputError), "the command line prints it as {'error': ...}"

    path = _write(tmp_path / "list.jsonl", "[1, 2]")
    with pytest.raises(BenchInputError, match=r"list\.jsonl:1: expected a JSON object, not list"):
        read_jsonl(path)


def test_a_document_without_content_or_id_is_refused(tmp_path: Path) -> None:
    path = _write(
        tmp_path / "docs.jsonl", json.dumps({"doc_id": 1, "content": "ok"}), json.dumps({"doc_id": 2})
    )
    with pytest.raises(BenchInputError, match='document 2 needs "doc_id" and a "content" string'):
        read_documents(path)
    path = _write(tmp_path / "no-id.jsonl", json.dumps({"content": "text"}))
    with pytest.raises(BenchInputError, match="document 1 needs"):
        read_documents(path)


def test_a_file_that_is_not_utf8_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "latin1.jsonl"
    path.write_bytes(json.dumps({"doc_id": 1, "content": "caf\u00e9"}, ensure_ascii=False).encode("latin-1"))
    with pytest.raises(BenchInputError, match="not UTF-8 text"):
        read_documents(path)


def test_parse_queries_reads_dragonball_records() -> None:
    record = {
        "query": {"query_id": 3, "query_type": "Factual Question", "content": "When?"},
        "ground_truth": {"doc_ids": [4], "references": ["It was May.", ""]},
    }
    (query,) = parse_queries([record])
    assert query == BenchQuery(3, "Factual Question", "When?", (4,), ("It was May.",))


def test_read_queries_fills_in_what_a_record_lacks(tmp_path: Path) -> None:
    path = _write(
        tmp_path / "queries.jsonl",
        json.dumps({"query": {"content": "Who won?"}, "ground_truth": {"doc_ids": [], "references": []}}),
        json.dumps({"query": {"query_id": 9, "query_type": "Summary", "content": "Sum up."}}),
    )
    assert read_queries(path) == [
        BenchQuery(0, "(none)", "Who won?", (), ()),
        BenchQuery(9, "Summary", "Sum up.", (), ()),
    ]
