"""The query page shows only what an answer may hold, and whole titles (issue 22 item 9): text a
person excluded never shows, not even as grey context around a chunk, and the documents picker
shows each title whole at desktop and phone widths."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client
from playwright.sync_api import Page, expect

from documents.models import Document
from documents.services.documents import document_create
from documents.services.jobs import job_run_now
from documents.services.nodes import node_exclude
from tests.browser.conftest import WIDTHS, screenshot
from tests.factories import CollectionFactory, UserFactory

GUIDE = (
    "# Field guide to volcanoes\n\nA short guide to volcanoes and their eruptions.\n\n"
    "## Formation\n\nVolcanoes form where magma reaches the surface. Most sit on plate boundaries.\n\n"
    "## Field notes\n\nThe private field notes of the survey team stay out of every answer.\n\n"
    "## Eruptions\n\nShield volcanoes erupt gently, with runny lava. Stratovolcanoes erupt explosively.\n"
)
SECRET = "The private field notes of the survey team"
LONG_TITLE = (
    "Master supply agreement between Medimetriks Pharmaceuticals and the contract manufacturer, "
    "with the quality agreement and every amendment up to 2024"
)


def _indexed(owner: Any, content: str, title: str) -> Document:
    collection = CollectionFactory.create(owner=owner, name="Field", slug="field")
    document = document_create(collection=collection, content=content, title=title, queue=False).document
    run = job_run_now(document_id=document.pk)
    assert run is not None and run.succeeded
    return document


@pytest.fixture
def signed_in(page: Page, live_server: Any, transactional_db: None) -> tuple[Page, Any]:
    owner = UserFactory.create(username="ada")
    client = Client()
    client.force_login(owner)
    page.context.add_cookies(
        [{"name": "sessionid", "value": client.cookies["sessionid"].value, "url": live_server.url}]
    )
    page.set_viewport_size({"width": 1440, "height": 900})
    return page, owner


def test_excluded_text_shows_nowhere_in_an_answer(signed_in: tuple[Page, Any], live_server: Any) -> None:
    page, owner = signed_in
    guide = _indexed(owner, GUIDE, "Field guide")
    node_exclude(node=guide.nodes.get(title="Field notes"), user=owner)
    page.goto(f"{live_server.url}/query?query=Where+does+magma+reach+the+surface&budget=100&mode=vector")
    chunks = page.locator("article.chunk")
    expect(chunks.first).to_be_visible()
    expect(page.locator("#results mark", has_text="magma reaches the surface")).to_be_visible()
    # The leaf beside the chunk is excluded: the grey context stops short of it, marked "…".
    expect(page.locator("#results")).not_to_contain_text(SECRET)
    expect(page.locator("#results .collapsed").first).to_be_visible()
    screenshot(page, "query-excluded")


def test_the_documents_picker_shows_whole_titles(signed_in: tuple[Page, Any], live_server: Any) -> None:
    page, owner = signed_in
    document = _indexed(owner, GUIDE, LONG_TITLE)
    page.goto(f"{live_server.url}/query")
    for width, height in WIDTHS.values():
        page.set_viewport_size({"width": width, "height": height})
        choice = page.get_by_role("checkbox", name=LONG_TITLE, exact=True)
        expect(choice).to_be_visible()
        label = page.locator(".document-picker label", has_text="Master supply agreement")
        expect(label).to_have_text(LONG_TITLE)  # whole, not cut with "…"
        clipped = label.evaluate("(e) => e.scrollWidth > e.clientWidth + 1")
        assert not clipped, f"the title is cut at {width} px"
        wide = page.evaluate("() => document.documentElement.scrollWidth")
        assert wide <= width, f"the page scrolls sideways at {width} px ({wide} px)"
    choice = page.get_by_role("checkbox", name=LONG_TITLE, exact=True)
    choice.check()
    page.get_by_label("What are you looking for?").fill("How do volcanoes erupt?")
    page.get_by_role("button", name="Search").click()
    expect(page.locator("article.chunk").first).to_be_visible()
    assert f"documents={document.pk}" in page.url, "the ticked document filters the query"
    expect(page.get_by_role("checkbox", name=LONG_TITLE, exact=True)).to_be_checked()
    screenshot(page, "query")


def test_a_throttled_query_says_so_in_place(
    signed_in: tuple[Page, Any], live_server: Any, settings: Any
) -> None:
    """Issue 33 item 3: the page counts in the per-user rate, and htmx shows the 429's fragment in
    the results (htmx leaves a 4xx out of the page unless told: app.js tells it)."""
    from django.core.cache import caches

    page, owner = signed_in
    _indexed(owner, GUIDE, "Field guide")
    settings.API_THROTTLE_RATES = {owner.username: "1/minute"}
    caches["rate_limit"].clear()
    try:
        page.goto(f"{live_server.url}/query/")
        page.get_by_label("What are you looking for?").fill("Where does magma reach the surface?")
        page.get_by_role("button", name="Search").click()
        expect(page.locator("article.chunk").first).to_be_visible(timeout=30_000)
        with page.expect_response(lambda response: "/query/" in response.url) as answered:
            page.get_by_role("button", name="Search").click()
        assert answered.value.status == 429 and int(answered.value.headers["retry-after"]) > 0
        alert = page.locator("#results [role=alert]")
        expect(alert).to_contain_text("Too many requests")
        expect(alert).to_contain_text("Try again in")
        expect(page.locator("article.chunk")).to_have_count(0)
    finally:
        caches["rate_limit"].clear()
