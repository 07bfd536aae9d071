"""Units and blocks for the structural builder (pure, no Django).

A unit is the smallest piece a leaf is made of: a sentence, cut again where a heading starts,
never split further except an absurdly long run-on "sentence" (``_cut_runaway``). A block is a
paragraph that fits in one leaf, a leaf-sized part of a longer one, or a run of short paragraphs
packed to about a leaf's size; blocks are what the builder embeds, one ``embed`` call per group.
"""

from __future__ import annotations

import itertools
import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from documents.ingestion.heading_titles import Heading
from documents.ingestion.segmentation import (
    LEAF_BREAK_COST,
    TITLED_HEADING_BONUS,
    UNTITLED_HEADING_BONUS,
    WEAK_FAMILIES,
    segment,
)
from documents.ingestion.sentences import (
    BREAK_PARAGRAPH,
    BREAK_SENTENCE,
    BREAK_WRAP,
    SentenceSpan,
    split_sentences,
)

Embed = Callable[[Sequence[str]], np.ndarray]
CountTokens = Callable[[str], int]
# Told the stage ("chunking", "building_tree") and the share of it done, every few seconds at
# most apart: the job's heartbeat, so a large document is never taken for a dead worker.
Progress = Callable[[str, float], None]

# Blocks per embedding call: a progress report between two calls (16 blocks of about a leaf,
# ~2K tokens, take 2-3 s on two cores; a multiple of the model's batch, so the batches
# and therefore the vectors are those of one call for all blocks).
_EMBED_GROUP_BLOCKS = 16

# A run-on "sentence" longer than this many times max_leaf_tokens (tables flattened to one line,
# text without punctuation) is cut at whitespace; shorter long sentences stay whole in one leaf.
_RUNAWAY_FACTOR = 4

# A running page header or footer: a line of at most this many characters that the document
# repeats at least this often, numbers aside (each page's "Page 3 of 12", a filing's source line).
_FURNITURE_CHARS = 120
_FURNITURE_REPEATS = 3
# ... most of the times at least this far apart: a page holds a few thousand characters of text.
_FURNITURE_SPACING_CHARS = 1000


@dataclass(frozen=True)
class LeafParams:
    """How large a leaf may be and should be, in tokens, and how many leaves a node holds
    before its leaves are grouped."""

    max_leaf_tokens: int
    target_leaf_tokens: int
    min_leaf_tokens: int
    max_leaves_per_group: int


@dataclass
class TextUnit:
    """A unit: the characters [start, end) (trailing blanks left out), how strongly the text
    breaks before it (``sentences.BREAK_*``) and its tokens."""

    start: int
    end: int
    break_before: int
    tokens: int = 0
    heading: Heading | None = None  # the heading that starts at this unit
    heading_only: bool = False  # the unit is nothing but a heading line


def make_units(
    text: str,
    headings: list[Heading],
    title_headings: list[Heading],
    count_tokens: CountTokens,
    params: LeafParams,
) -> list[TextUnit]:
    heading_at = {heading.start: heading for heading in headings}
    units = _sentence_units(text, sorted(heading_at), count_tokens, params)
    # Before the headings are read off: gluing a rule atop the document moves the first heading.
    units = _absorb_junk(text, units, heading_at)
    _mark_headings(text, units, heading_at, title_headings)
    return units


def _sentence_units(
    text: str, cuts: list[int], count_tokens: CountTokens, params: LeafParams
) -> list[TextUnit]:
    """The sentences, each cut again where a heading in ``cuts`` (sorted) starts inside it."""
    units: list[TextUnit] = []
    cursor = 0
    for sentence in split_sentences(text):
        pieces, cursor = _sentence_pieces(sentence, cuts, cursor)
        for index, (start, end) in enumerate(itertools.pairwise(pieces)):
            strength = sentence.break_before if index == 0 else BREAK_SENTENCE
            units.extend(
                _unit_pieces(text, start, _trimmed_end(text, start, end), strength, count_tokens, params)
            )
    return units


def _sentence_pieces(sentence: SentenceSpan, cuts: list[int], cursor: int) -> tuple[list[int], int]:
    """The bounds of the sentence's pieces, and the first of ``cuts`` from ``cursor`` on that
    lies beyond it (the sentences come in order, so each cut is looked at once)."""
    pieces = [sentence.start]
    while cursor < len(cuts) and cuts[cursor] < sentence.end:
        if cuts[cursor] > sentence.start:
            pieces.append(cuts[cursor])  # an inline heading: "... agree. 4. Confidentiality."
        cursor += 1
    pieces.append(sentence.end)
    return pieces, cursor


def _trimmed_end(text: str, start: int, end: int) -> int:
    """``end`` moved back over trailing whitespace, never before ``start``."""
    while end > start and text[end - 1].isspace():
        end -= 1
    return end


def _mark_headings(
    text: str, units: list[TextUnit], heading_at: dict[int, Heading], title_headings: list[Heading]
) -> None:
    """Give each unit the heading that starts it, and say whether it is nothing but a heading
    line (or a title line from ``title_headings``)."""
    title_ends = {heading.start: heading.title_end for heading in title_headings}
    for unit in units:
        unit.heading = heading_at.get(unit.start)
        title_end = unit.heading.title_end if unit.heading is not None else title_ends.get(unit.start)
        # Nothing but the heading (and a rule under it): it stays with what follows.
        unit.heading_only = title_end is not None and not re.search(r"\w", text[title_end : unit.end])


def _absorb_junk(text: str, units: list[TextUnit], heading_at: dict[int, Heading]) -> list[TextUnit]:
    """Glue rules ("---"), page numbers and running page headers and footers to the unit before
    them (the first ones to the next), so they never make a leaf of their own nor a similarity
    dip that attracts a cut."""
    furniture = _page_furniture(text, units, heading_at)
    kept: list[TextUnit] = []
    pending: TextUnit | None = None  # junk before the first real unit, waiting for it
    for unit in units:
        if not _is_junk(text, unit, heading_at, furniture):
            if pending is not None:
                _take_pending(unit, pending, heading_at)
            pending = None
            kept.append(unit)
        elif kept:
            kept[-1].end, kept[-1].tokens = unit.end, kept[-1].tokens + unit.tokens
        else:
            pending = unit if pending is None else TextUnit(pending.start, unit.end, pending.break_before)
    if pending is not None:
        kept.append(pending)
    return kept


def _is_junk(text: str, unit: TextUnit, heading_at: dict[int, Heading], furniture: set[int]) -> bool:
    """A rule, a page number or a running header or footer; a heading never is."""
    return unit.start not in heading_at and (
        unit.start in furniture or _no_words(text[unit.start : unit.end])
    )


def _take_pending(unit: TextUnit, pending: TextUnit, heading_at: dict[int, Heading]) -> None:
    """The first real unit starts at the junk before it and takes its tokens."""
    if unit.start in heading_at:  # "---" atop the document: the first heading takes it
        heading = heading_at.pop(unit.start)
        heading.start = pending.start
        heading_at[heading.start] = heading
    unit.start, unit.tokens = pending.start, unit.tokens + pending.tokens


def _no_words(piece: str) -> bool:
    """A rule ("---"), or a page number ("12", "- 3 -")."""
    return not any(char.isalnum() for char in piece) or (
        len(piece) <= 8 and not any(char.isalpha() for char in piece)
    )


def _page_furniture(text: str, units: list[TextUnit], heading_at: dict[int, Heading]) -> set[int]:
    """Starts of the units that are a running page header or footer: a short line, no heading,
    that comes again page after page with only its numbers changed ("Source: ACME INC, 8-K,
    6/17/2019", "Page 3 of 12"). A passage of its own, it is evidence of nothing and its vector
    matches no question; glued to its neighbour it costs a few tokens there. A line repeated
    closer together ("Not applicable." under each heading of a form, a table's rows) is text."""
    starts_by_line: dict[str, list[int]] = {}
    for unit in units:
        piece = text[unit.start : unit.end].strip()
        if unit.start in heading_at or len(piece) > _FURNITURE_CHARS or "\n" in piece:
            continue
        if len(re.findall(r"[^\W\d_]{2,}", piece)) < 2:
            continue  # a rule or a page number alone is junk already; one word is a label
        starts_by_line.setdefault(re.sub(r"\d+", "0", " ".join(piece.split())), []).append(unit.start)
    return {
        start
        for starts in starts_by_line.values()
        if len(starts) >= _FURNITURE_REPEATS and _a_page_apart(starts)
        for start in starts
    }


def _a_page_apart(starts: list[int]) -> bool:
    """Most of the repeats a page apart (a short page, a signature page, may bring two closer)."""
    gaps = sorted(later - earlier for earlier, later in itertools.pairwise(starts))
    return gaps[len(gaps) // 2] >= _FURNITURE_SPACING_CHARS


def _unit_pieces(
    text: str, start: int, end: int, strength: int, count_tokens: CountTokens, params: LeafParams
) -> list[TextUnit]:
    tokens = count_tokens(text[start:end])
    if tokens <= _RUNAWAY_FACTOR * params.max_leaf_tokens:
        return [TextUnit(start, end, strength, tokens)]
    return _cut_runaway(text, start, end, strength, tokens, count_tokens, params)


def _cut_runaway(
    text: str, start: int, end: int, strength: int, tokens: int, count_tokens: CountTokens, params: LeafParams
) -> list[TextUnit]:
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
                TextUnit(piece_start, piece_end, piece_strength, count_tokens(text[piece_start:piece_end]))
            )
    return units


def _whitespace_near(text: str, position: int, low: int, high: int) -> int:
    """The start of the word at or after the nearest whitespace to ``position``, within bounds."""
    for distance in range(0, 400):
        for candidate in (position - distance, position + distance):
            if low < candidate < high and text[candidate - 1].isspace() and not text[candidate].isspace():
                return candidate
    return position


def find_block_starts(units: list[TextUnit], params: LeafParams) -> list[int]:
    """First unit of each block: a paragraph that fits in a leaf, a leaf-sized part of a longer
    one, or a run of short paragraphs (form fields, list items) packed to about a leaf's size,
    cut where a leaf would be cut if sizes and structure were all that counted."""
    bounds = [*_paragraph_starts(units), len(units)]
    starts: list[int] = []
    short: list[tuple[int, int]] = []  # (first unit, tokens) of consecutive paragraphs too short for a leaf
    for first, last in itertools.pairwise(bounds):
        size = sum(units[index].tokens + 1 for index in range(first, last))
        if short and (size >= params.min_leaf_tokens or _forces_cut(units[first])):
            starts += _pack_short(units, short, params)
            short = []
        if size < params.min_leaf_tokens:
            short.append((first, size))
        elif size <= params.max_leaf_tokens:
            starts.append(first)
        else:
            starts += _split_long(units, first, last, params)
    if short:
        starts += _pack_short(units, short, params)
    return starts


def _paragraph_starts(units: list[TextUnit]) -> list[int]:
    """First unit of each paragraph: after a paragraph break or at a heading."""
    paragraphs = [0]
    for index in range(1, len(units)):
        unit = units[index]
        if units[index - 1].heading_only:
            continue  # a heading line stays with what follows it
        if unit.break_before == BREAK_PARAGRAPH or unit.heading is not None:
            paragraphs.append(index)
    return paragraphs


def _pack_short(units: list[TextUnit], short: list[tuple[int, int]], params: LeafParams) -> list[int]:
    """Block starts for a run of short paragraphs, given as (first unit, tokens)."""
    pieces = segment(
        [size for _, size in short],
        [_block_break_cost(units[first]) for first, _ in short],
        target=params.target_leaf_tokens,
        min_size=params.min_leaf_tokens,
        max_size=params.max_leaf_tokens,
    )
    return [short[piece][0] for piece in pieces]


def _split_long(units: list[TextUnit], first: int, last: int, params: LeafParams) -> list[int]:
    """Block starts for a paragraph longer than a leaf, units [first, last), cut at its units."""
    span = range(first, last)
    pieces = segment(
        [units[index].tokens + 1 for index in span],
        [_block_break_cost(units[index]) for index in span],
        target=params.target_leaf_tokens,
        min_size=params.min_leaf_tokens,
        max_size=params.max_leaf_tokens,
        free=[units[index].heading_only for index in span],
    )
    return [first + piece for piece in pieces]


def _forces_cut(unit: TextUnit) -> bool:
    """A titled heading of a strong family: a leaf always starts there."""
    heading = unit.heading
    return heading is not None and bool(heading.title) and heading.family not in WEAK_FAMILIES


def _block_break_cost(unit: TextUnit) -> float:
    """What a cut before ``unit`` costs when blocks are cut (no similarity yet)."""
    cost = LEAF_BREAK_COST[unit.break_before]
    if unit.heading is not None:
        cost -= TITLED_HEADING_BONUS if unit.heading.title else UNTITLED_HEADING_BONUS
    return cost


def _block_spans(text: str, units: list[TextUnit], block_starts: list[int]) -> list[tuple[int, int]]:
    """Character span of each block, cut the way leaves are: from its first unit to the next
    block's first unit (the first from 0, the last to the end)."""
    starts = [0 if first == 0 else units[first].start for first in block_starts]
    return list(zip(starts, [*starts[1:], len(text)], strict=True))


def embed_blocks(
    text: str, units: list[TextUnit], block_starts: list[int], embed: Embed, progress: Progress
) -> np.ndarray:
    texts = [text[start:end] for start, end in _block_spans(text, units, block_starts)]
    parts = []
    for first in range(0, len(texts), _EMBED_GROUP_BLOCKS):
        progress("chunking", first / len(texts))
        parts.append(np.asarray(embed(texts[first : first + _EMBED_GROUP_BLOCKS]), dtype=np.float32))
    progress("chunking", 1.0)
    vectors = np.concatenate(parts) if len(parts) > 1 else parts[0]
    if vectors.ndim != 2 or vectors.shape[0] != len(texts):
        raise ValueError(f"embed returned {vectors.shape} for {len(texts)} texts; expected one row per text")
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    return vectors / norms
