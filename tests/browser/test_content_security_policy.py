"""Every page sends a Content-Security-Policy (issue 33 item 6: none did), and the app keeps to it:
walking through the main pages (corpus and upload, collections, a document and its tree, the
query page, a question asked on a document page, the API docs) with htmx swapping fragments in,
the browser reports no violation. A script written into a document's text does not run."""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.test import Client
from playwright.sync_api import ConsoleMessage, Page, expect

from documents.models import Document
from documents.services.documents import document_create
from documents.services.jobs import job_run_now
from tests.factories import CollectionFactory, UserFactory

GUIDE = (
    "# Field guide to volcanoes\n\nA short guide to volcanoes and their eruptions.\n\n"
    "## Formation\n\nVolcanoes form where magma reaches the surface. Most sit on plate boundaries.\n\n"
    "## Eruptions\n\nShield volcanoes erupt gently. Stratovolcanoes erupt explosively and build "
    'steep cones.\n\n## A note\n\n<script>window.injected = true</script><img src=x onerror="window.injected = true">\n'
)
# Collected in the page before any of its own scripts run; Playwright's init script is not the
# page's, so the policy does not stop it.
LISTEN = """
window.__violations = [];
document.addEventListener("securitypolicyviolation", (event) => {
  window.__violations.push(`${event.violatedDirective} ${event.blockedURI} ${event.sourceFile}:${event.lineNumber}`);
});
"""


@pytest.fixture
def visited(page: Page, live_server: Any, transactional_db: None) -> tuple[Page, Document, list[str]]:
    owner = UserFactory.create(username="ada")
    collection = CollectionFactory.create(owner=owner, name="Field", slug="field")
    guide = document_create(collection=collection, content=GUIDE, title="Field guide", queue=False).document
    run = job_run_now(document_id=guide.pk)
    assert run is not None and run.succeeded
    client = Client()
    client.force_login(owner)
    page.context.add_cookies(
        [{"name": "sessionid", "value": client.cookies["sessionid"].value, "url": live_server.url}]
    )
    console: list[str] = []

    def heard(message: ConsoleMessage) -> None:
        if "Content Security Policy" in message.text or "Content-Security-Policy" in message.text:
            console.append(message.text)

    page.on("console", heard)
    page.add_init_script(LISTEN)
    return page, guide, console


def _no_violation(page: Page, console: list[str], where: str) -> None:
    page.wait_for_load_state("networkidle")
    violations = page.evaluate("window.__violations")
    assert not violations and not console, f"{where}: {violations} {console}"


def test_the_main_pages_keep_to_their_content_security_policy(
    visited: tuple[Page, Document, list[str]], live_server: Any
) -> None:
    page, guide, console = visited
    answer = page.goto(f"{live_server.url}/")
    assert answer is not None
    policy = answer.headers["content-security-policy"]
    # The nonce is named only on pages that use one (Django adds it when a template reads it).
    assert "default-src 'self'" in policy and "script-src 'self'" in policy
    assert "'unsafe-inline'" not in policy and "'unsafe-eval'" not in policy

    # Upload: the corpus page's form, answered by an htmx swap.
    page.get_by_text("Add documents", exact=True).click()
    page.get_by_label("Text", exact=True).fill("# Tide tables\n\nHigh water at noon.\n")
    page.get_by_role("button", name="Add and index").click()
    expect(page.get_by_text("indexing has started")).to_be_visible()
    _no_violation(page, console, "upload")

    page.goto(f"{live_server.url}/collections/")
    expect(page.get_by_role("heading", name="Collections")).to_be_visible()
    _no_violation(page, console, "collections")

    # The document, then its tree with a node selected (an htmx swap of the layout).
    page.goto(f"{live_server.url}/documents/{guide.pk}/")
    expect(page.get_by_role("tree")).to_be_visible()
    page.locator(".outline .node-link").last.click()
    expect(page).to_have_url(re.compile(r"node=\d+"))
    expect(page.locator("#selected-text")).to_be_visible()
    _no_violation(page, console, "document and tree")
    assert page.evaluate("window.injected") is None, "a script in the document's text ran"

    # Ask this document: the answer swapped into the page, its spans marked by ask.js.
    page.get_by_label("Your question").fill("How do stratovolcanoes erupt?")
    page.get_by_role("button", name="Ask", exact=True).click()
    expect(page.locator("#answer .answer-list li").first).to_be_visible(timeout=30_000)
    _no_violation(page, console, "ask")

    # The query page: the budget's slider and number kept in step without inline handlers.
    page.goto(f"{live_server.url}/query/")
    page.get_by_label("token budget slider").fill("700")
    expect(page.locator("#id_budget")).to_have_value("700")
    page.get_by_label("What are you looking for?").fill("How do volcanoes form?")
    page.get_by_role("button", name="Search").click()
    expect(page.locator("#results .chunk").first).to_be_visible(timeout=30_000)
    _no_violation(page, console, "query")

    page.goto(f"{live_server.url}/docs")
    expect(page.locator(".swagger-ui .info .title")).to_contain_text("OpenFable API", timeout=30_000)
    _no_violation(page, console, "API docs")
