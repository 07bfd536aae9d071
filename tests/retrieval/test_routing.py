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
    both = _route(mode="bipath", llm_scores=llm)
    assert both.path_names == (LLM_SELECT, VECTOR)
    found_by = {item.key: item.paths for item in both.fused}
    assert found_by[3] == (LLM_SELECT, VECTOR) and found_by[1] == (VECTOR,)  # in the paths' order
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
