"""The scripted server speaks the OpenAI wire format (checked without any client library)."""

from __future__ import annotations

import base64
import json
import struct
import urllib.error
import urllib.request
from typing import Any

import pytest

from tests.fakes.llm.server import ChatReply, ScriptedOpenAIServer, hash_vector, status

# The scripted_openai fixture (the root conftest may register it as well; pytest loads it once).


def call(server: ScriptedOpenAIServer, path: str, body: Any = None) -> tuple[int, dict[str, str], Any]:
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(server.base_url + path, data=data, method="POST" if data else "GET")
    request.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(request, timeout=5) as response:
            return response.status, dict(response.headers), json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, dict(error.headers), json.loads(error.read())


def test_models_endpoint(scripted_openai: ScriptedOpenAIServer) -> None:
    code, headers, body = call(scripted_openai, "/models")
    assert code == 200
    assert headers["Content-Type"] == "application/json"
    assert body["object"] == "list"
    assert body["data"][0]["id"] == "scripted-model"
    assert body["data"][0]["object"] == "model"


def test_chat_completion_shape(scripted_openai: ScriptedOpenAIServer) -> None:
    scripted_openai.script_chat(ChatReply('{"a": 1}', prompt_tokens=11, completion_tokens=3))
    request = {"model": "m1", "messages": [{"role": "user", "content": "hi"}]}
    code, _, body = call(scripted_openai, "/chat/completions", request)
    assert code == 200
    assert body["id"].startswith("chatcmpl-")
    assert body["object"] == "chat.completion"
    assert isinstance(body["created"], int)
    assert body["model"] == "m1"
    choice = body["choices"][0]
    assert choice["index"] == 0
    assert choice["message"] == {"role": "assistant", "content": '{"a": 1}', "refusal": None}
    assert choice["finish_reason"] == "stop"
    assert body["usage"] == {"prompt_tokens": 11, "completion_tokens": 3, "total_tokens": 14}
    assert scripted_openai.chat_requests == [request]


def test_errors_and_exhausted_scripts(scripted_openai: ScriptedOpenAIServer) -> None:
    scripted_openai.script_chat(status(429, "slow down", headers={"Retry-After": "1"}))
    request = {"model": "m1", "messages": []}
    code, headers, body = call(scripted_openai, "/chat/completions", request)
    assert (code, headers["Retry-After"]) == (429, "1")
    assert body["error"]["message"] == "slow down"
    assert body["error"]["code"] == "rate_limit_exceeded"
    code, _, body = call(scripted_openai, "/chat/completions", request)
    assert code == 400
    assert "no scripted chat reply left" in body["error"]["message"]
    assert call(scripted_openai, "/nowhere", {})[0] == 404


def test_callable_replies_see_the_request(scripted_openai: ScriptedOpenAIServer) -> None:
    scripted_openai.script_chat(lambda req: {"echo": req["messages"][0]["content"]})
    _, _, body = call(scripted_openai, "/chat/completions", {"model": "m", "messages": [{"content": "x"}]})
    assert json.loads(body["choices"][0]["message"]["content"]) == {"echo": "x"}


def test_the_chat_default_may_be_a_callable_or_a_status(scripted_openai: ScriptedOpenAIServer) -> None:
    request = {"model": "m", "messages": [{"content": "x"}]}
    scripted_openai.chat_default = lambda req: status(500) if req["messages"][0]["content"] == "x" else "ok"
    assert call(scripted_openai, "/chat/completions", request)[0] == 500
    _, _, body = call(scripted_openai, "/chat/completions", {"model": "m", "messages": [{"content": "y"}]})
    assert body["choices"][0]["message"]["content"] == "ok"


@pytest.mark.parametrize("encoding", ["float", "base64"])
def test_embeddings_shape(scripted_openai: ScriptedOpenAIServer, encoding: str) -> None:
    request = {"model": "e", "input": ["a", "b"], "encoding_format": encoding}
    code, _, body = call(scripted_openai, "/embeddings", request)
    assert code == 200
    assert body["object"] == "list"
    assert [item["index"] for item in body["data"]] == [0, 1]
    assert body["usage"]["prompt_tokens"] == body["usage"]["total_tokens"] > 0
    first = body["data"][0]["embedding"]
    if encoding == "base64":
        raw = base64.b64decode(first)
        first = list(struct.unpack(f"<{len(raw) // 4}f", raw))
    assert first == pytest.approx(hash_vector("a", 16), abs=1e-6)


def test_embeddings_honour_dimensions(scripted_openai: ScriptedOpenAIServer) -> None:
    _, _, body = call(scripted_openai, "/embeddings", {"model": "e", "input": "one", "dimensions": 5})
    assert len(body["data"][0]["embedding"]) == 5
