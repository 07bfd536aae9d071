"""The settings a query runs under, passed in as one value (``retrieval.query_settings``): the
benchmark's ablations pass a changed copy instead of overriding global settings, and each gives
the answer the same change of the configured setting gives."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from django.test import override_settings

from retrieval.query_settings import QuerySettings
from retrieval.services import retrieve
from tests.retrieval.test_services import Corpus, _fresh_query_cache, corpus

__all__ = ["_fresh_query_cache", "corpus"]  # fixtures shared with test_services

# Names a document by its title (the passage query), gives capitalised names (their damping) and
# opens with a source clause (its words at the node level).
QUERY = (
    "Based on the taxable income rules, how do winds drive surface currents such as the Gulf Stream, "
    "and when must the annual return be filed under the Income Tax Law?"
)
# Names a document that its scores alone would not select (named routing).
NAMING_QUERY = (
    "How do winds drive surface currents such as the Gulf Stream, and what does the Income Tax Law add?"
)


def _answer(query: str = QUERY, **options: Any) -> dict[str, Any]:
    result = retrieve(query=query, token_budget=100, mode="vector", use_cache=False, **options)
    answer = result.to_dict()
    answer.pop("timings_ms")  # milliseconds differ from run to run
    return answer


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("query", "configured", "changes"),
    [
        (QUERY, {"RETRIEVAL_PASSAGE_QUERY": False}, {"passage_query": False}),
        (NAMING_QUERY, {"RETRIEVAL_NAMED_DOCUMENTS": False}, {"named_documents": False}),
        (QUERY, {"RETRIEVAL_NAME_DOCUMENT_SHARE": 0.0}, {"name_document_share": 0.0}),
        (QUERY, {"RETRIEVAL_SOURCE_CLAUSE": False}, {"source_clause": False}),
        (
            QUERY,
            {"RETRIEVAL_LEXICAL_WEIGHT": 0.0, "RETRIEVAL_LEXICAL_NODE_SHARE": 0.0},
            {"lexical_weight": 0.0, "lexical_node_share": 0.0},
        ),
    ],
)
def test_settings_passed_in_answer_as_the_same_configured_settings(
    corpus: Corpus, query: str, configured: dict[str, Any], changes: dict[str, Any]
) -> None:
    default = _answer(query)
    with override_settings(**configured):
        by_configuration = _answer(query)
    passed = _answer(query, query_settings=dataclasses.replace(QuerySettings.from_settings(), **changes))
    assert passed == by_configuration
    assert passed != default  # the switch changes this query's answer: the value was read


@pytest.mark.django_db
def test_an_answer_under_other_settings_is_cached_apart(corpus: Corpus) -> None:
    first = retrieve(query=NAMING_QUERY, token_budget=100, mode="vector")
    unnamed = dataclasses.replace(QuerySettings.from_settings(), named_documents=False)
    other = retrieve(query=NAMING_QUERY, token_budget=100, mode="vector", query_settings=unnamed)
    assert not first.cached and not other.cached
    assert "Searched because the query names it: Income Tax Law." in first.notes
    assert not any(note.startswith("Searched because") for note in other.notes)
    configured = QuerySettings.from_settings()
    again = retrieve(query=NAMING_QUERY, token_budget=100, mode="vector", query_settings=configured)
    assert again.cached  # the configured settings, passed in: the same key as none passed
