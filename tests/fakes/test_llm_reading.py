"""The fake LLM reads OpenFable's prompts with the templates they are written with."""

from __future__ import annotations

from typing import Any

from documents.ingestion.prompts import chunking_messages, feedback_messages, merge_messages, tree_messages
from tests.fakes.llm import answers, reading

TEXT = "# Guide\n\nVolcanoes form where magma rises.\n\n## Eruptions\n\nSome erupt gently, some explode.\n"


def _request(messages: list[dict[str, str]], schema: str) -> dict[str, Any]:
    return {"messages": messages, "response_format": {"type": "json_schema", "json_schema": {"name": schema}}}


def test_a_tree_prompt_is_read_for_its_title_and_numbered_chunks_even_after_a_retry_turn() -> None:
    cut = TEXT.index("## Eruptions")
    messages = tree_messages(text=TEXT, chunks=[(0, cut), (cut, len(TEXT))], document_title="Field guide")
    request = _request(messages, "document_tree")
    assert reading.schema_name(request) == "document_tree" and reading.chunk_count(request) == 2
    listing = reading.fenced_document(request)
    assert [(index, words) for index, words, _ in reading.chunk_lines(listing)] == [(0, 7), (1, 7)]
    retried = feedback_messages(messages, answer="{}", error="chunk(s) 1 are missing")
    assert reading.fenced_document(_request(retried, "document_tree")) == listing
    tree = answers.answer(request)
    assert tree["title"] == "Field guide" and [s["chunks"] for s in tree["sections"]] == [[0, 1]]


def test_the_chunk_size_asked_for_and_a_merge_prompts_parts_are_read() -> None:
    prompt = chunking_messages(TEXT, target_chunk_words=99)[1]["content"]
    assert reading.chunk_size(prompt) == 99
    merge = merge_messages(
        [("Formation", "Magma rises."), ("Eruptions", "Lava flows.")], document_title="Guide"
    )
    root = answers.document_root(reading.fenced(merge[1]["content"]))
    assert root["title"] == "Guide"
    assert "Magma rises" in root["summary"] and "Lava flows" in root["summary"]
