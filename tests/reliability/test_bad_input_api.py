"""Bad input on the REST API: each row a 4xx in the one error shape, with words, and nothing written."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx2
import pytest
from django.conf import settings
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import override_settings
from rest_framework.test import APIClient

from documents.models import Document, Node
from documents.services.jobs import job_run_now
from openfable.api_tokens import token_create
from tests.mcp_server.conftest import Person, live_url, person
from tests.reliability import INJECTION, ONE_MEGABYTE_QUERY, SCRIPT, SQL, row_counts
from tests.reliability.bad_files import (
    BAD_FILES,
    WORD_NAMED_PDF,
    BadFile,
    assert_failed_cleanly,
    stored_files,
)
from tests.reliability.bad_files import IDS as BAD_IDS
from tests.reliability.conftest import Tree

pytestmark = pytest.mark.django_db
__all__ = ["live_url", "person"]  # fixtures (a real server for the body-size rows), from the MCP tests

API = "/v1/api"
SMALL_LIMIT = 100  # MAX_DOCUMENT_BYTES in the size rows; their payloads are 10x over it


@dataclass(frozen=True)
class Row:
    name: str
    method: str
    url: Callable[[Tree], str]
    body: Callable[[Tree], Any] = lambda tree: {}
    status: int = 400
    fragment: str = ""
    multipart: bool = False
    settings: dict[str, Any] = field(default_factory=dict)


def _doc(tree: Tree) -> str:
    return f"{API}/documents"


def _query(tree: Tree) -> str:
    return f"{API}/query"


def _query_body(budget: Any, query: str = "facts") -> Callable[[Tree], Any]:
    return lambda tree: {"query": query, "token_budget": budget}


def _tags(count: int, length: int = 4) -> list[str]:
    """``count`` different tags of ``length`` characters."""
    return [f"{index:0{length}d}" for index in range(count)]


def _nested(depth: int) -> dict[str, Any]:
    """An object ``depth`` levels deep: {"a": {"a": ... {}}}."""
    value: dict[str, Any] = {}
    for _ in range(depth - 1):
        value = {"a": value}
    return value


ROWS = [
    Row("empty text", "post", _doc, lambda t: {"text": ""}, 400, "empty"),
    Row("whitespace-only text", "post", _doc, lambda t: {"text": " \n\t \r\n"}, 400, "empty"),
    Row("text with NUL", "post", _doc, lambda t: {"text": "abc\x00def"}, 400, "Null characters"),
    Row(
        "binary file",
        "post",
        _doc,
        lambda t: {"file": SimpleUploadedFile("blob.txt", b"abc\x00\x01\x02def")},
        415,
        "not a format OpenFable reads",
        multipart=True,
    ),
    Row(
        "non-UTF-8 file",
        "post",
        _doc,
        lambda t: {"file": SimpleUploadedFile("latin.txt", b"caf\xe9 au lait")},
        400,
        "not UTF-8",
        multipart=True,
    ),
    Row(
        "file 10x over the size limit",
        "post",
        _doc,
        lambda t: {"file": SimpleUploadedFile("big.txt", b"x" * (10 * SMALL_LIMIT))},
        400,
        f"the limit is {SMALL_LIMIT}",
        multipart=True,
        settings={"MAX_DOCUMENT_BYTES": SMALL_LIMIT},
    ),
    Row(
        "text 10x over the size limit",
        "post",
        _doc,
        lambda t: {"text": "x" * (10 * SMALL_LIMIT)},
        400,
        f"the limit is {SMALL_LIMIT}",
        settings={"MAX_DOCUMENT_BYTES": SMALL_LIMIT},
    ),
    Row("over-long tag", "post", _doc, lambda t: {"text": "Tags.", "tags": ["t" * 101]}, 400, "at most 100"),
    Row(
        "unknown collection",
        "post",
        _doc,
        lambda t: {"text": "Hi.", "collection": "nope"},
        404,
        "no collection",
    ),
    Row("unknown document", "get", lambda t: f"{API}/documents/999999", status=404, fragment="no document"),
    Row("huge document id", "get", lambda t: f"{API}/documents/{10**30}", status=404, fragment="no document"),
    Row("unknown document tree", "get", lambda t: f"{API}/documents/999999/tree", status=404),
    Row("unknown node", "get", lambda t: f"{API}/nodes/999999", status=404, fragment="no node"),
    Row("unknown job", "get", lambda t: f"{API}/jobs/999999", status=404, fragment="no ingestion job"),
    Row(
        "unknown collection id",
        "get",
        lambda t: f"{API}/collections/nope",
        status=404,
        fragment="no collection",
    ),
    Row(
        "collection id '³' (isdigit, not int)",
        "get",
        lambda t: f"{API}/collections/%C2%B3",
        status=404,
        fragment="no collection",
    ),
    Row("impossible date", "get", _doc, lambda t: {"created_after": "2026-13-45"}, 400, "is not a date"),
    Row(
        "impossible moment",
        "get",
        _doc,
        lambda t: {"created_before": "2026-02-30T10:00:00"},
        400,
        "is not a date",
    ),
    Row(
        "offset of a day",
        "get",
        _doc,
        lambda t: {"created_after": "2026-01-01T00:00:00+24:00"},
        400,
        "is not a date",
    ),
    Row(
        "before year 1 in UTC",
        "get",
        _doc,
        lambda t: {"created_after": "0001-01-01T00:00:00+23:00"},
        400,
        "outside the years 1 to 9999",
    ),
    Row("tag filter with NUL", "get", _doc, lambda t: {"tag": "a\x00b"}, 400, "NUL character"),
    Row("search with NUL", "get", _doc, lambda t: {"search": "a\x00b"}, 400, "NUL character"),
    Row(
        "metadata 30 levels deep",
        "post",
        _doc,
        lambda t: {"text": "Deep.", "metadata": _nested(30)},
        400,
        "nested more than 20 levels",
    ),
    Row(
        "metadata holding NUL",
        "post",
        _doc,
        lambda t: {"text": "Nul.", "metadata": {"source": "a\x00b"}},
        400,
        "NUL character",
    ),
    Row(
        "metadata key holding NUL",
        "post",
        _doc,
        lambda t: {"text": "Nul.", "metadata": {"a\x00b": 1}},
        400,
        "NUL character",
    ),
    Row("51 tags", "post", _doc, lambda t: {"text": "Tags.", "tags": _tags(51)}, 400, "at most 50"),
    Row(
        "tags of 2,475 characters together",
        "post",
        _doc,
        lambda t: {"text": "Tags.", "tags": _tags(25, 99)},
        400,
        "at most 2,000",
    ),
    Row(
        "51 tags on an edit",
        "patch",
        lambda t: f"{API}/documents/{t.document.pk}",
        lambda t: {"tags": _tags(51)},
        400,
        "at most 50",
    ),
    Row(
        "query filtered by 51 tags",
        "post",
        _query,
        lambda t: {"query": "facts", "tags": _tags(51)},
        400,
        "Filter by fewer tags",
    ),
    Row(
        "query filtered by a 1 MB tag",
        "post",
        _query,
        lambda t: {"query": "facts", "tags": ["t" * 1_000_000]},
        400,
        "tags hold at most 100",
    ),
    Row(
        "node summary of 4,001 characters",
        "patch",
        lambda t: f"{API}/nodes/{t.alpha.pk}",
        lambda t: {"summary": "s" * 4001},
        400,
        "summaries hold at most 4,000",
    ),
    Row("budget 99", "post", _query, _query_body(99), 400, "outside the accepted range"),
    Row("budget 32001", "post", _query, _query_body(32001), 400, "outside the accepted range"),
    Row("budget 0", "post", _query, _query_body(0), 400, "outside the accepted range"),
    Row("budget -5", "post", _query, _query_body(-5), 400, "outside the accepted range"),
    Row("budget 'lots'", "post", _query, _query_body("lots"), 400, "not valid"),
    Row("budget '1e3'", "post", _query, _query_body("1e3"), 400, "not valid"),
    Row("empty query", "post", _query, _query_body(500, ""), 400, "The query is empty"),
    Row("1 MB query", "post", _query, _query_body(500, ONE_MEGABYTE_QUERY), 400, "the limit is 4,000"),
    Row("query with NUL", "post", _query, _query_body(500, "tide\x00"), 400, "Null characters"),
    Row(
        "unknown document filter",
        "post",
        _query,
        lambda t: {"query": "facts", "documents": ["abc"]},
        400,
        "not valid",
    ),
    Row(
        "split outside the leaf",
        "post",
        lambda t: f"{API}/nodes/{t.leaf1.pk}/split",
        lambda t: {"position": t.leaf3.start_char},
        400,
        "is not inside leaf",
    ),
    Row(
        "split at -5",
        "post",
        lambda t: f"{API}/nodes/{t.leaf1.pk}/split",
        lambda t: {"position": -5},
        400,
        "is not inside leaf",
    ),
    Row(
        "split at 'lots'",
        "post",
        lambda t: f"{API}/nodes/{t.leaf1.pk}/split",
        lambda t: {"position": "lots"},
        400,
        "not valid",
    ),
    Row(
        "split of an unknown node",
        "post",
        lambda t: f"{API}/nodes/999999/split",
        lambda t: {"position": 3},
        404,
        "no node",
    ),
    Row(
        "merge of the last leaf",
        "post",
        lambda t: f"{API}/nodes/{t.leaf3.pk}/merge",
        status=400,
        fragment="no next leaf",
    ),
    Row(
        "move into its own subtree",
        "post",
        lambda t: f"{API}/nodes/{t.alpha.pk}/move",
        lambda t: {"parent": t.inner.pk},
        400,
        "cannot move into itself",
    ),
    Row(
        "move under an unknown parent",
        "post",
        lambda t: f"{API}/nodes/{t.alpha.pk}/move",
        lambda t: {"parent": 999999},
        404,
        "no node",
    ),
    Row(
        "group of non-siblings",
        "post",
        lambda t: f"{API}/documents/{t.document.pk}/group",
        lambda t: {"first": t.leaf1.pk, "last": t.leaf3.pk, "title": "G"},
        400,
        "not siblings",
    ),
    Row(
        "dissolve of a leaf",
        "post",
        lambda t: f"{API}/nodes/{t.leaf1.pk}/dissolve",
        status=400,
        fragment="no children to move up",
    ),
    Row(
        "dissolve of the root",
        "post",
        lambda t: f"{API}/nodes/{t.root.pk}/dissolve",
        status=400,
        fragment="root cannot be dissolved",
    ),
]


def _client(user: Any) -> APIClient:
    _, key = token_create(user=user, name="reliability")
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {key}")
    return client


@pytest.mark.parametrize("row", ROWS, ids=[row.name for row in ROWS])
def test_bad_input_is_refused_in_words_and_writes_nothing(tree: Tree, row: Row) -> None:
    client = _client(tree.owner)
    before = row_counts()
    tree_before = list(Node.objects.order_by("pk").values_list("pk", "parent_id", "start_char", "end_char"))
    body = row.body(tree)
    with override_settings(**row.settings):
        response = getattr(client, row.method)(
            row.url(tree), body, format="multipart" if row.multipart else "json"
        )
    assert response.status_code == row.status, response.content[:500]
    error = response.json()["error"]
    assert set(error) == {"code", "message", "details"} and error["message"]
    assert row.fragment in f"{error['message']} {error['details']}", error
    assert row_counts() == before
    after = list(Node.objects.order_by("pk").values_list("pk", "parent_id", "start_char", "end_char"))
    assert after == tree_before, "a refused edit changed the tree"


@pytest.mark.parametrize("budget", [100, 32000])
def test_budgets_at_the_bounds_are_accepted(tree: Tree, hash_queries: None, budget: int) -> None:
    response = _client(tree.owner).post(
        f"{API}/query", {"query": "facts", "token_budget": budget}, format="json"
    )
    assert response.status_code == 200, response.json()
    assert response.json()["result"]["token_budget"] == budget


def test_the_file_size_is_refused_from_its_declared_size(tree: Tree) -> None:
    """The serializer's refusal (beside the `file` field), before the service reads the body."""
    with override_settings(MAX_FILE_BYTES=SMALL_LIMIT):
        response = _client(tree.owner).post(
            f"{API}/documents",
            {"file": SimpleUploadedFile("big.txt", b"x" * (10 * SMALL_LIMIT))},
            format="multipart",
        )
    assert response.status_code == 400 and "the limit is" in response.json()["error"]["details"]["file"][0]


@pytest.mark.parametrize("payload", [SCRIPT, SQL])
def test_payloads_are_stored_verbatim(tree: Tree, payload: str) -> None:
    client = _client(tree.owner)
    created = client.post(
        f"{API}/documents",
        {"text": f"Notes {payload}", "title": payload, "tags": [payload], "collection": "facts"},
        format="json",
    )
    assert created.status_code == 202, created.json()
    document = Document.objects.get(pk=created.json()["document"]["id"])
    assert (document.title, document.tags, document.content) == (payload, [payload], f"Notes {payload}")
    patched = client.patch(
        f"{API}/nodes/{tree.alpha.pk}", {"title": payload, "summary": payload}, format="json"
    )
    assert patched.status_code == 200, patched.json()
    tree.alpha.refresh_from_db()
    assert (tree.alpha.title, tree.alpha.summary) == (payload, payload)
    assert client.get(f"{API}/documents/{document.pk}").json()["title"] == payload
    assert Document.objects.filter(pk=tree.document.pk).exists(), "the SQL text was data, not SQL"


def test_prompt_injection_in_a_document_is_stored_and_returned_verbatim(tree: Tree) -> None:
    client = _client(tree.owner)
    created = client.post(f"{API}/documents", {"text": INJECTION, "collection": "facts"}, format="json")
    assert created.status_code == 202
    got = client.get(f"{API}/documents/{created.json()['document']['id']}")
    plain = client.get(f"{API}/documents/{tree.document.pk}")
    assert got.json()["content"] == INJECTION
    assert set(got.json()) == set(plain.json()), "the text cannot change the shape of the answer"


@pytest.mark.parametrize("where", ["metadata", "body"])
def test_json_nested_ten_thousand_deep_is_refused_in_words(tree: Tree, where: str) -> None:
    """Python's JSON decoder gives up at about a thousand levels with a RecursionError (a 500)."""
    deep = "[" * 10_000 + "]" * 10_000
    raw = '{"text": "Deep.", "metadata": ' + deep + "}" if where == "metadata" else deep
    before = row_counts()
    response = _client(tree.owner).post(f"{API}/documents", raw, content_type="application/json")
    assert response.status_code == 400, response.content[:300]
    assert "nested too deeply" in response.json()["error"]["message"]
    assert row_counts() == before


@pytest.mark.parametrize("offset", ["+16:00", "-23:59", "+05:30"])
def test_a_moment_with_any_offset_python_reads_is_compared_in_utc(tree: Tree, offset: str) -> None:
    """PostgreSQL refuses offsets beyond ±15:59; the moment is the same instant in UTC."""
    client = _client(tree.owner)
    before = client.get(f"{API}/documents", {"created_after": f"1990-01-01T00:00:00{offset}"})
    after = client.get(f"{API}/documents", {"created_after": f"2990-01-01T00:00:00{offset}"})
    assert before.status_code == 200 and after.status_code == 200, (before.content[:300], after.content[:300])
    assert before.json()["count"] == 1 and after.json()["count"] == 0


# -- body sizes, over real HTTP (uvicorn, the ASGI handler that reads the body) -----------------


def _post(url: str, person: Person, content: bytes | Iterator[bytes]) -> httpx2.Response:
    headers = {"Authorization": f"Bearer {person.key}", "Content-Type": "application/json"}
    return httpx2.post(url, content=content, headers=headers, timeout=120)


@pytest.mark.django_db(transaction=True)
def test_a_cjk_document_under_the_limit_is_accepted_as_json(live_url: str, person: Person) -> None:
    """4.6 MB of CJK (three UTF-8 bytes a character) is 9.2 MB once JSON-escaped (six)."""
    text = "# 漢字\n\n" + "漢字のテキスト。" * 191_600
    assert 4_500_000 < len(text.encode("utf-8")) <= settings.MAX_DOCUMENT_BYTES
    body = json.dumps({"text": text, "collection": "volcanoes"}).encode("ascii")
    assert len(body) > 9_000_000
    response = _post(f"{live_url}/v1/api/documents", person, body)
    assert response.status_code == 202, response.text[:500]
    assert Document.objects.get(pk=response.json()["document"]["id"]).content == text


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("chunked", [False, True], ids=["content-length", "chunked"])
def test_an_over_size_body_is_413_in_the_json_shape(live_url: str, person: Person, chunked: bool) -> None:
    size, piece = settings.DATA_UPLOAD_MAX_MEMORY_SIZE + 1, 1 << 20
    body = b'{"text": "' + b"x" * (size - 12) + b'"}'
    # A generator has no length: httpx sends it chunked, with no Content-Length to go by.
    content = (body[start : start + piece] for start in range(0, size, piece)) if chunked else body
    before = row_counts()
    response = _post(f"{live_url}/v1/api/documents", person, content)
    assert response.status_code == 413, response.text[:500]
    error = response.json()["error"]
    assert error["code"] == "too_large" and set(error) == {"code", "message", "details"}
    assert f"the server reads at most {settings.DATA_UPLOAD_MAX_MEMORY_SIZE:,}" in error["message"]
    assert row_counts() == before


# -- bad files (issue 21): refused at upload, or accepted and their job fails in words ------------


@pytest.mark.parametrize("bad", BAD_FILES, ids=BAD_IDS)
@pytest.mark.slow
def test_a_bad_file_is_refused_or_fails_its_job_in_words(
    tree: Tree, bad: BadFile, file_storage: Path
) -> None:
    client = _client(tree.owner)
    before = row_counts()
    with override_settings(**bad.settings):
        response = client.post(
            f"{API}/documents",
            {"file": SimpleUploadedFile(bad.filename, bad.data()), "collection": "facts"},
            format="multipart",
        )
        if bad.refused:
            assert response.status_code in (400, 413, 415), response.content[:500]
            error = response.json()["error"]
            assert bad.fragment in f"{error['message']} {error['details']}", error
            assert row_counts() == before and not stored_files(file_storage)
            return
        assert response.status_code == 202, response.json()
        document_id = response.json()["document"]["id"]
        run = job_run_now(document_id=document_id)
    assert run is not None and not run.succeeded
    assert_failed_cleanly(document_id, bad.fragment)
    job = client.get(f"{API}/jobs/{run.job.pk}").json()
    assert job["status"] == "failed" and bad.fragment in job["error"]
    retried = client.post(f"{API}/documents/{document_id}/reindex", {}, format="json")
    assert retried.status_code == 202 and retried.json()["job"]["status"] == "queued"


def test_a_word_file_named_pdf_is_read_as_word_and_the_mismatch_is_said(
    tree: Tree, file_storage: Path
) -> None:
    filename, data, fragment = WORD_NAMED_PDF
    response = _client(tree.owner).post(
        f"{API}/documents", {"file": SimpleUploadedFile(filename, data())}, format="multipart"
    )
    assert response.status_code == 202
    document = response.json()["document"]
    assert document["format"] == "docx" and fragment in document["format_note"]
    assert job_run_now(document_id=document["id"]).succeeded  # type: ignore[union-attr]


@override_settings(DATA_UPLOAD_MAX_MEMORY_SIZE=5_000, MULTIPART_MAX_BYTES=50_000)
def test_a_multipart_upload_may_be_larger_than_a_json_body_up_to_its_own_limit(
    tree: Tree, file_storage: Path
) -> None:
    client = _client(tree.owner)
    notes = ("Tide tables. " * 1_000).encode()  # 13 KB: over the JSON body limit, under the multipart one
    uploaded = client.post(
        f"{API}/documents", {"file": SimpleUploadedFile("notes.md", notes)}, format="multipart"
    )
    assert uploaded.status_code == 202, uploaded.content[:300]
    as_json = client.post(f"{API}/documents", {"text": notes.decode() + "!"}, format="json")
    assert as_json.status_code == 413
    before = row_counts()
    too_big = client.post(
        f"{API}/documents", {"file": SimpleUploadedFile("big.md", b"x" * 60_000)}, format="multipart"
    )
    assert too_big.status_code == 413 and "Send fewer or smaller files" in too_big.json()["error"]["message"]
    assert row_counts() == before
