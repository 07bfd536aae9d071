"""The passage query: inside the documents a query was routed to, their titles no longer rank
the passages (``retrieval.services.passage_query``, ``OPENFABLE_RETRIEVAL_PASSAGE_QUERY``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest
from django.test import override_settings

from retrieval.result import LEXICAL, TREE_EXPANSION
from retrieval.services import passage_query, retrieve
from tests.retrieval.test_services import Corpus, _fresh_query_cache, corpus

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
    assert passage_query(query, titles) == expected


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
