"""retrieve() end to end on real PostgreSQL + pgvector with real (local e5) embeddings.

The corpus is four small hand-made documents whose trees are saved through the real tree write
(``tests.trees.tree_save``), so these tests depend on nothing but the models, that write path and
the embedder.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pytest
from django.contrib.auth import get_user_model
from django.core.cache import caches

from documents.ingestion.tree import LEAF
from documents.models import Collection, Document, Node
from documents.services.trees import corpus_version_bump
from openfable.embeddings import get_embedder
from openfable.tokens import count_tokens
from retrieval.document_level import document_info, documents_by_title_in_query
from retrieval.fusion import Fused
from retrieval.result import LEXICAL, TREE_EXPANSION, VECTOR, RetrievalInputError, RetrievalResult
from retrieval.scope import resolve_scope
from retrieval.services import extend_to_budget, retrieve, select_documents
from tests.factories import CollectionFactory, DocumentFactory
from tests.trees import Sec, sec, sec_text, sec_tree, tree_save

pytestmark = pytest.mark.django_db

# -- the corpus ----------------------------------------------------------------------------------


VOLCANOES = sec(
    "Volcanoes",
    "How volcanoes erupt, the hazards they pose and how scientists monitor them.",
    sec(
        "Eruptions",
        "What drives volcanic eruptions and how lava and ash behave.",
        "Volcanic eruptions begin when magma rises through cracks in the crust. Gases dissolved in the "
        "magma expand as it climbs, and the pressure they build decides whether an eruption is gentle "
        "or explosive.",
        "Lava from effusive eruptions flows slowly downhill, burying roads and fields, while explosive "
        "eruptions throw ash columns kilometres into the sky that disrupt air travel for days.",
    ),
    sec(
        "Monitoring",
        "Instruments that warn of an eruption before it happens.",
        "Seismometers placed around a volcano record swarms of small earthquakes caused by magma moving "
        "underground; a sudden rise in their number is the most reliable warning that an eruption is near.",
        "Satellites and GPS stations measure how the ground swells as the magma chamber fills, and gas "
        "sensors at the summit track rising sulfur dioxide emissions.",
    ),
)
TAX = sec(
    "Income Tax Law",
    "Rules on taxable income, deductions and filing deadlines.",
    sec(
        "Taxable income",
        "Which earnings are taxed.",
        "Taxable income includes wages, salaries, bonuses and tips, as well as interest, dividends and "
        "rental income received during the calendar year.",
        sec(
            "Deductions",
            "Expenses that reduce taxable income.",
            "Taxpayers may deduct contributions to a registered pension plan and charitable donations to "
            "approved organisations, up to a limit set each year.",
            "Home office expenses are deductible only when the room is used exclusively and regularly for "
            "the taxpayer's business.",
        ),
    ),
    sec(
        "Filing",
        "Deadlines and penalties for tax returns.",
        "The annual income tax return must be filed by the thirtieth of April; late filing incurs a "
        "penalty of five percent of the balance owing plus interest for each month.",
    ),
)
COOKING = sec(
    "Baking Bread",
    "A guide to mixing, proofing and baking a loaf of bread.",
    sec(
        "Dough",
        "Mixing and kneading the dough.",
        "Mix flour, water, salt and yeast, then knead the dough for ten minutes until it is smooth and "
        "elastic and springs back when pressed.",
        "Let the dough rise in a warm place for about an hour, until it has doubled in size.",
    ),
    sec(
        "Baking",
        "Oven temperature and baking time.",
        "Bake the loaf in a preheated oven at 220 degrees Celsius for thirty minutes, until the crust is "
        "deep brown and the bottom sounds hollow when tapped.",
    ),
)
OCEANS = sec(
    "Ocean Currents",
    "How winds and water density drive the circulation of the oceans.",
    sec(
        "Surface currents",
        "Currents driven by the wind.",
        "Surface currents such as the Gulf Stream are driven by the prevailing winds and carry warm water "
        "from the tropics towards the poles.",
    ),
    sec(
        "Deep circulation",
        "The thermohaline conveyor belt.",
        "Cold, salty water sinks in the North Atlantic and spreads along the ocean floor, a slow conveyor "
        "belt that takes about a thousand years to complete one cycle.",
    ),
)


@dataclass
class Built:
    document: Document
    nodes: dict[str, Node] = field(default_factory=dict)  # by title (leaves: by their text)

    @property
    def id(self) -> int:
        return self.document.pk

    def leaf(self, opening: str) -> Node:
        return next(node for key, node in self.nodes.items() if key.startswith(opening))


@functools.cache
def _embed(texts: tuple[str, ...]) -> np.ndarray:
    # Same texts, same vectors: embed once per test session, insert rows per test.
    return get_embedder().embed_passages(list(texts))


def build_document(spec: Sec, *, collection: Collection, tags: Sequence[str] = ()) -> Built:
    """A document whose leaves partition its content, its tree saved as ingestion saves it."""
    content = sec_text(spec)
    document = DocumentFactory.create(
        collection=collection,
        title=spec.title,
        content=content,
        token_count=count_tokens(content),
        tags=list(tags),
    )
    nodes = tree_save(
        document,
        sec_tree(spec),
        embed=lambda texts: _embed(tuple(texts)),
        embedding_model=get_embedder().model_name,
    )
    return Built(
        document=document,
        nodes={node.content if node.kind == LEAF else node.title: node for node in nodes},
    )


@dataclass
class Corpus:
    volcanoes: Built
    tax: Built
    cooking: Built
    oceans: Built
    earth: Collection
    legal: Collection
    kitchen: Collection


@pytest.fixture(autouse=True)
def _fresh_query_cache() -> Iterator[None]:
    # LocMemCache outlives each test's rolled-back database; corpus versions restart with it.
    caches["default"].clear()
    yield
    caches["default"].clear()


@pytest.fixture
def corpus() -> Corpus:
    earth = CollectionFactory.create(name="Earth", slug="earth")
    legal = CollectionFactory.create(name="Legal", slug="legal")
    kitchen = CollectionFactory.create(name="Kitchen", slug="kitchen")
    return Corpus(
        volcanoes=build_document(VOLCANOES, collection=earth, tags=["science", "geology"]),
        tax=build_document(TAX, collection=legal, tags=["law"]),
        cooking=build_document(COOKING, collection=kitchen, tags=["food"]),
        oceans=build_document(OCEANS, collection=earth, tags=["science"]),
        earth=earth,
        legal=legal,
        kitchen=kitchen,
    )


MONITORING_QUERY = "How can scientists tell that a volcano is about to erupt? earthquake swarms"


def best_chunk(result: RetrievalResult) -> Any:
    return max(result.chunks, key=lambda chunk: chunk.scores.fused)


def assert_document_order(result: RetrievalResult) -> None:
    keys = [(chunk.document_rank, chunk.start_char) for chunk in result.chunks]
    assert keys == sorted(keys)


# -- ranking and routing -------------------------------------------------------------------------


def test_targeted_query_finds_the_right_document_and_leaf(corpus: Corpus) -> None:
    result = retrieve(query=MONITORING_QUERY, token_budget=100, mode="vector")
    assert result.routing == "nodes"
    assert result.documents[0].document_id == corpus.volcanoes.id
    best = best_chunk(result)
    assert best.node_id == corpus.volcanoes.leaf("Seismometers").pk
    assert best.kind == "leaf"
    assert best.found_by == (TREE_EXPANSION,)
    assert best.text == corpus.volcanoes.document.content[best.start_char : best.end_char]
    assert best.toc_path == "Volcanoes › Monitoring"
    assert best.scores.similarity is not None and best.scores.tree_expansion is not None
    assert result.total_tokens <= 100


def test_other_topics_rank_their_own_document_first(corpus: Corpus) -> None:
    tax = retrieve(query="When is the deadline for filing the income tax return?", token_budget=100)
    assert tax.documents[0].document_id == corpus.tax.id
    answer = corpus.tax.leaf("The annual income tax return")
    best = best_chunk(tax)  # the leaf, or its section taken whole
    assert best.start_char <= answer.start_char and answer.end_char <= best.end_char
    bread = retrieve(query="At what oven temperature should bread be baked?", token_budget=2000)
    assert bread.documents[0].document_id == corpus.cooking.id


@pytest.mark.parametrize("budget", [100, 120, 150, 200, 260, 400, 1000, 5000, 32000])
def test_budget_is_never_exceeded(corpus: Corpus, budget: int) -> None:
    for query in (MONITORING_QUERY, "tax deductions for a home office", "ocean", "bread dough"):
        result = retrieve(query=query, token_budget=budget, mode="vector")
        assert result.total_tokens <= budget
        assert result.total_tokens == sum(count_tokens(chunk.text) for chunk in result.chunks)
        assert all(chunk.token_count == count_tokens(chunk.text) for chunk in result.chunks)
        assert result.chunks, (query, budget)
        assert_document_order(result)


def test_whole_documents_when_the_selected_documents_fit(corpus: Corpus) -> None:
    result = retrieve(query=MONITORING_QUERY, token_budget=2000, mode="vector")
    assert result.routing == "documents"
    selected = [document.document_id for document in result.documents if document.selected]
    assert selected[0] == corpus.volcanoes.id
    assert [chunk.document_id for chunk in result.chunks] == selected
    chunk = result.chunks[0]
    assert chunk.text == corpus.volcanoes.document.content
    assert chunk.node_id == corpus.volcanoes.nodes["Volcanoes"].pk
    assert (chunk.start_char, chunk.end_char) == (0, len(chunk.text))
    assert result.path(TREE_EXPANSION) is not None and not result.path(TREE_EXPANSION).ran  # type: ignore[union-attr]


def test_node_level_when_the_documents_do_not_fit(corpus: Corpus) -> None:
    budget = corpus.volcanoes.document.token_count - 1
    result = retrieve(query=MONITORING_QUERY, token_budget=budget, mode="vector")
    assert result.routing == "nodes"
    assert {chunk.document_id for chunk in result.chunks} <= {
        document.document_id for document in result.documents if document.selected
    }
    assert_document_order(result)
    assert result.path(TREE_EXPANSION).ran  # type: ignore[union-attr]


def test_chunks_in_document_order_across_documents(corpus: Corpus) -> None:
    # An ambiguous query selects several documents; chunks follow document rank, then offset.
    result = retrieve(query="science of the earth: volcanoes and ocean currents", token_budget=150)
    assert_document_order(result)
    ranks = {document.document_id: document.rank for document in result.documents}
    assert all(chunk.document_rank == ranks[chunk.document_id] for chunk in result.chunks)


def test_result_reports_paths_timings_and_is_json_ready(corpus: Corpus) -> None:
    import json

    result = retrieve(query=MONITORING_QUERY, token_budget=120)  # the document has 140 tokens
    data = json.loads(json.dumps(result.to_dict()))
    assert data["mode"] == "vector"  # no LLM configured: the default
    assert data["paths_run"] == [VECTOR, LEXICAL, TREE_EXPANSION]
    reasons = {path["name"]: path["reason"] for path in data["paths"]}
    assert "no LLM configured" in reasons["llm_select"]
    assert "no LLM configured" in reasons["llm_navigate"]
    assert {"embed", "vector", "fusion", "tree_expansion", "packing", "total"} <= set(data["timings_ms"])
    assert data["llm_usage"]["calls"] == 0
    assert data["cached"] is False
    assert data["routing"] == "nodes" and data["total_tokens"] <= 120
    chunk = data["chunks"][0]
    assert {"node_id", "document_id", "document_title", "toc_path", "kind", "start_char", "end_char"} <= set(
        chunk
    )
    assert {"similarity", "lexical", "inherited", "child", "tree_expansion", "llm", "fused"} == set(
        chunk["scores"]
    )


def test_vector_mode_is_deterministic(corpus: Corpus) -> None:
    def strip(result: RetrievalResult) -> dict[str, Any]:
        data = result.to_dict()
        data.pop("timings_ms")
        return data

    first = retrieve(query="volcano ash and lava", token_budget=120, mode="vector", use_cache=False)
    second = retrieve(query="volcano ash and lava", token_budget=120, mode="vector", use_cache=False)
    assert strip(first) == strip(second)


def test_select_documents_keeps_near_ties_and_drops_the_rest() -> None:
    from retrieval.fusion import fuse

    fused = fuse({"vector": {1: 0.90, 2: 0.89, 3: 0.70, 4: 0.60}})
    assert select_documents(fused) == [1, 2]
    assert select_documents(fuse({"vector": {7: 0.5}})) == [7]
    assert select_documents([]) == []


# -- filters ---------------------------------------------------------------------------------------


def test_filters_restrict_the_documents(corpus: Corpus) -> None:
    def documents_of(**filters: Any) -> set[int]:
        result = retrieve(query="volcano eruption", token_budget=150, **filters)
        return {document.document_id for document in result.documents} | {
            chunk.document_id for chunk in result.chunks
        }

    assert documents_of(collection="earth") <= {corpus.volcanoes.id, corpus.oceans.id}
    assert documents_of(collection=corpus.legal.pk) == {corpus.tax.id}
    assert documents_of(documents=[corpus.cooking.id]) == {corpus.cooking.id}
    assert documents_of(tags=["science"]) <= {corpus.volcanoes.id, corpus.oceans.id}
    assert documents_of(tags=["science", "geology"]) == {corpus.volcanoes.id}
    result = retrieve(query="volcano eruption", token_budget=150, collection="earth", tags=["science"])
    assert result.filters == {"collection": "earth", "tags": ["science"]}


def test_whole_collections_are_kept_to_without_listing_their_documents(corpus: Corpus) -> None:
    # A collection filter alone, or a user's unfiltered query: every document of the collections,
    # which the statements keep to themselves (a collection of 100,000 documents lists none).
    scope = resolve_scope(collection="earth", documents=None, tags=None, user=None)
    assert scope.document_ids is None and scope.whole_collections == (corpus.earth.pk,)
    assert scope.searchable_documents == 2  # volcanoes and oceans, from the collection's statistics
    reader = get_user_model().objects.create(username="reader")
    corpus.earth.members.add(reader)
    corpus.kitchen.members.add(reader)
    mine = resolve_scope(collection=None, documents=None, tags=None, user=reader)
    assert mine.document_ids is None and set(mine.whole_collections or ()) == {
        corpus.earth.pk,
        corpus.kitchen.pk,
    }
    # Every path of the query keeps to them: the titles it names, BM25, the vector search.
    # A title named from outside them is no title the query names.
    named = "What do the Income Tax Law and Volcanoes say about Baking Bread?"
    assert set(documents_by_title_in_query(query=named, scope=scope)) == {"Volcanoes"}
    assert set(documents_by_title_in_query(query=named, scope=mine)) == {"Volcanoes", "Baking Bread"}
    # What LLMselect may read of a small scope: its documents, and no others.
    assert set(document_info([], scope=scope, whole_scope=True)) == {corpus.volcanoes.id, corpus.oceans.id}
    found = retrieve(query="Tax rules and volcano eruption", token_budget=150, user=reader, use_cache=False)
    assert {document.document_id for document in found.documents} <= {
        corpus.volcanoes.id, corpus.oceans.id, corpus.cooking.id,
    }  # fmt: skip
    assert found.path(LEXICAL).detail["documents_in_scope"] == 3  # type: ignore[union-attr]
    # The whole-collection answer is the one the same documents, listed, give.
    listed = retrieve(
        query=MONITORING_QUERY,
        token_budget=150,
        documents=[corpus.volcanoes.id, corpus.oceans.id],
        use_cache=False,
    )
    whole = retrieve(query=MONITORING_QUERY, token_budget=150, collection="earth", use_cache=False)
    assert [chunk.node_id for chunk in whole.chunks] == [chunk.node_id for chunk in listed.chunks]
    assert whole.chunks


def test_an_empty_collection_is_refused_and_a_user_with_nothing_finds_nothing(corpus: Corpus) -> None:
    empty = CollectionFactory.create(name="Empty", slug="empty")
    with pytest.raises(RetrievalInputError, match="No document matches all the filters together"):
        retrieve(query="anything", token_budget=500, collection="empty")
    newcomer = get_user_model().objects.create(username="newcomer")
    empty.members.add(newcomer)
    result = retrieve(query="volcano", token_budget=500, user=newcomer, use_cache=False)
    assert result.chunks == () and result.documents == ()


def test_a_selective_filter_is_not_starved(corpus: Corpus) -> None:
    # The tax document is the least similar to this query: an index scan filtered afterwards
    # could return none of its nodes. The restricted exact scan always does.
    result = retrieve(query=MONITORING_QUERY, token_budget=100, documents=[corpus.tax.id])
    assert result.chunks and {chunk.document_id for chunk in result.chunks} == {corpus.tax.id}
    assert result.path(VECTOR).detail["strategy"] == "exact"  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("filters", "message"),
    [
        ({"collection": "nope"}, "There is no collection 'nope'"),
        ({"collection": 987654}, "There is no collection 987654"),
        ({"documents": [987654, 987655]}, "No document with id 987654, 987655"),
        ({"documents": ["x"]}, "Document ids are positive whole numbers"),
        ({"tags": ["astrology"]}, "No document has the tag 'astrology'"),
        ({"collection": "legal", "tags": ["food"]}, "No document matches all the filters together"),
    ],
)
def test_unknown_filter_values_are_refused(corpus: Corpus, filters: dict[str, Any], message: str) -> None:
    with pytest.raises(RetrievalInputError, match=message):
        retrieve(query="anything", token_budget=500, **filters)


def test_user_sees_shared_own_and_member_collections_only(corpus: Corpus) -> None:
    users = get_user_model().objects
    owner, stranger = users.create(username="owner"), users.create(username="stranger")
    private = CollectionFactory.create(name="Private", slug="private", owner=owner)
    build_document(OCEANS, collection=private)
    with pytest.raises(RetrievalInputError, match="There is no collection 'private'"):
        retrieve(query="ocean", token_budget=500, collection="private", user=stranger)
    assert retrieve(query="ocean", token_budget=500, collection="private", user=owner).chunks
    private.members.add(stranger)
    assert retrieve(query="ocean", token_budget=500, collection="private", user=stranger).chunks


# -- input validation ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"query": "", "token_budget": 500}, "The query is empty"),
        ({"query": "   \n", "token_budget": 500}, "The query is empty"),
        ({"query": "q" * 5000, "token_budget": 500}, "the limit is 4,000"),
        (
            {"query": "lava", "token_budget": 99},
            "The token budget 99 is outside the accepted range 100–32000",
        ),
        ({"query": "lava", "token_budget": 32001}, "outside the accepted range"),
        ({"query": "lava", "token_budget": "500"}, "must be a whole number"),
        ({"query": "lava", "token_budget": True}, "must be a whole number"),
        ({"query": "lava", "token_budget": 500, "mode": "fast"}, "Unknown mode 'fast'. Use one of: bipath"),
    ],
)
def test_bad_input_is_refused_with_a_message(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(RetrievalInputError, match=message) as error:
        retrieve(**kwargs)
    assert isinstance(error.value, ValueError)


def test_empty_corpus_gives_an_empty_result_with_a_note() -> None:
    result = retrieve(query="lava", token_budget=500)
    assert result.chunks == () and result.total_tokens == 0
    assert any("No document matched" in note for note in result.notes)


# -- cache -----------------------------------------------------------------------------------------


def test_repeat_query_is_cached_until_the_corpus_changes(corpus: Corpus) -> None:
    first = retrieve(query=MONITORING_QUERY, token_budget=150)
    second = retrieve(query=MONITORING_QUERY, token_budget=150)
    assert not first.cached and second.cached
    assert second.chunks == first.chunks
    assert set(second.timings_ms) == {"cache", "total"}
    assert retrieve(query=MONITORING_QUERY, token_budget=151).cached is False  # another key
    corpus_version_bump()
    third = retrieve(query=MONITORING_QUERY, token_budget=150)
    assert not third.cached
    assert third.corpus_version == first.corpus_version + 1


# -- queries ---------------------------------------------------------------------------------------


def test_query_count_is_bounded(corpus: Corpus, django_assert_max_num_queries: Any) -> None:
    # Node routing, filters on: collection, scope ids, corpus version, titles the query names,
    # whether the collection has its own index, node count, exact scan, query terms, lexical
    # documents, document info, every node with its similarity, contents, lexical nodes, the
    # answer's documents (file name, tags, metadata). Nothing per node or per document.
    with django_assert_max_num_queries(14):
        result = retrieve(query="earth science", token_budget=100, collection="earth", use_cache=False)
    assert result.routing == "nodes" and result.chunks
    build_document(COOKING, collection=corpus.earth)  # more documents, same number of queries
    with django_assert_max_num_queries(14):
        retrieve(query="earth science", token_budget=100, collection="earth", use_cache=False)


def test_stale_stored_token_counts_never_break_the_budget(corpus: Corpus) -> None:
    # Stored counts claim everything is tiny: routing and packing must trust the text instead.
    Node.objects.update(token_count=1)
    Document.objects.update(token_count=1)
    for budget in (100, 130):
        result = retrieve(query=MONITORING_QUERY, token_budget=budget, use_cache=False)
        assert result.routing == "nodes"
        assert result.chunks and result.total_tokens <= budget
        assert result.total_tokens == sum(count_tokens(chunk.text) for chunk in result.chunks)
    assert any("stale" in note for note in result.notes)


@pytest.mark.slow
def test_a_tiny_budget_cuts_the_best_leaf_and_flags_it() -> None:
    sentence = "Seismometers record swarms of small earthquakes as magma moves beneath the volcano. "
    long_read = sec("Long read", "One long passage about volcano seismology.", sentence * 30, sentence * 30)
    built = build_document(long_read, collection=CollectionFactory.create())
    result = retrieve(query=MONITORING_QUERY, token_budget=100)
    assert [chunk.truncated for chunk in result.chunks] == [True]
    chunk = result.chunks[0]
    assert chunk.kind == "leaf" and 0 < chunk.token_count <= 100 and result.total_tokens == chunk.token_count
    assert built.document.content[chunk.start_char : chunk.end_char] == chunk.text
    assert any("cut to fit" in note for note in result.notes)


def test_pack_exact_repacks_until_the_counted_text_fits() -> None:
    from retrieval.packing import Candidate, pack_exact
    from tests.retrieval.outline_factory import build, leaf, node

    tree = build(
        node("root", 0.1, leaf("a", 0.9, tokens=1), leaf("b", 0.8, tokens=1), leaf("c", 0.7, tokens=1))
    )
    real = {"a": 10, "b": 30, "c": 10}  # the stored counts (1 each) were wrong
    names = {outline.id: name for name, outline in tree.by_name.items()}
    candidates = [
        Candidate(node=tree[name], score=tree[name].similarity, token_count=1) for name in ("a", "b", "c")
    ]
    packed, texts = pack_exact(
        candidates,
        budget=25,
        text_of=names.__getitem__,
        count=lambda text: real[text],
        cut=lambda text, limit: text,
    )
    assert [names[c.node.id] for c in packed.chosen] == ["a", "c"]  # b no longer fits once counted
    assert packed.total_tokens == 20 and texts == {tree["a"].id: "a", tree["c"].id: "c"}


def test_a_large_budget_also_takes_the_next_documents_whole(corpus: Corpus) -> None:
    tight = retrieve(
        query=MONITORING_QUERY, token_budget=corpus.volcanoes.document.token_count, mode="vector"
    )
    roomy = retrieve(query=MONITORING_QUERY, token_budget=32000, mode="vector")
    assert tight.routing == roomy.routing == "documents"
    assert [chunk.document_id for chunk in tight.chunks] == [corpus.volcanoes.id]
    assert len(roomy.chunks) > 1 and roomy.chunks[0].document_id == corpus.volcanoes.id
    assert roomy.total_tokens <= 32000


def test_extend_to_budget_adds_what_fits_in_fused_order() -> None:
    fused = [
        Fused(key=key, score=score, raw={}, normalised={}, paths=("vector",))
        for key, score in [(1, 1.0), (2, 0.4), (3, 0.3), (4, 0.2)]
    ]
    sizes = {1: 100, 2: 500, 3: 150, 4: 100}
    assert extend_to_budget([1], fused, sizes=sizes, budget=400) == [1, 3, 4]
    assert extend_to_budget([1], fused, sizes=sizes, budget=100) == [1]


# -- the lexical path -----------------------------------------------------------------------------


def test_the_lexical_path_reports_its_terms_and_scores(corpus: Corpus) -> None:
    # The volcano document (140 tokens) does not fit 100: the node level runs.
    result = retrieve(query="Which instruments record earthquake swarms under volcanoes?", token_budget=100)
    lexical = result.path(LEXICAL)
    assert lexical is not None and lexical.ran and lexical.candidates >= 1
    assert lexical.detail["terms"] == ["earthquak", "instrument", "record", "swarm", "volcano"]
    assert lexical.detail["nodes_matched"] >= 1
    assert result.routing == "nodes" and result.documents[0].document_id == corpus.volcanoes.id
    assert LEXICAL in result.documents[0].found_by and result.documents[0].path_scores[LEXICAL] > 0
    chunk = next(c for c in result.chunks if "swarms of small earthquakes" in c.text)
    assert chunk.scores.lexical is not None and chunk.scores.lexical > 0


def test_a_document_only_the_lexical_path_finds_still_competes(corpus: Corpus, settings: Any) -> None:
    # With K = 1 the vector path sees one document; the query's rare word names another one.
    settings.RETRIEVAL_TOP_K = 1
    result = retrieve(query="volcano eruption warnings and the Gulf Stream", token_budget=2000)
    by_id = {hit.document_id: hit for hit in result.documents}
    assert by_id[corpus.oceans.id].found_by == (LEXICAL,)
    assert len({hit.document_id for hit in result.documents if VECTOR in hit.found_by}) == 1


def test_the_lexical_path_says_why_it_did_not_run(corpus: Corpus, settings: Any) -> None:
    stop_words = retrieve(query="what is it that they were", token_budget=100)
    path = stop_words.path(LEXICAL)
    assert path is not None and not path.ran and "no searchable words" in path.reason
    assert stop_words.chunks  # the vector path still answers

    settings.RETRIEVAL_LEXICAL_WEIGHT = 0.0
    settings.RETRIEVAL_LEXICAL_NODE_SHARE = 0.0
    off = retrieve(query="thermohaline conveyor belt", token_budget=100)
    path = off.path(LEXICAL)
    assert path is not None and not path.ran and "OPENFABLE_RETRIEVAL_LEXICAL_WEIGHT" in path.reason
    assert all(chunk.scores.lexical is None for chunk in off.chunks)
    assert all(LEXICAL not in hit.found_by for hit in off.documents)
