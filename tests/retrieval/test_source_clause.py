"""A query's opening clause that cites its source ("According to the judgment of …,") routes it;
inside its documents the clause's own words weigh nothing in node-level BM25
(``retrieval.services.source_clause``, ``OPENFABLE_RETRIEVAL_SOURCE_CLAUSE``)."""

from __future__ import annotations

import pytest
from django.test import override_settings

from retrieval.result import LEXICAL
from retrieval.services import retrieve, source_clause
from tests.retrieval.test_services import Corpus, _fresh_query_cache, corpus

__all__ = ["_fresh_query_cache", "corpus"]  # fixtures shared with test_services


@pytest.mark.parametrize(
    ("query", "clause"),
    [
        # The commas inside a name stay in the clause: it ends where a lower-case word follows.
        (
            "According to the judgment of Greenfield, Fairview Court, summarize the facts of H. Price's crimes.",
            "According to the judgment of Greenfield, Fairview Court, ",
        ),
        (
            "Based on Acme Ltd.'s 2019 financial report, what did the company acquire?",
            "Based on Acme Ltd.'s 2019 financial report, ",
        ),
        ("based on the outline, summarize the changes.", "based on the outline, "),
        # No clause: not at the start, no comma before a lower-case word, or another opening.
        ("What did Acme acquire, according to its report?", ""),
        ("According to Acme, Inc. What changed?", ""),
        ("In which year did Acme list its shares?", ""),
    ],
)
def test_source_clause_is_the_opening_that_cites_the_source(query: str, clause: str) -> None:
    found, rest = source_clause(query)
    assert found == clause
    assert found + rest == query


@pytest.mark.django_db
def test_the_source_clause_words_weigh_nothing_inside_the_documents(corpus: Corpus) -> None:
    # "taxable" and "income" cite where to look; the question is about filing. Words the rest of
    # the query repeats ("return") keep their weight.
    query = "Based on the taxable income rules for a return, when must the annual return be filed?"

    def run() -> tuple[dict[str, object], dict[int | None, float]]:
        result = retrieve(query=query, token_budget=100, mode="vector", use_cache=False)
        lexical = {chunk.node_id: chunk.scores.lexical or 0.0 for chunk in result.chunks}
        report = next(path for path in result.paths if path.name == LEXICAL)
        return dict(report.detail), lexical

    detail, lexical = run()
    assert detail["source_terms"] == ["base", "incom", "rule", "taxabl"]
    taxable = corpus.tax.leaf("Taxable income includes").pk
    filing = corpus.tax.leaf("The annual income tax return").pk
    with override_settings(RETRIEVAL_SOURCE_CLAUSE=False):
        detail_off, lexical_off = run()
    assert "source_terms" not in detail_off
    # The taxable-income leaf holds only clause words: its BM25 is gone, the filing leaf's stays.
    assert lexical_off.get(taxable, 0.0) > 0.0 and lexical.get(taxable, 0.0) == 0.0
    assert lexical[filing] > 0.0
