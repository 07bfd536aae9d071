"""The default LLM response cache: LLMCacheEntry rows in a table that ``migrate`` makes.

The pytest-django test database is built by ``migrate`` alone (no ``createcachetable``), so these
tests also show that a plain migrate is enough for the cache to work.
"""

from __future__ import annotations

from typing import Any

import pytest
from django.conf import settings as django_settings
from django.db import connection
from pytest_django.fixtures import Settings as SettingsWrapper

from openfable.llm import DatabaseLLMCache, LLMClient, LLMOutputError, LLMResult
from openfable.llm.calls import LLMUsage
from openfable.models import LLMCacheEntry
from tests.fakes.llm.server import ChatReply, ScriptedOpenAIServer

pytestmark = pytest.mark.django_db

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"titles": {"type": "array", "items": {"type": "string"}}},
    "required": ["titles"],
    "additionalProperties": False,
}
MESSAGES = [
    {"role": "system", "content": "Name the sections."},
    {"role": "user", "content": "Text: one, two."},
]


@pytest.fixture
def llm_settings(scripted_llm: ScriptedOpenAIServer, settings: SettingsWrapper) -> ScriptedOpenAIServer:
    settings.LLM_TIMEOUT = 5.0
    settings.LLM_MAX_RETRIES = 0
    return scripted_llm


def _ask(client: LLMClient, *, max_tokens: int | None = None) -> LLMResult:
    return client.complete_json(
        MESSAGES, schema=SCHEMA, schema_name="titles", purpose="test", max_tokens=max_tokens
    )


def test_no_django_cache_alias_is_needed_for_llm_answers(llm_settings: ScriptedOpenAIServer) -> None:
    assert "llm" not in django_settings.CACHES  # that alias needed `createcachetable`
    assert isinstance(LLMClient.from_settings().cache, DatabaseLLMCache)


def test_a_second_identical_call_is_answered_from_the_table(llm_settings: ScriptedOpenAIServer) -> None:
    llm_settings.script_chat({"titles": ["first"]}, {"titles": ["second"]})

    first = _ask(LLMClient.from_settings())
    # A new client (another request, another worker) shares the cache through the database.
    again = _ask(LLMClient.from_settings())

    assert len(llm_settings.chat_requests) == 1
    assert first.cached is False and again.cached is True
    assert again.data == first.data == {"titles": ["first"]}
    assert again.text == first.text
    assert (again.prompt_tokens, again.completion_tokens, again.cost_usd) == (0, 0, 0.0)
    # Other tests' LLM calls run on worker threads (their own connections, committed): count ours.
    [entry] = LLMCacheEntry.objects.filter(key=LLMClient.from_settings().cache_key(MESSAGES, SCHEMA))
    assert entry.value == {"data": {"titles": ["first"]}, "text": first.text}


def test_set_overwrites_and_get_misses_cleanly() -> None:
    cache = DatabaseLLMCache()
    before = LLMCacheEntry.objects.count()
    assert cache.get("absent") is None
    assert cache.get("absent", "fallback") == "fallback"

    cache.set("k", {"data": [1], "text": "[1]"})
    cache.set("k", {"data": [2], "text": "[2]"})  # two racing identical calls: the later one wins

    assert cache.get("k") == {"data": [2], "text": "[2]"}
    assert LLMCacheEntry.objects.count() == before + 1


def test_a_missing_table_costs_only_the_cache(
    llm_settings: ScriptedOpenAIServer, caplog: pytest.LogCaptureFixture
) -> None:
    """A failing cache query logs a warning, the call still answers, and the caller's
    transaction (here the test's own) is still usable afterwards."""
    with connection.cursor() as cursor:  # rolled back with the test's transaction
        cursor.execute("ALTER TABLE openfable_llmcacheentry RENAME TO openfable_llmcacheentry_gone")
    llm_settings.script_chat({"titles": ["ok"]})

    with caplog.at_level("WARNING", logger="openfable.llm"):
        result = _ask(LLMClient.from_settings())

    assert result.data == {"titles": ["ok"]} and result.cached is False
    messages = [record.getMessage() for record in caplog.records]
    assert "LLM cache read failed" in messages and "LLM cache write failed" in messages
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")
        assert cursor.fetchone() == (1,)


def test_the_temperature_setting_is_sent_and_a_cached_answer_serves_any_temperature(
    llm_settings: ScriptedOpenAIServer, settings: SettingsWrapper
) -> None:
    llm_settings.script_chat({"titles": ["first"]}, {"titles": ["second"]})
    settings.LLM_TEMPERATURE = None
    _ask(LLMClient.from_settings())
    assert "temperature" not in llm_settings.chat_requests[0]  # the provider's own default

    LLMCacheEntry.objects.all().delete()
    settings.LLM_TEMPERATURE = 0.0
    asked = _ask(LLMClient.from_settings())
    assert llm_settings.chat_requests[1]["temperature"] == 0.0
    # The key is the prompt, not how it was sampled: the answer kept serves a changed setting.
    settings.LLM_TEMPERATURE = 0.7
    assert _ask(LLMClient.from_settings()).data == asked.data
    assert len(llm_settings.chat_requests) == 2


CUT_OFF = ChatReply('{"titles": ["one", "two", "thr', finish_reason="length")


def test_at_temperature_0_an_answer_that_failed_is_replayed_not_asked_again(
    llm_settings: ScriptedOpenAIServer, settings: SettingsWrapper
) -> None:
    settings.LLM_TEMPERATURE = 0.0
    llm_settings.script_chat(CUT_OFF, {"titles": ["never asked"]})

    with pytest.raises(LLMOutputError) as first:
        _ask(LLMClient.from_settings())
    with pytest.raises(LLMOutputError) as again:
        _ask(LLMClient.from_settings())

    assert len(llm_settings.chat_requests) == 1  # the same prompt at 0 gets the same answer
    assert (first.value.cached, again.value.cached) == (False, True)
    # The caller gets what it got the first time, to read the cut-off answer the same way.
    assert again.value.text == first.value.text == CUT_OFF.content
    assert again.value.finish_reason == "length" and str(again.value) == str(first.value)
    assert LLMUsage.of(again.value).cached_calls == 1


def test_at_another_temperature_an_answer_that_failed_is_asked_again(
    llm_settings: ScriptedOpenAIServer, settings: SettingsWrapper
) -> None:
    settings.LLM_TEMPERATURE = 0.0
    llm_settings.script_chat(CUT_OFF, {"titles": ["sampled anew"]})
    with pytest.raises(LLMOutputError):
        _ask(LLMClient.from_settings())

    settings.LLM_TEMPERATURE = None  # the provider's default sampling: another try may do better
    answer = _ask(LLMClient.from_settings())

    assert len(llm_settings.chat_requests) == 2
    assert answer.data == {"titles": ["sampled anew"]}
    assert _ask(LLMClient.from_settings()).cached  # the good answer replaced the failed one


def test_an_answer_that_failed_under_one_cap_is_asked_again_under_another(
    llm_settings: ScriptedOpenAIServer, settings: SettingsWrapper
) -> None:
    settings.LLM_TEMPERATURE = 0.0
    llm_settings.script_chat(CUT_OFF, {"titles": ["one", "two", "three"]})
    with pytest.raises(LLMOutputError):
        _ask(LLMClient.from_settings(), max_tokens=12)
    with pytest.raises(LLMOutputError) as replayed:
        _ask(LLMClient.from_settings(), max_tokens=12)
    assert replayed.value.cached and len(llm_settings.chat_requests) == 1

    # The same prompt with room to finish is a new question, not the cut-off answer again.
    answer = _ask(LLMClient.from_settings(), max_tokens=200)

    assert len(llm_settings.chat_requests) == 2
    assert llm_settings.chat_requests[1]["max_tokens"] == 200
    assert answer.data == {"titles": ["one", "two", "three"]} and not answer.cached
