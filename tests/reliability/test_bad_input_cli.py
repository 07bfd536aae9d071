"""Bad input on the JSON command line: exit 1 with {"error"} in words, never a traceback, nothing written."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.test import override_settings

from tests.cli import run_openfable
from tests.reliability import INJECTION, ONE_MEGABYTE_QUERY, row_counts
from tests.reliability.conftest import Tree

pytestmark = pytest.mark.django_db

SMALL_LIMIT = 100

# (name, argv with {file} for a file holding the bytes, the file's bytes or None, message fragment)
ROWS: list[tuple[str, list[str], bytes | None, str]] = [
    ("empty file", ["index", "{file}"], b"", "empty"),
    ("whitespace-only file", ["index", "{file}"], b" \n\t \n", "empty"),
    ("binary file", ["index", "{file}"], b"abc\x00\x01def", "NUL characters"),
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
