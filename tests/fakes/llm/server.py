"""A scripted OpenAI-compatible HTTP server for tests and benchmarks.

Tests drive the real client stack (litellm → openai SDK → httpx) against this server, so retries,
timeouts, usage accounting and JSON parsing are exercised over real HTTP instead of mocks.

Usage::

    with ScriptedOpenAIServer() as server:
        server.script_chat(
            status(429),                       # first call: rate limited
            {"titles": ["A", "B"]},            # second call: this JSON as the assistant message
        )
        client = LLMClient(LLMConfig(model="gpt-4o-mini", base_url=server.base_url), cache)
        ...
        assert len(server.chat_requests) == 2

A reply in a script is one of:

- ``str``: the assistant message content, sent verbatim (so malformed JSON can be scripted);
- ``dict`` / ``list``: serialised with ``json.dumps`` and used as the content;
- :class:`ChatReply` / :class:`EmbeddingReply`: full control over usage, finish_reason, vectors;
- :class:`StatusReply` (see :func:`status`): a raw HTTP status with an OpenAI error body;
- :class:`DelayReply` (see :func:`delay`): wait, then send another reply (to provoke timeouts);
- a callable ``(request_json) -> reply`` for dynamic answers.

``ScriptedOpenAIServer(response_formats=LLAMA_CPP_RESPONSE_FORMATS)`` behaves like
llama-cpp-python's server: a chat request whose ``response_format.type`` is not one it takes
(``json_schema``) is answered HTTP 500 with the validation message that server sends
(:func:`llama_cpp_validation_error`) and uses no scripted reply; ``json_object``, with or without
its ``schema`` key, is taken.

When a script runs dry, chat requests fall back to ``chat_default`` (if set; any reply above,
a callable included) and embedding requests to deterministic hash vectors. A chat request with
neither answers 400 with a message that says the script ran out: 400 is never retried, so an
under-scripted test fails fast and says why.
"""

from __future__ import annotations

import base64
import hashlib
import json
import struct
import threading
import time
import uuid
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Self

CHAT_PATH = "/v1/chat/completions"
EMBEDDINGS_PATH = "/v1/embeddings"
MODELS_PATH = "/v1/models"


@dataclass(frozen=True)
class ChatReply:
    """An assistant message; usage defaults to a rough 4-characters-per-token estimate."""

    content: str | None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    finish_reason: str = "stop"
    model: str | None = None  # None: echo the model the request named


@dataclass(frozen=True)
class EmbeddingReply:
    vectors: list[list[float]]
    prompt_tokens: int | None = None
    model: str | None = None


@dataclass(frozen=True)
class StatusReply:
    status: int
    body: Any = None  # dict → JSON body; str → sent as-is; None → an OpenAI-style error for the status
    headers: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class DelayReply:
    seconds: float
    then: Any = None  # the reply to send after the delay; None → the endpoint's default answer


Reply = Any  # str | dict | list | ChatReply | EmbeddingReply | StatusReply | DelayReply | Callable | None

_ERROR_TYPES = {
    400: ("invalid_request_error", None),
    401: ("invalid_request_error", "invalid_api_key"),
    404: ("invalid_request_error", "model_not_found"),
    429: ("requests", "rate_limit_exceeded"),
    500: ("server_error", None),
    502: ("server_error", None),
    503: ("server_error", None),
}


def status(code: int, message: str | None = None, *, headers: dict[str, str] | None = None) -> StatusReply:
    """A raw HTTP error with an OpenAI-shaped error body."""
    err_type, err_code = _ERROR_TYPES.get(code, ("api_error", None))
    body = {
        "error": {
            "message": message or f"Scripted HTTP {code}",
            "type": err_type,
            "param": None,
            "code": err_code,
        }
    }
    return StatusReply(status=code, body=body, headers=dict(headers or {}))


# The response_format types llama-cpp-python's server accepts (its ChatCompletionRequestResponseFormat
# is a TypedDict with ``type: Literal["text", "json_object"]`` and an optional ``schema``).
LLAMA_CPP_RESPONSE_FORMATS = ("text", "json_object")


def llama_cpp_validation_error(response_format_type: str) -> StatusReply:
    """llama-cpp-python's answer to a response_format type it does not take.

    Its route handler (llama_cpp/server/errors.py, RouteErrorHandler) turns any exception,
    FastAPI's request validation error included, into HTTP 500 with ``{"error": {"message":
    str(exc), "type": "internal_server_error", "param": None, "code": None}}``. The body below is
    what llama-cpp-python 0.3.36's server (FastAPI 0.165, pydantic 2.14) sent for a json_schema
    request, byte for byte but for the install path in its last line.
    """
    allowed = " or ".join(f"'{t}'" for t in LLAMA_CPP_RESPONSE_FORMATS)
    error = {
        "type": "literal_error",
        "loc": ("body", "response_format", "type"),
        "msg": f"Input should be {allowed}",
        "input": response_format_type,
        "ctx": {"expected": allowed},
    }
    message = (
        f"1 validation error:\n  {error!r}\n\n"
        '  File "/usr/local/lib/python3.12/site-packages/llama_cpp/server/app.py", line 376, '
        "in create_chat_completion\n    POST /v1/chat/completions"
    )
    body = {"error": {"message": message, "type": "internal_server_error", "param": None, "code": None}}
    return StatusReply(status=500, body=body)


def delay(seconds: float, then: Reply = None) -> DelayReply:
    return DelayReply(seconds=seconds, then=then)


def hash_vector(text: str, dimensions: int) -> list[float]:
    """A deterministic, L2-normalised pseudo-embedding of ``text`` (same text → same vector)."""
    values: list[float] = []
    counter = 0
    while len(values) < dimensions:
        digest = hashlib.sha256(f"{counter}:{text}".encode()).digest()
        # 8 unsigned 32-bit ints per digest, mapped to [-1, 1].
        values.extend(x / 2**31 - 1.0 for x in struct.unpack("<8I", digest))
        counter += 1
    values = values[:dimensions]
    norm = sum(v * v for v in values) ** 0.5 or 1.0
    return [v / norm for v in values]


@dataclass
class RecordedRequest:
    method: str
    path: str
    headers: dict[str, str]
    body: Any  # the decoded JSON body (None for GET)
    received_at: float


def _estimate_tokens(value: Any) -> int:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return max(1, len(text) // 4)


class ScriptedOpenAIServer:
    """An OpenAI-compatible server on 127.0.0.1 (random port) answering from per-endpoint scripts."""

    def __init__(
        self,
        *,
        embedding_dimensions: int = 16,
        honour_dimensions_param: bool = True,
        models: Iterable[str] = ("scripted-model",),
        chat_default: Reply = None,
        response_formats: Iterable[str] | None = None,
    ) -> None:
        self.embedding_dimensions = embedding_dimensions
        # OpenAI's text-embedding-3 models shorten vectors to a requested `dimensions`; servers
        # like TEI ignore it. Turning this off imitates the latter.
        self.honour_dimensions_param = honour_dimensions_param
        self.models = list(models)
        self.chat_default = chat_default
        # None: every response_format is taken; else only these types (see the module docstring).
        self.response_formats = None if response_formats is None else frozenset(response_formats)
        self.requests: list[RecordedRequest] = []
        self._scripts: dict[str, deque[Reply]] = {CHAT_PATH: deque(), EMBEDDINGS_PATH: deque()}
        self._lock = threading.Lock()
        self._closing = threading.Event()
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- scripting -------------------------------------------------------------------------------

    def script_chat(self, *replies: Reply) -> None:
        with self._lock:
            self._scripts[CHAT_PATH].extend(replies)

    def script_embeddings(self, *replies: Reply) -> None:
        with self._lock:
            self._scripts[EMBEDDINGS_PATH].extend(replies)

    def pending(self, path: str = CHAT_PATH) -> int:
        """How many scripted replies for ``path`` have not been used yet."""
        with self._lock:
            return len(self._scripts[path])

    def requests_to(self, path: str) -> list[RecordedRequest]:
        with self._lock:
            return [r for r in self.requests if r.path == path]

    @property
    def chat_requests(self) -> list[Any]:
        """Bodies of every POST /v1/chat/completions, in arrival order."""
        return [r.body for r in self.requests_to(CHAT_PATH)]

    @property
    def embedding_requests(self) -> list[Any]:
        return [r.body for r in self.requests_to(EMBEDDINGS_PATH)]

    # -- lifecycle -------------------------------------------------------------------------------

    @property
    def base_url(self) -> str:
        if self._httpd is None:
            raise RuntimeError("ScriptedOpenAIServer is not started")
        host, port = self._httpd.server_address[:2]
        return f"http://{host!s}:{port}/v1"

    def start(self) -> Self:
        handler = type("_BoundHandler", (_Handler,), {"scripted": self})
        httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        # Handler threads may be sleeping in a scripted delay when a test ends; don't join them.
        httpd.daemon_threads = True
        httpd.block_on_close = False
        self._httpd = httpd
        # A short poll interval makes stop() quick: tests start and stop many servers.
        self._thread = threading.Thread(
            target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, name="scripted-openai", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        self._closing.set()  # wakes handlers out of scripted delays
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    # -- request handling (called from handler threads) ------------------------------------------

    def _record(self, method: str, path: str, headers: dict[str, str], body: Any) -> None:
        with self._lock:
            self.requests.append(RecordedRequest(method, path, headers, body, time.monotonic()))

    def _next_reply(self, path: str) -> Reply:
        with self._lock:
            script = self._scripts[path]
            return script.popleft() if script else None

    def _refused_format(self, body: Any) -> StatusReply | None:
        if self.response_formats is None or not isinstance(body, dict):
            return None
        response_format = body.get("response_format")
        kind = response_format.get("type") if isinstance(response_format, dict) else None
        if kind is None or kind in self.response_formats:
            return None
        return llama_cpp_validation_error(str(kind))

    def _sleep(self, seconds: float) -> bool:
        """Sleep unless the server is closing; False when interrupted."""
        return not self._closing.wait(seconds)


class _Handler(BaseHTTPRequestHandler):
    scripted: ScriptedOpenAIServer  # set on the per-server subclass
    protocol_version = "HTTP/1.1"  # keep-alive like real servers; every response has Content-Length
    server_version = "ScriptedOpenAI/1.0"

    def log_message(self, format: str, *args: Any) -> None:  # keep test output quiet
        return

    # -- HTTP verbs ------------------------------------------------------------------------------

    def do_GET(self) -> None:
        path = self.path.split("?", 1)[0]
        self.scripted._record("GET", path, dict(self.headers.items()), None)
        if path == MODELS_PATH:
            created = int(time.time())
            data = [
                {"id": m, "object": "model", "created": created, "owned_by": "scripted"}
                for m in self.scripted.models
            ]
            self._send_json(200, {"object": "list", "data": data})
        else:
            self._send_json(404, status(404, f"Unknown path {path}").body)

    def do_POST(self) -> None:
        path = self.path.split("?", 1)[0]
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            body = json.loads(raw or b"null")
        except json.JSONDecodeError:
            self.scripted._record("POST", path, dict(self.headers.items()), raw.decode(errors="replace"))
            self._send_json(400, status(400, "Request body is not valid JSON").body)
            return
        self.scripted._record("POST", path, dict(self.headers.items()), body)
        if path not in (CHAT_PATH, EMBEDDINGS_PATH):
            self._send_json(404, status(404, f"Unknown path {path}").body)
            return
        if path == CHAT_PATH and (refusal := self.scripted._refused_format(body)) is not None:
            self._answer(path, body, refusal)
            return
        reply = self.scripted._next_reply(path)
        self._answer(path, body, reply)

    # -- replies ---------------------------------------------------------------------------------

    def _answer(self, path: str, request: Any, reply: Reply) -> None:
        if reply is None and path == CHAT_PATH:
            # The default goes through the same unwrapping as a script: it may be a callable, a
            # status or a delay too (e.g. a model that answers well until a test breaks it).
            reply = self.scripted.chat_default
        # Callables may return another callable or a delay; unwrap until something concrete.
        while True:
            if callable(reply) and not isinstance(reply, type):
                reply = reply(request)
                continue
            if isinstance(reply, DelayReply):
                if not self.scripted._sleep(reply.seconds):
                    return  # server closing
                reply = reply.then
                continue
            break
        try:
            if isinstance(reply, StatusReply):
                self._send_status(reply)
            elif path == CHAT_PATH:
                self._send_chat(request, reply)
            else:
                self._send_embeddings(request, reply)
        except (BrokenPipeError, ConnectionResetError):
            # The client gave up (e.g. its timeout fired during a scripted delay): nothing to answer.
            pass

    def _send_status(self, reply: StatusReply) -> None:
        body = reply.body if reply.body is not None else status(reply.status).body
        if isinstance(body, str):
            self._send_bytes(reply.status, body.encode(), "text/plain; charset=utf-8", reply.headers)
        else:
            self._send_json(reply.status, body, reply.headers)

    def _send_chat(self, request: dict[str, Any], reply: Reply) -> None:
        if reply is None:
            reply = self.scripted.chat_default
        if reply is None:
            self._send_json(400, status(400, "ScriptedOpenAIServer: no scripted chat reply left").body)
            return
        if isinstance(reply, dict | list):
            reply = json.dumps(reply)
        if isinstance(reply, str):
            reply = ChatReply(content=reply)
        if not isinstance(reply, ChatReply):
            raise TypeError(f"Unsupported chat reply: {reply!r}")
        prompt_tokens = reply.prompt_tokens
        if prompt_tokens is None:
            prompt_tokens = _estimate_tokens(request.get("messages", []))
        completion_tokens = reply.completion_tokens
        if completion_tokens is None:
            completion_tokens = _estimate_tokens(reply.content or "")
        body = {
            "id": f"chatcmpl-{uuid.uuid4().hex[:24]}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": reply.model or request.get("model", "scripted-model"),
            "system_fingerprint": "fp_scripted",
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": reply.content, "refusal": None},
                    "logprobs": None,
                    "finish_reason": reply.finish_reason,
                }
            ],
            "usage": {
                "prompt_tokens": prompt_tokens,
                "completion_tokens": completion_tokens,
                "total_tokens": prompt_tokens + completion_tokens,
            },
        }
        self._send_json(200, body)

    def _send_embeddings(self, request: dict[str, Any], reply: Reply) -> None:
        inputs = request.get("input", [])
        if isinstance(inputs, str):
            inputs = [inputs]
        if reply is None:
            dims = self.scripted.embedding_dimensions
            if self.scripted.honour_dimensions_param and request.get("dimensions"):
                dims = int(request["dimensions"])
            reply = EmbeddingReply(vectors=[hash_vector(str(text), dims) for text in inputs])
        if not isinstance(reply, EmbeddingReply):
            raise TypeError(f"Unsupported embeddings reply: {reply!r}")
        base64_wanted = request.get("encoding_format") == "base64"
        data = []
        for index, vector in enumerate(reply.vectors):
            embedding: Any = vector
            if base64_wanted:
                # The openai SDK asks for base64 float32 little-endian by default and decodes it.
                embedding = base64.b64encode(struct.pack(f"<{len(vector)}f", *vector)).decode()
            data.append({"object": "embedding", "index": index, "embedding": embedding})
        prompt_tokens = reply.prompt_tokens
        if prompt_tokens is None:
            prompt_tokens = sum(_estimate_tokens(str(t)) for t in inputs)
        body = {
            "object": "list",
            "data": data,
            "model": reply.model or request.get("model", "scripted-embedding"),
            "usage": {"prompt_tokens": prompt_tokens, "total_tokens": prompt_tokens},
        }
        self._send_json(200, body)

    def _send_json(self, code: int, body: Any, headers: dict[str, str] | None = None) -> None:
        payload = json.dumps(body).encode()
        self._send_bytes(code, payload, "application/json", headers or {})

    def _send_bytes(self, code: int, payload: bytes, content_type: str, headers: dict[str, str]) -> None:
        self.send_response(code)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(payload)))
        self.send_header("x-request-id", f"req_{uuid.uuid4().hex[:16]}")
        for name, value in headers.items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(payload)
        self.wfile.flush()
