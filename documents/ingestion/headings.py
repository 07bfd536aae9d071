"""Heading detection for the structural builder (pure, no Django).

Markdown (ATX and setext), bold lines, "Label:" lines, attachments ("EXHIBIT A"), and numbered /
ARTICLE / Section clauses, inline or not. Numbered candidates are kept only where the numbers
count up like headings do (``_best_chain``), per numbering family; tables of contents, running
page headers and headings without a body of their own are dropped or merged.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass

TITLE_CHARS = 80  # the longest node or document title, in characters


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


def word_set(text: str) -> frozenset[str]:
    """A word list written as one string, the way it reads."""
    return frozenset(text.split())


_LINE = re.compile(r"[^\r\n]+")
_LINE_END = re.compile(r"[\r\n]")
_ATX = re.compile(r"^ {0,3}(#{1,6})[ \t]+(.*?)[ \t#]*$")
_SETEXT_RULE = re.compile(r"^ {0,3}(=+|-+)[ \t]*$")
_BOLD_LINE = re.compile(r"^\s*(\*\*|__)(?P<inner>[^*_\n]{1,100}?)\1\s*:?\s*\\?\s*$")
_LABEL_LINE = re.compile(r"^\s*(?P<inner>[A-Z][^:\n]{0,60}?)\s*:\s*$")
_ROMAN_VALUES = {"I": 1, "V": 5, "X": 10, "L": 50, "C": 100}
_NUMBERED = re.compile(
    r"(?P<kw>ARTICLE|Article|SECTION|Section|PART|Part|CHAPTER|Chapter)\s+"
    r"(?P<kwnum>\d{1,3}(?:\.\d{1,3}){0,3}|[IVXLC]{1,7})(?=[\s.:\-\u2013\u2014])\.?"
    r"|(?P<multi>\d{1,2}(?:\.\d{1,3}){1,3})\.?(?=\s)"
    r"|(?P<one>\d{1,2})[.)](?=\s|[A-Z]{2})"  # "1.DEFINITIONS" lost its space in extraction
    r"|(?P<roman>[IVXL]{1,6})\.(?=\s)"
)
_APPENDIX_WORDS = word_set("EXHIBIT SCHEDULE ANNEX APPENDIX ADDENDUM ATTACHMENT")
_BEFORE_INLINE = frozenset('.:;!?)"\u201d]')
# Longest line read whole as a numbered heading's title (see _numbered_title).
_TITLE_LINE_SCAN = 2000
_TITLE_STOP = re.compile(r"[.:](?=\s)|\n|\r|[ \t\u00a0]{3,}")
_SMALL_WORDS = word_set("a an and as at by for in of on or the to with from into under upon its")
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
_MARKDOWN_RANK = -100.0  # markdown levels sit above every other kind of heading
_APPENDIX_RANK = 5.0  # an exhibit closes the last numbered section of the body
_ROMAN_RANK = 11.0
# PART > CHAPTER > ARTICLE > "IV." > "4." > "4.1" > "4.1.2" (numbers rank by their depth).
_KEYWORD_RANKS = {"part": 8.0, "chapter": 9.0, "article": 10.0, "roman": _ROMAN_RANK}
_BOLD_RANK = 50.0
_LABEL_RANK = 60.0
# A table of contents repeats the headings close together; the real ones come later.
_TOC_GAP_CHARS = 80
_LOWERCASE_WORD = re.compile(r"\b[a-z]{2,}\b")
_BODY_WINDOW_CHARS = 300
_TOC_RUN = 4


def detect_headings(text: str) -> tuple[list[Heading], list[Heading]]:
    """The headings that title the document itself, and the others, in document order."""
    line_headings, claimed, labels = _line_headings(text)
    numbered = _numbered_candidates(text, claimed)
    headings = sorted(line_headings + _validated_numbering(text, numbered), key=lambda heading: heading.start)
    title_headings, headings = _split_document_title(text, _dedupe(headings))
    if not headings and len(labels) >= 3:
        headings = [label for label in labels if label.start not in {h.start for h in title_headings}]
    return title_headings, _merge_empty_headings(text, headings)


def _line_headings(text: str) -> tuple[list[Heading], set[int], list[Heading]]:
    """Markdown, setext, bold and label lines; also the line starts they claim."""
    lines = [(match.start(), match.end()) for match in _LINE.finditer(text)]
    found: list[Heading] = []
    bold: list[Heading] = []
    labels: list[Heading] = []
    appendices: list[Heading] = []
    claimed: set[int] = set()
    for index, (start, end) in enumerate(lines):
        line = text[start:end]
        content_start = start + len(line) - len(line.lstrip())
        atx = _ATX.match(line)
        if atx and atx.group(2).strip():
            found.append(
                Heading(content_start, end, _MARKDOWN_RANK + len(atx.group(1)), clean_title(atx.group(2)))
            )
            claimed.add(content_start)
            continue
        next_line = text[lines[index + 1][0] : lines[index + 1][1]] if index + 1 < len(lines) else ""
        adjacent = index + 1 < len(lines) and text.count("\n", end, lines[index + 1][0]) <= 1
        rule = _SETEXT_RULE.match(next_line)
        if rule and adjacent and _is_titleish(line.strip(), max_words=15) and not _SETEXT_RULE.match(line):
            level = 1 if rule.group(1).startswith("=") else 2
            found.append(
                Heading(content_start, lines[index + 1][1], _MARKDOWN_RANK + level, clean_title(line))
            )
            claimed.add(content_start)
            continue
        bold_match = _BOLD_LINE.match(line)
        if bold_match and not _NUMBERED.match(bold_match.group("inner").strip()):
            inner = bold_match.group("inner")
            if _is_titleish(inner, max_words=14):
                bold.append(Heading(content_start, end, _BOLD_RANK, clean_title(inner), family="bold"))
            claimed.add(content_start)  # "**v.**" is no heading, but no numbered clause either
            continue
        appendix = _appendix_title(line, content_start)
        if appendix:
            appendices.append(Heading(content_start, end, _APPENDIX_RANK, appendix, family="appendix"))
            claimed.add(content_start)
            continue
        label = _LABEL_LINE.match(line)
        if label and next_line.strip() and _is_titleish(label.group("inner"), max_words=8):
            labels.append(
                Heading(content_start, end, _LABEL_RANK, clean_title(label.group("inner")), family="label")
            )
    # A lone bold line is emphasis, not structure; "Label:" lines (forms, medical records) are
    # the last resort, because contracts are full of "ADDRESS:" and "By:" lines.
    found += bold if len(bold) >= 2 else []
    found += _drop_tables_of_contents(_drop_repeated(appendices))
    return found, claimed, labels


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


def _numbered_candidates(text: str, claimed: set[int]) -> list[Heading]:
    candidates: list[Heading] = []
    for match in _NUMBERED.finditer(text):
        line_start = _line_content_start(text, match.start())
        if line_start in claimed:
            continue
        placed = line_start is not None or _after_sentence(text, match.start())
        if not (placed or _opens_first_subclause(text, match, candidates[-1] if candidates else None)):
            continue
        if match.group("roman") and line_start is None:
            continue  # "... by I. Ward": bare roman numerals only count at the start of a line
        candidate = _numbered_heading(text, match, line_start is not None)
        if candidate is not None:
            candidate.first_subclause = not placed
            # "**IV. Charge**", "## 2. Setup": the node starts with the line, markup included.
            candidate.start = match.start() if line_start is None else line_start
            candidates.append(candidate)
    return candidates


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
    after = match.end()
    while after < len(text) and text[after] in " \t\u00a0.:)-\u2013\u2014*":
        after += 1
    following = text[after : after + 1]
    if not following or following.islower() or following == "(":
        return None  # "Section 2.3 of this Agreement", "Section 5(b)": references, not headings
    family, path = _numbering(match)
    if not path or any(part == 0 for part in path):
        return None
    # Only an arabic number has subclauses numbered under it ("2" -> "2.1"; "ARTICLE 2" -> "2.1").
    number = ".".join(str(part) for part in path) if family in ("number", "article") else ""
    if family == "article" and not (match.group("kwnum") or "")[:1].isdigit():
        number = ""
    title, title_end = _numbered_title(
        text, after, keyword=bool(match.group("kw")), line_start=line_start, number=number
    )
    marker = match.group() if match.group("one") or match.group("roman") else match.group().rstrip(".")
    full_title = f"{marker} {title}".strip() if title else ""
    rank = _KEYWORD_RANKS.get(family, _ROMAN_RANK + len(path))
    return Heading(
        match.start(),
        max(title_end, match.end()),
        rank,
        full_title,
        family=family,
        path=path,
        line_start=line_start,
        label=marker,
    )


def _numbering(match: re.Match[str]) -> tuple[str, tuple[int, ...]]:
    if match.group("kw"):
        number = match.group("kwnum")
        keyword = match.group("kw").lower()
        if keyword == "section":
            return ("number", _dotted(number)) if number[0].isdigit() else ("article", (_roman(number),))
        return keyword, (_dotted(number)[0] if number[0].isdigit() else _roman(number),)
    if match.group("roman"):
        return "roman", (_roman(match.group("roman")),)
    return "number", _dotted(match.group("multi") or match.group("one"))


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
    # The whole line is read only up to _TITLE_LINE_SCAN characters: a title holds 100 at most,
    # and reading to the end of every line made a long single-line text quadratic (a 3 MB line
    # with 3,000 numbers: 145 s; now well under a second).
    scan_end = min(len(text), start + _TITLE_LINE_SCAN)
    line_end = _LINE_END.search(text, start, scan_end)
    end_of_line = line_end.start() if line_end else scan_end
    subclause = _subclause_start(text, start, end_of_line, number)
    if line_start and not quoted and (subclause is not None or line_end or scan_end == len(text)):
        title_stop = end_of_line if subclause is None else subclause
        whole_line = " ".join(re.sub(r"[*_`#]+|\\$", " ", text[start:title_stop]).split())
        if _is_titleish(whole_line, max_words=12, min_ratio=0.8):
            return clean_title(whole_line), title_stop  # "1. **Case Filing: March 15, 2023**"
    stop = _TITLE_STOP.search(text, start, min(len(text), start + 120))
    end = stop.start() if stop else min(len(text), start + 120)
    if subclause is not None and subclause <= end:
        end, stop = subclause, None  # the title ends right before its first subclause
    body = _body_start(text, start, end)
    candidate = text[start:body].strip().strip("*_[]").strip()
    candidate = re.sub(r"(\s+\d+(\.\d+)*\.?)+$", "", candidate)  # "Procedures 9.1": the next clause
    if not candidate and keyword:
        return _next_line_title(text, start)
    if quoted or not candidate or candidate.split()[0] in _NOT_TITLE_OPENERS:
        return "", start  # '2.1 "Product" means ...', '3.1 Subject to ...': a clause, not a title
    if not _is_titleish(candidate, max_words=12):
        return "", start
    if body < end or not stop:
        return clean_title(candidate), body
    return clean_title(candidate), end + (1 if text[end] in ".:" else 0)


def _body_start(text: str, start: int, end: int) -> int:
    """Where the clause's own text begins before ``end``, when the title runs straight into it:
    "6. Closing The sale of ...", "8. Labelling and Packaging Licensee shall ..."."""
    words = list(re.finditer(r"\S+", text[start : min(len(text), end + 40)]))
    for index in range(1, len(words) - 1):
        if start + words[index].start() >= end:
            break
        word, following = words[index].group(), words[index + 1].group()
        starts_sentence = word in _SENTENCE_STARTERS and following[0].islower()
        subject_and_verb = word[0].isupper() and following.lower() in _CLAUSE_VERBS
        if starts_sentence or subject_and_verb:
            cut = index
            # Take the whole subject along: "The Licensee shall", "ELEPHANT TALK wishes".
            while (
                subject_and_verb
                and cut > 0
                and words[index].group().isupper()
                and words[cut - 1].group().isupper()
            ):
                cut -= 1
            if subject_and_verb and cut > 0 and words[cut - 1].group() in _SENTENCE_STARTERS:
                cut -= 1
            return start + words[cut].start()
    return end


def _next_line_title(text: str, start: int) -> tuple[str, int]:
    """ "ARTICLE 1\\n\\nINTERPRETATION": the title sits alone on the next line."""
    line = _LINE.search(text, start)
    if (
        line
        and text.count("\n", start, line.start()) <= 2
        and _is_titleish(line.group().strip(), max_words=10)
    ):
        return clean_title(line.group()), line.end()
    return "", start


def _is_titleish(candidate: str, *, max_words: int, min_ratio: float = 0.75) -> bool:
    """Short, and mostly capitalised words: a heading, not the first words of a sentence."""
    words = re.findall(r"[^\W\d_][\w'\u2019-]*", candidate)
    if not words or len(candidate.split()) > max_words or len(candidate) > 100:
        return False
    if not (candidate[0].isupper() or candidate[0].isdigit() or candidate[0] in "[(\"'\u201c"):
        return False
    content = [word for word in words if word.lower() not in _SMALL_WORDS]
    if not content:
        return False
    capitalised = sum(1 for word in content if word[0].isupper())
    return capitalised / len(content) >= min_ratio and words[-1].lower() not in _SMALL_WORDS - {"in", "on"}


def clean_title(raw: str) -> str:
    """A heading or title line without markup and edge punctuation, shortened for display."""
    title = re.sub(r"[*_`#]+|\\$", " ", raw)
    title = re.sub(r"\s+", " ", title).strip(" .:;,-\u2013\u2014[]")
    return shorten(title, TITLE_CHARS)


def _validated_numbering(text: str, candidates: list[Heading]) -> list[Heading]:
    """Keep, per numbering family, the best chain of candidates that count up like headings do."""
    for candidate in candidates:
        # A table of contents lists the same numbers as the body, but with no prose under them.
        prose = _LOWERCASE_WORD.findall(text, candidate.start, candidate.start + _BODY_WINDOW_CHARS)
        candidate.has_body = len(prose) >= 8
    kept: list[Heading] = []
    for family in ("part", "chapter", "article", "roman", "number"):
        members = _drop_tables_of_contents([c for c in candidates if c.family == family])
        chain = _best_chain(members)
        if len(chain) >= 2:
            kept += chain
    return kept


def _drop_tables_of_contents(candidates: list[Heading]) -> list[Heading]:
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
    close = [
        index + 1 < len(candidates) and candidates[index + 1].start - c.start < _TOC_GAP_CHARS
        for index, c in enumerate(candidates)
    ]
    drop: set[int] = set()
    run_start = 0
    for index in range(len(candidates) + 1):
        if index < len(candidates) and close[index]:
            continue
        if index - run_start + 1 >= _TOC_RUN:
            drop.update(range(run_start, index + 1))
        run_start = index + 1
    return [c for index, c in enumerate(candidates) if index not in drop]


def _best_chain(candidates: list[Heading]) -> list[Heading]:
    """Longest (weighted) subsequence in which each number follows the previous one.

    "2.1" may follow "2", "1.7" or "1.7.3" (the first child of a new parent), "4.3" may follow
    "4.2" or "4.1" (one missed), "3.2" may follow "3" (3.1 missed), "3" may follow "2.9".
    Indexing chains by number prefix keeps this linear in the number of candidates.
    """
    scores: list[float] = []
    previous: list[int] = []
    best_exact: dict[tuple[int, ...], int] = {}
    best_prefix: dict[tuple[int, ...], int] = {}
    for index, candidate in enumerate(candidates):
        path = candidate.path
        weight = 1.0 + (candidate.title != "") + 0.5 * candidate.line_start + candidate.has_body
        score, back = weight - (0.0 if set(path) == {1} else 1.5), -1
        for option, penalty in _predecessors(path):
            table = best_exact if option[0] == "exact" else best_prefix
            found = table.get(option[1])
            if found is not None and scores[found] + weight - penalty > score:
                score, back = scores[found] + weight - penalty, found
        scores.append(score)
        previous.append(back)
        if path not in best_exact or scores[best_exact[path]] < score:
            best_exact[path] = index
        for length in range(1, len(path) + 1):
            prefix = path[:length]
            if prefix not in best_prefix or scores[best_prefix[prefix]] < score:
                best_prefix[prefix] = index
    if not scores:
        return []
    cursor = max(range(len(scores)), key=scores.__getitem__)
    chain: list[Heading] = []
    while cursor >= 0:
        chain.append(candidates[cursor])
        cursor = previous[cursor]
    return chain[::-1]


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
    """
    kept: list[Heading] = []
    for heading in reversed(headings):
        following = kept[-1] if kept else None
        body = text[heading.title_end : following.start if following else len(text)]
        if following is None or following.rank > heading.rank or re.search(r"\w", body):
            kept.append(heading)
        elif following.rank == heading.rank:
            following.start = heading.start
            if not following.path:  # "Physical Examination:" names what follows; "1." does not
                following.title = heading.title or following.title
    return kept[::-1]


def shorten(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` characters at a word boundary, with an ellipsis when cut."""
    if len(text) <= limit:
        return text
    cut = text[: limit - 1].rsplit(" ", 1)[0] if " " in text[: limit - 1] else text[: limit - 1]
    return cut.rstrip(" ,;:") + "\u2026"


def _split_document_title(text: str, headings: list[Heading]) -> tuple[list[Heading], list[Heading]]:
    """Top headings at the very start title the document rather than a section: "# Manual", or
    "# Bayside Court" + "## Criminal Case Judgment" above "###" parts, or "**Hospitalization
    Record**" right before "**Basic Information:**"."""
    titles: list[Heading] = []
    cursor = 0
    while headings:
        first, rest = headings[0], headings[1:]
        if first.family not in ("", "bold") or re.search(r"\w", text[cursor : first.start]):
            break
        empty_body = bool(rest) and not re.search(r"\w", text[first.title_end : rest[0].start])
        unique_top = all(heading.rank > first.rank for heading in rest)
        if not (unique_top or (empty_body and all(heading.rank >= first.rank for heading in rest))):
            break
        titles.append(first)
        headings, cursor = rest, first.title_end
        if not empty_body:
            break
    return titles, headings
