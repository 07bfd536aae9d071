"""The structural tree builder: a FABLE tree without an LLM.

Pipeline (pure, no Django):
1. sentences (``sentences.split_sentences``), cut again where a heading starts so every heading
   begins a unit; a unit is the smallest piece a leaf is made of and is never split further
   (except an absurdly long run-on "sentence", see ``_cut_runaway``);
2. headings: markdown, setext, bold lines, "Label:" lines, attachments ("EXHIBIT A"), and
   numbered / ARTICLE / Section clauses, inline or not, kept only where the numbers count up
   (``_best_chain``); nested by rank into an outline, depth-capped, small ones left as text;
3. one ``embed`` call for all units;
4. leaves: each run of units between structural nodes is cut by dynamic programming, preferring
   low similarity between neighbours, paragraph ends and headings, and sizes near a target;
5. runs of leaves without heading structure are grouped into sections / subsections the same way;
6. titles from headings or distinctive key phrases, summaries from the most central sentences.

Leaves partition the text: a leaf runs from its first unit to the next leaf's first unit, so the
whitespace between two chunks belongs to the first, and the first leaf starts at 0.
"""

from __future__ import annotations

import bisect
import functools
import math
import re
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from documents.ingestion.sentences import (
    BREAK_LINE,
    BREAK_PARAGRAPH,
    BREAK_SENTENCE,
    BREAK_WRAP,
    split_sentences,
)
from documents.ingestion.tree import LEAF, ROOT, TreeNode, kind_for_depth

Embed = Callable[[Sequence[str]], np.ndarray]
CountTokens = Callable[[str], int]

# Deepest internal node (root 0, section 1, subsections 2-3); leaves go one deeper at most.
_MAX_INTERNAL_DEPTH = 3
# A run-on "sentence" longer than this many times max_leaf_tokens (tables flattened to one line,
# text without punctuation) is cut at whitespace; shorter long sentences stay whole in one leaf.
_RUNAWAY_FACTOR = 4
# A unit's first ~200 tokens say what it is about; e5's cost grows with the square of the length.
_EMBED_CHARS = 1000
_TITLE_CHARS = 80
_SUMMARY_WORDS = 60
_SUMMARY_SENTENCES = 3


@dataclass(frozen=True)
class _Params:
    max_leaf_tokens: int
    target_leaf_tokens: int
    min_leaf_tokens: int
    max_leaves_per_group: int


@dataclass
class _Heading:
    start: int  # character offset of the marker; the heading's node starts here
    title_end: int  # end of the heading text (marker + title) in the document
    rank: float  # smaller is higher in the outline
    title: str  # cleaned for display; "" for a numbered clause without a title
    family: str = ""
    path: tuple[int, ...] = ()
    line_start: bool = True
    has_body: bool = True  # prose follows before the next numbered heading (not a contents line)
    label: str = ""  # the number of a numbered heading ("4.1", "ARTICLE IV")


@dataclass
class _Unit:
    start: int
    end: int
    break_before: int
    tokens: int = 0
    heading: _Heading | None = None  # the heading that starts at this unit
    heading_only: bool = False  # the unit is nothing but a heading line


@dataclass
class _Outline:
    heading: _Heading | None
    first: int  # unit range [first, last)
    last: int
    depth: int
    children: list[_Outline] = field(default_factory=list)


# ---------------------------------------------------------------------------------------------
# Public entry point


def build_structural_tree(
    text: str,
    *,
    embed: Embed,
    count_tokens: CountTokens,
    # 200 keeps a leaf well inside e5's 512-token window and lets ~5-15 leaves into a 1-2K
    # budget; the target of 120 is close to the 128-token chunks of the reference benchmark.
    max_leaf_tokens: int = 200,
    target_leaf_tokens: int = 120,
    # Smaller leaves are allowed (a short clause between two headings) but cost extra.
    min_leaf_tokens: int = 40,
    # A node with more leaves than this and no heading structure below it gets subsections.
    max_leaves_per_group: int = 8,
) -> TreeNode:
    """Build a root → section → subsection → leaf tree over ``text`` without an LLM."""
    target = max(1, min(target_leaf_tokens, max_leaf_tokens))
    params = _Params(max(1, max_leaf_tokens), target, min(min_leaf_tokens, target), max_leaves_per_group)
    title_headings, headings = _detect_headings(text)
    units = _make_units(text, headings, title_headings, count_tokens, params)
    if not units:
        return _empty_tree(text)
    vectors = _embed_units(text, units, embed)
    builder = _Builder(text, units, vectors, params)
    document_title = _shorten(" \u2014 ".join(heading.title for heading in title_headings), _TITLE_CHARS)
    return builder.build(headings, document_title)


def _empty_tree(text: str) -> TreeNode:
    leaf = TreeNode(kind=LEAF, start_char=0, end_char=len(text))
    return TreeNode(
        kind=ROOT,
        start_char=0,
        end_char=len(text),
        title="Empty document",
        summary="The document has no text.",
        children=[leaf],
    )


# ---------------------------------------------------------------------------------------------
# Headings


def _words(text: str) -> frozenset[str]:
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
_APPENDIX_WORDS = _words("EXHIBIT SCHEDULE ANNEX APPENDIX ADDENDUM ATTACHMENT")
_BEFORE_INLINE = frozenset('.:;!?)"\u201d]')
_TITLE_STOP = re.compile(r"[.:](?=\s)|\n|\r|[ \t\u00a0]{3,}")
_SMALL_WORDS = _words("a an and as at by for in of on or the to with from into under upon its")
_SENTENCE_STARTERS = _words(
    "The This These That Each Either Neither In If Any All Subject Upon Except Notwithstanding No "
    "Unless Within During Without Such For A An It Where When Following Prior Both Nothing"
)
# Words that open the text of a clause rather than its title ("3.1 Subject to ...").
_NOT_TITLE_OPENERS = _words(
    "The This These That Each Either Neither If Subject Upon Except Notwithstanding Unless Within "
    "During Where When It Such In"
)
# A capitalised word followed by one of these is the subject of the clause's first sentence.
_CLAUSE_VERBS = _words(
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


def _detect_headings(text: str) -> tuple[list[_Heading], list[_Heading]]:
    """The headings that title the document itself, and the others, in document order."""
    line_headings, claimed, labels = _line_headings(text)
    numbered = _numbered_candidates(text, claimed)
    headings = sorted(line_headings + _validated_numbering(text, numbered), key=lambda heading: heading.start)
    title_headings, headings = _split_document_title(text, _dedupe(headings))
    if not headings and len(labels) >= 3:
        headings = [label for label in labels if label.start not in {h.start for h in title_headings}]
    return title_headings, _merge_empty_headings(text, headings)


def _line_headings(text: str) -> tuple[list[_Heading], set[int], list[_Heading]]:
    """Markdown, setext, bold and label lines; also the line starts they claim."""
    lines = [(match.start(), match.end()) for match in _LINE.finditer(text)]
    found: list[_Heading] = []
    bold: list[_Heading] = []
    labels: list[_Heading] = []
    appendices: list[_Heading] = []
    claimed: set[int] = set()
    for index, (start, end) in enumerate(lines):
        line = text[start:end]
        content_start = start + len(line) - len(line.lstrip())
        atx = _ATX.match(line)
        if atx and atx.group(2).strip():
            found.append(
                _Heading(content_start, end, _MARKDOWN_RANK + len(atx.group(1)), _clean_title(atx.group(2)))
            )
            claimed.add(content_start)
            continue
        next_line = text[lines[index + 1][0] : lines[index + 1][1]] if index + 1 < len(lines) else ""
        adjacent = index + 1 < len(lines) and text.count("\n", end, lines[index + 1][0]) <= 1
        rule = _SETEXT_RULE.match(next_line)
        if rule and adjacent and _is_titleish(line.strip(), max_words=15) and not _SETEXT_RULE.match(line):
            level = 1 if rule.group(1).startswith("=") else 2
            found.append(
                _Heading(content_start, lines[index + 1][1], _MARKDOWN_RANK + level, _clean_title(line))
            )
            claimed.add(content_start)
            continue
        bold_match = _BOLD_LINE.match(line)
        if bold_match and not _NUMBERED.match(bold_match.group("inner").strip()):
            inner = bold_match.group("inner")
            if _is_titleish(inner, max_words=14):
                bold.append(_Heading(content_start, end, _BOLD_RANK, _clean_title(inner), family="bold"))
            claimed.add(content_start)  # "**v.**" is no heading, but no numbered clause either
            continue
        appendix = _appendix_title(line, content_start)
        if appendix:
            appendices.append(_Heading(content_start, end, _APPENDIX_RANK, appendix, family="appendix"))
            claimed.add(content_start)
            continue
        label = _LABEL_LINE.match(line)
        if label and next_line.strip() and _is_titleish(label.group("inner"), max_words=8):
            labels.append(
                _Heading(content_start, end, _LABEL_RANK, _clean_title(label.group("inner")), family="label")
            )
    # A lone bold line is emphasis, not structure; "Label:" lines (forms, medical records) are
    # the last resort, because contracts are full of "ADDRESS:" and "By:" lines.
    found += bold if len(bold) >= 2 else []
    found += _drop_tables_of_contents(_drop_repeated(appendices))
    return found, claimed, labels


def _drop_repeated(headings: list[_Heading]) -> list[_Heading]:
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
        return _clean_title(stripped)
    if stripped.isupper() and len(words) <= 8 and any(word in _APPENDIX_WORDS for word in words):
        return _clean_title(stripped)
    return ""


def _numbered_candidates(text: str, claimed: set[int]) -> list[_Heading]:
    candidates: list[_Heading] = []
    for match in _NUMBERED.finditer(text):
        line_start = _line_content_start(text, match.start())
        if line_start in claimed or not (line_start is not None or _after_sentence(text, match.start())):
            continue
        if match.group("roman") and line_start is None:
            continue  # "... by I. Ward": bare roman numerals only count at the start of a line
        candidate = _numbered_heading(text, match, line_start is not None)
        if candidate is not None:
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


def _after_sentence(text: str, position: int) -> bool:
    """An inline heading follows the end of a sentence or a wide gap left by PDF extraction."""
    cursor = position - 1
    while cursor >= 0 and text[cursor] in " \t\u00a0":
        cursor -= 1
    gap = position - 1 - cursor
    return gap >= 1 and cursor >= 0 and (text[cursor] in _BEFORE_INLINE or gap >= 2)


def _numbered_heading(text: str, match: re.Match[str], line_start: bool) -> _Heading | None:
    after = match.end()
    while after < len(text) and text[after] in " \t\u00a0.:)-\u2013\u2014*":
        after += 1
    following = text[after : after + 1]
    if not following or following.islower() or following == "(":
        return None  # "Section 2.3 of this Agreement", "Section 5(b)": references, not headings
    family, path = _numbering(match)
    if not path or any(part == 0 for part in path):
        return None
    title, title_end = _numbered_title(text, after, keyword=bool(match.group("kw")), line_start=line_start)
    marker = match.group() if match.group("one") or match.group("roman") else match.group().rstrip(".")
    full_title = f"{marker} {title}".strip() if title else ""
    rank = _KEYWORD_RANKS.get(family, _ROMAN_RANK + len(path))
    return _Heading(
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


def _numbered_title(text: str, start: int, *, keyword: bool, line_start: bool) -> tuple[str, int]:
    """The short title after a number ("4. Confidentiality. Each ..."), or "" when there is none."""
    line_end = _LINE_END.search(text, start)
    end_of_line = line_end.start() if line_end else len(text)
    whole_line = " ".join(re.sub(r"[*_`#]+|\\$", " ", text[start:end_of_line]).split())
    quoted = text[start : start + 1] in ('"', "\u201c")
    if line_start and not quoted and _is_titleish(whole_line, max_words=12, min_ratio=0.8):
        return _clean_title(whole_line), end_of_line  # "1. **Case Filing: March 15, 2023**"
    stop = _TITLE_STOP.search(text, start, min(len(text), start + 120))
    end = stop.start() if stop else min(len(text), start + 120)
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
        return _clean_title(candidate), body
    return _clean_title(candidate), end + (1 if text[end] in ".:" else 0)


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
        return _clean_title(line.group()), line.end()
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


def _clean_title(raw: str) -> str:
    title = re.sub(r"[*_`#]+|\\$", " ", raw)
    title = re.sub(r"\s+", " ", title).strip(" .:;,-\u2013\u2014[]")
    return _shorten(title, _TITLE_CHARS)


def _validated_numbering(text: str, candidates: list[_Heading]) -> list[_Heading]:
    """Keep, per numbering family, the best chain of candidates that count up like headings do."""
    for candidate in candidates:
        # A table of contents lists the same numbers as the body, but with no prose under them.
        prose = _LOWERCASE_WORD.findall(text, candidate.start, candidate.start + _BODY_WINDOW_CHARS)
        candidate.has_body = len(prose) >= 8
    kept: list[_Heading] = []
    for family in ("part", "chapter", "article", "roman", "number"):
        members = _drop_tables_of_contents([c for c in candidates if c.family == family])
        chain = _best_chain(members)
        if len(chain) >= 2:
            kept += chain
    return kept


def _drop_tables_of_contents(candidates: list[_Heading]) -> list[_Heading]:
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


def _best_chain(candidates: list[_Heading]) -> list[_Heading]:
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
    chain: list[_Heading] = []
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


def _dedupe(headings: list[_Heading]) -> list[_Heading]:
    unique: list[_Heading] = []
    for heading in headings:
        if unique and unique[-1].start == heading.start:
            if heading.rank < unique[-1].rank:
                unique[-1] = heading
            continue
        unique.append(heading)
    return unique


def _merge_empty_headings(text: str, headings: list[_Heading]) -> list[_Heading]:
    """Drop headings with no body of their own.

    An empty heading before a sibling joins it ("Physical Examination:" + "General Condition:"
    keeps the outer title; a title block of bold lines becomes one heading); an empty heading
    before a higher-ranked one is not structure at all, and its line joins the text before it.
    """
    kept: list[_Heading] = []
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


def _shorten(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    cut = text[: limit - 1].rsplit(" ", 1)[0] if " " in text[: limit - 1] else text[: limit - 1]
    return cut.rstrip(" ,;:") + "\u2026"


# ---------------------------------------------------------------------------------------------
# Units and embeddings


def _make_units(
    text: str,
    headings: list[_Heading],
    title_headings: list[_Heading],
    count_tokens: CountTokens,
    params: _Params,
) -> list[_Unit]:
    heading_at = {heading.start: heading for heading in headings}
    cuts = sorted(heading_at)
    units: list[_Unit] = []
    cursor = 0
    for sentence in split_sentences(text):
        pieces = [sentence.start]
        while cursor < len(cuts) and cuts[cursor] < sentence.end:
            if cuts[cursor] > sentence.start:
                pieces.append(cuts[cursor])  # an inline heading: "... agree. 4. Confidentiality."
            cursor += 1
        pieces.append(sentence.end)
        for index in range(len(pieces) - 1):
            start, end = pieces[index], pieces[index + 1]
            while end > start and text[end - 1].isspace():
                end -= 1
            strength = sentence.break_before if index == 0 else BREAK_SENTENCE
            units.extend(_unit_pieces(text, start, end, strength, count_tokens, params))
    units = _absorb_junk(text, units, heading_at)
    title_ends = {heading.start: heading.title_end for heading in title_headings}
    for unit in units:
        unit.heading = heading_at.get(unit.start)
        title_end = unit.heading.title_end if unit.heading is not None else title_ends.get(unit.start)
        # Nothing but the heading (and a rule under it): it stays with what follows.
        unit.heading_only = title_end is not None and not re.search(r"\w", text[title_end : unit.end])
    return units


def _absorb_junk(text: str, units: list[_Unit], heading_at: dict[int, _Heading]) -> list[_Unit]:
    """Glue rules ("---") and page numbers to the unit before them (the first ones to the next),
    so they never make a leaf of their own nor a similarity dip that attracts a cut."""
    kept: list[_Unit] = []
    pending: _Unit | None = None
    for unit in units:
        piece = text[unit.start : unit.end]
        junk = unit.start not in heading_at and (
            not any(char.isalnum() for char in piece)
            or (len(piece) <= 8 and not any(c.isalpha() for c in piece))
        )
        if junk and kept:
            kept[-1].end, kept[-1].tokens = unit.end, kept[-1].tokens + unit.tokens
        elif junk:
            pending = unit if pending is None else _Unit(pending.start, unit.end, pending.break_before)
        else:
            if pending is not None:
                if unit.start in heading_at:  # "---" atop the document: the first heading takes it
                    heading = heading_at.pop(unit.start)
                    heading.start = pending.start
                    heading_at[heading.start] = heading
                unit.start, unit.tokens = pending.start, unit.tokens + pending.tokens
            pending = None
            kept.append(unit)
    if pending is not None:
        kept.append(pending)
    return kept


def _unit_pieces(
    text: str, start: int, end: int, strength: int, count_tokens: CountTokens, params: _Params
) -> list[_Unit]:
    tokens = count_tokens(text[start:end])
    if tokens <= _RUNAWAY_FACTOR * params.max_leaf_tokens:
        return [_Unit(start, end, strength, tokens)]
    return _cut_runaway(text, start, end, strength, tokens, count_tokens, params)


def _cut_runaway(
    text: str, start: int, end: int, strength: int, tokens: int, count_tokens: CountTokens, params: _Params
) -> list[_Unit]:
    """Cut a run-on "sentence" (a flattened table, text without punctuation) at whitespace.

    It is the one place a leaf may end inside a "sentence": keeping 4x max_leaf_tokens and more
    in one leaf would blow every budget and the embedding window. Without any whitespace the
    cut falls between characters, since there is no better place.
    """
    pieces = math.ceil(tokens / params.max_leaf_tokens)
    step = (end - start) / pieces
    cuts = [start]
    for index in range(1, pieces):
        cut = _whitespace_near(text, int(start + index * step), cuts[-1], end)
        if cut > cuts[-1]:
            cuts.append(cut)
    cuts.append(end)
    units = []
    for index in range(len(cuts) - 1):
        piece_start, piece_end = cuts[index], cuts[index + 1]
        while piece_end > piece_start and text[piece_end - 1].isspace():
            piece_end -= 1
        while piece_start < piece_end and text[piece_start].isspace():
            piece_start += 1
        if piece_end > piece_start:
            piece_strength = strength if index == 0 else BREAK_WRAP
            units.append(
                _Unit(piece_start, piece_end, piece_strength, count_tokens(text[piece_start:piece_end]))
            )
    return units


def _whitespace_near(text: str, position: int, low: int, high: int) -> int:
    """The start of the word at or after the nearest whitespace to ``position``, within bounds."""
    for distance in range(0, 400):
        for candidate in (position - distance, position + distance):
            if low < candidate < high and text[candidate - 1].isspace() and not text[candidate].isspace():
                return candidate
    return position


def _embed_units(text: str, units: list[_Unit], embed: Embed) -> np.ndarray:
    texts = [" ".join(text[unit.start : unit.end].split())[:_EMBED_CHARS] for unit in units]
    vectors = np.asarray(embed(texts), dtype=np.float32)
    if vectors.ndim != 2 or vectors.shape[0] != len(units):
        raise ValueError(f"embed returned {vectors.shape} for {len(units)} texts; expected one row per text")
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    return vectors / norms


# ---------------------------------------------------------------------------------------------
# Segmentation by dynamic programming, shared by leaves (over units) and groups (over leaves)

# Cost of cutting at a boundary of each strength, added to the z-scored similarity across it.
_LEAF_BREAK_COST = {BREAK_WRAP: 3.0, BREAK_SENTENCE: 0.3, BREAK_LINE: 0.0, BREAK_PARAGRAPH: -0.6}
_GROUP_BREAK_COST = {BREAK_WRAP: 2.0, BREAK_SENTENCE: 0.3, BREAK_LINE: -0.2, BREAK_PARAGRAPH: -0.5}
_TITLED_HEADING_BONUS = 2.0
_UNTITLED_HEADING_BONUS = 1.2
# Between groups of leaves a heading is a weaker hint: in a list of small headed items every
# leaf starts with one.
_GROUP_HEADING_BONUS = 1.0
_AFTER_HEADING_PENALTY = 4.0  # never leave a heading line alone at the end of a chunk
_FORCED_CUT = 50.0
# Bold lines and "Label:" lines are also used for emphasis and form fields: they only
# attract cuts, where markdown, numbered and ARTICLE headings force them.
_WEAK_FAMILIES = frozenset(["bold", "label"])


def _segment(
    sizes: Sequence[float],
    break_costs: Sequence[float],
    *,
    target: float,
    min_size: float,
    max_size: float,
    size_weight: float = 1.0,
    free: Sequence[bool] | None = None,
) -> list[int]:
    """Start indices of the cheapest cut of ``sizes`` into consecutive segments.

    A segment costs its squared relative distance from ``target`` (plus a steep penalty under
    ``min_size``); a cut before item i costs ``break_costs[i]``. A segment may exceed
    ``max_size`` only when it holds a single item that is not ``free`` (free items, heading
    lines, ride along without counting against the limit).
    """
    count = len(sizes)
    free = free or [False] * count
    best = [0.0] + [math.inf] * count
    back = [0] * (count + 1)
    for end in range(1, count + 1):
        total, counted, solid = 0.0, 0.0, 0
        for start in range(end - 1, -1, -1):
            total += sizes[start]
            if not free[start]:
                counted += sizes[start]
                solid += 1
            if counted > max_size and solid > 1:
                break
            cost = best[start] + size_weight * ((total - target) / target) ** 2
            if total < min_size:
                cost += 4.0 * (min_size - total) / min_size
            if start > 0:
                cost += break_costs[start]
            if cost < best[end]:
                best[end], back[end] = cost, start
    starts = []
    cursor = count
    while cursor > 0:
        cursor = back[cursor]
        starts.append(cursor)
    return starts[::-1]


def _window_similarities(vectors: np.ndarray, width: int) -> np.ndarray:
    """z-scored cosine similarity across each boundary i (between items i-1 and i), i >= 1."""
    count = len(vectors)
    similarities = np.zeros(count, dtype=np.float32)
    if count < 2:
        return similarities
    cumulative = np.vstack([np.zeros((1, vectors.shape[1]), dtype=np.float32), np.cumsum(vectors, axis=0)])
    boundaries = np.arange(1, count)
    left = cumulative[boundaries] - cumulative[np.maximum(0, boundaries - width)]
    right = cumulative[np.minimum(count, boundaries + width)] - cumulative[boundaries]
    norms = np.linalg.norm(left, axis=1) * np.linalg.norm(right, axis=1)
    norms[norms == 0] = 1.0
    similarities[1:] = np.einsum("ij,ij->i", left, right) / norms
    values = similarities[1:]
    spread = float(values.std()) if len(values) > 2 else 0.0
    similarities[1:] = (values - values.mean()) / spread if spread > 1e-6 else 0.0
    return similarities


# ---------------------------------------------------------------------------------------------
# The tree


@dataclass
class _Draft:
    """A node over the unit range [first, last); no children means a leaf."""

    first: int
    last: int
    heading: _Heading | None = None
    children: list[_Draft] = field(default_factory=list)
    title: str = ""
    summary: str = ""


class _Builder:
    def __init__(self, text: str, units: list[_Unit], vectors: np.ndarray, params: _Params) -> None:
        self.text = text
        self.units = units
        self.vectors = vectors
        self.params = params
        self.unit_at = {unit.start: index for index, unit in enumerate(units)}
        self.prefix_tokens = np.concatenate([[0], np.cumsum([unit.tokens + 1 for unit in units])])
        self.break_costs = np.zeros(len(units))

    def build(self, headings: list[_Heading], document_title: str) -> TreeNode:
        outline = self._outline(headings)
        self.break_costs = self._unit_break_costs()
        root = self._draft(outline, depth=0)
        texts = _NodeTexts(self)
        texts.fill(root, depth=0)
        root.title = document_title or _first_line_title(self.text) or root.title
        return self._tree(root, depth=0)

    # -- outline: headings nested by rank, pruned to what deserves a node of its own

    def _outline(self, headings: list[_Heading]) -> _Outline:
        root = _Outline(None, 0, len(self.units), 0)
        stack = [root]
        for heading in headings:
            first = self.unit_at[heading.start]
            while len(stack) > 1 and stack[-1].heading is not None and stack[-1].heading.rank >= heading.rank:
                stack.pop().last = first
            node = _Outline(heading, first, len(self.units), len(stack))
            stack[-1].children.append(node)
            stack.append(node)
        self._unwrap(root)
        _cap_depth(root, depth=0)
        self._prune(root)
        return root

    def _unwrap(self, root: _Outline) -> None:
        """One heading over nearly everything ("### Criminal Judgment" above all the "####"
        parts) is a title, not a section: its parts become the sections."""
        total = self._tokens(0, len(self.units))
        while True:
            wrappers = [
                child
                for child in root.children
                if len(child.children) >= 2 and self._tokens(child.first, child.last) >= 0.6 * total
            ]
            if not wrappers:
                return
            wrapper = wrappers[0]
            index = root.children.index(wrapper)
            root.children[index : index + 1] = wrapper.children
            # Its heading line opens the first part, like a title above the text.
            wrapper.children[0].first = wrapper.first
            self.units[wrapper.first].heading = None

    def _prune(self, node: _Outline) -> None:
        """Keep the nodes that deserve one (see ``_deserves_node``); the rest become leaf text."""
        node.children = [child for child in node.children if self._deserves_node(child)]
        self._absorb_small_gaps(node)
        for child in node.children:
            self._prune(child)

    def _absorb_small_gaps(self, node: _Outline) -> None:
        """Text too small for a leaf between structural nodes (a parent's heading line right
        before its first subsection, a page footer) joins the next node instead."""
        if not node.children:
            return
        small = self.params.min_leaf_tokens
        if self._tokens(node.first, node.children[0].first) < small:
            node.children[0].first = node.first
        for before, after in zip(node.children, node.children[1:], strict=False):
            if self._tokens(before.last, after.first) < small:
                after.first = before.last
        if self._tokens(node.children[-1].last, node.last) < small:
            node.children[-1].last = node.last

    def _deserves_node(self, node: _Outline) -> bool:
        """Titled top-level headings always make sections (the table of contents an LLM reads);
        deeper ones only when their text needs more than one leaf."""
        tokens = self._tokens(node.first, node.last)
        if node.depth == 1 and node.heading is not None and node.heading.title:
            # Bold lines and "Label:" lines title small form fields too ("Chief Complaint:" with
            # one line under it); those are grouped with their neighbours instead.
            weak = node.heading.family in _WEAK_FAMILIES
            return not weak or tokens > self.params.max_leaf_tokens // 2
        return tokens > self.params.max_leaf_tokens

    # -- drafts: leaves cut within each run of units, runs without structure grouped

    def _draft(self, node: _Outline, depth: int) -> _Draft:
        draft = _Draft(node.first, node.last, node.heading)
        cursor = node.first
        for child in node.children:
            if cursor < child.first:
                draft.children += self._run(cursor, child.first, depth, has_sections=True)
            draft.children.append(self._draft(child, depth + 1))
            cursor = child.last
        if cursor < node.last:
            draft.children += self._run(cursor, node.last, depth, has_sections=bool(node.children))
        return draft

    def _run(self, first: int, last: int, depth: int, *, has_sections: bool) -> list[_Draft]:
        """Leaves for units [first, last) under a node at ``depth``, grouped when there are many."""
        leaves = self._leaves(first, last)
        if depth == 0 and has_sections and 2 <= len(leaves) <= self.params.max_leaves_per_group:
            return [_Draft(first, last, children=leaves)]  # a preamble or an unnumbered stretch
        if depth == 0 and len(leaves) > 4:
            return self._group(leaves, depth + 1, keep_single=True)
        if depth < _MAX_INTERNAL_DEPTH and len(leaves) > self.params.max_leaves_per_group:
            return self._group(leaves, depth + 1, keep_single=False)
        return leaves

    def _leaves(self, first: int, last: int) -> list[_Draft]:
        sizes = [self.units[index].tokens + 1 for index in range(first, last)]
        costs = [float(self.break_costs[index]) for index in range(first, last)]
        starts = _segment(
            sizes,
            costs,
            target=self.params.target_leaf_tokens,
            min_size=self.params.min_leaf_tokens,
            max_size=self.params.max_leaf_tokens,
            free=[self.units[index].heading_only for index in range(first, last)],
        )
        bounds = [first + start for start in starts] + [last]
        return [_Draft(bounds[index], bounds[index + 1]) for index in range(len(starts))]

    def _group(self, leaves: list[_Draft], depth: int, *, keep_single: bool) -> list[_Draft]:
        """Cut a run of leaves into about sqrt(n) groups at low similarity; recurse when large."""
        group_count = max(1, round(math.sqrt(len(leaves))))
        sizes = [float(self._tokens(leaf.first, leaf.last)) for leaf in leaves]
        target = sum(sizes) / group_count
        similarities = _window_similarities(np.stack([self.mean_vector(leaf) for leaf in leaves]), width=2)
        costs = [
            float(similarities[index]) + self._group_break_cost(leaf) for index, leaf in enumerate(leaves)
        ]
        # Sections are judged more by size than leaves are: a similarity dip between two
        # paragraphs should not make a section of one paragraph.
        starts = _segment(
            sizes, costs, target=target, min_size=0.4 * target, max_size=2.5 * target, size_weight=3.0
        )
        if len(starts) == 1 and not keep_single:
            return leaves
        bounds = [*starts, len(leaves)]
        groups: list[_Draft] = []
        for index in range(len(starts)):
            members = leaves[bounds[index] : bounds[index + 1]]
            if len(members) == 1 and not keep_single:
                groups.append(members[0])
                continue
            group = _Draft(members[0].first, members[-1].last, children=members)
            if depth < _MAX_INTERNAL_DEPTH and len(members) > self.params.max_leaves_per_group:
                group.children = self._group(members, depth + 1, keep_single=False)
            groups.append(group)
        return groups

    def _group_break_cost(self, leaf: _Draft) -> float:
        unit = self.units[leaf.first]
        cost = _GROUP_BREAK_COST[unit.break_before]
        if unit.heading is not None:
            cost -= _GROUP_HEADING_BONUS if unit.heading.title else _GROUP_HEADING_BONUS / 2
        return cost

    def _unit_break_costs(self) -> np.ndarray:
        costs = _window_similarities(self.vectors, width=2).astype(np.float64)
        for index in range(1, len(self.units)):
            unit = self.units[index]
            costs[index] += _LEAF_BREAK_COST[unit.break_before]
            if self.units[index - 1].heading_only:
                costs[index] += _AFTER_HEADING_PENALTY  # "## 2. Safety" stays with "### 2.1 ..."
            elif (
                unit.heading is not None and unit.heading.title and unit.heading.family not in _WEAK_FAMILIES
            ):
                costs[index] -= _FORCED_CUT  # a real heading always starts a leaf
            elif unit.heading is not None:
                costs[index] -= _TITLED_HEADING_BONUS if unit.heading.title else _UNTITLED_HEADING_BONUS
        return costs

    # -- helpers shared with titles and summaries

    def _tokens(self, first: int, last: int) -> int:
        return int(self.prefix_tokens[last] - self.prefix_tokens[first])

    def mean_vector(self, draft: _Draft) -> np.ndarray:
        mean = self.vectors[draft.first : draft.last].mean(axis=0)
        norm = float(np.linalg.norm(mean))
        return mean / norm if norm > 0 else mean

    def char_start(self, unit_index: int) -> int:
        return 0 if unit_index == 0 else self.units[unit_index].start

    def char_end(self, unit_index: int) -> int:
        return len(self.text) if unit_index >= len(self.units) else self.units[unit_index].start

    def _tree(self, draft: _Draft, depth: int) -> TreeNode:
        return TreeNode(
            kind=ROOT if depth == 0 else kind_for_depth(depth, is_leaf=not draft.children),
            start_char=self.char_start(draft.first),
            end_char=self.char_end(draft.last),
            title=draft.title,
            summary=draft.summary,
            children=[self._tree(child, depth + 1) for child in draft.children],
        )


# ---------------------------------------------------------------------------------------------
# Titles and summaries

_STOPWORDS = _words(
    "a about above after again against all also am an and any are as at be because been before "
    "being below between both but by can could did do does doing down during each either few for "
    "from further had has have having he her here hereby herein hereof hereto hereunder his how i "
    "if in into is it its itself may might more most must my no nor not now of off on once only "
    "or other our out over own per same shall she should so some such than that the their them "
    "then there these they this those through thus to too under until up upon us very was we were "
    "what when where which while who whom why will with within without would you your january "
    "february march april may june july august september october november december agreement "
    "section party parties forth behalf time times day days month months year years thereof "
    "therein thereto thereunder whether including include includes pursuant respect accordance "
    "provided following set prior subject notwithstanding hereinafter company million billion "
    "thousand total percent"
)
# The only small words a key phrase may hold inside it ("Revocation of Acceptance").
_PHRASE_JOINERS = frozenset(["of", "and", "for", "&"])
_MARKUP = re.compile(r"[*_#`|\\]+|^[=-]{3,}$", re.MULTILINE)
_POSSESSIVE = re.compile(r"['\u2019]s?$")
_WORD = re.compile(r"[^\W\d_][\w'\u2019&-]*")
_PHRASE_BREAK = re.compile(r"[^\w\s'\u2019&-]+|\n")
_LENGTH_BOOST = {1: 1.0, 2: 1.6, 3: 1.9}
_JUNK_TITLE_LINE = re.compile(
    r"^(exhibit|ex-\d|page\b|source:|table of contents|\[|\d+$|execution (copy|version)|confidential"
    r"|certain (portions|information)|last updated)|\b(19|20)\d\d$",
    re.IGNORECASE,
)
_DOCUMENT_KIND = re.compile(
    r"\b(agreement|contract|amendment|addendum|licen[cs]e|lease|deed|memorandum|policy|plan|report|"
    r"record|judgment|judgement|manual|guide|terms|charter|bylaws|minutes|statement)\b",
    re.IGNORECASE,
)


class _NodeTexts:
    """Fills titles and summaries of every internal draft, children before parents."""

    def __init__(self, builder: _Builder) -> None:
        self.builder = builder
        text = builder.text
        # Each unit once, markup stripped and blanks collapsed: what titles and summaries quote.
        self.plain = [
            " ".join(_MARKUP.sub(" ", text[unit.start : unit.end]).split()) for unit in builder.units
        ]
        self.footprints = [_footprint(sentence) for sentence in self.plain]
        self.leaf_firsts: list[int] = []
        self._leaf_counts: list[Counter[str]] | None = None
        self._document_frequency: Counter[str] = Counter()
        self._surface: dict[str, str] = {}
        self._repeated: set[str] = set()

    def fill(self, draft: _Draft, depth: int, inherited: _Heading | None = None) -> None:
        if depth == 0:
            self.leaf_firsts = [leaf.first for leaf in _leaves_of(draft)]
            self._repeated = self._repeated_lines()
        for child in draft.children:
            if child.children:
                self.fill(child, depth + 1, draft.heading or inherited)
        draft.title = (
            self._title(draft, depth, inherited)
            or _shorten(self._plain(draft.first, draft.last), 40)
            or "Part"
        )
        draft.summary = self._summary(draft) or draft.title

    def _title(self, draft: _Draft, depth: int, inherited: _Heading | None) -> str:
        if draft.heading is not None and draft.heading.title:
            return draft.heading.title
        if draft.heading is None and depth > 0:
            # A group of small headed parts ("Chief Complaint", "Present Illness") is named by them.
            units = self.builder.units[draft.first : draft.last]
            titles = [
                unit.heading.title
                for unit in units
                if unit.heading is not None and unit.heading.title and unit.heading is not inherited
            ]
            if titles:
                return _shorten("; ".join(titles[:3]) + ("; \u2026" if len(titles) > 3 else ""), _TITLE_CHARS)
        phrases = self._key_phrases(draft, distinctive=depth > 0)
        if draft.heading is not None and draft.heading.label:
            return f"{draft.heading.label} {phrases}".strip()
        return phrases

    def _summary(self, draft: _Draft) -> str:
        units = self.builder.units
        candidates = [
            index
            for index in range(draft.first, draft.last)
            if not units[index].heading_only
            and self.plain[index].count(" ") >= 3
            and self.footprints[index] not in self._repeated
        ]
        if not candidates:
            return _shorten_words(self._plain(draft.first, draft.last), _SUMMARY_WORDS)
        leaf_vectors = np.stack([self.builder.mean_vector(leaf) for leaf in _leaves_of(draft)])
        centroid = leaf_vectors.mean(axis=0)
        scores = self.builder.vectors[candidates] @ centroid
        chosen: list[int] = []
        words = 0
        for position in np.argsort(-scores, kind="stable"):
            index = candidates[int(position)]
            length = self.plain[index].count(" ") + 1
            if chosen and words + length > _SUMMARY_WORDS:
                continue
            chosen.append(index)
            words += length
            if len(chosen) >= _SUMMARY_SENTENCES or words >= _SUMMARY_WORDS * 2 // 3:
                break
        summary = " ".join(self.plain[index] for index in sorted(chosen))
        return _shorten_words(summary, _SUMMARY_WORDS)

    def _repeated_lines(self) -> set[str]:
        """Units seen more than once up to digits: page headers and footers, never summary material."""
        seen = Counter(self.footprints)
        return {footprint for footprint, count in seen.items() if count > 1}

    def _plain(self, first: int, last: int) -> str:
        return " ".join(sentence for sentence in self.plain[first:last] if sentence)

    # -- key phrases: n-grams frequent in the node and rare in the rest of the document

    def _key_phrases(self, draft: _Draft, *, distinctive: bool) -> str:
        counts = self._counts()
        low = bisect.bisect_left(self.leaf_firsts, draft.first)
        high = bisect.bisect_left(self.leaf_firsts, draft.last)
        total: Counter[str] = Counter()
        for leaf_counts in counts[low:high]:
            total.update(leaf_counts)
        leaf_count = len(counts)

        def score(phrase: str) -> float:
            weight = total[phrase] * _LENGTH_BOOST[phrase.count(" ") + 1]
            if distinctive:
                weight *= math.log((leaf_count + 1) / self._document_frequency[phrase])
            return weight

        chosen: list[str] = []
        used_words: set[str] = set()
        for phrase in sorted(total, key=lambda phrase: (-score(phrase), phrase)):
            words = set(phrase.split())
            if words & used_words or score(phrase) <= 0:
                continue
            chosen.append(self._surface[phrase])
            used_words |= words
            if len(chosen) == 3 or sum(len(item) for item in chosen) > 45:
                break
        title = ", ".join(chosen)
        return _shorten(title[:1].upper() + title[1:], _TITLE_CHARS)

    def _counts(self) -> list[Counter[str]]:
        if self._leaf_counts is None:
            bounds = [*self.leaf_firsts, len(self.builder.units)]
            self._leaf_counts = [
                self._phrases(bounds[i], bounds[i + 1]) for i in range(len(self.leaf_firsts))
            ]
            for leaf_counts in self._leaf_counts:
                self._document_frequency.update(leaf_counts.keys())
        return self._leaf_counts

    def _phrases(self, first: int, last: int) -> Counter[str]:
        counts: Counter[str] = Counter()
        for segment in _PHRASE_BREAK.split(self._plain(first, last)):
            words = [_POSSESSIVE.sub("", word) for word in _WORD.findall(segment)]
            lowered = [word.lower() for word in words]
            for size in (1, 2, 3):
                for start in range(len(words) - size + 1):
                    gram = lowered[start : start + size]
                    if not (_phrase_edge(gram[0]) and _phrase_edge(gram[-1])):
                        continue
                    if size == 3 and gram[1] in _STOPWORDS and gram[1] not in _PHRASE_JOINERS:
                        continue
                    if size == 1 and len(gram[0]) < 4:
                        continue
                    phrase = " ".join(gram)
                    counts[phrase] += 1
                    self._surface.setdefault(phrase, " ".join(words[start : start + size]))
        return counts


def _footprint(sentence: str) -> str:
    return re.sub(r"[\d\W_]+", " ", sentence.lower()).strip()


@functools.cache
def _phrase_edge(word: str) -> bool:
    """Phrases start and end with content words; "-ed" and "-ly" words are mostly verbs and
    adverbs ("allowed", "further expanded"), which make poor titles."""
    if word in _STOPWORDS or len(word) < 3:
        return False
    return not (len(word) > 4 and (word.endswith("ed") or word.endswith("ly")))


def _cap_depth(node: _Outline, depth: int) -> None:
    """Renumber depths; headings below the deepest internal level stay inside their ancestor as
    preferred leaf starts (a depth cap never drops text: it was never cut out of the parent)."""
    node.depth = depth
    if depth >= _MAX_INTERNAL_DEPTH:
        node.children = []
    for child in node.children:
        _cap_depth(child, depth + 1)


def _leaves_of(draft: _Draft) -> list[_Draft]:
    if not draft.children:
        return [draft]
    return [leaf for child in draft.children for leaf in _leaves_of(child)]


def _shorten_words(text: str, limit: int) -> str:
    words = text.split()
    return text if len(words) <= limit else " ".join(words[:limit]) + "\u2026"


def _split_document_title(text: str, headings: list[_Heading]) -> tuple[list[_Heading], list[_Heading]]:
    """Top headings at the very start title the document rather than a section: "# Manual", or
    "# Bayside Court" + "## Criminal Case Judgment" above "###" parts, or "**Hospitalization
    Record**" right before "**Basic Information:**"."""
    titles: list[_Heading] = []
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


def _first_line_title(text: str) -> str:
    """A short line near the top: the first naming the kind of document ("RESELLER AGREEMENT"),
    else the first that is not an exhibit number, a date or a filing notice; none when the text
    opens with a paragraph."""
    candidates: list[str] = []
    for raw in re.split(r"\n|[ \t\u00a0]{3,}", text[:1500])[:12]:
        line = " ".join(re.sub(r"[*_`#]+", " ", raw).split()).strip(" .:;,-")
        if not re.search(r"[^\W\d_]{2}", line) or _JUNK_TITLE_LINE.search(line):
            continue
        line = line.strip("[]")
        if len(line.split()) > 12 or len(line) > _TITLE_CHARS:
            caps = re.match(r"^(?:[A-Z][A-Z&,'-]+\s+){1,7}[A-Z][A-Z&'-]+\b", line)
            if caps and not candidates and _DOCUMENT_KIND.search(caps.group()):
                return caps.group()  # "SERVICE AGREEMENT This Agreement is entered into ..."
            break
        if _DOCUMENT_KIND.search(line) and not line.lower().startswith("this "):
            return _clean_title(line)
        candidates.append(line)
    return _clean_title(candidates[0]) if candidates else ""
