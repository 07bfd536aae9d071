"""Accessibility checked by a machine (issue 22 item 11): axe-core on every page and state, at
1440 and 375 px, finds no serious or critical violation."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.staticfiles import finders
from django.test import Client
from playwright.sync_api import Page, expect

from documents.services.documents import document_create
from documents.services.jobs import job_run_now
from documents.services.nodes.texts import node_update
from openfable.api_tokens import token_create
from tests.browser.axe import axe_check
from tests.factories import CollectionFactory, UserFactory

GUIDE = (
    "# Field guide to volcanoes\n\nA short guide to volcanoes and their eruptions.\n\n"
    "## Formation\n\nVolcanoes form where magma reaches the surface. Most sit on plate boundaries.\n\n"
    "## Eruptions\n\nShield volcanoes erupt gently, with runny lava. Stratovolcanoes erupt explosively.\n\n"
    "## Eruptions\n\nA second section with the same title, so the review list has something to show.\n"
)


def _sign_in(page: Page, live_server: Any, user: Any) -> None:
    client = Client()
    client.force_login(user)
    page.context.add_cookies(
        [{"name": "sessionid", "value": client.cookies["sessionid"].value, "url": live_server.url}]
    )


@pytest.mark.usefixtures("transactional_db")
def test_no_serious_or_critical_violation_on_any_page(page: Page, live_server: Any) -> None:
    assert finders.find("axe.min.js") is None, "axe-core is for the tests: the app must not serve it"
    found: list[str] = []
    url = live_server.url
    page.set_viewport_size({"width": 1440, "height": 900})

    page.goto(f"{url}/accounts/login/")
    axe_check(page, "sign-in", found)
    page.get_by_label("Username").fill("nobody")
    page.get_by_label("Password").fill("wrong password")
    page.get_by_role("button", name="Sign in").click()
    expect(page.locator(".error-message, .errorlist").first).to_be_visible()
    axe_check(page, "sign-in refused", found)

    ada = UserFactory.create(username="ada")
    _sign_in(page, live_server, ada)
    for state, path in [
        ("empty corpus", "/"),
        ("no collections", "/collections/"),
        ("no tokens", "/accounts/tokens/"),
        ("empty query page", "/query/"),
    ]:
        page.goto(url + path)
        axe_check(page, state, found)

    collection = CollectionFactory.create(owner=ada, name="Field", slug="field")
    guide = document_create(collection=collection, content=GUIDE, title="Field guide", queue=False).document
    run = job_run_now(document_id=guide.pk)
    assert run is not None and run.succeeded
    document_create(collection=collection, content="Waiting in the queue.", title="Queued note", queue=False)
    token_create(user=ada, name="laptop scripts")

    for state, path in [
        ("full corpus", "/"),
        ("collections", "/collections/"),
        ("collection", "/collections/field/"),
        ("tokens", "/accounts/tokens/"),
        ("document", f"/documents/{guide.pk}/"),
    ]:
        page.goto(url + path)
        axe_check(page, state, found)

    page.goto(f"{url}/accounts/tokens/")
    page.get_by_label("New token for").fill("notebook")
    page.get_by_role("button", name="Make a token").click()
    expect(page.locator("#new-key")).to_be_visible()
    axe_check(page, "token made", found)

    node = guide.nodes.exclude(title="").filter(kind="section").first()
    assert node is not None
    node_update(node=node, title="How volcanoes form", user=ada)
    page.goto(f"{url}/documents/{guide.pk}/?node={node.pk}")
    expect(page.locator("#selected-heading")).to_be_visible()
    expect(page.locator(".history li").first).to_be_visible()
    axe_check(page, "document, node selected, history and review", found)
    page.get_by_text("Correct this node").click()
    expect(page.get_by_label("Title", exact=True)).to_be_visible()
    axe_check(page, "edit panel open", found)

    page.get_by_label("Your question").fill("How do volcanoes erupt?")
    page.get_by_role("button", name="Ask", exact=True).click()
    expect(page.locator("#answer .answer-list li").first).to_be_visible(timeout=30_000)
    axe_check(page, "document question answered", found)

    page.goto(f"{url}/query/?query=How+do+volcanoes+erupt&budget=500&mode=vector")
    expect(page.locator("article.chunk").first).to_be_visible()
    axe_check(page, "query answered", found)

    page.goto(f"{url}/documents/999999/")  # a document that is not there: the 404 page
    axe_check(page, "not found", found)
    # Not /docs: that page is Swagger UI's own markup and stylesheet (drf-spectacular-sidecar), where
    # axe finds Swagger's contrast, a missing lang and nested controls; the app's pages are checked.

    assert not found, "axe-core found serious or critical violations:\n" + "\n".join(found)
