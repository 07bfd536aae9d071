"""The competent model served over HTTP, with usage counted the way OpenAI bills it.

``FableModelServer`` is the scripted server (``server.ScriptedOpenAIServer``) whose answer to any
chat request no script answers is ``answers.answer``. It counts each request's input from the
messages it received, with the project's tokenizer (``openfable.tokens``, cl100k_base, plus
OpenAI's chat framing: 3 tokens a message, 3 to prime the answer), returns that and the answer's
token count as ``usage``, and keeps one ``ServedCall`` per answer (``calls``), so a caller can
compare the server's view with the client's ``LLMUsage``. A request for a schema it has no answer
for is answered HTTP 400 (never retried) saying so.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from openfable.tokens import count_chat_tokens, count_tokens
from tests.fakes.llm.answers import answer
from tests.fakes.llm.reading import UnknownPromptError, schema_name
from tests.fakes.llm.server import ChatReply, Reply, ScriptedOpenAIServer, status


@dataclass(frozen=True, slots=True)
class ServedCall:
    """One chat request the model answered, as the server saw it."""

    schema: str
    prompt_tokens: int
    completion_tokens: int


def messages_tokens(messages: Sequence[dict[str, Any]]) -> int:
    """Input tokens of a chat request as received, counted the way OpenAI bills them."""
    return count_chat_tokens(messages)


class FableModelServer(ScriptedOpenAIServer):
    """The competent model on 127.0.0.1 (a free port); use as a context manager. Scripted replies
    (``script_chat``) still come first, as on any ``ScriptedOpenAIServer``."""

    def __init__(self, *, model: str = "scripted-fable", **options: Any) -> None:
        super().__init__(models=[model], chat_default=self._competent, **options)
        self.model = model
        self.calls: list[ServedCall] = []

    def calls_since(self, start: int) -> list[ServedCall]:
        with self._lock:
            return list(self.calls[start:])

    def call_count(self) -> int:
        with self._lock:
            return len(self.calls)

    def _competent(self, request: Any) -> Reply:
        try:
            if not isinstance(request, dict) or not isinstance(request.get("messages"), list):
                raise UnknownPromptError("expected a JSON object with messages")
            data = answer(request)
        except UnknownPromptError as error:
            return status(400, str(error))
        content = json.dumps(data, ensure_ascii=False)
        call = ServedCall(
            schema=schema_name(request),
            prompt_tokens=messages_tokens(request["messages"]),
            completion_tokens=count_tokens(content),
        )
        with self._lock:
            self.calls.append(call)
        return ChatReply(
            content=content, prompt_tokens=call.prompt_tokens, completion_tokens=call.completion_tokens
        )
