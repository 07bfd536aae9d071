"""Ask inside one document (issue 22 item 8): a question box on the document page queries only
that document, with no page reload, and marks the answer in the outline and in the text."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from django.test import Client
from playwright.sync_api import Page, expect

from documents.models import Document
from documents.services.documents import document_create
from documents.services.jobs import job_run_now
from retrieval.services import retrieve
from tests.browser.conftest import screenshot
from tests.factories import CollectionFactory, UserFactory

GUIDE = (
    "# Field guide to volcanoes\n\nA short guide to volcanoes, their shapes and their eruptions, for "
    "walkers who visit them.\n\n"
    "## Formation\n\nVolcanoes form where magma reaches the surface. Most sit on plate boundaries, "
    "where one plate sinks beneath another or two plates pull apart. A few rise over hot spots far "
    "from any boundary, such as the islands of Hawaii.\n\n"
    "## Field notes\n\nThe survey team keeps its notes on weather, travel and lodging in a separate "
    "log. Each walker signs the log before leaving the hut and again on return, with the time.\n\n"
    "## Eruptions\n\nShield volcanoes erupt gently, with runny lava that flows a long way. "
    "Stratovolcanoes erupt explosively: ash, gas and rock burst out and fall far from the vent.\n\n"
    "## Safety\n\nStay on marked paths, carry water and a mask, and turn back when the rangers say "
    "so. Gas can gather in hollows where no smell warns of it.\n"
)
# The other document answers the question better: only the filter keeps it out of the answer.
OTHER = (
    "# How volcanoes erupt\n\n## Why volcanoes erupt\n\n"
    "Volcanoes erupt when gas pressure in the magma chamber pushes magma up through the vent. "
    "How a volcano erupts depends on the gas in its magma: sticky magma traps gas and erupts explosively.\n"
)
OTHER_WORDS = "gas pressure in the magma chamber"
QUESTION = "How do volcanoes erupt?"


def _indexed(collection: Any, content: str, title: str) -> Document:
    document = document_create(collection=collection, content=content, title=title, queue=False).document
    run = job_run_now(document_id=document.pk)
    assert run is not None and run.succeeded
    return document


@pytest.fixture
def two_documents(page: Page, live_server: Any, transactional_db: None) -> tuple[Page, Document, Document]:
    owner = UserFactory.create(username="ada")
    collection = CollectionFactory.create(owner=owner, name="Field", slug="field")
    guide = _indexed(collection, GUIDE, "Field guide")
    other = _indexed(collection, OTHER, "Eruption primer")
    client = Client()
    client.force_login(owner)
    page.context.add_cookies(
        [{"name": "sessionid", "value": client.cookies["sessionid"].value, "url": live_server.url}]
    )
    return page, guide, other


def _ask(page: Page, question: str) -> None:
    page.get_by_label("Your question").fill(question)
    page.get_by_label("Token budget").fill("100")  # less than the document: passages, not all of it
    page.get_by_role("button", name="Ask", exact=True).click()
    expect(page.locator("#answer .answer-list li").first).to_be_visible(timeout=30_000)  # a busy machine


@pytest.mark.parametrize("width,height", [(1440, 900), (375, 812)])
def test_a_question_on_a_document_page_marks_its_answer(
    two_documents: tuple[Page, Document, Document], live_server: Any, width: int, height: int
) -> None:
    page, guide, other = two_documents
    unfiltered = retrieve(query=QUESTION, token_budget=2000, mode="vector", use_cache=False)
    assert other.pk in {chunk.document_id for chunk in unfiltered.chunks}, "the other document must tempt"
    page.set_viewport_size({"width": width, "height": height})
    page.goto(f"{live_server.url}/documents/{guide.pk}/")
    page.evaluate("() => { window.notReloaded = true; }")
    _ask(page, QUESTION)
    assert page.evaluate("() => window.notReloaded === true"), "the page reloaded"

    # Only this document's text comes back: every span lies in it, none of the other's words show.
    spans = json.loads(page.locator("#answer-spans").text_content() or "[]")
    assert spans, "the answer is empty"
    guide_nodes = set(guide.nodes.values_list("pk", flat=True))
    assert {span["node"] for span in spans} <= guide_nodes
    expect(page.locator("#answer")).not_to_contain_text(OTHER_WORDS)
    expect(page.locator("#document-text")).not_to_contain_text(OTHER_WORDS)

    # The text: each chunk highlighted, exactly its span of the document; the box shows the first.
    marks = page.locator("#document-text mark.answer-mark")
    expect(marks.first).to_be_visible()
    marked = "".join(marks.all_text_contents())
    expected = "".join(GUIDE[span["start"] : span["end"]] for span in sorted(spans, key=lambda s: s["start"]))
    assert marked == expected
    first_in_view = marks.first.evaluate(
        """(mark) => { const box = document.getElementById("document-text").getBoundingClientRect();
                       const at = mark.getBoundingClientRect();
                       return at.top >= box.top && at.top < box.bottom; }"""
    )
    assert first_in_view, "the text box is not scrolled to the first passage of the answer"

    # The outline: every chosen node marked, in words as well as colour.
    for node_id in {span["node"] for span in spans}:
        item = page.locator(f"#node-{node_id}")
        expect(item).to_have_class(re.compile(r"\bin-answer\b"))
        expect(item.locator(":scope > .node-row .answer-badge")).to_have_text("in the answer")

    # Selecting a node keeps the answer marked; clearing takes the marks away.
    page.locator("#answer .answer-list a").first.click()
    expect(page.locator("#selected-heading")).to_be_visible()
    expect(page.locator("#document-text mark.answer-mark").first).to_be_visible()
    expect(page.locator(".tree .in-answer").first).to_be_visible()
    wide = page.evaluate("() => document.documentElement.scrollWidth")
    assert wide <= width, f"the page scrolls sideways at {width} px ({wide} px)"
    if width == 1440:
        screenshot(page, "document-ask")
        page.set_viewport_size({"width": width, "height": height})
    page.get_by_role("button", name="Clear the highlights").click()
    expect(page.locator("#document-text mark.answer-mark")).to_have_count(0)
    expect(page.locator(".tree .in-answer")).to_have_count(0)
    assert page.evaluate("() => window.notReloaded === true"), "the page reloaded"
