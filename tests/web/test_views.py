"""The corpus pages need a signed-in user and show only the collections they own or belong to."""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from django.urls import reverse

from documents import selectors
from documents.ingestion.tree import LEAF, ROOT, SECTION, TreeNode
from documents.services.documents import document_create
from documents.services.jobs import job_run_now
from openfable.errors import NotFoundError
from tests.factories import CollectionFactory, DocumentFactory, UserFactory
from tests.trees import tree_save

pytestmark = pytest.mark.django_db


def _client_for(user: object) -> Client:
    client = Client()
    client.force_login(user)  # type: ignore[arg-type]
    return client


@pytest.mark.parametrize("page", ["home", "detail"])
def test_pages_send_an_anonymous_visitor_to_the_sign_in_page(client: Client, page: str) -> None:
    document = DocumentFactory.create(title="Secret plans")
    url = reverse("documents:home") if page == "home" else reverse("documents:detail", args=[document.pk])
    response = client.get(url)
    assert response.status_code == 302 and response["Location"].startswith(reverse("login"))
    assert "Secret plans" not in client.get(reverse("login")).content.decode()


def test_the_sign_in_page_signs_in(client: Client) -> None:
    user = get_user_model().objects.create_user(username="ada", password="correct horse battery")
    page = client.get(reverse("login"))
    assert page.status_code == 200 and 'name="password"' in page.content.decode()
    response = client.post(reverse("login"), {"username": "ada", "password": "correct horse battery"})
    assert response.status_code == 302 and response["Location"] == reverse("documents:home")
    wrong = client.post(reverse("login"), {"username": user.username, "password": "nope"})
    assert wrong.status_code == 200 and "error-message" in wrong.content.decode()


def test_a_user_sees_only_their_own_and_shared_collections() -> None:
    owner, member, stranger = UserFactory.create(), UserFactory.create(), UserFactory.create()
    mine = CollectionFactory.create(name="Mine", owner=owner)
    mine.members.add(member)
    DocumentFactory.create(collection=mine, title="Our report")
    other = CollectionFactory.create(name="Theirs", owner=stranger)
    theirs = DocumentFactory.create(collection=other, title="Their report")
    CollectionFactory.create(name="Nobody's")  # no owner: staff and the command line only

    for user in (owner, member):
        body = _client_for(user).get(reverse("documents:home")).content.decode()
        assert "Our report" in body and "Mine" in body
        assert "Their report" not in body and "Theirs" not in body and "Nobody" not in body
        assert _client_for(user).get(reverse("documents:detail", args=[theirs.pk])).status_code == 404
    assert [c.name for c in selectors.collection_list(user=member)] == ["Mine"]


def test_someone_elses_document_reads_as_absent_not_forbidden() -> None:
    stranger = UserFactory.create()
    document = DocumentFactory.create(collection=CollectionFactory.create(owner=UserFactory.create()))
    response = _client_for(stranger).get(reverse("documents:detail", args=[document.pk]))
    assert response.status_code == 404
    assert "There is no document" in response.content.decode()
    with pytest.raises(NotFoundError):
        selectors.document_get(user=stranger, pk=document.pk)
    assert selectors.document_get(user=None, pk=document.pk) == document  # a trusted caller


def test_a_superuser_sees_every_collection() -> None:
    admin = get_user_model().objects.create_superuser(username="root", password="pw-long-enough")
    DocumentFactory.create(collection=CollectionFactory.create(owner=UserFactory.create()), title="Anyone's")
    assert "Anyone&#x27;s" in _client_for(admin).get(reverse("documents:home")).content.decode()


def test_json_callers_get_the_one_error_shape() -> None:
    stranger = UserFactory.create()
    response = _client_for(stranger).get(
        reverse("documents:detail", args=[999999]), HTTP_ACCEPT="application/json"
    )
    assert response.status_code == 404
    error = response.json()["error"]
    assert (
        error["code"] == "not_found" and "There is no document" in error["message"] and error["details"] == {}
    )


def test_the_document_page_shows_the_tree_and_the_selected_node_in_the_text() -> None:
    owner = UserFactory.create()
    text = "# Guide\n\nVolcanoes form where magma rises.\n\n## Eruptions\n\nSome erupt gently, some explosively.\n"
    document = document_create(
        collection=CollectionFactory.create(owner=owner), content=text, queue=False
    ).document
    run = job_run_now(document_id=document.pk)
    assert run is not None and run.succeeded
    leaf = document.nodes.filter(kind="leaf").order_by("-order").first()
    assert leaf is not None
    client = _client_for(owner)
    page = client.get(reverse("documents:detail", args=[document.pk]), {"node": leaf.pk})
    body = page.content.decode()
    assert 'role="tree"' in body and f'id="node-{leaf.pk}"' in body and 'aria-selected="true"' in body
    assert f'data-start="{leaf.start_char}">{leaf.content}</mark>' in body.replace("&#x27;", "'")
    fragment = client.get(
        reverse("documents:detail", args=[document.pk]), {"node": leaf.pk}, HTTP_HX_REQUEST="true"
    )
    assert "<html" not in fragment.content.decode() and "selected-text" in fragment.content.decode()
    # The outline and the selected node's heading name passages without their "## " marks.
    labels = re.findall(r'<span class="label">([^<]*)</span>', body)
    assert labels and not any(label.lstrip().startswith("#") for label in labels), labels
    assert not re.search(r'<h2 id="selected-heading">#', body)


def test_tree_edits_from_the_document_page_with_history_and_undo() -> None:
    owner = UserFactory.create()
    text = "# Guide\n\nVolcanoes form where magma rises. They sit on plate edges.\n\n## Eruptions\n\nSome erupt gently, some explosively.\n"
    document = document_create(
        collection=CollectionFactory.create(owner=owner), content=text, queue=False
    ).document
    run = job_run_now(document_id=document.pk)
    assert run is not None and run.succeeded
    client = _client_for(owner)
    leaf = document.nodes.filter(kind="leaf", content__contains="magma").get()
    version = type(document).objects.get(pk=document.pk).tree_version
    split = client.post(
        reverse("documents:edit", args=[document.pk, "split"]),
        {"node": leaf.pk, "position": leaf.start_char + leaf.content.index("They"), "tree_version": version},
        HTTP_HX_REQUEST="true",
    )
    body = split.content.decode()
    assert split.status_code == 200 and "Split in two." in body and "Undo the latest edit" in body
    assert document.nodes.filter(kind="leaf", content__startswith="They sit").exists()
    stale = client.post(
        reverse("documents:edit", args=[document.pk, "merge"]),
        {"node": leaf.pk, "tree_version": version},
        follow=True,
    )
    assert "changed the tree" in stale.content.decode() or "reload" in stale.content.decode().lower()
    refused = client.post(
        reverse("documents:edit", args=[document.pk, "update"]),
        {"node": leaf.pk, "title": "x" * 600, "summary": ""},
        follow=True,
    )
    assert "titles hold at most 500" in refused.content.decode()
    undone = client.post(
        reverse("documents:edit", args=[document.pk, "undo"]), {"node": leaf.pk}, follow=True
    )
    assert "Undone." in undone.content.decode()
    assert not document.nodes.filter(kind="leaf", content__startswith="They sit").exists()
    stranger = _client_for(UserFactory.create())
    assert stranger.post(reverse("documents:edit", args=[document.pk, "undo"]), {}).status_code == 404

    # A node of another document of the same owner, posted to this document's page: refused with
    # the selector's message (the rule lives in selectors.node_get, not in the view), nothing written.
    other = document_create(collection=document.collection, content="Another text.", queue=False).document
    assert job_run_now(document_id=other.pk) is not None
    foreign = other.nodes.get(kind="leaf")
    wrong = client.post(
        reverse("documents:edit", args=[document.pk, "update"]),
        {"node": foreign.pk, "title": "Moved in", "summary": ""},
        follow=True,
    )
    assert f"There is no node {foreign.pk!r} in document {document.pk}" in wrong.content.decode()
    assert other.nodes.get(pk=foreign.pk).title != "Moved in"


def test_the_document_page_costs_a_bounded_number_of_queries(django_assert_max_num_queries: Any) -> None:
    """A 500-node tree renders in a handful of queries (one for all the nodes, not one per node)."""
    owner = UserFactory.create()
    paragraphs = [f"Paragraph {index} says something of its own." for index in range(480)]
    text = "\n\n".join(paragraphs)
    document = DocumentFactory.create(collection=CollectionFactory.create(owner=owner), content=text)
    leaves, start = [], 0
    for index, paragraph in enumerate(paragraphs):
        end = start + len(paragraph) + (2 if index < len(paragraphs) - 1 else 0)
        leaves.append(TreeNode(kind=LEAF, start_char=start, end_char=end))
        start = end
    sections = [
        TreeNode(
            SECTION,
            leaves[i].start_char,
            leaves[min(i + 24, len(leaves)) - 1].end_char,
            f"Part {i // 24}",
            "Some paragraphs.",
            leaves[i : i + 24],
        )
        for i in range(0, len(leaves), 24)
    ]
    tree_save(document, TreeNode(ROOT, 0, len(text), "Root", "All of it.", sections))
    assert document.nodes.count() == 501
    client = _client_for(owner)
    last_leaf = document.nodes.filter(kind="leaf").last()
    assert last_leaf is not None
    with django_assert_max_num_queries(14):
        response = client.get(reverse("documents:detail", args=[document.pk]), {"node": last_leaf.pk})
    assert response.status_code == 200


def test_the_document_page_lists_what_needs_a_look_and_offers_the_llm_only_when_configured() -> None:
    owner = UserFactory.create()
    text = "First part text.\n\nSecond part text.\n\nThird part text.\n"
    document = DocumentFactory.create(collection=CollectionFactory.create(owner=owner), content=text)
    a, b, c = (0, 18), (18, 37), (37, len(text))
    leaves = [TreeNode(kind=LEAF, start_char=start, end_char=end) for start, end in (a, b, c)]
    sections = [
        TreeNode(SECTION, a[0], a[1], "Terms", "The terms.", [leaves[0]]),
        TreeNode(SECTION, b[0], b[1], "Terms", "More terms.", [leaves[1]]),
        TreeNode(SECTION, c[0], c[1], "Payment", "How to pay.", [leaves[2]]),
    ]
    tree_save(document, TreeNode(ROOT, 0, len(text), "Contract", "A contract.", sections))
    client = _client_for(owner)
    section = document.nodes.filter(kind="section").first()
    assert section is not None
    body = client.get(reverse("documents:detail", args=[document.pk]), {"node": section.pk}).content.decode()
    assert "Needs a look" in body and "to look at" in body and "same title" in body.lower()
    assert "No LLM is configured" in body and "disabled" in body
    refused = client.post(
        reverse("documents:edit", args=[document.pk, "regenerate"]), {"node": section.pk}, follow=True
    ).content.decode()
    assert "No LLM is configured (OPENFABLE_LLM_MODEL); write the summary by hand." in refused


def test_a_long_review_list_shows_the_worst_five_and_folds_the_rest() -> None:
    owner = UserFactory.create()
    # Eight sections all titled "Terms": every one is flagged as a repeated sibling title.
    parts = [f"Part {index} of the terms.\n\n" for index in range(8)]
    text = "".join(parts)
    sections, start = [], 0
    for part in parts:
        end = start + len(part)
        sections.append(TreeNode(SECTION, start, end, "Terms", "The terms.", [TreeNode(LEAF, start, end)]))
        start = end
    document = DocumentFactory.create(collection=CollectionFactory.create(owner=owner), content=text)
    tree_save(document, TreeNode(ROOT, 0, len(text), "Contract", "A contract.", sections))
    flagged = len(selectors.document_review(document=document))
    assert flagged > 5

    body = _client_for(owner).get(reverse("documents:detail", args=[document.pk])).content.decode()
    shown, folded = body.split('<details class="review-more">', 1)
    assert shown.count("review-list") == 1 and shown.split("review-list", 1)[1].count("<li>") == 5
    assert f"{flagged - 5} more to look at" in folded
    assert folded.split("</details>", 1)[0].count("<li>") == flagged - 5
