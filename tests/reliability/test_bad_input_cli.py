"""Bad input on the JSON command line: exit 1 with {"error"} in words, never a traceback, nothing written."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from django.test import override_settings

from documents.models import Collection
from tests.cli import run_openfable
from tests.reliability import INJECTION, ONE_MEGABYTE_QUERY, row_counts
from tests.reliability.bad_files import BAD_FILES, BadFile, assert_failed_cleanly, stored_files
from tests.reliability.bad_files import IDS as BAD_IDS
from tests.reliability.conftest import Tree

pytestmark = pytest.mark.django_db

SMALL_LIMIT = 100

# (name, argv with {file} for a file holding the bytes, the file's bytes or None, message fragment)
ROWS: list[tuple[str, list[str], bytes | None, str]] = [
    ("empty file", ["index", "{file}"], b"", "empty"),
    ("whitespace-only file", ["index", "{file}"], b" \n\t \n", "empty"),
    ("binary file", ["index", "{file}"], b"abc\x00\x01def", "not a format OpenFable reads"),
    ("non-UTF-8 file", ["index", "{file}"], b"caf\xe9 au lait", "not UTF-8"),
    (
        "file 10x over the size limit",
        ["index", "{file}"],
        b"x" * (10 * SMALL_LIMIT),
        f"the limit is {SMALL_LIMIT}",
    ),
    ("a good file and a bad one", ["index", "{good}", "{file}"], b"\xff", "not UTF-8"),
    ("unknown collection", ["index", "{good}", "--collection", "nope"], None, "no collection"),
    ("budget 99", ["query", "facts", "--budget", "99"], None, "outside the accepted range"),
    ("budget 32001", ["query", "facts", "--budget", "32001"], None, "outside the accepted range"),
    ("budget -5", ["query", "facts", "--budget", "-5"], None, "outside the accepted range"),
    ("budget 'lots'", ["query", "facts", "--budget", "lots"], None, "must be a whole number"),
    ("budget '1e3'", ["query", "facts", "--budget", "1e3"], None, "must be a whole number"),
    ("budget '³' (isdigit, not int)", ["query", "facts", "--budget", "³"], None, "must be a whole number"),
    ("collection '³'", ["list", "--collection", "³"], None, "no collection"),
    ("tag filter with NUL", ["list", "--tag", "a\x00b"], None, "NUL character"),
    ("51 tags", ["index", "{good}", "--tags", ",".join(f"t{i}" for i in range(51))], None, "at most 50"),
    (
        "query filtered by 51 tags",
        ["query", "facts", *(arg for i in range(51) for arg in ("--tag", f"t{i}"))],
        None,
        "Filter by fewer tags",
    ),
    ("empty query", ["query", "  "], None, "The query is empty"),
    ("1 MB query", ["query", ONE_MEGABYTE_QUERY], None, "the limit is 4,000"),
    ("query with NUL", ["query", "tide\x00"], None, "NUL characters"),
    ("unknown collection filter", ["query", "facts", "--collection", "nope"], None, "no collection"),
    (
        "non-numeric document filter",
        ["query", "facts", "--document", "lots"],
        None,
        "Document ids are positive whole numbers",
    ),
    ("unknown document", ["get", "999999"], None, "no document"),
    ("non-numeric document id", ["tree", "lots"], None, "no document"),
    ("huge document id", ["get", str(10**30)], None, "no document"),
    ("delete an unknown document", ["delete", "999999"], None, "no document"),
    ("unknown job", ["jobs", "--job", "999999"], None, "no ingestion job"),
    ("unknown document's jobs", ["jobs", "-5"], None, "no document"),
    ("list limit 0", ["list", "--limit", "0"], None, "--limit must be 1 or more"),
]


@pytest.mark.parametrize(("name", "argv", "data", "fragment"), ROWS, ids=[row[0] for row in ROWS])
def test_bad_input_exits_1_with_an_error_and_writes_nothing(
    tree: Tree, tmp_path: Path, name: str, argv: list[str], data: bytes | None, fragment: str
) -> None:
    bad, good = tmp_path / "bad.txt", tmp_path / "good.txt"
    bad.write_bytes(data or b"")
    good.write_bytes(b"A fine small text.")
    args = [arg.replace("{file}", str(bad)).replace("{good}", str(good)) for arg in argv]
    before = row_counts()
    with override_settings(MAX_DOCUMENT_BYTES=SMALL_LIMIT):
        status, answer = run_openfable(*args)
    assert status == 1 and set(answer) >= {"error", "code"}, answer
    assert fragment in answer["error"], answer
    assert row_counts() == before


@pytest.mark.parametrize("budget", ["100", "32000"])
def test_budgets_at_the_bounds_are_accepted(tree: Tree, hash_queries: None, budget: str) -> None:
    status, answer = run_openfable("query", "facts", "--budget", budget, "--mode", "vector")
    assert status == 0 and answer["token_budget"] == int(budget), answer


def test_prompt_injection_in_a_document_is_returned_verbatim(tree: Tree, tmp_path: Path) -> None:
    path = tmp_path / "note.txt"
    path.write_text(INJECTION)
    status, added = run_openfable("index", str(path), "--collection", "facts")
    document_id = added["documents"][0]["document_id"]
    status, got = run_openfable("get", str(document_id))
    _, plain = run_openfable("get", str(tree.document.pk))
    assert status == 0 and got["content"] == INJECTION
    assert set(got) == set(plain), "the text cannot change the shape of the answer"


# -- import: each bad line of an export refused naming it (line 2: the one document) ------------


def _vector(change: Callable[[list[Any]], Any]) -> Callable[[dict[str, Any]], None]:
    def edit(entry: dict[str, Any]) -> None:
        node = entry["nodes"][0]
        node["embedding"] = change(node["embedding"])

    return edit


def _set(path: str, value: Any) -> Callable[[dict[str, Any]], None]:
    """Set ``entry[a][b]...`` for the dotted ``path`` (a number indexes a list)."""

    def edit(entry: dict[str, Any]) -> None:
        *parents, last = path.split(".")
        target: Any = entry
        for key in parents:
            target = target[int(key) if key.isdecimal() else key]
        target[last] = value

    return edit


def _deep(depth: int) -> dict[str, Any]:
    value: dict[str, Any] = {}
    for _ in range(depth - 1):
        value = {"a": value}
    return value


DEEP_MARK = "__ten_thousand_levels__"
IMPORT_ROWS: list[tuple[str, Callable[[dict[str, Any]], None], str]] = [
    ("all-zero vector", _vector(lambda vector: [0.0] * len(vector)), "all zeros"),
    ("vector too small to have a length", _vector(lambda vector: [1e-30] * len(vector)), "all zeros"),
    ("NaN in a vector", _vector(lambda vector: [float("nan"), *vector[1:]]), "NaN"),
    ("infinity in a vector", _vector(lambda vector: [float("inf"), *vector[1:]]), "infinite"),
    ("a number float32 cannot hold", _vector(lambda vector: [1e39, *vector[1:]]), "too large"),
    ("an integer beyond any float", _vector(lambda vector: [10**400, *vector[1:]]), "too large"),
    ("vector of strings", _vector(lambda vector: ["x"] * len(vector)), "a list of numbers"),
    ("vector a number short", _vector(lambda vector: vector[:-1]), "the header says"),
    ("metadata 10,000 levels deep", _set("metadata", DEEP_MARK), "nested too deeply"),
    ("metadata 30 levels deep", _set("metadata", _deep(30)), "nested more than 20 levels"),
    ("NUL in the metadata", _set("metadata", {"source": "a\x00b"}), "NUL character"),
    ("NUL in the title", _set("title", "a\x00b"), "NUL character"),
    ("NUL in the file name", _set("source_filename", "a\x00b.md"), "NUL character"),
    ("51 tags", _set("tags", [f"t{index}" for index in range(51)]), "at most 50"),
    ("a 2 MB node title", _set("nodes.1.title", "t" * 2_000_000), "holds at most 500"),
    ("a node summary of 4,001 characters", _set("nodes.1.summary", "s" * 4001), "holds at most 4,000"),
    ("a 1 MB table-of-contents path", _set("nodes.1.toc_path", "p" * 1_000_000), "holds at most 2,515"),
    ("NUL in a node summary", _set("nodes.1.summary", "a\x00b"), "NUL character"),
]


def _exported(tmp_path: Path) -> tuple[Path, str, dict[str, Any]]:
    path = tmp_path / "facts.jsonl"
    status, answer = run_openfable("export", "facts", "--output", str(path), "--with-vectors")
    assert status == 0, answer
    header, line = path.read_text(encoding="utf-8").splitlines()
    return path, header, json.loads(line)


def test_an_unchanged_export_imports(tree: Tree, tmp_path: Path) -> None:
    """The control for the rows below: only their one change makes the file bad."""
    path, _header, _entry = _exported(tmp_path)
    status, answer = run_openfable("import", str(path), "--collection", "copy")
    assert status == 0 and answer["vectors_carried"] == answer["nodes"] == 7, answer


@pytest.mark.parametrize(("name", "change", "fragment"), IMPORT_ROWS, ids=[row[0] for row in IMPORT_ROWS])
def test_a_bad_import_line_is_refused_naming_it_and_writes_nothing(
    tree: Tree, tmp_path: Path, name: str, change: Callable[[dict[str, Any]], None], fragment: str
) -> None:
    path, header, entry = _exported(tmp_path)
    change(entry)
    line = json.dumps(entry, ensure_ascii=False).replace(f'"{DEEP_MARK}"', "[" * 10_000 + "]" * 10_000)
    path.write_text(f"{header}\n{line}\n", encoding="utf-8")
    before = (row_counts(), Collection.objects.count())
    status, answer = run_openfable("import", str(path), "--collection", "copy")
    assert status == 1 and answer["error"].startswith("Line 2"), answer
    assert fragment in answer["error"], answer
    assert (row_counts(), Collection.objects.count()) == before


# -- bad files (issue 21): refused at upload, or accepted and their job fails in words ------------


@pytest.mark.parametrize("bad", BAD_FILES, ids=BAD_IDS)
def test_a_bad_file_is_refused_or_fails_its_job_in_words(
    tree: Tree, tmp_path: Path, bad: BadFile, file_storage: Path
) -> None:
    path = tmp_path / bad.filename
    path.write_bytes(bad.data())
    before = row_counts()
    with override_settings(**bad.settings):
        status, answer = run_openfable("index", str(path), "--collection", "facts", "--wait")
    if bad.refused:
        assert status == 1 and bad.filename in answer["error"] and bad.fragment in answer["error"], answer
        assert row_counts() == before and not stored_files(file_storage)
        return
    assert status == 0, answer
    (entry,) = answer["documents"]
    assert entry["status"] == "failed" and bad.fragment in entry["job"]["error"], entry
    assert_failed_cleanly(entry["document_id"], bad.fragment)
