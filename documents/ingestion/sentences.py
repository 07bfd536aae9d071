"""Sentence and paragraph spans (character offsets) for chunking, without a model.

A careful regex splitter instead of pysbd, which is ~300x slower (measured here: 50 CUAD contracts
in 0.08 s against 24 s). pysbd's boundaries are what the evaluation splits gold references with,
so this splitter cuts *only* where pysbd would too (at every line break, and after sentence-final
punctuation followed by something that can start a sentence) and cuts less where in doubt
(abbreviations, initials, list and clause numbers, closing quotes). Cutting less never splits a
gold sentence; it only makes a unit longer. On the 108 DragonBall documents each of its 11K
boundaries is also one of pysbd's; on the 50 contracts all but 12 of 14K are (pysbd quirks).

Every line break is a boundary (pysbd with ``clean=False`` does the same), but each boundary
carries a *strength* so the chunker can tell a paragraph end from a PDF line wrapped in
mid-sentence, which it should keep inside one chunk.
"""

from __future__ import annotations

import re
from dataclasses import dataclass


def _words(text: str) -> frozenset[str]:
    """A word list written as one string, the way it reads."""
    return frozenset(text.split())


# Boundary strengths, weakest first.
BREAK_WRAP = 0  # a line break inside a sentence (PDF extraction); keep together when possible
BREAK_SENTENCE = 1  # sentence-final punctuation inside a line
BREAK_LINE = 2  # a line break between items that do not end in punctuation (lists, forms)
BREAK_PARAGRAPH = 3  # a blank line, or a line break after a finished sentence

_TERMINAL = re.compile(r"[.!?\u2026]+[\"'\u201d\u2019)\]]*[ \t\u00a0]+")
_LINE = re.compile(r"[^\n\r]+")
_FINISHED_LINE_END = frozenset(".!?:;\u2026\"'\u201d\u2019)]|\\")
_WRAP_LINE_END = frozenset(",(-\u2013\u2014/&")
# A line at least this long that stops without punctuation is a paragraph wrapped by PDF
# extraction (CUAD), not a heading or a form field, which are short.
_WRAPPED_LINE_MIN_CHARS = 100
_CONNECTIVES = _words(
    "and or of the to a an in for with by on at as that which under this its their such any all "
    "be is are shall may will from than"
)
# Words that end with a period without ending the sentence before a capital ("Mr. Smith",
# "No. 5", "Art. 12"). Company suffixes (Inc., Ltd., Co.) are deliberately absent: pysbd splits
# after them and they usually do end a sentence when a capital follows.
_ABBREVIATIONS = _words(
    "mr mrs ms dr prof sr jr st mt ft gen col lt sgt capt rev hon sen rep gov pres supt messrs no "
    "nos art arts sec secs para paras cl fig figs vol vols ch chap pt pp p ed eds op cit ibid "
    "approx est dept univ assn bros vs v cf al jan feb mar apr jun jul aug sep sept oct nov dec"
)
_DOTTED_ABBREVIATION = re.compile(r"^(?:[A-Za-z]\.)+[A-Za-z]?$")  # U.S, e.g, i.e, p.m, N.A.
# A bare list or heading marker at the start of a sentence: "4." / "2.3." / "IV." / "a." /
# "Section 5." — the period belongs to the marker, the sentence goes on.
_LEADING_MARKER = re.compile(
    r"^[\s*#_>\-\u2022]*\(?(?:(?:section|article|clause|part|chapter|schedule|exhibit|annex|appendix)"
    r"\s+)?(?:\d{1,3}(?:\.\d{1,3})*|[ivxlcdm]{1,7}|[a-z])\)?$",
    re.IGNORECASE,
)
_SENTENCE_OPENERS = frozenset("\"'\u201c\u2018([")
_CLOSING_QUOTES = "\"'\u201d\u2019"
_COMPANY_SUFFIXES = _words("inc ltd co corp llc plc bv nv ag sa gmbh etc esq")
# Small numbers may be list or clause numbers ("Appendix 1. For", "... 3. Hosting"); a year or an
# amount ("in 2004. The") ends a sentence like any word.
_NUMBER = re.compile(r"^\d{1,3}(?:\.\d{1,3})*\)?$")
_OPENERS = "([\"'\u201c\u2018*_"


@dataclass(frozen=True, slots=True)
class SentenceSpan:
    """``text[start:end]`` is one sentence, trimmed of surrounding whitespace."""

    start: int
    end: int
    break_before: int  # strength of the boundary before it; BREAK_PARAGRAPH for the first


def split_sentences(text: str) -> list[SentenceSpan]:
    """Sentences of ``text`` in order; the whitespace between them belongs to none."""
    spans: list[SentenceSpan] = []
    previous_line: tuple[int, int] | None = None
    for line in _LINE.finditer(text):
        start, end = _trim(text, line.start(), line.end())
        if start == end:
            continue
        strength = BREAK_PARAGRAPH
        if previous_line is not None:
            strength = _line_break_strength(text, previous_line, (start, end))
        for index, (sentence_start, sentence_end) in enumerate(_split_line(text, start, end)):
            spans.append(
                SentenceSpan(sentence_start, sentence_end, strength if index == 0 else BREAK_SENTENCE)
            )
        previous_line = (start, end)
    return spans


def _trim(text: str, start: int, end: int) -> tuple[int, int]:
    while start < end and text[start].isspace():
        start += 1
    while end > start and text[end - 1].isspace():
        end -= 1
    return start, end


def _split_line(text: str, start: int, end: int) -> list[tuple[int, int]]:
    pieces: list[tuple[int, int]] = []
    sentence_start = start
    for match in _TERMINAL.finditer(text, start, end):
        next_start = match.end()
        if next_start >= end:
            break
        if _ends_sentence(text, sentence_start, match):
            pieces.append(_trim(text, sentence_start, next_start))
            sentence_start = next_start
    pieces.append((sentence_start, end))
    return pieces


def _ends_sentence(text: str, sentence_start: int, match: re.Match[str]) -> bool:
    following = text[match.end()]
    if not (following.isupper() or following in _SENTENCE_OPENERS):
        return False  # "approx. five", "Inc. (the Company)", "etc.) •": the sentence goes on
    punctuation = match.group().rstrip()
    if any(quote in punctuation for quote in _CLOSING_QUOTES):
        # pysbd cuts '... the "Receiving Party.|" "Confidential' before the closing quote, but
        # '"Stop." Then' after it; cutting in neither place can never split one of its sentences.
        return False
    if punctuation[0] != "." or punctuation.startswith(".."):
        return True  # ! ? … or an ellipsis before a capital
    return _full_stop_ends_sentence(text, sentence_start, match, following)


def _full_stop_ends_sentence(text: str, sentence_start: int, match: re.Match[str], following: str) -> bool:
    """A single full stop before a capital: the end of a sentence unless it ends a list number,
    an initial or an abbreviation, or closes a list marker opening the sentence."""
    word = _word_before(text, sentence_start, match.start())
    if _NUMBER.match(word):
        # pysbd keeps "Appendix 1. For ..." and "... 3. Hosting" together (list handling); so do we.
        # Inline numbered headings get their own boundary from the heading detector instead.
        return False
    if len(word) == 1 and word.isalpha():
        return False  # an initial: "Q. Reyes", "Schedule A. The"
    if word.lower() in _ABBREVIATIONS or _DOTTED_ABBREVIATION.match(word):
        return False
    if word.lower() in _COMPANY_SUFFIXES and not following.isupper():
        return False  # "Foo Inc. (the Company)": pysbd splits after these only before a capital
    return not _LEADING_MARKER.match(text[sentence_start : match.start()])


def _word_before(text: str, sentence_start: int, end: int) -> str:
    """The word that ends at ``end`` (no further back than ``sentence_start``), without the
    brackets and quotes that open it."""
    word_start = end
    while word_start > sentence_start and not text[word_start - 1].isspace():
        word_start -= 1
    return text[word_start:end].lstrip(_OPENERS)


def _line_break_strength(text: str, previous: tuple[int, int], current: tuple[int, int]) -> int:
    """How strongly the break between two lines separates them (see the BREAK_* constants)."""
    gap = text[previous[1] : current[0]]
    blank_line = (gap.count("\n") or gap.count("\r")) > 1
    last_char = text[previous[1] - 1]
    first_char = text[current[0]]
    if first_char.islower() or last_char in _WRAP_LINE_END:
        return BREAK_WRAP
    if last_char in _FINISHED_LINE_END:
        return BREAK_PARAGRAPH
    last_word = text[max(previous[0], previous[1] - 12) : previous[1]].rsplit(None, 1)[-1].lower()
    if last_word in _CONNECTIVES:
        return BREAK_WRAP
    if previous[1] - previous[0] >= _WRAPPED_LINE_MIN_CHARS and last_char.isalnum():
        return BREAK_WRAP
    return BREAK_PARAGRAPH if blank_line else BREAK_LINE
