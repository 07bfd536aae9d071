"""Servers as people run them: the response format an endpoint takes, errors not worth a retry,
and the cool-down after repeated failures.

The pure parts (breaker, classification, prompt) on plain data; then LLMClient over real HTTP
against the scripted server in llama-cpp-python's mode (it refuses ``json_schema`` with an HTTP 500
validation message and takes ``json_object``), counting the requests that reach it.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from openfable.llm import (
    LLMClient,
    LLMConfig,
    LLMCoolingDownError,
    LLMRequest,
    LLMRequestError,
    LLMResult,
    LLMUnavailableError,
    LLMUsage,
)
from openfable.llm_endpoints import (
    CircuitBreaker,
    CoolingDown,
    counts_against_endpoint,
    forget_endpoints,
    rejects_response_format,
    response_format_for,
    with_schema_instruction,
)
from openfable.retry import is_transient
from tests.fakes.llm.server import (
    LLAMA_CPP_RESPONSE_FORMATS,
    ScriptedOpenAIServer,
    llama_cpp_validation_error,
    status,
)
from tests.openfable.test_llm import MESSAGES, SCHEMA, DictCache

# -- classification on plain data ----------------------------------------------------------------


class StatusError(Exception):
    def __init__(self, status_code: int, message: str) -> None:
        super().__init__(message)
        self.status_code = status_code


LLAMA_CPP_MESSAGE = llama_cpp_validation_error("json_schema").body["error"]["message"]


@pytest.mark.parametrize(
    ("status_code", "message"),
    [
        (500, LLAMA_CPP_MESSAGE),  # llama-cpp-python 0.3 (FastAPI + pydantic 2)
        (
            500,
            "1 validation error for Request\nbody -> response_format -> type\n  unexpected value; "
            "permitted: 'text', 'json_object'",
        ),  # the same server under pydantic 1
        (
            400,
            "Invalid value: 'json_schema'. Supported values are: 'json_object' and 'text'.",
        ),  # OpenAI, older models
        (400, "response_format json_schema is not supported with this model"),
        (422, "Unsupported response_format type: json_object"),
    ],
)
def test_refusals_of_the_response_format_are_recognised(status_code: int, message: str) -> None:
    error = StatusError(status_code, message)
    assert rejects_response_format(error)
    assert not is_transient(error), "the same request would be refused again"
    assert not counts_against_endpoint(error), "the server answered: it is up"


@pytest.mark.parametrize(
    ("status_code", "message"),
    [
        (400, "Invalid schema for response_format 'titles': 'additionalProperties' is required"),
        (401, "Incorrect API key provided; response_format json_schema not supported"),  # auth first
        (500, "Internal error"),
        (400, "This model's maximum context length is 2048 tokens."),
    ],
)
def test_other_errors_are_not_format_refusals(status_code: int, message: str) -> None:
    assert not rejects_response_format(StatusError(status_code, message))


@pytest.mark.parametrize(
    ("status_code", "message", "transient", "counts"),
    [
        (500, "Connection error.", True, True),  # litellm's connection refused
        (503, "Service Unavailable", True, True),
        (429, "Rate limit reached", True, True),
        (401, "Invalid API Key", False, True),
        (403, "Forbidden", False, True),
        (404, "The model `smollm3` does not exist", False, True),
        (400, "This model's maximum context length is 2048 tokens", False, False),
        (500, "Requested tokens (9000) exceed context window of 2048", False, False),
    ],
)
def test_what_is_retried_and_what_counts_towards_a_cool_down(
    status_code: int, message: str, transient: bool, counts: bool
) -> None:
    error = StatusError(status_code, message)
    assert is_transient(error) is transient
    assert counts_against_endpoint(error) is counts


def test_the_schema_goes_into_the_system_message() -> None:
    schema = {"type": "object", "properties": {"a": {"type": "integer"}}}
    with_system = with_schema_instruction(MESSAGES, schema=schema, name="answer")
    assert len(with_system) == len(MESSAGES)
    assert with_system[0]["content"].startswith("Name the sections.\n\n")
    assert 'JSON Schema "answer"' in with_system[0]["content"]
    assert json.dumps(schema, separators=(",", ":")) in with_system[0]["content"]
    assert MESSAGES[0]["content"] == "Name the sections.", "the caller's messages are not changed"

    without_system = with_schema_instruction([{"role": "user", "content": "hi"}], schema=schema, name="x")
    assert [m["role"] for m in without_system] == ["system", "user"]


# -- the circuit breaker on a fake clock ---------------------------------------------------------


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_the_breaker_opens_after_the_threshold_and_lets_one_trial_through() -> None:
    clock = Clock()
    breaker = CircuitBreaker(threshold=3, cooldown_s=60, clock=clock)
    for _ in range(2):
        assert breaker.admit() == "closed"
        breaker.record_failure("HTTP 503")
    assert breaker.cooldown() is None, "two failures in a row are below the threshold"
    breaker.record_failure("HTTP 503")

    with pytest.raises(CoolingDown) as caught:
        breaker.admit()
    assert caught.value.cooldown.remaining_s == 60 and caught.value.cooldown.failures == 3
    assert "the next try is in 60 s" in str(caught.value) and "HTTP 503" in str(caught.value)

    clock.now += 60
    assert breaker.admit() == "trial"
    with pytest.raises(CoolingDown, match="a trial request is under way"):
        breaker.admit()
    breaker.record_failure("HTTP 503")  # the trial failed: a new cool-down from now
    breaker.end_trial()
    with pytest.raises(CoolingDown):
        breaker.admit()

    clock.now += 61
    assert breaker.admit() == "trial"
    breaker.record_success()
    breaker.end_trial()
    assert breaker.admit() == "closed" and breaker.failures == 0


def test_a_success_resets_the_count_and_zero_turns_the_breaker_off() -> None:
    breaker = CircuitBreaker(threshold=2, cooldown_s=60, clock=Clock())
    breaker.record_failure("x")
    breaker.record_success()
    breaker.record_failure("x")
    assert breaker.admit() == "closed"

    for off in (CircuitBreaker(threshold=0, cooldown_s=60), CircuitBreaker(threshold=1, cooldown_s=0)):
        for _ in range(5):
            off.record_failure("x")
        assert off.admit() == "closed" and off.cooldown() is None


# -- over real HTTP: a server that behaves like llama-cpp-python ---------------------------------


@pytest.fixture
def llama_cpp() -> Iterator[ScriptedOpenAIServer]:
    with ScriptedOpenAIServer(response_formats=LLAMA_CPP_RESPONSE_FORMATS) as server:
        yield server


def make_client(server: ScriptedOpenAIServer, cache: Any = None, **overrides: Any) -> LLMClient:
    settings: dict[str, Any] = {
        "timeout_s": 5.0,
        "max_retries": 4,  # the default: five attempts for a transient failure
        "retry_base_delay_s": 0.05,
        "retry_max_delay_s": 0.2,
        "breaker_threshold": 3,
        "cooldown_s": 60.0,
        "respect_cooldown": True,  # as retrieval's client
    }
    settings.update(overrides)
    return LLMClient(LLMConfig(model="smollm2", base_url=server.base_url, **settings), cache)


def ask(client: LLMClient, text: str = "Text: one, two.") -> LLMResult:
    messages = [MESSAGES[0], {"role": "user", "content": text}]
    return client.complete_json(messages, schema=SCHEMA, schema_name="titles", purpose="test")


def warm_up_litellm() -> None:
    """litellm's first call in a process pays seconds of one-off setup: not what is timed here."""
    with ScriptedOpenAIServer(chat_default={"titles": []}) as server:
        LLMClient(LLMConfig(model="warm-up", base_url=server.base_url), None).complete_json(
            MESSAGES, schema=SCHEMA, schema_name="titles", purpose="warm-up"
        )


def formats_sent(server: ScriptedOpenAIServer) -> list[str]:
    return [(body.get("response_format") or {}).get("type", "none") for body in server.chat_requests]


def test_a_server_refusing_json_schema_is_asked_with_json_object_and_the_schema_in_the_prompt(
    llama_cpp: ScriptedOpenAIServer, caplog: pytest.LogCaptureFixture
) -> None:
    llama_cpp.chat_default = {"titles": ["One", "Two"]}
    warm_up_litellm()
    with caplog.at_level("WARNING", logger="openfable.retry"):
        result = ask(make_client(llama_cpp))

    assert result.data == {"titles": ["One", "Two"]}
    assert formats_sent(llama_cpp) == ["json_schema", "json_object"], "refused once, never retried"
    retried = llama_cpp.chat_requests[1]
    assert retried["response_format"] == {"type": "json_object", "schema": SCHEMA}
    assert 'JSON Schema "titles"' in retried["messages"][0]["content"]
    assert retried["messages"][1:] == [{"role": "user", "content": "Text: one, two."}]
    # Said by the retry loop before each backoff (a wall-clock bound raced a busy machine).
    assert "retrying in" not in caplog.text, "no backoff before the second format"


def test_the_format_is_learned_once_per_endpoint(llama_cpp: ScriptedOpenAIServer) -> None:
    llama_cpp.chat_default = {"titles": []}
    ask(make_client(llama_cpp), "first")
    ask(make_client(llama_cpp), "second")  # another client (another query, another job)
    ask(make_client(llama_cpp, max_retries=0), "third")
    assert formats_sent(llama_cpp) == ["json_schema", "json_object", "json_object", "json_object"]

    other_model = LLMClient(LLMConfig(model="qwen", base_url=llama_cpp.base_url), None)
    ask(other_model, "fourth")
    assert formats_sent(llama_cpp)[4:] == ["json_schema", "json_object"], "learned per model"


def test_what_was_learned_is_stored_for_other_processes(llama_cpp: ScriptedOpenAIServer) -> None:
    llama_cpp.chat_default = {"titles": []}
    shared = DictCache()  # the database, in production: web and workers share it
    ask(make_client(llama_cpp, cache=shared), "first")
    forget_endpoints()  # a new process: nothing in memory
    ask(make_client(llama_cpp, cache=shared), "second")
    assert formats_sent(llama_cpp) == ["json_schema", "json_object", "json_object"]
    [stored] = [v for k, v in shared.store.items() if k.startswith("openfable:llm-format:")]
    assert stored["response_format"] == "json_object+schema" and stored["refused"] == "json_schema"
    assert "Input should be 'text' or 'json_object'" in stored["reason"]


def test_concurrent_first_calls_cost_one_refused_request(llama_cpp: ScriptedOpenAIServer) -> None:
    llama_cpp.chat_default = lambda request: {"titles": [request["messages"][-1]["content"]]}
    client = make_client(llama_cpp, max_concurrency=4)
    requests = [
        LLMRequest([MESSAGES[0], {"role": "user", "content": f"part {i}"}], SCHEMA, "titles", "part")
        for i in range(4)
    ]
    results = client.complete_json_many(requests)
    assert all(isinstance(r, LLMResult) for r in results)
    assert formats_sent(llama_cpp).count("json_schema") == 1
    assert formats_sent(llama_cpp).count("json_object") == 4


def test_a_server_that_takes_no_response_format_at_all_gets_the_schema_in_the_prompt_only() -> None:
    with ScriptedOpenAIServer(response_formats=("text",), chat_default={"titles": ["x"]}) as server:
        assert ask(make_client(server)).data == {"titles": ["x"]}
        assert formats_sent(server) == ["json_schema", "json_object", "json_object", "none"]
        assert 'JSON Schema "titles"' in server.chat_requests[-1]["messages"][0]["content"]


def test_an_auth_error_is_tried_once(scripted_openai: ScriptedOpenAIServer) -> None:
    scripted_openai.chat_default = status(401, "Invalid API Key")
    with pytest.raises(LLMRequestError) as caught:
        ask(make_client(scripted_openai))
    assert caught.value.status_code == 401
    assert len(scripted_openai.chat_requests) == 1


@pytest.mark.parametrize("code", [403, 404])
def test_forbidden_and_unknown_model_are_tried_once(scripted_openai: ScriptedOpenAIServer, code: int) -> None:
    scripted_openai.chat_default = status(code)
    with pytest.raises(LLMRequestError):
        ask(make_client(scripted_openai))
    assert len(scripted_openai.chat_requests) == 1


def test_a_validation_500_on_another_parameter_is_not_retried(scripted_openai: ScriptedOpenAIServer) -> None:
    message = (
        "1 validation error:\n  {'type': 'float_parsing', 'loc': ('body', 'temperature'), 'msg': "
        "'Input should be a valid number, unable to parse string as a number', 'input': 'hot'}"
    )
    scripted_openai.chat_default = status(500, message)
    with pytest.raises(LLMRequestError):
        ask(make_client(scripted_openai))
    assert len(scripted_openai.chat_requests) == 1


def test_transient_errors_keep_their_bounded_retries(scripted_openai: ScriptedOpenAIServer) -> None:
    scripted_openai.script_chat(status(503), status(429), status(500), {"titles": ["ok"]})
    assert ask(make_client(scripted_openai, breaker_threshold=10)).data == {"titles": ["ok"]}
    assert len(scripted_openai.chat_requests) == 4


def test_a_server_down_cools_down_then_one_trial_decides(scripted_openai: ScriptedOpenAIServer) -> None:
    scripted_openai.chat_default = status(500)
    client = make_client(scripted_openai)  # 4 retries allowed, a threshold of 3, 60 s
    # The cool-down runs on a moved clock, not the wall clock: a short real one could end while a
    # busy machine is still between two of the steps below.
    clock = Clock()
    client.endpoint.breaker.clock = clock
    with pytest.raises(LLMCoolingDownError) as first:
        ask(client)
    # Its own third failure started the cool-down: the call stops there instead of retrying twice more.
    assert first.value.attempts == 3 and len(scripted_openai.chat_requests) == 3
    assert "gave up after 3 attempts: cooling down after 3 failed request(s)" in str(first.value)
    assert LLMUsage.of(first.value) == LLMUsage(calls=1)

    with pytest.raises(LLMCoolingDownError) as cooling:
        ask(make_client(scripted_openai), "another call")  # a new client, the same endpoint
    assert len(scripted_openai.chat_requests) == 3, "no request (nor retry) while cooling down"
    assert "not made: cooling down after 3 failed request(s)" in str(cooling.value)
    assert "HTTP 500" in str(cooling.value)
    assert LLMUsage.of(cooling.value) == LLMUsage(), "no call was made"
    assert client.cooldown() is not None

    clock.now += 60
    assert client.cooldown() is None
    with pytest.raises(LLMUnavailableError) as trial:
        ask(client, "trial")
    assert trial.value.attempts == 1 and len(scripted_openai.chat_requests) == 4, "one trial request"
    with pytest.raises(LLMCoolingDownError):
        ask(client, "right after the failed trial")

    clock.now += 60
    scripted_openai.chat_default = {"titles": ["back"]}
    assert ask(client, "after recovery").data == {"titles": ["back"]}
    assert ask(client, "and again").data == {"titles": ["back"]}
    assert len(scripted_openai.chat_requests) == 6 and client.cooldown() is None


def test_connection_refused_cools_down_too() -> None:
    with ScriptedOpenAIServer() as server:
        client = make_client(server, max_retries=2)
    with pytest.raises(LLMUnavailableError):
        ask(client)
    with pytest.raises(LLMCoolingDownError, match="3 failed request"):
        ask(client, "again")


def test_refused_formats_do_not_count_towards_a_cool_down(llama_cpp: ScriptedOpenAIServer) -> None:
    llama_cpp.chat_default = {"titles": []}
    for model in ("a", "b", "c", "d"):  # each model probes json_schema once and is refused
        client = LLMClient(LLMConfig(model=model, base_url=llama_cpp.base_url, breaker_threshold=1), None)
        ask(client)
        assert client.cooldown() is None


def test_concurrent_calls_during_a_probe_wait_for_its_verdict(llama_cpp: ScriptedOpenAIServer) -> None:
    gate, probing = threading.Event(), threading.Event()

    def slow_first(request: dict[str, Any]) -> Any:
        probing.set()
        gate.wait(30)  # until the test opens it (a short timeout let the probe end early when busy)
        return {"titles": ["ok"]}

    llama_cpp.chat_default = slow_first
    client = make_client(llama_cpp)
    results: list[Any] = []
    threads = [threading.Thread(target=lambda: results.append(ask(client, "x"))) for _ in range(3)]
    for thread in threads:
        thread.start()
    assert probing.wait(30), "the probe reached the server"
    time.sleep(0.3)  # the others' chance to go out (they must not): a busy machine can only hide a bug
    assert formats_sent(llama_cpp) == ["json_schema", "json_object"], "the others wait"
    gate.set()
    for thread in threads:
        thread.join(5)
    assert len(results) == 3 and formats_sent(llama_cpp).count("json_schema") == 1


def test_ingestion_still_tries_during_a_cool_down_and_its_success_ends_it(
    scripted_openai: ScriptedOpenAIServer,
) -> None:
    scripted_openai.chat_default = status(503)
    query_side = make_client(scripted_openai, max_retries=2)
    with pytest.raises(LLMUnavailableError):
        ask(query_side)
    assert query_side.cooldown() is not None

    # A job or a summary regeneration: a person waits for it, and its fallback would last.
    scripted_openai.chat_default = {"titles": ["up again"]}
    job_side = make_client(scripted_openai, respect_cooldown=False)
    assert ask(job_side, "from a job").data == {"titles": ["up again"]}
    assert query_side.cooldown() is None, "one success ends the cool-down for every caller"
    assert ask(query_side, "a query").data == {"titles": ["up again"]}
    assert len(scripted_openai.chat_requests) == 3 + 1 + 1


def test_strict_structured_output_gets_the_schema_without_length_bounds() -> None:
    schema = {
        "type": "object",
        "properties": {
            "maxItems": {"type": "integer"},  # a property's name is data, not a bound
            "picks": {
                "type": "array",
                "items": {"type": "string", "maxLength": 9},
                "maxItems": 3,
                "minItems": 1,
            },
        },
    }
    strict = response_format_for("json_schema", schema=schema, name="picks")
    grammar = response_format_for("json_object+schema", schema=schema, name="picks")
    assert strict is not None and grammar is not None
    assert strict["json_schema"]["schema"] == {
        "type": "object",
        "properties": {
            "maxItems": {"type": "integer"},
            "picks": {"type": "array", "items": {"type": "string"}},
        },
    }
    assert grammar["schema"] == schema  # a grammar ends the string and the list at their bounds
