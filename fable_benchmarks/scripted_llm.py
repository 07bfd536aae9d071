"""A scripted model that speaks OpenAI's chat-completions protocol over real HTTP and answers
every OpenFable prompt validly, with outputs of the size a competent model writes.

``python -m fable_benchmarks bench-cost`` points the product's LLM client at it (litellm -> openai SDK -> httpx ->
this server), so every prompt the pipeline and the query side build is sent, received, counted
and answered exactly as with a hosted model; only the model's judgement is scripted. The server
counts each request's input from the messages it received, with the project's tokenizer
(``openfable.tokens``, cl100k_base) plus OpenAI's chat framing (3 tokens a message, 3 to prime the
answer), and returns that and the answer's token count as ``usage``; :attr:`ScriptedLLMServer.calls`
keeps one :class:`ServedCall` per request, so a caller can compare the server's view with the
client's ``LLMUsage``.

Answers, by the schema the request names (``response_format.json_schema.name``, or the schema
instruction in the system message when the client fell back to ``json_object``):

- ``chunk_markers``: the opening eight words of chunks of about the size the prompt asks for
  (paragraphs joined up to it, a long paragraph cut at sentence starts), all verbatim;
- ``document_tree``: sections of about four chunks, grouped under parent sections of about four
  when there are many; table-of-contents titles of a few words and summaries of two sentences
  (~40 words) made from the chunks' opening words, every chunk exactly once, in order;
- ``document_root``: the document's title and a three-sentence summary of its parts;
- ``node_summary``: a two-sentence summary of the section shown;
- ``document_selection`` / ``node_selection``: the outline's documents (up to five) or nodes (up
  to six) sharing most words with the query, scored 0.9 down to 0.5; the first ones listed when
  none shares a word. Only ids the outline showed.

A request with another schema is answered HTTP 400 (never retried) saying so. No Django here.
"""

from __future__ import annotations

import json
import re
import threading
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from openfable.tokens import count_chat_tokens, count_tokens

CHAT_PATH = "/v1/chat/completions"
MODELS_PATH = "/v1/models"

MARKER_WORDS = 8
CHUNKS_PER_SECTION = 4
SECTIONS_PER_PARENT = 4
MAX_DOCUMENT_PICKS = 5
MAX_NODE_PICKS = 6

SUMMARY_OPENERS = ("Covers", "Sets out", "Also describes", "Ends with")

_OPENERS = re.compile(r"\b(?:" + "|".join(SUMMARY_OPENERS) + r") ")
_DOCUMENT_BLOCK = re.compile(r"<untrusted_document>\n?(.*?)\n?</untrusted_document>", re.DOTALL)
_SCHEMA_IN_PROMPT = re.compile(r'valid against the JSON Schema "(\w+)"')
_CHUNK_SIZE = re.compile(r"of about (\d+) words")
_CHUNK_LINE = re.compile(r"^#(\d+) \((\d+) words\): (.*)$")
_TITLE_LINE = re.compile(r"^Document title: (.*)$")
_PART_LINE = re.compile(r"^Part \d+: (.*)$")
_PART_SUMMARY = re.compile(r"^\s+Summary: (.*)$")
_QUERY = re.compile(r"^Search query: (.*)$", re.MULTILINE)
_OUTLINE_DOCUMENT = re.compile(r"^<document id=(\d+)> ?(.*)$")
_OUTLINE_NODE = re.compile(r"^\s*\[node (\d+)\] \((\w+), \d+ tokens\) ?(.*)$")
_SENTENCE_START = re.compile(r"(?<=[.;:!?])\s+(?=[A-Z0-9(])")
_WORD = re.compile(r"[^\W_]+")


@dataclass(frozen=True, slots=True)
class ServedCall:
    """One chat request as the server saw it."""

    schema: str
    prompt_tokens: int
    completion_tokens: int


class UnknownPromptError(ValueError):
    """The request names a schema this model has no answer for."""


def messages_tokens(messages: Sequence[dict[str, Any]]) -> int:
    """Input tokens of a chat request as received, counted the way OpenAI bills them."""
    return count_chat_tokens(messages)


# -- answers -------------------------------------------------------------------------------------


def schema_name(request: dict[str, Any]) -> str:
    """The schema a chat request asks for (see the module docstring)."""
    response_format = request.get("response_format") or {}
    name = (response_format.get("json_schema") or {}).get("name", "")
    if name:
        return str(name)
    system = next(
        (m.get("content", "") for m in request.get("messages", []) if m.get("role") == "system"), ""
    )
    match = _SCHEMA_IN_PROMPT.search(str(system))
    return match.group(1) if match else ""


def answer(request: dict[str, Any]) -> dict[str, Any]:
    """The JSON a competent model returns for this request; UnknownPromptError otherwise."""
    name = schema_name(request)
    prompt = _first_user_prompt(request)
    if name == "chunk_markers":
        size = _CHUNK_SIZE.search(prompt)
        return {"markers": chunk_markers(_fenced(prompt), target_words=int(size.group(1)) if size else 150)}
    if name == "document_tree":
        return document_tree(_fenced(prompt))
    if name == "document_root":
        return document_root(_fenced(prompt))
    if name == "node_summary":
        return {"summary": _summary(_fenced(prompt).split(), sentences=2)}
    if name == "document_selection":
        return {"documents": pick_documents(_query(prompt), _fenced(prompt))}
    if name == "node_selection":
        return {"nodes": pick_nodes(_query(prompt), _fenced(prompt))}
    raise UnknownPromptError(f"the scripted model has no answer for schema {name!r}")


def chunk_markers(text: str, *, target_words: int = 150) -> list[str]:
    """Verbatim opening words of chunks of about ``target_words`` words, in order."""
    pieces: list[list[str]] = []  # runs of words, one per paragraph or long paragraph's slice
    for line in text.split("\n"):
        words = line.split()
        if not words:
            continue
        if len(words) <= 2 * target_words:
            pieces.append(words)
            continue
        run: list[str] = []
        for sentence in _SENTENCE_START.split(line):
            if run and len(run) >= target_words:
                pieces.append(run)
                run = []
            run += sentence.split()
        if run:
            pieces.append(run)
    markers: list[str] = []
    current = 0
    for piece in pieces:
        if not markers or current >= target_words or (current >= target_words // 2 and _is_heading(piece)):
            markers.append(" ".join(piece[:MARKER_WORDS]))
            current = 0
        current += len(piece)
    return markers or [" ".join(text.split()[:MARKER_WORDS])]


def document_tree(listing: str) -> dict[str, Any]:
    """A valid table of contents over the numbered chunks of a tree prompt's listing."""
    title = ""
    chunks: list[list[str]] = []  # the excerpt words of each chunk, by index
    for line in listing.split("\n"):
        if match := _TITLE_LINE.match(line):
            title = match.group(1)
        elif match := _CHUNK_LINE.match(line):
            chunks.append(match.group(3).replace("\u2026", "").split())
    if not chunks:
        raise UnknownPromptError("the tree prompt lists no chunk")
    sections = [
        _section(chunks, list(range(start, min(start + CHUNKS_PER_SECTION, len(chunks)))))
        for start in range(0, len(chunks), CHUNKS_PER_SECTION)
    ]
    if len(sections) > 2 * SECTIONS_PER_PARENT:
        sections = [
            _parent(sections[start : start + SECTIONS_PER_PARENT])
            for start in range(0, len(sections), SECTIONS_PER_PARENT)
        ]
    words = [word for excerpt in chunks for word in excerpt]
    return {
        "title": title or _title(chunks[0]),
        "summary": _summary(words, sentences=3),
        "sections": sections,
    }


def document_root(listing: str) -> dict[str, Any]:
    """The root title and summary from a merge prompt's part titles and summaries."""
    title = ""
    words: list[str] = []
    for line in listing.split("\n"):
        if match := _TITLE_LINE.match(line):
            title = match.group(1)
        elif (match := _PART_LINE.match(line)) or (match := _PART_SUMMARY.match(line)):
            words += _content_words(match.group(1))
    return {"title": title or _title(words), "summary": _summary(words, sentences=3)}


def pick_documents(query: str, outline: str) -> list[dict[str, Any]]:
    texts: dict[int, list[str]] = {}
    current: int | None = None
    for line in outline.split("\n"):
        if match := _OUTLINE_DOCUMENT.match(line):
            current = int(match.group(1))
            texts[current] = [match.group(2)]
        elif current is not None:
            texts[current].append(line)
    return _scored(query, {pk: " ".join(lines) for pk, lines in texts.items()}, MAX_DOCUMENT_PICKS)


def pick_nodes(query: str, outline: str) -> list[dict[str, Any]]:
    texts = {
        int(match.group(1)): match.group(3)
        for line in outline.split("\n")
        if (match := _OUTLINE_NODE.match(line))
    }
    return _scored(query, texts, MAX_NODE_PICKS)


def _scored(query: str, texts: dict[int, str], limit: int) -> list[dict[str, Any]]:
    wanted = {word.lower() for word in _WORD.findall(query)}
    overlap = {pk: len(wanted & {word.lower() for word in _WORD.findall(text)}) for pk, text in texts.items()}
    order = list(texts)  # the outline's order: the engine's own ranking
    ranked = sorted(order, key=lambda pk: (-overlap[pk], order.index(pk)))
    chosen = [pk for pk in ranked if overlap[pk] > 0][:limit] or order[: min(3, limit)]
    return [{"id": pk, "score": round(0.9 - 0.1 * rank, 2)} for rank, pk in enumerate(chosen)]


def _section(chunks: list[list[str]], indexes: list[int]) -> dict[str, Any]:
    words = [word for index in indexes for word in chunks[index][MARKER_WORDS:]]
    return {
        "title": _title(chunks[indexes[0]]),
        "summary": _summary(words or chunks[indexes[0]], sentences=2),
        "chunks": indexes,
        "sections": [],
    }


def _parent(children: list[dict[str, Any]]) -> dict[str, Any]:
    words = [word for child in children for word in _content_words(child["summary"])]
    return {
        "title": children[0]["title"],
        "summary": _summary(words, sentences=2),
        "chunks": [],
        "sections": children,
    }


def _title(words: Sequence[str]) -> str:
    """A table-of-contents entry: the first words, as a heading would read."""
    title = " ".join(words[:7]).strip(" .,;:")
    return title[:1].upper() + title[1:] if title else "Untitled part"


def _summary(words: Sequence[str], *, sentences: int) -> str:
    """``sentences`` sentences of about 20 words made from ``words``, spread over all of them."""
    if not words:
        return "Nothing beneath this node has text."
    out = []
    step = max(1, len(words) // sentences)
    for number in range(sentences):
        part = words[number * step : number * step + 18] or words[:18]
        body = " ".join(part).strip(" .,;:")
        out.append(f"{SUMMARY_OPENERS[min(number, len(SUMMARY_OPENERS) - 1)]} {body}.")
    return " ".join(out)


def _content_words(summary: str) -> list[str]:
    """A summary's words without the sentence openers ``_summary`` adds."""
    return _OPENERS.sub("", summary).split()


def _first_user_prompt(request: dict[str, Any]) -> str:
    return next(
        (str(m.get("content") or "") for m in request.get("messages", []) if m.get("role") == "user"), ""
    )


def _fenced(prompt: str) -> str:
    match = _DOCUMENT_BLOCK.search(prompt)
    if match is None:
        raise UnknownPromptError("the prompt fences no document")
    return match.group(1)


def _query(prompt: str) -> str:
    match = _QUERY.search(prompt)
    return match.group(1) if match else ""


def _is_heading(words: Sequence[str]) -> bool:
    return len(words) <= 12 and not words[-1].endswith((".", ",", ";", ":"))


# -- the server ----------------------------------------------------------------------------------


class ScriptedLLMServer:
    """The scripted model on 127.0.0.1 (a free port); use as a context manager."""

    def __init__(self, *, model: str = "scripted-fable", keep_requests: bool = False) -> None:
        self.model = model
        self.calls: list[ServedCall] = []
        # The request bodies, in arrival order, when asked for (e.g. to find their cache rows).
        self.keep_requests = keep_requests
        self.requests: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def base_url(self) -> str:
        if self._httpd is None:
            raise RuntimeError("ScriptedLLMServer is not started")
        host, port = self._httpd.server_address[:2]
        return f"http://{host!s}:{port}/v1"

    def calls_since(self, start: int) -> list[ServedCall]:
        with self._lock:
            return list(self.calls[start:])

    def call_count(self) -> int:
        with self._lock:
            return len(self.calls)

    def start(self) -> ScriptedLLMServer:
        handler = type("_BoundHandler", (_Handler,), {"server_state": self})
        httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        httpd.daemon_threads = True
        self._httpd = httpd
        self._thread = threading.Thread(
            target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, name="scripted-llm", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> ScriptedLLMServer:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def _served(self, call: ServedCall, request: dict[str, Any]) -> None:
        with self._lock:
            self.calls.append(call)
            if self.keep_requests:
                self.requests.append(request)


class _Handler(BaseHTTPRequestHandler):
    server_state: ScriptedLLMServer  # set on the per-server subclass
    protocol_version = "HTTP/1.1"  # keep-alive, as real servers; every answer has a Content-Length
    server_version = "ScriptedLLM/1.0"

    def log_message(self, format: str, *args: Any) -> None:  # a benchmark's output stays its table
        return

    def do_GET(self) -> None:
        if self.path.split("?", 1)[0] != MODELS_PATH:
            self._send(404, _error(404, f"unknown path {self.path}"))
            return
        model = {"id": self.server_state.model, "object": "model", "created": 0, "owned_by": "openfable"}
        self._send(200, {"object": "list", "data": [model]})

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        if self.path.split("?", 1)[0] != CHAT_PATH:
            self._send(404, _error(404, f"unknown path {self.path}"))
            return
        try:
            request = json.loads(raw or b"null")
            if not isinstance(request, dict) or not isinstance(request.get("messages"), list):
                raise ValueError("expected a JSON object with messages")
            data = answer(request)
        except (ValueError, UnknownPromptError) as error:
            self._send(400, _error(400, str(error)))
            return
        content = json.dumps(data, ensure_ascii=False)
        call = ServedCall(
            schema=schema_name(request),
            prompt_tokens=messages_tokens(request["messages"]),
            completion_tokens=count_tokens(content),
        )
        self.server_state._served(call, request)
        self._send(
            200,
            {
                "id": f"chatcmpl-{uuid.uuid4().hex[:24]}",
                "object": "chat.completion",
                "created": int(time.time()),
                "model": request.get("model") or self.server_state.model,
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": content, "refusal": None},
                        "logprobs": None,
                        "finish_reason": "stop",
                    }
                ],
                "usage": {
                    "prompt_tokens": call.prompt_tokens,
                    "completion_tokens": call.completion_tokens,
                    "total_tokens": call.prompt_tokens + call.completion_tokens,
                },
            },
        )

    def _send(self, code: int, body: dict[str, Any]) -> None:
        payload = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)


def _error(code: int, message: str) -> dict[str, Any]:
    kind = "invalid_request_error" if code < 500 else "server_error"
    return {"error": {"message": message, "type": kind, "param": None, "code": None}}
