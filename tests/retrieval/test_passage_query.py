"""The passage query: inside the documents a query was routed to, their titles no longer rank
the passages (``retrieval.services.take_out_titles``, ``retrieval.query_vectors``,
``OPENFABLE_RETRIEVAL_PASSAGE_QUERY``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pytest
from django.test import override_settings

from openfable.embeddings import Embedder, embed_queries, get_embedder
from retrieval import query_vectors
from retrieval.fusion import fuse
from retrieval.result import LEXICAL, TREE_EXPANSION
from retrieval.services import retrieve, route_to_named_documents, take_out_titles
from tests.factories import DocumentFactory
from tests.retrieval.test_services import Corpus, _fresh_query_cache, build_document, corpus
from tests.trees import sec

__all__ = ["_fresh_query_cache", "corpus"]  # fixtures shared with test_services


@pytest.mark.parametrize(
    ("query", "titles", "expected"),
    [
        (
            "Is consent required to assign the contract? (Reseller Agreement between McDATA and RESELLER)",
            ["Reseller Agreement between McDATA and RESELLER"],
            "Is consent required to assign the contract?",
        ),
        (
            "How much did acme government solutions pay in dividends in 2021?",
            ["Acme Government Solutions"],
            "How much did pay in dividends in 2021?",
        ),
        # A one-word title: only as written, never the query's first word.
        ("What did JetWing buy in March 2019?", ["JetWing"], "What did buy in March 2019?"),
        ("How do volcanoes erupt and why?", ["Volcanoes"], "How do volcanoes erupt and why?"),
        ("Volcanoes erupt how and why?", ["Volcanoes"], "Volcanoes erupt how and why?"),
        # Longest title first, so a title inside another leaves nothing behind.
        (
            "Compare Acme Bank Holdings with Acme Bank on debt",
            ["Acme Bank", "Acme Bank Holdings"],
            "Compare with on debt",
        ),
        # Too little left: the query stays whole.
        (
            "Acme Government Solutions revenue",
            ["Acme Government Solutions"],
            "Acme Government Solutions revenue",
        ),
        ("Why is the sky blue today?", ["Income Tax Law"], "Why is the sky blue today?"),
    ],
)
def test_passage_query_takes_the_titles_out(query: str, titles: list[str], expected: str) -> None:
    assert take_out_titles(query, titles)[0] == expected


def test_only_the_titles_taken_out_count_as_named() -> None:
    # Substring search finds "202" in "2021"; as a word it is not there, so it is not named.
    query = "How much did Acme Government Solutions pay in dividends in 2021?"
    rest, named = take_out_titles(query, ["202", "Acme Government Solutions"])
    assert (rest, named) == ("How much did pay in dividends in 2021?", ["Acme Government Solutions"])
    assert take_out_titles("Acme Government Solutions revenue", ["Acme Government Solutions"]) == (
        "Acme Government Solutions revenue",
        [],
    )


@pytest.mark.django_db
def test_passages_are_ranked_without_the_title_the_query_names(corpus: Corpus) -> None:
    query = "When must the annual return be filed under the Income Tax Law?"
    budget = 100  # the least a query may ask for; the document is longer, so the node level runs
    assert corpus.tax.document.token_count > budget

    def run() -> tuple[Mapping[str, Any], int]:
        result = retrieve(query=query, token_budget=budget, mode="vector", use_cache=False)
        assert result.routing == "nodes" and result.documents[0].document_id == corpus.tax.id
        lexical, expansion = result.path(LEXICAL), result.path(TREE_EXPANSION)
        assert lexical is not None and expansion is not None
        return expansion.detail, lexical.detail["nodes_matched"]

    detail, matched = run()
    with override_settings(RETRIEVAL_PASSAGE_QUERY=False):
        whole_detail, whole_matched = run()
    # The passages were ranked by the query without its title, whose words ("income", "tax", "law")
    # no longer match the passages that merely mention them.
    assert detail["passage_query"] == "When must the annual return be filed under the ?"
    assert "passage_query" not in whole_detail
    assert 0 < matched < whole_matched


@pytest.mark.django_db
def test_a_query_naming_no_document_is_embedded_once(corpus: Corpus) -> None:
    result = retrieve(query="When must the annual return be filed?", token_budget=100, mode="vector")
    expansion = result.path(TREE_EXPANSION)
    assert expansion is not None and expansion.ran and "passage_query" not in expansion.detail


@pytest.mark.django_db
def test_names_the_query_gives_are_damped_at_the_node_level(corpus: Corpus) -> None:
    # "Income Tax Law" is capitalised and only the tax document holds "incom" and "tax": a name
    # that routed the query, damped in node-level BM25 unless OPENFABLE_RETRIEVAL_NAME_DOCUMENT_SHARE is 0.
    query = "When must the annual return be filed under the Income Tax Law?"

    def lexical_detail() -> Mapping[str, Any]:
        result = retrieve(query=query, token_budget=100, mode="vector", use_cache=False)
        assert result.routing == "nodes" and result.documents[0].document_id == corpus.tax.id
        lexical = result.path(LEXICAL)
        assert lexical is not None
        return lexical.detail

    detail = lexical_detail()
    weights = detail["name_weights"]
    assert {"incom", "tax"} <= set(weights) and all(0 <= weight < 1 for weight in weights.values())
    assert not {"annual", "return", "file"} & set(weights)  # lower-case words weigh fully
    with override_settings(RETRIEVAL_NAME_DOCUMENT_SHARE=0.0):
        assert "name_weights" not in lexical_detail()


@pytest.mark.django_db
def test_a_named_title_is_embedded_once_then_read_from_the_cache(
    corpus: Corpus, monkeypatch: pytest.MonkeyPatch
) -> None:
    batches: list[list[str]] = []
    real = query_vectors.embed_queries

    def spy(embedder: Embedder, texts: Sequence[str]) -> np.ndarray:
        batches.append(list(texts))
        return real(embedder, texts)

    monkeypatch.setattr(query_vectors, "embed_queries", spy)
    for query in (
        "When must the annual return be filed under the Income Tax Law?",
        "Which deductions does the Income Tax Law allow for charitable gifts?",
    ):
        result = retrieve(query=query, token_budget=100, mode="vector", use_cache=False)
        expansion = result.path(TREE_EXPANSION)
        assert expansion is not None and "passage_query" in expansion.detail
    # The first query embedded its title with it, in one batch; the second found it cached.
    assert batches == [
        ["When must the annual return be filed under the Income Tax Law?", "Income Tax Law"],
        ["Which deductions does the Income Tax Law allow for charitable gifts?"],
    ]


def test_the_passage_vector_leans_away_from_the_title_far_more_than_from_the_rest() -> None:
    embedder = get_embedder()
    query = "When must the annual return be filed under the Income Tax Law?"
    vectors = query_vectors.embed_query_vectors(embedder, query, ["Income Tax Law"])
    assert vectors.passage is not None
    assert np.linalg.norm(vectors.passage) == pytest.approx(1.0, abs=1e-5)
    title, rest = embed_queries(embedder, ["Income Tax Law", "When must the annual return be filed?"])
    # Taking a direction out lowers every cosine a little (e5's vectors share a common part);
    # the title's falls several times as far as the rest's (measured: 0.88 -> 0.63, 0.96 -> 0.91).
    title_drop = float(vectors.query @ title) - float(vectors.passage @ title)
    rest_drop = float(vectors.query @ rest) - float(vectors.passage @ rest)
    assert title_drop > 3 * rest_drop > 0
    assert query_vectors.embed_query_vectors(embedder, query).passage is None  # no title named


def test_a_query_that_names_documents_is_routed_to_them_and_the_best_scored_one() -> None:
    fused = fuse({"vector": {1: 0.9, 2: 0.8, 3: 0.2, 4: 0.1}})
    assert route_to_named_documents(fused, {4, 3}) == [1, 3, 4]  # 2 scored well but is not named
    assert route_to_named_documents(fused, {2}) == [1, 2]
    assert route_to_named_documents(fused, {1}) == [1]
    assert route_to_named_documents(fused, {99}) == []  # not found by any path: the scores route
    assert route_to_named_documents([], {1}) == []


@pytest.mark.django_db
def test_a_document_the_query_names_is_searched_whatever_its_scores(corpus: Corpus) -> None:
    query = (
        "How do winds drive surface currents such as the Gulf Stream, and what does the Income Tax Law add?"
    )

    def selected() -> tuple[set[int], tuple[str, ...]]:
        result = retrieve(query=query, token_budget=100, mode="vector", use_cache=False)
        return {hit.document_id for hit in result.documents if hit.selected}, result.notes

    with override_settings(RETRIEVAL_NAMED_DOCUMENTS=False):
        unnamed, _ = selected()
    assert corpus.oceans.id in unnamed and corpus.tax.id not in unnamed  # the scores alone
    named, notes = selected()
    assert named == unnamed | {corpus.tax.id}
    assert "Searched because the query names it: Income Tax Law." in notes


@pytest.mark.django_db
def test_a_title_two_documents_share_names_neither(corpus: Corpus) -> None:
    DocumentFactory.create(
        collection=corpus.legal, title="Income Tax Law", content="A draft.", status="indexed"
    )
    query = (
        "How do winds drive surface currents such as the Gulf Stream, and what does the Income Tax Law add?"
    )
    result = retrieve(query=query, token_budget=100, mode="vector", use_cache=False)
    assert corpus.tax.id not in {hit.document_id for hit in result.documents if hit.selected}
    assert not any(note.startswith("Searched because") for note in result.notes)


@pytest.mark.django_db
def test_a_query_that_names_its_document_leaves_its_namesakes_out(corpus: Corpus) -> None:
    # Regulations on the same subject score within half of the law the query names; only the
    # law is searched, so the whole (small) budget goes to it.
    regulations = build_document(
        sec(
            "Income Tax Regulations",
            "How employers withhold income tax.",
            sec(
                "Withholding",
                "Tax withheld from wages.",
                "Employers withhold income tax from wages each month and file a statement of it "
                "by the end of February; a late statement incurs a penalty.",
            ),
        ),
        collection=corpus.legal,
    )
    # A document the lexical path finds by one word ("income"), so that its min-max
    # normalisation has a floor below the regulations'.
    build_document(
        sec("Payroll Basics", "Pay slips.", "Payroll software prints a pay slip for the income paid."),
        collection=corpus.legal,
    )
    query = "When must the annual return be filed under the Income Tax Law?"

    def run() -> tuple[set[int], tuple[str, ...], set[int]]:
        result = retrieve(query=query, token_budget=100, mode="vector", use_cache=False)
        returned = {chunk.document_id for chunk in result.chunks}
        return {hit.document_id for hit in result.documents if hit.selected}, result.notes, returned

    with override_settings(RETRIEVAL_NAMED_DOCUMENTS=False):
        by_scores, _, _ = run()
    assert {corpus.tax.id, regulations.id} <= by_scores
    named, notes, returned = run()
    assert named == {corpus.tax.id} and returned == {corpus.tax.id}
    assert "Not searched, because the query names other documents: Income Tax Regulations." in notes
