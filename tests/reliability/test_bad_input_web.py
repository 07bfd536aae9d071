"""Bad input on the web pages: refused in words (400/404, or the edit panel's message), never a 500,
nothing half-written; user text is stored verbatim and rendered escaped."""

from __future__ import annotations

import html
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx2
import pytest
from django.conf import settings
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client, override_settings
from django.urls import reverse

from documents.models import Document, Node
from documents.services.documents import document_create
from documents.services.jobs import job_run_now
from documents.services.nodes import node_update
from tests.mcp_server.conftest import live_url
from tests.reliability import ESCAPED_SCRIPT, INJECTION, ONE_MEGABYTE_QUERY, SCRIPT, SQL, row_counts
from tests.reliability.bad_files import BAD_FILES, BadFile, assert_failed_cleanly, stored_files
from tests.reliability.bad_files import IDS as BAD_IDS
from tests.reliability.conftest import Tree

pytestmark = pytest.mark.django_db
__all__ = ["live_url"]  # a real server for the body-size row, from the MCP tests

HOME = reverse("documents:home")
QUERY = reverse("retrieval:query")
SMALL_LIMIT = 100


@dataclass(frozen=True)
class Row:
    name: str
    method: str
    url: Callable[[Tree], str]
    data: Callable[[Tree], Any] = lambda tree: {}
    status: int = 400
    fragment: str = ""
    htmx: bool = False
    settings: dict[str, Any] = field(default_factory=dict)


def _home(tree: Tree) -> str:
    return HOME


def _query(tree: Tree) -> str:
    return QUERY


def _ask(budget: Any, query: str = "facts", **more: Any) -> Callable[[Tree], Any]:
    return lambda tree: {"query": query, "budget": budget, **more}


def _edit(operation: str, node: Callable[[Tree], Node], **fields: Callable[[Tree], Any]) -> dict[str, Any]:
    """A tree edit from the document page (htmx: the panel comes back with the refusal in it)."""
    return {
        "method": "post",
        "url": lambda t: reverse("documents:edit", args=[t.document.pk, operation]),
        "data": lambda t: {"node": node(t).pk} | {name: value(t) for name, value in fields.items()},
        "status": 200,
        "htmx": True,
    }


ROWS = [
    Row("empty text", "post", _home, lambda t: {"text": ""}, 400, "Paste some text"),
    Row("whitespace-only text", "post", _home, lambda t: {"text": " \r\n\t "}, 400, "Paste some text"),
    Row("text with NUL", "post", _home, lambda t: {"text": "abc\x00def"}, 400, "Null characters"),
    Row(
        "binary file",
        "post",
        _home,
        lambda t: {"uploads": [SimpleUploadedFile("blob.txt", b"abc\x00\x01def")]},
        400,
        "not a format OpenFable reads",
    ),
    Row(
        "non-UTF-8 file",
        "post",
        _home,
        lambda t: {"uploads": [SimpleUploadedFile("latin.txt", b"caf\xe9 au lait")]},
        400,
        "not UTF-8",
    ),
    Row(
        "file 10x over the size limit",
        "post",
        _home,
        lambda t: {"uploads": [SimpleUploadedFile("big.txt", b"x" * (10 * SMALL_LIMIT))]},
        400,
        f"the limit is {SMALL_LIMIT}",
        settings={"MAX_DOCUMENT_BYTES": SMALL_LIMIT},
    ),
    Row(
        "one bad file of two stores neither",
        "post",
        _home,
        lambda t: {"uploads": [SimpleUploadedFile("a.txt", b"Fine."), SimpleUploadedFile("b.txt", b"\xff")]},
        400,
        "not UTF-8",
    ),
    Row(
        "unknown collection",
        "post",
        _home,
        lambda t: {"text": "Hi.", "collection": "nope"},
        400,
        "valid choice",
    ),
    Row("over-long tag", "post", _home, lambda t: {"text": "Hi.", "tags": "t" * 101}, 400, "at most 100"),
    Row(
        "unknown document",
        "get",
        lambda t: reverse("documents:detail", args=[999999]),
        status=404,
        fragment="no document",
    ),
    Row("huge document id", "get", lambda t: f"/documents/{10**30}/", status=404, fragment="no document"),
    Row("unknown document row", "get", lambda t: reverse("documents:row", args=[999999]), status=404),
    Row(
        "delete an unknown document", "post", lambda t: reverse("documents:delete", args=[999999]), status=404
    ),
    Row(
        "re-index an unknown document",
        "post",
        lambda t: reverse("documents:reindex", args=[999999]),
        status=404,
    ),
    Row(
        "unknown collection page",
        "get",
        lambda t: reverse("documents:collection", args=["nope"]),
        status=404,
        fragment="no collection",
    ),
    Row(
        "51 tags",
        "post",
        _home,
        lambda t: {"text": "Hi.", "tags": ",".join(f"t{i}" for i in range(51))},
        400,
        "at most 50",
    ),
    Row(
        "query filtered by 51 tags",
        "get",
        _query,
        _ask("500", tags=",".join(f"t{i}" for i in range(51))),
        400,
        "Filter by fewer tags",
    ),
    Row("corpus tag filter with NUL", "get", _home, lambda t: {"tag": "a\x00b"}, 400, "NUL character"),
    Row("corpus search with NUL", "get", _home, lambda t: {"q": "a\x00b"}, 400, "NUL character"),
    Row("budget '³' (isdigit, not int)", "get", _query, _ask("³"), 400, "must be a whole number"),
    Row("budget 99", "get", _query, _ask("99"), 400, "outside the accepted range"),
    Row("budget 32001", "get", _query, _ask("32001"), 400, "outside the accepted range"),
    Row("budget -5", "get", _query, _ask("-5"), 400, "outside the accepted range"),
    Row("budget 'lots'", "get", _query, _ask("lots"), 400, "must be a whole number"),
    Row("budget '1e3'", "get", _query, _ask("1e3"), 400, "must be a whole number"),
    Row("empty query", "get", _query, _ask("500", ""), 400, "The query is empty"),
    Row("1 MB query", "get", _query, _ask("500", ONE_MEGABYTE_QUERY), 400, "the limit is 4,000"),
    Row("query with NUL", "get", _query, _ask("500", "tide\x00"), 400, "NUL characters"),
    Row("tag filter with NUL", "get", _query, _ask("500", tags="a\x00b"), 400, "NUL characters"),
    Row("collection filter with NUL", "get", _query, _ask("500", collection="a\x00b"), 400, "no collection"),
    Row("unknown collection filter", "get", _query, _ask("500", collection="nope"), 400, "no collection"),
    Row("non-numeric document filter", "get", _query, _ask("500", documents=["lots"]), 400, "document"),
    Row(
        "split outside the leaf",
        fragment="is not inside leaf",
        **_edit("split", lambda t: t.leaf1, position=lambda t: t.leaf3.start_char),
    ),
    Row(
        "split at -5",
        fragment="is not inside leaf",
        **_edit("split", lambda t: t.leaf1, position=lambda t: -5),
    ),
    Row(
        "split at 'lots'",
        fragment="must be a whole number",
        **_edit("split", lambda t: t.leaf1, position=lambda t: "lots"),
    ),
    Row(
        "split at '1e3'",
        fragment="must be a whole number",
        **_edit("split", lambda t: t.leaf1, position=lambda t: "1e3"),
    ),
    Row("merge of the last leaf", fragment="no next leaf", **_edit("merge", lambda t: t.leaf3)),
    Row(
        "move into its own subtree",
        fragment="cannot move into itself",
        **_edit("move", lambda t: t.alpha, parent=lambda t: t.inner.pk),
    ),
    Row(
        "move under an unknown parent",
        fragment="no node",
        **_edit("move", lambda t: t.alpha, parent=lambda t: "lots"),
    ),
    Row(
        "group of non-siblings",
        fragment="not siblings",
        **_edit("group", lambda t: t.leaf1, last=lambda t: t.leaf3.pk, title=lambda t: "G"),
    ),
    Row("dissolve of a leaf", fragment="no children to move up", **_edit("dissolve", lambda t: t.leaf1)),
    Row("dissolve of the root", fragment="root cannot be dissolved", **_edit("dissolve", lambda t: t.root)),
    Row("unknown tree edit", fragment="no tree edit", **_edit("explode", lambda t: t.leaf1)),
]


def _client(user: Any) -> Client:
    client = Client()
    client.force_login(user)
    return client


def _tree_shape() -> list[tuple[Any, ...]]:
    return list(Node.objects.order_by("pk").values_list("pk", "parent_id", "start_char", "end_char", "title"))


@pytest.mark.parametrize("row", ROWS, ids=[row.name for row in ROWS])
def test_bad_input_is_refused_in_words_and_writes_nothing(tree: Tree, row: Row) -> None:
    client = _client(tree.owner)
    before, shape = row_counts(), _tree_shape()
    headers = {"HX-Request": "true"} if row.htmx else {}
    with override_settings(**row.settings):
        response = getattr(client, row.method)(row.url(tree), row.data(tree), headers=headers)
    assert response.status_code == row.status, response.content[:300]
    body = html.unescape(response.content.decode())
    assert row.fragment in body, body[:3000]
    assert "Traceback" not in body
    assert row_counts() == before and _tree_shape() == shape


@pytest.mark.parametrize("budget", ["100", "32000"])
def test_budgets_at_the_bounds_are_accepted(tree: Tree, hash_queries: None, budget: str) -> None:
    response = _client(tree.owner).get(QUERY, {"query": "facts", "budget": budget, "mode": "vector"})
    assert response.status_code == 200 and "outside the accepted range" not in response.content.decode()


def test_an_over_size_file_is_refused_before_it_is_read(tree: Tree, monkeypatch: pytest.MonkeyPatch) -> None:
    """The form refuses it from its declared size: the upload is never read nor handed to the service."""

    def never(**kwargs: Any) -> Any:
        raise AssertionError("an over-size upload reached document_create")

    monkeypatch.setattr("documents.views.document_create", never)
    with override_settings(MAX_FILE_BYTES=SMALL_LIMIT):
        response = _client(tree.owner).post(HOME, {"uploads": [SimpleUploadedFile("big.txt", b"x" * 1000)]})
    assert response.status_code == 400
    assert f"big.txt: the file is 1,000 bytes; the limit is {SMALL_LIMIT}" in response.content.decode()


@pytest.mark.parametrize("payload", [SCRIPT, SQL])
def test_payloads_are_stored_verbatim_and_rendered_escaped(tree: Tree, payload: str) -> None:
    client = _client(tree.owner)
    response = client.post(
        HOME, {"text": f"Notes {payload}", "title": payload, "tags": payload, "collection": "facts"}
    )
    assert response.status_code == 302
    document = Document.objects.get(title=payload)
    assert (document.tags, document.content) == ([payload], f"Notes {payload}")
    node_update(node=tree.alpha, title=payload, summary=payload, user=tree.owner)
    pages = [
        client.get(HOME),
        client.get(HOME, {"tag": payload, "q": payload}),
        client.get(reverse("documents:detail", args=[document.pk])),
        client.get(reverse("documents:detail", args=[tree.document.pk]), {"node": tree.alpha.pk}),
        client.get(QUERY, {"query": payload, "budget": "lots"}),  # refused, the query shown back
    ]
    for page in pages:
        text = page.content.decode()
        assert page.status_code in (200, 400)
        assert SCRIPT not in text, "raw markup from user text reached the page"
        if payload == SCRIPT:
            assert ESCAPED_SCRIPT in text
        else:
            assert html.escape(payload) in text
    assert Document.objects.filter(pk=tree.document.pk).exists(), "the SQL text was data, not SQL"


def test_a_query_with_markup_is_shown_escaped_in_the_results(tree: Tree, hash_queries: None) -> None:
    response = _client(tree.owner).get(QUERY, {"query": f"facts {SCRIPT}", "budget": "500", "mode": "vector"})
    text = response.content.decode()
    assert response.status_code == 200 and SCRIPT not in text and ESCAPED_SCRIPT in text


def test_prompt_injection_in_a_document_is_only_text(tree: Tree) -> None:
    document = document_create(collection=tree.collection, content=INJECTION, queue=False).document
    assert Document.objects.get(pk=document.pk).content == INJECTION
    page = _client(tree.owner).get(reverse("documents:detail", args=[document.pk]))
    assert page.status_code == 200 and html.escape(INJECTION) in page.content.decode()


@pytest.mark.django_db(transaction=True)
def test_an_over_size_form_is_413_on_a_readable_page(live_url: str) -> None:
    """Over real HTTP: Django refused it with a bare 400 or 403 page saying nothing of the size."""
    size = settings.DATA_UPLOAD_MAX_MEMORY_SIZE + 1
    body = b"text=" + b"x" * (size - 5)
    response = httpx2.post(
        f"{live_url}{HOME}",
        content=body,
        headers={"Content-Type": "application/x-www-form-urlencoded"},
        timeout=120,
    )
    assert response.status_code == 413 and response.headers["Content-Type"].startswith("text/html")
    page = html.unescape(response.text)
    assert f"the server reads at most {settings.DATA_UPLOAD_MAX_MEMORY_SIZE:,}" in page
    assert "Split the document into smaller ones" in page


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
            HOME, {"uploads": [SimpleUploadedFile(bad.filename, bad.data())], "collection": "facts"}
        )
        if bad.refused:
            assert response.status_code == 400
            assert bad.fragment in html.unescape(response.content.decode())
            assert row_counts() == before and not stored_files(file_storage)
            return
        assert response.status_code == 302
        document = Document.objects.get(source_filename=bad.filename)
        job_run_now(document_id=document.pk)
    assert_failed_cleanly(document.pk, bad.fragment)
    # The corpus page and the document page say why, and offer the retry.
    corpus = html.unescape(client.get(HOME).content.decode())
    assert bad.fragment in corpus and "Retry" in corpus
    page = html.unescape(client.get(reverse("documents:detail", args=[document.pk])).content.decode())
    assert "Last indexing failed" in page and bad.fragment in page
