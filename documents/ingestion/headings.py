"""Heading detection for the structural builder (pure, no Django).

Markdown (ATX and setext), bold lines, "Label:" lines, attachments ("EXHIBIT A"), and numbered /
ARTICLE / Section clauses, inline or not (``numbered_headings``). Running page headers and
headings without a body of their own are dropped or merged; the top headings at the very start
title the document.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property

from documents.ingestion.heading_titles import SMALL_WORDS, Heading, clean_title, is_titleish, word_set
from documents.ingestion.numbered_headings import (
    LINE,
    NUMBERED,
    drop_tables_of_contents,
    numbered_candidates,
    validated_numbering,
)

# The closing "#" run counts only after a blank: "## C# Basics" keeps its "#".
_ATX = re.compile(r"^ {0,3}(#{1,6})[ \t]+(.*?)(?:[ \t]+#+)?[ \t]*$")
_SETEXT_RULE = re.compile(r"^ {0,3}(=+|-+)[ \t]*$")
_BOLD_LINE = re.compile(r"^\s*(\*\*|__)(?P<inner>[^*_\n]{1,100}?)\1\s*:?\s*\\?\s*$")
_LABEL_LINE = re.compile(r"^\s*(?P<inner>[A-Z][^:\n]{0,60}?)\s*:\s*$")
_APPENDIX_WORDS = word_set("EXHIBIT SCHEDULE ANNEX APPENDIX ADDENDUM ATTACHMENT")
# Three or more spaces inside a line: where a plain-text conversion put a line break of the print.
_WIDE_GAP = re.compile(r"[ \t\u00a0]{3,}")
_MARKDOWN_RANK = -100.0  # markdown levels sit above every other kind of heading
_APPENDIX_RANK = 5.0  # an exhibit closes the last numbered section of the body
_BOLD_RANK = 50.0
_LABEL_RANK = 60.0
# A "Label:" line right under a thematic break opens a part of the document: beside an exhibit,
# above the numbered clauses inside it.
_PART_LABEL_RANK = _APPENDIX_RANK
_THEMATIC_BREAK = re.compile(r"(?:-[ \t]*){3,}|(?:\*[ \t]*){3,}|(?:_[ \t]*){3,}")
_FILING_LABEL = re.compile(r"(?i)(?:exhibit|ex-?)\s*[\d.()a-z-]{1,12}")
_CAPITALS_LINE = re.compile(r"[A-Z][A-Z &,'\u2019/-]*[A-Z][:.]?")
_TITLE_ZONE_CHARS = 1000  # how far down the first page a PDF's title may stand
FRONT_MATTER = "front"  # the family of the lines above a title (``_front_matter_above``)
# Legends that may stand above a title, no part of the document: a version ("Execution Version",
# "Conformed Copy") and a confidentiality legend ("CONFIDENTIAL TREATMENT REQUESTED ...", alone or
# on the filing label's line), not a title that opens with the word ("Confidential Information
# and Invention Assignment Agreement").
_VERSION_LEGEND = re.compile(r"(?i)(?:execution|conformed|composite|final|signature)\s+(?:version|copy)")
_CONFIDENTIAL_LEGEND = re.compile(r"(?i)confidential(?:\s+treatment\b.*|\s*[-\u2013\u2014:].*)?")
# A document's title in plain capitals on its first line can be longer than a section's heading
# ("BROKER DEALER MARKETING AND SERVICING AGREEMENT FOR VARIABLE ANNUITY CONTRACTS").
_CAPITALS_TITLE_MAX_WORDS = 16
# A paragraph's own title: capitalised words (small ones between, a comma after one: "Binding
# Nature, Assignment, and Subcontracting"), a period, then its sentence (or its line's end).
_RUN_IN_TITLE = re.compile(
    r"(?:^|(?<=\n\n))(?P<title>[A-Z][\w'\u2019&/-]*(?:,?[ ](?:[A-Z][\w'\u2019&/-]*|of|and|or|the|to|for|in|on|by|"
    r"with|a|an|from)){0,7})\.(?:[ \t]+(?=[A-Z\"(])|(?=\n))"
)
# Sentence openers that take a period after one capitalised word ("Inc. The", "No. 5" never
# reach here: they are not at a paragraph's start).
_RUN_IN_OPENERS = word_set("The This These That Each If Any All No In Such It We You Notwithstanding")
_RUN_IN_RANK = 15.75  # under the numbered levels and "A.", above "(a)"
_RUN_IN_MINIMUM = 3
_ABBREVIATION_CHARS = 3  # "Inc.", "Ltd.", "B.": a period after so short a word may be an abbreviation's
_FONT_RANK = 0.0
# A numbered font line of at most this many words, none of a sentence's, is titled by the line.
_FONT_TITLE_WORDS = 12
_SENTENCE_WORDS = word_set("shall will may must is are was were has have agrees means")
_FONT_LEVEL_STEP = 0.01  # set by _rank_font_headings once the numbering is known
# "G1.1": a schedule's code ("G1", as in "Section G1:") and a number under it.
_SUB_CODE = re.compile(r"(?P<parent>[A-Z]{1,3}\d{1,2})\.\d{1,2}\b")


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
    _title_numbered_font_lines(text, numbered, font_heading_starts)
    _rank_font_headings(line_headings, numbered)
    _rank_coded_font_headings(line_headings, numbered)
    taken = claimed | {heading.start for heading in numbered}
    headings = sorted(
        line_headings + numbered + _run_in_titles(text, taken), key=lambda heading: heading.start
    )
    title_headings, headings = _split_document_title(text, _dedupe(headings))
    if not headings and len(labels) >= 3:
        headings = [label for label in labels if label.start not in {h.start for h in title_headings}]
    return title_headings, _merge_empty_headings(text, headings)


@dataclass(frozen=True)
class _Line:
    """One line of the text and its neighbours, as the line readers see it."""

    text: str
    lines: list[tuple[int, int]]
    index: int
    font_heading_starts: frozenset[int]

    @property
    def start(self) -> int:
        return self.lines[self.index][0]

    @property
    def end(self) -> int:
        return self.lines[self.index][1]

    @cached_property
    def line(self) -> str:
        return self.text[self.start : self.end]

    @cached_property
    def content_start(self) -> int:
        return self.start + len(self.line) - len(self.line.lstrip())

    @cached_property
    def below(self) -> tuple[int, int] | None:
        return self.lines[self.index + 1] if self.index + 1 < len(self.lines) else None

    @cached_property
    def next_line(self) -> str:
        below = self.below
        return self.text[below[0] : below[1]] if below else ""

    @cached_property
    def previous_line(self) -> str:
        return self.text[self.lines[self.index - 1][0] : self.lines[self.index - 1][1]] if self.index else ""


@dataclass
class _LineFinds:
    """What the line readers found, by kind, and the line starts they claimed."""

    found: list[Heading] = field(default_factory=list)
    bold: list[Heading] = field(default_factory=list)
    labels: list[Heading] = field(default_factory=list)
    appendices: list[Heading] = field(default_factory=list)
    claimed: set[int] = field(default_factory=set)


def _line_headings(
    text: str, font_heading_starts: frozenset[int]
) -> tuple[list[Heading], set[int], list[Heading]]:
    """Markdown, setext, bold and label lines; also the line starts they claim.

    A font-guessed markdown line that is numbered is left to the numbered headings."""
    lines = [(match.start(), match.end()) for match in LINE.finditer(text)]
    finds = _LineFinds()
    for index in range(len(lines)):
        line = _Line(text, lines, index, font_heading_starts)
        # The first reader that takes a line has it: their order is their precedence.
        any(read(line, finds) for read in _LINE_READERS)
    # A lone bold line is emphasis, not structure; "Label:" lines (forms, medical records) are
    # the last resort, because contracts are full of "ADDRESS:" and "By:" lines.
    # "EXECUTION COPY" atop every page is a running header, not a part of the document.
    found = [heading for heading in finds.found if heading.family != "caps"] + _drop_repeated(
        [heading for heading in finds.found if heading.family == "caps"]
    )
    found += finds.bold if len(finds.bold) >= 2 else []
    found += drop_tables_of_contents(_drop_repeated(finds.appendices))
    return found, finds.claimed, finds.labels


def _markdown_title(line: _Line) -> re.Match[str] | None:
    """The ``#`` line with a title, if ``line`` is one."""
    atx = _ATX.match(line.line)
    return atx if atx and atx.group(2).strip() else None


def _read_font_line(line: _Line, finds: _LineFinds) -> bool:
    """A ``#`` line extraction wrote from a PDF's fonts: a title, an attachment, or neither."""
    atx = _markdown_title(line)
    if not atx or line.content_start not in line.font_heading_starts:
        return False
    content_start = line.content_start
    if content_start in finds.claimed:
        return True  # "SCHEDULE 3" / "JURISDICTIONS ...": the title of the attachment above it
    if _over_a_signature(line.next_line):
        finds.claimed.add(content_start)  # "ACME CORPORATION" in bold above "By: ____"
        return True
    # A bold sentence ("THIS AGREEMENT dated for reference the 5th day of ...") is
    # emphasis; a heading reads like a title.
    inner = atx.group(2).strip(" *_")
    appendix = _appendix_title(line.line, content_start)
    if appendix:  # "SCHEDULE 1 SPONSORSHIP RIGHTS" in bold: numbers its clauses anew
        finds.appendices.append(Heading(content_start, line.end, _APPENDIX_RANK, appendix, family="appendix"))
        finds.claimed.add(content_start)
    elif not NUMBERED.match(inner) and is_titleish(inner, max_words=14):
        heading = Heading(
            content_start,
            line.end,
            _FONT_RANK,
            clean_title(atx.group(2)),
            family="font",
            markup_level=len(atx.group(1)),
        )
        finds.found.append(heading)
        finds.claimed.add(content_start)
    return True


def _read_markdown_line(line: _Line, finds: _LineFinds) -> bool:
    atx = _markdown_title(line)
    if not atx:
        return False
    rank = _MARKDOWN_RANK + len(atx.group(1))
    finds.found.append(Heading(line.content_start, line.end, rank, clean_title(atx.group(2))))
    finds.claimed.add(line.content_start)
    return True


def _read_setext_line(line: _Line, finds: _LineFinds) -> bool:
    """A title line underlined by ``===`` or ``---`` on the very next line."""
    below = line.below
    if below is None:
        return False
    adjacent = line.text.count("\n", line.end, below[0]) <= 1
    rule = _SETEXT_RULE.match(line.next_line)
    if not (rule and adjacent and is_titleish(line.line.strip(), max_words=15)) or _SETEXT_RULE.match(
        line.line
    ):
        return False
    level = 1 if rule.group(1).startswith("=") else 2
    finds.found.append(Heading(line.content_start, below[1], _MARKDOWN_RANK + level, clean_title(line.line)))
    finds.claimed.add(line.content_start)
    return True


def _read_bold_line(line: _Line, finds: _LineFinds) -> bool:
    bold_match = _BOLD_LINE.match(line.line)
    if not bold_match or NUMBERED.match(bold_match.group("inner").strip()):
        return False
    inner = bold_match.group("inner")
    if is_titleish(inner, max_words=14):
        finds.bold.append(
            Heading(line.content_start, line.end, _BOLD_RANK, clean_title(inner), family="bold")
        )
    finds.claimed.add(line.content_start)  # "**v.**" is no heading, but no numbered clause either
    return True


def _read_appendix_line(line: _Line, finds: _LineFinds) -> bool:
    appendix, title_end = _appendix_title(line.line, line.content_start), line.end
    if not appendix:
        appendix, title_end = _appendix_run_in(line)
    if not appendix:
        return False
    heading = Heading(line.content_start, title_end, _APPENDIX_RANK, appendix, family="appendix")
    below = line.below
    if title_end == line.end and below is not None and _titles_the_attachment(line.text, heading, below):
        heading.title = clean_title(f"{appendix} {line.text[below[0] : below[1]]}")
        heading.title_end = below[1]
        finds.claimed.add(below[0])
    finds.appendices.append(heading)
    finds.claimed.add(line.content_start)
    return True


def _read_capitals_line(line: _Line, finds: _LineFinds) -> bool:
    if not _is_capitals_heading(line.text, line.start, line.end, line.next_line, line.previous_line):
        return False
    finds.found.append(
        Heading(line.content_start, line.end, _FONT_RANK, clean_title(line.line), family="caps")
    )
    finds.claimed.add(line.content_start)
    return True


def _read_label_line(line: _Line, finds: _LineFinds) -> bool:
    label = _LABEL_LINE.match(line.line)
    if label and line.next_line.strip() and is_titleish(label.group("inner"), max_words=8):
        inner = clean_title(label.group("inner"))
        if _after_a_thematic_break(line):
            # "---" then "Judgment Result:": the rule ends a part and the label names the next,
            # whatever else the document numbers ("1. Confiscated Equipment:" lists inside).
            finds.found.append(Heading(line.content_start, line.end, _PART_LABEL_RANK, inner, family="part"))
            finds.claimed.add(line.content_start)
        else:
            finds.labels.append(Heading(line.content_start, line.end, _LABEL_RANK, inner, family="label"))
    return True


def _after_a_thematic_break(line: _Line) -> bool:
    """The line's nearest non-blank line above is a thematic break ("---", "***", "___")."""
    # Walked by index: a slice of the lines above, per label line, is quadratic in a form with
    # thousands of "Label:" lines.
    for index in range(line.index - 1, -1, -1):
        start, end = line.lines[index]
        above = line.text[start:end].strip()
        if above:
            return bool(_THEMATIC_BREAK.fullmatch(above))
    return False


_LINE_READERS: tuple[Callable[[_Line, _LineFinds], bool], ...] = (
    _read_font_line,
    _read_markdown_line,
    _read_setext_line,
    _read_bold_line,
    _read_appendix_line,
    _read_capitals_line,
    _read_label_line,
)


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
        if not is_titleish(title, max_words=8) or _abbreviation_alone(match):
            continue
        found.append(Heading(start, match.end("title") + 1, _RUN_IN_RANK, clean_title(title), family="runin"))
    return found if len(found) >= _RUN_IN_MINIMUM else []


def _abbreviation_alone(match: re.Match[str]) -> bool:
    """A period that may close an abbreviation, not a title: a short last word alone on its line
    ("Andrew B."), or after a comma ("ACME GROUP, INC. By: ...")."""
    words = match.group("title").split()
    if len(words[-1]) > _ABBREVIATION_CHARS:
        return False
    alone = match.end() == match.end("title") + 1
    return alone or (len(words) > 1 and words[-2].endswith(","))


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
    if not _is_capitals_title(line):
        return False
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


def _is_capitals_title(line: str) -> bool:
    """A short line in capitals that is neither an attachment's title nor the contents' label."""
    words = line.rstrip(":.").split()
    if not (1 <= len(words) <= 6) or not _CAPITALS_LINE.fullmatch(line) or words[0] in _APPENDIX_WORDS:
        return False  # an attachment's title is read as one (see _appendix_title), or not at all
    # The contents list's own label (its lines are dropped as contents).
    return line.rstrip(":.") not in ("CONTENTS", "TABLE OF CONTENTS")


def _over_a_signature(next_line: str) -> bool:
    """The line under a party's name in a signature block ("By: ____", "Name:", "/s/ ...")."""
    following = next_line.strip()
    # A blank to sign on ("Signature: ________"), not a blank inside a sentence ("January ___, 2016").
    blank = "__" in following and len(following.split()) <= 4
    return following.startswith(("By", "_", "Name:", "Title:", "/s/")) or blank


def _title_numbered_font_lines(
    text: str, numbered: list[Heading], font_heading_starts: frozenset[int]
) -> None:
    """A numbered line the font sets apart as a heading ("## 9.1 Development costs & prices for
    Hosting Services", "## 12. Laboratory Controls-N/A") is titled by the whole line, though its
    words alone do not read as a title: the font says it is one. Not a sentence set in bold."""
    for heading in numbered:
        if heading.title or heading.start not in font_heading_starts:
            continue
        line_end = text.find("\n", heading.start)
        line_end = len(text) if line_end < 0 else line_end
        line = text[heading.start : line_end].strip(" \t#*_")
        if _reads_as_a_heading_line(line):
            heading.title, heading.title_end = clean_title(line), line_end


def _reads_as_a_heading_line(line: str) -> bool:
    """A number and a few words, none a sentence's, mostly capitalised; no list item's "," or ";"."""
    words = line.split()
    return (
        2 <= len(words) <= _FONT_TITLE_WORDS
        and not line.endswith((",", ";"))
        and not any(word.lower() in _SENTENCE_WORDS for word in words)
        and _capitalised(line)
    )


def _capitalised(line: str) -> bool:
    """Half the words after the number at least start with a capital ("Development costs &
    prices for Hosting Services"), small words aside; not a sentence ("Ongoing scientific and
    medical support.")."""
    words = [word for word in re.findall(r"[^\W\d_][\w'\u2019/-]*", line) if word.lower() not in SMALL_WORDS]
    return (
        bool(words) and words[0][0].isupper() and 2 * sum(word[0].isupper() for word in words) >= len(words)
    )


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


def _rank_coded_font_headings(line_headings: list[Heading], numbered: list[Heading]) -> None:
    """ "G1.1 IT Service Category" under "Section G1: IT Services": a font heading whose code
    extends the code of a numbered part before it ("G1" + ".1") is a part of that part."""
    coded = {
        f"{heading.family.split(':', 1)[1]}{heading.path[0]}": heading
        for heading in numbered
        if heading.family.startswith("coded:") and len(heading.path) == 1
    }
    for heading in line_headings:
        code = _SUB_CODE.match(heading.title) if heading.family == "font" else None
        parent = coded.get(code.group("parent")) if code else None
        if parent is not None and parent.start < heading.start:
            heading.rank = parent.rank + _FONT_LEVEL_STEP


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
    if _opens_with_appendix_word(words) or _capitals_naming_an_appendix(stripped, words):
        return clean_title(stripped)
    return ""


def _appendix_run_in(line: _Line) -> tuple[str, int]:
    """ "Schedule A   List of Products ...": a plain text whose line breaks became runs of spaces
    (a contract converted from print) keeps the attachment's label as the first stretch of a
    line; the label alone is the heading, and where it ends. ("", 0) when the line has none."""
    rest = line.text[line.content_start : line.end]
    gap = _WIDE_GAP.search(rest)
    if gap is None or rest[gap.end() : gap.end() + 1].islower():
        return "", 0  # no gap, or a sentence broken after the word ("Schedule A   and ...")
    label = _appendix_title(rest[: gap.start()], line.content_start)
    return (label, line.content_start + gap.start()) if label and len(label.split()) <= 3 else ("", 0)


def _opens_with_appendix_word(words: list[str]) -> bool:
    """ "EXHIBIT A", "Schedule 2 Territory": the keyword, then nothing or a label."""
    keyword_first = words[0] in _APPENDIX_WORDS or (
        words[0].upper() in _APPENDIX_WORDS and words[0].istitle()
    )
    return keyword_first and (
        len(words) == 1 or bool(re.match(r"^(?:[A-Z]|[0-9IVX][\w.()-]*)[:.]?$", words[1]))
    )


def _capitals_naming_an_appendix(stripped: str, words: list[str]) -> bool:
    """ "PREMIER RESELLER ADDENDUM": a short line in capitals with the keyword anywhere."""
    return stripped.isupper() and len(words) <= 8 and any(word in _APPENDIX_WORDS for word in words)


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
        if following is None or _keeps_its_place(text, heading, following):
            kept.append(heading)
        elif following.rank == heading.rank:
            _join_the_sibling(heading, following)
    return kept[::-1]


def _keeps_its_place(text: str, heading: Heading, following: Heading) -> bool:
    """Whether ``heading`` stays a heading of its own before ``following``."""
    if following.rank > heading.rank or re.search(r"\w", text[heading.title_end : following.start]):
        return True
    # "Section 3. [Reserved.]" before "Section 4. Fees": a numbered part of its own too.
    titled_number = bool(heading.path) and bool(heading.title)
    return (heading.family in ("font", "caps", "appendix") or titled_number) and bool(following.title)


def _join_the_sibling(heading: Heading, following: Heading) -> None:
    following.start = heading.start
    # "Physical Examination:" names what follows; "1." does not, and an untitled "16."
    # under "COMPENSATION" takes the heading's name.
    if not following.path or not following.title:
        following.title = heading.title or following.title


def _split_document_title(text: str, headings: list[Heading]) -> tuple[list[Heading], list[Heading]]:
    """Top headings at the very start title the document rather than a section: "# Manual", or
    "# Bayside Court" + "## Criminal Case Judgment" above "###" parts, or "**Hospitalization
    Record**" right before "**Basic Information:**"."""
    titles: list[Heading] = []
    cursor = 0
    while headings:
        first, rest = headings[0], headings[1:]
        if not _opens_the_text(first, text[cursor : first.start], titles):
            break
        empty_body = bool(rest) and not re.search(r"\w", text[first.title_end : rest[0].start])
        if not _tops_the_rest(first, rest, empty_body=empty_body):
            break
        titles.append(first)
        headings, cursor = rest, first.title_end
        by_font = first.family in ("font", "caps")
        if by_font and _front_matter_line(first.title):
            continue  # "Exhibit 10.14" in bold above the title: the title is the next line
        if by_font:
            # The font says which line is the title; the lines in its type stacked right under it
            # (a company over the agreement's name, the parties on a cover page) are its block.
            block = _title_block(text, first, cursor, headings)
            titles += block
            headings = headings[len(block) :]
            break
        if not empty_body:
            break  # the lines below the title are the preamble
    return _with_front_matter(text, titles, headings)


def _title_block(text: str, title: Heading, cursor: int, headings: list[Heading]) -> list[Heading]:
    """The headings at the start of ``headings`` that are lines of ``title``'s block."""
    block: list[Heading] = []
    for following in headings:
        if not _in_the_title_block(text, title, cursor, following):
            break
        block.append(following)
        cursor = following.title_end
    return block


def _with_front_matter(
    text: str, titles: list[Heading], headings: list[Heading]
) -> tuple[list[Heading], list[Heading]]:
    """The title lines (a long first line in plain capitals when no heading titled the text),
    the front matter above them first; and the other headings."""
    if not titles and (plain := _plain_capitals_title(text, headings)) is not None:
        titles = [plain]
    if titles:
        titles = [*_front_matter_above(text, titles[0].start), *titles]
    return titles, headings


def _front_matter_above(text: str, title_start: int) -> list[Heading]:
    """The lines above the title (a filing's label and legends, accepted as such by
    ``_after_front_matter``), as title lines of family ``FRONT_MATTER``: they open the title's
    passage, not a passage or a section of their own."""
    lines: list[Heading] = []
    for found in LINE.finditer(text, 0, title_start):
        line = found.group()
        stripped = line.strip(" \t#*_")
        if re.search(r"\w", stripped):  # a rule ("---") stays what it was
            lines.append(
                Heading(
                    start=found.start() + len(line) - len(line.lstrip()),  # the markup's "#" included
                    title_end=found.start() + len(line.rstrip()),
                    rank=0.0,
                    title=stripped,
                    family=FRONT_MATTER,
                )
            )
    return lines


def title_of_document(title_headings: list[Heading]) -> str:
    """What the title lines say, front matter left out (unless there is nothing else)."""
    titles = [h.title for h in title_headings if h.family != FRONT_MATTER and not _front_matter_line(h.title)]
    return " \u2014 ".join(titles or [h.title for h in title_headings])


def _front_matter_line(line: str) -> bool:
    """A filing's label ("Exhibit 10.1", "EX-99.4"), alone or with a legend on its line, or a
    version or confidentiality legend: what stands above a title and is no part of the document."""
    line = line.strip(" \t#*_")
    if _VERSION_LEGEND.fullmatch(line) or _CONFIDENTIAL_LEGEND.fullmatch(line):
        return True
    label = _FILING_LABEL.match(line)
    if label is None or (label.end() < len(line) and not line[label.end()].isspace()):
        return False
    rest = line[label.end() :].strip(" \t-\u2013\u2014:")
    return not rest or bool(_VERSION_LEGEND.fullmatch(rest) or _CONFIDENTIAL_LEGEND.fullmatch(rest))


def _in_the_title_block(text: str, title: Heading, cursor: int, following: Heading) -> bool:
    """An unnumbered line in the title's own type and size right under it, no words between."""
    return (
        following.family == title.family
        and following.rank == title.rank
        and not following.label
        and following.start < _TITLE_ZONE_CHARS
        and not re.search(r"\w", text[cursor : following.start])
    )


def _plain_capitals_title(text: str, headings: list[Heading]) -> Heading | None:
    """A first line in capitals set in the body's font, a paragraph under it: the document's
    title, though longer than a heading in capitals may be. Front matter may stand above it."""
    found = _first_line_below_front_matter(text)
    if found is None:
        return None
    start, end = found
    line = text[start:end]
    if (
        not 2 <= len(line.split()) <= _CAPITALS_TITLE_MAX_WORDS
        or not _CAPITALS_LINE.fullmatch(line)
        or not re.match(r"[ \t]*\n[ \t]*\n", text[end:])  # a paragraph of its own under it, not its next line
        or NUMBERED.match(f"{line} ")
        or any(heading.start <= start < heading.title_end for heading in headings)
    ):
        return None
    return Heading(start=start, title_end=end, rank=0.0, title=clean_title(line), family="caps")


def _first_line_below_front_matter(text: str) -> tuple[int, int] | None:
    """Where the first line that is no front matter starts and ends (its blanks left out), if
    it starts on the first page."""
    for found in LINE.finditer(text, 0, _TITLE_ZONE_CHARS):
        stripped = found.group().strip()
        if stripped and not _front_matter_line(stripped):
            start = found.start() + found.group().index(stripped[0])
            return start, start + len(stripped)
    return None


def _opens_the_text(first: Heading, before: str, titles: list[Heading]) -> bool:
    """A heading of a kind that may title the document, with no text before it but front matter."""
    if first.family not in ("", "bold", "font", "caps"):
        return False
    return not re.search(r"\w", before) or _after_front_matter(first, before, titles)


def _after_front_matter(first: Heading, before: str, titles: list[Heading]) -> bool:
    """Above a PDF's title may stand the filing's label ("Exhibit 10.1", "EX-99.4") and a legend
    ("Confidential treatment requested ..."): a few lines, no part of the document."""
    if first.family not in ("font", "caps") or first.start >= _TITLE_ZONE_CHARS:
        return False
    if titles and all(_front_matter_line(title.title) for title in titles):
        return True
    return _only_front_matter(before)


def _only_front_matter(before: str) -> bool:
    """The filing's label, then anything (its legend, however worded); or only legends."""
    lines = [line for line in before.split("\n") if line.strip(" \t#*_")]
    if not lines:
        return False
    if _FILING_LABEL.fullmatch(lines[0].strip(" #*")):
        return True
    return all(_front_matter_line(line) for line in lines)


def _tops_the_rest(first: Heading, rest: list[Heading], *, empty_body: bool) -> bool:
    # A PDF's first line in a larger or bold font, before any text, is the title of the
    # document ("STRATEGIC ALLIANCE AGREEMENT"), never its first section.
    if first.family in ("font", "caps") or all(heading.rank > first.rank for heading in rest):
        return True
    return empty_body and all(heading.rank >= first.rank for heading in rest)
