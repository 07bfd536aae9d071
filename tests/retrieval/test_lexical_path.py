"""The lexical path: BM25 over PostgreSQL full-text search (generated tsvector, GIN index)."""

from __future__ import annotations

import math
from collections.abc import Sequence

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from documents.models import Document, DocumentTerm, Node
from retrieval.document_level import lexical_documents
from retrieval.node_level import hybrid_similarity
from retrieval.paths import lexical
from retrieval.query_settings import QuerySettings
from retrieval.scope import Scope
from tests.factories import DocumentFactory
from tests.plans import query_plan
from tests.trees import Sec, sec, sec_text, sec_tree, tree_save

pytestmark = pytest.mark.django_db


def _spec(title: str, paragraphs: Sequence[str], *, section: tuple[str, str] | None = None) -> Sec:
    """A root (and optionally one section) over one leaf per paragraph."""
    if section is None:
        return sec(title, "", *paragraphs)
    return sec(title, "", sec(*section, *paragraphs))


def _document(title: str, paragraphs: Sequence[str], *, section: tuple[str, str] | None = None) -> Document:
    """A document of these paragraphs, its tree (and so its lexical index) saved as ingestion saves it."""
    spec = _spec(title, paragraphs, section=section)
    content = sec_text(spec)
    document = DocumentFactory.create(title=title, content=content, token_count=len(content.split()))
    tree_save(document, sec_tree(spec))
    return document


# -- terms and BM25 arithmetic -----------------------------------------------------------------------


def test_query_terms_are_stemmed_and_stop_words_dropped() -> None:
    assert lexical.stem(["When did the companies appoint new CEOs?"])[0] == [
        "appoint",
        "ceo",
        "compani",
        "new",
    ]
    assert lexical.stem(["the of and to"])[0] == []


def test_terms_with_any_character_do_not_break_the_queries() -> None:
    # Terms travel as query parameters: quotes, backslashes and tsquery operators in one must
    # not break (or inject into) either level's SQL, and the plain term beside them still counts.
    document = _document("A", ["The turbine blade inspection schedule."])
    terms = ["o'brien", "back\\slash", "a|b", "x&y", "(paren", "')--", "turbin"]
    assert set(lexical.document_scores(terms, document_ids=None).scores) == {document.pk}
    nodes = lexical.node_scores(terms, document_ids=[document.pk])
    assert nodes.scores and nodes.document_frequency == {"turbin": 1}


def test_bm25_weighs_rare_terms_above_common_ones() -> None:
    # "common" is in every item, "rare" in one: the item with the rare term wins.
    frequencies = {1: {"common": 1}, 2: {"common": 1, "rare": 1}, 3: {"common": 1}}
    scores = lexical.bm25(frequencies, {1: 10, 2: 10, 3: 10}, considered=3, average_length=10)
    assert scores[2] > scores[1] == scores[3] > 0


def test_bm25_saturates_term_frequency_and_normalises_length() -> None:
    frequencies = {1: {"word": 1}, 2: {"word": 2}, 3: {"word": 20}, 4: {"word": 1}}
    scores = lexical.bm25(frequencies, {1: 10, 2: 10, 3: 10, 4: 40}, considered=10, average_length=10)
    assert scores[1] < scores[2] < scores[3]
    assert scores[3] < 2.2 * scores[1]  # saturation: (K1 + 1) times a single occurrence at most
    assert scores[4] < scores[1]  # the same single occurrence in a longer text counts less
    idf = math.log(1 + (10 - 4 + 0.5) / (4 + 0.5))
    assert scores[1] == pytest.approx(idf)  # tf 1 at average length: exactly the idf


# -- document level ---------------------------------------------------------------------------------


def test_document_scores_find_the_document_that_names_the_query_entity() -> None:
    named = _document(
        "Green Fields",
        ["Green Fields Agriculture Ltd. appointed a new CEO in January 2021.", "Revenue grew in 2021."],
    )
    other = _document(
        "Blue Ocean", ["Blue Ocean Shipping appointed a new CEO in March 2020.", "Revenue fell."]
    )
    _document("Recipes", ["Bake the bread at 220 degrees."])
    terms = lexical.stem(["When did Green Fields Agriculture appoint its CEO?"])[0]
    found = lexical.document_scores(terms, document_ids=None)
    assert found.considered == 3
    assert set(found.scores) == {named.pk, other.pk}  # the recipes share no term
    assert found.scores[named.pk] > found.scores[other.pk] > 0


def test_document_scores_summed_in_the_database_are_bm25_of_the_postings() -> None:
    documents = [
        _document("Pumps", ["Pumps and more pumps.", "The pump room floods in spring."]),
        _document(
            "Valves", ["Valves regulate the pump pressure.", "A valve room, and a long corridor of rooms."]
        ),
        _document("Bread", ["Bake the bread at 220 degrees."]),
    ]
    terms = lexical.stem(["pump room valve pressure"])[0]
    found = lexical.document_scores(terms, document_ids=None)
    # The same documents' postings, scored by the Python BM25 the node level uses.
    frequencies: dict[int, dict[str, int]] = {}
    for document_id, term, frequency in DocumentTerm.objects.filter(term__in=terms).values_list(
        "document_id", "term", "frequency"
    ):
        frequencies.setdefault(document_id, {})[term] = frequency
    lengths = {document.pk: float(document.token_count) for document in documents}
    expected = lexical.bm25(frequencies, lengths, considered=3, average_length=sum(lengths.values()) / 3)
    assert found.considered == 3 and set(found.scores) == set(expected) == {documents[0].pk, documents[1].pk}
    for pk, score in expected.items():
        assert found.scores[pk] == pytest.approx(score, rel=1e-9)
    assert found.document_frequency == lexical.document_frequencies(frequencies)
    # best=1 keeps the best document only; the frequencies still count every document.
    top = lexical.document_scores(terms, document_ids=None, best=1)
    assert list(top.scores) == [max(expected, key=expected.__getitem__)]
    assert top.document_frequency == found.document_frequency


def test_document_scores_respect_the_scope_and_skip_unindexed_documents() -> None:
    inside = _document("A", ["The turbine blade inspection schedule."])
    outside = _document("B", ["Turbine blade repairs and inspection."])
    DocumentFactory.create(content="Turbine blade, not indexed yet: no nodes.")
    terms = lexical.stem(["turbine blade inspection"])[0]
    assert set(lexical.document_scores(terms, document_ids=[inside.pk]).scores) == {inside.pk}
    everything = lexical.document_scores(terms, document_ids=None)
    assert set(everything.scores) == {inside.pk, outside.pk} and everything.considered == 2
    assert lexical.document_scores([], document_ids=None).scores == {}


def test_the_term_index_sums_leaf_frequencies_and_is_rewritten_not_appended() -> None:
    document = _document(
        "Pumps", ["Pumps and more pumps.", "The pump room."], section=("Pumping", "Valves only.")
    )
    terms = dict(DocumentTerm.objects.filter(document=document).values_list("term", "frequency"))
    assert terms == {"pump": 3, "room": 1}  # leaves only: the section's "valv" is not the text
    # The second paragraph changes and the document is indexed again.
    rewritten = _spec(
        "Pumps", ["Pumps and more pumps.", "The valve room."], section=("Pumping", "Valves only.")
    )
    Document.objects.filter(pk=document.pk).update(content=sec_text(rewritten))
    document.refresh_from_db()
    tree_save(document, sec_tree(rewritten))
    terms = dict(DocumentTerm.objects.filter(document=document).values_list("term", "frequency"))
    assert terms == {"pump": 2, "room": 1, "valv": 1}


def test_the_document_level_query_reads_the_term_index_not_the_nodes() -> None:
    _document("A", ["The turbine blade inspection schedule."])
    plan = query_plan(
        "SELECT document_id, frequency FROM documents_documentterm WHERE term = ANY(%s)",
        [["turbin", "blade"]],
        without_seqscan=True,
    )
    assert "document_term_unique" in plan, plan


def test_the_node_search_column_has_a_gin_index() -> None:
    _document("A", ["The turbine blade inspection schedule."])
    plan = query_plan(
        "SELECT id FROM documents_node WHERE search @@ %s::tsquery",
        ["'turbin' | 'blade'"],
        without_seqscan=True,
    )
    assert "node_search_gin" in plan, plan


def test_the_search_column_follows_edits() -> None:
    document = _document("A", ["Plain words here."], section=("Overview", "General remarks."))
    section = Node.objects.get(document=document, kind="section")
    terms = lexical.stem(["hydraulic pumps"])[0]
    assert lexical.node_scores(terms, document_ids=[document.pk]).scores == {}
    section.summary = "Maintenance of the hydraulic pumps."
    section.save()
    assert set(lexical.node_scores(terms, document_ids=[document.pk]).scores) == {section.pk}


# -- node level -------------------------------------------------------------------------------------


def test_node_scores_discount_words_that_name_the_document_itself() -> None:
    # "Green Fields" is in every paragraph: inside this document it singles nothing out, while
    # "dividend" is in one paragraph only, which must win over a paragraph that repeats the name.
    document = _document(
        "Green Fields",
        [
            "Green Fields expanded its farmland. Green Fields hired staff at Green Fields farms.",
            "A dividend of $5 million was paid to shareholders.",
            "Green Fields invested in irrigation.",
        ],
        section=("Green Fields in 2021", "Green Fields results and investments."),
    )
    leaves = list(Node.objects.filter(document=document, kind="leaf").order_by("order"))
    found = lexical.node_scores(lexical.stem(["Green Fields dividend"])[0], document_ids=[document.pk])
    assert found.considered == 4  # section, three leaves: never the root, titled as the document
    root = Node.objects.get(document=document, depth=0)
    assert root.pk not in found.scores
    assert found.scores[leaves[1].pk] > found.scores[leaves[0].pk]
    assert found.scores[leaves[1].pk] == max(found.scores.values())
    assert lexical.node_scores(["dividend"], document_ids=[]).scores == {}


def test_hybrid_similarity_lifts_the_lexical_match_within_a_narrow_cosine_band() -> None:
    cosine = {1: 0.84, 2: 0.82, 3: 0.80}
    mixed = hybrid_similarity(cosine, {2: 6.0, 3: 1.0}, share=0.15)
    assert mixed[2] > mixed[1] > mixed[3]
    assert mixed[2] == pytest.approx(0.85 * 0.82 + 0.15)
    assert hybrid_similarity(cosine, {2: 6.0}, share=0.0) == cosine
    assert hybrid_similarity(cosine, {}, share=0.15) == cosine


# -- names at the node level ----------------------------------------------------------------------


def test_bm25_term_weights_scale_each_terms_contribution() -> None:
    frequencies = {1: {"harris": 1}, 2: {"crime": 1}, 3: {"other": 1}}
    lengths = {1: 10, 2: 10, 3: 10}
    plain = lexical.bm25(frequencies, lengths, considered=3, average_length=10)
    assert plain[1] == pytest.approx(plain[2])  # same idf, same tf: a tie
    weighted = lexical.bm25(
        frequencies, lengths, considered=3, average_length=10, term_weights={"harris": 0.25}
    )
    assert weighted[1] == pytest.approx(0.25 * plain[1])
    assert weighted[2] == pytest.approx(plain[2]) and weighted[3] == pytest.approx(plain[3])


def _name_terms(query: str) -> set[str]:
    """The search terms of the query's names, as the engine stems them in one round trip."""
    return {term for terms in lexical.stem(lexical.capitalised_words(query)) for term in terms}


def test_names_are_the_capitalised_words_but_the_first() -> None:
    names = _name_terms(
        "According to the judgment of Preston, Lancaster, Court, what did M. Harris do in 2022?"
    )
    assert names == {"preston", "lancast", "court", "m", "harri"}
    assert _name_terms("What crimes were committed in the city?") == set()  # "What" opens the question


def test_name_weights_damp_rare_names_only() -> None:
    found = lexical.LexicalScores({}, 10, {"preston": 1, "court": 9, "crime": 2})
    weights = lexical.name_weights(["preston", "court", "crime"], {"preston", "court"}, found, share=0.5)
    # "preston": 1 of 10 documents, under half of them: 1 / (0.5 x 10); "court": most documents,
    # kept; "crime" is rare but not a name: kept.
    assert weights == {"preston": pytest.approx(0.2)}
    assert lexical.name_weights(["preston"], {"preston"}, found, share=0.0) == {}


def test_a_damped_name_no_longer_outranks_the_passage_that_answers() -> None:
    # The query names the court; inside its judgment, the heading repeats the name and the charge
    # answers the question. The other judgments never name Preston.
    judgment = _document(
        "Judgment 1",
        [
            "In the Preston Court. Sitting at Preston. The Preston Court, criminal judgment.",
            "The defendant is charged with the crime of theft of a vehicle.",
        ],
        section=("Judgment", "A criminal judgment."),
    )
    for number in (2, 3, 4):
        _document(f"Judgment {number}", [f"In the court of town {number}. A judgment on a crime of fraud."])
    query = "According to the judgment of the Preston Court, what crime was the defendant charged with?"
    terms = lexical.stem([query])[0]
    heading, charge = Node.objects.filter(document=judgment, kind="leaf").order_by("order")
    plain = lexical.node_scores(terms, document_ids=[judgment.pk]).scores
    assert plain[heading.pk] > plain[charge.pk]  # the name, three times, wins

    found = lexical.document_scores(terms, document_ids=None)
    assert found.considered == 4 and found.document_frequency["preston"] == 1
    weights = lexical.name_weights(terms, _name_terms(query), found, share=0.75)
    assert weights == {"preston": pytest.approx(1 / 3)}  # "court" is in every judgment: kept
    damped = lexical.node_scores(terms, document_ids=[judgment.pk], term_weights=weights).scores
    assert damped[charge.pk] > damped[heading.pk]


def test_a_listed_scope_is_read_from_the_searchable_documents_alone() -> None:
    document = _document("A", ["The turbine blade inspection schedule."])
    sql, params = lexical.searchable_documents_sql([document.pk])
    plan = query_plan(f"SELECT count(*) FROM ({sql}) AS scope", params, without_seqscan=True)
    assert "documents_searchabledocument_pkey" in plan and "documents_node" not in plan, plan


def test_whole_collections_are_scored_from_their_statistics_as_counted_ones_are(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The dictionary (``CollectionTerm``, ``CollectionSearchStats``) gives the scores and counts
    that counting the same documents gives, common terms included, in one collection and in
    several, and in none: no postings of another collection count."""
    documents, terms = _common_world(monkeypatch)  # each document in a collection of its own
    elsewhere = _document("G", ["The pump, the pump."])
    collections = [document.collection_id for document in documents]
    ids = [document.pk for document in documents]
    with CaptureQueriesContext(connection) as queries:
        kept = lexical.document_scores(
            terms, document_ids=None, collection_ids=collections, collection_documents=6, best=20
        )
    assert "counted AS" not in queries[-1]["sql"] and "collectionterm" in queries[-1]["sql"], (
        "read, not counted"
    )
    counted = lexical.document_scores(terms, document_ids=ids, best=20)
    assert kept.common_terms == counted.common_terms == {"pump"}
    assert kept.considered == counted.considered == 6
    assert kept.document_frequency == counted.document_frequency == {"valv": 2}
    assert kept.scores.keys() == counted.scores.keys()
    for pk, score in counted.scores.items():
        assert kept.scores[pk] == pytest.approx(score, rel=1e-12)
    with CaptureQueriesContext(connection) as queries:  # within the floor: counting is cheaper
        few = lexical.document_scores(
            terms, document_ids=None, collection_ids=collections[:2], collection_documents=2
        )
    sql = queries[-1]["sql"]
    assert "collectionterm" not in sql and 'searchabledocument" WHERE collection_id = ANY' in sql, (
        "not listed"
    )
    assert few == lexical.document_scores(terms, document_ids=ids[:2])
    both = [*collections, elsewhere.collection_id]
    everything = lexical.document_scores(terms, document_ids=None)
    assert (
        lexical.document_scores(terms, document_ids=None, collection_ids=both, collection_documents=7)
        == everything
    )
    assert everything.considered == 7 and everything.common_terms == {"pump"}


# -- the common-term cut-off -------------------------------------------------------------------------


def test_the_common_term_cutoff_has_a_floor_and_a_share_of_the_scope() -> None:
    floor, share = lexical.COMMON_TERM_MIN_DOCUMENTS, lexical.COMMON_TERM_SHARE
    assert lexical.common_term_cutoff(10) == floor  # every benchmark collection: nothing is common
    assert lexical.common_term_cutoff(10_000) == max(floor, math.ceil(share * 10_000))
    assert lexical.common_term_cutoff(1_000_000) == math.ceil(share * 1_000_000)
    # At or under the cut-off a term selects documents; past it, it does not.
    cutoff = lexical.common_term_cutoff(50_000)
    held = {"name": 3, "edge": cutoff, "common": cutoff + 1}
    assert lexical.selecting_terms(held, considered=50_000) == {"name", "edge"}
    # A scope no larger than the floor keeps every term, however many of its documents hold it.
    assert lexical.selecting_terms({"every": floor}, considered=floor) == {"every"}


def test_without_a_common_term_the_cutoff_ranks_exactly_as_exhaustive_bm25() -> None:
    # Synthetic postings: the rule removes no term, so BM25 over the selecting terms is BM25.
    frequencies = {1: {"pump": 2, "valve": 1}, 2: {"pump": 1}, 3: {"valve": 3, "room": 1}}
    lengths = {1: 10.0, 2: 4.0, 3: 12.0, 4: 7.0}
    held = lexical.document_frequencies(frequencies)
    kept = lexical.selecting_terms(held, considered=4)
    assert kept == set(held)
    pruned = {item: {t: tf for t, tf in terms.items() if t in kept} for item, terms in frequencies.items()}
    average = sum(lengths.values()) / 4
    exhaustive = lexical.bm25(frequencies, lengths, considered=4, average_length=average)
    assert lexical.bm25(pruned, lengths, considered=4, average_length=average) == exhaustive


def _common_world(monkeypatch: pytest.MonkeyPatch) -> tuple[list[Document], list[str]]:
    """Six documents, "pump" in four of them (past a cut-off lowered to max(2, 0.5 x 6) = 3),
    "valve" in two; the floor lowered so that six documents make a large scope."""
    monkeypatch.setattr(lexical, "COMMON_TERM_MIN_DOCUMENTS", 2)
    monkeypatch.setattr(lexical, "COMMON_TERM_SHARE", 0.5)
    documents = [
        _document("A", ["The pump and the valve.", "A pump room."]),
        _document("B", ["Valve seals wear out."]),
        _document("C", ["The pump hums."]),
        _document("D", ["A pump, a pump, a pump."]),
        _document("E", ["Spare pump parts."]),
        _document("F", ["The garden in spring."]),
    ]
    return documents, lexical.stem(["pump valve"])[0]


def test_common_terms_are_counted_not_scored_and_rare_terms_rank_as_bm25(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    documents, terms = _common_world(monkeypatch)
    assert terms == ["pump", "valv"]
    found = lexical.document_scores(terms, document_ids=None)
    assert found.considered == 6 and found.common_terms == {"pump"}
    assert found.document_frequency == {"valv": 2}, "a common term's count stops at the cut-off"
    # The documents that hold only "pump" are not selected; the two with "valve" score BM25 of
    # "valve" alone, over the same N and lengths as exhaustive BM25.
    frequencies = {
        document_id: {term: frequency}
        for document_id, term, frequency in DocumentTerm.objects.filter(term="valv").values_list(
            "document_id", "term", "frequency"
        )
    }
    lengths = {document.pk: float(document.token_count) for document in documents}
    expected = lexical.bm25(frequencies, lengths, considered=6, average_length=sum(lengths.values()) / 6)
    assert set(found.scores) == set(expected) == {documents[0].pk, documents[1].pk}
    for pk, score in expected.items():
        assert found.scores[pk] == pytest.approx(score, rel=1e-9)
    # The same scope named by its ids is counted the same way; a scope within the floor is not.
    ids = [document.pk for document in documents]
    assert lexical.document_scores(terms, document_ids=ids).common_terms == {"pump"}
    with CaptureQueriesContext(connection) as queries:
        small = lexical.document_scores(terms, document_ids=ids[:2])
    assert small.common_terms == frozenset() and small.document_frequency == {"pump": 1, "valv": 2}
    assert "counted" not in queries[-1]["sql"], "a scope within the floor runs the exhaustive query"


def test_a_query_of_common_terms_only_selects_no_document_and_keeps_its_name_weight(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _common_world(monkeypatch)
    found = lexical.document_scores(["pump"], document_ids=None, best=20)
    assert found.scores == {} and found.common_terms == {"pump"} and found.considered == 6
    # Counted only up to the cut-off, a common name is not damped as a rare one would be.
    assert lexical.name_weights(["pump"], {"pump"}, found, share=1.0) == {}


def test_the_lexical_path_report_names_the_common_terms(monkeypatch: pytest.MonkeyPatch) -> None:
    documents, _ = _common_world(monkeypatch)
    found = lexical_documents(
        query="Which pump valve?",
        passage_text="",
        scope=Scope(document_ids=None, filters={}, visibility="all"),
        query_settings=QuerySettings.from_settings(),
    )
    assert found.report.detail["common_terms"] == ["pump"]
    assert set(found.scores) == {documents[0].pk, documents[1].pk}, "the valve documents only"
