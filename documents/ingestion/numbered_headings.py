"""Numbered headings for the structural builder (pure, no Django): "4. Confidentiality",
"ARTICLE IV", "Section 2.3", "IV.", inline or not.

Candidates are kept only where the numbers count up like headings do (``_best_chain``), per
numbering family; tables of contents are dropped; a title that runs straight into its first
subclause ("2. SUPPLY 2.1 Purchase") ends there, and the subclause is a heading of its own.
"""

from __future__ import annotations

import bisect
import itertools
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from documents.ingestion.heading_titles import (
    TITLE_CHARS,
    Heading,
    clean_title,
    is_titleish,
    shorten,
    word_set,
)

LINE = re.compile(r"[^\r\n]+")
_LINE_END = re.compile(r"[\r\n]")
_ROMAN_VALUES = {"I": 1, "V": 5, "X": 10, "L": 50, "C": 100}
NUMBERED = re.compile(
    # "Section G2: HR Services": a schedule's parts numbered by a code, always with a colon.
    r"(?P<codekw>SECTION|Section|PART|Part)\s+(?P<code>[A-Z]{1,3})(?P<codenum>\d{1,2}):(?=\s)"
    r"|(?P<kw>ARTICLE|Article|SECTION|Section|PART|Part|CHAPTER|Chapter)\s+"
    r"(?P<kwnum>\d{1,3}(?:\.\d{1,3}){0,3}|[IVXLC]{1,7})(?=[\s.:\-\u2013\u2014])\.?"
    r"|(?P<multi>\d{1,2}(?:\.\d{1,3}){1,3})\.?(?=\s)"
    r"|(?P<one>\d{1,2})[.)](?=\s|[A-Z]{2})"  # "1.DEFINITIONS" lost its space in extraction
    r"|(?P<roman>[IVXL]{1,6})\.(?=\s)"
    r"|\((?P<letter>[a-zA-Z])\)(?=[ \t\u00a0])"  # "(a) Fee.": a titled sub-clause, at a line start
    r"|(?P<capital>[A-HJ-UWYZ])\.(?=[ \t\u00a0]+[A-Z])"  # "B. Payment.": the same, lettered so
    r"|(?P<small>[a-hj-uwyz])\.(?=[ \t\u00a0]+[A-Z])"  # "a. Termination by ABG.": and so
)
_BEFORE_INLINE = frozenset('.:;!?)"\u201d]')
# Longest line read whole as a numbered heading's title (see _numbered_title).
_TITLE_LINE_SCAN = 2000
# Words in capitals (two letters or more) right before a capitalised word that opens the clause.
_CAPITALS_TITLE = re.compile(r"(?:[A-Z][A-Z&'\u2019/,-]*[A-Z][ \t]+){1,10}(?=[A-Z][a-z])")
_TITLE_STOP = re.compile(r"[.:](?=\s)|\n|\r|[ \t\u00a0]{3,}")
_SENTENCE_STARTERS = word_set(
    "The This These That Each Either Neither In If Any All Subject Upon Except Notwithstanding No "
    "Unless Within During Without Such For A An It Where When Following Prior Both Nothing"
)
# Words that open the text of a clause rather than its title ("3.1 Subject to ...").
_NOT_TITLE_OPENERS = word_set(
    "The This These That Each Either Neither If Subject Upon Except Notwithstanding Unless Within "
    "During Where When It Such In"
)
# A capitalised word followed by one of these is the subject of the clause's first sentence.
_CLAUSE_VERBS = word_set(
    "shall will may must agrees agree acknowledges acknowledge hereby is are has have represents "
    "warrants understands wishes desires intends means"
)
# Words of a sentence, never of a sentence-case title ("Payment is not due.").
_SENTENCE_WORDS = _CLAUSE_VERBS | word_set("was were be been being does do not")
_SENTENCE_CASE_WORDS = 5
_ROMAN_RANK = 11.0
# PART > CHAPTER > ARTICLE > "IV." > "4." > "4.1" > "4.1.2" (numbers rank by their depth).
_KEYWORD_RANKS = {"part": 8.0, "chapter": 9.0, "article": 10.0, "roman": _ROMAN_RANK}
# "(a)" sits below every dotted number ("4.1.2.3" ranks 15): under "ARTICLE 4", "4." or "4.1".
_LETTER_RANK = 16.0
# "A. Payment." between the top numbers and "(a)": under "4." and "4.1", above "(a)".
_CAPITAL_RANK = 15.5
# "21. " before "a. Confidentiality", alone at its line's start.
_CLAUSE_NUMBER_BEFORE = re.compile(r"(?:^|(?<=\n))[ \t]*(?P<number>\d{1,2}\.)[ \t]+", re.MULTILINE)
_CLAUSE_NUMBER_CHARS = 10
# The family of "Section G2:" headings: the code's letters follow ("coded:G"), one run per code.
_CODED_FAMILY = "coded:"
# A numbering that starts again under a lettered clause sits just under that letter.
_NESTED_STEP = 0.1
_ROMAN_ITEM = re.compile(r"[ivx]|[IVX]")
# A table of contents repeats the headings close together; the real ones come later.
_TOC_GAP_CHARS = 80
_LOWERCASE_WORD = re.compile(r"\b[a-z]{2,}\b")
_BODY_WINDOW_CHARS = 300
_TOC_RUN = 4


def numbered_candidates(text: str, claimed: set[int]) -> list[Heading]:
    candidates: list[Heading] = []
    for match in NUMBERED.finditer(text):
        candidate = _numbered_candidate(text, match, claimed, candidates[-1] if candidates else None)
        if candidate is not None:
            candidates.append(candidate)
    return candidates


def _numbered_candidate(
    text: str, match: re.Match[str], claimed: set[int], previous: Heading | None
) -> Heading | None:
    """The heading ``match`` opens, if it stands where a heading may: at a line's start, after a
    sentence, or as the first subclause right after ``previous``'s title."""
    line_start = _number_line_start(text, match)
    if line_start in claimed:
        return None
    placed = line_start is not None or _after_sentence(text, match.start())
    if not (placed or _opens_first_subclause(text, match, previous)):
        return None
    if line_start is None and _needs_line_start(match):
        return None  # "... by I. Ward", "as set out in (b) above": only at the start of a line
    candidate = _numbered_heading(text, match, line_start is not None)
    if candidate is None:
        return None
    candidate.first_subclause = not placed
    # "**IV. Charge**", "## 2. Setup": the node starts with the line, markup included.
    candidate.start = match.start() if line_start is None else line_start
    return candidate


def _number_line_start(text: str, match: re.Match[str]) -> int | None:
    line_start = _line_content_start(text, match.start())
    if line_start is None and match.group("small"):
        return _after_clause_number(text, match.start())  # "21. a. Confidentiality."
    return line_start


def _needs_line_start(match: re.Match[str]) -> bool:
    """Roman numerals and letters are headings only at a line's start: inline they are words."""
    return bool(
        match.group("roman") or match.group("letter") or match.group("capital") or match.group("small")
    )


def _line_content_start(text: str, position: int) -> int | None:
    """Where the line holding ``position`` starts, if only markup and blanks come before it."""
    cursor = position - 1
    while cursor >= 0 and text[cursor] in " \t\u00a0*#>_":
        cursor -= 1
    if cursor >= 0 and text[cursor] not in "\r\n":
        return None
    cursor += 1
    while text[cursor] in " \t\u00a0":
        cursor += 1
    return cursor


def _after_clause_number(text: str, position: int) -> int | None:
    """Where the line starts when only a clause number stands before ``position`` on it
    ("21. a. Confidentiality.": the first lettered sub-clause of clause 21, on its line)."""
    window = max(0, position - _CLAUSE_NUMBER_CHARS)  # never the whole line back: a long line
    found = _CLAUSE_NUMBER_BEFORE.search(text, window, position)
    return found.start("number") if found is not None and found.end() == position else None


def _opens_first_subclause(text: str, match: re.Match[str], parent: Heading | None) -> bool:
    """ "2. PRODUCT SUPPLY 2.1 Purchase. ...": a clause numbered under the heading right before it
    starts where that heading's title ends, with no sentence end between them."""
    if parent is None or not parent.title or match.group("roman"):
        return False
    _, path = _numbering(match)
    return (
        len(path) == len(parent.path) + 1
        and path[:-1] == parent.path
        and parent.title_end <= match.start()
        and not text[parent.title_end : match.start()].strip()
    )


def _subclause_start(text: str, start: int, end: int, number: str) -> int | None:
    """Where a clause numbered under ``number`` ("2.1" under "2") begins in [start, end): the end
    of a title that runs straight into its first subclause."""
    if not number:
        return None
    found = re.compile(rf"[ \t\u00a0]+(?:Section\s+)?{re.escape(number)}\.\d{{1,3}}\b").search(
        text, start, end
    )
    return found.start() if found else None


def _after_sentence(text: str, position: int) -> bool:
    """An inline heading follows the end of a sentence or a wide gap left by PDF extraction."""
    cursor = position - 1
    while cursor >= 0 and text[cursor] in " \t\u00a0":
        cursor -= 1
    gap = position - 1 - cursor
    return gap >= 1 and cursor >= 0 and (text[cursor] in _BEFORE_INLINE or gap >= 2)


def _numbered_heading(text: str, match: re.Match[str], line_start: bool) -> Heading | None:
    after = _after_marker(text, match.end())
    following = text[after : after + 1]
    if not following or following.islower() or following == "(":
        return None  # "Section 2.3 of this Agreement", "Section 5(b)": references, not headings
    family, path = _numbering(match)
    if not path or any(part == 0 for part in path):
        return None
    title, title_end = _numbered_title(
        text,
        after,
        keyword=bool(match.group("kw")),
        line_start=line_start,
        number=_subclause_parent(match, family, path),
    )
    title = _settled_title(text, match, title, title_end, after=after, family=family, line_start=line_start)
    marker = _marker(match)
    return Heading(
        match.start(),
        max(title_end, match.end()),
        _numbered_rank(family, path),
        shorten(f"{marker} {title}".strip(), TITLE_CHARS) if title else "",  # the title alone may fill it
        family=family,
        path=path,
        line_start=line_start,
        label=marker,
    )


def _after_marker(text: str, position: int) -> int:
    """Past the punctuation and markup that close a number ("4.) ", "2 - ", "**")."""
    while position < len(text) and text[position] in " \t\u00a0.:)-\u2013\u2014*":
        position += 1
    return position


def _subclause_parent(match: re.Match[str], family: str, path: tuple[int, ...]) -> str:
    """The number subclauses count under ("2" -> "2.1"; "ARTICLE 2" -> "2.1"), or "": only an
    arabic number has them."""
    if family not in ("number", "article"):
        return ""
    if family == "article" and not (match.group("kwnum") or "")[:1].isdigit():
        return ""
    return ".".join(str(part) for part in path)


def _settled_title(
    text: str, match: re.Match[str], title: str, title_end: int, *, after: int, family: str, line_start: bool
) -> str:
    if not title and match.group("kw") and line_start and _alone_on_its_line(text, match, after):
        title = " "  # "Article 27" alone on its line: a heading that names itself
    if family == "letter" and title and not _run_in_title_ends(text, title_end):
        title = ""  # "(a) Schedule A - Products;": an item of a list, not a titled sub-clause
    return title


def _alone_on_its_line(text: str, match: re.Match[str], after: int) -> bool:
    if text[match.end() : after].strip(" .:"):
        return False
    line_end = _LINE_END.search(text, after)
    return line_end is not None and after == line_end.start()


def _marker(match: re.Match[str]) -> str:
    """The number as the heading shows it: "1.", "IV.", "A.", "a." keep their period."""
    if match.group("one") or match.group("roman") or match.group("capital") or match.group("small"):
        return match.group()
    return match.group().rstrip(".")


def _numbered_rank(family: str, path: tuple[int, ...]) -> float:
    if family == "letter":
        return _CAPITAL_RANK if path[1] == 3 else _LETTER_RANK
    return _KEYWORD_RANKS.get(family, _ROMAN_RANK + len(path))


def _run_in_title_ends(text: str, title_end: int) -> bool:
    """A sub-clause's title ends as a heading does: with a period or a colon before its text
    ("(a) Fee. Sponsor shall pay ..."), or alone on its line; never with a list's ";" or ","."""
    before = text[:title_end].rstrip(" \t\u00a0*_")
    if before.endswith((".", ":")):
        return True
    after = text[title_end : title_end + 2]
    return not before.endswith((";", ",")) and (after == "" or after[0] in "\r\n")


def _numbering(match: re.Match[str]) -> tuple[str, tuple[int, ...]]:
    if match.group("code"):
        # Counted per code: "G1", "G2" ... and "GR1", "GR2" ... are two runs (_CODED_FAMILY).
        return f"{_CODED_FAMILY}{match.group('code')}", (int(match.group("codenum")),)
    if match.group("kw"):
        return _keyword_numbering(match)
    if match.group("roman"):
        return "roman", (_roman(match.group("roman")),)
    lettered = _letter_numbering(match)
    if lettered is not None:
        return lettered
    return "number", _dotted(match.group("multi") or match.group("one"))


def _keyword_numbering(match: re.Match[str]) -> tuple[str, tuple[int, ...]]:
    number = match.group("kwnum")
    keyword = match.group("kw").lower()
    if keyword == "section":
        return ("number", _dotted(number)) if number[0].isdigit() else ("article", (_roman(number),))
    return keyword, (_dotted(number)[0] if number[0].isdigit() else _roman(number),)


def _letter_numbering(match: re.Match[str]) -> tuple[str, tuple[int, ...]] | None:
    if match.group("capital"):  # "A." ranks apart from "(A)": the two may nest
        return "letter", (ord(match.group("capital")) - ord("A") + 1, 3)
    if match.group("small"):  # "a." apart from "(a)" too
        return "letter", (ord(match.group("small")) - ord("a") + 1, 4)
    if match.group("letter"):
        letter = match.group("letter")
        # Upper and lower case count apart: "(A)" items may sit under "(a)" or beside them.
        return "letter", (ord(letter.lower()) - ord("a") + 1, 2 if letter.isupper() else 1)
    return None


def _dotted(number: str) -> tuple[int, ...]:
    return tuple(int(part) for part in number.split("."))


def _roman(numeral: str) -> int:
    total = 0
    for index, char in enumerate(numeral):
        value = _ROMAN_VALUES[char]
        following = _ROMAN_VALUES[numeral[index + 1]] if index + 1 < len(numeral) else 0
        total += -value if value < following else value
    return total if total > 0 else 0


def _numbered_title(
    text: str, start: int, *, keyword: bool, line_start: bool, number: str = ""
) -> tuple[str, int]:
    """The short title after a number ("4. Confidentiality. Each ..."), or "" when there is none.

    ``number`` ("2" of "2. SUPPLY 2.1 Purchase"): the title ends where a clause numbered under it
    begins, which is a heading of its own, never part of this title."""
    quoted = text[start : start + 1] in ('"', "\u201c")
    line = _title_line(text, start, number)
    if line_start and not quoted:
        whole = _whole_line_title(text, start, line)
        if whole is not None:
            return whole
    return _short_title(text, start, keyword=keyword, quoted=quoted, subclause=line.subclause)


@dataclass(frozen=True)
class _TitleLine:
    end: int  # where the line ends, or the end of the scan
    subclause: int | None  # where a clause numbered under the title begins on it
    complete: bool  # the scan saw the line's end (or the text's)


def _title_line(text: str, start: int, number: str) -> _TitleLine:
    # The whole line is read only up to _TITLE_LINE_SCAN characters: a title holds 100 at most,
    # and reading to the end of every line made a long single-line text quadratic (a 3 MB line
    # with 3,000 numbers: 145 s; now well under a second).
    scan_end = min(len(text), start + _TITLE_LINE_SCAN)
    line_end = _LINE_END.search(text, start, scan_end)
    end_of_line = line_end.start() if line_end else scan_end
    subclause = _subclause_start(text, start, end_of_line, number)
    return _TitleLine(end_of_line, subclause, line_end is not None or scan_end == len(text))


def _whole_line_title(text: str, start: int, line: _TitleLine) -> tuple[str, int] | None:
    """ "1. **Case Filing: March 15, 2023**": the rest of the line, when it reads as a title."""
    if line.subclause is None and not line.complete:
        return None
    title_stop = line.end if line.subclause is None else line.subclause
    whole_line = " ".join(re.sub(r"[*_`#]+|\\$", " ", text[start:title_stop]).split())
    if is_titleish(whole_line, max_words=12, min_ratio=0.8):
        return clean_title(whole_line), title_stop
    return None


def _short_title(
    text: str, start: int, *, keyword: bool, quoted: bool, subclause: int | None
) -> tuple[str, int]:
    """A title that stops at its period or where the clause's sentence begins."""
    end, stopped = _title_span(text, start, subclause)
    body = _body_start(text, start, end)
    candidate = text[start:body].strip().strip("*_[]").strip()
    candidate = re.sub(r"(\s+\d+(\.\d+)*\.?)+$", "", candidate)  # "Procedures 9.1": the next clause
    if not candidate and keyword:
        return _next_line_title(text, start)
    if quoted or not candidate or _opens_the_clause(text, candidate, end, body):
        return "", start  # '2.1 "Product" means ...', '3.1 Subject to ...': a clause, not a title
    if not is_titleish(candidate, max_words=12):
        return _title_before_sentence(text, start, candidate, end=end, body=body, stopped=stopped)
    if body < end or not stopped:
        return clean_title(candidate), body
    return clean_title(candidate), end + (1 if text[end] in ".:" else 0)


def _opens_the_clause(text: str, candidate: str, end: int, body: int) -> bool:
    """The candidate opens the clause's sentence ("Subject to ...", "The Licensee shall ..."),
    unless it reads as a capitalised title all the same."""
    opener = candidate.split()[0] in _NOT_TITLE_OPENERS
    return opener and not _capitalised_title(text, candidate, end, body)


def _capitalised_title(text: str, candidate: str, end: int, body: int) -> bool:
    """ "A. The Company's Business. The Company is ...": a few words, each capitalised, that run
    to a period before a capitalised sentence are a title even when "The" opens them (not "9.1
    The Joint Venture will be managed ...": its sentence starts before any period)."""
    words = candidate.split()
    if body < end or not 2 <= len(words) <= _SENTENCE_CASE_WORDS or not all(w[:1].isupper() for w in words):
        return False
    return text[end : end + 1] == "." and re.match(r"[ \t]+[A-Z]", text[end + 1 : end + 3]) is not None


def _title_span(text: str, start: int, subclause: int | None) -> tuple[int, bool]:
    """Where the title may end, and whether a stop (a period, a colon) ends it there."""
    limit = min(len(text), start + 120)
    stop = _TITLE_STOP.search(text, start, limit)
    end = stop.start() if stop else limit
    if subclause is not None and subclause <= end:
        return subclause, False  # the title ends right before its first subclause
    return end, stop is not None


def _title_before_sentence(
    text: str, start: int, candidate: str, *, end: int, body: int, stopped: bool
) -> tuple[str, int]:
    """A title that does not read as one by its words alone, or ""."""
    if stopped and body >= end and _sentence_case_title(text, candidate, end):
        return clean_title(candidate), end + 1  # "1. Production days. Up to four ..."
    # "17. REGULATORY MATTERS Until execution of ...": a capitalised title before the clause.
    caps = _CAPITALS_TITLE.match(text, start)
    if caps and is_titleish(caps.group().strip(), max_words=12):
        return clean_title(caps.group()), start + len(caps.group().rstrip())
    return "", start


def _sentence_case_title(text: str, candidate: str, end: int) -> bool:
    """ "Production days. Up to four ...", "Social media posts. ABG shall ...": a short title in
    sentence case, closed by a period before a capitalised sentence; not a short sentence of its
    own ("Payment is due. The ...")."""
    words = candidate.split()
    if not (2 <= len(words) <= _SENTENCE_CASE_WORDS) or not words[0][:1].isupper():
        return False
    if any(word.lower().strip(",;") in _SENTENCE_WORDS or word.endswith(",") for word in words):
        return False
    if not all(re.fullmatch(r"[A-Za-z][\w'\u2019&/-]*", word) for word in words):
        return False
    return (
        text[end : end + 1] == "." and re.match(r"[ \t]+[A-Z\"\u201c(]", text[end + 1 : end + 4]) is not None
    )


def _body_start(text: str, start: int, end: int) -> int:
    """Where the clause's own text begins before ``end``, when the title runs straight into it:
    "6. Closing The sale of ...", "8. Labelling and Packaging Licensee shall ..."."""
    words = list(re.finditer(r"\S+", text[start : min(len(text), end + 40)]))
    for index in range(1, len(words) - 1):
        if start + words[index].start() >= end:
            break
        cut = _clause_opening(text, words, index, start=start, end=end)
        if cut is not None:
            return start + words[cut].start()
    return end


def _clause_opening(text: str, words: list[re.Match[str]], index: int, *, start: int, end: int) -> int | None:
    """The word the clause's sentence starts at, if word ``index`` opens it."""
    word, following = words[index].group(), words[index + 1].group()
    if word[0].isupper() and following.lower() in _CLAUSE_VERBS:
        return _subject_start(words, index)
    if _starts_sentence(text, word, following, start + words[index].start(), end):
        return index
    return None


def _starts_sentence(text: str, word: str, following: str, position: int, end: int) -> bool:
    if word not in _SENTENCE_STARTERS or not following[0].islower():
        return False
    # "Disputes Subject to Arbitration. Any ...": the opener is inside a title that runs on in
    # capitals to the title's period, not the start of the clause's sentence.
    return not (end < len(text) and text[end] in ".:" and _title_runs_on(text, position, end))


def _subject_start(words: list[re.Match[str]], index: int) -> int:
    """Take the whole subject along: "The Licensee shall", "ELEPHANT TALK wishes"."""
    cut = index
    while cut > 0 and words[index].group().isupper() and words[cut - 1].group().isupper():
        cut -= 1
    if cut > 0 and words[cut - 1].group() in _SENTENCE_STARTERS:
        cut -= 1
    return cut


def _title_runs_on(text: str, start: int, end: int) -> bool:
    """The words from ``start`` to the title's period read as a title ("Subject to Arbitration")."""
    return is_titleish(text[start:end], max_words=6)


def _next_line_title(text: str, start: int) -> tuple[str, int]:
    """ "ARTICLE 1\\n\\nINTERPRETATION": the title sits alone on the next line."""
    line = LINE.search(text, start)
    if (
        line
        and text.count("\n", start, line.start()) <= 2
        and is_titleish(line.group().strip(), max_words=10)
    ):
        return clean_title(line.group()), line.end()
    return "", start


def validated_numbering(
    text: str, candidates: list[Heading], *, restarts: Sequence[int] = ()
) -> list[Heading]:
    """Keep, per numbering family, the best chain of candidates that count up like headings do.

    ``restarts``: where parts begin that number their clauses anew (an exhibit, a schedule, an
    addendum after the body): each part's numbering is a chain of its own."""
    for candidate in candidates:
        # A table of contents lists the same numbers as the body, but with no prose under them.
        prose = _LOWERCASE_WORD.findall(text, candidate.start, candidate.start + _BODY_WINDOW_CHARS)
        candidate.has_body = len(prose) >= 8
    bounds = [0, *sorted(restarts), len(text) + 1]
    kept: list[Heading] = []
    for low, high in itertools.pairwise(bounds):
        kept += _part_numbering([c for c in candidates if low <= c.start < high])
    return kept


def _part_numbering(part: list[Heading]) -> list[Heading]:
    """The validated numbering of one part of the document, family by family."""
    letter_runs = _lettered_runs([c for c in part if c.family == "letter"])
    coded = sorted({c.family for c in part if c.family.startswith(_CODED_FAMILY)})
    kept: list[Heading] = []
    for family in ("part", "chapter", "article", "roman", "number", *coded):
        kept += _family_numbering([c for c in part if c.family == family], family, letter_runs)
    return kept + _titled_letters(letter_runs)


def _titled_letters(letter_runs: list[list[Heading]]) -> list[Heading]:
    return sorted((member for run in letter_runs for member in run if member.title), key=_start)


def _family_numbering(
    candidates: list[Heading], family: str, letter_runs: list[list[Heading]]
) -> list[Heading]:
    """The headings of one numbering family: its best chain (of two or more), and for arabic
    numbers the runs that start again under a letter."""
    members = drop_tables_of_contents(candidates)
    chain = _best_chain(members)
    nested: list[Heading] = []
    if family == "number":
        chain, nested = _numbers_under_letters(members, chain, letter_runs)
    return nested + chain if len(chain) >= 2 else nested


def _start(heading: Heading) -> int:
    return heading.start


def _numbers_under_letters(
    members: list[Heading], chain: list[Heading], letter_runs: list[list[Heading]]
) -> tuple[list[Heading], list[Heading]]:
    """ "5. Consideration" > "A. Cash Payment" > "1. ... 2. Wire Instructions ... 8. Taxes" >
    "B. Award" > "6. Warranties": a numbering that starts again at 1 under a lettered clause.

    The top chain alone may take the inner "6." for the outer one. A lettered run counts on
    under one clause only, so a top number found between two of its letters is an inner one: it
    leaves the chain, which is counted again. Then the runs from "1." inside each letter's span
    are headings one level under that letter (the titled ones; the untitled count for the run).
    Returns the top chain and the inner headings."""
    if not letter_runs:
        return chain, []
    single = [member for member in members if len(member.path) == 1]  # in document order
    inner = _inner_top_numbers(chain, single, letter_runs)
    if inner:
        chain = _best_chain([member for member in members if id(member) not in inner])
    letters = [member for run in letter_runs for member in run]
    return chain, _nested_numbers(chain, _off_the_chain(single, chain), letters)


def _off_the_chain(numbers: list[Heading], chain: list[Heading]) -> list[Heading]:
    in_chain = {id(member) for member in chain}
    return [number for number in numbers if id(number) not in in_chain]


def _inner_top_numbers(
    chain: list[Heading], single: list[Heading], letter_runs: list[list[Heading]]
) -> set[int]:
    """The ids of the top chain's numbers that stand between two letters of one run."""
    inner: set[int] = set()
    top = [c for c in chain if len(c.path) == 1]
    top_starts = [c.start for c in top]
    ones = [m.start for m in single if m.path == (1,)]
    for before, after in itertools.chain.from_iterable(map(itertools.pairwise, letter_runs)):
        between = top[
            bisect.bisect_right(top_starts, before.start) : bisect.bisect_left(top_starts, after.start)
        ]
        if between and _one_between(ones, before.start, between[0].start):
            inner.update(map(id, between))
    return inner


def _one_between(ones: list[int], low: int, high: int) -> bool:
    """An inner "1." between the letter and the first of those numbers opens their run."""
    return bisect.bisect_right(ones, low) < bisect.bisect_left(ones, high)


def _nested_numbers(chain: list[Heading], free: list[Heading], letters: list[Heading]) -> list[Heading]:
    """The runs from "1." among the ``free`` numbers inside each letter's span, ranked under it."""
    free_starts = [m.start for m in free]
    # Where each letter's span may end, per rank: the next top number, or the next letter of its
    # rank or above ("(A)" items inside "A. Cash Payment" do not end it). Sorted once, searched
    # per letter: a long document has thousands of letters.
    ends_by_rank = {
        rank: sorted([c.start for c in chain] + [m.start for m in letters if m.rank <= rank])
        for rank in {letter.rank for letter in letters}
    }
    nested: list[Heading] = []
    for letter in letters:
        ends = ends_by_rank[letter.rank]
        following = bisect.bisect_right(ends, letter.start)
        end = ends[following] if following < len(ends) else None
        first = bisect.bisect_right(free_starts, letter.start)
        last = len(free) if end is None else bisect.bisect_left(free_starts, end)
        nested += _ranked_under(letter, free[first:last])
    return nested


def _ranked_under(letter: Heading, free: list[Heading]) -> list[Heading]:
    """The titled members of the run from "1." in ``free``, one level under ``letter``."""
    counted = _counted_from_one(free)
    if len(counted) < 2:
        return []
    titled = [member for member in counted if member.title]
    for member in titled:
        member.rank = letter.rank + _NESTED_STEP
    return titled


def _counted_from_one(candidates: list[Heading]) -> list[Heading]:
    """The run "1.", "2.", "3." ... from the first "1." (one number may be missed)."""
    run: list[Heading] = []
    for candidate in candidates:
        value = candidate.path[0]
        if not run:
            if value == 1:
                run.append(candidate)
        elif 1 <= value - run[-1].path[0] <= 2:
            run.append(candidate)
    return run


def _lettered_runs(candidates: list[Heading]) -> list[list[Heading]]:
    """Runs of "(a)" sub-clauses that count (a), (b), (c) ... from "(a)" (one letter may be
    missed); the lettering starts again under each clause. The titled members are headings;
    untitled ones ("(a) The Company shall ...") count for the run but are clauses."""
    kept: list[list[Heading]] = []
    runs: dict[int, list[Heading]] = {1: [], 2: [], 3: [], 4: []}  # "(a)", "(A)", "A.", "a.": apart

    def close(run: list[Heading]) -> None:
        if len(run) >= 2:
            kept.append(run)

    for candidate in candidates:
        letter, upper = candidate.path
        run = runs[upper]
        if run and 1 <= letter - run[-1].path[0] <= 2:
            run.append(candidate)
            continue
        if run and _ROMAN_ITEM.fullmatch(candidate.label.strip("()")):
            # "(i)", "(v)", "(x)" inside "(a) ... the following: (i) ... (ii) ...": a roman item
            # of the clause, not a letter; the lettering goes on after it.
            continue
        close(run)
        runs[upper] = [candidate] if letter == 1 else []
    for run in runs.values():
        close(run)
    return kept


def drop_tables_of_contents(candidates: list[Heading]) -> list[Heading]:
    """Drop runs of candidates too close together to hold text: a table of contents.

    A first subclause sits right after its parent's title by nature ("7. CONFORMITY 7.1 ..."): it
    is no entry of its own in such a run, and goes wherever its parent goes."""
    kept = {id(c) for c in _drop_close_runs([c for c in candidates if not c.first_subclause])}
    result: list[Heading] = []
    for candidate in candidates:
        if candidate.first_subclause:
            if result and id(result[-1]) in kept and result[-1].path == candidate.path[:-1]:
                result.append(candidate)
        elif id(candidate) in kept:
            result.append(candidate)
    return result


def _drop_close_runs(candidates: list[Heading]) -> list[Heading]:
    drop: set[int] = set()
    for run in _close_runs(candidates):
        members = [candidates[index] for index in run]
        if len(run) >= _TOC_RUN and _listed_again(members, candidates[run[-1] + 1 :]):
            drop.update(run)
    return [c for index, c in enumerate(candidates) if index not in drop]


def _close_runs(candidates: list[Heading]) -> Iterator[list[int]]:
    """Runs of candidate indexes, each candidate within ``_TOC_GAP_CHARS`` of the one before. A
    number the run has listed already starts a new run: that is the body's first heading, right
    after its table of contents ("... 4. Warranty 5" then "1. Scope")."""
    run: list[int] = []
    listed: set[tuple[int, ...]] = set()
    for index, candidate in enumerate(candidates):
        far = bool(run) and candidate.start - candidates[run[-1]].start >= _TOC_GAP_CHARS
        if far or (candidate.path and candidate.path in listed):
            yield run
            run, listed = [], set()
        run.append(index)
        if candidate.path:
            listed.add(candidate.path)
    if run:
        yield run


def _listed_again(run: list[Heading], later: list[Heading]) -> bool:
    """A table of contents lists numbered headings that come again in the body; a run of close
    ones that never recur is the body itself ("8.3 [***]", "9. PRICES", "9.1 Costs", "9.1.1 ...").
    A run of attachment names ("Appendix 1 ...", "Appendix 2 ...") is a list either way."""
    if not all(heading.path for heading in run):
        return True
    paths = {heading.path for heading in later}
    return sum(heading.path in paths for heading in run) * 2 >= len(run)


def _best_chain(candidates: list[Heading]) -> list[Heading]:
    """Longest (weighted) subsequence in which each number follows the previous one.

    "2.1" may follow "2", "1.7" or "1.7.3" (the first child of a new parent), "4.3" may follow
    "4.2" or "4.1" (one missed), "3.2" may follow "3" (3.1 missed), "3" may follow "2.9".
    Indexing chains by number prefix keeps this linear in the number of candidates.
    """
    scores, previous = _chain_scores(candidates)
    if not scores:
        return []
    cursor = max(range(len(scores)), key=scores.__getitem__)
    chain: list[Heading] = []
    while cursor >= 0:
        chain.append(candidates[cursor])
        cursor = previous[cursor]
    return chain[::-1]


def _chain_scores(candidates: list[Heading]) -> tuple[list[float], list[int]]:
    """Each candidate's best chain score ending at it, and the candidate before it there (-1)."""
    scores: list[float] = []
    previous: list[int] = []
    best_exact: dict[tuple[int, ...], int] = {}
    best_prefix: dict[tuple[int, ...], int] = {}
    for index, candidate in enumerate(candidates):
        score, back = _best_link(candidate, scores, best_exact, best_prefix)
        scores.append(score)
        previous.append(back)
        path = candidate.path
        _remember(best_exact, path, index, scores)
        for length in range(1, len(path) + 1):
            _remember(best_prefix, path[:length], index, scores)
    return scores, previous


def _best_link(
    candidate: Heading,
    scores: list[float],
    best_exact: dict[tuple[int, ...], int],
    best_prefix: dict[tuple[int, ...], int],
) -> tuple[float, int]:
    """The best score of a chain ending at ``candidate``, and the chain end it follows (-1)."""
    path = candidate.path
    weight = 1.0 + (candidate.title != "") + 0.5 * candidate.line_start + candidate.has_body
    score, back = weight - (0.0 if set(path) == {1} else 1.5), -1
    for option, penalty in _predecessors(path):
        table = best_exact if option[0] == "exact" else best_prefix
        found = table.get(option[1])
        if found is not None and scores[found] + weight - penalty > score:
            score, back = scores[found] + weight - penalty, found
    return score, back


def _remember(
    table: dict[tuple[int, ...], int], key: tuple[int, ...], index: int, scores: list[float]
) -> None:
    """Keep in ``table`` the best-scoring chain end under ``key``."""
    if key not in table or scores[table[key]] < scores[index]:
        table[key] = index


def _predecessors(path: tuple[int, ...]) -> list[tuple[tuple[str, tuple[int, ...]], float]]:
    options: list[tuple[tuple[str, tuple[int, ...]], float]] = []
    for level in range(len(path)):
        if any(part != 1 for part in path[level + 1 :]):
            continue
        for gap, penalty in ((1, 0.0), (2, 0.7)):
            if path[level] - gap >= 1:
                options.append((("prefix", (*path[:level], path[level] - gap)), penalty))
        if path[level] <= 2 and level > 0:  # the first child, or the second when one was missed
            options.append((("exact", path[:level]), 0.0 if path[level] == 1 else 0.7))
    return options
