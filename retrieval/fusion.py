"""Fusing the retrieval paths (ancestor/descendant overlap is removed by ``packing``).

The same code fuses at both levels: documents (LLMselect + vector) and nodes
(LLMnavigate + TreeExpansion). Paths score on different scales (an LLM's 0-10, a cosine,
a TreeExpansion total), so each path is min-max normalised to [0, 1] before anything is
compared, then combined as a weighted sum:

    fused(k) = Σ_{p that found k} w_p · norm_p(k)  /  Σ_{p that found anything} w_p

A weighted sum rather than a max: a candidate that several paths agree on beats one that
only one path found with the same normalised score, and with a max every path's own top
candidate would tie at 1.0. Dividing by the total weight keeps fused scores in [0, 1]
without changing the order. A path that found nothing adds no weight, so one path running
alone reproduces its own normalised ranking.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Hashable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol


class SortableKey(Hashable, Protocol):
    """Keys must be hashable and ordered, so ties break the same way on every run."""

    def __lt__(self, other: Any, /) -> bool: ...


@dataclass(frozen=True, slots=True)
class Fused[Key]:
    key: Key
    score: float  # the fused score, in [0, 1]
    raw: Mapping[str, float]  # path name -> the score that path gave
    normalised: Mapping[str, float]  # path name -> that score after min-max normalisation
    paths: tuple[str, ...]  # the paths that found it, in the order the paths were given


def normalise[K: SortableKey](scores: Mapping[K, float]) -> dict[K, float]:
    """Min-max to [0, 1]. A single score, or all scores equal, become 1.0: nothing was worse."""
    for key, value in scores.items():
        if not math.isfinite(value):
            raise ValueError(f"score for {key!r} is not a finite number ({value})")
    if not scores:
        return {}
    low = min(scores.values())
    high = max(scores.values())
    if high == low:
        return dict.fromkeys(scores, 1.0)
    span = high - low
    return {key: (value - low) / span for key, value in scores.items()}


def fuse[K: SortableKey](
    paths: Mapping[str, Mapping[K, float]], weights: Mapping[str, float] | None = None
) -> list[Fused[K]]:
    """Union of every path's candidates, normalised per path, combined by weighted sum.

    ``weights`` maps a path name to its weight (>= 0); a path it does not name weighs 1.
    The result is sorted by fused score, best first, then by key.
    """
    path_weights = _path_weights(paths, weights)
    normalised = {name: normalise(scores) for name, scores in paths.items()}
    weight_total = sum(path_weights[name] for name, scores in paths.items() if scores)
    keys: dict[K, None] = {}  # insertion-ordered set
    for scores in paths.values():
        keys.update(dict.fromkeys(scores))
    fused = [_fuse_one(key, paths, normalised, path_weights, weight_total) for key in keys]
    fused.sort(key=lambda item: (-item.score, item.key))
    return fused


def _path_weights(paths: Mapping[str, object], weights: Mapping[str, float] | None) -> dict[str, float]:
    given = weights or {}
    unknown = set(given) - set(paths)
    if unknown:
        raise ValueError(f"weights name paths that were not given: {sorted(unknown)}")
    resolved = {name: given.get(name, 1.0) for name in paths}
    for name, weight in resolved.items():
        if not math.isfinite(weight) or weight < 0:
            raise ValueError(f"weight of path {name!r} must be a finite number >= 0, got {weight}")
    return resolved


def _fuse_one[K: SortableKey](
    key: K,
    paths: Mapping[str, Mapping[K, float]],
    normalised: Mapping[str, Mapping[K, float]],
    path_weights: Mapping[str, float],
    weight_total: float,
) -> Fused[K]:
    found = tuple(name for name, scores in paths.items() if key in scores)
    combined = sum(path_weights[name] * normalised[name][key] for name in found)
    return Fused(
        key=key,
        score=combined / weight_total if weight_total > 0 else 0.0,
        raw={name: paths[name][key] for name in found},
        normalised={name: normalised[name][key] for name in found},
        paths=found,
    )


# What part of the ids an LLM path was shown counts as its reference's top (``agreement``).
AGREEMENT_SHARE = 0.25


@dataclass(frozen=True, slots=True)
class Agreement[Key]:
    """How far an LLM path agrees with a reference path (the vector side of the same level)."""

    weight: float  # its agreement beyond chance, in [0, 1]: the LLM path's fusion weight
    agreed: frozenset[Key]  # the picks the reference ranks in its top (none when weight is 0)

    def trusted(self, llm: Mapping[Key, float]) -> dict[Key, float]:
        """The LLM path's scores that count beside the reference: its agreed picks' only. A
        wrong pick must not ride on the weight a right one earned."""
        return {key: score for key, score in llm.items() if key in self.agreed}


def agreement[K: SortableKey](
    llm: Mapping[K, float],
    reference: Mapping[K, float],
    *,
    top: int,
    offered: Collection[K] = (),
) -> Agreement[K]:
    """The LLM's picks that ``reference`` ranks among its best of what the LLM was shown, and
    how far their share exceeds what picking at random among the ``offered`` ids would give.

    A weak model answers in valid JSON with picks no better than chance; a strong one mostly
    agrees with the vector side and adds what it missed. The raw share is not the measure: the
    LLM is shown the reference's own shortlist, so random picks land in its top as often as the
    top is a part of what was shown (a quarter, for LLMselect's 5 of 20; Gemma 3 270M picking
    at random moved bipath 3.4 to 3.8 points below vector on DragonBall, docs/benchmarks.md).
    The weight is Cohen's chance correction of the share, ``(share - chance) / (1 - chance)``,
    0 at or below chance: a model that agrees with the vector side no more than a coin would
    leaves the ranking as it was (bipath is then the vector path), one that agrees leads.

    The top is the reference's best ``AGREEMENT_SHARE`` of what was shown, at most ``top``: of
    a small outline (one short document's 12 nodes) a fixed top of 20 would be all of it, and
    agreeing with it would say nothing. ``offered``: the ids the LLM was shown (default: the
    reference's and its picks). No picks or no reference: weight 0, none agreed.
    """
    if not llm or not reference or top <= 0:
        return Agreement(0.0, frozenset())
    shown = set(offered or reference) | set(llm)
    best = _best_shown(reference, shown, top=top)
    chance = len(best) / len(shown)
    agreed = frozenset(key for key in llm if key in best)
    share = len(agreed) / len(llm)
    if chance >= 1.0 or share <= chance:
        return Agreement(0.0, frozenset())
    return Agreement((share - chance) / (1.0 - chance), agreed)


def _best_shown[K: SortableKey](reference: Mapping[K, float], shown: set[K], *, top: int) -> set[K]:
    """The reference's best ``AGREEMENT_SHARE`` of the ``shown`` ids, at most ``top`` of them."""
    ranked = sorted((key for key in reference if key in shown), key=lambda key: (-reference[key], key))
    return set(ranked[: min(top, math.ceil(len(shown) * AGREEMENT_SHARE))])
