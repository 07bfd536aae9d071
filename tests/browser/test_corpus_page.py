"""The corpus page leads with the documents (issue 22 item 12): the list comes first, adding is one
button away, and files dropped anywhere on the page (not only on the form) are taken in."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client
from playwright.sync_api import Page, expect

from documents.models import Document
from tests.browser.conftest import WIDTHS, screenshot
from tests.factories import CollectionFactory, DocumentFactory, UserFactory

# A drop as the browser makes it: files in a DataTransfer, dragged over the element and let go.
DROP = """([selector, name, text]) => {
  const where = document.querySelector(selector);
  const files = new DataTransfer();
  files.items.add(new File([text], name, { type: "text/markdown" }));
  for (const type of ["dragenter", "dragover"]) {
    where.dispatchEvent(new DragEvent(type, { bubbles: true, cancelable: true, dataTransfer: files }));
  }
  const overlay = getComputedStyle(document.body, "::after").content;
  where.dispatchEvent(new DragEvent("drop", { bubbles: true, cancelable: true, dataTransfer: files }));
  return overlay;
}"""


@pytest.fixture
def signed_in(page: Page, live_server: Any, transactional_db: None) -> tuple[Page, Any]:
    owner = UserFactory.create(username="ada")
    collection = CollectionFactory.create(owner=owner, name="Contracts", slug="contracts")
    DocumentFactory.create(collection=collection, title="Supply agreement", content="The parties agree.")
    client = Client()
    client.force_login(owner)
    page.context.add_cookies(
        [{"name": "sessionid", "value": client.cookies["sessionid"].value, "url": live_server.url}]
    )
    return page, owner


def test_the_documents_come_first_and_adding_is_one_button_away(
    signed_in: tuple[Page, Any], live_server: Any
) -> None:
    page, _ = signed_in
    page.goto(f"{live_server.url}/")
    for width, height in WIDTHS.values():
        page.set_viewport_size({"width": width, "height": height})
        documents = page.get_by_role("link", name="Supply agreement")
        expect(documents).to_be_in_viewport()
        expect(page.get_by_role("button", name="Add and index")).to_be_hidden()
    screenshot(page, "corpus-documents")
    page.get_by_text("Add documents", exact=True).click()
    expect(page.get_by_label("Text", exact=True)).to_be_visible()
    expect(page.get_by_role("button", name="Add and index")).to_be_visible()


def test_files_dropped_anywhere_on_the_page_are_added(
    signed_in: tuple[Page, Any], live_server: Any, celery_worker: None
) -> None:
    page, _ = signed_in
    page.goto(f"{live_server.url}/")
    # Dropped on the documents table, far from the (closed) upload form.
    overlay = page.evaluate(
        DROP, ["table.documents", "tides.md", "# Tide tables\n\nHigh tide comes twice a day.\n"]
    )
    assert "Drop the files" in overlay, "the page shows where the files will go while they are dragged"
    expect(page.locator("body.dropping-files")).to_have_count(0)
    expect(page.locator(".dropzone-hint")).to_contain_text("1 file ready")
    add = page.get_by_role("button", name="Add and index")
    expect(add).to_be_focused()
    add.click()
    expect(page.get_by_text("Added 1 document; indexing has started.")).to_be_visible()
    assert Document.objects.filter(title__icontains="tide").exists()
