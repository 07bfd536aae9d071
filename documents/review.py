"""What in a document's tree needs a person's eye: cheap signals over the stored nodes, no LLM call.

Peers check a tree's shape (``documents.ingestion.tree``); nothing checks its judgment. This
module scores every node with signals that are already at hand -- the vectors in pgvector, the
token counts, the titles -- and lists the nodes worth a look, worst first. It is pure: plain
``ReviewNode`` rows in, ``ReviewItem`` out, no Django (``score_review``); the read,
``documents.selectors.document_review``, fetches one document's rows in one query and scores them.

The signals, and why their thresholds (measured on the 156 documents of the development corpus,
DragonBall and CUAD, 11,423 nodes built by the structural builder and embedded with the default
multilingual-e5-small; e5 packs cosines close together, unrelated passages still score ~0.75):

``summary_far`` -- an internal node's own vector (it embeds "toc path: summary") is far from the
    mean of its children's vectors: the summary does not say what is beneath it. Cosine distance
    of real summaries to their children: median 0.052, 95th percentile 0.093, 99th 0.115; the same
    vectors against another section of the same document: median 0.113; against a section of
    another document: 1st percentile 0.110, median 0.171. ``SUMMARY_DISTANCE_MIN`` = 0.12 flags
    about 1 real summary in 100 and nearly every summary of the wrong document. Calibrated for
    e5-small: another embedding model spreads cosines differently and needs its own value. A short
    summary under a long toc path (the document's title starts every path) also reads as far:
    its vector is mostly the path -- worth a look too, since retrieval sees the same vector.
``duplicate_title`` -- siblings whose titles are the same after normalising case, punctuation,
    spacing, a leading number ("2.", "1.3", "(b)", "iv.") and plural "s": the table of contents cannot
    tell them apart, and often one of them is misnamed. No threshold: equal keys.
``leaf_too_large`` / ``leaf_too_small`` -- a leaf more than ``LEAF_SIZE_RATIO`` (4) times larger,
    or smaller than 1/4, than the median of its sibling leaves (with fewer than three siblings, of
    the four nearest leaves in document order; with fewer than three to compare, no verdict: a
    median of two is their mean, which one outlier moves). 1.2 % of leaves are over 4x and 3.3 %
    under 1/4: tables of contents swallowed whole, page numbers, "Source: ..." footers and lone
    headings cut off as passages. The absolute floors keep short documents quiet: a large leaf
    must hold ``LEAF_LARGE_MIN_TOKENS`` (256, twice a default chunk) and a small one must sit among
    leaves whose median is at least ``LEAF_SMALL_REFERENCE_MIN_TOKENS`` (64), so 12 tokens beside
    40 is not news. With the floors, 0.4 % of leaves are flagged large and 2.9 % small.
``similar_next`` -- two consecutive leaves (document order) whose vectors have cosine similarity of
    at least ``SIMILAR_NEXT_MIN`` (0.97): the cut probably fell in the middle of one topic. Real
    boundaries: median 0.877, 99th percentile 0.958; 0.97 flags 0.44 % of them. Parallel clauses
    ("9.3 If the Company fails ..." / "9.4 If the Principal fails ...") also score that high, so
    the threshold stays at the extreme.
``empty_title`` / ``empty_summary`` -- an internal node without a title (it names nothing in the
    table of contents) or without a summary (it embeds its path alone, and retrieval's node
    selection reads summaries).

Over that corpus half the documents get no item, one in four 3 or more, one in twenty 10 or more.

What is not judged: excluded nodes (a person already dealt with them; pairs with one are
skipped), and any vector that is stale -- an edit changed the node's text and the background
worker has not re-embedded it yet -- so a summary a person just fixed is not flagged from its
old vector; the flag is computed again from the new one.

Severity (for sorting): empty title 1.0, empty summary 0.9, summary far 0.6-1.0, duplicate title
0.6-0.9 (more copies, higher), leaf size and similar next 0.4-0.8, each rising as its value passes
the threshold further; a node's severity is its worst signal plus a quarter of each other one.
"""

from __future__ import annotations

import math
import re
import statistics
import unicodedata
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import pairwise
from typing import Any

import numpy as np

from documents.ingestion.heading_titles import without_heading_marks

LEAF = "leaf"  # documents.ingestion.tree.LEAF, spelled here so this module imports no Django

SUMMARY_DISTANCE_MIN = 0.12
LEAF_SIZE_RATIO = 4.0
LEAF_LARGE_MIN_TOKENS = 256
LEAF_SMALL_REFERENCE_MIN_TOKENS = 64
LEAF_SIZE_PEERS_MIN = 3  # leaves to compare with: a median of two is their mean, which one outlier moves
LEAF_SIZE_NEIGHBOURS = 2  # leaves on each side compared with when there are too few siblings
SIMILAR_NEXT_MIN = 0.97

# Signal names, as ``ReviewSignal.name`` carries them.
SUMMARY_FAR = "summary_far"
DUPLICATE_TITLE = "duplicate_title"
LEAF_TOO_LARGE = "leaf_too_large"
LEAF_TOO_SMALL = "leaf_too_small"
SIMILAR_NEXT = "similar_next"
EMPTY_TITLE = "empty_title"
EMPTY_SUMMARY = "empty_summary"

_OTHERS_WEIGHT = 0.25  # what each signal after the worst adds to a node's severity
_EXCERPT_WORDS = 8


@dataclass(frozen=True, slots=True)
class ReviewNode:
    """One node as the scoring reads it (``documents.selectors.document_review_rows`` makes these)."""

    id: int
    parent_id: int | None
    kind: str
    order: int
    title: str = ""
    summary: str = ""
    toc_path: str = ""
    token_count: int = 0
    embedding: np.ndarray | None = None
    embedding_stale: bool = False
    excluded: bool = False
    excerpt: str = ""  # a leaf's opening text, for its label


@dataclass(frozen=True, slots=True)
class ReviewSignal:
    name: str  # one of the signal names above
    value: float  # the measured value (distance, similarity, ratio, sibling count)
    reason: str  # for people: "summary far from its content (0.62)"
    severity: float


@dataclass(frozen=True, slots=True)
class ReviewItem:
    """A node worth a look, with every signal that fired on it."""

    node_id: int
    kind: str
    label: str  # the title, or a leaf's opening words
    toc_path: str
    order: int  # position in the document (pre-order)
    severity: float
    signals: tuple[ReviewSignal, ...] = field(default_factory=tuple)

    @property
    def reasons(self) -> list[str]:
        return [signal.reason for signal in self.signals]

    def as_dict(self) -> dict[str, Any]:
        """Plain JSON-ready data (for an API or a template)."""
        return {
            "node": self.node_id,
            "kind": self.kind,
            "label": self.label,
            "toc_path": self.toc_path,
            "order": self.order,
            "severity": self.severity,
            "reasons": self.reasons,
            "signals": [
                {"name": s.name, "value": s.value, "reason": s.reason, "severity": s.severity}
                for s in self.signals
            ],
        }


def score_review(nodes: Iterable[ReviewNode]) -> list[ReviewItem]:
    """Every node with at least one signal, worst first (ties: document order)."""
    ordered = sorted(nodes, key=lambda node: node.order)
    found: dict[int, list[ReviewSignal]] = defaultdict(list)
    for node_id, signal in (
        *_empty_texts(ordered),
        *_summaries_far(ordered),
        *_duplicate_titles(ordered),
        *_leaf_sizes(ordered),
        *_similar_neighbours(ordered),
    ):
        found[node_id].append(signal)
    by_id = {node.id: node for node in ordered}
    items = []
    for node_id, signals in found.items():
        node = by_id[node_id]
        if node.excluded:
            continue
        signals.sort(key=lambda signal: -signal.severity)
        severity = signals[0].severity + _OTHERS_WEIGHT * sum(s.severity for s in signals[1:])
        items.append(
            ReviewItem(
                node_id=node.id,
                kind=node.kind,
                label=_label(node),
                toc_path=node.toc_path,
                order=node.order,
                severity=round(severity, 3),
                signals=tuple(signals),
            )
        )
    items.sort(key=lambda item: (-item.severity, item.order))
    return items


# -- the signals ---------------------------------------------------------------------------------

type Found = Iterable[tuple[int, ReviewSignal]]


def _empty_texts(nodes: Sequence[ReviewNode]) -> Found:
    for node in nodes:
        if node.kind == LEAF:
            continue
        if not node.title.strip():
            yield node.id, ReviewSignal(EMPTY_TITLE, 1.0, f"{node.kind} without a title", 1.0)
        if not node.summary.strip():
            yield node.id, ReviewSignal(EMPTY_SUMMARY, 1.0, f"{node.kind} without a summary", 0.9)


def _summaries_far(nodes: Sequence[ReviewNode]) -> Found:
    children: dict[int, list[ReviewNode]] = defaultdict(list)
    for node in nodes:
        if node.parent_id is not None:
            children[node.parent_id].append(node)
    for node in nodes:
        kids = children.get(node.id)
        # An empty summary is its own signal; a stale vector says nothing about the current text.
        if node.kind == LEAF or not kids or not node.summary.strip() or not _fresh(node):
            continue
        if not all(_fresh(kid) for kid in kids):
            continue
        mean = _unit(np.mean([kid.embedding for kid in kids], axis=0))
        distance = 1.0 - float(np.dot(_unit(node.embedding), mean))
        if distance >= SUMMARY_DISTANCE_MIN:
            severity = 0.6 + 0.4 * _excess(distance, SUMMARY_DISTANCE_MIN, 2 * SUMMARY_DISTANCE_MIN)
            reason = f"summary far from its content ({distance:.2f})"
            yield node.id, ReviewSignal(SUMMARY_FAR, round(distance, 3), reason, round(severity, 3))


def _duplicate_titles(nodes: Sequence[ReviewNode]) -> Found:
    groups: dict[tuple[int | None, str], list[ReviewNode]] = defaultdict(list)
    for node in nodes:
        key = title_key(node.title)
        if key and not node.excluded:
            groups[(node.parent_id, key)].append(node)
    for same in groups.values():
        if len(same) < 2:
            continue
        others = len(same) - 1
        severity = min(0.9, 0.6 + 0.1 * (others - 1))
        reason = f"same title as {others} sibling{'s' if others > 1 else ''}"
        for node in same:
            yield node.id, ReviewSignal(DUPLICATE_TITLE, float(others), reason, round(severity, 3))


def _leaf_sizes(nodes: Sequence[ReviewNode]) -> Found:
    leaves = [node for node in nodes if node.kind == LEAF]
    siblings: dict[int | None, list[ReviewNode]] = defaultdict(list)
    for leaf in leaves:
        siblings[leaf.parent_id].append(leaf)
    for index, leaf in enumerate(leaves):
        peers = [other.token_count for other in siblings[leaf.parent_id] if other.id != leaf.id]
        if len(peers) < LEAF_SIZE_PEERS_MIN:
            # The nearest leaves in document order, the window shifted inward at either end.
            span = 2 * LEAF_SIZE_NEIGHBOURS
            start = max(0, min(index - LEAF_SIZE_NEIGHBOURS, len(leaves) - 1 - span))
            peers = [other.token_count for other in leaves[start : start + span + 1] if other.id != leaf.id]
        if len(peers) < LEAF_SIZE_PEERS_MIN:
            continue  # too few passages to say what is normal here
        reference = float(statistics.median(peers))
        tokens = leaf.token_count
        sizes = f"({tokens:,} vs {reference:,.0f} tokens)"
        if tokens >= LEAF_LARGE_MIN_TOKENS and tokens > LEAF_SIZE_RATIO * reference:
            ratio = tokens / max(reference, 1.0)
            severity = 0.4 + 0.4 * _excess(math.log(ratio), math.log(LEAF_SIZE_RATIO), math.log(16.0))
            reason = f"leaf {ratio:.0f}x larger than its neighbours {sizes}"
            yield leaf.id, ReviewSignal(LEAF_TOO_LARGE, round(ratio, 2), reason, round(severity, 3))
        elif reference >= LEAF_SMALL_REFERENCE_MIN_TOKENS and tokens * LEAF_SIZE_RATIO < reference:
            ratio = tokens / reference
            shrink = reference / max(tokens, 1)
            severity = 0.4 + 0.4 * _excess(math.log(shrink), math.log(LEAF_SIZE_RATIO), math.log(16.0))
            reason = f"leaf {shrink:.0f}x smaller than its neighbours {sizes}"
            yield leaf.id, ReviewSignal(LEAF_TOO_SMALL, round(ratio, 3), reason, round(severity, 3))


def _similar_neighbours(nodes: Sequence[ReviewNode]) -> Found:
    leaves = [node for node in nodes if node.kind == LEAF]
    for first, second in pairwise(leaves):
        if first.excluded or second.excluded or not (_fresh(first) and _fresh(second)):
            continue
        similarity = float(np.dot(_unit(first.embedding), _unit(second.embedding)))
        if similarity >= SIMILAR_NEXT_MIN:
            severity = 0.4 + 0.4 * _excess(similarity, SIMILAR_NEXT_MIN, 1.0)
            reason = f"very like the next passage ({similarity:.2f})"
            yield first.id, ReviewSignal(SIMILAR_NEXT, round(similarity, 3), reason, round(severity, 3))


# -- helpers -------------------------------------------------------------------------------------

_LEADING_NUMBER = re.compile(
    r"^\s*(?:\d+(?:\.\d+)+\.?|\d+[.)]|[ivxlcdm]+\.|[a-z][.)]|\(\s*(?:\d+|[ivxlcdm]+|[a-z])\s*\))\s+",
    flags=re.IGNORECASE,
)


def title_key(title: str) -> str:
    """A title as the duplicate check compares it: no case, punctuation, leading number or plural s.

    "2. Payment Terms" and "payment term:" give the same key; "Schedule A" and "Schedule B" do not.
    """
    text = unicodedata.normalize("NFKC", title).strip()
    text = _LEADING_NUMBER.sub("", text).casefold()
    words = re.sub(r"[\W_]+", " ", text).split()
    return " ".join(word[:-1] if len(word) > 3 and word.endswith("s") else word for word in words)


def _fresh(node: ReviewNode) -> bool:
    return node.embedding is not None and not node.embedding_stale


def _unit(vector: Any) -> np.ndarray:
    array = np.asarray(vector, dtype=np.float64)
    norm = float(np.linalg.norm(array))
    return array / norm if norm else array


def _excess(value: float, threshold: float, full: float) -> float:
    """How far past ``threshold`` toward ``full`` the value is, from 0 to 1."""
    if full <= threshold:
        return 1.0
    return min(1.0, max(0.0, (value - threshold) / (full - threshold)))


def _label(node: ReviewNode) -> str:
    if node.kind != LEAF:
        return node.title.strip() or f"untitled {node.kind}"
    words = without_heading_marks(node.excerpt).split()
    if not words:
        return "empty passage"
    opening = " ".join(words[:_EXCERPT_WORDS])
    return f"\u201c{opening}\u2026\u201d" if len(words) > _EXCERPT_WORDS else f"\u201c{opening}\u201d"


def review_nodes(rows: Iterable[Mapping[str, Any]]) -> list[ReviewNode]:
    """``ReviewNode`` rows from plain mappings with the same keys (as the selector returns them)."""
    return [ReviewNode(**row) for row in rows]
