"""One query's LLM input stays under OPENFABLE_RETRIEVAL_LLM_QUERY_TOKENS, counted as the server
receives it (over real HTTP, against the fake model bench-cost uses too). How the allowance is
shared between LLMselect and LLMnavigate on a large corpus is checked on bench-latency's synthetic
corpus, in tests/benchmarks/test_prompt_cap_synthetic_corpus.py."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from pytest_django.fixtures import Settings as SettingsWrapper

from retrieval.result import LLM_SELECT
from retrieval.services import retrieve
from tests.fakes.llm.model import FableModelServer
from tests.retrieval.test_services import MONITORING_QUERY, Corpus, _fresh_query_cache, corpus  # noqa: F401


@pytest.fixture
def scripted(db: None, settings: SettingsWrapper) -> Iterator[FableModelServer]:
    with FableModelServer() as server:
        settings.LLM_MODEL = "scripted-fable"
        settings.LLM_BASE_URL = server.base_url
        settings.LLM_MAX_RETRIES = 0
        yield server


@pytest.mark.slow
def test_a_query_too_long_for_the_allowance_skips_llmselect_without_a_request(
    scripted: FableModelServer,
    settings: SettingsWrapper,
    corpus: Corpus,  # noqa: F811
) -> None:
    settings.RETRIEVAL_LLM_QUERY_TOKENS = 1000
    query = "volcano eruption seismometer " * 60  # ~180 words: no room left in a 400-token prompt
    result = retrieve(query=query, token_budget=100, mode="bipath", use_cache=False)

    select = result.path(LLM_SELECT)
    assert select and select.failed and "leaves 0 tokens for the LLMselect outline" in select.reason
    assert "shorten the query" in select.reason
    assert [call.schema for call in scripted.calls] == ["node_selection"], "LLMnavigate still asked"
    assert result.chunks, "the vector paths answered"
