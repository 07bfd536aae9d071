"""Segmentation by dynamic programming, shared by leaves (over units) and groups (over leaves),
the similarities it reads and what each kind of cut costs (pure, no Django)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from documents.ingestion.sentences import BREAK_LINE, BREAK_PARAGRAPH, BREAK_SENTENCE, BREAK_WRAP

# Cost of cutting at a boundary of each strength, added to the z-scored similarity across it.
LEAF_BREAK_COST = {BREAK_WRAP: 3.0, BREAK_SENTENCE: 0.3, BREAK_LINE: 0.0, BREAK_PARAGRAPH: -0.6}
GROUP_BREAK_COST = {BREAK_WRAP: 2.0, BREAK_SENTENCE: 0.3, BREAK_LINE: -0.2, BREAK_PARAGRAPH: -0.5}
TITLED_HEADING_BONUS = 2.0
UNTITLED_HEADING_BONUS = 1.2
# Between groups of leaves a heading is a weaker hint: in a list of small headed items every
# leaf starts with one.
GROUP_HEADING_BONUS = 1.0
AFTER_HEADING_PENALTY = 4.0  # never leave a heading line alone at the end of a chunk
FORCED_CUT = 50.0
# Bold lines and "Label:" lines are also used for emphasis and form fields: they only
# attract cuts, where markdown, numbered and ARTICLE headings force them.
WEAK_FAMILIES = frozenset(["bold", "label"])


def segment(
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
    costs = _CutCosts(break_costs, target, min_size, size_weight, whole or {}, whole_bonus)
    best = [0.0] + [math.inf] * count  # best[end]: the cheapest cut of sizes[:end]
    back = [0] * (count + 1)  # back[end]: where that cut's last segment starts
    for end in range(1, count + 1):
        best[end], back[end] = _cheapest_last_segment(end, sizes, free, max_size, best, costs)
    return _starts(back)


@dataclass(frozen=True)
class _CutCosts:
    """What a segment and the cut before it cost (``segment``'s parameters)."""

    break_costs: Sequence[float]
    target: float
    min_size: float
    size_weight: float
    whole: dict[int, int]
    whole_bonus: float

    def cost(self, before: float, total: float, start: int, end: int) -> float:
        """``before`` (the cheapest cut up to ``start``) plus segment [start, end) of ``total``
        size, in this order of additions: the sums must not change by a rounding."""
        cost = before + self.size_weight * ((total - self.target) / self.target) ** 2
        if total < self.min_size:
            cost += 4.0 * (self.min_size - total) / self.min_size
        if start > 0:
            cost += self.break_costs[start]
        if self.whole.get(start) == end:
            cost -= self.whole_bonus
        return cost


def _cheapest_last_segment(
    end: int,
    sizes: Sequence[float],
    free: Sequence[bool],
    max_size: float,
    best: list[float],
    costs: _CutCosts,
) -> tuple[float, int]:
    """The cheapest cut of ``sizes[:end]`` and the start of its last segment, trying each start
    from ``end - 1`` back until the segment holds more than ``max_size`` of counted items."""
    cheapest, cheapest_start = math.inf, 0
    total, counted, solid = 0.0, 0.0, 0
    for start in range(end - 1, -1, -1):
        total += sizes[start]
        if not free[start]:
            counted += sizes[start]
            solid += 1
        if counted > max_size and solid > 1:
            break
        cost = costs.cost(best[start], total, start, end)
        if cost < cheapest:
            cheapest, cheapest_start = cost, start
    return cheapest, cheapest_start


def _starts(back: list[int]) -> list[int]:
    """The segments' starts, read back from the end through ``back``."""
    starts = []
    cursor = len(back) - 1
    while cursor > 0:
        cursor = back[cursor]
        starts.append(cursor)
    return starts[::-1]


def window_similarities(vectors: np.ndarray, width: int) -> np.ndarray:
    """z-scored cosine similarity across each boundary i (between items i-1 and i), i >= 1,
    comparing the ``width`` items on each side."""
    count = len(vectors)
    boundaries = np.arange(1, count)
    return _similarities(vectors, np.maximum(0, boundaries - width), np.minimum(count, boundaries + width))


def reach_similarities(vectors: np.ndarray, sizes: Sequence[float], reach: float) -> np.ndarray:
    """Like ``window_similarities``, each side taking items until they hold ``reach`` tokens."""
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
