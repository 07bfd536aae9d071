"""Blocks of text (lines, paragraphs, headings, table rows) into the document text, its page map
and its heading hints; and the character clean-up every format shares (pure, no Django)."""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass

from documents.ingestion.extraction.model import ExtractionError, HeadingHint, PageSpan

# Look-alike quotes become the ASCII ones people type in a query; NFKC leaves them alone.
_QUOTES = str.maketrans(
    {
        "\u2018": "'",
        "\u2019": "'",
        "\u201a": "'",
        "\u201b": "'",
        "\u2032": "'",
        "\u02bc": "'",
        "\u201c": '"',
        "\u201d": '"',
        "\u201e": '"',
        "\u201f": '"',
        "\u2033": '"',
        "\u02ba": '"',
        "\u00ab": '"',
        "\u00bb": '"',
    }
)
# Invisible characters that only split words for a search (zero-width space, word joiner, BOM).
_INVISIBLE = re.compile("[\u200b\u2060\ufeff]")
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f]")
_BLANKS = re.compile(r"[ \t\u00a0]+")


def clean_chars(text: str) -> str:
    """NFKC (ligatures "ﬁ" → "fi", non-breaking and odd-width spaces → " "), straight quotes, no
    invisible or control characters. Line breaks are kept."""
    text = unicodedata.normalize("NFKC", text).translate(_QUOTES)
    text = _INVISIBLE.sub("", text)
    return _CONTROL.sub(" ", text.replace("\t", " "))


def clean_line(text: str) -> str:
    """``clean_chars``, then runs of blanks as one space and no blanks at either end."""
    return _BLANKS.sub(" ", clean_chars(text)).strip()


@dataclass(frozen=True, slots=True)
class Block:
    """One line of output: a heading, a paragraph (or a line of one), a table row."""

    text: str
    page: int  # 1-based
    heading_level: int = 0  # 0: not a heading
    heading_source: str = ""
    # Starts a paragraph ("\n\n" before it) rather than continuing one ("\n").
    new_paragraph: bool = True
    # Continues the line before it, which a PDF wrapped: joined with a space, so that a paragraph
    # is one line as a text file writes it, and a sentence is never two lines (the structural
    # builder may cut a long sentence at a line break, never inside a line).
    wrapped: bool = False


@dataclass(frozen=True, slots=True)
class Assembled:
    text: str
    page_spans: tuple[PageSpan, ...]
    headings: tuple[HeadingHint, ...]


def assemble(blocks: list[Block], *, pages: int, max_chars: int, filename: str) -> Assembled:
    """The text, one block a line: headings as "## Title" lines set apart by blank lines, a blank
    line between paragraphs. Page ``n`` runs from its first block to the next page's first block."""
    parts: list[str] = []
    length = 0
    page_starts: dict[int, int] = {}
    headings: list[HeadingHint] = []
    previous_heading = False
    for block in blocks:
        if not block.text.strip():
            continue
        if parts:
            separator = _separator(block, previous_heading=previous_heading)
            parts.append(separator)
            length += len(separator)
        page_starts.setdefault(block.page, length)
        line = _line(block)
        if block.heading_level:
            headings.append(_heading_hint(block, start=length, end=length + len(line)))
        parts.append(line)
        length += len(line)
        previous_heading = bool(block.heading_level)
        if length > max_chars:
            raise ExtractionError(
                f"{filename} expands to more than {max_chars:,} characters of text; "
                "split it into smaller files and upload them again",
                code="too_large",
            )
    if parts:
        parts.append("\n")
        length += 1
    text = "".join(parts)
    return Assembled(text, _page_spans(page_starts, pages, len(text)), tuple(headings))


def _separator(block: Block, *, previous_heading: bool) -> str:
    """What goes between the line before and ``block``: a blank line around a heading and
    before a new paragraph, a space before a wrapped line's rest, else a line break."""
    if block.new_paragraph or block.heading_level or previous_heading:
        return "\n\n"
    return " " if block.wrapped else "\n"


def _heading_level(block: Block) -> int:
    return min(6, block.heading_level)  # markdown has six levels of heading


def _line(block: Block) -> str:
    if block.heading_level:
        return f"{'#' * _heading_level(block)} {block.text}"
    return block.text


def _heading_hint(block: Block, *, start: int, end: int) -> HeadingHint:
    return HeadingHint(start, end, _heading_level(block), block.text, block.heading_source)


def _page_spans(page_starts: dict[int, int], pages: int, length: int) -> tuple[PageSpan, ...]:
    spans: list[PageSpan] = []
    end = length
    # Backwards: an empty page (blank, or only a running header) starts where the next one does.
    for page in range(pages, 0, -1):
        start = min(page_starts.get(page, end), end)
        if page == 1:
            start = 0
        spans.append(PageSpan(page, start, end))
        end = start
    return tuple(reversed(spans))
