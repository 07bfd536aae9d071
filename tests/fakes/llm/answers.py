"""The answers of a competent model to every OpenFable prompt, read from the request itself.

``answer`` is the model ``bench-cost`` measures against and the tests' default: by the schema the
request names (``reading.schema_name``),

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

Another schema raises ``UnknownPromptError``. ``simple_answer`` is a plainer valid model that tests
count on (``paragraph_markers``: a chunk per paragraph; ``two_section_tree``: two sections; a fixed
root), and its parts are answers a test can build on. No Django here.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from tests.fakes.llm.reading import (
    CHUNK_LINE_PATTERN,
    OUTLINE_DOCUMENT,
    OUTLINE_NODE,
    PART_LINE_PATTERN,
    PART_SUMMARY_PATTERN,
    TITLE_LINE_PATTERN,
    UnknownPromptError,
    chunk_count,
    chunk_size,
    fenced,
    fenced_document,
    first_user_prompt,
    query_text,
    schema_name,
)

MARKER_WORDS = 8
CHUNKS_PER_SECTION = 4
SECTIONS_PER_PARENT = 4
MAX_DOCUMENT_PICKS = 5
MAX_NODE_PICKS = 6

SUMMARY_OPENERS = ("Covers", "Sets out", "Also describes", "Ends with")

_OPENERS = re.compile(r"\b(?:" + "|".join(SUMMARY_OPENERS) + r") ")
_SENTENCE_START = re.compile(r"(?<=[.;:!?])\s+(?=[A-Z0-9(])")
_WORD = re.compile(r"[^\W_]+")


def answer(request: dict[str, Any]) -> dict[str, Any]:
    """The JSON a competent model returns for this request; UnknownPromptError otherwise."""
    name = schema_name(request)
    prompt = first_user_prompt(request)
    if name == "chunk_markers":
        return {"markers": chunk_markers(fenced(prompt), target_words=chunk_size(prompt))}
    if name == "document_tree":
        return document_tree(fenced(prompt))
    if name == "document_root":
        return document_root(fenced(prompt))
    if name == "node_summary":
        return {"summary": _summary(fenced(prompt).split(), sentences=2)}
    if name == "document_selection":
        return {"documents": pick_documents(query_text(prompt), fenced(prompt))}
    if name == "node_selection":
        return {"nodes": pick_nodes(query_text(prompt), fenced(prompt))}
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
        if match := TITLE_LINE_PATTERN.match(line):
            title = match.group("title")
        elif match := CHUNK_LINE_PATTERN.match(line):
            chunks.append(match.group("excerpt").replace("\u2026", "").split())
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
        if match := TITLE_LINE_PATTERN.match(line):
            title = match.group("title")
        elif match := PART_LINE_PATTERN.match(line):
            words += _content_words(match.group("title"))
        elif match := PART_SUMMARY_PATTERN.match(line):
            words += _content_words(match.group("summary"))
    return {"title": title or _title(words), "summary": _summary(words, sentences=3)}


def pick_documents(query: str, outline: str) -> list[dict[str, Any]]:
    texts: dict[int, list[str]] = {}
    current: int | None = None
    for line in outline.split("\n"):
        if match := OUTLINE_DOCUMENT.match(line):
            current = int(match.group(1))
            texts[current] = [match.group(2)]
        elif current is not None:
            texts[current].append(line)
    return _scored(query, {pk: " ".join(lines) for pk, lines in texts.items()}, MAX_DOCUMENT_PICKS)


def pick_nodes(query: str, outline: str) -> list[dict[str, Any]]:
    texts = {
        int(match.group(1)): match.group(3)
        for line in outline.split("\n")
        if (match := OUTLINE_NODE.match(line))
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


def _is_heading(words: Sequence[str]) -> bool:
    return len(words) <= 12 and not words[-1].endswith((".", ",", ";", ":"))


# -- simpler answers tests build on ----------------------------------------------------------------


def paragraph_markers(request: dict[str, Any], words: int = 6) -> dict[str, Any]:
    """Opening words of every paragraph (non-empty line) of the window."""
    lines = [line for line in fenced_document(request).split("\n") if line.strip()]
    return {"markers": [" ".join(line.split()[:words]) for line in lines]}


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


def simple_answer(request: dict[str, Any]) -> dict[str, Any]:
    """Answer an ingestion prompt validly and predictably: a chunk per paragraph, two sections."""
    name = schema_name(request)
    if name == "chunk_markers":
        return paragraph_markers(request)
    if name == "document_tree":
        return two_section_tree(request)
    if name == "document_root":
        return {"title": "Merged document", "summary": "All the parts together."}
    raise UnknownPromptError(f"unexpected prompt with schema {name!r}")
