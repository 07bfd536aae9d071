"""Moving a node on the document page (issue 22 item 6): the move menu offers only the places the
move takes, with the place where the text stays in order; a node is dragged in the outline onto
a highlighted place, or moved from the keyboard. Every move keeps the leaves an exact partition of
the text. The contract and the signed-in browser are test_outline's."""

from __future__ import annotations

from typing import Any

from playwright.sync_api import Page, expect

from documents.models import Document, Node
from tests.browser import test_outline
from tests.browser.axe import axe_check
from tests.browser.conftest import screenshot
from tests.browser.test_outline import _node, _open

contract = test_outline.contract  # the 141-node contract
signed_in = test_outline.signed_in  # its owner's browser


def _leaves_partition_the_text(document: Document) -> None:
    document.refresh_from_db()
    cursor = 0
    for start, end in (
        document.nodes.filter(kind="leaf").order_by("order").values_list("start_char", "end_char")
    ):
        assert start == cursor, f"a gap or overlap at character {cursor}"
        cursor = end
    assert cursor == len(document.content)


def _centre(page: Page, title: str, document: Document) -> tuple[float, float]:
    box = page.locator(f"#node-{_node(document, title)} > .node-row .label").bounding_box()
    assert box is not None
    return box["x"] + box["width"] / 2, box["y"] + box["height"] / 2


def _place_of(document: Document, title: str) -> tuple[str, int, str]:
    node = Node.objects.get(document=document, title=title)
    assert node.parent is not None
    return node.parent.title, node.ordinal, node.kind


def test_the_move_menu_offers_only_the_places_the_move_takes(
    signed_in: Page, live_server: Any, contract: Document
) -> None:
    page = signed_in
    last_definition = _node(contract, "1.3 Definitions clause 3")
    _open(page, live_server, contract, last_definition)
    page.get_by_text("Correct this node", exact=True).click()
    menu = page.get_by_label("Move to")
    # 20 sections, 60 clauses and the root could hold it; the text stays in order in four places.
    assert menu.locator("option").all_text_contents() == [
        "Subsection “1.2 Definitions clause 2”, at the end",
        "Top level, after “Definitions”",
        "Section “Supply”, at the start",
        "Subsection “2.1 Supply clause 1”, at the start",
    ]
    assert page.locator("#move-position").count() == 0, "no place to type: each parent has one"
    page.set_viewport_size({"width": 375, "height": 812})
    assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth"), "no sideways scroll"
    page.get_by_label("Move to").scroll_into_view_if_needed()
    screenshot(page, "document-move-menu")

    # The next section, with no place given: the move puts it at the start, where its text is.
    menu.select_option(label="Section “Supply”, at the start")
    page.get_by_role("button", name="Move", exact=True).click()
    expect(page.get_by_text("Moved.")).to_be_visible()
    assert _place_of(contract, "1.3 Definitions clause 3") == ("Supply", 0, "subsection")
    _leaves_partition_the_text(contract)
    expect(page.locator("#selected-heading")).to_have_text("1.3 Definitions clause 3")

    # Every place offered is taken (none refused): try each in turn from a fresh copy of the page.
    page.get_by_text("Correct this node", exact=True).click()
    offered = page.get_by_label("Move to").locator("option").all_text_contents()
    assert offered and "Section “Supply”, at the start" not in offered  # not where it is now
    for done, label in enumerate(offered, start=1):
        if not page.locator("details.edit-panel[open]").count():
            page.get_by_text("Correct this node", exact=True).click()
        page.get_by_label("Move to").select_option(label=label)
        page.get_by_role("button", name="Move", exact=True).click()
        expect(page.locator(".history li")).to_have_count(1 + done)  # one more edit recorded
        expect(page.locator(".messages")).to_have_text("Moved.")
        _leaves_partition_the_text(contract)
        page.get_by_role("button", name="Undo the latest edit").click()
        expect(page.locator(".history li.undone")).to_have_count(done)
    _leaves_partition_the_text(contract)


def test_a_node_dragged_onto_a_highlighted_place_moves_there(
    signed_in: Page, live_server: Any, contract: Document
) -> None:
    page = signed_in
    _open(page, live_server, contract)  # nothing selected: any node can be dragged
    clause = _node(contract, "2.1 Supply clause 1")
    row = page.locator(f"#node-{clause} > .node-row")
    expect(row).to_have_attribute("draggable", "true")
    root = page.locator(f"#node-{_node(contract, 'Supply agreement')} > .node-row")
    assert root.get_attribute("draggable") != "true", "the root is the whole document: it stays"

    row.hover()
    page.mouse.down()
    page.mouse.move(*_centre(page, "2.2 Supply clause 2", contract), steps=5)  # the drag starts
    # Only the places the move takes light up (the move's own rule, from the server).
    highlighted = page.locator(".tree.moving .drop-target")
    expect(highlighted).to_have_count(4)
    ids = [
        f"node-{_node(contract, title)}"
        for title in ("Supply agreement", "Definitions", "1.3 Definitions clause 3", "2.2 Supply clause 2")
    ]
    assert [item.get_attribute("id") for item in highlighted.all()] == ids
    # Over a clause it cannot go into: nothing to drop on. Then over the section before its own.
    page.mouse.move(*_centre(page, "1.1 Definitions clause 1", contract), steps=5)
    expect(page.locator(".tree .drop-over")).to_have_count(0)
    page.mouse.move(*_centre(page, "Definitions", contract), steps=5)
    expect(page.locator(f"#node-{_node(contract, 'Definitions')}")).to_contain_class("drop-over")
    screenshot(page, "document-move-outline")
    page.mouse.up()

    expect(page.get_by_text("Moved.")).to_be_visible()
    assert _place_of(contract, "2.1 Supply clause 1") == ("Definitions", 3, "subsection")
    _leaves_partition_the_text(contract)
    expect(page.locator(".tree.moving")).to_have_count(0)
    expect(page.locator("#selected-heading")).to_have_text("2.1 Supply clause 1")  # the moved node


def test_a_node_moves_from_the_keyboard_in_the_outline(
    signed_in: Page, live_server: Any, contract: Document
) -> None:
    page = signed_in
    clause = _node(contract, "2.1 Supply clause 1")
    _open(page, live_server, contract, clause)
    page.locator(f"#node-{clause}").focus()

    page.keyboard.press("Control+x")
    status = page.locator("#move-status")
    expect(status).to_contain_text("Moving “2.1 supply clause 1”: 4 places it can go")
    expect(page.locator(".tree.moving")).to_have_count(1)
    root = _node(contract, "Supply agreement")
    assert page.evaluate("document.activeElement.id") == f"node-{root}", "on the first place"
    for _ in range(4):  # the last place, and no further
        page.keyboard.press("ArrowDown")
    assert page.evaluate("document.activeElement.id") == f"node-{_node(contract, '2.2 Supply clause 2')}"
    page.keyboard.press("Escape")
    expect(page.locator(".tree.moving")).to_have_count(0)
    assert page.evaluate("document.activeElement.id") == f"node-{clause}", "back on the node, nothing moved"
    assert _place_of(contract, "2.1 Supply clause 1") == ("Supply", 0, "subsection")
    page.keyboard.press("Control+x")
    page.locator("h1").click()  # the focus leaves the outline: the move ends
    expect(page.locator(".tree.moving")).to_have_count(0)

    page.locator(f"#node-{clause}").focus()
    page.keyboard.press("Control+x")
    page.keyboard.press("ArrowDown")
    assert page.evaluate("document.activeElement.id") == f"node-{_node(contract, 'Definitions')}"
    found: list[str] = []
    axe_check(page, "moving a node", found)  # the places marked, one focused: still accessible
    assert not found, "\n".join(found)
    page.keyboard.press("Enter")
    expect(page.get_by_text("Moved.")).to_be_visible()
    assert _place_of(contract, "2.1 Supply clause 1") == ("Definitions", 3, "subsection")
    _leaves_partition_the_text(contract)
    assert page.evaluate("document.activeElement.id") == f"node-{clause}", "focus stays on the moved node"

    # Any node, not only the selected one: its places are asked of the server (the same rule).
    other = _node(contract, "3.1 Prices clause 1")
    page.locator(f"#node-{other}").focus()
    page.keyboard.press("Control+x")
    expect(status).to_contain_text("Moving “3.1 prices clause 1”: 4 places it can go")
    page.keyboard.press("Escape")
    page.locator(f"#node-{_node(contract, 'Supply agreement')}").focus()
    page.keyboard.press("Control+x")
    expect(status).to_have_text("The root cannot move: it is the whole document.")
