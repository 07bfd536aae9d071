"""The API docs keep the no-CDN promise (issue 22 item 10): /docs (Swagger UI) and /redoc, which
leads there, load everything from this server, in a real browser, and only for a person signed in."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

import pytest
from django.test import Client
from playwright.sync_api import Page, expect

from tests.browser.conftest import screenshot
from tests.factories import UserFactory


@pytest.mark.django_db(transaction=True)
def test_the_docs_ask_nothing_of_another_host(page: Page, live_server: Any) -> None:
    asked: list[str] = []
    page.on("request", lambda request: asked.append(request.url))
    page.goto(f"{live_server.url}/docs")
    expect(page).to_have_url(f"{live_server.url}/accounts/login/?next=/docs")  # signed in only

    client = Client()
    client.force_login(UserFactory.create(username="ada"))
    page.context.add_cookies(
        [{"name": "sessionid", "value": client.cookies["sessionid"].value, "url": live_server.url}]
    )
    for path in ("/docs", "/redoc"):
        page.goto(f"{live_server.url}{path}")
        expect(page).to_have_url(f"{live_server.url}/docs")
        # The schema loaded (over the session) and drawn: the query operation is listed.
        expect(page.get_by_text("/v1/api/query", exact=True).first).to_be_visible(timeout=15_000)
        page.wait_for_load_state("networkidle")
    expect(page.locator(".swagger-ui .errors-wrapper")).to_have_count(0)
    expect(page.locator("img[src*='validator']")).to_have_count(0)
    screenshot(page, "api-docs")
    page.wait_for_load_state("networkidle")

    here = urlsplit(live_server.url).netloc
    elsewhere = sorted(
        {url for url in asked if urlsplit(url).scheme != "data" and urlsplit(url).netloc != here}
    )
    assert elsewhere == [], f"the docs asked another host: {elsewhere}"
    assert any("/v1/api/schema/" in url for url in asked), "the schema came from this server"
