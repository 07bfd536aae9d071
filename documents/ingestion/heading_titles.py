"""A detected heading, and the titles made from headings: cleaned, shortened, and the test for
"reads like a title" (pure, no Django)."""

from __future__ import annotations

import re
from dataclasses import dataclass

TITLE_CHARS = 80  # the longest node or document title, in characters
# The "#"-"######" that open a markdown heading line (extraction writes a PDF's, a Word file's and
# an HTML page's headings so, for the structural builder to read).
_HEADING_MARK = re.compile(r"(?m)^[ \t]{0,3}#{1,6}[ \t]+")


@dataclass
class Heading:
    """A detected heading: where its node starts, its outline rank and its display title."""

    start: int  # character offset of the marker; the heading's node starts here
    title_end: int  # end of the heading text (marker + title) in the document
    rank: float  # smaller is higher in the outline
    title: str  # cleaned for display; "" for a numbered clause without a title
    family: str = ""
    path: tuple[int, ...] = ()
    line_start: bool = True
    has_body: bool = True  # prose follows before the next numbered heading (not a contents line)
    label: str = ""  # the number of a numbered heading ("4.1", "ARTICLE IV")
    first_subclause: bool = False  # "2.1" right after the title of "2. SUPPLY", on its line
    markup_level: int = 0  # the "#" count extraction wrote for a heading it read from the font


def without_heading_marks(text: str) -> str:
    """``text`` as a person reads it: a heading line without its "##" (a passage shown in a
    list or a panel; the stored text keeps them, its offsets are the nodes')."""
    return _HEADING_MARK.sub("", text)


def word_set(text: str) -> frozenset[str]:
    """A word list written as one string, the way it reads."""
    return frozenset(text.split())


SMALL_WORDS = word_set("a an and as at by for in of on or the to with from into under upon its")


# A word of a title: a letter, then word characters, apostrophes and hyphens ("Buyer's", "Co-Op").
_TITLE_WORD = re.compile(r"[^\W\d_][\w'\u2019-]*")
# What a title may open with besides a capital or a digit: a bracket or a quote ("(a) Scope").
_TITLE_OPENERS = "[(\"'\u201c"
# The small words a title never ends on ("Terms of", "Supply and"): all but "in" and "on".
_OPEN_ENDINGS = SMALL_WORDS - {"in", "on"}


def is_titleish(candidate: str, *, max_words: int, min_ratio: float = 0.75) -> bool:
    """Short, and mostly capitalised words: a heading, not the first words of a sentence."""
    words = _TITLE_WORD.findall(candidate)
    if not words or not _title_sized(candidate, max_words) or not _opens_like_title(candidate):
        return False
    content = [word for word in words if word.lower() not in SMALL_WORDS]
    if not content:
        return False
    return _capitalised_share(content) >= min_ratio and not _ends_open(candidate, words)


def _title_sized(candidate: str, max_words: int) -> bool:
    return len(candidate.split()) <= max_words and len(candidate) <= 100


def _opens_like_title(candidate: str) -> bool:
    first = candidate[0]
    return first.isupper() or first.isdigit() or first in _TITLE_OPENERS


def _capitalised_share(words: list[str]) -> float:
    return sum(1 for word in words if word[0].isupper()) / len(words)


def _ends_open(candidate: str, words: list[str]) -> bool:
    """Ends on a small word ("Terms of"), not on a number after it ("Priorities for 2024")."""
    last = candidate.split()[-1].strip(".,:;)")
    return words[-1].lower() in _OPEN_ENDINGS and not last[:1].isdigit()


def clean_title(raw: str) -> str:
    """A heading or title line without markup and edge punctuation, shortened for display."""
    # A heading's "#" marks go (a run of them standing as a word: the opening one, a closing one,
    # one of a line joined to the title); a "#" inside the title's words stays ("C# Basics").
    title = re.sub(r"(?<!\S)#+(?!\S)", " ", raw)
    title = re.sub(r"[*_`]+|\\$", " ", title)
    title = re.sub(r"\s+", " ", title).strip(" .:;,-\u2013\u2014[]")
    return shorten(title, TITLE_CHARS)


def shorten(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` characters at a word boundary, with an ellipsis when cut."""
    if len(text) <= limit:
        return text
    cut = text[: limit - 1].rsplit(" ", 1)[0] if " " in text[: limit - 1] else text[: limit - 1]
    return cut.rstrip(" ,;:") + "\u2026"
