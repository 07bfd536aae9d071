"""The tree review: each signal on plain data (fires / stays quiet), then one small tree in the database,
where fixing a summary and re-embedding it clears its flag."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest
from django.conf import settings

from documents.models import Document, Node
from documents.review import (
    DUPLICATE_TITLE,
    EMPTY_SUMMARY,
    EMPTY_TITLE,
    LEAF_TOO_LARGE,
    LEAF_TOO_SMALL,
    SIMILAR_NEXT,
    SIMILAR_NEXT_MIN,
    SUMMARY_DISTANCE_MIN,
    SUMMARY_FAR,
    ReviewItem,
    ReviewNode,
    score_review,
    title_key,
)
from documents.selectors import document_review, document_review_rows
from documents.services.nodes import node_update
from documents.services.reembed import nodes_embed_stale
from tests.factories import DocumentFactory
from tests.fakes.llm.server import hash_vector
from tests.trees import TEST_EMBEDDING_MODEL, sec, sec_text, sec_tree, tree_save

DIMENSIONS = 8


def axis(index: int, *, dimensions: int = DIMENSIONS) -> np.ndarray:
    vector = np.zeros(dimensions, dtype=np.float32)
    vector[index] = 1.0
    return vector


def toward(first: np.ndarray, second: np.ndarray, cosine: float) -> np.ndarray:
    """A unit vector with exactly this cosine to ``first`` (``second`` orthogonal to it)."""
    return cosine * first + np.sqrt(1.0 - cosine**2) * second


class Tree:
    """Plain review rows, built by hand: ids in pre-order, leaves 100 tokens with distinct vectors."""

    def __init__(self) -> None:
        self.nodes: list[ReviewNode] = []

    def add(self, kind: str, parent: int | None = None, **fields: Any) -> int:
        node_id = len(self.nodes) + 1
        defaults: dict[str, Any] = {"title": "", "summary": ""}
        if kind != "leaf":
            defaults = {"title": f"Section {node_id}", "summary": f"What section {node_id} says."}
        else:
            defaults["token_count"] = 100
            defaults["embedding"] = axis(node_id % DIMENSIONS)
            defaults["excerpt"] = f"Passage {node_id} opens with these words and goes on for a while"
        defaults.update(fields)
        self.nodes.append(ReviewNode(id=node_id, parent_id=parent, kind=kind, order=node_id - 1, **defaults))
        return node_id

    def review(self) -> list[ReviewItem]:
        return score_review(self.nodes)

    def signals(self, name: str) -> dict[int, Any]:
        return {item.node_id: s for item in self.review() for s in item.signals if s.name == name}


def _section_over(children: Sequence[np.ndarray], own: np.ndarray, **fields: Any) -> Tree:
    tree = Tree()
    root = tree.add("root", embedding=own, title="Root", summary="All of it.")
    section = tree.add("section", root, embedding=own, **fields)
    for vector in children:
        tree.add("leaf", section, embedding=vector)
    # The root embeds the same vector as the section, so only the section is in question.
    return tree


# -- summary far from its content ----------------------------------------------------------------


def test_a_summary_far_from_its_children_is_flagged_with_its_distance() -> None:
    children = [toward(axis(0), axis(1), 0.9), toward(axis(0), axis(2), 0.9)]
    far = toward(axis(0), axis(3), 0.5)  # cosine to the children's mean 0.5 x 0.946
    tree = _section_over(children, far)

    signal = tree.signals(SUMMARY_FAR)[2]
    assert signal.value == pytest.approx(0.527, abs=0.001)
    assert signal.reason == f"summary far from its content ({signal.value:.2f})"
    [item] = [item for item in tree.review() if item.node_id == 2]
    assert (item.kind, item.label) == ("section", "Section 2")


def test_a_summary_close_to_its_children_is_not_flagged() -> None:
    children = [toward(axis(0), axis(1), 0.95), toward(axis(0), axis(2), 0.95)]
    close = toward(axis(0), axis(3), 0.98)
    assert _section_over(children, close).signals(SUMMARY_FAR) == {}


def test_the_distance_threshold_is_the_constant() -> None:
    children = [axis(0), axis(0)]
    just_inside = toward(axis(0), axis(3), 1.0 - SUMMARY_DISTANCE_MIN + 0.005)
    just_outside = toward(axis(0), axis(3), 1.0 - SUMMARY_DISTANCE_MIN - 0.005)
    assert _section_over(children, just_inside).signals(SUMMARY_FAR) == {}
    assert set(_section_over(children, just_outside).signals(SUMMARY_FAR)) == {2}


def test_stale_vectors_and_empty_summaries_are_not_judged_by_distance() -> None:
    children = [axis(0), axis(0)]
    far = axis(3)
    stale = _section_over(children, far, embedding_stale=True)
    assert stale.signals(SUMMARY_FAR) == {}

    stale_child = _section_over(children, far)
    stale_child.nodes[-1] = dataclasses.replace(stale_child.nodes[-1], embedding_stale=True)
    assert stale_child.signals(SUMMARY_FAR) == {}

    empty = _section_over(children, far, summary="  ")
    assert empty.signals(SUMMARY_FAR) == {}
    assert empty.signals(EMPTY_SUMMARY)[2].reason == "section without a summary"


# -- sibling titles that repeat ------------------------------------------------------------------


def test_title_key_ignores_case_punctuation_numbering_and_plurals() -> None:
    assert title_key("2. Payment Terms") == title_key("payment term:") == "payment term"
    assert title_key("(b) Notices") == title_key("IV. NOTICES") == title_key("1.3 Notice") == "notice"
    assert title_key("Schedule A") != title_key("Schedule B")
    assert title_key("2023 Results") != title_key("2024 Results")
    assert title_key("Section 1") != title_key("Section 2")
    assert title_key(" ?! ") == ""


def test_siblings_with_the_same_title_are_flagged_with_how_many() -> None:
    tree = Tree()
    root = tree.add("root", title="Contract")
    first = tree.add("section", root, title="2. Payment Terms")
    tree.add("leaf", first)
    second = tree.add("section", root, title="payment term:")
    tree.add("leaf", second)
    third = tree.add("section", root, title="PAYMENT TERMS")
    tree.add("leaf", third)
    other = tree.add("section", root, title="Schedule A")
    tree.add("leaf", other)
    different = tree.add("section", root, title="Schedule B")
    tree.add("leaf", different)

    found = tree.signals(DUPLICATE_TITLE)
    assert set(found) == {first, second, third}
    assert found[first].reason == "same title as 2 siblings"
    assert found[first].value == 2


def test_the_same_title_under_different_parents_is_not_a_duplicate() -> None:
    tree = Tree()
    root = tree.add("root", title="Contract")
    for name in ("Buyer", "Seller"):
        section = tree.add("section", root, title=name)
        sub = tree.add("subsection", section, title="Obligations")
        tree.add("leaf", sub)
    assert tree.signals(DUPLICATE_TITLE) == {}


def test_excluded_siblings_do_not_count_as_duplicates() -> None:
    tree = Tree()
    root = tree.add("root", title="Contract")
    kept = tree.add("section", root, title="Notices")
    tree.add("leaf", kept)
    gone = tree.add("section", root, title="Notices", excluded=True)
    tree.add("leaf", gone, excluded=True)
    assert tree.signals(DUPLICATE_TITLE) == {}


# -- leaves much larger or smaller than their neighbours -----------------------------------------


def _leaves(*token_counts: int) -> tuple[Tree, list[int]]:
    tree = Tree()
    root = tree.add("root", title="Doc")
    section = tree.add("section", root)
    return tree, [tree.add("leaf", section, token_count=count) for count in token_counts]


def test_a_leaf_much_larger_than_its_siblings_is_flagged() -> None:
    tree, ids = _leaves(100, 110, 90, 900)
    [(node_id, signal)] = tree.signals(LEAF_TOO_LARGE).items()
    assert node_id == ids[3]
    assert signal.value == pytest.approx(9.0)
    assert signal.reason == "leaf 9x larger than its neighbours (900 vs 100 tokens)"
    assert tree.signals(LEAF_TOO_SMALL) == {}


def test_a_leaf_much_smaller_than_its_siblings_is_flagged() -> None:
    tree, ids = _leaves(200, 220, 180, 20)
    [(node_id, signal)] = tree.signals(LEAF_TOO_SMALL).items()
    assert node_id == ids[3]
    assert signal.reason == "leaf 10x smaller than its neighbours (20 vs 200 tokens)"
    assert tree.signals(LEAF_TOO_LARGE) == {}


def test_even_leaves_and_tiny_documents_are_not_flagged() -> None:
    assert _leaves(100, 150, 80, 300)[0].signals(LEAF_TOO_LARGE) == {}  # 3x: uneven, not an outlier
    tiny, _ = _leaves(10, 12, 9, 90)  # 9x, but 90 tokens is no large passage
    assert tiny.signals(LEAF_TOO_LARGE) == {}
    small, _ = _leaves(30, 32, 28, 3)  # 10x smaller, among passages too short to matter
    assert small.signals(LEAF_TOO_SMALL) == {}


def test_a_leaf_without_enough_siblings_is_compared_with_its_neighbours_in_order() -> None:
    tree = Tree()
    root = tree.add("root", title="Doc")
    ids = []
    for count in (120, 130, 1200, 110, 125):  # one leaf per section
        section = tree.add("section", root)
        ids.append(tree.add("leaf", section, token_count=count))
    assert set(tree.signals(LEAF_TOO_LARGE)) == {ids[2]}


# -- consecutive leaves that say the same -------------------------------------------------------


def _pair(cosine: float, **second: Any) -> tuple[Tree, int]:
    tree = Tree()
    root = tree.add("root", title="Doc")
    section = tree.add("section", root)
    first = tree.add("leaf", section, embedding=axis(0))
    tree.add("leaf", section, **{"embedding": toward(axis(0), axis(1), cosine), **second})
    tree.add("leaf", section, embedding=axis(5))
    return tree, first


def test_a_boundary_between_very_similar_leaves_is_flagged_on_the_first() -> None:
    tree, first = _pair(0.99)
    signal = tree.signals(SIMILAR_NEXT)[first]
    assert signal.value == pytest.approx(0.99, abs=1e-6)
    assert signal.reason == "very like the next passage (0.99)"
    assert set(tree.signals(SIMILAR_NEXT)) == {first}


def test_a_boundary_between_different_leaves_is_not_flagged() -> None:
    assert _pair(SIMILAR_NEXT_MIN - 0.02)[0].signals(SIMILAR_NEXT) == {}
    assert _pair(0.99, embedding_stale=True)[0].signals(SIMILAR_NEXT) == {}
    assert _pair(0.99, excluded=True)[0].signals(SIMILAR_NEXT) == {}
    assert _pair(0.99, embedding=None)[0].signals(SIMILAR_NEXT) == {}


# -- empty titles and summaries -----------------------------------------------------------------


def test_internal_nodes_without_a_title_or_summary_are_flagged_and_leaves_never() -> None:
    tree = Tree()
    root = tree.add("root", title="Doc")
    untitled = tree.add("section", root, title=" ", summary="")
    tree.add("leaf", untitled)
    [item] = tree.review()
    assert item.node_id == untitled
    assert item.label == "untitled section"
    assert [s.name for s in item.signals] == [EMPTY_TITLE, EMPTY_SUMMARY]
    assert item.reasons == ["section without a title", "section without a summary"]


# -- the list ------------------------------------------------------------------------------------


def test_items_come_worst_first_and_excluded_nodes_never() -> None:
    tree = Tree()
    root = tree.add("root", title="Doc")
    section = tree.add("section", root, summary="")  # empty summary: 0.9
    for count in (200, 210, 190):
        tree.add("leaf", section, token_count=count)
    small = tree.add("leaf", section, token_count=40)  # 5x smaller: ~0.46
    hidden = tree.add("section", root, summary="", excluded=True)
    tree.add("leaf", hidden, excluded=True, token_count=200)

    items = tree.review()
    assert [item.node_id for item in items] == [section, small]
    assert items[0].severity > items[1].severity
    assert items[1].label == f"\u201cPassage {small} opens with these words and goes\u2026\u201d"
    assert items[1].as_dict()["reasons"] == ["leaf 5x smaller than its neighbours (40 vs 200 tokens)"]


def test_several_signals_on_one_node_rank_it_above_one() -> None:
    tree = Tree()
    root = tree.add("root", title="Doc")
    both = tree.add("section", root, title="Notes", summary="")
    tree.add("leaf", both)
    one = tree.add("section", root, title="Notes.")
    tree.add("leaf", one)
    ranked = tree.review()
    assert [item.node_id for item in ranked] == [both, one]
    assert ranked[0].severity > 0.9  # the empty summary plus a quarter of the duplicate


# -- in the database -----------------------------------------------------------------------------

# A fake embedder with meaning: a shared direction (as e5's vectors share one), a topic direction
# from the words, and a little noise from the exact text, so different passages on one topic are
# alike but not the same (cosine ~0.93) and the same text gives the same vector.
_TOPICS = {"volcano": 1, "magma": 1, "lava": 1, "erupt": 1, "garden": 2, "tomato": 2, "soil": 2, "seed": 2}
_NOISE = 0.4


def topic_vector(text: str) -> np.ndarray:
    dimensions: int = settings.EMBEDDING_DIMENSIONS
    topics = np.zeros(dimensions)
    for word in re.findall(r"[a-z]+", text.lower()):
        for stem, index in _TOPICS.items():
            if word.startswith(stem):
                topics[index] += 1.0
    noise = np.asarray(hash_vector(text, dimensions))
    noise[: len(_TOPICS)] = 0.0
    vector = axis(0, dimensions=dimensions) + _unit(topics) + _NOISE * _unit(noise)
    return _unit(vector).astype(np.float32)


def _unit(vector: np.ndarray) -> np.ndarray:
    norm = float(np.linalg.norm(vector))
    return vector / norm if norm else vector


class TopicEmbedder:
    model_name = TEST_EMBEDDING_MODEL
    dimensions: int = settings.EMBEDDING_DIMENSIONS

    def embed_passages(self, texts: Sequence[str]) -> np.ndarray:
        return np.stack([topic_vector(text) for text in texts])

    def embed_query(self, text: str) -> np.ndarray:
        return topic_vector(text)


def topic_embed(texts: list[str]) -> np.ndarray:
    return TopicEmbedder().embed_passages(texts)


BAD_SUMMARY = "Tomatoes need rich garden soil and seeds."
GOOD_SUMMARY = "Magma rises and lava erupts from volcanoes."
NOTES = sec(
    "Field notes",
    "Notes on volcanoes and gardens.",
    sec(
        "Volcanoes",
        BAD_SUMMARY,  # the summary of another section
        "Magma rises through the crust of the volcano.",
        "Lava flows when the volcano erupts.",
    ),
    sec(
        "Gardens",
        "Tomatoes grow from seeds in garden soil.",
        "Sow tomato seeds in warm soil.",
        "Water the garden soil every morning.",
        "Water the garden soil every morning.",  # the same passage twice: cut in the wrong place
    ),
    sec("Gardens.", "", "Harvest the tomatoes from the garden in late summer."),
)


@pytest.fixture
def notes(db: None) -> Document:
    document = DocumentFactory.create(title="Field notes", content=sec_text(NOTES))
    tree_save(document, sec_tree(NOTES), embed=topic_embed)
    return document


def _flags_of(items: Sequence[ReviewItem]) -> dict[str, set[str]]:
    """Signal name -> labels of the nodes it fired on."""
    found: dict[str, set[str]] = {}
    for item in items:
        for signal in item.signals:
            found.setdefault(signal.name, set()).add(item.label)
    return found


def _flags(document: Document) -> dict[str, set[str]]:
    return _flags_of(document_review(document=document))


def test_a_small_tree_in_the_database_is_reviewed_in_one_query(
    notes: Document, django_assert_num_queries: Any
) -> None:
    with django_assert_num_queries(1):
        items = document_review(document=notes)

    assert _flags_of(items) == {
        SUMMARY_FAR: {"Volcanoes", "Field notes"},  # the root's summary pays for its child's too
        DUPLICATE_TITLE: {"Gardens", "Gardens."},
        EMPTY_SUMMARY: {"Gardens."},
        SIMILAR_NEXT: {"\u201cWater the garden soil every morning.\u201d"},
    }
    assert items[0].label == "Gardens."  # an empty summary and a duplicate title: the worst
    assert len(items) == 5
    rows = document_review_rows(document=notes)
    assert len(rows) == Node.objects.filter(document=notes).count()
    assert rows[-1]["excerpt"].startswith("Harvest the tomatoes")


def test_fixing_a_summary_and_re_embedding_it_clears_its_flag(notes: Document) -> None:
    volcanoes = Node.objects.get(document=notes, title="Volcanoes")
    assert "Volcanoes" in _flags(notes)[SUMMARY_FAR]

    result = node_update(node=volcanoes, summary=GOOD_SUMMARY)
    assert result.node.embedding_stale
    # Until the worker re-embeds it, the old vector is not held against the new summary.
    assert "Volcanoes" not in _flags(notes).get(SUMMARY_FAR, set())

    # What the background task does (documents.tasks.embed_nodes), with the same fake embedder.
    assert nodes_embed_stale(node_ids=result.reembedding, embedder=TopicEmbedder()) == 1
    assert not Node.objects.get(pk=volcanoes.pk).embedding_stale
    assert SUMMARY_FAR not in _flags(notes)  # the root's flag went with its child's
    assert len(document_review(document=notes)) == 3


def test_a_summary_still_wrong_after_re_embedding_keeps_its_flag(notes: Document) -> None:
    volcanoes = Node.objects.get(document=notes, title="Volcanoes")
    result = node_update(node=volcanoes, summary="Seeds and soil for a tomato garden.")
    nodes_embed_stale(node_ids=result.reembedding, embedder=TopicEmbedder())
    assert "Volcanoes" in _flags(notes)[SUMMARY_FAR]


def test_retitling_a_duplicate_clears_both_flags(notes: Document) -> None:
    node_update(node=Node.objects.get(document=notes, title="Gardens."), title="Harvest")
    assert DUPLICATE_TITLE not in _flags(notes)
