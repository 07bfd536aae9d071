"""Scripted answers that a competent LLM would give to OpenFable's ingestion prompts.

Used as callable replies of the ScriptedOpenAIServer: each reads the real request (the
prompt the pipeline sent) and answers from it, so tests exercise the whole round trip:
prompt → HTTP → parsing → validation → tree.
"""

from __future__ import annotations

import re
from typing import Any

_DOCUMENT = re.compile(r"<untrusted_document>\n?(.*?)\n?</untrusted_document>", re.DOTALL)
_CHUNK_LINE = re.compile(r"^#(\d+) ", re.MULTILINE)


_SCHEMA_IN_PROMPT = re.compile(r'valid against the JSON Schema "(\w+)"')


def schema_name(request: dict[str, Any]) -> str:
    """The schema the request asks for: named in ``json_schema``, or, when the client fell back to
    ``json_object`` for a server that refuses it, in the system prompt."""
    name = (request.get("response_format") or {}).get("json_schema", {}).get("name", "")
    if name:
        return str(name)
    system = next((m["content"] for m in request["messages"] if m["role"] == "system"), "")
    match = _SCHEMA_IN_PROMPT.search(system)
    return match.group(1) if match else ""


def fenced_document(request: dict[str, Any]) -> str:
    content = request["messages"][-1]["content"]
    if schema_name(request) and "previous answer was invalid" in content:
        content = next(m["content"] for m in request["messages"] if m["role"] == "user")
    match = _DOCUMENT.search(content)
    assert match, "the prompt fences the document"
    return match.group(1)


def paragraph_markers(request: dict[str, Any], words: int = 6) -> dict[str, Any]:
    """Opening words of every paragraph (non-empty line) of the window."""
    lines = [line for line in fenced_document(request).split("\n") if line.strip()]
    return {"markers": [" ".join(line.split()[:words]) for line in lines]}


def chunk_count(request: dict[str, Any]) -> int:
    return len(_CHUNK_LINE.findall(fenced_document(request)))


def two_section_tree(request: dict[str, Any], *, chunks: list[int] | None = None) -> dict[str, Any]:
    """A valid tree: the first half of the chunks in one section, the rest in another."""
    indexes = chunks if chunks is not None else list(range(chunk_count(request)))
    half = max(1, len(indexes) // 2)
    sections = [
        {
            "title": "Opening part",
            "summary": "What the text says first.",
            "chunks": indexes[:half],
            "sections": [],
        },
    ]
    if indexes[half:]:
        sections.append(
            {
                "title": "Closing part",
                "summary": "What it says next.",
                "chunks": indexes[half:],
                "sections": [],
            }
        )
    return {
        "title": "A scripted tree",
        "summary": "The whole text, as a scripted model saw it.",
        "sections": sections,
    }


def root_answer(request: dict[str, Any]) -> dict[str, Any]:
    return {"title": "Merged document", "summary": "All the parts together."}


def competent_llm(request: dict[str, Any]) -> dict[str, Any]:
    """Answer any ingestion prompt correctly, by its schema name."""
    name = schema_name(request)
    if name == "chunk_markers":
        return paragraph_markers(request)
    if name == "document_tree":
        return two_section_tree(request)
    if name == "document_root":
        return root_answer(request)
    raise AssertionError(f"unexpected prompt with schema {name!r}")
