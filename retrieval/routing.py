"""The pure rules of the query path: what the query's words say, and which documents it is routed to.

No database, no settings, no Django: plain values in, plain values out (STYLE.md habit 2), each
with unit tests on plain data (``tests/retrieval``). ``retrieval.services`` runs them as stages.

- ``source_clause`` and ``take_out_titles`` read the query: the opening clause that cites its
  source, and the query without the titles of the documents it names.
- ``route_documents`` is the fusion-and-routing stage: the document-level paths fused, the
  documents the budget is routed on chosen (``select_documents``, ``route_to_named_documents``,
  ``extend_to_budget``), and whether they are returned whole or go to the node level.
"""

from __future__ import annotations

import math
import re
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass

from openfable.llm import Fallback, count_fallback
from retrieval.fusion import Fused, agreement, fuse
from retrieval.packing import whole_documents_fit
from retrieval.result import LLM_SELECT, VECTOR

SELECTION_RATIO = 0.5  # routed documents: fused score >= this share of the best fused score
MAX_SELECTED_DOCUMENTS = 10
# LLMselect is trusted as far as the vector and lexical paths rank its picks this high.
AGREEMENT_TOP_DOCUMENTS = 5


def select_documents(fused: Sequence[Fused[int]], *, keep: Collection[int] = ()) -> list[int]:
    """The documents the budget is routed on: fused score >= SELECTION_RATIO x the best, in
    fused order, at most MAX_SELECTED_DOCUMENTS. A ratio rather than a fixed count: one clearly
    best document stands alone, near-ties travel together.

    ``keep``: documents selected whatever their fused score, and first to a place under the cap
    (the vector side's own selection in bipath mode, which LLMselect may add to, never take from).
    """
    if not fused:
        return []
    first = fused[0]
    # Best at 0 (no path scored anything above its worst): the first document alone.
    floor = SELECTION_RATIO * first.score if first.score > 0 else math.inf
    chosen = [item.key for item in fused if item is first or item.score >= floor or item.key in keep]
    return _under_the_cap(chosen, keep)


def _under_the_cap(chosen: Sequence[int], keep: Collection[int]) -> list[int]:
    """At most MAX_SELECTED_DOCUMENTS of ``chosen``, in its order; those to ``keep`` first."""
    kept = [key for key in chosen if key in keep][:MAX_SELECTED_DOCUMENTS]
    added = [key for key in chosen if key not in keep][: MAX_SELECTED_DOCUMENTS - len(kept)]
    return [key for key in chosen if key in kept or key in added]


def route_to_named_documents(fused: Sequence[Fused[int]], named: Collection[int]) -> list[int]:
    """The documents a query that names documents by their title is routed to: the best-scored
    one and the named ones, in fused order (at most MAX_SELECTED_DOCUMENTS); none when no path
    found a named one (the scores route alone then).

    A question that names its document wants that document, not its namesakes: "Green Fields
    Agriculture Co." scored within half of the "... Ltd." a question named and took 40% of its
    1K budget. A question naming two companies wants both, however far the second fell behind.
    The best-scored document stays whatever its name: the query may ask about something it does
    not name. Others still come in when these fit the budget whole (``extend_to_budget``).
    """
    if not fused or not any(item.key in named for item in fused):
        return []
    best = fused[0].key
    return [item.key for item in fused if item.key == best or item.key in named][:MAX_SELECTED_DOCUMENTS]


def extend_to_budget(
    selected: list[int], fused: Sequence[Fused[int]], *, sizes: Mapping[int, int], budget: int
) -> list[int]:
    """When the selected documents fit the budget whole, let the budget take the next documents
    in fused order too (those that still fit, at most MAX_SELECTED_DOCUMENTS): a large budget
    buys breadth, which questions spanning several documents need."""
    chosen = list(selected)
    used = sum(sizes[pk] for pk in chosen)
    for item in fused:
        if len(chosen) >= MAX_SELECTED_DOCUMENTS:
            break
        size = sizes.get(item.key)
        if item.key in chosen or size is None or used + size > budget:
            continue
        chosen.append(item.key)
        used += size
    return chosen


# An opening "According to ...," or "Based on ...,": up to the first comma that a lower-case word
# follows, so that the commas inside a name ("Greenfield, Fairview Court") stay in the clause.
_SOURCE_CLAUSE = re.compile(r"^\s*(?i:according\s+to|based\s+on)\b.*?,\s+(?=[a-z])", re.DOTALL)


def source_clause(query: str) -> tuple[str, str]:
    """The query's opening clause that cites its source, and the rest: ("According to the judgment
    of Greenfield, Fairview Court, ", "summarize the facts of H. Price's crimes."); ("", query)
    when it has none.

    The clause routes the query (the document level reads it all). Inside the documents it was
    routed to, its words pull towards the passages about the source itself, the judgment's header
    or the report's introduction, rather than towards the answer: the node-level BM25 leaves out
    those of its words the rest of the query does not repeat (``document_level.lexical_documents``).
    """
    found = _SOURCE_CLAUSE.match(query)
    if found is None:
        return "", query
    return query[: found.end()], query[found.end() :]


def take_out_titles(query: str, titles: Sequence[str]) -> tuple[str, list[str]]:
    """The passage query: ``query`` without the titles of the documents it names (see
    ``services._passage_vector``), and the titles it took out (none when the query stays whole).

    A title of several words is taken out however it is written; a one-word title ("JetWing")
    only as the title writes it and not as the query's first word, so that a query about
    volcanoes keeps its subject inside a document titled "Volcanoes". The query itself comes
    back when too little would be left (fewer than three words). The titles found by plain
    substring search (``document_level.documents_by_title_in_query``) can be false friends: a
    document titled "202" is "in" every query about 2021. Only a title taken out here counts as
    named.
    """
    rest, taken = query, []
    for title in sorted({title.strip() for title in titles if title.strip()}, key=len, reverse=True):
        if len(title.split()) > 1:
            rest, found = re.subn(re.escape(title), " ", rest, flags=re.IGNORECASE)
        else:
            rest, found = re.subn(rf"(?<=\W){re.escape(title)}\b", " ", rest)
        if found:
            taken.append(title)
    rest = re.sub(r"\(\s*\)|\[\s*\]", " ", rest)  # the brackets a title sat in
    rest = " ".join(rest.split()).strip(" ,;:-")
    if rest != query and len(re.findall(r"\w+", rest)) >= 3:
        return rest, sorted(taken)
    return query, []


# -- the fusion-and-routing stage ----------------------------------------------------------------


@dataclass(frozen=True)
class DocumentFacts:
    """What routing needs to know of one candidate document."""

    title: str
    token_count: int


@dataclass(frozen=True)
class Routing:
    """Where the budget goes: the fused documents (best first), the selected ones, and whether
    they are returned whole (``whole``) or go to the node level."""

    fused: tuple[Fused[int], ...]  # only documents still there (``facts`` knows them)
    ranks: Mapping[int, int]  # document id -> its place in ``fused``
    selected: tuple[int, ...]  # the documents the budget is routed on, in fused order
    whole: bool  # they fit the budget whole
    path_names: tuple[str, ...]  # the paths that were fused
    notes: tuple[str, ...]


def route_documents(
    *,
    mode: str,
    retrieval_paths: Mapping[str, Mapping[int, float]],
    llm_scores: Mapping[int, float] | None,
    llm_offered: Collection[int] = (),
    weights: Mapping[str, float],
    facts: Mapping[int, DocumentFacts],
    named_documents: Collection[int],
    budget: int,
) -> Routing:
    """Fuse the document-level paths and route the budget.

    ``retrieval_paths`` are the vector (and lexical) scores; ``llm_scores`` LLMselect's, None when
    it did not answer, and ``llm_offered`` the documents it was shown. In "llm" mode with
    LLMselect's answer the other paths only shortlisted documents for it and are not fused.
    """
    doc_paths = _document_paths(mode, retrieval_paths, llm_scores)
    doc_paths, path_weights, vector_side = _trust_llm_select(doc_paths, weights, llm_offered, facts)
    fused = [item for item in fuse(doc_paths, path_weights) if item.key in facts]
    selected, notes = _select(fused, facts, named_documents, keep=vector_side)
    sizes = {pk: fact.token_count for pk, fact in facts.items()}
    # Taken whole, they fit: the budget left takes the next documents (which keeps them fitting).
    whole = bool(selected) and whole_documents_fit((sizes[pk] for pk in selected), budget)
    if whole:
        selected = extend_to_budget(selected, fused, sizes=sizes, budget=budget)
    if not selected:
        notes.append(_nothing_selected(doc_paths))
    return Routing(
        fused=tuple(fused),
        ranks={item.key: rank for rank, item in enumerate(fused)},
        selected=tuple(selected),
        whole=whole,
        path_names=tuple(doc_paths),
        notes=tuple(notes),
    )


def _document_paths(
    mode: str, retrieval_paths: Mapping[str, Mapping[int, float]], llm_scores: Mapping[int, float] | None
) -> dict[str, Mapping[int, float]]:
    """The paths fused: LLMselect's when it answered, the others unless "llm" mode has its answer.

    An answer that picked no document it was shown (a small model invents ids, or scores all 0)
    is no answer in "llm" mode: the other paths choose, as when the call fails."""
    if llm_scores is None:
        return dict(retrieval_paths)
    if mode == "llm" and not llm_scores:
        count_fallback(Fallback.NO_PICKS)
        return dict(retrieval_paths)
    if mode == "llm":
        return {LLM_SELECT: llm_scores}
    return {LLM_SELECT: llm_scores, **retrieval_paths}


def _trust_llm_select(
    doc_paths: Mapping[str, Mapping[int, float]],
    weights: Mapping[str, float],
    offered: Collection[int],
    facts: Mapping[int, object],
) -> tuple[dict[str, Mapping[int, float]], dict[str, float], list[int]]:
    """The paths to fuse, their weights, and the documents to keep selected whatever LLMselect
    says.

    Beside the other paths (bipath mode), LLMselect keeps only its picks that they rank in their
    top ``AGREEMENT_TOP_DOCUMENTS`` of the ``offered`` documents, weighed by how far its picks
    agree beyond chance (``fusion.agreement``), as LLMnavigate is at the node level
    (``node_level._llm_trust``): weighing all its picks let one right pick lend its weight to a
    wrong one, which took the budget (a DragonBall question, docs/benchmarks.md). And the
    documents the other paths select alone stay selected: a small model's confident pick, scored
    1.0 where the vector side's near-ties differ by hundredths, otherwise pushed them under
    SELECTION_RATIO x the best. Alone ("llm" mode), its picks are all it has.
    """
    chosen = {name: weights[name] for name in doc_paths}
    others = {name: scores for name, scores in doc_paths.items() if name != LLM_SELECT}
    if LLM_SELECT not in doc_paths or not others:
        return dict(doc_paths), chosen, []
    ranked = fuse(others, {name: weights[name] for name in others})
    llm = doc_paths[LLM_SELECT]
    agreed = agreement(
        llm, {item.key: item.score for item in ranked}, top=AGREEMENT_TOP_DOCUMENTS, offered=offered
    )
    chosen[LLM_SELECT] *= agreed.weight
    kept = select_documents([item for item in ranked if item.key in facts])
    return {**doc_paths, LLM_SELECT: agreed.trusted(llm)}, chosen, kept


def _nothing_selected(doc_paths: Mapping[str, object]) -> str:
    if LLM_SELECT in doc_paths and VECTOR not in doc_paths:
        return "llm mode: LLMselect chose no document, so nothing was returned."
    return "No document matched: the scope holds no indexed text, or no path found any."


def _select(
    fused: Sequence[Fused[int]],
    facts: Mapping[int, DocumentFacts],
    named_documents: Collection[int],
    *,
    keep: Collection[int],
) -> tuple[list[int], list[str]]:
    """The documents the scores select (with those to ``keep``), or those the query names (with
    the best-scored one), and the notes that say which the names added or left out."""
    selected = select_documents(fused, keep=keep)
    named = route_to_named_documents(fused, named_documents) if named_documents else []
    if not named:
        return selected, []
    notes = []
    if added := [facts[pk].title for pk in named if pk not in selected]:
        notes.append(f"Searched because the query names it: {', '.join(added)}.")
    if left_out := [facts[pk].title for pk in selected if pk not in named]:
        notes.append(f"Not searched, because the query names other documents: {', '.join(left_out)}.")
    return named, notes
