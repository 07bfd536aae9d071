"""The flat baselines: the 128-token chunker, budget packing, BM25 and dense ranking, the embedding cache."""

from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np

from fable_benchmarks.baselines import (
    BM25Ranker,
    DenseRanker,
    cached_embeddings,
    chunk_documents,
    chunk_spans,
    pack_ranked,
)
from openfable.tokens import count_tokens

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


def test_dense_ranker_and_embedding_cache(tmp_path: Path) -> None:
    class Counting:
        model_name, dimensions = "fake", 2

        def __init__(self) -> None:
            self.calls = 0

        def embed_passages(self, texts: list[str]) -> np.ndarray:
            self.calls += 1
            return np.array([[1.0, 0.0] if "a" in text else [0.0, 1.0] for text in texts], dtype=np.float32)

        def embed_query(self, text: str) -> np.ndarray:
            self.calls += 1
            return np.array([0.0, 1.0], dtype=np.float32)

    embedder = Counting()
    matrix = cached_embeddings(embedder, ["a", "b"], kind="passage", cache_dir=tmp_path)
    again = cached_embeddings(embedder, ["a", "b"], kind="passage", cache_dir=tmp_path)
    assert embedder.calls == 1 and np.array_equal(matrix, again)
    assert len(list(tmp_path.glob("*.npy"))) == 1
    query = cached_embeddings(embedder, ["b?"], kind="query", cache_dir=tmp_path)[0]
    assert list(DenseRanker(matrix).rank(query)) == [1, 0]
