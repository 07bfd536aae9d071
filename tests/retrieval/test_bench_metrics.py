"""RAGEval recall / EIR on hand-made examples, the flat chunker, packing and sampling (no database)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from openfable.tokens import count_tokens
from retrieval.bench.baselines import (
    BM25Ranker,
    DenseRanker,
    cached_embeddings,
    chunk_documents,
    chunk_spans,
    pack_ranked,
)
from retrieval.bench.metrics import SentenceSplitter, percentile, score_query
from retrieval.bench.retrieval_bench import BenchQuery, parse_queries, stratified_sample

TWO_SENTENCES = "Acme raised $5 million in March 2021. The money funded a new plant in Ohio."


def test_splitter_uses_pysbd_and_caches() -> None:
    split = SentenceSplitter()
    assert split(TWO_SENTENCES) == (
        "Acme raised $5 million in March 2021.",
        "The money funded a new plant in Ohio.",
    )
    assert split("  ") == ()
    split(TWO_SENTENCES)
    assert len(split) == 2, "each distinct text is segmented once"


def test_a_reference_needs_every_sentence() -> None:
    first_only = ["Acme raised $5 million in March 2021. Something else entirely."]
    score = score_query([TWO_SENTENCES], first_only)
    assert score.recall == 0.0 and score.recalled == 0, "a partial match does not count"
    # ...but the matched sentence still counts toward EIR (7 words of 10 retrieved).
    assert score.matched_words == 7 and score.retrieved_words == 10
    assert score.eir == pytest.approx(0.7)


def test_sentences_may_come_from_different_chunks_but_not_straddle_one() -> None:
    chunks = ["intro. Acme raised $5 million in March 2021.", "The money funded a new plant in Ohio. end"]
    assert score_query([TWO_SENTENCES], chunks).recall == 1.0
    straddling = ["Acme raised $5 million in March 2021. The money funded", "a new plant in Ohio."]
    assert score_query([TWO_SENTENCES], straddling).recall == 0.0, "a sentence must lie in one chunk"


def test_recall_is_a_share_of_references_and_blank_ones_are_ignored() -> None:
    references = [TWO_SENTENCES, "Bob left in May.", "   "]
    score = score_query(references, ["Bob left in May. " + TWO_SENTENCES])
    assert score.references == 2 and score.recall == 1.0
    score = score_query(references, ["Bob left in May."])
    assert score.recall == 0.5 and score.recalled_mask == (False, True)


def test_eir_counts_each_matched_sentence_once_per_query() -> None:
    # Two references share a sentence; two chunks both hold it: it counts once (4 words).
    references = ["Bob left in May.", "Bob left in May. Nobody knows why he did that."]
    chunks = ["Bob left in May.", "Bob left in May."]
    score = score_query(references, chunks)
    assert score.matched_words == 4 and score.retrieved_words == 8
    assert score.eir == pytest.approx(0.5)
    assert score.recall == 0.5


def test_nothing_retrieved_scores_zero() -> None:
    score = score_query([TWO_SENTENCES], [])
    assert score.recall == 0.0 and score.eir == 0.0 and score.retrieved_words == 0
    assert score_query([], ["anything"]).recall == 0.0


def test_percentile_interpolates() -> None:
    assert percentile([], 50) == 0.0
    assert percentile([3.0, 1.0, 2.0], 50) == 2.0
    assert percentile([0.0, 10.0], 95) == pytest.approx(np.percentile([0.0, 10.0], 95))


# -- baselines -----------------------------------------------------------------------------------

LONG = " ".join(f"Sentence number {n} says that the quarterly revenue of unit {n} grew." for n in range(120))


def test_chunks_are_at_most_128_tokens_exact_slices_covering_the_text() -> None:
    spans = chunk_spans(LONG)
    assert len(spans) > 5
    pieces = [LONG[start:end] for start, end in spans]
    assert all(count_tokens(piece) <= 128 for piece in pieces)
    assert all(count_tokens(piece) >= 100 for piece in pieces[:-1]), "chunks are filled, not tiny"
    # Consecutive, gaps only whitespace: together they cover every word.
    assert spans[0][0] == 0 and spans[-1][1] == len(LONG)
    for (_, end), (start, _) in itertools.pairwise(spans):
        assert end <= start and not LONG[end:start].strip()
    assert " ".join(pieces).split() == LONG.split(), "cut at whitespace: words stay whole"


def test_chunk_documents_keeps_doc_ids_and_counts() -> None:
    chunks = chunk_documents([(7, "Short one."), (9, LONG)])
    assert chunks[0].document == 7 and chunks[0].text == "Short one." and chunks[0].token_count == 3
    assert {chunk.document for chunk in chunks[1:]} == {9}
    assert all(chunk.text == LONG[chunk.start_char : chunk.end_char] for chunk in chunks[1:])


def test_pack_ranked_skips_what_does_not_fit_and_goes_on() -> None:
    tokens = [60, 50, 30, 20]
    assert pack_ranked([0, 1, 2, 3], tokens, 100) == [0, 2]
    assert pack_ranked([1, 0, 3, 2], tokens, 100) == [1, 3, 2]
    assert pack_ranked([0], tokens, 10) == []


def test_bm25_ranks_matching_chunks_only() -> None:
    ranker = BM25Ranker(["the cat sat on the mat", "quarterly revenue grew", "revenue of the cat shop"])
    order = list(ranker.rank("How did quarterly revenue change?"))
    assert order[0] == 1 and set(order) == {1, 2}
    assert list(ranker.rank("the of and")) == [], "stopwords only: nothing to rank"


def test_dense_ranker_and_embedding_cache(tmp_path) -> None:
    class Counting:
        model_name, dimensions = "fake", 2

        def __init__(self) -> None:
            self.calls = 0

        def embed_passages(self, texts):
            self.calls += 1
            return np.array([[1.0, 0.0] if "a" in text else [0.0, 1.0] for text in texts], dtype=np.float32)

        def embed_query(self, text):
            self.calls += 1
            return np.array([0.0, 1.0], dtype=np.float32)

    embedder = Counting()
    matrix = cached_embeddings(embedder, ["a", "b"], kind="passage", cache_dir=tmp_path)
    again = cached_embeddings(embedder, ["a", "b"], kind="passage", cache_dir=tmp_path)
    assert embedder.calls == 1 and np.array_equal(matrix, again)
    assert len(list(tmp_path.glob("*.npy"))) == 1
    query = cached_embeddings(embedder, ["b?"], kind="query", cache_dir=tmp_path)[0]
    assert list(DenseRanker(matrix).rank(query)) == [1, 0]


# -- sampling ------------------------------------------------------------------------------------


def test_stratified_sample_is_proportional_and_deterministic() -> None:
    queries = [BenchQuery(n, "A" if n % 4 else "B", f"q{n}", (), ("r",)) for n in range(100)]
    sample = stratified_sample(queries, 20)
    assert len(sample) == 20 and sample == stratified_sample(queries, 20)
    assert sum(query.query_type == "B" for query in sample) == 5
    assert stratified_sample(queries, 0) == queries


def test_parse_queries_reads_dragonball_records() -> None:
    record = {
        "query": {"query_id": 3, "query_type": "Factual Question", "content": "When?"},
        "ground_truth": {"doc_ids": [4], "references": ["It was May.", ""]},
    }
    (query,) = parse_queries([record])
    assert query == BenchQuery(3, "Factual Question", "When?", (4,), ("It was May.",))
