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
from collections.abc import Sequence

from documents.ingestion.heading_titles import Heading, clean_title, is_titleish, word_set

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
        line_start = _line_content_start(text, match.start())
        if line_start is None and match.group("small"):
            line_start = _after_clause_number(text, match.start())  # "21. a. Confidentiality."
        if line_start in claimed:
            continue
        placed = line_start is not None or _after_sentence(text, match.start())
        if not (placed or _opens_first_subclause(text, match, candidates[-1] if candidates else None)):
            continue
        lettered = match.group("letter") or match.group("capital") or match.group("small")
        if (match.group("roman") or lettered) and line_start is None:
            continue  # "... by I. Ward", "as set out in (b) above": only at the start of a line
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
    marker = (
        match.group()
        if match.group("one") or match.group("roman") or match.group("capital") or match.group("small")
        else match.group().rstrip(".")
    )
    if not title and match.group("kw") and line_start and not text[match.end() : after].strip(" .:"):
        line_end = _LINE_END.search(text, after)
        if line_end is not None and after == line_end.start():
            title = " "  # "Article 27" alone on its line: a heading that names itself
    if family == "letter" and title and not _run_in_title_ends(text, title_end):
        title = ""  # "(a) Schedule A - Products;": an item of a list, not a titled sub-clause
    full_title = f"{marker} {title}".strip() if title else ""
    rank = (
        (_CAPITAL_RANK if path[1] == 3 else _LETTER_RANK)
        if family == "letter"
        else _KEYWORD_RANKS.get(family, _ROMAN_RANK + len(path))
    )
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
        number = match.group("kwnum")
        keyword = match.group("kw").lower()
        if keyword == "section":
            return ("number", _dotted(number)) if number[0].isdigit() else ("article", (_roman(number),))
        return keyword, (_dotted(number)[0] if number[0].isdigit() else _roman(number),)
    if match.group("roman"):
        return "roman", (_roman(match.group("roman")),)
    if match.group("capital"):  # "A." ranks apart from "(A)": the two may nest
        return "letter", (ord(match.group("capital")) - ord("A") + 1, 3)
    if match.group("small"):  # "a." apart from "(a)" too
        return "letter", (ord(match.group("small")) - ord("a") + 1, 4)
    if match.group("letter"):
        letter = match.group("letter")
        # Upper and lower case count apart: "(A)" items may sit under "(a)" or beside them.
        return "letter", (ord(letter.lower()) - ord("a") + 1, 2 if letter.isupper() else 1)
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
        if is_titleish(whole_line, max_words=12, min_ratio=0.8):
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
    if not is_titleish(candidate, max_words=12):
        if stop is not None and body >= end and _sentence_case_title(text, candidate, end):
            return clean_title(candidate), end + 1  # "1. Production days. Up to four ..."
        # "17. REGULATORY MATTERS Until execution of ...": a capitalised title before the clause.
        caps = _CAPITALS_TITLE.match(text, start)
        if caps and is_titleish(caps.group().strip(), max_words=12):
            return clean_title(caps.group()), start + len(caps.group().rstrip())
        return "", start
    if body < end or not stop:
        return clean_title(candidate), body
    return clean_title(candidate), end + (1 if text[end] in ".:" else 0)


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
        word, following = words[index].group(), words[index + 1].group()
        starts_sentence = (
            word in _SENTENCE_STARTERS
            and following[0].islower()
            # "Disputes Subject to Arbitration. Any ...": the opener is inside a title that runs
            # on in capitals to the title's period, not the start of the clause's sentence.
            and not (
                end < len(text)
                and text[end] in ".:"
                and _title_runs_on(text, start + words[index].start(), end)
            )
        )
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
        part = [c for c in candidates if low <= c.start < high]
        letter_runs = _lettered_runs([c for c in part if c.family == "letter"])
        coded = sorted({c.family for c in part if c.family.startswith(_CODED_FAMILY)})
        for family in ("part", "chapter", "article", "roman", "number", *coded):
            members = drop_tables_of_contents([c for c in part if c.family == family])
            chain = _best_chain(members)
            if family == "number":
                chain, nested = _numbers_under_letters(members, chain, letter_runs)
                kept += nested
            if len(chain) >= 2:
                kept += chain
        kept += sorted((member for run in letter_runs for member in run if member.title), key=_start)
    return kept


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
    inner: set[int] = set()
    top = [c for c in chain if len(c.path) == 1]
    top_starts = [c.start for c in top]
    ones = [m.start for m in single if m.path == (1,)]
    for run in letter_runs:
        for before, after in itertools.pairwise(run):
            low = bisect.bisect_right(top_starts, before.start)
            between = top[low : bisect.bisect_left(top_starts, after.start)]
            # An inner "1." between the letter and the first of those numbers opens their run.
            if between and bisect.bisect_right(ones, before.start) < bisect.bisect_left(
                ones, between[0].start
            ):
                inner.update(id(c) for c in between)
    if inner:
        chain = _best_chain([member for member in members if id(member) not in inner])
    in_chain = {id(member) for member in chain}
    free = [m for m in single if id(m) not in in_chain]
    free_starts = [m.start for m in free]
    letters = [member for run in letter_runs for member in run]
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
        counted = _counted_from_one(free[first:last])
        if len(counted) >= 2:
            for member in counted:
                if member.title:
                    member.rank = letter.rank + _NESTED_STEP
                    nested.append(member)
    return chain, nested


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
    close = [
        index + 1 < len(candidates) and candidates[index + 1].start - c.start < _TOC_GAP_CHARS
        for index, c in enumerate(candidates)
    ]
    drop: set[int] = set()
    run_start = 0
    for index in range(len(candidates) + 1):
        if index < len(candidates) and close[index]:
            continue
        run = candidates[run_start : index + 1]
        if len(run) >= _TOC_RUN and _listed_again(run, candidates[index + 1 :]):
            drop.update(range(run_start, index + 1))
        run_start = index + 1
    return [c for index, c in enumerate(candidates) if index not in drop]


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
