"""Heading detection for the structural builder (pure, no Django).

Markdown (ATX and setext), bold lines, "Label:" lines, attachments ("EXHIBIT A"), and numbered /
ARTICLE / Section clauses, inline or not (``numbered_headings``). Running page headers and
headings without a body of their own are dropped or merged; the top headings at the very start
title the document.
"""

from __future__ import annotations

import re
from collections import Counter

from documents.ingestion.heading_titles import Heading, clean_title, is_titleish, word_set
from documents.ingestion.numbered_headings import (
    LINE,
    NUMBERED,
    drop_tables_of_contents,
    numbered_candidates,
    validated_numbering,
)

_ATX = re.compile(r"^ {0,3}(#{1,6})[ \t]+(.*?)[ \t#]*$")
_SETEXT_RULE = re.compile(r"^ {0,3}(=+|-+)[ \t]*$")
_BOLD_LINE = re.compile(r"^\s*(\*\*|__)(?P<inner>[^*_\n]{1,100}?)\1\s*:?\s*\\?\s*$")
_LABEL_LINE = re.compile(r"^\s*(?P<inner>[A-Z][^:\n]{0,60}?)\s*:\s*$")
_APPENDIX_WORDS = word_set("EXHIBIT SCHEDULE ANNEX APPENDIX ADDENDUM ATTACHMENT")
_MARKDOWN_RANK = -100.0  # markdown levels sit above every other kind of heading
_APPENDIX_RANK = 5.0  # an exhibit closes the last numbered section of the body
_BOLD_RANK = 50.0
_LABEL_RANK = 60.0
_FILING_LABEL = re.compile(r"(?i)(?:exhibit|ex-?)\s*[\d.()a-z-]{1,12}")
_CAPITALS_LINE = re.compile(r"[A-Z][A-Z &,'\u2019/-]*[A-Z][:.]?")
_TITLE_ZONE_CHARS = 1000  # how far down the first page a PDF's title may stand
# A paragraph's own title: capitalised words (small ones between), a period, then its sentence.
_RUN_IN_TITLE = re.compile(
    r"(?:^|(?<=\n\n))(?P<title>[A-Z][\w'\u2019&/-]*(?:[ ](?:[A-Z][\w'\u2019&/-]*|of|and|or|the|to|for|in|on|by|"
    r"with|a|an|from)){0,7})\.[ \t]+(?=[A-Z\"(])"
)
# Sentence openers that take a period after one capitalised word ("Inc. The", "No. 5" never
# reach here: they are not at a paragraph's start).
_RUN_IN_OPENERS = word_set("The This These That Each If Any All No In Such It We You Notwithstanding")
_RUN_IN_RANK = 15.75  # under the numbered levels and "A.", above "(a)"
_RUN_IN_MINIMUM = 3
_FONT_RANK = 0.0
_FONT_LEVEL_STEP = 0.01  # set by _rank_font_headings once the numbering is known


def detect_headings(
    text: str, *, font_heading_starts: frozenset[int] = frozenset()
) -> tuple[list[Heading], list[Heading]]:
    """The headings that title the document itself, and the others, in document order.

    ``font_heading_starts``: where the markdown heading lines are that extraction wrote from a
    PDF's fonts (a larger or bold line), not from an author's markup. Their ``#`` levels are a
    guess: bold run-in "Section 2.1" lines and plain "ARTICLE II" lines disagree with the
    numbering. So a numbered one takes its level from its numbering like any numbered clause,
    and an unnumbered one ("RECITALS", "BACKGROUND") stands beside the top numbered level.
    """
    line_headings, claimed, labels = _line_headings(text, font_heading_starts)
    appendix_starts = [heading.start for heading in line_headings if heading.family == "appendix"]
    numbered = validated_numbering(text, numbered_candidates(text, claimed), restarts=appendix_starts)
    _rank_font_headings(line_headings, numbered)
    taken = claimed | {heading.start for heading in numbered}
    headings = sorted(
        line_headings + numbered + _run_in_titles(text, taken), key=lambda heading: heading.start
    )
    title_headings, headings = _split_document_title(text, _dedupe(headings))
    if not headings and len(labels) >= 3:
        headings = [label for label in labels if label.start not in {h.start for h in title_headings}]
    return title_headings, _merge_empty_headings(text, headings)


def _line_headings(
    text: str, font_heading_starts: frozenset[int]
) -> tuple[list[Heading], set[int], list[Heading]]:
    """Markdown, setext, bold and label lines; also the line starts they claim.

    A font-guessed markdown line that is numbered is left to the numbered headings."""
    lines = [(match.start(), match.end()) for match in LINE.finditer(text)]
    found: list[Heading] = []
    bold: list[Heading] = []
    labels: list[Heading] = []
    appendices: list[Heading] = []
    claimed: set[int] = set()
    for index, (start, end) in enumerate(lines):
        line = text[start:end]
        content_start = start + len(line) - len(line.lstrip())
        atx = _ATX.match(line)
        next_line = text[lines[index + 1][0] : lines[index + 1][1]] if index + 1 < len(lines) else ""
        if atx and atx.group(2).strip() and content_start in font_heading_starts:
            if _over_a_signature(next_line):
                claimed.add(content_start)  # "ACME CORPORATION" in bold above "By: ____"
                continue
            # A bold sentence ("THIS AGREEMENT dated for reference the 5th day of ...") is
            # emphasis; a heading reads like a title.
            inner = atx.group(2).strip(" *_")
            appendix = _appendix_title(line, content_start)
            if appendix:  # "SCHEDULE 1 SPONSORSHIP RIGHTS" in bold: numbers its clauses anew
                appendices.append(Heading(content_start, end, _APPENDIX_RANK, appendix, family="appendix"))
                claimed.add(content_start)
            elif not NUMBERED.match(inner) and is_titleish(inner, max_words=14):
                found.append(
                    Heading(
                        content_start,
                        end,
                        _FONT_RANK,
                        clean_title(atx.group(2)),
                        family="font",
                        markup_level=len(atx.group(1)),
                    )
                )
                claimed.add(content_start)
            continue
        if atx and atx.group(2).strip():
            found.append(
                Heading(content_start, end, _MARKDOWN_RANK + len(atx.group(1)), clean_title(atx.group(2)))
            )
            claimed.add(content_start)
            continue
        adjacent = index + 1 < len(lines) and text.count("\n", end, lines[index + 1][0]) <= 1
        rule = _SETEXT_RULE.match(next_line)
        if rule and adjacent and is_titleish(line.strip(), max_words=15) and not _SETEXT_RULE.match(line):
            level = 1 if rule.group(1).startswith("=") else 2
            found.append(
                Heading(content_start, lines[index + 1][1], _MARKDOWN_RANK + level, clean_title(line))
            )
            claimed.add(content_start)
            continue
        bold_match = _BOLD_LINE.match(line)
        if bold_match and not NUMBERED.match(bold_match.group("inner").strip()):
            inner = bold_match.group("inner")
            if is_titleish(inner, max_words=14):
                bold.append(Heading(content_start, end, _BOLD_RANK, clean_title(inner), family="bold"))
            claimed.add(content_start)  # "**v.**" is no heading, but no numbered clause either
            continue
        appendix = _appendix_title(line, content_start)
        if appendix:
            heading = Heading(content_start, end, _APPENDIX_RANK, appendix, family="appendix")
            if index + 1 < len(lines) and _titles_the_attachment(text, heading, lines[index + 1]):
                below = lines[index + 1]
                heading.title = clean_title(f"{appendix} {text[below[0] : below[1]]}")
                heading.title_end = below[1]
                claimed.add(below[0])
            appendices.append(heading)
            claimed.add(content_start)
            continue
        previous_line = text[lines[index - 1][0] : lines[index - 1][1]] if index else ""
        if _is_capitals_heading(text, start, end, next_line, previous_line):
            found.append(Heading(content_start, end, _FONT_RANK, clean_title(line), family="caps"))
            claimed.add(content_start)
            continue
        label = _LABEL_LINE.match(line)
        if label and next_line.strip() and is_titleish(label.group("inner"), max_words=8):
            labels.append(
                Heading(content_start, end, _LABEL_RANK, clean_title(label.group("inner")), family="label")
            )
    # A lone bold line is emphasis, not structure; "Label:" lines (forms, medical records) are
    # the last resort, because contracts are full of "ADDRESS:" and "By:" lines.
    # "EXECUTION COPY" atop every page is a running header, not a part of the document.
    found = [heading for heading in found if heading.family != "caps"] + _drop_repeated(
        [heading for heading in found if heading.family == "caps"]
    )
    found += bold if len(bold) >= 2 else []
    found += drop_tables_of_contents(_drop_repeated(appendices))
    return found, claimed, labels


def _run_in_titles(text: str, taken: set[int]) -> list[Heading]:
    """ "Grant of License. LMG grants ...": paragraphs that open with a short title of their own
    and no number (a PDF that lost its automatic numbering prints them so). Only where the
    document does it again and again: one such paragraph is a sentence, not structure."""
    found = []
    for match in _RUN_IN_TITLE.finditer(text):
        start = match.start("title")
        title = match.group("title")
        first_word = title.split()[0]
        if start in taken or len(first_word) < 2 or first_word in _RUN_IN_OPENERS:
            continue  # "B. Should the Agreement ...": a lettered clause (see numbered_headings)
        if not is_titleish(title, max_words=8):
            continue
        found.append(Heading(start, match.end("title") + 1, _RUN_IN_RANK, clean_title(title), family="runin"))
    return found if len(found) >= _RUN_IN_MINIMUM else []


def _titles_the_attachment(text: str, heading: Heading, below: tuple[int, int]) -> bool:
    """ "EXHIBIT A" / "PAYMENTS AND EXCLUSIVITY": a bare attachment label, and right under it a
    short title line (not the first sentence of its text)."""
    if len(heading.title.split()) > 2 or text.count("\n", heading.title_end, below[0]) > 2:
        return False
    line = text[below[0] : below[1]].strip(" \t*_#")
    if NUMBERED.match(line) or _appendix_title(line, below[0]):
        return False  # "3. HOSTING SERVICES" under the last line of a list of appendices
    return bool(line) and line[-1] not in ".;," and is_titleish(line, max_words=10)


def _is_capitals_heading(text: str, start: int, end: int, next_line: str, previous_line: str) -> bool:
    """ "RECITALS", "PRELIMINARY STATEMENT", "TERMS AND CONDITIONS": a short line in capitals,
    set apart by a blank line above it, with text under it; not a party's name over a signature
    ("ACME CORPORATION" above "By: ____")."""
    line = text[start:end].strip()
    words = line.rstrip(":.").split()
    if not (1 <= len(words) <= 6) or not _CAPITALS_LINE.fullmatch(line) or words[0] in _APPENDIX_WORDS:
        return False  # an attachment's title is read as one (see _appendix_title), or not at all
    if line.rstrip(":.") in ("CONTENTS", "TABLE OF CONTENTS"):
        return False  # the contents list's own label (its lines are dropped as contents)
    previous = previous_line.strip()  # the line above (blank lines are no lines); never text[:start]
    if previous and len(previous.split()) <= 2 and NUMBERED.match(f"{previous} "):
        return False  # "ARTICLE I" / "INTERPRETATION": the title of the number above it
    blank_above = start == 0 or text[max(0, start - 2) : start] == "\n\n"
    following = next_line.strip()
    return (
        blank_above
        and bool(following)
        and not _over_a_signature(following)
        and not NUMBERED.match(f"{line} ")
    )


def _over_a_signature(next_line: str) -> bool:
    """The line under a party's name in a signature block ("By: ____", "Name:", "/s/ ...")."""
    following = next_line.strip()
    # A blank to sign on ("Signature: ________"), not a blank inside a sentence ("January ___, 2016").
    blank = "__" in following and len(following.split()) <= 4
    return following.startswith(("By", "_", "Name:", "Title:", "/s/")) or blank


def _rank_font_headings(line_headings: list[Heading], numbered: list[Heading]) -> None:
    """Unnumbered font headings take the top numbered level (they are the contract's other
    top-level parts: "RECITALS", "BACKGROUND", "EXHIBIT A"); with no numbering they keep the
    rank of a first-level markdown heading."""
    top = min((heading.rank for heading in numbered), default=_MARKDOWN_RANK + 1)
    # Smaller fonts below larger ones ("Purpose of This Handbook" under "Introduction"), all of
    # them above the next numbered level.
    levels = [heading.markup_level for heading in line_headings if heading.family == "font"]
    base = min(levels, default=0)
    for heading in line_headings:
        if heading.family in ("font", "caps"):
            heading.rank = top + _FONT_LEVEL_STEP * max(0, heading.markup_level - base)


def _drop_repeated(headings: list[Heading]) -> list[Heading]:
    """The same attachment title three times is a running page header, not three attachments."""
    seen = Counter(heading.title.lower() for heading in headings)
    return [heading for heading in headings if seen[heading.title.lower()] < 3]


def _appendix_title(line: str, position: int) -> str:
    """ "EXHIBIT A", "Schedule 2 Territory", "PREMIER RESELLER ADDENDUM": the attachments that
    follow the body of a contract, each a section of its own."""
    stripped = line.strip(" \t*#_")
    words = stripped.split()
    if not words or len(words) > 12:
        return ""
    if position < 300 or (re.match(r"(?i)ex(hibit|-)\s*\d+[.(]", stripped) and len(words) <= 2):
        return ""  # "Exhibit 10.38": the SEC filing's exhibit number, atop the text or on every page
    keyword_first = words[0] in _APPENDIX_WORDS or (
        words[0].upper() in _APPENDIX_WORDS and words[0].istitle()
    )
    if keyword_first and (len(words) == 1 or re.match(r"^(?:[A-Z]|[0-9IVX][\w.()-]*)[:.]?$", words[1])):
        return clean_title(stripped)
    if stripped.isupper() and len(words) <= 8 and any(word in _APPENDIX_WORDS for word in words):
        return clean_title(stripped)
    return ""


def _dedupe(headings: list[Heading]) -> list[Heading]:
    unique: list[Heading] = []
    for heading in headings:
        if unique and unique[-1].start == heading.start:
            if heading.rank < unique[-1].rank:
                unique[-1] = heading
            continue
        unique.append(heading)
    return unique


def _merge_empty_headings(text: str, headings: list[Heading]) -> list[Heading]:
    """Drop headings with no body of their own.

    An empty heading before a sibling joins it ("Physical Examination:" + "General Condition:"
    keeps the outer title; a title block of bold lines becomes one heading); an empty heading
    before a higher-ranked one is not structure at all, and its line joins the text before it.
    A part's own heading line in a contract ("AGREEMENT" right before "1. Definitions") is a part
    of its own, however empty: joined, it would bury the next heading.
    """
    kept: list[Heading] = []
    for heading in reversed(headings):
        following = kept[-1] if kept else None
        body = text[heading.title_end : following.start if following else len(text)]
        # "Section 3. [Reserved.]" before "Section 4. Fees": a numbered part of its own too.
        titled_number = bool(heading.path) and bool(heading.title)
        standing = (
            (heading.family in ("font", "caps", "appendix") or titled_number)
            and following is not None
            and bool(following.title)
        )
        if following is None or following.rank > heading.rank or re.search(r"\w", body) or standing:
            kept.append(heading)
        elif following.rank == heading.rank:
            following.start = heading.start
            # "Physical Examination:" names what follows; "1." does not, and an untitled "16."
            # under "COMPENSATION" takes the heading's name.
            if not following.path or not following.title:
                following.title = heading.title or following.title
    return kept[::-1]


def _split_document_title(text: str, headings: list[Heading]) -> tuple[list[Heading], list[Heading]]:
    """Top headings at the very start title the document rather than a section: "# Manual", or
    "# Bayside Court" + "## Criminal Case Judgment" above "###" parts, or "**Hospitalization
    Record**" right before "**Basic Information:**"."""
    titles: list[Heading] = []
    cursor = 0
    while headings:
        first, rest = headings[0], headings[1:]
        before = text[cursor : first.start]
        # Above a PDF's title may stand the filing's label ("Exhibit 10.1", "EX-99.4") and a
        # legend ("Confidential treatment requested ..."): a few lines, no part of the document.
        front_matter = (
            first.family in ("font", "caps")
            and first.start < _TITLE_ZONE_CHARS
            and (
                (bool(titles) and all(_FILING_LABEL.fullmatch(title.title) for title in titles))
                or bool(_FILING_LABEL.fullmatch(before.strip().split("\n", 1)[0].strip(" #*")))
            )
        )
        if first.family not in ("", "bold", "font", "caps") or (
            re.search(r"\w", before) and not front_matter
        ):
            break
        empty_body = bool(rest) and not re.search(r"\w", text[first.title_end : rest[0].start])
        # A PDF's first line in a larger or bold font, before any text, is the title of the
        # document ("STRATEGIC ALLIANCE AGREEMENT"), never its first section.
        unique_top = first.family in ("font", "caps") or all(heading.rank > first.rank for heading in rest)
        if not (unique_top or (empty_body and all(heading.rank >= first.rank for heading in rest))):
            break
        titles.append(first)
        headings, cursor = rest, first.title_end
        if first.family in ("font", "caps") and _FILING_LABEL.fullmatch(first.title):
            continue  # "Exhibit 10.14" in bold above the title: the title is the next line
        if not empty_body or first.family in ("font", "caps"):
            break  # the font says which line is the title; the lines below it are the preamble
    return titles, headings
