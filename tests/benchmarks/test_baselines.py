"""The flat baselines and peers: the chunker (with and without overlap), budget packing, reciprocal
rank fusion, BM25 and dense ranking, the embedding cache."""

from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np

from fable_benchmarks.baselines import (
    PEERS,
    BM25Ranker,
    DenseRanker,
    cached_embeddings,
    chunk_documents,
    chunk_spans,
    pack_ranked,
    reciprocal_rank_fusion,
)
from openfable.token_counting import count_tokens

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


def test_overlapping_chunks_repeat_about_15_percent_at_word_boundaries() -> None:
    peer = PEERS["hybrid-256"]
    assert (peer.chunk_tokens, peer.overlap_tokens) == (256, 38)
    assert PEERS["hybrid-512"].overlap_tokens == 77
    text = LONG * 3
    spans = chunk_spans(text, peer.chunk_tokens, peer.overlap_tokens)
    plain = chunk_spans(text, peer.chunk_tokens)
    assert len(spans) > len(plain) > 5
    assert spans[0][0] == 0 and spans[-1][1] == len(text)
    for (start, end), (next_start, next_end) in itertools.pairwise(spans):
        assert count_tokens(text[start:end]) <= 256
        assert start < next_start < end < next_end, "the next chunk starts inside this one"
        shared = count_tokens(text[next_start:end])
        assert 38 <= shared <= 48, shared
        assert text[next_start - 1].isspace() and not text[next_start].isspace(), "starts at a word"
    # Every word is in some chunk.
    covered: set[int] = set()
    for start, end in spans:
        covered.update(range(start, end))
    assert all(index in covered for index, char in enumerate(text) if not char.isspace())


def test_overlap_must_be_smaller_than_the_chunk() -> None:
    import pytest

    with pytest.raises(ValueError, match="overlap_tokens"):
        chunk_spans(LONG, 128, 128)


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


def test_pack_ranked_skips_an_item_whose_holder_was_taken() -> None:
    # items 0-2 are leaves, 3 holds 0 and 1 (their parent section), 4 holds 2
    tokens = [10, 10, 10, 25, 200]
    inside = [3, 3, 4, None, None]
    # the section 3 is taken first, so its leaves are not taken again; 4 does not fit, 2 does
    assert pack_ranked([3, 0, 4, 2, 1], tokens, 50, inside=inside) == [3, 2]
    # a leaf taken before its section came up is still taken; an item offered twice is taken once
    assert pack_ranked([1, 1, 0], tokens, 50, inside=inside) == [1, 0]


def test_reciprocal_rank_fusion() -> None:
    # 1 / (60 + rank): item 7 is first in one list and third in the other (0.03227), just above
    # item 3, second in both (0.03226); items in one list only come after both
    fused = reciprocal_rank_fusion([[7, 3, 5], [9, 3, 7]])
    scores = {7: 1 / 61 + 1 / 63, 3: 2 / 62, 5: 1 / 63, 9: 1 / 61}
    assert list(fused) == sorted(scores, key=lambda item: -scores[item]) == [7, 3, 9, 5]
    # an item in one list only is still fused; ties keep the order items first appear in
    assert list(reciprocal_rank_fusion([[1, 2], [2, 1]])) == [1, 2]
    assert list(reciprocal_rank_fusion([[4], []])) == [4]
    assert list(reciprocal_rank_fusion([[1, 2], [3, 4]], k=0)) == [1, 3, 2, 4]
    assert list(reciprocal_rank_fusion([])) == []


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
