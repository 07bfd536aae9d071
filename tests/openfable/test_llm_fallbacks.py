"""The tally of LLM fallbacks (``openfable.llm.fallbacks``) and the clean-up of leaked chat-template
tokens (``openfable.llm.model_text``): what a real small model does, scripted over real HTTP."""

from __future__ import annotations

from typing import Any

import pytest

from documents.ingestion.tree_schema import TreeValidationError, parse_root_answer, tree_from_json
from documents.services.nodes.summary import summary_from_answer
from openfable.llm import (
    Fallback,
    LLMClient,
    LLMConfig,
    LLMOutputError,
    LLMUnavailableError,
    counts_since,
    fallback_counts,
)
from openfable.llm.model_text import has_template_tokens, strip_template_tokens
from retrieval.paths.llm import NAVIGATE_SCHEMA, ask_for_scores
from tests.fakes.llm.server import LLAMA_CPP_RESPONSE_FORMATS, ScriptedOpenAIServer, delay

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"title": {"type": "string"}},
    "required": ["title"],
}
MESSAGES = [{"role": "user", "content": "Title this."}]


def _client(server: ScriptedOpenAIServer, **overrides: Any) -> LLMClient:
    config = {"timeout_s": 5.0, "max_retries": 0, "retry_base_delay_s": 0.01, **overrides}
    return LLMClient(LLMConfig(model="gemma-3-270m", base_url=server.base_url, **config))


def _ask(client: LLMClient) -> Any:
    return client.complete_json(MESSAGES, schema=SCHEMA, schema_name="title", purpose="test")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("CONTRACTS", "CONTRACTS"),
        ("Governing law is Delaware. [/INST] Now summarise the next", "Governing law is Delaware."),
        ("<start_of_turn>model\nThe parties agree.<end_of_turn>", "The parties agree."),
        ("Fees <|im_end|><|im_start|>user", "Fees"),
        ("User obligations <eos>", "User obligations"),
        ("<end_of_turn>", ""),
        ("Section 3 <s> continued </s>", "Section 3"),
    ],
)
def test_template_tokens_are_cut_where_the_answer_ends(text: str, expected: str) -> None:
    assert strip_template_tokens(text) == expected
    assert has_template_tokens(text) == (text != expected)


def test_a_tree_title_and_summary_lose_the_template_and_the_cut_is_counted() -> None:
    text = "Governing law. This agreement is governed by Delaware law."
    before = fallback_counts()
    tree = tree_from_json(
        {
            "title": "CONTRACTS [/INST]",
            "summary": "Delaware law governs. [/INST] [INST] Write the next section",
            "sections": [{"title": "Law", "summary": "The law.<end_of_turn>", "chunks": [0], "sections": []}],
        },
        text=text,
        chunks=[(0, len(text))],
    )
    assert (tree.title, tree.summary) == ("CONTRACTS", "Delaware law governs.")
    assert tree.children[0].summary == "The law."
    assert counts_since(before)[Fallback.TEMPLATE_TOKENS] == 3


def test_a_title_that_is_only_template_tokens_is_invalid_so_the_builder_asks_again() -> None:
    with pytest.raises(TreeValidationError, match='"title" is empty'):
        parse_root_answer({"title": "<end_of_turn>", "summary": "A summary."})


def test_a_regenerated_summary_loses_the_template() -> None:
    assert summary_from_answer({"summary": "Payment is due in 30 days.<end_of_turn>\nuser"}) == (
        "Payment is due in 30 days."
    )


def test_a_refused_json_schema_is_counted_once_then_json_object_is_used() -> None:
    with ScriptedOpenAIServer(
        response_formats=LLAMA_CPP_RESPONSE_FORMATS, chat_default={"title": "A"}
    ) as server:
        client = _client(server)
        before = fallback_counts()
        assert _ask(client).data == {"title": "A"}
        assert client.complete_json(MESSAGES, schema=SCHEMA, schema_name="title", purpose="again").data
        counted = counts_since(before)
    assert counted[Fallback.FORMAT_REFUSED] == 1  # learned once for the endpoint, not per call
    assert [body["response_format"]["type"] for body in server.chat_requests] == [
        "json_schema",
        "json_object",
        "json_object",
    ]


@pytest.mark.parametrize(
    ("answer", "kind"),
    [
        ('{"title": "Unfinished', "invalid_json"),
        # Gemma 3 270M scored a document Infinity: Python reads it, JSON and jsonb (the cache) do not.
        ('{"title": "A", "score": Infinity}', "invalid_json"),
        ('{"title": "A", "score": 1e999}', "invalid_json"),  # read as infinity otherwise
        ("  ", "empty_answer"),
    ],
)
def test_an_unusable_answer_is_counted_by_kind(
    scripted_openai: ScriptedOpenAIServer, answer: str, kind: str
) -> None:
    scripted_openai.script_chat(answer)
    before = fallback_counts()
    with pytest.raises(LLMOutputError):
        _ask(_client(scripted_openai))
    counted = counts_since(before)
    assert counted[kind] == 1
    assert sum(counted.values()) == 1


def test_each_timed_out_request_is_counted(scripted_openai: ScriptedOpenAIServer) -> None:
    slow = delay(3.0, {"title": "too late"})
    scripted_openai.script_chat(slow, slow)
    before = fallback_counts()
    with pytest.raises(LLMUnavailableError):
        _ask(_client(scripted_openai, timeout_s=0.3, max_retries=1))
    assert counts_since(before)[Fallback.TIMEOUT] == 2


def test_invented_ids_and_a_wrong_shape_are_counted(scripted_openai: ScriptedOpenAIServer) -> None:
    scripted_openai.script_chat(
        {"nodes": [{"id": 7, "score": 0.9}, {"id": 99, "score": 0.8}, {"id": 98, "score": 1}]},
        {"nodes": "seven"},
    )
    client = _client(scripted_openai)
    before = fallback_counts()

    def navigate() -> Any:
        return ask_for_scores(
            client,
            [{"role": "user", "content": "Pick nodes."}],
            schema=NAVIGATE_SCHEMA,
            schema_name="node_selection",
            purpose="LLMnavigate",
            key="nodes",
            offered={7, 8},
            most_picks=2,
        )

    good, bad = navigate(), navigate()
    assert good.scores == {7: 0.9} and good.dropped_ids == 2
    assert bad.failed and not bad.service_failed
    counted = counts_since(before)
    assert (counted[Fallback.WRONG_IDS], counted[Fallback.WRONG_SHAPE]) == (2, 1)


def test_a_raw_line_break_inside_a_string_is_read() -> None:
    # Gemma 3 270M quoted a marker across a line break; strict JSON refused the whole answer.
    from openfable.llm import parse_json_output

    assert parse_json_output('{"markers": ["Section 1\nTerm"]}') == {"markers": ["Section 1\nTerm"]}
