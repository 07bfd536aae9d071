"""A person's way through the app in a real browser: sign in, upload, watch indexing, read a tree,
query. Each page is saved as a screenshot at desktop and phone widths (docs/screenshots/)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from playwright.sync_api import Page, expect

from documents.models import Document
from tests.browser.conftest import screenshot

GUIDE = (
    "# Field guide to volcanoes\n\nA short guide to volcanoes and their eruptions.\n\n"
    "## Formation\n\nVolcanoes form where magma reaches the surface. Most sit on plate boundaries, "
    "where plates part or collide.\n\n"
    "## Eruptions\n\nShield volcanoes erupt gently, with runny lava. Stratovolcanoes erupt explosively "
    "and build steep cones of ash and lava.\n"
)
TIDES = "# Tide tables\n\nHigh tide comes twice a day.\n\nThe moon pulls the water towards it.\n"


@pytest.fixture
def person(transactional_db: None) -> Any:
    return get_user_model().objects.create_user(username="ada", password="a long enough password")


def _sign_in(page: Page, live_server: Any) -> None:
    page.goto(f"{live_server.url}/")
    expect(page).to_have_url(f"{live_server.url}/accounts/login/?next=/")
    screenshot(page, "sign-in")
    page.get_by_label("Username").fill("ada")
    page.get_by_label("Password").fill("a long enough password")
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_role("heading", name="Corpus")).to_be_visible()


def test_upload_watch_read_and_query(
    page: Page, live_server: Any, person: Any, celery_worker: None, tmp_path: Path
) -> None:
    _sign_in(page, live_server)
    expect(page.get_by_text("No documents yet")).to_be_visible()
    screenshot(page, "corpus-empty")

    (tmp_path / "guide.md").write_text(GUIDE)
    (tmp_path / "tides.txt").write_text(TIDES)
    page.get_by_label("Or files").set_input_files([str(tmp_path / "guide.md"), str(tmp_path / "tides.txt")])
    page.get_by_role("button", name="Add and index").click()
    expect(page.get_by_text("Added 2 documents; indexing has started.")).to_be_visible()
    rows = page.locator("table.documents tbody tr")
    expect(rows).to_have_count(2)
    # The rows poll their own progress and reach "Indexed" without a reload.
    for row in rows.all():
        expect(row.locator(".status")).to_have_text("Indexed", timeout=120_000)
    assert Document.objects.filter(status="indexed").count() == 2
    screenshot(page, "corpus")

    page.get_by_role("link", name="guide").click()
    expect(page.get_by_role("tree")).to_be_visible()
    page.get_by_role("link", name="section Eruptions").click()
    expect(page.locator("#selected-heading")).to_have_text("Eruptions")
    expect(page.locator("li.selected > .node-row > a.node-link")).to_contain_text("Eruptions")
    expect(page.locator("#selected-text")).to_contain_text("Stratovolcanoes erupt explosively")
    screenshot(page, "document")

    # Correct the tree: a summary, a split and a merge, a move, an exclusion; then undo them.
    page.get_by_text("Correct this node", exact=True).click()
    page.get_by_label("Summary").fill("How shield and stratovolcanoes erupt.")
    page.get_by_role("button", name="Save title and summary").click()
    expect(page.get_by_text("Saved; the node is being re-embedded.")).to_be_visible()
    expect(page.locator("p.summary")).to_have_text("How shield and stratovolcanoes erupt.")

    guide = Document.objects.get(title="guide")
    leaves_before = guide.nodes.filter(kind="leaf").count()
    page.get_by_role("link", name="leaf Eruptions").click()
    expect(page.locator("#selected-heading")).to_contain_text("Eruptions Shield volcanoes")
    page.get_by_text("Correct this node", exact=True).click()
    page.get_by_role("button", name="Split", exact=True).click()
    expect(page.get_by_text("Split in two.")).to_be_visible()
    assert guide.nodes.filter(kind="leaf").count() == leaves_before + 1
    page.get_by_text("Correct this node", exact=True).click()
    page.get_by_role("button", name="Merge with the next passage").click()
    expect(page.get_by_text("Merged with the next passage.")).to_be_visible()
    assert guide.nodes.filter(kind="leaf").count() == leaves_before

    page.get_by_role("link", name="section Eruptions").click()
    expect(page.locator("#selected-heading")).to_have_text("Eruptions")
    page.get_by_text("Correct this node", exact=True).click()
    page.get_by_label("Move to").select_option(label="Section “Formation”, at the end")
    page.get_by_role("button", name="Move", exact=True).click()
    expect(page.get_by_text("Moved.")).to_be_visible()
    assert guide.nodes.get(title="Eruptions").kind == "subsection"

    page.get_by_text("Correct this node", exact=True).click()
    page.get_by_role("button", name="Exclude from retrieval").click()
    expect(page.get_by_text("Excluded from retrieval.")).to_be_visible()
    expect(page.locator(".tree .marker-excluded").first).to_be_visible()
    screenshot(page, "document-edited")

    page.get_by_role("link", name="Query").click()
    page.get_by_label("What are you looking for?").fill("How do stratovolcanoes erupt?")
    page.locator("#id_budget").fill("200")
    page.get_by_role("button", name="Search").click()
    expect(page.locator(".result-summary")).to_be_visible()  # the answer is in: now check what it holds
    expect(page.locator("article.chunk").first).to_be_visible()
    # Nothing from the excluded section: not as evidence, nor as grey context around a neighbour.
    expect(page.locator("#results")).not_to_contain_text("Stratovolcanoes erupt explosively")

    page.go_back()
    page.goto(f"{live_server.url}/documents/{guide.pk}/")
    for undone in range(1, 6):  # exclude, move, merge, split, summary
        page.get_by_role("button", name="Undo the latest edit").click()
        # Wait for this undo's answer before the next click: the history shows one more undone.
        expect(page.locator(".history li.undone")).to_have_count(undone)
    assert (
        guide.nodes.get(title="Eruptions").kind == "section"
        and not guide.nodes.filter(excluded=True).exists()
    )

    page.get_by_role("link", name="Query").click()
    page.get_by_label("What are you looking for?").fill("How do stratovolcanoes erupt?")
    page.locator("#id_budget").fill("200")
    page.get_by_role("button", name="Search").click()
    chunks = page.locator("article.chunk")
    expect(chunks.first).to_be_visible()
    order = [
        (int(c.get_attribute("data-document-rank") or 0), int(c.get_attribute("data-start") or 0))
        for c in chunks.all()
    ]
    assert order == sorted(order), "chunks come in document order"
    assert sum(int(c.get_attribute("data-tokens") or 0) for c in chunks.all()) <= 200
    expect(page.locator("mark").first).to_contain_text("erupt")
    screenshot(page, "query")

    page.get_by_role("link", name="Collections").click()
    page.get_by_label("New collection").fill("Field notes")
    page.get_by_role("button", name="Make it").click()
    expect(page.get_by_role("heading", name="Field notes")).to_be_visible()
    screenshot(page, "collection")

    page.get_by_role("link", name="API tokens").click()
    page.get_by_label("New token for").fill("laptop scripts")
    page.get_by_role("button", name="Make a token").click()
    expect(page.locator("#new-key")).to_contain_text("of_")
    screenshot(page, "tokens")
