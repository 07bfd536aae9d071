"""The structural tree builder: a FABLE tree without an LLM.

Pipeline (pure, no Django):
1. sentences (``sentences.split_sentences``), cut again where a heading starts so every heading
   begins a unit; a unit is the smallest piece a leaf is made of and is never split further
   (except an absurdly long run-on "sentence", see ``_cut_runaway``);
2. headings (``headings.detect_headings``): markdown, setext, bold lines, "Label:" lines,
   attachments ("EXHIBIT A"), and numbered / ARTICLE / Section clauses, inline or not, kept only
   where the numbers count up; nested by rank into an outline, depth-capped, small ones left as
   text;
3. blocks: a paragraph that fits in one leaf is one block, a longer one is packed into blocks of
   about a leaf's size at sentence ends; one ``embed`` call for all blocks, each embedded from its
   exact span (whitespace included), which is the text a leaf spanning just that block embeds, so
   the pipeline reuses those vectors instead of embedding the text a second time;
4. leaves: each run of units between structural nodes is cut by dynamic programming, preferring
   low similarity between neighbouring blocks, paragraph ends and headings, and sizes near a
   target; a cut inside a block is possible but discouraged;
5. runs of leaves without heading structure are grouped into sections / subsections the same way;
6. titles from headings or distinctive key phrases, summaries from the most central sentences
   (``node_texts.NodeTexts``).

Leaves partition the text: a leaf runs from its first unit to the next leaf's first unit, so the
whitespace between two chunks belongs to the first, and the first leaf starts at 0.
"""

from __future__ import annotations

import bisect
import itertools
import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from documents.ingestion.headings import TITLE_CHARS, Heading, detect_headings, shorten
from documents.ingestion.node_texts import Draft, NodeTexts, first_line_title
from documents.ingestion.sentences import (
    BREAK_LINE,
    BREAK_PARAGRAPH,
    BREAK_SENTENCE,
    BREAK_WRAP,
    split_sentences,
)
from documents.ingestion.tree import LEAF, ROOT, TreeNode, kind_for_depth

__all__ = ["build_structural_tree", "detect_headings"]

Embed = Callable[[Sequence[str]], np.ndarray]
CountTokens = Callable[[str], int]
# Told the stage ("chunking", "building_tree") and the share of it done, every few seconds at
# most apart: the job's heartbeat, so a large document is never taken for a dead worker.
Progress = Callable[[str, float], None]

# Blocks per embedding call: a progress report between two calls (16 blocks of about a leaf,
# ~2K tokens, take 2-3 s on two cores; a multiple of the model's batch, so the batches
# and therefore the vectors are those of one call for all blocks).
_EMBED_GROUP_BLOCKS = 16

# Deepest internal node (root 0, section 1, subsections 2-3); leaves go one deeper at most.
_MAX_INTERNAL_DEPTH = 3
# A run-on "sentence" longer than this many times max_leaf_tokens (tables flattened to one line,
# text without punctuation) is cut at whitespace; shorter long sentences stay whole in one leaf.
_RUNAWAY_FACTOR = 4
# Tokens of neighbouring blocks (at least one) on each side of a block boundary whose mean
# vectors are compared: about half a leaf.
_SIMILARITY_REACH_TOKENS = 60
# The similarity score given to a boundary inside a block, where no similarity was measured
# (z-scored like the others): as if its two sides were alike, so cuts prefer block boundaries.
_INSIDE_BLOCK_SIMILARITY = 1.0
# A leaf that is exactly one block (a whole paragraph, or a leaf-sized part of a long one) is a
# natural chunk, and its vector is already computed; a leaf of two blocks must be embedded again.
# Neighbouring paragraphs merge only when one is very short or they are very alike: on the bench
# datasets 1.5 (instead of 0.4) cut most of the embedding the pipeline adds to the bare embedding
# of the nodes, with the same retrieval quality (README, `bench-ingest`: the pipeline against bare embedding).
_WHOLE_BLOCK_BONUS = 1.5


@dataclass(frozen=True)
class _Params:
    max_leaf_tokens: int
    target_leaf_tokens: int
    min_leaf_tokens: int
    max_leaves_per_group: int


@dataclass
class _Unit:
    start: int
    end: int
    break_before: int
    tokens: int = 0
    heading: Heading | None = None  # the heading that starts at this unit
    heading_only: bool = False  # the unit is nothing but a heading line


@dataclass
class _Outline:
    heading: Heading | None
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
    on_progress: Progress | None = None,
) -> TreeNode:
    """Build a root → section → subsection → leaf tree over ``text`` without an LLM.

    ``on_progress`` hears of each step: the blocks' embedding, by far the longest part (about a
    millisecond per token on two cores against a few microseconds for everything else), group
    by group."""
    progress: Progress = on_progress or (lambda stage, fraction: None)
    target = max(1, min(target_leaf_tokens, max_leaf_tokens))
    params = _Params(max(1, max_leaf_tokens), target, min(min_leaf_tokens, target), max_leaves_per_group)
    title_headings, headings = detect_headings(text)
    units = _make_units(text, headings, title_headings, count_tokens, params)
    if not units:
        return _empty_tree(text)
    block_starts = _block_starts(units, params)
    block_vectors = _embed_blocks(text, units, block_starts, embed, progress)
    progress("building_tree", 0.0)
    builder = StructuralTreeBuilder(text, units, block_starts, block_vectors, params)
    document_title = shorten(" \u2014 ".join(heading.title for heading in title_headings), TITLE_CHARS)
    return builder.build(headings, document_title, progress)


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
# Units and embeddings


def _make_units(
    text: str,
    headings: list[Heading],
    title_headings: list[Heading],
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


def _absorb_junk(text: str, units: list[_Unit], heading_at: dict[int, Heading]) -> list[_Unit]:
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


def _block_starts(units: list[_Unit], params: _Params) -> list[int]:
    """First unit of each block: a paragraph that fits in a leaf, a leaf-sized part of a longer
    one, or a run of short paragraphs (form fields, list items) packed to about a leaf's size,
    cut where a leaf would be cut if sizes and structure were all that counted."""
    paragraphs = [0]
    for index in range(1, len(units)):
        unit = units[index]
        if units[index - 1].heading_only:
            continue  # a heading line stays with what follows it
        if unit.break_before == BREAK_PARAGRAPH or unit.heading is not None:
            paragraphs.append(index)
    bounds = [*paragraphs, len(units)]
    starts: list[int] = []
    short: list[tuple[int, int]] = []  # (first unit, tokens) of consecutive paragraphs too short for a leaf

    def pack_short() -> None:
        pieces = _segment(
            [size for _, size in short],
            [_block_break_cost(units[first]) for first, _ in short],
            target=params.target_leaf_tokens,
            min_size=params.min_leaf_tokens,
            max_size=params.max_leaf_tokens,
        )
        starts.extend(short[piece][0] for piece in pieces)
        short.clear()

    for first, last in itertools.pairwise(bounds):
        size = sum(units[index].tokens + 1 for index in range(first, last))
        if short and (size >= params.min_leaf_tokens or _forces_cut(units[first])):
            pack_short()
        if size < params.min_leaf_tokens:
            short.append((first, size))
        elif size <= params.max_leaf_tokens:
            starts.append(first)
        else:
            pieces = _segment(
                [units[index].tokens + 1 for index in range(first, last)],
                [_block_break_cost(units[index]) for index in range(first, last)],
                target=params.target_leaf_tokens,
                min_size=params.min_leaf_tokens,
                max_size=params.max_leaf_tokens,
                free=[units[index].heading_only for index in range(first, last)],
            )
            starts += [first + piece for piece in pieces]
    if short:
        pack_short()
    return starts


def _forces_cut(unit: _Unit) -> bool:
    """A titled heading of a strong family: a leaf always starts there."""
    heading = unit.heading
    return heading is not None and bool(heading.title) and heading.family not in _WEAK_FAMILIES


def _block_break_cost(unit: _Unit) -> float:
    """What a cut before ``unit`` costs when blocks are cut (no similarity yet)."""
    cost = _LEAF_BREAK_COST[unit.break_before]
    if unit.heading is not None:
        cost -= _TITLED_HEADING_BONUS if unit.heading.title else _UNTITLED_HEADING_BONUS
    return cost


def _block_spans(text: str, units: list[_Unit], block_starts: list[int]) -> list[tuple[int, int]]:
    """Character span of each block, cut the way leaves are: from its first unit to the next
    block's first unit (the first from 0, the last to the end)."""
    starts = [0 if first == 0 else units[first].start for first in block_starts]
    return list(zip(starts, [*starts[1:], len(text)], strict=True))


def _embed_blocks(
    text: str, units: list[_Unit], block_starts: list[int], embed: Embed, progress: Progress
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
    whole: dict[int, int] | None = None,
    whole_bonus: float = 0.0,
) -> list[int]:
    """Start indices of the cheapest cut of ``sizes`` into consecutive segments.

    A segment costs its squared relative distance from ``target`` (plus a steep penalty under
    ``min_size``); a cut before item i costs ``break_costs[i]``. A segment may exceed
    ``max_size`` only when it holds a single item that is not ``free`` (free items, heading
    lines, ride along without counting against the limit). A segment [start, end) with
    ``whole[start] == end`` (a paragraph that fits in one segment) costs ``whole_bonus`` less.
    """
    count = len(sizes)
    free = free or [False] * count
    whole = whole or {}
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
            if whole.get(start) == end:
                cost -= whole_bonus
            if cost < best[end]:
                best[end], back[end] = cost, start
    starts = []
    cursor = count
    while cursor > 0:
        cursor = back[cursor]
        starts.append(cursor)
    return starts[::-1]


def _window_similarities(vectors: np.ndarray, width: int) -> np.ndarray:
    """z-scored cosine similarity across each boundary i (between items i-1 and i), i >= 1,
    comparing the ``width`` items on each side."""
    count = len(vectors)
    boundaries = np.arange(1, count)
    return _similarities(vectors, np.maximum(0, boundaries - width), np.minimum(count, boundaries + width))


def _reach_similarities(vectors: np.ndarray, sizes: Sequence[float], reach: float) -> np.ndarray:
    """Like ``_window_similarities``, each side taking items until they hold ``reach`` tokens."""
    count = len(vectors)
    prefix = np.concatenate([[0.0], np.cumsum(sizes)])
    boundaries = np.arange(1, count)
    # The item before / after each boundary always counts, then more while under reach.
    lows = np.searchsorted(prefix, prefix[boundaries] - reach, side="right") - 1
    highs = np.searchsorted(prefix, prefix[boundaries] + reach, side="left")
    lows = np.clip(np.minimum(lows, boundaries - 1), 0, None)
    highs = np.clip(np.maximum(highs, boundaries + 1), None, count)
    return _similarities(vectors, lows, highs)


def _similarities(vectors: np.ndarray, lows: np.ndarray, highs: np.ndarray) -> np.ndarray:
    """z-scored cosine similarity between items [lows[j], j+1) and [j+1, highs[j]) at boundary j+1."""
    count = len(vectors)
    similarities = np.zeros(count, dtype=np.float32)
    if count < 2:
        return similarities
    cumulative = np.vstack([np.zeros((1, vectors.shape[1]), dtype=np.float32), np.cumsum(vectors, axis=0)])
    boundaries = np.arange(1, count)
    left = cumulative[boundaries] - cumulative[lows]
    right = cumulative[highs] - cumulative[boundaries]
    norms = np.linalg.norm(left, axis=1) * np.linalg.norm(right, axis=1)
    norms[norms == 0] = 1.0
    similarities[1:] = np.einsum("ij,ij->i", left, right) / norms
    values = similarities[1:]
    spread = float(values.std()) if len(values) > 2 else 0.0
    similarities[1:] = (values - values.mean()) / spread if spread > 1e-6 else 0.0
    return similarities


# ---------------------------------------------------------------------------------------------
# The tree


class StructuralTreeBuilder:
    """Turns units and their vectors into the tree: the headings' outline, leaves cut within it,
    groups where there is no structure; ``NodeTexts`` reads its text, units and vectors."""

    def __init__(
        self,
        text: str,
        units: list[_Unit],
        block_starts: list[int],
        block_vectors: np.ndarray,
        params: _Params,
    ) -> None:
        self.text = text
        self.units = units
        self.block_starts = block_starts
        self.block_vectors = block_vectors
        # Each unit carries the vector of its block.
        block_of = np.searchsorted(np.asarray(block_starts), np.arange(len(units)), side="right") - 1
        self.vectors = block_vectors[block_of]
        self.params = params
        self.unit_at = {unit.start: index for index, unit in enumerate(units)}
        self.prefix_tokens = np.concatenate([[0], np.cumsum([unit.tokens + 1 for unit in units])])
        self.break_costs = np.zeros(len(units))

    def build(self, headings: list[Heading], document_title: str, progress: Progress) -> TreeNode:
        outline = self._outline(headings)
        self.break_costs = self._unit_break_costs()
        root = self._draft(outline, depth=0)
        progress("building_tree", 0.4)
        texts = NodeTexts(self)
        texts.fill(root, depth=0)
        progress("building_tree", 0.9)
        root.title = document_title or first_line_title(self.text) or root.title
        return self._tree(root, depth=0)

    # -- outline: headings nested by rank, pruned to what deserves a node of its own

    def _outline(self, headings: list[Heading]) -> _Outline:
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

    def _draft(self, node: _Outline, depth: int) -> Draft:
        draft = Draft(node.first, node.last, node.heading)
        cursor = node.first
        for child in node.children:
            if cursor < child.first:
                draft.children += self._run(cursor, child.first, depth, has_sections=True)
            draft.children.append(self._draft(child, depth + 1))
            cursor = child.last
        if cursor < node.last:
            draft.children += self._run(cursor, node.last, depth, has_sections=bool(node.children))
        return draft

    def _run(self, first: int, last: int, depth: int, *, has_sections: bool) -> list[Draft]:
        """Leaves for units [first, last) under a node at ``depth``, grouped when there are many."""
        leaves = self._leaves(first, last)
        if depth == 0 and has_sections and 2 <= len(leaves) <= self.params.max_leaves_per_group:
            return [Draft(first, last, children=leaves)]  # a preamble or an unnumbered stretch
        if depth == 0 and len(leaves) > 4:
            return self._group(leaves, depth + 1, keep_single=True)
        if depth < _MAX_INTERNAL_DEPTH and len(leaves) > self.params.max_leaves_per_group:
            return self._group(leaves, depth + 1, keep_single=False)
        return leaves

    def _leaves(self, first: int, last: int) -> list[Draft]:
        sizes = [self.units[index].tokens + 1 for index in range(first, last)]
        costs = [float(self.break_costs[index]) for index in range(first, last)]
        starts = _segment(
            sizes,
            costs,
            target=self.params.target_leaf_tokens,
            min_size=self.params.min_leaf_tokens,
            max_size=self.params.max_leaf_tokens,
            free=[self.units[index].heading_only for index in range(first, last)],
            whole=self._whole_blocks(first, last),
            whole_bonus=_WHOLE_BLOCK_BONUS,
        )
        bounds = [first + start for start in starts] + [last]
        return [Draft(bounds[index], bounds[index + 1]) for index in range(len(starts))]

    def _whole_blocks(self, first: int, last: int) -> dict[int, int]:
        """The blocks inside units [first, last), as {start: end} relative to ``first``."""
        low = bisect.bisect_left(self.block_starts, first)
        high = bisect.bisect_left(self.block_starts, last)
        ends = [*self.block_starts[1:], len(self.units)]
        return {
            self.block_starts[index] - first: ends[index] - first
            for index in range(low, high)
            if ends[index] <= last
        }

    def _group(self, leaves: list[Draft], depth: int, *, keep_single: bool) -> list[Draft]:
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
        groups: list[Draft] = []
        for index in range(len(starts)):
            members = leaves[bounds[index] : bounds[index + 1]]
            if len(members) == 1 and not keep_single:
                groups.append(members[0])
                continue
            group = Draft(members[0].first, members[-1].last, children=members)
            if depth < _MAX_INTERNAL_DEPTH and len(members) > self.params.max_leaves_per_group:
                group.children = self._group(members, depth + 1, keep_single=False)
            groups.append(group)
        return groups

    def _group_break_cost(self, leaf: Draft) -> float:
        unit = self.units[leaf.first]
        cost = _GROUP_BREAK_COST[unit.break_before]
        if unit.heading is not None:
            cost -= _GROUP_HEADING_BONUS if unit.heading.title else _GROUP_HEADING_BONUS / 2
        return cost

    def _unit_break_costs(self) -> np.ndarray:
        bounds = [*self.block_starts, len(self.units)]
        block_sizes = [self._tokens(first, last) for first, last in itertools.pairwise(bounds)]
        block_similarities = _reach_similarities(self.block_vectors, block_sizes, _SIMILARITY_REACH_TOKENS)
        costs = np.full(len(self.units), _INSIDE_BLOCK_SIMILARITY, dtype=np.float64)
        costs[self.block_starts] = block_similarities
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

    def mean_vector(self, draft: Draft) -> np.ndarray:
        mean = self.vectors[draft.first : draft.last].mean(axis=0)
        norm = float(np.linalg.norm(mean))
        return mean / norm if norm > 0 else mean

    def char_start(self, unit_index: int) -> int:
        return 0 if unit_index == 0 else self.units[unit_index].start

    def char_end(self, unit_index: int) -> int:
        return len(self.text) if unit_index >= len(self.units) else self.units[unit_index].start

    def _tree(self, draft: Draft, depth: int) -> TreeNode:
        return TreeNode(
            kind=ROOT if depth == 0 else kind_for_depth(depth, is_leaf=not draft.children),
            start_char=self.char_start(draft.first),
            end_char=self.char_end(draft.last),
            title=draft.title,
            summary=draft.summary,
            children=[self._tree(child, depth + 1) for child in draft.children],
        )


def _cap_depth(node: _Outline, depth: int) -> None:
    """Renumber depths; headings below the deepest internal level stay inside their ancestor as
    preferred leaf starts (a depth cap never drops text: it was never cut out of the parent)."""
    node.depth = depth
    if depth >= _MAX_INTERNAL_DEPTH:
        node.children = []
    for child in node.children:
        _cap_depth(child, depth + 1)
