"""The document page's history names the node each edit touched and shows what changed (issue
22 item 9): "Changed “Prices”: title Prices → Prices and payment", not "Update by admin"."""

from __future__ import annotations

import re

import pytest
from django.test import Client
from django.urls import reverse

from documents.services.nodes import node_dissolve, node_exclude, node_move, node_update, nodes_group
from tests.factories import CollectionFactory, DocumentFactory, UserFactory
from tests.trees import sec, sec_text, sec_tree, tree_save
from web.history_words import edit_words

pytestmark = pytest.mark.django_db


def _history(body: str) -> list[str]:
    """The history list's entries as a person reads them (tags dropped, spaces joined)."""
    section = body[body.index('id="history-heading"') :]
    items = re.findall(r"<li[^>]*>(.*?)</li>", section[: section.index("</ol>")], re.DOTALL)
    return [" ".join(re.sub(r"<[^>]+>", " ", item).split()) for item in items]


def test_each_history_entry_names_its_node_and_shows_before_and_after() -> None:
    owner = UserFactory.create(username="ada")
    spec = sec(
        "Supply agreement",
        "Two companies agree.",
        sec("Prices", "What things cost.", "Prices are fixed for a year.", "Then they follow the index."),
        sec("Payment", "When to pay.", "Invoices are paid in 30 days.", "Late payment bears interest."),
        sec("Notices", "How to write.", "Notices are in writing."),
    )
    document = DocumentFactory.create(
        collection=CollectionFactory.create(owner=owner), title="Supply", content=sec_text(spec)
    )
    tree_save(document, sec_tree(spec))
    nodes = {node.title or node.content[:12]: node for node in document.nodes.all()}
    node_update(
        node=nodes["Prices"], title="Prices and payment", summary="What things cost, when paid.", user=owner
    )
    node_exclude(node=document.nodes.get(content__startswith="Late payment"), user=owner)
    node_move(node=nodes["Payment"], parent=document.nodes.get(title="Prices and payment"), user=owner)
    node_dissolve(node=nodes["Notices"], user=owner)
    first = document.nodes.get(content__startswith="Prices are")
    nodes_group(
        first=first, last=document.nodes.get(content__startswith="Then they"), title="Rates", user=owner
    )

    client = Client()
    client.force_login(owner)
    entries = _history(client.get(reverse("documents:detail", args=[document.pk])).content.decode())
    assert entries[0].startswith("Grouped passages into a new section “Rates” by ada"), entries
    assert entries[1].startswith("Dissolved Notices (its parts moved up a level) by ada"), entries
    assert entries[2].startswith("Moved Payment under “Prices and payment” by ada"), entries
    assert entries[3].startswith("Excluded Late payment bears interest. from retrieval by ada"), entries
    assert entries[4].startswith(
        "Changed Prices and payment title: Prices → Prices and payment "
        "summary: What things cost. → What things cost, when paid. by ada"
    ), entries
    body = client.get(reverse("documents:detail", args=[document.pk])).content.decode()
    assert "<q>Prices and payment</q>" in body and "<del>Prices</del> → <ins>Prices and payment</ins>" in body


def test_edit_words_name_a_node_without_a_title_by_its_text_and_a_removed_one_so() -> None:
    words = edit_words(
        operation="exclude",
        arguments={"node": 7},
        node_before={"id": 7, "excluded": False},
        node_after={"id": 7, "excluded": True},
        node_title="",
        node_text="A long passage " * 10,
        parent_title=None,
    )
    assert words.node == ("A long passage " * 4).strip() + "…" and words.changes == ()
    gone = edit_words(
        operation="merge", arguments={"node": 7}, node_before=None, node_after=None,
        node_title=None, node_text=None, parent_title=None,
    )  # fmt: skip
    assert gone.node == "a node since removed"


def test_a_node_named_by_its_text_is_named_without_heading_marks() -> None:
    words = edit_words(
        operation="exclude",
        arguments={"node": 7},
        node_before={"id": 7, "excluded": False},
        node_after={"id": 7, "excluded": True},
        node_title="",
        node_text="## 4. Term\n\nThis Agreement runs for two years.",
        parent_title=None,
    )
    assert words.node == "4. Term This Agreement runs for two years."
