"""LLMClient over real HTTP: litellm → openai SDK → the scripted OpenAI-compatible server."""

from __future__ import annotations

import json
import threading
import time
from typing import Any

import pytest

from openfable.llm import (
    LLMClient,
    LLMConfig,
    LLMOutputError,
    LLMRequest,
    LLMRequestError,
    LLMResult,
    LLMUnavailableError,
    LLMUsage,
    litellm_model_name,
    parse_json_output,
)
from tests.fakes.llm.server import ChatReply, ScriptedOpenAIServer, delay, status

# The scripted_openai fixture (the root conftest may register it as well; pytest loads it once).

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


class DictCache:
    """The slice of Django's cache API the client uses, backed by a dict."""

    def __init__(self) -> None:
        self.store: dict[str, Any] = {}

    def get(self, key: str, default: Any = None) -> Any:
        return self.store.get(key, default)

    def set(self, key: str, value: Any, timeout: Any = None) -> None:
        self.store[key] = value


class BrokenCache:
    def get(self, key: str, default: Any = None) -> Any:
        raise RuntimeError("cache table missing")

    def set(self, key: str, value: Any, timeout: Any = None) -> None:
        raise RuntimeError("cache table missing")


def make_client(
    server: ScriptedOpenAIServer,
    *,
    model: str = "gpt-4o-mini",
    cache: Any = None,
    **overrides: Any,
) -> LLMClient:
    settings: dict[str, Any] = {
        "timeout_s": 5.0,
        "max_retries": 2,
        "max_concurrency": 4,
        "retry_base_delay_s": 0.05,
        "retry_max_delay_s": 0.2,
    }
    settings.update(overrides)
    config = LLMConfig(model=model, base_url=server.base_url, **settings)
    return LLMClient(config, cache if cache is not None else DictCache())


def ask(client: LLMClient, messages: list[dict[str, str]] | None = None) -> LLMResult:
    return client.complete_json(messages or MESSAGES, schema=SCHEMA, schema_name="titles", purpose="test")


def test_good_json_is_parsed_with_usage_and_cost(scripted_openai: ScriptedOpenAIServer) -> None:
    scripted_openai.script_chat(
        ChatReply('{"titles": ["One", "Two"]}', prompt_tokens=120, completion_tokens=9)
    )
    result = ask(make_client(scripted_openai))

    assert result.data == {"titles": ["One", "Two"]}
    assert result.text == '{"titles": ["One", "Two"]}'
    assert (result.prompt_tokens, result.completion_tokens) == (120, 9)
    assert result.cost_usd > 0  # gpt-4o-mini is in litellm's (local) price map
    assert result.cached is False

    [body] = scripted_openai.chat_requests
    assert body["model"] == "gpt-4o-mini"  # the "openai/" routing prefix is not sent
    assert body["messages"] == MESSAGES
    assert body["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "titles", "schema": SCHEMA, "strict": True},
    }


def test_unknown_model_costs_zero_and_uses_the_configured_context_window(
    scripted_openai: ScriptedOpenAIServer,
) -> None:
    scripted_openai.script_chat({"titles": []})
    client = make_client(scripted_openai, model="smollm2-135m", context_window=4096)
    result = ask(client)
    assert result.cost_usd == 0.0
    assert result.prompt_tokens > 0
    assert client.model_name == "openai/smollm2-135m"
    assert client.context_window() == 4096


def test_known_model_context_window_comes_from_litellm(scripted_openai: ScriptedOpenAIServer) -> None:
    assert make_client(scripted_openai, context_window=1234).context_window() == 128_000


def test_malformed_json_raises_output_error_with_the_text(scripted_openai: ScriptedOpenAIServer) -> None:
    scripted_openai.script_chat(ChatReply('{"titles": ["One", ', completion_tokens=7, finish_reason="length"))
    cache = DictCache()
    client = make_client(scripted_openai, cache=cache)
    with pytest.raises(LLMOutputError) as caught:
        ask(client)
    error = caught.value
    assert error.text == '{"titles": ["One", '
    assert error.finish_reason == "length"
    assert error.completion_tokens == 7
    assert error.purpose == "test"
    assert "not valid JSON" in str(error)
    assert cache.store == {}  # a bad answer is never cached
    assert len(scripted_openai.chat_requests) == 1  # output errors are the caller's to retry


def test_wrong_json_type_is_an_output_error(scripted_openai: ScriptedOpenAIServer) -> None:
    scripted_openai.script_chat('["not", "an", "object"]')
    with pytest.raises(LLMOutputError, match="expected a JSON object"):
        ask(make_client(scripted_openai))


def test_code_fenced_json_is_accepted(scripted_openai: ScriptedOpenAIServer) -> None:
    scripted_openai.script_chat('```json\n{"titles": ["A"]}\n```')
    assert ask(make_client(scripted_openai)).data == {"titles": ["A"]}


def test_rate_limit_is_retried(scripted_openai: ScriptedOpenAIServer) -> None:
    scripted_openai.script_chat(status(429, "Rate limit reached"), {"titles": ["ok"]})
    result = ask(make_client(scripted_openai))
    assert result.data == {"titles": ["ok"]}
    assert len(scripted_openai.chat_requests) == 2  # no hidden SDK retries on top of ours


def test_server_error_is_retried(scripted_openai: ScriptedOpenAIServer) -> None:
    scripted_openai.script_chat(status(500), status(503), {"titles": ["ok"]})
    assert ask(make_client(scripted_openai)).data == {"titles": ["ok"]}
    assert len(scripted_openai.chat_requests) == 3


def test_bad_request_is_not_retried(scripted_openai: ScriptedOpenAIServer) -> None:
    scripted_openai.script_chat(status(400, "Invalid schema"), {"titles": ["never sent"]})
    with pytest.raises(LLMRequestError) as caught:
        ask(make_client(scripted_openai))
    assert caught.value.status_code == 400
    assert "Invalid schema" in str(caught.value)
    assert len(scripted_openai.chat_requests) == 1


def test_persistent_server_errors_give_up_after_max_retries(scripted_openai: ScriptedOpenAIServer) -> None:
    scripted_openai.script_chat(*[status(502)] * 5)
    with pytest.raises(LLMUnavailableError) as caught:
        ask(make_client(scripted_openai, max_retries=2))
    assert caught.value.attempts == 3
    assert "failed after 3 attempts" in str(caught.value)
    assert len(scripted_openai.chat_requests) == 3


def test_timeouts_are_retried_then_fail_clearly(scripted_openai: ScriptedOpenAIServer) -> None:
    slow = delay(2.0, {"titles": ["too late"]})
    scripted_openai.script_chat(slow, slow)
    client = make_client(scripted_openai, timeout_s=0.3, max_retries=1)
    with pytest.raises(LLMUnavailableError) as caught:
        ask(client)
    # Had the client waited for the server's answer it would have succeeded ("too late"): the
    # error is the proof, no timer (which a busy machine could overrun) needed.
    assert "timeout" in str(caught.value)
    assert "0.3 s" in str(caught.value)
    assert len(scripted_openai.chat_requests) == 2


def test_timeout_then_success(scripted_openai: ScriptedOpenAIServer) -> None:
    # A timeout a busy machine's prompt answer stays well within (0.3 s did not always), and a
    # delay far past it.
    scripted_openai.script_chat(delay(30.0, {"titles": ["late"]}), {"titles": ["on time"]})
    result = ask(make_client(scripted_openai, timeout_s=2.0))
    assert result.data == {"titles": ["on time"]}


def test_connection_refused_is_an_unavailable_error() -> None:
    with ScriptedOpenAIServer() as server:
        client = make_client(server, max_retries=1)
    # The server is gone: nothing listens on that port any more.
    with pytest.raises(LLMUnavailableError):
        ask(client)


def test_second_identical_call_is_served_from_cache(scripted_openai: ScriptedOpenAIServer) -> None:
    scripted_openai.script_chat({"titles": ["first"]}, {"titles": ["second"]})
    client = make_client(scripted_openai)
    first = ask(client)
    again = ask(client)
    assert again.data == first.data == {"titles": ["first"]}
    assert again.cached is True
    assert (again.prompt_tokens, again.completion_tokens, again.cost_usd) == (0, 0, 0.0)
    assert len(scripted_openai.chat_requests) == 1

    other = ask(client, [{"role": "user", "content": "Something else"}])
    assert other.data == {"titles": ["second"]} and other.cached is False
    assert len(scripted_openai.chat_requests) == 2


def test_cache_key_depends_on_model_messages_and_schema(scripted_openai: ScriptedOpenAIServer) -> None:
    a = make_client(scripted_openai, model="gpt-4o-mini")
    b = make_client(scripted_openai, model="gpt-4o")
    assert a.cache_key(MESSAGES, SCHEMA) == a.cache_key([dict(m) for m in MESSAGES], dict(SCHEMA))
    assert a.cache_key(MESSAGES, SCHEMA) != b.cache_key(MESSAGES, SCHEMA)
    assert a.cache_key(MESSAGES, SCHEMA) != a.cache_key(MESSAGES[:1], SCHEMA)
    assert a.cache_key(MESSAGES, SCHEMA) != a.cache_key(MESSAGES, {"type": "object"})


def test_a_broken_cache_does_not_break_calls(scripted_openai: ScriptedOpenAIServer) -> None:
    scripted_openai.script_chat({"titles": ["ok"]})
    assert ask(make_client(scripted_openai, cache=BrokenCache())).data == {"titles": ["ok"]}


def test_many_calls_run_concurrently(scripted_openai: ScriptedOpenAIServer) -> None:
    client = make_client(scripted_openai, max_concurrency=4)
    scripted_openai.script_chat({"titles": ["warm-up"]})
    ask(client, [{"role": "user", "content": "warm up"}])  # litellm's first call pays one-off setup

    # Each answer waits until all four requests are being answered at once: calls one after
    # another would break the barrier (and fail the calls) instead of racing a timer that a busy
    # machine could overrun. The timeout only guards against a hang.
    all_four = threading.Barrier(4, timeout=30)

    def together(request: dict[str, Any]) -> Any:
        all_four.wait()
        return {"titles": [request["messages"][0]["content"]]}

    scripted_openai.script_chat(*[together] * 4)
    requests = [
        LLMRequest([{"role": "user", "content": f"part {i}"}], SCHEMA, "titles", f"part {i}")
        for i in range(4)
    ]
    results = client.complete_json_many(requests)

    assert [r.data for r in results if isinstance(r, LLMResult)] == [
        {"titles": [f"part {i}"]} for i in range(4)
    ]
    assert not all_four.broken


def test_concurrency_is_bounded(scripted_openai: ScriptedOpenAIServer) -> None:
    in_flight = 0
    peak = 0
    lock = threading.Lock()

    two_at_once = threading.Event()

    def counting(request: dict[str, Any]) -> Any:
        nonlocal in_flight, peak
        with lock:
            in_flight += 1
            peak = max(peak, in_flight)
            if in_flight == 2:
                two_at_once.set()
        # The first waits for a second to arrive (a busy machine may send it late), and each
        # stays a while so that a third, which the bound forbids, would be seen.
        two_at_once.wait(30)
        time.sleep(0.3)
        with lock:
            in_flight -= 1
        return {"titles": [request["messages"][0]["content"]]}

    client = make_client(scripted_openai, max_concurrency=2)
    scripted_openai.script_chat({"titles": ["warm-up"]})
    ask(client, [{"role": "user", "content": "warm up"}])  # the format probe goes alone
    scripted_openai.script_chat(*[counting] * 6)
    requests = [
        LLMRequest([{"role": "user", "content": f"q{i}"}], SCHEMA, "titles", "bounded") for i in range(6)
    ]
    results = client.complete_json_many(requests)
    assert all(isinstance(r, LLMResult) for r in results), results
    assert peak == 2


def test_many_returns_errors_in_place(scripted_openai: ScriptedOpenAIServer) -> None:
    def answer(request: dict[str, Any]) -> Any:
        content = request["messages"][0]["content"]
        return status(400, "nope") if content == "bad" else {"titles": [content]}

    scripted_openai.script_chat(*[answer] * 3)
    client = make_client(scripted_openai)
    results = client.complete_json_many(
        [LLMRequest([{"role": "user", "content": c}], SCHEMA, "titles", c) for c in ("a", "bad", "c")]
    )
    assert isinstance(results[0], LLMResult) and results[0].data == {"titles": ["a"]}
    assert isinstance(results[1], LLMRequestError)
    assert isinstance(results[2], LLMResult) and results[2].data == {"titles": ["c"]}
    assert client.complete_json_many([]) == []


def test_api_key_is_sent_as_bearer_token(scripted_openai: ScriptedOpenAIServer) -> None:
    scripted_openai.script_chat({"titles": []}, {"titles": []})
    ask(make_client(scripted_openai, api_key="sk-test-123"))
    ask(make_client(scripted_openai, model="other-model"))  # no key configured: a placeholder
    first, second = scripted_openai.requests_to("/v1/chat/completions")
    assert first.headers["authorization"] == "Bearer sk-test-123"
    assert second.headers["authorization"] == "Bearer not-needed"


@pytest.mark.parametrize(
    ("model", "base_url", "expected"),
    [
        ("smollm2", "http://127.0.0.1:8080/v1", "openai/smollm2"),
        ("meta-llama/Llama-3.1-8B", "http://vllm:8000/v1", "openai/meta-llama/Llama-3.1-8B"),
        ("openai/gpt-4o-mini", "http://proxy/v1", "openai/gpt-4o-mini"),
        ("hosted_vllm/qwen", "http://vllm:8000/v1", "hosted_vllm/qwen"),
        ("ollama/llama3.1", "http://localhost:11434", "ollama/llama3.1"),
        ("gpt-4o-mini", "", "gpt-4o-mini"),
        ("anthropic/claude-sonnet-4-5", "", "anthropic/claude-sonnet-4-5"),
    ],
)
def test_litellm_model_name(model: str, base_url: str, expected: str) -> None:
    assert litellm_model_name(model, base_url) == expected


def test_parse_json_output_messages() -> None:
    assert parse_json_output(' {"a": 1} ', {"type": "object"}) == {"a": 1}
    with pytest.raises(ValueError, match="empty answer"):
        parse_json_output("   ")
    with pytest.raises(ValueError, match="line 1 column"):
        parse_json_output("{nope")
    with pytest.raises(ValueError, match="expected a JSON array"):
        parse_json_output(json.dumps({"a": 1}), {"type": "array"})


def test_empty_model_is_refused() -> None:
    with pytest.raises(ValueError, match="OPENFABLE_LLM_MODEL"):
        LLMClient(LLMConfig(model=""), DictCache())


# -- LLMUsage: the one usage record of indexing and retrieval ----------------------------------


def test_usage_of_a_result_an_output_error_and_a_failure() -> None:
    fresh = LLMResult(data={}, text="{}", prompt_tokens=10, completion_tokens=2, cost_usd=0.5)
    cached = LLMResult(data={}, text="{}", prompt_tokens=0, completion_tokens=0, cost_usd=0.0, cached=True)
    unparseable = LLMOutputError(
        "bad", purpose="test", text="nope", prompt_tokens=7, completion_tokens=3, cost_usd=0.25
    )

    assert LLMUsage.of(fresh) == LLMUsage(calls=1, prompt_tokens=10, completion_tokens=2, cost_usd=0.5)
    assert LLMUsage.of(cached) == LLMUsage(calls=1, cached_calls=1)
    # The model answered (and was paid) even though the answer was unusable.
    assert LLMUsage.of(unparseable) == LLMUsage(calls=1, prompt_tokens=7, completion_tokens=3, cost_usd=0.25)
    assert LLMUsage.of(LLMUnavailableError("down", purpose="test", attempts=3)) == LLMUsage(calls=1)
    assert LLMUsage.of(RuntimeError("anything")) == LLMUsage(calls=1)


def test_usage_sums_and_serialises() -> None:
    total = (
        LLMUsage()
        .plus(LLMUsage(calls=1, prompt_tokens=10, cost_usd=0.5))
        .plus(LLMUsage(calls=2, cached_calls=1, completion_tokens=4, cost_usd=0.25))
    )
    assert total.to_dict() == {
        "calls": 3,
        "cached_calls": 1,
        "prompt_tokens": 10,
        "completion_tokens": 4,
        "cost_usd": 0.75,
    }
