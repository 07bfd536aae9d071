"""Two people edit the same tree at the same moment (real threads, real PostgreSQL, each with its
own connection and transaction): one edit wins cleanly, the other gets the conflict message that
tells its author to reload, and the tree stays whole (its leaves still partition the text)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pytest
from django.db import connection

from documents.models import Document, Node, TreeEdit
from documents.services.nodes import node_split, node_update
from openfable.errors import ConflictError
from tests.factories import DocumentFactory
from tests.trees import sec, sec_text, sec_tree, tree_save

pytestmark = [pytest.mark.faults, pytest.mark.django_db(transaction=True)]

GUIDE = sec(
    "Guide",
    "A guide.",
    sec(
        "Formation",
        "How volcanoes form.",
        "Volcanoes form where magma reaches the surface. Most sit on plate boundaries.",
        "Hotspots make volcanoes far from any boundary. Hawaii is one of them.",
    ),
    sec(
        "Eruptions",
        "How they erupt.",
        "Shield volcanoes erupt gently. Their lava runs far.",
        "Stratovolcanoes erupt explosively. They build steep cones.",
    ),
)


def _at_once(*edits: Callable[[], Any]) -> list[Any]:
    """Run the edits in threads released together; each result is a return value or an exception."""
    barrier = threading.Barrier(len(edits))
    results: list[Any] = [None] * len(edits)

    def run(index: int, edit: Callable[[], Any]) -> None:
        try:
            barrier.wait()
            results[index] = edit()
        except Exception as error:
            results[index] = error
        finally:
            connection.close()  # each thread's own connection

    threads = [threading.Thread(target=run, args=(index, edit)) for index, edit in enumerate(edits)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    return results


def _leaves_partition(document: Document) -> bool:
    leaves = Node.objects.filter(document=document, kind="leaf").order_by("start_char")
    return "".join(document.content[leaf.start_char : leaf.end_char] for leaf in leaves) == document.content


@pytest.mark.parametrize("rounds", [3])
def test_two_edits_at_once_one_wins_the_other_is_told_to_reload(rounds: int) -> None:
    document = DocumentFactory.create(title="Guide", content=sec_text(GUIDE))
    tree_save(document, sec_tree(GUIDE))
    for done in range(rounds):
        document.refresh_from_db()
        version = document.tree_version
        sections = list(Node.objects.filter(document=document, kind="section").order_by("start_char"))
        leaves = list(Node.objects.filter(document=document, kind="leaf").order_by("start_char"))
        # Three people, three different edits, all valid on the version they loaded.
        # A sentence end inside the leaf, not the one that closes it: an earlier round's winning
        # split leaves "…surface. " behind, whose only ". " is its last two characters.
        splittable = next(leaf for leaf in leaves if ". " in leaf.content.rstrip())
        cut = document.content.index(". ", splittable.start_char) + 2
        outcomes = _at_once(
            lambda: node_split(node=splittable, position=cut, expected_version=version),  # noqa: B023
            lambda: node_update(node=sections[0], title=f"Formation {done}", expected_version=version),  # noqa: B023
            lambda: node_update(node=leaves[-1], summary=f"Edited {done}", expected_version=version),  # noqa: B023
        )
        conflicts = [outcome for outcome in outcomes if isinstance(outcome, ConflictError)]
        others = [
            outcome for outcome in outcomes if isinstance(outcome, Exception) and outcome not in conflicts
        ]
        assert not others, others
        assert len(conflicts) == 2, outcomes  # exactly one of the three went through
        assert all("Someone else changed this document's tree" in str(error) for error in conflicts)
        document.refresh_from_db()
        assert document.tree_version == version + 1
        assert TreeEdit.objects.filter(document=document).count() == done + 1  # one recorded edit per round
        assert _leaves_partition(document)
