"""The structural tree builder: a FABLE tree without an LLM.

Pipeline (pure, no Django):
1. sentences (``sentences.split_sentences``), cut again where a heading starts so every heading
   begins a unit; a unit is the smallest piece a leaf is made of and is never split further
   (except an absurdly long run-on "sentence", see ``units._cut_runaway``);
2. headings (``headings.detect_headings``): markdown, setext, bold lines, "Label:" lines,
   attachments ("EXHIBIT A"), and numbered / ARTICLE / Section clauses, inline or not, kept only
   where the numbers count up; nested by rank into an outline, depth-capped, small ones left as
   text;
3. blocks (``units``): a paragraph that fits in one leaf is one block, a longer one is packed into blocks of
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
from dataclasses import dataclass, field

import numpy as np

from documents.ingestion.heading_titles import TITLE_CHARS, Heading, shorten
from documents.ingestion.headings import detect_headings, title_of_document
from documents.ingestion.node_texts import Draft, NodeTexts, first_line_title
from documents.ingestion.segmentation import (
    AFTER_HEADING_PENALTY,
    FORCED_CUT,
    GROUP_BREAK_COST,
    GROUP_HEADING_BONUS,
    LEAF_BREAK_COST,
    TITLED_HEADING_BONUS,
    UNTITLED_HEADING_BONUS,
    WEAK_FAMILIES,
    reach_similarities,
    segment,
    window_similarities,
)
from documents.ingestion.tree import LEAF, ROOT, TreeNode, kind_for_depth
from documents.ingestion.units import (
    CountTokens,
    Embed,
    LeafParams,
    Progress,
    TextUnit,
    embed_blocks,
    find_block_starts,
    make_units,
)

__all__ = ["build_structural_tree", "detect_headings"]

# Deepest internal node (root 0, section 1, subsections 2-3); leaves go one deeper at most.
_MAX_INTERNAL_DEPTH = 3
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
# of the nodes, with the same retrieval quality (docs/benchmarks.md, "Ingestion speed": the pipeline
# against bare embedding).
_WHOLE_BLOCK_BONUS = 1.5


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
    font_heading_starts: frozenset[int] = frozenset(),
) -> TreeNode:
    """Build a root → section → subsection → leaf tree over ``text`` without an LLM.

    ``on_progress`` hears of each step: the blocks' embedding, by far the longest part (about a
    millisecond per token on two cores against a few microseconds for everything else), group
    by group.

    ``font_heading_starts``: the markdown heading lines extraction guessed from a PDF's fonts
    (``detect_headings`` lets the numbering settle their level)."""
    progress: Progress = on_progress or (lambda stage, fraction: None)
    target = max(1, min(target_leaf_tokens, max_leaf_tokens))
    params = LeafParams(max(1, max_leaf_tokens), target, min(min_leaf_tokens, target), max_leaves_per_group)
    title_headings, headings = detect_headings(text, font_heading_starts=font_heading_starts)
    units = make_units(text, headings, title_headings, count_tokens, params)
    if not units:
        return _empty_tree(text)
    block_starts = find_block_starts(units, params)
    block_vectors = embed_blocks(text, units, block_starts, embed, progress)
    progress("building_tree", 0.0)
    builder = StructuralTreeBuilder(text, units, block_starts, block_vectors, params)
    document_title = shorten(title_of_document(title_headings), TITLE_CHARS)
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
# The tree


def _has_a_peer(root: _Outline, child: _Outline) -> bool:
    """Another heading of ``child``'s rank stands beside it under ``root``."""
    return any(
        other is not child
        and other.heading is not None
        and child.heading is not None
        and other.heading.rank == child.heading.rank
        for other in root.children
    )


class StructuralTreeBuilder:
    """Turns units and their vectors into the tree: the headings' outline, leaves cut within it,
    groups where there is no structure; ``NodeTexts`` reads its text, units and vectors."""

    def __init__(
        self,
        text: str,
        units: list[TextUnit],
        block_starts: list[int],
        block_vectors: np.ndarray,
        params: LeafParams,
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
            # Only a heading with no sibling of its rank: "ARTICLE 1 DEFINITIONS" may hold most
            # of a short contract, and still is one article among others.
            wrappers = [
                child
                for child in root.children
                if len(child.children) >= 2
                and self._tokens(child.first, child.last) >= 0.6 * total
                and not _has_a_peer(root, child)
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
        """Text too small for a leaf between structural nodes (a page footer, a clause too
        small for a node of its own) joins the node before it, so that every node starts at its
        heading. What stands before the first subsection (the parent's heading line, a sentence
        introducing its parts) stays the parent's own leaf: given to the first subsection it
        would bury that subsection's heading inside a passage."""
        if not node.children:
            return
        small = self.params.min_leaf_tokens
        if (
            node.heading is None
            and self._tokens(node.first, node.children[0].first) < small
            and not self.only_titles(node.first, node.children[0].first)
            and not self._headed(node.children[0].first)
        ):
            node.children[0].first = node.first  # a line or two of text before the first heading
        for before, after in zip(node.children, node.children[1:], strict=False):
            if self._tokens(before.last, after.first) < small:
                if self._headed(after.first):
                    before.last = after.first
                else:
                    after.first = before.last
        if self._tokens(node.children[-1].last, node.last) < small:
            node.children[-1].last = node.last

    def _headed(self, unit_index: int) -> bool:
        """The unit opens with a titled heading (the start a node must keep)."""
        heading = self.units[unit_index].heading if unit_index < len(self.units) else None
        return heading is not None and bool(heading.title)

    def only_titles(self, first: int, last: int) -> bool:
        """Nothing but the document's title line(s) (a PDF's "# Supply Agreement"): they stand
        as a preamble of their own instead of opening the first section's first passage."""
        units = self.units[first:last]
        return bool(units) and all(unit.heading_only and unit.heading is None for unit in units)

    def _deserves_node(self, node: _Outline) -> bool:
        """A titled heading makes a node at its level, however short its text: the tree is the
        document's own outline ("12.7 Severability" is a section even at one sentence).
        Untitled numbered clauses ("3.2 The Distributor shall ...") only when their text needs
        more than one leaf."""
        tokens = self._tokens(node.first, node.last)
        if node.heading is not None and node.heading.title:
            # Bold lines and "Label:" lines title small form fields too ("Chief Complaint:" with
            # one line under it); those are grouped with their neighbours instead.
            weak = node.heading.family in WEAK_FAMILIES
            return not weak or tokens > self.params.max_leaf_tokens // 2
        # A long untitled clause deeper down ("9.2 The Parties shall ...") is passages of its
        # parent: as a node it would need a title the document never gave it.
        return node.depth == 1 and tokens > self.params.max_leaf_tokens

    # -- drafts: leaves cut within each run of units, runs without structure grouped

    def _draft(self, node: _Outline, depth: int) -> Draft:
        draft = Draft(node.first, node.last, node.heading)
        headed = node.heading is not None and bool(node.heading.title)
        cursor = node.first
        if depth == 0:
            # The document's title line(s) are a passage of their own under the root, never the
            # opening of the preamble or of section 1.
            titles = self._title_lines_end(node)
            if node.first < titles:
                draft.children.append(Draft(node.first, titles))
                cursor = titles
        for child in node.children:
            if cursor < child.first:
                draft.children += self._run(cursor, child.first, depth, has_sections=True, headed=headed)
            draft.children.append(self._draft(child, depth + 1))
            cursor = child.last
        if cursor < node.last:
            draft.children += self._run(
                cursor, node.last, depth, has_sections=bool(node.children), headed=headed
            )
        return draft

    def _title_lines_end(self, node: _Outline) -> int:
        """The end of the title lines (heading-only units without a heading) that open ``node``,
        or its start when there are none or they reach its first part."""
        titles = node.first
        while titles < node.last and self.units[titles].heading_only and self.units[titles].heading is None:
            titles += 1
        first_part = node.children[0].first if node.children else node.last
        return titles if titles < first_part else node.first

    def _run(self, first: int, last: int, depth: int, *, has_sections: bool, headed: bool) -> list[Draft]:
        """Leaves for units [first, last) under a node at ``depth``, grouped when there are many.

        Under a titled heading the leaves stay the heading's own: the document said where its
        sections are, and a group cut by similarity inside one would be a section it never had
        (titled after a body phrase). Only text without headings is grouped."""
        leaves = self._leaves(first, last)
        if headed:
            return leaves
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
        starts = segment(
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
        starts = self._group_starts(leaves)
        if len(starts) == 1 and not keep_single:
            return leaves
        bounds = [*starts, len(leaves)]
        return [
            self._grouped(leaves[first:last], depth, keep_single=keep_single)
            for first, last in itertools.pairwise(bounds)
        ]

    def _group_starts(self, leaves: list[Draft]) -> list[int]:
        """The first leaf of each of about sqrt(n) groups, cut at low similarity."""
        group_count = max(1, round(math.sqrt(len(leaves))))
        sizes = [float(self._tokens(leaf.first, leaf.last)) for leaf in leaves]
        target = sum(sizes) / group_count
        similarities = window_similarities(np.stack([self.mean_vector(leaf) for leaf in leaves]), width=2)
        costs = [
            float(similarities[index]) + self._group_break_cost(leaf) for index, leaf in enumerate(leaves)
        ]
        # Sections are judged more by size than leaves are: a similarity dip between two
        # paragraphs should not make a section of one paragraph.
        return segment(
            sizes, costs, target=target, min_size=0.4 * target, max_size=2.5 * target, size_weight=3.0
        )

    def _grouped(self, members: list[Draft], depth: int, *, keep_single: bool) -> Draft:
        """One group of leaves as a node at ``depth`` (a lone leaf stays a leaf unless
        ``keep_single``), grouped again when it holds too many."""
        if len(members) == 1 and not keep_single:
            return members[0]
        group = Draft(members[0].first, members[-1].last, children=members)
        if depth < _MAX_INTERNAL_DEPTH and len(members) > self.params.max_leaves_per_group:
            group.children = self._group(members, depth + 1, keep_single=False)
        return group

    def _group_break_cost(self, leaf: Draft) -> float:
        unit = self.units[leaf.first]
        cost = GROUP_BREAK_COST[unit.break_before]
        if unit.heading is not None:
            cost -= GROUP_HEADING_BONUS if unit.heading.title else GROUP_HEADING_BONUS / 2
        return cost

    def _unit_break_costs(self) -> np.ndarray:
        bounds = [*self.block_starts, len(self.units)]
        block_sizes = [self._tokens(first, last) for first, last in itertools.pairwise(bounds)]
        block_similarities = reach_similarities(self.block_vectors, block_sizes, _SIMILARITY_REACH_TOKENS)
        costs = np.full(len(self.units), _INSIDE_BLOCK_SIMILARITY, dtype=np.float64)
        costs[self.block_starts] = block_similarities
        for index in range(1, len(self.units)):
            unit = self.units[index]
            costs[index] += LEAF_BREAK_COST[unit.break_before]
            if self.units[index - 1].heading_only:
                costs[index] += AFTER_HEADING_PENALTY  # "## 2. Safety" stays with "### 2.1 ..."
            elif unit.heading is not None and unit.heading.title and unit.heading.family not in WEAK_FAMILIES:
                costs[index] -= FORCED_CUT  # a real heading always starts a leaf
            elif unit.heading is not None:
                costs[index] -= TITLED_HEADING_BONUS if unit.heading.title else UNTITLED_HEADING_BONUS
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
