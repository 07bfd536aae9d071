"""A PDF's lines into clean blocks: running headers, footers and page numbers out, words
hyphenated across a line end joined, paragraphs from line spacing, headings from the outline or
from the font (pure, no Django).

Any reader that yields ``PdfPage`` lines (PDFium here; pdfplumber in the benchmark) gets the same
cleaning, so a comparison of readers compares the readers.
"""

from __future__ import annotations

import itertools
import math
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from documents.ingestion.extraction.assemble import Block
from documents.ingestion.extraction.pdf_layout import PdfBookmark, PdfPage, TextLine

# A page that ends on a line this short ended its paragraph there (a full line of prose runs on).
_SHORT_LAST_LINE_WORDS = 6
# A running header or footer is among the first or last few lines of a page.
_ZONE_LINES = 5
_PAGE_NUMBER = re.compile(
    r"^(?:page\s*)?[-\u2013\u2014(\[]?\s*(?:\d{1,4}|[ivxlc]{1,7})\s*[-\u2013\u2014)\]]?"
    r"(?:\s*(?:of|/)\s*\d{1,4})?$",
    re.IGNORECASE,
)
_DIGITS = re.compile(r"\d+")
_WORD = re.compile(r"[^\W\d_]+(?:-[^\W\d_]+)*", re.UNICODE)
# First halves that make compounds, not syllables: "non-\nexclusive" stays "non-exclusive".
_COMPOUND_PREFIXES = frozenset(
    [
        "non",
        "then",
        "self",
        "co",
        "cross",
        "multi",
        "pre",
        "post",
        "sub",
        "well",
        "full",
        "fully",
        "long",
        "short",
        "semi",
        "anti",
        "inter",
        "intra",
        "ex",
        "quasi",
        "pass",
        "third",
        "first",
        "second",
        "one",
        "two",
        "three",
        "four",
        "five",
        "six",
        "seven",
        "eight",
        "nine",
        "ten",
        "know",
        "arm",
        "above",
        "below",
        "under",
        "over",
        "off",
        "on",
        "in",
        "out",
        "up",
        "down",
        "mid",
        "re",
        "de",
    ]
)
# A heading line that is only its number ("ARTICLE II.", "Section 5", "3."): its title follows.
_LABEL_ONLY = re.compile(
    r"(?:(?:article|section|part|chapter|schedule|exhibit|annex|appendix)\s+)?"
    r"(?:\d{1,3}(?:\.\d{1,3})*|[ivxlc]{1,7}|[a-z])[.):]?",
    re.IGNORECASE,
)
_MAX_HEADING_WORDS = 15
# A line that opens with a clause number: "3.1. Upfront Payment", "12. Notices", "(a) Fees".
_NUMBER_FIRST = re.compile(r"(?:\d{1,3}(?:\.\d{1,3})*\.?|\([a-z]{1,4}\))\s")
_LARGER = 1.15  # a heading's font is at least this many times the body's
_MAX_FONT_LEVELS = 3
_PARAGRAPH_GAP = 1.45  # line pitch past this many times the usual one starts a paragraph
# A page with fewer line steps than this goes by the document's usual pitch too.
_FEW_PITCHES = 12
# A line that ends this share of the text's width before its right edge ends short.
_SHORT_LINE_SHARE = 0.25
# A centred line: indented by this share of the width at least (so no longer than half of it:
# a title, not a list item indented deep in a narrow column), its middle this close to the
# text's middle.
_CENTRED_INDENT = 0.25
_CENTRED_SLACK = 0.05


@dataclass
class Line:
    """A page's line while it is cleaned."""

    text: str
    page: int  # 1-based
    source: TextLine
    heading_level: int = 0
    heading_source: str = ""
    new_paragraph: bool = False


def clean_pages(pages: Sequence[PdfPage], outline: Sequence[PdfBookmark]) -> list[Block]:
    """The document's blocks, page by page, cleaned."""
    kept = _drop_running_lines(pages)
    per_page = [
        [Line(line.text, number, line) for line in lines] for number, lines in enumerate(kept, start=1)
    ]
    layout = _page_layout(kept)
    for lines in per_page:
        _mark_paragraphs(lines, layout)
    if outline:
        _mark_outline(per_page, outline)
    else:
        _mark_font_headings(per_page)
    lines = [line for page in per_page for line in page]
    lines = _join_hyphenated(lines, layout)
    return [
        Block(
            text=line.text,
            page=line.page,
            heading_level=line.heading_level,
            heading_source=line.heading_source,
            new_paragraph=line.new_paragraph,
            wrapped=index > 0 and _wrapped(lines[index - 1], line),
        )
        for index, line in enumerate(lines)
    ]


def _wrapped(previous: Line, line: Line) -> bool:
    """``line`` goes on with the prose of the line before it, which the page only wrapped: the
    same paragraph, no heading, and not two rows of a table (both lines cut into segments by
    wide gaps; a clause's number set apart from its first line is one such gap, on one line)."""
    return (
        not line.new_paragraph
        and not line.heading_level
        and not previous.heading_level
        and (len(previous.source.segments) <= 1 or len(line.source.segments) <= 1)
    )


# -- running headers, footers, page numbers


def _key(text: str) -> str:
    return _DIGITS.sub("#", " ".join(text.lower().split()))


def _zones(page: PdfPage) -> tuple[list[int], list[int]]:
    """Indexes of the page's top lines (top first) and bottom lines (bottom first), by position:
    where on the page they sit varies (a letter page printed in the middle of an A4 one)."""
    by_height = sorted(range(len(page.lines)), key=lambda index: -page.lines[index].middle)
    return by_height[:_ZONE_LINES], list(reversed(by_height[-_ZONE_LINES:]))


def _drop_running_lines(pages: Sequence[PdfPage]) -> list[list[TextLine]]:
    """Peel each page's edges: a line at the top (or bottom) that is a page number, or that
    recurs at the top (bottom) of many pages (numbers aside), is dropped, and so is the next one
    in, until a line that is neither."""
    zones = [_zones(page) for page in pages]
    counts = _edge_counts(pages, zones)
    # Recurring on a fifth of the pages (3 at least; 2 in a short document, 8 always enough): a
    # line repeated by chance at a page's edge ("A minimum of:" atop 5 of 35 exhibits) is rarer.
    threshold = 2 if len(pages) <= 6 else max(3, min(8, math.ceil(0.2 * len(pages))))
    kept: list[list[TextLine]] = []
    for page, (top, bottom) in zip(pages, zones, strict=True):
        drop: set[int] = set()
        for zone, indexes in (("top", top), ("bottom", bottom)):
            drop.update(_peeled(page, zone, indexes, counts, threshold=threshold, several=len(pages) > 1))
        kept.append([line for index, line in enumerate(page.lines) if index not in drop])
    return kept


def _edge_counts(
    pages: Sequence[PdfPage], zones: list[tuple[list[int], list[int]]]
) -> Counter[tuple[str, str]]:
    """On how many pages each line (numbers aside) stands at the top, and at the bottom."""
    counts: Counter[tuple[str, str]] = Counter()
    for page, (top, bottom) in zip(pages, zones, strict=True):
        counts.update({("top", _key(page.lines[index].text)) for index in top})
        counts.update({("bottom", _key(page.lines[index].text)) for index in bottom})
    return counts


def _peeled(
    page: PdfPage,
    zone: str,
    indexes: list[int],
    counts: Counter[tuple[str, str]],
    *,
    threshold: int,
    several: bool,
) -> list[int]:
    """The lines of one edge, outermost first, that are page numbers or running lines."""
    peeled: list[int] = []
    for index in indexes:
        text = page.lines[index].text
        repeated = several and counts[zone, _key(text)] >= threshold
        if not (repeated or _PAGE_NUMBER.match(text.strip())):
            break
        peeled.append(index)
    return peeled


# -- paragraphs


@dataclass(frozen=True)
class _Layout:
    """The document's text block and line pitch, which a page with few lines cannot tell."""

    left: float  # where most lines start
    right: float  # where full lines end
    pitch: float  # the usual pitch of lines inside a paragraph (0: unknown)

    def ends_short(self, line: TextLine) -> bool:
        """The line stops well before the right edge: a title, a list item, a paragraph's end."""
        return line.x1 < self.right - _SHORT_LINE_SHARE * (self.right - self.left)

    def spaced_apart(self, previous: TextLine, line: TextLine) -> bool:
        """A wider gap than the document's usual pitch after a line that ends short (a title, a
        list item) or a table's row; not inside a centred block set in one weight (a title over
        two lines, the parties on a cover page)."""
        if self.pitch <= 0 or previous.middle - line.middle <= _PARAGRAPH_GAP * self.pitch:
            return False
        one_block = self.centred(previous) and self.centred(line) and previous.bold == line.bold
        return not one_block and (self.ends_short(previous) or len(previous.segments) > 1)

    def centred(self, line: TextLine) -> bool:
        """Well apart from both edges, in the middle of the text block: a title, not prose (an
        indented paragraph's last line may fall in the middle too, but it is a long one)."""
        width = self.right - self.left
        middle = (line.x0 + line.x1) / 2
        return line.x0 - self.left > _CENTRED_INDENT * width and abs(
            middle - (self.left + self.right) / 2
        ) < (_CENTRED_SLACK * width)


def _page_layout(pages: Sequence[Sequence[TextLine]]) -> _Layout:
    lines = [line for page in pages for line in page]
    if not lines:
        return _Layout(0.0, 0.0, 0.0)
    starts = sorted(line.x0 for line in lines)
    ends = sorted(line.x1 for line in lines)
    pitch = _usual_pitch([pitch for page in pages for pitch in _pitches(page)])
    return _Layout(starts[len(starts) // 10], ends[len(ends) * 9 // 10], pitch)


def _pitches(lines: Sequence[TextLine]) -> list[float]:
    """The vertical steps between neighbouring lines that may be lines of one paragraph."""
    return [
        previous.middle - line.middle
        for previous, line in itertools.pairwise(lines)
        if 0 < previous.middle - line.middle < 3 * max(line.size, 1.0)
    ]


def _usual_pitch(pitches: list[float]) -> float:
    # The usual pitch is that of lines inside a paragraph: a low quantile, since on a short page
    # the gaps around headings and between paragraphs are a good share of all gaps.
    return sorted(pitches)[len(pitches) // 3] if pitches else 0.0


def _mark_paragraphs(lines: list[Line], layout: _Layout) -> None:
    """A wider gap than the page's usual line pitch, a step back up (a new column), or a change of
    font size starts one.
    A page of a few lines (an attachment's title page, a short list) has no usual pitch of its
    own to go by: there a wider gap than the document's usual pitch starts one too (``_Layout``)."""
    pitches = _pitches([line.source for line in lines])
    usual = _usual_pitch(pitches)
    few = len(pitches) < _FEW_PITCHES
    for index, line in enumerate(lines):
        if index == 0:
            line.new_paragraph = True  # the page's first line; _join_pages decides across pages
            continue
        previous = lines[index - 1].source
        pitch = previous.middle - line.source.middle
        spaced = few and layout.spaced_apart(previous, line.source)
        wide = usual > 0 and pitch > _PARAGRAPH_GAP * usual
        line.new_paragraph = pitch <= 0 or wide or spaced or _resized(previous, line.source)


def _resized(previous: TextLine, line: TextLine) -> bool:
    """A paragraph is set in one size: a line in a size apart from the one above it (a table's
    small header row, then a category row in the body's size) starts another."""
    small, large = sorted((previous.size, line.size))
    return small > 0 and large >= _LARGER * small


# -- headings


def _norm(text: str) -> str:
    return " ".join(re.sub(r"[^\w\s]", " ", text.lower()).split())


def _mark_outline(per_page: list[list[Line]], outline: Sequence[PdfBookmark]) -> None:
    """Each bookmark titles the line it names on its page (nearest to where it points); one that
    names no line there is written as a heading line of its own where it points."""
    for entry in outline:
        if entry.page_index < len(per_page):
            _mark_bookmark(per_page[entry.page_index], entry)


def _mark_bookmark(lines: list[Line], entry: PdfBookmark) -> None:
    title = _norm(entry.title)
    level = min(6, entry.level + 1)
    matches = [index for index, line in enumerate(lines) if _names_line(title, line)]
    if matches:
        index = min(matches, key=lambda i: abs(lines[i].source.top - entry.y) if entry.y is not None else i)
        _set_heading(lines, index, level, "outline", title)
        return
    position = _bookmark_position(lines, entry.y)
    anchor = lines[position].source if position < len(lines) else lines[-1].source if lines else None
    if anchor is None:
        return
    lines.insert(position, Line(entry.title, entry.page_index + 1, anchor, level, "outline", True))
    if position + 1 < len(lines):
        lines[position + 1].new_paragraph = True


def _names_line(title: str, line: Line) -> bool:
    """The bookmark's (normalised) title opens the line, or the line opens the title (wrapped)."""
    if line.heading_level or not title:
        return False
    text = _norm(line.text)
    return text.startswith(title) or (len(text) > 3 and title.startswith(text))


def _bookmark_position(lines: list[Line], y: float | None) -> int:
    """The first line at or below where the bookmark points (the page's top when it says not)."""
    for index, line in enumerate(lines):
        if y is None or line.source.top <= y + 2:
            return index
    return len(lines)


def _set_heading(lines: list[Line], index: int, level: int, source: str, title: str = "") -> None:
    """Line ``index`` becomes a heading; a title wrapped over the next line(s) is joined to it."""
    line = lines[index]
    line.heading_level, line.heading_source, line.new_paragraph = level, source, True
    while (
        title
        and index + 1 < len(lines)
        and len(_norm(line.text)) < len(title)
        and title.startswith(_norm(f"{line.text} {lines[index + 1].text}")[: len(title)])
        and not lines[index + 1].heading_level
    ):
        line.text = f"{line.text} {lines.pop(index + 1).text}"
    if index + 1 < len(lines):
        lines[index + 1].new_paragraph = True


def _is_heading_like(line: Line) -> bool:
    text = line.text
    words = text.split()
    return (
        0 < len(words) <= _MAX_HEADING_WORDS
        and any(char.isalpha() for char in text)
        and not text.endswith((",", ";"))
        and (text[0].isupper() or text[0].isdigit() or not text[0].isalpha())
    )


def _mark_font_headings(per_page: list[list[Line]]) -> None:
    """Lines in a larger font than the body, by size (up to three levels), then whole bold lines
    that stand as a paragraph of their own, one level below."""
    sizes = _ink_by_size(per_page)
    if not sizes:
        return
    body = sizes.most_common(1)[0][0]
    levels = _larger_font_levels(per_page, body)
    for lines in per_page:
        index = 0
        while index < len(lines):
            level = _font_heading_level(lines, index, levels, body)
            if level:
                _mark_font_heading(lines, index, level)
            index += 1


def _half_point(line: Line) -> float:
    return round(line.source.size * 2) / 2


def _following(lines: list[Line], index: int) -> Line | None:
    return lines[index + 1] if index + 1 < len(lines) else None


def _ink_by_size(per_page: list[list[Line]]) -> Counter[float]:
    """How many characters are set in each font size (to the half point)."""
    sizes: Counter[float] = Counter()
    for lines in per_page:
        for line in lines:
            sizes[_half_point(line)] += line.source.chars
    return sizes


def _larger_font_levels(per_page: list[list[Line]], body: float) -> dict[float, int]:
    """The heading level of each font size larger than the body's, largest first (1)."""
    larger = sorted(
        {
            _half_point(line)
            for lines in per_page
            for line in lines
            if line.source.size >= _LARGER * body and _is_heading_like(line)
        },
        reverse=True,
    )[:_MAX_FONT_LEVELS]
    return {size: rank + 1 for rank, size in enumerate(larger)}


def _font_heading_level(lines: list[Line], index: int, levels: dict[float, int], body: float) -> int:
    """Line ``index``'s heading level by its font, or 0: bold lines come one below the sizes."""
    line = lines[index]
    size = _half_point(line)
    if size in levels and _is_heading_like(line):
        return levels[size]
    if _stands_as_bold_heading(line, _after_the_title(lines, index), size=size, body=body):
        return len(levels) + 1
    return 0


def _after_the_title(lines: list[Line], index: int) -> Line | None:
    """The line after line ``index``, or after the line under it that goes on with the same
    title ("Term Sheet" / "Remarketing Preferred Securities of ...": a bold title wrapped over
    two lines stands apart as much as a one-line title does)."""
    following = _following(lines, index)
    if (
        following is not None
        and not following.new_paragraph
        and _continues_the_title(lines[index], following)
    ):
        return _following(lines, index + 1)
    return following


def _stands_as_bold_heading(line: Line, following: Line | None, *, size: float, body: float) -> bool:
    """A whole bold line in the body's size, a paragraph of its own."""
    return (
        line.source.bold
        and line.new_paragraph
        and _is_heading_like(line)
        and len(line.text.split()) <= 12
        and (following is None or following.new_paragraph or not following.source.bold)
        # The body's size or larger: a bold line a little larger than the body (under the sizes
        # that rank as levels of their own) is a heading all the same.
        and size > body - 1.0
    )


def _mark_font_heading(lines: list[Line], index: int, level: int) -> None:
    line = lines[index]
    following = _following(lines, index)
    # A title wrapped over two lines of the same font is one heading; so is a number on a line
    # of its own and the title under it.
    while following is not None and _continues_the_title(line, following):
        line.text = f"{line.text} {lines.pop(index + 1).text}"
        following = _following(lines, index)
    line.heading_level, line.heading_source, line.new_paragraph = level, "font", True
    if following is not None:
        following.new_paragraph = True


def _continues_the_title(line: Line, following: Line) -> bool:
    """``following`` goes on with ``line``'s title: the same font, heading-like, not too long,
    and not a heading of its own that opens with its number ("3.1. Upfront Payment" under "3.
    License Fees and Milestone Payments")."""
    return bool(
        (not following.new_paragraph or _LABEL_ONLY.fullmatch(line.text.strip()))
        and _half_point(following) == _half_point(line)
        and following.source.bold == line.source.bold
        and _is_heading_like(following)
        and len(line.text.split()) + len(following.text.split()) <= _MAX_HEADING_WORDS
        and not _NUMBER_FIRST.match(following.text)
    )


# -- hyphenation and page joins


def _join_hyphenated(lines: list[Line], layout: _Layout) -> list[Line]:
    """A word cut by a hyphen at a line end is joined: "agree-" + "ment" → "agreement", but
    "non-" + "exclusive" → "non-exclusive" (the hyphen stays where the document writes the word
    with one elsewhere, or the first half is a prefix). A page's first line continues the last
    page's paragraph unless that one was over: it ended a sentence, or its last line was a short
    one ("Team MARKS" on a schedule's title page: the next page's "SCHEDULE 3" is no more of it),
    or the new page opens on a centred line (an attachment's title)."""
    words = Counter(word.lower() for line in lines for word in _WORD.findall(line.text))
    joined: list[Line] = []
    for line in lines:
        previous = joined[-1] if joined else None
        if previous is None:
            joined.append(line)
            continue
        if line.page != previous.page and not line.heading_level:
            line.new_paragraph = _paragraph_was_over(previous) or _opens_on_a_title(line, layout)
        if _continues_the_word(previous, line):
            previous.text = _hyphen_joined(previous.text, line.text, words)
            continue
        joined.append(line)
    return joined


def _opens_on_a_title(line: Line, layout: _Layout) -> bool:
    """A page that opens on a centred line (an attachment's title) starts anew; a line that
    opens in lower case goes on with a sentence, wherever it stands."""
    return layout.centred(line.source) and not line.text[:1].islower()


def _paragraph_was_over(previous: Line) -> bool:
    """The last page's last line ended its paragraph: a heading, a short line, a sentence's end."""
    last = previous.text.rstrip()
    short = len(last.split()) <= _SHORT_LAST_LINE_WORDS and not last.endswith(("-", ","))
    return previous.heading_level > 0 or short or last.endswith((".", ":", "!", "?", '."', ';"'))


def _continues_the_word(previous: Line, line: Line) -> bool:
    """``previous`` ends in a hyphen after a letter and ``line`` goes on in lower case, in the
    same paragraph (or over a page break)."""
    if previous.heading_level or line.heading_level:
        return False
    if line.page == previous.page and line.new_paragraph:
        return False
    return bool(re.search(r"[^\W\d_]-$", previous.text)) and line.text[:1].islower()


def _hyphen_joined(previous_text: str, text: str, words: Counter[str]) -> str:
    head = re.search(r"([^\W\d_]+)-$", previous_text)
    tail = re.match(r"[^\W\d_]+", text)
    first, second = (head.group(1) if head else ""), (tail.group(0) if tail else "")
    keep = words[f"{first}-{second}".lower()] > 0 or (
        words[f"{first}{second}".lower()] == 0
        and (first.lower() in _COMPOUND_PREFIXES or first[:1].isupper())
    )
    return previous_text[:-1] + ("-" if keep else "") + text
