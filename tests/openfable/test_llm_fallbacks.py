"""The tally of LLM fallbacks (``openfable.llm.fallbacks``) and the clean-up of leaked chat-template
tokens (``openfable.llm.model_text``): what a real small model does, scripted over real HTTP."""

from __future__ import annotations

import json
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
from retrieval.paths.llm import NAVIGATE_SCHEMA, ask_for_scores, scores_schema
from tests.fakes.llm.server import LLAMA_CPP_RESPONSE_FORMATS, ChatReply, ScriptedOpenAIServer, delay

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


def _navigate(client: LLMClient, offered: set[int]) -> Any:
    return ask_for_scores(
        client,
        [{"role": "system", "content": "You find evidence."}, {"role": "user", "content": "Pick nodes."}],
        schema_name="node_selection",
        purpose="LLMnavigate",
        key="nodes",
        offered=offered,
        most_picks=2,
    )


def test_the_ids_a_grammar_may_write_are_the_offered_ones_and_the_prompt_is_not_longer_for_it() -> None:
    # llama-cpp-python turns the schema of a json_object request into a grammar: with the offered
    # ids as an enum, a model that invents ids (Gemma 3 270M named none of 56 it was shown) can
    # only write shown ones. The prompt spells out the schema without the list (the outline shows
    # the ids already), so the outline's room is what it was.
    with ScriptedOpenAIServer(response_formats=LLAMA_CPP_RESPONSE_FORMATS) as server:
        server.script_chat({"nodes": [{"id": 8, "score": 0.7}]})
        outcome = _navigate(_client(server), {8, 7, 30})
        refused, taken = server.chat_requests
    assert outcome.scores == {8: 0.7} and not outcome.failed
    assert refused["response_format"]["json_schema"]["schema"] == scores_schema("nodes", {7, 8, 30})
    enforced = taken["response_format"]["schema"]
    assert enforced["properties"]["nodes"]["items"]["properties"]["id"] == {
        "type": "integer",
        "enum": [7, 8, 30],
    }
    spelled = taken["messages"][0]["content"]
    assert json.dumps(NAVIGATE_SCHEMA, separators=(",", ":")) in spelled and "enum" not in spelled


@pytest.mark.parametrize(
    ("answer", "scores", "read"),
    [
        # cut in the middle of the third item's score: the two complete items are the answer
        (
            '{"nodes": [{"id": 7, "score": 0.9}, {"id": 8, "score": 0.4}, {"id": 30, "score": 0.065324867',
            {7: 0.9, 8: 0.4},
            True,
        ),
        # a score too large for a float is left out, the item after it read
        ('{"nodes": [{"id": 7, "score": 1e999}, {"id": 8, "score": 0.5}, {"id"', {8: 0.5}, True),
        ('{"nodes": [{"id": 7, "sco', {}, False),  # nothing complete: the path fails as before
        ("Sure! Here are the nodes: 7, 8, 30, 31, 32", {}, False),  # not the asked shape at all
    ],
)
def test_an_answer_cut_off_at_its_bound_keeps_its_complete_items(
    scripted_openai: ScriptedOpenAIServer, answer: str, scores: dict[int, float], read: bool
) -> None:
    scripted_openai.script_chat(ChatReply(content=answer, finish_reason="length"))
    before = fallback_counts()
    outcome = _navigate(_client(scripted_openai), {7, 8, 30})
    counted = counts_since(before)
    assert outcome.scores == scores
    assert outcome.failed is not read
    assert (counted[Fallback.INVALID_JSON], counted[Fallback.CUT_OFF_READ]) == (1, int(read))


def test_an_unparseable_answer_that_was_not_cut_off_is_not_read(
    scripted_openai: ScriptedOpenAIServer,
) -> None:
    # the same broken text with finish_reason "stop" is the model's whole answer, and it is broken
    scripted_openai.script_chat(ChatReply(content='{"nodes": [{"id": 7, "score": 0.9}, {"id": 8, "sc'))
    outcome = _navigate(_client(scripted_openai), {7, 8})
    assert outcome.failed and outcome.scores == {}


def test_a_raw_line_break_inside_a_string_is_read() -> None:
    # Gemma 3 270M quoted a marker across a line break; strict JSON refused the whole answer.
    from openfable.llm import parse_json_output

    assert parse_json_output('{"markers": ["Section 1\nTerm"]}') == {"markers": ["Section 1\nTerm"]}
