"""Budget packing: choose what to return within a token budget, then put it in document order.

Greedy by score, never by sibling position:
1. LLM-chosen candidates go first (best score first), then the rest (best score first). Ties
   break by document rank, then start_char, then node id, so a run is reproducible.
2. A candidate is taken when it fits the tokens left and repeats no text already taken: an
   internal node taken whole excludes its descendants and its ancestors. One that does not
   fit is skipped and smaller ones after it still get their chance.
3. If nothing fits at all, the best leaf is cut to the budget by the caller's ``truncate``
   and flagged ``truncated=True`` (the best candidate of any kind when no leaf is offered).
4. What was taken is returned in document order: document rank, then start_char.

With ``max_chunks`` (a query's ``top_k``) packing also stops once that many are taken.

The total never exceeds the budget, truncation included.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

from retrieval.outline import OutlineNode, SpanIndex

type SkipReason = Literal["overlap", "over_budget"]


@dataclass(frozen=True, slots=True)
class Candidate:
    node: OutlineNode
    score: float
    token_count: int  # tokens of the text this candidate returns (the whole span for internal nodes)
    from_llm: bool = False
    path_scores: Mapping[str, float] = field(default_factory=dict)  # carried along for the response
    truncated: bool = False

    def __post_init__(self) -> None:
        if self.token_count < 0:
            raise ValueError(f"candidate node {self.node.id}: token_count cannot be negative")


@dataclass(frozen=True, slots=True)
class Skipped:
    candidate: Candidate
    reason: SkipReason


@dataclass(frozen=True, slots=True)
class PackResult:
    chosen: tuple[Candidate, ...]  # in document order
    total_tokens: int
    budget: int
    truncated: bool  # the single chosen candidate was cut to fit
    skipped: tuple[Skipped, ...]  # in the order they were considered

    @property
    def tokens_left(self) -> int:
        return self.budget - self.total_tokens


def pack(
    candidates: Sequence[Candidate],
    *,
    budget: int,
    truncate: Callable[[Candidate, int], Candidate | None],
    document_rank: Mapping[int, int] | None = None,
    max_chunks: int | None = None,
) -> PackResult:
    """Fill ``budget`` tokens greedily by score; see the module docstring.

    ``document_rank`` maps document id -> rank (0 = best) from document-level fusion;
    documents it does not name come after the ranked ones, by id.
    ``truncate(candidate, budget)`` returns the candidate cut to at most ``budget`` tokens
    (its ``token_count`` updated), or None when it cannot. ``max_chunks``: take at most that
    many (None: as many as fit).
    """
    if budget < 0:
        raise ValueError(f"the token budget cannot be negative, got {budget}")
    ranks = document_rank or {}
    ordered = sorted(candidates, key=lambda candidate: _priority(candidate, ranks))
    chosen, skipped = _greedy(ordered, budget, max_chunks)
    truncated = False
    if not chosen and budget > 0:
        cut = _truncate_best(ordered, budget, truncate)
        if cut is not None:
            chosen, truncated = [cut], True
            skipped = [item for item in skipped if item.candidate.node.id != cut.node.id]
    chosen.sort(key=lambda candidate: _document_position(candidate.node, ranks))
    return PackResult(
        chosen=tuple(chosen),
        total_tokens=sum(candidate.token_count for candidate in chosen),
        budget=budget,
        truncated=truncated,
        skipped=tuple(skipped),
    )


def whole_documents_fit(token_counts: Iterable[int], budget: int) -> bool:
    """Budget routing: do these documents (or chunks), taken whole, fit the budget together?"""
    return sum(token_counts) <= budget


def _rank_key(document_id: int, ranks: Mapping[int, int]) -> tuple[int, int, int]:
    # Unranked documents sort after every ranked one, by id.
    if document_id in ranks:
        return (0, ranks[document_id], document_id)
    return (1, 0, document_id)


def _priority(candidate: Candidate, ranks: Mapping[int, int]) -> tuple[object, ...]:
    node = candidate.node
    return (
        not candidate.from_llm,  # False sorts first: LLM-chosen go first
        -candidate.score,
        _rank_key(node.document_id, ranks),
        node.start_char,
        node.id,
    )


def _document_position(node: OutlineNode, ranks: Mapping[int, int]) -> tuple[object, ...]:
    return (_rank_key(node.document_id, ranks), node.start_char, node.end_char, node.id)


def _greedy(
    ordered: Sequence[Candidate], budget: int, max_chunks: int | None = None
) -> tuple[list[Candidate], list[Skipped]]:
    chosen: list[Candidate] = []
    skipped: list[Skipped] = []
    taken = SpanIndex()
    left = budget
    for candidate in ordered:
        if max_chunks is not None and len(chosen) >= max_chunks:
            break
        if taken.overlaps(candidate.node):
            skipped.append(Skipped(candidate, "overlap"))
        elif candidate.token_count > left:
            skipped.append(Skipped(candidate, "over_budget"))
        else:
            taken.add(candidate.node)
            chosen.append(candidate)
            left -= candidate.token_count
    return chosen, skipped


def _truncate_best(
    ordered: Sequence[Candidate], budget: int, truncate: Callable[[Candidate, int], Candidate | None]
) -> Candidate | None:
    """Cut the best leaf (else the best candidate) down to the budget; None if none can be cut."""
    leaves = [candidate for candidate in ordered if candidate.node.is_leaf]
    for candidate in leaves or ordered:
        cut = truncate(candidate, budget)
        # Guard against a truncate that overshoots: the budget is a hard limit.
        if cut is not None and cut.token_count <= budget:
            return dataclasses.replace(cut, truncated=True)
    return None


def _with_count(candidate: Candidate, token_count: int) -> Candidate:
    # A query packs hundreds of candidates and re-packs a few times: copy only what changes.
    if candidate.token_count == token_count:
        return candidate
    return dataclasses.replace(candidate, token_count=token_count)


def pack_exact(
    candidates: Sequence[Candidate],
    *,
    budget: int,
    text_of: Callable[[int], str],
    count: Callable[[str], int],
    cut: Callable[[str, int], str],
    document_rank: Mapping[int, int] | None = None,
    max_repacks: int = 6,
    max_chunks: int | None = None,
) -> tuple[PackResult, dict[int, str]]:
    """``pack`` on estimated token counts, re-packed until every chosen text is counted exactly.

    Candidates' ``token_count`` may be estimates (stored counts: an internal node's sums its
    children's, and tokenisation at the seams differs). Counting every candidate exactly would
    tokenise each document once per tree level, so only what gets chosen is counted (``count``
    on ``text_of(node id)``), and packing is redone while a chosen count was off. ``cut(text,
    limit)`` shortens a text to ``limit`` tokens for the truncation fallback.
    Returns the packing (chosen candidates carry exact counts) and the text of each chosen node.
    """
    cut_texts: dict[int, str] = {}  # what truncation cut, by node id

    def truncate(candidate: Candidate, limit: int) -> Candidate | None:
        return _cut_exactly(candidate, limit, text_of=text_of, count=count, cut=cut, cut_texts=cut_texts)

    def pack_now(current: Sequence[Candidate]) -> PackResult:
        return pack(
            current, budget=budget, truncate=truncate, document_rank=document_rank, max_chunks=max_chunks
        )

    result, exact = _repack_until_exact(
        candidates, pack_now, text_of=text_of, count=count, max_repacks=max_repacks
    )
    texts = {c.node.id: cut_texts[c.node.id] if c.truncated else text_of(c.node.id) for c in result.chosen}
    chosen = _counted_within_budget(result.chosen, texts, exact, count=count, budget=budget)
    result = dataclasses.replace(
        result, chosen=tuple(chosen), total_tokens=sum(c.token_count for c in chosen)
    )
    return result, {c.node.id: texts[c.node.id] for c in chosen}


def _cut_exactly(
    candidate: Candidate,
    limit: int,
    *,
    text_of: Callable[[int], str],
    count: Callable[[str], int],
    cut: Callable[[str, int], str],
    cut_texts: dict[int, str],
) -> Candidate | None:
    """The truncation fallback: the candidate's text cut to ``limit`` tokens (kept in
    ``cut_texts``) and counted exactly; None when nothing but whitespace is left."""
    text = cut(text_of(candidate.node.id), limit)
    if not text.strip():
        return None
    cut_texts[candidate.node.id] = text
    return dataclasses.replace(candidate, token_count=count(text))


def _repack_until_exact(
    candidates: Sequence[Candidate],
    pack_now: Callable[[Sequence[Candidate]], PackResult],
    *,
    text_of: Callable[[int], str],
    count: Callable[[str], int],
    max_repacks: int,
) -> tuple[PackResult, dict[int, int]]:
    """Pack, count what was chosen exactly, and pack again while a chosen count was off (at most
    ``max_repacks`` times); the last packing and the exact counts, by node id."""
    exact: dict[int, int] = {}
    current = list(candidates)
    result = pack_now(current)
    for _ in range(max_repacks):
        if result.truncated:
            break  # the cut text was counted exactly by truncate()
        fresh = [c for c in result.chosen if c.node.id not in exact]
        for candidate in fresh:
            exact[candidate.node.id] = count(text_of(candidate.node.id))
        if all(exact[c.node.id] == c.token_count for c in fresh):
            break
        current = [_with_count(c, exact.get(c.node.id, c.token_count)) for c in current]
        result = pack_now(current)
    return result, exact


def _counted_within_budget(
    chosen: Sequence[Candidate],
    texts: Mapping[int, str],
    exact: Mapping[int, int],
    *,
    count: Callable[[str], int],
    budget: int,
) -> list[Candidate]:
    """The chosen candidates with exact counts. Counts still moving after the last re-pack
    (pathological estimates): the budget is a hard limit, so the lowest-priority chunks are
    dropped until the rest fits."""
    counted = [
        _with_count(c, count(texts[c.node.id]) if c.truncated or c.node.id not in exact else exact[c.node.id])
        for c in chosen
    ]
    while counted and sum(c.token_count for c in counted) > budget:
        counted.remove(min(counted, key=lambda c: (c.from_llm, c.score)))
    return counted
