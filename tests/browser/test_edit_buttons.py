"""The edit panel's buttons say how much each action weighs (issue 22 item 9): one primary (save),
secondary for the less common actions and undo, danger (red) for exclude and dissolve; they were
all the same primary blue."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client
from playwright.sync_api import Page, expect

from documents.models import Document
from tests.browser.conftest import screenshot
from tests.factories import CollectionFactory, DocumentFactory, UserFactory
from tests.trees import sec, sec_text, sec_tree, tree_save

PRIMARY = "rgb(47, 111, 179)"  # --accent
DANGER_TEXT = "rgb(155, 28, 28)"
WHITE = "rgb(255, 255, 255)"


@pytest.fixture
def document(transactional_db: None) -> Document:
    spec = sec(
        "Supply agreement",
        "Two companies agree.",
        sec("Prices", "What things cost.", "Prices are fixed for a year.", "Then they follow the index."),
        sec("Payment", "When to pay.", "Invoices are paid in 30 days.", "Late payment bears interest."),
    )
    document = DocumentFactory.create(
        collection=CollectionFactory.create(owner=UserFactory.create(username="ada")),
        title="Supply",
        content=sec_text(spec),
    )
    tree_save(document, sec_tree(spec))
    return document


def _looks(page: Page) -> dict[str, tuple[str, str]]:
    """Each button in the open edit panel and the undo form: (background colour, text colour)."""
    looks: dict[str, list[str]] = page.evaluate(
        """() => Object.fromEntries([...document.querySelectorAll('.edit-panel button, .history button')]
              .map((b) => [b.textContent.trim(), [getComputedStyle(b).backgroundColor, getComputedStyle(b).color]]))"""
    )
    return {name: (background, colour) for name, (background, colour) in looks.items()}


def test_one_primary_secondary_for_the_rest_danger_for_exclude_and_dissolve(
    page: Page, live_server: Any, document: Document
) -> None:
    owner = document.collection.owner
    assert owner is not None
    client = Client()
    client.force_login(owner)
    page.context.add_cookies(
        [{"name": "sessionid", "value": client.cookies["sessionid"].value, "url": live_server.url}]
    )
    page.set_viewport_size({"width": 1440, "height": 900})
    section = document.nodes.get(title="Prices")  # a section with a sibling after it: Group shows
    page.goto(f"{live_server.url}/documents/{document.pk}/?node={section.pk}")
    page.get_by_text("Correct this node", exact=True).click()
    page.get_by_label("Title", exact=True).fill("Prices and rates")
    page.get_by_role("button", name="Save title and summary").click()
    expect(page.locator(".history li")).to_have_count(1)
    page.get_by_text("Correct this node", exact=True).click()
    looks = _looks(page)
    assert looks["Save title and summary"] == (PRIMARY, WHITE)
    for secondary in ("Move", "Group", "Undo the latest edit"):
        assert looks[secondary][0] == WHITE and looks[secondary][1] not in (WHITE, DANGER_TEXT), secondary
    for danger in ("Dissolve this section (its parts move up)", "Exclude from retrieval"):
        assert looks[danger] == (WHITE, DANGER_TEXT), danger
    primaries = [name for name, (background, _) in looks.items() if background == PRIMARY]
    assert primaries == ["Save title and summary"], "one primary action in the panel"

    leaf = document.nodes.get(content__startswith="Invoices")
    page.goto(f"{live_server.url}/documents/{document.pk}/?node={leaf.pk}")
    page.get_by_text("Correct this node", exact=True).click()
    looks = _looks(page)
    assert looks["Split"][0] == WHITE and looks["Merge with the next passage"][0] == WHITE
    assert looks["Exclude from retrieval"] == (WHITE, DANGER_TEXT)
    page.get_by_role("button", name="Exclude from retrieval").click()
    expect(page.locator(".history li")).to_have_count(2)
    page.get_by_text("Correct this node", exact=True).click()
    looks = _looks(page)
    included = looks["Include in retrieval again"]
    assert included[0] == WHITE and included[1] != DANGER_TEXT, "putting text back is not a danger"
    # The history names each node and shows what changed (checked in tests/web/test_history_page.py).
    expect(page.locator(".history li").last).to_contain_text("Changed Prices and rates")
    page.locator(".history").scroll_into_view_if_needed()
    screenshot(page, "document-history")
