"""The structural tree builder: a FABLE tree without an LLM.

Pipeline (pure, no Django):
1. sentences (``sentences.split_sentences``), cut again where a heading starts so every heading
   begins a unit; a unit is the smallest piece a leaf is made of and is never split further
   (except an absurdly long run-on "sentence", see ``_cut_runaway``);
2. headings (markdown, setext, bold lines, "Label:" lines, numbered / ARTICLE / Section clauses,
   inline or not), numbering validated as sequences, then nested into an outline by rank;
3. one ``embed`` call for all units;
4. leaves: each run of units between structural nodes is cut by dynamic programming, preferring
   low similarity between neighbours, paragraph ends and headings, and sizes near a target;
5. runs of leaves without heading structure are grouped into sections / subsections the same way;
6. titles from headings or distinctive key phrases, summaries from the most central sentences.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from documents.ingestion.sentences import BREAK_LINE, BREAK_PARAGRAPH, BREAK_SENTENCE, BREAK_WRAP, split_sentences
from documents.ingestion.tree import LEAF, ROOT, TreeNode, kind_for_depth

Embed = Callable[[Sequence[str]], np.ndarray]
CountTokens = Callable[[str], int]

# Deepest internal node (root 0, section 1, subsections 2-3); leaves go one deeper at most.
_MAX_INTERNAL_DEPTH = 3
# A run-on "sentence" longer than this many times max_leaf_tokens (tables flattened to one line,
# text without punctuation) is cut at whitespace; shorter long sentences stay whole in one leaf.
_RUNAWAY_FACTOR = 4
# A heading line or a page-number fragment may ride along with a sentence longer than the limit.
_ATTACH_TOKENS = 24
_EMBED_CHARS = 2000  # e5 reads 512 tokens at most; longer texts only cost tokenizer time
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
    params = _Params(max_leaf_tokens, min(target_leaf_tokens, max_leaf_tokens), min_leaf_tokens, max_leaves_per_group)
    document_title, headings = detect_headings(text)
    units = _make_units(text, headings, count_tokens, params)
    if not units:
        return _empty_tree(text)
    vectors = _embed_units(text, units, embed)
    builder = _Builder(text, units, vectors, params)
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

_LINE = re.compile(r"[^\r\n]+")
_ATX = re.compile(r"^ {0,3}(#{1,6})[ \t]+(.*?)[ \t#]*$")
_SETEXT_RULE = re.compile(r"^ {0,3}(=+|-+)[ \t]*$")
_BOLD_LINE = re.compile(r"^\s*(\*\*|__)(?P<inner>[^*_\n]{1,100}?)\1\s*:?\s*\\?\s*$")
_LABEL_LINE = re.compile(r"^\s*(?P<inner>[A-Z][^:\n]{0,60}?)\s*:\s*$")
_ROMAN_VALUES = {"I": 1, "V": 5, "X": 10, "L": 50, "C": 100}
_NUMBERED = re.compile(
    r"(?P<kw>ARTICLE|Article|SECTION|Section|PART|Part|CHAPTER|Chapter)\s+"
    r"(?P<kwnum>\d{1,3}(?:\.\d{1,3}){0,3}|[IVXLC]{1,7})(?=[\s.:\-\u2013\u2014])\.?"
    r"|(?P<multi>\d{1,2}(?:\.\d{1,3}){1,3})\.?(?=\s)"
    r"|(?P<one>\d{1,2})[.)](?=\s)"
    r"|(?P<roman>[IVXL]{1,6})\.(?=\s)"
)
_BEFORE_INLINE = frozenset(".:;!?)\"\u201d]")
_TITLE_STOP = re.compile(r"[.:](?=\s)|\n|\r|[ \t\u00a0]{3,}")
_SMALL_WORDS = frozenset("a an and as at by for in of on or the to with from into under upon its".split())
_SENTENCE_STARTERS = frozenset(
    "The This These That Each Either Neither In If Any All Subject Upon Except Notwithstanding No "
    "Unless Within During Without Such For A An It Where When Following Prior Both Nothing".split()
)
_MARKDOWN_RANK = -100.0  # markdown levels sit above every other kind of heading
_ARTICLE_RANK = 10.0
_ROMAN_RANK = 11.0
_BOLD_RANK = 50.0
_LABEL_RANK = 60.0
# A table of contents repeats the headings close together; the real ones come later.
_TOC_GAP_CHARS = 120
_TOC_RUN = 4


def detect_headings(text: str) -> tuple[str, list[_Heading]]:
    """The document's own title heading, if any, and the other headings in document order."""
    line_headings, claimed, labels = _line_headings(text)
    numbered = _numbered_candidates(text, claimed)
    headings = line_headings + _validated_numbering(numbered)
    if not headings and len(labels) >= 3:
        headings = labels
    headings.sort(key=lambda heading: heading.start)
    document_title, headings = _split_document_title(text, _dedupe(headings))
    return document_title, _merge_empty_headings(text, headings)


def _line_headings(text: str) -> tuple[list[_Heading], set[int], list[_Heading]]:
    """Markdown, setext, bold and label lines; also the line starts they claim."""
    lines = [(match.start(), match.end()) for match in _LINE.finditer(text)]
    found: list[_Heading] = []
    bold: list[_Heading] = []
    labels: list[_Heading] = []
    claimed: set[int] = set()
    for index, (start, end) in enumerate(lines):
        line = text[start:end]
        content_start = start + len(line) - len(line.lstrip())
        atx = _ATX.match(line)
        if atx and atx.group(2).strip():
            found.append(_Heading(content_start, end, _MARKDOWN_RANK + len(atx.group(1)), _clean_title(atx.group(2))))
            claimed.add(content_start)
            continue
        next_line = text[lines[index + 1][0] : lines[index + 1][1]] if index + 1 < len(lines) else ""
        adjacent = index + 1 < len(lines) and text.count("\n", end, lines[index + 1][0]) <= 1
        rule = _SETEXT_RULE.match(next_line)
        if rule and adjacent and _is_titleish(line.strip(), max_words=15) and not _SETEXT_RULE.match(line):
            level = 1 if rule.group(1).startswith("=") else 2
            found.append(_Heading(content_start, lines[index + 1][1], _MARKDOWN_RANK + level, _clean_title(line)))
            claimed.add(content_start)
            continue
        bold_match = _BOLD_LINE.match(line)
        if bold_match and not _NUMBERED.match(bold_match.group("inner").strip()):
            inner = bold_match.group("inner")
            if _is_titleish(inner, max_words=14):
                bold.append(_Heading(content_start, end, _BOLD_RANK, _clean_title(inner), family="bold"))
            claimed.add(content_start)
            continue
        label = _LABEL_LINE.match(line)
        if label and next_line.strip() and _is_titleish(label.group("inner"), max_words=8):
            labels.append(_Heading(content_start, end, _LABEL_RANK, _clean_title(label.group("inner")), family="label"))
    # A lone bold line is emphasis, not structure; "Label:" lines (forms, medical records) are
    # the last resort, because contracts are full of "ADDRESS:" and "By:" lines.
    found += bold if len(bold) >= 2 else []
    return found, claimed, labels


def _numbered_candidates(text: str, claimed: set[int]) -> list[_Heading]:
    candidates: list[_Heading] = []
    for match in _NUMBERED.finditer(text):
        start = match.start()
        line_start = _at_line_start(text, start)
        if start in claimed or not (line_start or _after_sentence(text, start)):
            continue
        if match.group("roman") and not line_start:
            continue  # "... by I. Ward": bare roman numerals only count at the start of a line
        candidate = _numbered_heading(text, match, line_start)
        if candidate is not None:
            candidates.append(candidate)
    return candidates


def _at_line_start(text: str, position: int) -> bool:
    cursor = position - 1
    while cursor >= 0 and text[cursor] in " \t\u00a0*#>_":
        cursor -= 1
    return cursor < 0 or text[cursor] in "\r\n"


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
    title, title_end = _numbered_title(text, after, keyword=bool(match.group("kw")))
    marker = match.group() if match.group("one") or match.group("roman") else match.group().rstrip(".")
    full_title = f"{marker} {title}".strip() if title else ""
    rank = {"article": _ARTICLE_RANK, "roman": _ROMAN_RANK}.get(family, _ROMAN_RANK + len(path))
    return _Heading(match.start(), max(title_end, match.end()), rank, full_title, family, path, line_start, marker)


def _numbering(match: re.Match[str]) -> tuple[str, tuple[int, ...]]:
    if match.group("kw"):
        number = match.group("kwnum")
        if match.group("kw").lower() == "section":
            return ("number", _dotted(number)) if number[0].isdigit() else ("article", (_roman(number),))
        return "article", (_dotted(number)[0] if number[0].isdigit() else _roman(number),)
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


def _numbered_title(text: str, start: int, *, keyword: bool) -> tuple[str, int]:
    """The short title after a number ("4. Confidentiality. Each ..."), or "" when there is none."""
    stop = _TITLE_STOP.search(text, start, min(len(text), start + 120))
    end = stop.start() if stop else min(len(text), start + 120)
    candidate = text[start:end].strip().strip("*_[]").strip()
    if not candidate and keyword:
        return _next_line_title(text, start)
    if candidate.startswith(("\"", "\u201c")):
        return "", start  # '2.1 "Product" means ...': a definition, not a title
    if _is_titleish(candidate, max_words=12):
        return _clean_title(candidate), end + (1 if stop and text[end] in ".:" else 0)
    return _title_prefix(text, start)


def _next_line_title(text: str, start: int) -> tuple[str, int]:
    """ "ARTICLE 1\\n\\nINTERPRETATION": the title sits alone on the next line."""
    line = _LINE.search(text, start)
    if line and text.count("\n", start, line.start()) <= 2 and _is_titleish(line.group().strip(), max_words=10):
        return _clean_title(line.group()), line.end()
    return "", start


def _title_prefix(text: str, start: int) -> tuple[str, int]:
    """ "6. Closing The sale of ...": capitalised words up to a sentence that starts without stop."""
    words = list(re.finditer(r"\S+", text[start : start + 120]))
    for count in range(1, min(6, len(words) - 1) + 1):
        word, nxt, after = words[count - 1].group(), words[count].group(), words[count + 1].group()
        if not (word[0].isupper() or word.lower() in _SMALL_WORDS) or word[-1] in ".,;:":
            return "", start
        if nxt in _SENTENCE_STARTERS and after[0].islower() and word.lower() not in _SMALL_WORDS:
            prefix = text[start : start + words[count - 1].end()]
            return _clean_title(prefix), start + words[count - 1].end()
    return "", start


def _is_titleish(candidate: str, *, max_words: int) -> bool:
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
    return capitalised / len(content) >= 0.6 and words[-1].lower() not in _SMALL_WORDS - {"in", "on"}


def _clean_title(raw: str) -> str:
    title = re.sub(r"[*_`#]+|\\$", " ", raw)
    title = re.sub(r"\s+", " ", title).strip(" .:;,-\u2013\u2014[]")
    return _shorten(title, _TITLE_CHARS)


def _validated_numbering(candidates: list[_Heading]) -> list[_Heading]:
    """Keep, per numbering family, the best chain of candidates that count up like headings do."""
    kept: list[_Heading] = []
    for family in ("article", "roman", "number"):
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
    "4.2" or "4.1" (one missed), "3" may follow "2.9". Indexing chains by number prefix keeps this
    linear in the number of candidates.
    """
    scores: list[float] = []
    previous: list[int] = []
    best_exact: dict[tuple[int, ...], int] = {}
    best_prefix: dict[tuple[int, ...], int] = {}
    for index, candidate in enumerate(candidates):
        path = candidate.path
        weight = 1.0 + (1.0 if candidate.title else 0.0) + (0.5 if candidate.line_start else 0.0)
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
                options.append((("prefix", path[:level] + (path[level] - gap,)), penalty))
        if path[level] == 1 and level > 0:
            options.append((("exact", path[:level]), 0.0))
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
            following.start, following.title = heading.start, heading.title or following.title
    return kept[::-1]


def _shorten(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    cut = text[: limit - 1].rsplit(" ", 1)[0] if " " in text[: limit - 1] else text[: limit - 1]
    return cut.rstrip(" ,;:") + "\u2026"


# ---------------------------------------------------------------------------------------------
# Units and embeddings


def _make_units(text: str, headings: list[_Heading], count_tokens: CountTokens, params: _Params) -> list[_Unit]:
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
    for unit in units:
        unit.heading = heading_at.get(unit.start)
        if unit.heading is not None:
            unit.heading_only = unit.end <= unit.heading.title_end
    return units


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
            units.append(_Unit(piece_start, piece_end, piece_strength, count_tokens(text[piece_start:piece_end])))
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
_AFTER_HEADING_PENALTY = 4.0  # never leave a heading line alone at the end of a chunk


def _segment(
    sizes: Sequence[float],
    break_costs: Sequence[float],
    *,
    target: float,
    min_size: float,
    max_size: float,
    size_weight: float = 1.0,
) -> list[int]:
    """Start indices of the cheapest cut of ``sizes`` into consecutive segments.

    A segment costs its squared relative distance from ``target`` (plus a penalty under
    ``min_size``); a cut before item i costs ``break_costs[i]``. A segment over ``max_size`` is
    allowed only for one large item carrying at most ``_ATTACH_TOKENS`` of small ones along.
    """
    count = len(sizes)
    best = [0.0] + [math.inf] * count
    back = [0] * (count + 1)
    for end in range(1, count + 1):
        total, largest = 0.0, 0.0
        for start in range(end - 1, -1, -1):
            total += sizes[start]
            largest = max(largest, sizes[start])
            if total > max_size and not (largest > max_size and total - largest <= _ATTACH_TOKENS):
                if end - start > 1:
                    break
            cost = best[start] + size_weight * ((total - target) / target) ** 2
            if total < min_size:
                cost += 1.5 * (min_size - total) / min_size
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
        self.break_costs = self._unit_break_costs()

    def build(self, headings: list[_Heading], document_title: str) -> TreeNode:
        outline = self._outline(headings)
        root = self._draft(outline, depth=0)
        texts = _NodeTexts(self)
        texts.fill(root, depth=0)
        root.title = document_title or _preamble_title(self.text, headings) or root.title
        return self._tree(root, depth=0)

    # -- outline: headings nested by rank, pruned to what deserves a node of its own

    def _outline(self, headings: list[_Heading]) -> _Outline:
        root = _Outline(None, 0, len(self.units), 0)
        stack = [root]
        for heading in headings:
            first = self.unit_at[heading.start]
            while len(stack) > 1 and stack[-1].heading is not None and stack[-1].heading.rank >= heading.rank:
                stack.pop().last = first
            if len(stack) > _MAX_INTERNAL_DEPTH:
                continue  # deeper headings stay inside their ancestor as preferred leaf starts
            node = _Outline(heading, first, len(self.units), len(stack))
            stack[-1].children.append(node)
            stack.append(node)
        self._prune(root)
        return root

    def _prune(self, node: _Outline) -> None:
        node.children = [child for child in node.children if self._deserves_node(child)]
        for child in node.children:
            self._prune(child)

    def _deserves_node(self, node: _Outline) -> bool:
        """Titled top-level headings always make sections (the table of contents an LLM reads);
        deeper ones only when their text needs more than one leaf."""
        if node.depth == 1 and node.heading is not None and node.heading.title:
            return True
        return self._tokens(node.first, node.last) > self.params.max_leaf_tokens

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
        if depth == 0 and len(leaves) >= 2 and (has_sections or len(leaves) > 4):
            return self._group(leaves, depth + 1, keep_single=True)
        if not has_sections and depth < _MAX_INTERNAL_DEPTH and len(leaves) > self.params.max_leaves_per_group:
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
        )
        bounds = [first + start for start in starts] + [last]
        return [_Draft(bounds[index], bounds[index + 1]) for index in range(len(starts))]

    def _group(self, leaves: list[_Draft], depth: int, *, keep_single: bool) -> list[_Draft]:
        """Cut a run of leaves into about sqrt(n) groups at low similarity; recurse when large."""
        group_count = max(1, round(math.sqrt(len(leaves))))
        sizes = [float(self._tokens(leaf.first, leaf.last)) for leaf in leaves]
        target = sum(sizes) / group_count
        similarities = _window_similarities(np.stack([self._mean_vector(leaf) for leaf in leaves]), width=2)
        costs = [float(similarities[index]) + self._group_break_cost(leaf) for index, leaf in enumerate(leaves)]
        # Sections are judged more by size than leaves are: a similarity dip between two
        # paragraphs should not make a section of one paragraph.
        starts = _segment(sizes, costs, target=target, min_size=0.4 * target, max_size=2.5 * target, size_weight=3.0)
        if len(starts) == 1 and not keep_single:
            return leaves
        bounds = starts + [len(leaves)]
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
            cost -= _TITLED_HEADING_BONUS if unit.heading.title else _UNTITLED_HEADING_BONUS
        return cost

    def _unit_break_costs(self) -> np.ndarray:
        costs = _window_similarities(self.vectors, width=2).astype(np.float64)
        for index in range(1, len(self.units)):
            unit = self.units[index]
            costs[index] += _LEAF_BREAK_COST[unit.break_before]
            if unit.heading is not None:
                costs[index] -= _TITLED_HEADING_BONUS if unit.heading.title else _UNTITLED_HEADING_BONUS
            if self.units[index - 1].heading_only:
                costs[index] += _AFTER_HEADING_PENALTY
        return costs

    # -- helpers shared with titles and summaries

    def _tokens(self, first: int, last: int) -> int:
        return int(self.prefix_tokens[last] - self.prefix_tokens[first])

    def _mean_vector(self, draft: _Draft) -> np.ndarray:
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

_STOPWORDS = frozenset(
    """a about above after again against all also am an and any are as at be because been before being
    below between both but by can could did do does doing down during each either few for from further
    had has have having he her here hereby herein hereof hereto hereunder his how i if in into is it its
    itself may might more most must my no nor not now of off on once only or other our out over own per
    same shall she should so some such than that the their them then there these they this those through
    thus to too under until up upon us very was we were what when where which while who whom why will
    with within without would you your january february march april may june july august september
    october november december""".split()
)
_WORD = re.compile(r"[^\W\d_][\w'\u2019&-]*")
_PHRASE_BREAK = re.compile(r"[^\w\s'\u2019&-]+|\n")
_LENGTH_BOOST = {1: 1.0, 2: 1.6, 3: 1.9}
_JUNK_TITLE_LINE = re.compile(r"^(exhibit|ex-\d|page\b|source:|table of contents|\[|\d+$)", re.IGNORECASE)


class _NodeTexts:
    """Fills titles and summaries of every internal draft, children before parents."""

    def __init__(self, builder: _Builder) -> None:
        self.builder = builder
        self.leaf_firsts: list[int] = []
        self._leaf_counts: list[Counter[str]] | None = None
        self._document_frequency: Counter[str] = Counter()
        self._surface: dict[str, str] = {}

    def fill(self, draft: _Draft, depth: int) -> None:
        if depth == 0:
            self.leaf_firsts = [leaf.first for leaf in _leaves_of(draft)]
        for child in draft.children:
            if child.children:
                self.fill(child, depth + 1)
        draft.title = self._title(draft, depth) or _shorten(self._plain(draft.first, draft.last), 40) or "Part"
        draft.summary = self._summary(draft) or draft.title

    def _title(self, draft: _Draft, depth: int) -> str:
        heading = draft.heading or self.builder.units[draft.first].heading
        if heading is not None and heading.title:
            return heading.title
        phrases = self._key_phrases(draft, distinctive=depth > 0)
        if draft.heading is not None and draft.heading.label:
            return f"{draft.heading.label} {phrases}".strip()
        return phrases

    def _summary(self, draft: _Draft) -> str:
        units = self.builder.units
        candidates = [
            index
            for index in range(draft.first, draft.last)
            if not units[index].heading_only and len(self._plain(index, index + 1).split()) >= 4
        ]
        if not candidates:
            return _shorten_words(self._plain(draft.first, draft.last), _SUMMARY_WORDS)
        leaf_vectors = np.stack([self.builder._mean_vector(leaf) for leaf in _leaves_of(draft)])
        centroid = leaf_vectors.mean(axis=0)
        scores = self.builder.vectors[candidates] @ centroid
        chosen: list[int] = []
        words = 0
        for position in np.argsort(-scores, kind="stable"):
            index = candidates[int(position)]
            length = len(self._plain(index, index + 1).split())
            if chosen and words + length > _SUMMARY_WORDS:
                continue
            chosen.append(index)
            words += length
            if len(chosen) >= _SUMMARY_SENTENCES or words >= _SUMMARY_WORDS * 2 // 3:
                break
        summary = " ".join(self._plain(index, index + 1) for index in sorted(chosen))
        return _shorten_words(summary, _SUMMARY_WORDS)

    def _plain(self, first: int, last: int) -> str:
        units = self.builder.units
        if first >= last:
            return ""
        raw = self.builder.text[units[first].start : units[last - 1].end]
        return " ".join(re.sub(r"[*_#`|\\]+|^[=-]{3,}$", " ", raw, flags=re.MULTILINE).split())

    # -- key phrases: n-grams frequent in the node and rare in the rest of the document

    def _key_phrases(self, draft: _Draft, *, distinctive: bool) -> str:
        counts = self._counts()
        low = _bisect(self.leaf_firsts, draft.first)
        high = _bisect(self.leaf_firsts, draft.last)
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
            bounds = self.leaf_firsts + [len(self.builder.units)]
            self._leaf_counts = [self._phrases(bounds[i], bounds[i + 1]) for i in range(len(self.leaf_firsts))]
            for leaf_counts in self._leaf_counts:
                self._document_frequency.update(leaf_counts.keys())
        return self._leaf_counts

    def _phrases(self, first: int, last: int) -> Counter[str]:
        counts: Counter[str] = Counter()
        for segment in _PHRASE_BREAK.split(self._plain(first, last)):
            words = _WORD.findall(segment)
            lowered = [word.lower() for word in words]
            for size in (1, 2, 3):
                for start in range(len(words) - size + 1):
                    gram = lowered[start : start + size]
                    if gram[0] in _STOPWORDS or gram[-1] in _STOPWORDS or len(gram[-1]) < 3:
                        continue
                    if size == 1 and len(gram[0]) < 4:
                        continue
                    phrase = " ".join(gram)
                    counts[phrase] += 1
                    self._surface.setdefault(phrase, " ".join(words[start : start + size]))
        return counts


def _leaves_of(draft: _Draft) -> list[_Draft]:
    if not draft.children:
        return [draft]
    return [leaf for child in draft.children for leaf in _leaves_of(child)]


def _bisect(values: list[int], target: int) -> int:
    low, high = 0, len(values)
    while low < high:
        middle = (low + high) // 2
        if values[middle] < target:
            low = middle + 1
        else:
            high = middle
    return low


def _shorten_words(text: str, limit: int) -> str:
    words = text.split()
    return text if len(words) <= limit else " ".join(words[:limit]) + "\u2026"


def _split_document_title(text: str, headings: list[_Heading]) -> tuple[str, list[_Heading]]:
    """A top heading at the very start ("# Manual", "**Hospitalization Record**" right before
    "**Basic Information:**") titles the document rather than a section."""
    if not headings:
        return "", headings
    first, rest = headings[0], headings[1:]
    if first.family not in ("", "bold") or re.search(r"\w", text[: first.start]):
        return "", headings
    empty_body = bool(rest) and not re.search(r"\w", text[first.title_end : rest[0].start])
    if all(heading.rank > first.rank for heading in rest) or (
        empty_body and all(heading.rank >= first.rank for heading in rest)
    ):
        return first.title, rest
    return "", headings


def _preamble_title(text: str, headings: list[_Heading]) -> str:
    """The first short line before any heading ("RESELLER AGREEMENT"), skipping exhibit numbers."""
    end = headings[0].start if headings else len(text)
    for raw in re.split(r"\n|[ \t\u00a0]{3,}", text[: min(end, 1500)])[:12]:
        line = " ".join(re.sub(r"[*_`#]+", " ", raw).split()).strip(" .:;,-[]")
        if not re.search(r"[^\W\d_]{2}", line) or _JUNK_TITLE_LINE.match(line):
            continue
        if len(line.split()) <= 12 and len(line) <= _TITLE_CHARS:
            return _clean_title(line)
        caps = re.match(r"^(?:[A-Z][A-Z&,'-]+\s+){1,7}[A-Z][A-Z&'-]+\b", line)
        return caps.group() if caps else ""
    return ""
