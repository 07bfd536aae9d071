"""Flat baselines for ``bench-retrieval``: every document cut into 128-token chunks, ranked by
BM25 (bm25s) or by dense similarity (the configured embedder), packed into the budget.

Chunking. Consecutive exact slices of the document (so character offsets hold), each at most
``CHUNK_TOKENS`` cl100k tokens by ``openfable.tokens.count_tokens``. The cut is the engine's own
``truncate_to_tokens``: a token boundary, backed off to the last whitespace when that is within a
few dozen characters, so words stay whole (the reference implementation cuts at bare token
boundaries, splitting words). Whitespace between chunks belongs to neither; a chunk that would be
only whitespace is dropped.

Packing (both baselines). Chunks are taken in rank order while they fit the budget; one that does
not fit is skipped and the next ones are still tried. BM25 never returns a chunk that shares no
term with the query (score 0): it carries no evidence, only filler.

Dense embeddings of the chunks (and of the queries) are cached under
``<DATA_DIR>/bench-cache/<sha256 of model + kind + texts>.npy``: re-running the benchmark does not
embed the same chunks again.
"""

from __future__ import annotations

import hashlib
import logging
import sys
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from openfable.tokens import count_tokens, truncate_to_tokens

CHUNK_TOKENS = 128
_CHARS_PER_TOKEN_WINDOW = 12  # a window this many chars per token almost always holds enough tokens
_EMBED_GROUP = 256  # texts per progress line while embedding


@dataclass(frozen=True, slots=True)
class FlatChunk:
    document: Any  # the dataset's doc_id
    start_char: int
    end_char: int
    text: str  # == content[start_char:end_char]
    token_count: int


def chunk_spans(text: str, max_tokens: int = CHUNK_TOKENS) -> list[tuple[int, int]]:
    """(start, end) character spans of consecutive chunks of at most ``max_tokens`` tokens."""
    spans: list[tuple[int, int]] = []
    start = _skip_space(text, 0)
    while start < len(text):
        window = max_tokens * _CHARS_PER_TOKEN_WINDOW
        while True:
            piece = text[start : start + window]
            cut = truncate_to_tokens(piece, max_tokens)
            # A whole window that fits may still be followed by more text that would fit too.
            if len(cut) < len(piece) or start + window >= len(text):
                break
            window *= 2
        cut = cut or piece[:1]  # never stall (a single character always fits one token)
        end = start + len(cut)
        spans.append((start, end))
        start = _skip_space(text, end)
    return spans


def _skip_space(text: str, index: int) -> int:
    while index < len(text) and text[index].isspace():
        index += 1
    return index


def chunk_documents(documents: Iterable[tuple[Any, str]], max_tokens: int = CHUNK_TOKENS) -> list[FlatChunk]:
    """Every (doc_id, content) cut into chunks, documents in the order given."""
    chunks = []
    for key, content in documents:
        for start, end in chunk_spans(content, max_tokens):
            text = content[start:end]
            chunks.append(FlatChunk(key, start, end, text, count_tokens(text)))
    return chunks


def pack_ranked(order: Iterable[int], token_counts: Sequence[int], budget: int) -> list[int]:
    """Indices taken in ``order`` while they fit ``budget``; a misfit is skipped, not a stop."""
    chosen = []
    left = budget
    smallest = min(token_counts, default=0)
    for index in order:
        cost = token_counts[index]
        if cost <= left:
            chosen.append(int(index))
            left -= cost
            if left < smallest:
                break
    return chosen


def bm25_tokenize(texts: Sequence[str]) -> list[list[str]]:
    """Lower-cased words of two characters or more, English stopwords removed (bm25s' default)."""
    import bm25s

    tokens = bm25s.tokenize(list(texts), lower=True, stopwords="en", return_ids=False, show_progress=False)
    return [list(row) for row in tokens]


class BM25Ranker:
    """BM25 (bm25s, Lucene variant, k1=1.5, b=0.75) over the chunk texts."""

    def __init__(self, texts: Sequence[str]) -> None:
        import bm25s

        logging.getLogger("bm25s").setLevel(logging.WARNING)  # it logs every index build
        self._size = len(texts)
        self._model = bm25s.BM25()
        self._model.index(bm25_tokenize(texts), show_progress=False)

    def rank(self, query: str) -> np.ndarray:
        """Indices of the chunks sharing a term with the query, best first (ties: corpus order)."""
        terms = bm25_tokenize([query])[0]
        if not terms or not self._size:
            return np.zeros(0, dtype=np.int64)
        scores = np.asarray(self._model.get_scores(terms), dtype=np.float64)
        order = np.argsort(-scores, kind="stable")
        return order[scores[order] > 0]


class DenseRanker:
    """Cosine similarity of L2-normalised rows: a dot product."""

    def __init__(self, matrix: np.ndarray) -> None:
        self._matrix = np.asarray(matrix, dtype=np.float32)

    def rank(self, query_vector: np.ndarray) -> np.ndarray:
        if not len(self._matrix):
            return np.zeros(0, dtype=np.int64)
        scores = self._matrix @ np.asarray(query_vector, dtype=np.float32)
        return np.argsort(-scores, kind="stable")


def cache_key(model_name: str, kind: str, texts: Sequence[str]) -> str:
    digest = hashlib.sha256()
    for part in (model_name, kind, *texts):
        data = part.encode("utf-8")
        digest.update(len(data).to_bytes(8, "little"))
        digest.update(data)
    return digest.hexdigest()


def cached_embeddings(
    embedder: Any,
    texts: Sequence[str],
    *,
    kind: str,
    cache_dir: Path | None,
    log: Callable[[str], None] | None = None,
) -> np.ndarray:
    """Passage ("passage") or query ("query") embeddings of ``texts``, from the cache when there."""
    if kind not in {"passage", "query"}:
        raise ValueError(f"kind must be 'passage' or 'query', not {kind!r}")
    path = None
    if cache_dir is not None:
        name = f"{embedder.model_name}:{embedder.dimensions}"
        path = cache_dir / f"{cache_key(name, kind, texts)}.npy"
        if path.is_file():
            matrix = np.load(path)
            if matrix.shape == (len(texts), embedder.dimensions):
                return matrix
    rows = []
    for start in range(0, len(texts), _EMBED_GROUP):
        group = texts[start : start + _EMBED_GROUP]
        if kind == "passage":
            rows.append(np.asarray(embedder.embed_passages(group), dtype=np.float32))
        else:
            rows.append(
                np.stack([np.asarray(embedder.embed_query(text), dtype=np.float32) for text in group])
            )
        if log is not None and len(texts) > _EMBED_GROUP:
            log(f"embedded {min(start + _EMBED_GROUP, len(texts))}/{len(texts)} {kind} texts")
    matrix = (
        np.concatenate(rows) if rows else np.zeros((0, int(embedder.dimensions)), dtype=np.float32)
    ).astype(np.float32)
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        temporary = path.with_suffix(".tmp.npy")
        np.save(temporary, matrix)
        temporary.replace(path)
    return matrix


def stderr_log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)
