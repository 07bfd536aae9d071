"""The fusion-and-routing stage on plain data (``retrieval.routing.route_documents``): no
database, no settings; the values it returns are what ``retrieve()`` routes the budget by."""

from __future__ import annotations

import dataclasses

import pytest

from retrieval.result import LEXICAL, LLM_SELECT, VECTOR
from retrieval.routing import MAX_SELECTED_DOCUMENTS, DocumentFacts, Routing, route_documents

WEIGHTS = {VECTOR: 1.0, LEXICAL: 2.0, LLM_SELECT: 1.0}


def _facts(**sizes: int) -> dict[int, DocumentFacts]:
    """Documents 1, 2, ... with these token counts: ``_facts(d1=300, d2=50)``."""
    return {
        int(name[1:]): DocumentFacts(title=f"Doc {name[1:]}", token_count=size)
        for name, size in sizes.items()
    }


def _facts_of(scores: dict[int, float]) -> dict[int, DocumentFacts]:
    return {pk: DocumentFacts(title=str(pk), token_count=400) for pk in scores}


def _route(**overrides: object) -> Routing:
    arguments: dict[str, object] = {
        "mode": "vector",
        "retrieval_paths": {VECTOR: {1: 0.9, 2: 0.85, 3: 0.2}},
        "llm_scores": None,
        "weights": WEIGHTS,
        "facts": _facts(d1=300, d2=300, d3=100),
        "named_documents": frozenset(),
        "budget": 500,
    }
    arguments.update(overrides)
    return route_documents(**arguments)  # type: ignore[arg-type]


def test_near_ties_are_selected_and_go_to_the_node_level_when_they_do_not_fit() -> None:
    routing = _route()
    assert routing.selected == (1, 2)  # 3 scored under half of the best
    assert not routing.whole  # 600 tokens against a budget of 500
    assert [item.key for item in routing.fused] == [1, 2, 3]
    assert routing.ranks == {1: 0, 2: 1, 3: 2}
    assert routing.path_names == (VECTOR,) and routing.notes == ()


def test_documents_that_fit_whole_let_the_budget_take_the_next_ones() -> None:
    routing = _route(budget=1000)
    assert routing.whole and routing.selected == (1, 2, 3)  # 700 tokens: the third fits too
    assert _route(budget=650).selected == (1, 2)  # the third would not fit


def test_a_document_gone_since_the_paths_ran_is_left_out() -> None:
    routing = _route(facts=_facts(d1=300, d3=100))  # document 2 was deleted meanwhile
    assert [item.key for item in routing.fused] == [1, 3] and 2 not in routing.ranks


def test_the_documents_a_query_names_are_routed_to_with_the_best_one() -> None:
    routing = _route(named_documents=frozenset({3}))
    assert routing.selected == (1, 3)
    assert routing.notes == (
        "Searched because the query names it: Doc 3.",
        "Not searched, because the query names other documents: Doc 2.",
    )
    # Named but found by no path: the scores route alone.
    assert _route(named_documents=frozenset({9})).selected == (1, 2)


def test_llm_mode_fuses_llmselect_alone_and_bipath_fuses_it_with_the_rest() -> None:
    llm = {3: 1.0}
    alone = _route(mode="llm", llm_scores=llm)
    assert alone.path_names == (LLM_SELECT,) and alone.selected == (3,)
    both = _route(mode="bipath", llm_scores={1: 1.0})  # a pick the vector side agrees with
    assert both.path_names == (LLM_SELECT, VECTOR)
    found_by = {item.key: item.paths for item in both.fused}
    assert found_by[1] == (LLM_SELECT, VECTOR) and found_by[2] == (VECTOR,)  # in the paths' order
    # LLMselect failed: the other paths carry the query in every mode.
    assert _route(mode="llm", llm_scores=None).path_names == (VECTOR,)
    # It answered but picked nothing it was shown (a small model's invented ids): the same.
    picked_nothing = _route(mode="llm", llm_scores={})
    assert picked_nothing.path_names == (VECTOR,) and picked_nothing.selected


@pytest.mark.parametrize(
    ("overrides", "note"),
    [
        ({"retrieval_paths": {VECTOR: {}}}, "No document matched: the scope holds no indexed text"),
        ({"mode": "llm", "llm_scores": {99: 1.0}}, "llm mode: LLMselect chose no document"),
    ],
)
def test_nothing_selected_says_why(overrides: dict[str, object], note: str) -> None:
    routing = _route(**overrides)
    assert routing.selected == () and not routing.whole
    assert len(routing.notes) == 1 and routing.notes[0].startswith(note)


def test_at_most_max_selected_documents_are_selected_and_the_value_is_frozen() -> None:
    count = MAX_SELECTED_DOCUMENTS + 5
    facts = {pk: DocumentFacts(title=str(pk), token_count=10) for pk in range(1, count + 1)}
    routing = _route(retrieval_paths={VECTOR: dict.fromkeys(facts, 0.5)}, facts=facts, budget=10_000)
    assert len(routing.selected) == MAX_SELECTED_DOCUMENTS
    with pytest.raises(dataclasses.FrozenInstanceError):
        routing.selected = ()  # type: ignore[misc]


def test_llmselect_picking_no_better_than_chance_leaves_the_vector_order() -> None:
    # 20 documents shown, 5 of them in the vector path's top: a model at chance gets a quarter of
    # its picks there. Weighed by that raw share, its pick of document 2 would pass document 1.
    vector = {pk: 1.0 - pk / 100 for pk in range(1, 21)}
    facts = {pk: DocumentFacts(title=str(pk), token_count=400) for pk in vector}
    at_chance = {2: 1.0, 12: 1.0, 15: 1.0, 18: 1.0}
    routing = _route(
        mode="bipath",
        retrieval_paths={VECTOR: vector},
        llm_scores=at_chance,
        llm_offered=list(vector),
        facts=facts,
    )
    assert [item.key for item in routing.fused][:5] == [1, 2, 3, 4, 5]
    # Agreeing beyond chance, its pick leads.
    agreeing = _route(
        mode="bipath",
        retrieval_paths={VECTOR: vector},
        llm_scores={2: 1.0, 3: 0.2},
        llm_offered=list(vector),
        facts=facts,
    )
    assert [item.key for item in agreeing.fused][:2] == [2, 1]


# Eight documents shown to LLMselect; the vector side's top quarter (2 of 8) is documents 1 and 2,
# its selection 1 to 4 (near-ties), and 5 to 8 trail under half of the best.
NEAR_TIES = {1: 0.60, 2: 0.59, 3: 0.58, 4: 0.57, 5: 0.40, 6: 0.39, 7: 0.38, 8: 0.30}


def _bipath(llm_scores: dict[int, float], **overrides: object) -> Routing:
    arguments: dict[str, object] = {
        "mode": "bipath",
        "retrieval_paths": {VECTOR: NEAR_TIES},
        "llm_scores": llm_scores,
        "llm_offered": list(NEAR_TIES),
        "facts": _facts_of(NEAR_TIES),
    }
    arguments.update(overrides)
    return _route(**arguments)


def test_a_wrong_llmselect_pick_does_not_ride_on_a_right_one() -> None:
    # One pick the vector side ranks first, one it ranks seventh: agreement beyond chance, which
    # the right pick earned and the wrong one must not share.
    routing = _bipath({1: 1.0, 7: 1.0})
    found_by = {item.key: item.paths for item in routing.fused}
    assert found_by[1] == (LLM_SELECT, VECTOR) and found_by[7] == (VECTOR,)
    assert 7 not in routing.selected
    assert [item.key for item in routing.fused] == [1, 2, 3, 4, 5, 6, 7, 8]


def test_llmselect_adds_to_the_vector_selection_and_never_takes_from_it() -> None:
    # A confident right pick at LLMselect's 1.0 puts the vector side's near-ties under half of
    # the fused best; they stay selected all the same.
    alone = _bipath({1: 1.0})
    assert alone.fused[0].key == 1 and alone.fused[1].score < 0.5 * alone.fused[0].score
    assert alone.selected == (1, 2, 3, 4)
    # A pick the vector side ranks in its top but under its selection comes in beside it.
    trailing = {1: 0.9, 2: 0.3, 3: 0.2, 4: 0.1, 5: 0.05, 6: 0.04, 7: 0.03, 8: 0.0}
    added = _bipath({2: 1.0}, retrieval_paths={VECTOR: trailing})
    assert _route(retrieval_paths={VECTOR: trailing}, facts=_facts_of(trailing)).selected == (1,)
    assert set(added.selected) == {1, 2}
    # Vector mode and llm mode select as before: there is no other side to keep.
    assert _route(mode="llm", llm_scores={7: 1.0}, facts=_facts_of(NEAR_TIES)).selected == (7,)
