"""A query's ``top_k`` (passages instead of a budget) and ``order`` (document or score): the
checks in words, the pure ordering, and retrieve() on the real database."""

from __future__ import annotations

import pytest
from django.conf import settings

from documents.models import Collection
from documents.services.documents import document_create
from documents.services.jobs import job_run_now
from retrieval.query_input import MAX_TOP_K, check_limits, check_order
from retrieval.result import Chunk, ChunkScores, RetrievalInputError, chunks_in_order
from retrieval.services import retrieve
from tests.factories import CollectionFactory

GUIDE = (
    "# Field guide\n\nA short guide to volcanoes and their eruptions.\n\n"
    "## Formation\n\nVolcanoes form where magma reaches the surface. Most sit on plate boundaries.\n\n"
    "## Eruptions\n\nShield volcanoes erupt gently. Stratovolcanoes erupt explosively and build steep cones.\n\n"
    "## Tides\n\nThe moon pulls the oceans; tides rise and fall twice a day.\n"
)


def test_a_budget_or_top_k_never_both() -> None:
    assert check_limits(token_budget=None, top_k=None) == (settings.TOKEN_BUDGET_DEFAULT, None)
    assert check_limits(token_budget=500, top_k=None) == (500, None)
    assert check_limits(token_budget=None, top_k=3) == (settings.TOKEN_BUDGET_MAX, 3)
    with pytest.raises(RetrievalInputError, match="token_budget or top_k, not both"):
        check_limits(token_budget=500, top_k=3)
    for wrong in (0, MAX_TOP_K + 1, "3", True, 2.5):
        with pytest.raises(RetrievalInputError, match=f"between 1 and {MAX_TOP_K}"):
            check_limits(token_budget=None, top_k=wrong)
    with pytest.raises(RetrievalInputError, match="outside the accepted range"):
        check_limits(token_budget=5, top_k=None)


def test_order_is_document_or_score() -> None:
    assert check_order(None) == "document" and check_order("score") == "score"
    with pytest.raises(RetrievalInputError, match="Unknown order 'best'"):
        check_order("best")


def _chunk(document_rank: int, start: int, score: float) -> Chunk:
    return Chunk(
        node_id=start,
        document_id=document_rank + 1,
        document_title="t",
        document_rank=document_rank,
        toc_path="t",
        kind="leaf",
        start_char=start,
        end_char=start + 5,
        token_count=2,
        text="text.",
        scores=ChunkScores(score),
        found_by=("tree_expansion",),
    )


def test_score_order_puts_the_best_first_and_document_order_keeps_reading_order() -> None:
    chunks = (_chunk(0, 0, 0.4), _chunk(0, 10, 0.9), _chunk(1, 0, 0.9), _chunk(1, 20, 0.1))
    assert chunks_in_order(chunks, "document") == chunks
    by_score = chunks_in_order(chunks, "score")
    assert [(c.document_rank, c.start_char) for c in by_score] == [(0, 10), (1, 0), (0, 0), (1, 20)]


@pytest.fixture
def volcanoes(db: None) -> Collection:
    collection: Collection = CollectionFactory.create(name="Volcanoes", slug="volcanoes")
    for title, tags in (("Guide", ["geo"]), ("Notes", ["sea"])):
        document = document_create(
            collection=collection,
            content=GUIDE if title == "Guide" else GUIDE.replace("volcano", "mountain"),
            title=title,
            tags=tags,
            metadata={"kind": title.lower()},
            queue=False,
        ).document
        assert (run := job_run_now(document_id=document.pk)) is not None and run.succeeded
    return collection


def test_top_k_returns_that_many_passages_never_whole_documents(volcanoes: Collection) -> None:
    result = retrieve(query="How do stratovolcanoes erupt?", top_k=2, collection="volcanoes", mode="vector")
    assert len(result.chunks) == 2 and result.top_k == 2
    assert result.token_budget == settings.TOKEN_BUDGET_MAX
    assert all(chunk.kind != "root" for chunk in result.chunks)
    # A budget that holds both documents whole returns them whole: top_k asked for passages.
    whole = retrieve(query="How do stratovolcanoes erupt?", token_budget=4000, collection="volcanoes")
    assert whole.routing == "documents" and whole.top_k is None


def test_score_order_and_the_documents_of_the_answer(volcanoes: Collection) -> None:
    query = "How do stratovolcanoes erupt?"
    in_reading = retrieve(query=query, top_k=4, collection="volcanoes", mode="vector")
    by_score = retrieve(query=query, top_k=4, collection="volcanoes", mode="vector", order="score")
    assert by_score.cached and by_score.order == "score"  # the same packing, ordered for this caller
    assert sorted(by_score.chunks, key=lambda c: (c.document_rank, c.start_char)) == list(in_reading.chunks)
    scores = [chunk.scores.fused for chunk in by_score.chunks]
    assert scores == sorted(scores, reverse=True)

    answer = by_score.to_answer()
    assert [chunk["position"] for chunk in answer["chunks"]] == list(range(len(answer["chunks"])))
    documents = {entry["document_id"]: entry for entry in answer["documents"]}
    assert {chunk["document_id"] for chunk in answer["chunks"]} <= set(documents)
    guide = next(entry for entry in documents.values() if entry["title"] == "Guide")
    assert guide["tags"] == ["geo"] and guide["metadata"] == {"kind": "guide"}
    assert guide["format"] == "text" and guide["source_filename"] == ""
