"""How well a document's tree follows its real headings (pure, no Django): the measures of
``python -m fable_benchmarks bench-structure`` (``structure_run`` runs the documents through the
product, ``structure_report`` adds the scores up per format and prints them; this module scores).

Given the extracted text, the built tree (``BuiltNode``: kind, span, title, depth, parent) and the
gold headings (text, level), per document:

- **located**: each gold heading found in the text, in order, each after the previous, compared
  normalised (NFKC, curly quotes straight, dashes as "-", markdown ``#``/``*``/``_`` marks out,
  whitespace collapsed, case folded; failing that with no whitespace at all: a PDF may glue
  "1.DEFINITIONS"). A line start is preferred to a mention inside a sentence, and the gold page to
  the rest of the text. A heading that is not found is *not located*: a fault of the gold or of
  extraction, not of the tree, so it counts in no measure below;
- **recall**: located headings where an internal node (not the root, not a leaf) starts at the
  heading (only whitespace or markup between) and carries it as its title;
- **level agreement**: among matched headings, those whose node's parent is the node matched for
  the gold parent heading (the nearest heading before it with a smaller level; the root for a top
  one). A parent heading that was not matched makes its children disagree;
- **buried**: located headings that lie inside a leaf, not at its start, where no internal node
  starts: the tree does not see them at all;
- **invented**: internal nodes (not the root) that start inside a heading's span but at no located
  heading, as a share of all internal nodes: sections the builder made from body text. Those
  that start before the first heading (a "Preamble" over the cover page and the parties) are
  front matter, not inside any heading's span: listed, not counted;
- **title opened a section**: the document's title line, when the gold names one, must not.

Per format the counts add up (micro-averages): ``structure_report``.
"""

from __future__ import annotations

import bisect
import difflib
import re
import unicodedata
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any, Protocol

FORMATS = ("pdf", "pdf-bookmarks", "docx", "html", "markdown")
ROOT, LEAF = "root", "leaf"

_QUOTES = str.maketrans(
    {"\u2018": "'", "\u2019": "'", "\u201a": "'", "\u201b": "'", "\u2032": "'"}
    | {"\u201c": '"', "\u201d": '"', "\u201e": '"', "\u201f": '"', "\u2033": '"'}
    | dict.fromkeys("\u2010\u2011\u2012\u2013\u2014\u2212", "-")
)
# Markup that never makes two headings different: emphasis marks, and the "#" of a markdown
# heading line (matched by _HEADING_MARKS, so a "#" inside a sentence stays).
_MARKUP = frozenset("*_`")
_HEADING_MARKS = re.compile(r"^[ \t]*#{1,6}(?=[ \t])", re.MULTILINE)
_ONLY_MARKUP = re.compile(r"[\s#*_`]*")
_TITLE_WORDS = re.compile(r"\w+")
_LABELS = frozenset(
    {"article", "section", "clause", "part", "chapter", "schedule", "exhibit", "annex", "appendix"}
    | {"attachment", "addendum"}
)
_ROMAN = re.compile(r"^(?=[ivxl])(x{0,3})(ix|iv|v?i{0,3})$")
_SIMILAR = 0.8


@dataclass(frozen=True)
class GoldHeading:
    text: str
    level: int  # 1 = top
    page: int = 0  # 1-based page it is on (a PDF's gold); 0 when unknown


@dataclass(frozen=True)
class GoldOutline:
    title: str  # the document's title line ("" when it has none)
    headings: tuple[GoldHeading, ...]


@dataclass(frozen=True)
class BuiltNode:
    kind: str  # root, section, subsection, leaf
    start: int
    end: int
    title: str
    depth: int
    parent: int | None  # index of the parent in the node list; None for the root


class TreeLike(Protocol):
    """What ``nodes_from_tree`` reads of a tree (``documents.ingestion.tree.TreeNode``)."""

    kind: str
    start_char: int
    end_char: int
    title: str

    @property
    def children(self) -> Sequence[TreeLike]: ...


def nodes_from_tree(root: TreeLike) -> tuple[BuiltNode, ...]:
    """The tree in pre-order as plain values, the root first."""
    nodes: list[BuiltNode] = []
    stack: list[tuple[TreeLike, int, int | None]] = [(root, 0, None)]
    while stack:
        node, depth, parent = stack.pop()
        nodes.append(BuiltNode(node.kind, node.start_char, node.end_char, node.title, depth, parent))
        index = len(nodes) - 1
        stack.extend((child, depth + 1, index) for child in reversed(node.children))
    return tuple(nodes)


# -- Normalised text, with a way back to the original offsets ---------------------------------


@dataclass(frozen=True)
class _Searchable:
    text: str  # normalised
    origins: tuple[int, ...]  # origins[i]: offset in the original text of text[i]


def _normalised_chars(text: str) -> list[tuple[str, int]]:
    """(character, original offset) for every character that counts; whitespace as " "."""
    skipped = {
        offset for match in _HEADING_MARKS.finditer(text) for offset in range(match.start(), match.end())
    }
    chars: list[tuple[str, int]] = []
    for offset, char in enumerate(text):
        if offset in skipped:
            continue
        for out in unicodedata.normalize("NFKC", char).translate(_QUOTES).lower():
            if out in _MARKUP:
                continue
            chars.append((" " if out.isspace() else out, offset))
    return chars


def _searchable(text: str, *, compact: bool, chars: list[tuple[str, int]] | None = None) -> _Searchable:
    """Whitespace collapsed to one space (or, ``compact``, left out), trimmed at both ends.
    ``chars``: ``_normalised_chars(text)``, when already at hand."""
    kept: list[tuple[str, int]] = []
    for char, offset in _normalised_chars(text) if chars is None else chars:
        if not (char == " " and _space_left_out(kept, compact=compact)):
            kept.append((char, offset))
    if kept and kept[-1][0] == " ":
        kept.pop()
    return _Searchable("".join(char for char, _ in kept), tuple(offset for _, offset in kept))


def _space_left_out(kept: list[tuple[str, int]], *, compact: bool) -> bool:
    """A space is left out when compact, at the start, or after another space."""
    return compact or not kept or kept[-1][0] == " "


def normalise(text: str) -> str:
    """How a heading and the text are compared: NFKC, straight quotes, "-" dashes, no markdown
    marks, whitespace collapsed, lower case."""
    return _searchable(text, compact=False).text


# -- Locating the gold headings ---------------------------------------------------------------


def _at_line_start(text: str, offset: int) -> bool:
    line_start = text.rfind("\n", 0, offset) + 1
    return _ONLY_MARKUP.fullmatch(text, line_start, offset) is not None


def _page_window(page: int, page_spans: Sequence[tuple[int, int, int]], spread: int) -> tuple[int, int]:
    """Offsets [start, end) of pages ``page - spread`` to ``page + spread``."""
    inside = [(start, end) for number, start, end in page_spans if abs(number - page) <= spread]
    if not inside:
        return 0, 0
    return min(start for start, _ in inside), max(end for _, end in inside)


def locate_headings(
    text: str, headings: Sequence[GoldHeading], *, page_spans: Sequence[tuple[int, int, int]] = ()
) -> list[int | None]:
    """Where each heading starts in ``text`` (its first character that counts), None where it is
    not found. In order: each is looked for after the one before it.

    ``page_spans``: (page, start, end) of each page; a heading with a page is looked for on that
    page first, then on the pages around it, then anywhere after the previous one."""
    chars = _normalised_chars(text)
    forms = (_searchable(text, compact=False, chars=chars), _searchable(text, compact=True, chars=chars))
    found: list[int | None] = []
    cursor = 0  # offset in the original text
    for heading in headings:
        match = _find_heading(heading, forms, text, cursor=cursor, page_spans=page_spans)
        found.append(match[0] if match else None)
        if match:
            cursor = match[1]
    return found


def _find_heading(
    heading: GoldHeading,
    forms: tuple[_Searchable, _Searchable],
    text: str,
    *,
    cursor: int,
    page_spans: Sequence[tuple[int, int, int]],
) -> tuple[int, int] | None:
    """(start, end) of the heading's first occurrence after ``cursor``: in each window in turn, at
    a line start first, then anywhere; whitespace kept first, then left out."""
    needles = (
        _searchable(heading.text, compact=False).text,
        _searchable(heading.text, compact=True).text,
    )
    for (low, high), line_start in (
        (window, line) for window in _windows(heading, page_spans, text) for line in (True, False)
    ):
        for form, needle in zip(forms, needles, strict=True):
            match = _first_match(form, needle, text, max(low, cursor), high, line_start=line_start)
            if match is not None:
                return match
    return None


def _windows(
    heading: GoldHeading, page_spans: Sequence[tuple[int, int, int]], text: str
) -> list[tuple[int, int]]:
    """Where to look for the heading, in turn: its page, the pages around it, the whole text."""
    windows: list[tuple[int, int]] = []
    if heading.page and page_spans:
        windows += [_page_window(heading.page, page_spans, 0), _page_window(heading.page, page_spans, 1)]
    windows.append((0, len(text)))
    return windows


def _first_match(
    form: _Searchable, needle: str, text: str, low: int, high: int, *, line_start: bool
) -> tuple[int, int] | None:
    """(start, end) in the original text of the first occurrence of ``needle`` that starts in
    [low, high) (and at a line start when asked)."""
    if not needle:
        return None
    position = bisect.bisect_left(form.origins, low)
    while True:
        position = form.text.find(needle, position)
        if position < 0:
            return None
        start = form.origins[position]
        if start >= high:
            return None
        if not line_start or _at_line_start(text, start):
            return start, form.origins[position + len(needle) - 1] + 1
        position += 1


# -- Titles -----------------------------------------------------------------------------------


def _title_words(text: str) -> list[str]:
    return _TITLE_WORDS.findall(normalise(text.rstrip("\u2026")))


def _numbering_length(words: Sequence[str]) -> int:
    """How many leading words are the heading's number ("article", "iv"; "1", "2"; "exhibit", "a")."""
    count = 0
    while count < len(words):
        word = words[count]
        label = count == 0 and word in _LABELS
        after_label = count > 0 and words[count - 1] in _LABELS
        if not (label or word.isdigit() or _ROMAN.match(word) or (after_label and len(word) == 1)):
            break
        count += 1
    return count


def title_matches(title: str, heading: str) -> bool:
    """A node's title carries the heading: equal once normalised (punctuation aside), or one a
    prefix of the other that holds at least the heading's number and first title word (all of a
    heading that is only a number, "EXHIBIT A"), or alike (similarity ≥ 0.8). A title the builder
    shortened ends in "…", which is left out."""
    title_words, heading_words = _title_words(title), _title_words(heading)
    if not title_words or not heading_words:
        return False
    if title_words == heading_words:
        return True
    shorter, longer = sorted((title_words, heading_words), key=len)
    needed = min(len(heading_words), _numbering_length(heading_words) + 1)
    if longer[: len(shorter)] == shorter and len(shorter) >= needed:
        return True
    ratio = difflib.SequenceMatcher(None, " ".join(title_words), " ".join(heading_words)).ratio()
    return ratio >= _SIMILAR


# -- Scoring one document ---------------------------------------------------------------------

MATCHED = "matched"
NOT_LOCATED = "not located"
BURIED = "buried"
UNTITLED = "node titled otherwise"  # an internal node starts there, under another title
LEAF_ONLY = "starts a leaf only"  # no internal node: the heading opens a chunk, not a section


@dataclass(frozen=True)
class HeadingResult:
    heading: GoldHeading
    start: int | None  # where it was located
    status: str  # MATCHED, NOT_LOCATED, BURIED, UNTITLED, LEAF_ONLY
    node: int | None = None  # the matched node
    level_agrees: bool | None = None  # matched headings only
    note: str = ""  # what went wrong, for --details: the title found instead, the parent found


@dataclass(frozen=True)
class UnheadedSection:
    """A section or subsection that starts at no gold heading."""

    kind: str
    start: int
    title: str
    opening: str  # the first words of its text


@dataclass(frozen=True)
class DocumentScore:
    name: str
    format: str
    headings: tuple[HeadingResult, ...]
    internal_nodes: int  # sections and subsections
    invented: tuple[UnheadedSection, ...]
    front_matter: tuple[UnheadedSection, ...]  # before the first heading: not counted
    title: str
    title_opened_section: bool | None  # None: no title, or not found in the text
    seconds: float = 0.0

    def count(self, status: str) -> int:
        return sum(1 for result in self.headings if result.status == status)

    @property
    def located(self) -> int:
        return len(self.headings) - self.count(NOT_LOCATED)

    @property
    def level_agreed(self) -> int:
        return sum(1 for result in self.headings if result.level_agrees)

    def as_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "format": self.format,
            "gold": len(self.headings),
            "located": self.located,
            "matched": self.count(MATCHED),
            "level_agreed": self.level_agreed,
            "buried": self.count(BURIED),
            "internal_nodes": self.internal_nodes,
            "invented": len(self.invented),
            "title_opened_section": self.title_opened_section,
            "seconds": self.seconds,
            "headings": [asdict(result) for result in self.headings],
            "invented_sections": [asdict(section) for section in self.invented],
            "front_matter_sections": [asdict(section) for section in self.front_matter],
        }


def _content_start(text: str, start: int, end: int) -> int:
    """Where a node's text starts once leading whitespace and markup are passed."""
    match = _ONLY_MARKUP.match(text, start, end)
    return match.end() if match else start


def score_document(
    *,
    name: str,
    format: str,
    text: str,
    nodes: Sequence[BuiltNode],
    gold: GoldOutline,
    page_spans: Sequence[tuple[int, int, int]] = (),
    seconds: float = 0.0,
) -> DocumentScore:
    """Score one document's tree (``nodes`` in pre-order, the root first) against its gold."""
    tree = _Tree.of(text, nodes)
    located = locate_headings(text, gold.headings, page_spans=page_spans)
    results = [tree.judge(heading, start) for heading, start in zip(gold.headings, located, strict=True)]
    heading_starts = {start for start in located if start is not None}
    first_heading = min(heading_starts, default=len(text))
    unheaded = tree.unheaded(heading_starts)
    return DocumentScore(
        name=name,
        format=format,
        headings=tuple(_with_levels(results, nodes)),
        internal_nodes=len(tree.internal),
        invented=tuple(section for section in unheaded if section.start > first_heading),
        front_matter=tuple(section for section in unheaded if section.start < first_heading),
        title=gold.title,
        title_opened_section=_title_opened_section(text, gold.title, located, set(tree.internal_at)),
        seconds=seconds,
    )


@dataclass(frozen=True)
class _Tree:
    """A built tree as the scoring reads it: its internal nodes (sections and subsections) by
    where their text starts, and its leaves in order."""

    text: str
    nodes: Sequence[BuiltNode]
    internal: list[int]  # indexes into ``nodes``
    starts_of: dict[int, int]  # internal node -> where its text starts
    internal_at: dict[int, list[int]]  # where a text starts -> the internal nodes starting there
    leaves: list[BuiltNode]
    leaf_starts: list[int]

    @classmethod
    def of(cls, text: str, nodes: Sequence[BuiltNode]) -> _Tree:
        internal = [index for index, node in enumerate(nodes) if node.kind not in (ROOT, LEAF)]
        starts_of = {index: _content_start(text, nodes[index].start, nodes[index].end) for index in internal}
        internal_at: dict[int, list[int]] = {}
        for index in internal:
            internal_at.setdefault(starts_of[index], []).append(index)
        leaves = [node for node in nodes if node.kind == LEAF]
        return cls(text, nodes, internal, starts_of, internal_at, leaves, [node.start for node in leaves])

    def judge(self, heading: GoldHeading, start: int | None) -> HeadingResult:
        """What the tree made of the heading located at ``start`` (levels judged apart)."""
        if start is None:
            return HeadingResult(heading, None, NOT_LOCATED)
        nodes = self.nodes
        there = self.internal_at.get(start, [])
        carrying = [index for index in there if title_matches(nodes[index].title, heading.text)]
        if carrying:
            # The shallowest: a first subsection that starts with its section is the builder's
            # grouping under the heading, not the heading's own node.
            node = min(carrying, key=lambda index: nodes[index].depth)
            return HeadingResult(heading, start, MATCHED, node)
        if there:
            note = f"the {nodes[there[0]].kind} there is titled {nodes[there[0]].title!r}"
            return HeadingResult(heading, start, UNTITLED, note=note)
        return HeadingResult(heading, start, BURIED if self._inside_a_leaf(start) else LEAF_ONLY)

    def _inside_a_leaf(self, start: int) -> bool:
        """Whether ``start`` falls inside a leaf's text, past where it starts."""
        if not self.leaves:
            return False
        leaf = self.leaves[bisect.bisect_right(self.leaf_starts, start) - 1]
        return _content_start(self.text, leaf.start, leaf.end) < start

    def unheaded(self, heading_starts: set[int]) -> list[UnheadedSection]:
        """The internal nodes that start at no located heading."""
        return [
            self._section(index) for index in self.internal if self.starts_of[index] not in heading_starts
        ]

    def _section(self, index: int) -> UnheadedSection:
        start = self.starts_of[index]
        node = self.nodes[index]
        return UnheadedSection(node.kind, start, node.title, " ".join(self.text[start : start + 60].split()))


def _with_levels(results: list[HeadingResult], nodes: Sequence[BuiltNode]) -> list[HeadingResult]:
    """Level agreement of each matched heading: its node hangs under its gold parent's node."""
    out: list[HeadingResult] = []
    for position, result in enumerate(results):
        if result.status != MATCHED or result.node is None:
            out.append(result)
            continue
        parent = next(
            (
                earlier
                for earlier in reversed(results[:position])
                if earlier.heading.level < result.heading.level
            ),
            None,
        )
        expected = 0 if parent is None else parent.node  # the root is node 0
        actual = nodes[result.node].parent
        agrees = expected is not None and actual == expected
        note = "" if agrees else _level_note(nodes, actual, parent)
        out.append(HeadingResult(result.heading, result.start, MATCHED, result.node, agrees, note))
    return out


def _level_note(nodes: Sequence[BuiltNode], actual: int | None, parent: HeadingResult | None) -> str:
    found = f"hangs under {_node_name(nodes, actual)}"
    if parent is None:
        return f"{found}, not under the root"
    if parent.node is None:
        return f"{found}; its parent heading {parent.heading.text!r} has no node of its own"
    return f"{found}, not under {_node_name(nodes, parent.node)}"


def _node_name(nodes: Sequence[BuiltNode], index: int | None) -> str:
    if not index:
        return "the root"
    return f"{nodes[index].kind} {nodes[index].title!r}"


def _title_opened_section(
    text: str, title: str, located: Sequence[int | None], internal_starts: set[int]
) -> bool | None:
    """Whether an internal node starts at the title line (found before the first heading)."""
    if not title.strip():
        return None
    first_heading = min((start for start in located if start is not None), default=len(text))
    found = locate_headings(text[:first_heading], [GoldHeading(title, 1)])[0]
    return None if found is None else found in internal_starts
