"""The document page keeps its place and works from the keyboard and on a phone (issue 22 items
1-4, and the delete prompt of item 9): a long generated contract whose outline scrolls, driven in
Debian's chromium against the live server."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from django.test import Client
from playwright.sync_api import Page, ViewportSize, expect

from documents.models import Document
from tests.browser.conftest import screenshot
from tests.factories import CollectionFactory, DocumentFactory, UserFactory
from tests.trees import Sec, sec, sec_text, sec_tree, tree_save

ARTICLES = (
    "Definitions", "Supply", "Prices", "Payment", "Delivery", "Quality", "Warranties", "Indemnity",
    "Insurance", "Confidentiality", "Records", "Audit", "Notices", "Assignment", "Force majeure",
    "Governing law", "Disputes", "Termination", "Survival", "Miscellaneous",
)  # fmt: skip
CLAUSES = 3
PHONE: ViewportSize = {"width": 375, "height": 812}
DESKTOP: ViewportSize = {"width": 1440, "height": 900}


def _contract() -> Sec:
    """20 articles of 3 clauses, each with its text: 141 nodes, an outline much taller than the screen."""
    articles = []
    for number, name in enumerate(ARTICLES, start=1):
        clauses = [
            sec(
                f"{number}.{clause} {name} clause {clause}",
                f"What clause {number}.{clause} says about {name.lower()}.",
                f"{number}.{clause} The parties agree on {name.lower()}, point {clause}. "
                + "Each party keeps to this clause in good faith and in writing. " * 6,
            )
            for clause in range(1, CLAUSES + 1)
        ]
        articles.append(sec(name, f"The article on {name.lower()}.", *clauses))
    return sec("Supply agreement", "A supply agreement between two companies.", *articles)


@pytest.fixture
def contract(transactional_db: None) -> Document:
    owner = UserFactory.create(username="ada")
    spec = _contract()
    document = DocumentFactory.create(
        collection=CollectionFactory.create(owner=owner, name="Contracts", slug="contracts"),
        title="Supply agreement",
        content=sec_text(spec),
    )
    tree_save(document, sec_tree(spec))
    return document


@pytest.fixture
def signed_in(page: Page, live_server: Any, contract: Document) -> Iterator[Page]:
    """The browser holds ada's session cookie (signing in through the form is another test's)."""
    owner = contract.collection.owner
    assert owner is not None
    client = Client()
    client.force_login(owner)
    page.context.add_cookies(
        [{"name": "sessionid", "value": client.cookies["sessionid"].value, "url": live_server.url}]
    )
    page.set_viewport_size(DESKTOP)
    yield page


def _open(page: Page, live_server: Any, document: Document, node: int | None = None) -> None:
    page.goto(f"{live_server.url}/documents/{document.pk}/" + (f"?node={node}" if node else ""))
    expect(page.get_by_role("tree")).to_be_visible()


def _node(document: Document, title: str) -> int:
    return int(document.nodes.get(title=title).pk)


def _outline_top(page: Page) -> float:
    return float(page.evaluate("document.querySelector('.outline').scrollTop"))


def _focused(page: Page) -> str:
    return str(page.evaluate("document.activeElement.id || document.activeElement.tagName"))


def _in_outline_view(page: Page, node_id: int) -> bool:
    return bool(
        page.evaluate(
            """id => {
                const row = document.querySelector(`#node-${id} .node-link`).getBoundingClientRect();
                const box = document.querySelector('.outline').getBoundingClientRect();
                const onScreen = row.top >= 0 && row.bottom <= window.innerHeight;
                return onScreen && row.top >= box.top - 1 && row.bottom <= box.bottom + 1;
            }""",
            node_id,
        )
    )


# -- item 1: the outline keeps its place ----------------------------------------------------------


def test_selecting_and_editing_keep_the_outlines_place(
    signed_in: Page, live_server: Any, contract: Document
) -> None:
    page = signed_in
    _open(page, live_server, contract)
    deep = _node(contract, "17.2 Disputes clause 2")
    page.locator(f"#node-{deep}").scroll_into_view_if_needed()
    before = _outline_top(page)
    assert before > 1000, "the outline scrolled a long way down to reach the node"

    page.locator(f"#node-{deep} .node-link").first.click()
    expect(page.locator("#selected-heading")).to_have_text("17.2 Disputes clause 2")
    expect(page.locator(f"#node-{deep}")).to_have_attribute("aria-selected", "true")
    assert abs(_outline_top(page) - before) < 2, "the outline did not jump back to the top"
    assert _focused(page) == f"node-{deep}", "focus stays on the node just selected"
    assert _in_outline_view(page, deep)

    # An edit from the panel: the outline is rendered again, and keeps its place and the focus.
    page.get_by_text("Correct this node", exact=True).click()
    page.get_by_role("button", name="Exclude from retrieval").click()
    expect(page.get_by_text("Excluded from retrieval.")).to_be_visible()
    expect(page.locator(f"#node-{deep} .marker-excluded").first).to_be_visible()
    assert abs(_outline_top(page) - before) < 2
    assert _focused(page) == f"node-{deep}"
    assert _in_outline_view(page, deep)

    # The same edit panel from the keyboard alone: Tab from the node, open, type, Enter.
    page.keyboard.press("Tab")
    assert page.evaluate("document.activeElement.textContent") == "Correct this node"
    page.keyboard.press("Enter")
    page.keyboard.press("Tab")
    page.keyboard.type("Disputes: the second clause")
    page.keyboard.press("Enter")
    expect(page.locator("#selected-heading")).to_have_text("Disputes: the second clause")
    assert abs(_outline_top(page) - before) < 2
    assert _focused(page) == f"node-{deep}", "back on the node just corrected"


# -- item 2: a keyboard tree ------------------------------------------------------------------------


def test_the_outline_is_one_tab_stop_driven_by_the_arrow_keys(
    signed_in: Page, live_server: Any, contract: Document
) -> None:
    page = signed_in
    _open(page, live_server, contract)
    root = _node(contract, "Supply agreement")
    supply, prices, payment = (_node(contract, title) for title in ("Supply", "Prices", "Payment"))

    # Tab from the page's top: into the tree once, and out of it with the next Tab.
    stops = []
    page.locator("h1").click()
    for _ in range(40):
        page.keyboard.press("Tab")
        stops.append(page.evaluate("document.activeElement.closest('[role=tree]') !== null"))
        if stops[-1]:
            break
    assert stops[-1], "Tab reaches the outline"
    assert _focused(page) == f"node-{root}", "with nothing selected the first node takes the Tab stop"
    page.keyboard.press("Tab")
    assert not page.evaluate("document.activeElement.closest('[role=tree]')"), "one Tab stop in all"
    page.keyboard.press("Shift+Tab")
    assert _focused(page) == f"node-{root}"

    scroll_before = page.evaluate("window.scrollY")
    page.keyboard.press("ArrowDown")
    assert _focused(page) == f"node-{_node(contract, 'Definitions')}"
    assert page.evaluate("window.scrollY") == scroll_before, "the arrow keys move, they do not scroll"
    assert page.locator(f"#node-{root}").get_attribute("tabindex") == "-1"
    assert page.locator(f"#node-{_node(contract, 'Definitions')}").get_attribute("tabindex") == "0"

    # Left closes a branch (its nodes are skipped), Right opens it and then enters it.
    page.keyboard.press("ArrowLeft")
    definitions = page.locator(f"#node-{_node(contract, 'Definitions')}")
    expect(definitions).to_have_attribute("aria-expanded", "false")
    page.keyboard.press("ArrowDown")
    assert _focused(page) == f"node-{supply}", "a closed branch's children are skipped"
    page.keyboard.press("ArrowUp")
    page.keyboard.press("ArrowRight")
    expect(definitions).to_have_attribute("aria-expanded", "true")
    page.keyboard.press("ArrowRight")
    assert _focused(page) == f"node-{_node(contract, '1.1 Definitions clause 1')}"
    page.keyboard.press("ArrowLeft")  # the clause is an open branch (over its passage): it closes first
    page.keyboard.press("ArrowLeft")
    assert _focused(page) == f"node-{_node(contract, 'Definitions')}", "Left goes up to the parent"
    assert page.locator(f"#node-{root}").get_attribute("aria-level") == "1"
    assert definitions.get_attribute("aria-level") == "2"

    page.keyboard.press("End")
    last = page.evaluate(
        "[...document.querySelectorAll('[role=treeitem]')].filter(i => i.offsetParent).pop().id"
    )
    assert _focused(page) == last
    assert page.evaluate("document.querySelector('.outline').scrollTop") > 1000, "End shows the last node"
    page.keyboard.press("Home")
    assert _focused(page) == f"node-{root}"

    # Type-ahead: "p" goes to the first title starting so (Prices), "pa" on to Payment.
    page.keyboard.press("p")
    assert _focused(page) == f"node-{prices}"
    page.keyboard.press("a")
    assert _focused(page) == f"node-{payment}"

    # Enter selects: the panel shows the node, and focus stays on it.
    page.keyboard.press("Enter")
    expect(page.locator("#selected-heading")).to_have_text("Payment")
    expect(page.locator(f"#node-{payment}")).to_have_attribute("aria-selected", "true")
    assert _focused(page) == f"node-{payment}"
    assert page.locator(f"#node-{payment}").get_attribute("tabindex") == "0"
    assert page.locator('[role="tree"] [tabindex="0"]').count() == 1


# -- item 3: the page opens at its top; only the text box scrolls ---------------------------------


def test_the_page_opens_at_the_top_and_scrolls_only_the_text_box(
    signed_in: Page, live_server: Any, contract: Document
) -> None:
    page = signed_in
    _open(page, live_server, contract)
    assert page.evaluate("window.scrollY") == 0
    assert page.locator("#selected-text").count() == 0, "nothing selected: no highlight"
    assert page.evaluate("document.getElementById('document-text').scrollTop") == 0
    expect(page.locator("#document-text")).to_contain_text("1.1 The parties agree on definitions")

    deep = _node(contract, "18.3 Termination clause 3")
    for size in (DESKTOP, PHONE):
        page.set_viewport_size(size)
        _open(page, live_server, contract, deep)
        assert page.evaluate("window.scrollY") == 0, f"opens at its title at {size['width']} px"
        text_top = page.evaluate("document.getElementById('document-text').scrollTop")
        assert text_top > 1000, "the text box is scrolled to the selected node"
        assert page.evaluate(
            """() => {
                const box = document.getElementById('document-text').getBoundingClientRect();
                const mark = document.getElementById('selected-text').getBoundingClientRect();
                return mark.top >= box.top && mark.top < box.bottom;
            }"""
        ), "the highlighted text is in the box's view"
        assert _in_outline_view(page, deep), "and the outline shows the selected node"

    # On a phone a tap in the outline brings the highlighted text into view.
    other = _node(contract, "3.1 Prices clause 1")
    page.locator(f"#node-{other} .node-link").first.click()
    expect(page.locator("#selected-heading")).to_have_text("3.1 Prices clause 1")
    assert page.evaluate(
        """() => {
            const mark = document.getElementById('selected-text').getBoundingClientRect();
            return mark.top >= 0 && mark.top < window.innerHeight;
        }"""
    ), "the tapped node's text is on the screen"
    page.evaluate("window.scrollTo(0, 0)")  # a whole-page picture of a window scrolled down shows
    screenshot(page, "document-outline-selected")  # the sticky outline down where it stuck


# -- item 4: nothing scrolls sideways at 375 px -----------------------------------------------------


def _page_width(page: Page) -> int:
    return int(page.evaluate("document.documentElement.scrollWidth"))


def test_no_page_scrolls_sideways_on_a_phone(signed_in: Page, live_server: Any, contract: Document) -> None:
    page = signed_in
    page.set_viewport_size(PHONE)
    leaf = int(contract.nodes.get(parent_id=_node(contract, "7.2 Warranties clause 2")).pk)
    for node in (_node(contract, "Supply agreement"), _node(contract, "Warranties"), leaf):
        _open(page, live_server, contract, node)
        page.get_by_text("Correct this node", exact=True).click()
        expect(page.get_by_role("button", name="Save title and summary")).to_be_visible()
        assert _page_width(page) <= 375, f"node {node}: the page is {_page_width(page)} px wide"
        for button in ("Split", "Move", "Group", "Exclude from retrieval"):
            found = page.get_by_role("button", name=button, exact=True)
            if found.count():
                box = found.bounding_box()
                assert box is not None and box["x"] + box["width"] <= 375, f"{button} is on the screen"
    screenshot(page, "document-outline-edit")
    page.set_viewport_size(PHONE)  # the screenshots leave the page at desktop width

    page.goto(f"{live_server.url}/accounts/tokens/")
    page.get_by_label("New token for").fill("a script with a rather long name for a phone screen")
    page.get_by_role("button", name="Make a token").click()
    expect(page.locator("#new-key")).to_contain_text("of_")
    assert _page_width(page) <= 375
    revoke = page.get_by_role("button", name="Revoke").bounding_box()
    assert revoke is not None and revoke["x"] + revoke["width"] <= 375, "Revoke is on the screen"

    page.goto(f"{live_server.url}/collections/")
    assert _page_width(page) <= 375
    documents = page.get_by_role("link", name="1", exact=True).bounding_box()
    assert documents is not None and documents["x"] + documents["width"] <= 375, "the Documents column shows"

    for path in ("/", "/collections/contracts/", "/query/?query=warranties+in+good+faith&budget=300"):
        page.goto(f"{live_server.url}{path}")
        # Every panel open: the query's "Paths and timings" and each chunk's scores.
        page.evaluate("document.querySelectorAll('details').forEach(panel => { panel.open = true; })")
        assert _page_width(page) <= 375, f"{path} is {_page_width(page)} px wide"
    expect(page.locator("article.chunk").first).to_be_visible()


# -- item 9: deleting a document asks once ---------------------------------------------------------


def test_deleting_a_document_asks_once(signed_in: Page, live_server: Any, contract: Document) -> None:
    page = signed_in
    page.goto(f"{live_server.url}/")
    asked: list[str] = []

    def answer(dialog: Any) -> None:
        asked.append(dialog.message)
        dialog.accept()

    page.on("dialog", answer)
    page.get_by_role("button", name="Delete").click()
    expect(page.locator(f"#document-{contract.pk}")).to_have_count(0)
    assert asked == ["Delete “Supply agreement” and its tree?"]
    assert not Document.objects.filter(pk=contract.pk).exists()
