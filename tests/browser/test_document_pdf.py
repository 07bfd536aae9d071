"""A PDF in a real browser: uploaded through the corpus page's file input, indexed by the real
worker, and a node on its second page shown on the page as drawn, its lines marked, at desktop
and phone widths (docs/screenshots/document-pdf-*.png)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from playwright.sync_api import FloatRect, Page, expect

from tests.browser.conftest import WIDTHS, screenshots_dir
from tests.documents.ingestion import document_files as files

# A bounding box may overrun its image by a rounding error, no more.
SLACK = 1.0


@pytest.fixture
def person(transactional_db: None) -> Any:
    return get_user_model().objects.create_user(username="ada", password="a long enough password")


def _sign_in(page: Page, live_server: Any) -> None:
    page.goto(f"{live_server.url}/")
    page.get_by_label("Username").fill("ada")
    page.get_by_label("Password").fill("a long enough password")
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_role("heading", name="Corpus")).to_be_visible()


def _inside(inner: FloatRect, outer: FloatRect) -> bool:
    return (
        inner["x"] >= outer["x"] - SLACK
        and inner["y"] >= outer["y"] - SLACK
        and inner["x"] + inner["width"] <= outer["x"] + outer["width"] + SLACK
        and inner["y"] + inner["height"] <= outer["y"] + outer["height"] + SLACK
    )


def test_a_pdf_node_is_shown_on_its_page_with_its_lines_marked(
    page: Page, live_server: Any, person: Any, celery_worker: None, file_storage: Path, tmp_path: Path
) -> None:
    _sign_in(page, live_server)
    pdf = tmp_path / "supply-agreement.pdf"
    pdf.write_bytes(files.report_pdf(pages=3))  # a heading, a running header and footer per page
    page.get_by_label("Or files").set_input_files(str(pdf))
    page.get_by_role("button", name="Add and index").click()
    expect(page.get_by_text("Added 1 document; indexing has started.")).to_be_visible()
    expect(page.locator("table.documents tbody tr .status")).to_have_text("Indexed", timeout=120_000)

    page.get_by_role("link", name="supply-agreement").click()
    expect(page.get_by_role("tree")).to_be_visible()
    page.get_by_role("link", name="section 2. Delivery of Goods").click()
    expect(page.locator("#selected-heading")).to_have_text("2. Delivery of Goods")
    expect(page.locator(".node-facts").first).to_contain_text("page 2")
    expect(page.locator("#selected-text")).to_contain_text(files.CLAUSES[1])

    views = page.locator(".page-view")
    expect(views).to_have_count(1)
    image = views.locator("img")
    expect(image).to_have_attribute("src", re.compile(r"/pages/2\.png$"))
    expect(views.locator("figcaption")).to_have_text("Page 2")
    marks = views.locator(".page-marks rect")
    expect(marks).to_have_count(5)  # the heading and the four body lines of page 2

    for label, (width, height) in WIDTHS.items():
        page.set_viewport_size({"width": width, "height": height})
        image.scroll_into_view_if_needed()
        # Lazy loading: the picture is fetched once it nears the viewport, then must decode.
        page.wait_for_function(
            "img => img.complete && img.naturalWidth > 0", arg=image.element_handle(), timeout=30_000
        )
        frame = image.bounding_box()
        assert frame and frame["width"] > 200, f"{label}: the page is too small to see ({frame})"
        if label == "desktop":  # an A4 page is 595pt wide: at least that many pixels keeps 11pt text 11px
            assert frame["width"] >= 595, f"the page is too small to read ({frame})"
        assert frame["x"] >= 0 and frame["x"] + frame["width"] <= width, f"{label}: the page is off-screen"
        tops = []
        for mark in marks.all():
            box = mark.bounding_box()
            assert box and box["width"] > 0 and box["height"] > 0, f"{label}: an empty mark"
            assert _inside(box, frame), f"{label}: a mark {box} outside the page {frame}"
            tops.append((box["y"] - frame["y"]) / frame["height"])
        # Page 2's section sits near the top of the page, below the running header (at ~5 %).
        assert all(0.08 < top < 0.35 for top in tops) and tops == sorted(tops), f"{label}: {tops}"
        assert page.evaluate("document.documentElement.scrollWidth") <= width, f"{label}: sideways scroll"
        page.screenshot(path=str(screenshots_dir() / f"document-pdf-{label}.png"), full_page=True)
