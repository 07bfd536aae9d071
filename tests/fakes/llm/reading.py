"""What a chat request asks: its schema, the fenced document, and the lines inside it.

The fake reads prompts with the very text they are written with: the line templates and the
fence tag of ``documents.ingestion.prompts`` become the patterns here, so a prompt that changes its
wording changes what the fake looks for with it. The query side's prompts are written in
``retrieval/paths/llm.py`` and the schema instruction of the ``json_object`` fallback in
``openfable/llm_endpoints.py``; their few patterns are spelled out below.
"""

from __future__ import annotations

import re
import string
from typing import Any

from documents.ingestion.prompts import (
    CHUNK_LINE,
    CHUNK_SIZE_PHRASE,
    DOCUMENT_TAG,
    PART_LINE,
    PART_SUMMARY_LINE,
    TITLE_LINE,
)


class UnknownPromptError(ValueError):
    """The request is not one of OpenFable's prompts (no schema the fake knows, no fenced text)."""


def template_pattern(template: str, *, whole_line: bool = True, **groups: str) -> re.Pattern[str]:
    """A regex for text written as ``template.format(...)``: each field becomes a named group
    (``.*`` unless ``groups`` says otherwise), the rest is matched literally."""
    parts: list[str] = []
    for literal, field, _, _ in string.Formatter().parse(template):
        parts.append(re.escape(literal))
        if field is not None:
            parts.append(f"(?P<{field}>{groups.get(field, '.*')})")
    body = "".join(parts)
    return re.compile(f"^{body}$" if whole_line else body)


DOCUMENT_BLOCK = re.compile(rf"<{DOCUMENT_TAG}>\n?(.*?)\n?</{DOCUMENT_TAG}>", re.DOTALL)
CHUNK_LINE_PATTERN = template_pattern(CHUNK_LINE, index=r"\d+", words=r"\d+")
CHUNK_SIZE_PATTERN = template_pattern(CHUNK_SIZE_PHRASE, whole_line=False, words=r"\d+")
TITLE_LINE_PATTERN = template_pattern(TITLE_LINE)
PART_LINE_PATTERN = template_pattern(PART_LINE, number=r"\d+")
PART_SUMMARY_PATTERN = template_pattern(PART_SUMMARY_LINE)
# openfable/llm_endpoints.py: the schema named in the system message when json_schema is refused.
SCHEMA_IN_PROMPT = re.compile(r'valid against the JSON Schema "(\w+)"')
# retrieval/paths/llm.py: the query, and the outline's documents and nodes.
QUERY_LINE = re.compile(r"^Search query: (.*)$", re.MULTILINE)
OUTLINE_DOCUMENT = re.compile(r"^<document id=(\d+)> ?(.*)$")
OUTLINE_NODE = re.compile(r"^\s*\[node (\d+)\] \((\w+), \d+ tokens\) ?(.*)$")


def schema_name(request: dict[str, Any]) -> str:
    """The schema a chat request asks for: named in ``response_format.json_schema``, or, when the
    client fell back to ``json_object`` for a server that refuses it, in the system message."""
    response_format = request.get("response_format") or {}
    name = (response_format.get("json_schema") or {}).get("name", "")
    if name:
        return str(name)
    system = next(
        (m.get("content", "") for m in request.get("messages", []) if m.get("role") == "system"), ""
    )
    match = SCHEMA_IN_PROMPT.search(str(system))
    return match.group(1) if match else ""


def first_user_prompt(request: dict[str, Any]) -> str:
    """The prompt itself: a retry turn (``feedback_messages``) comes after it, never instead."""
    return next(
        (str(m.get("content") or "") for m in request.get("messages", []) if m.get("role") == "user"), ""
    )


def fenced(prompt: str) -> str:
    """The text inside the prompt's ``<untrusted_document>`` block."""
    match = DOCUMENT_BLOCK.search(prompt)
    if match is None:
        raise UnknownPromptError("the prompt fences no document")
    return match.group(1)


def fenced_document(request: dict[str, Any]) -> str:
    return fenced(first_user_prompt(request))


def chunk_size(prompt: str, *, default: int = 150) -> int:
    """The chunk size a chunking prompt asks for, in words."""
    match = CHUNK_SIZE_PATTERN.search(prompt)
    return int(match.group("words")) if match else default


def chunk_lines(listing: str) -> list[tuple[int, int, str]]:
    """A tree prompt's numbered chunks: ``(index, words, excerpt)`` in order."""
    return [
        (int(match.group("index")), int(match.group("words")), match.group("excerpt"))
        for line in listing.split("\n")
        if (match := CHUNK_LINE_PATTERN.match(line))
    ]


def chunk_count(request: dict[str, Any]) -> int:
    return len(chunk_lines(fenced_document(request)))


def query_text(prompt: str) -> str:
    match = QUERY_LINE.search(prompt)
    return match.group(1) if match else ""
