"""Flat baselines and peers for ``bench-retrieval``: every document cut into chunks, ranked by
BM25 (bm25s), by dense similarity (the configured embedder) or by both fused, packed into the budget.

The flat baselines (``bm25``, ``dense``) cut 128-token chunks. The peers are the pipelines the
popular frameworks ship by default (``PEERS``): ``hybrid-256`` and ``hybrid-512`` cut 256- and
512-token chunks overlapping by ~15 % (LangChain's and LlamaIndex's splitters overlap), rank them by
BM25 and by dense similarity and fuse the two rankings by reciprocal rank fusion, k = 60
(``reciprocal_rank_fusion``: LangChain's EnsembleRetriever, Elasticsearch's and Weaviate's hybrid
search). ``parent-child`` (in ``retrieval``) ranks the engine's own leaves so and returns their
parent sections. One chunker and one packer for all of them.

Chunking. Exact slices of the document (so character offsets hold), each at most ``max_tokens``
cl100k tokens by ``openfable.token_counting.count_tokens``. The cut is the engine's own
``truncate_to_tokens``: a token boundary, backed off to the last whitespace when that is within a
few dozen characters, so words stay whole (the reference implementation cuts at bare token
boundaries, splitting words). Without overlap the chunks are consecutive and the whitespace
between them belongs to neither; with ``overlap_tokens`` each chunk after the first starts at the
word where the previous chunk's last ``overlap_tokens`` tokens begin. A chunk that would be only
whitespace is dropped.

Packing (all of them). Items are taken in rank order while they fit the budget; one that does
not fit is skipped and the next ones are still tried, as a framework's top-k cut to a token budget
does (overlapping chunks are both taken, as the frameworks return them). BM25 never returns a
chunk that shares no term with the query (score 0): it carries no evidence, only filler.

Dense embeddings of the chunks (and of the queries) are cached under
``<DATA_DIR>/bench-cache/<sha256 of model + kind + texts>.npy``: re-running the benchmark does not
embed the same chunks again.
"""

from __future__ import annotations

import hashlib
import logging
import re
import sys
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from openfable.token_counting import count_tokens, truncate_to_tokens

CHUNK_TOKENS = 128
RRF_K = 60  # reciprocal rank fusion's constant, as Cormack et al. and the frameworks set it
PEER_OVERLAP = 0.15  # the share of a peer's chunk that the next chunk repeats
_CHARS_PER_TOKEN_WINDOW = 12  # a window this many chars per token almost always holds enough tokens
_EMBED_GROUP = 256  # texts per progress line while embedding


@dataclass(frozen=True, slots=True)
class Peer:
    """A hybrid peer: chunks of ``chunk_tokens``, the next one repeating ``overlap_tokens``."""

    chunk_tokens: int

    @property
    def overlap_tokens(self) -> int:
        return round(self.chunk_tokens * PEER_OVERLAP)


PEERS = {"hybrid-256": Peer(256), "hybrid-512": Peer(512)}


@dataclass(frozen=True, slots=True)
class FlatChunk:
    document: Any  # the dataset's doc_id
    start_char: int
    end_char: int
    text: str  # == content[start_char:end_char]
    token_count: int


def chunk_spans(text: str, max_tokens: int = CHUNK_TOKENS, overlap_tokens: int = 0) -> list[tuple[int, int]]:
    """(start, end) character spans of chunks of at most ``max_tokens`` tokens, each after the first
    starting ``overlap_tokens`` tokens (to the word) before the previous one ends."""
    if not 0 <= overlap_tokens < max_tokens:
        raise ValueError(f"overlap_tokens must be from 0 to {max_tokens - 1}, not {overlap_tokens}")
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
        following = _skip_space(text, end)
        if overlap_tokens and following < len(text):
            following = _overlap_start(text, start, end, overlap_tokens) or following
        start = following
    return spans


def _overlap_start(text: str, start: int, end: int, overlap_tokens: int) -> int | None:
    """The latest word start after ``start`` from which ``text[...:end]`` holds at least
    ``overlap_tokens`` tokens; None when there is none (the next chunk then starts afresh)."""
    words = [start + found.start() for found in re.finditer(r"\S+", text[start:end])][1:]
    low, high, best = 0, len(words) - 1, None
    while low <= high:  # tokens from a word on only shrink as the word moves right
        middle = (low + high) // 2
        if count_tokens(text[words[middle] : end]) >= overlap_tokens:
            best, low = words[middle], middle + 1
        else:
            high = middle - 1
    return best


def _skip_space(text: str, index: int) -> int:
    while index < len(text) and text[index].isspace():
        index += 1
    return index


def chunk_documents(
    documents: Iterable[tuple[Any, str]], max_tokens: int = CHUNK_TOKENS, overlap_tokens: int = 0
) -> list[FlatChunk]:
    """Every (doc_id, content) cut into chunks, documents in the order given."""
    chunks = []
    for key, content in documents:
        for start, end in chunk_spans(content, max_tokens, overlap_tokens):
            text = content[start:end]
            chunks.append(FlatChunk(key, start, end, text, count_tokens(text)))
    return chunks


def pack_ranked(
    order: Iterable[int],
    token_counts: Sequence[int],
    budget: int,
    *,
    inside: Sequence[int | None] | None = None,
) -> list[int]:
    """Indices taken in ``order`` while they fit ``budget``; a misfit is skipped, not a stop.

    ``inside[i]``: the index of the item that holds item ``i`` (a leaf's parent section), or None;
    an item whose holder was taken is skipped, and so is one taken already."""
    chosen: list[int] = []
    taken: set[int] = set()
    left = budget
    smallest = min(token_counts, default=0)
    for index in order:
        index = int(index)
        holder = inside[index] if inside is not None else None
        if index in taken or (holder is not None and holder in taken):
            continue
        cost = token_counts[index]
        if cost <= left:
            chosen.append(index)
            taken.add(index)
            left -= cost
            if left < smallest:
                break
    return chosen


def reciprocal_rank_fusion(rankings: Sequence[Sequence[int] | np.ndarray], k: int = RRF_K) -> np.ndarray:
    """The items of ``rankings`` (each best first) by their summed 1 / (k + rank), rank from 1;
    ties in the order the items first appear. An item absent from a ranking gets nothing from it."""
    scores: dict[int, float] = {}
    for ranking in rankings:
        for rank, index in enumerate(np.asarray(ranking, dtype=np.int64).tolist(), 1):
            scores[index] = scores.get(index, 0.0) + 1.0 / (k + rank)
    # dicts keep insertion order and sorted() is stable: equal scores stay in first-seen order
    return np.asarray(sorted(scores, key=lambda index: -scores[index]), dtype=np.int64)


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
        cached = _cached_matrix(path, shape=(len(texts), embedder.dimensions))
        if cached is not None:
            return cached
    matrix = _embed(embedder, texts, kind=kind, log=log)
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        temporary = path.with_suffix(".tmp.npy")
        np.save(temporary, matrix)
        temporary.replace(path)
    return matrix


def _cached_matrix(path: Path, *, shape: tuple[int, int]) -> np.ndarray | None:
    """The matrix saved at ``path``, if there is one of that shape."""
    if not path.is_file():
        return None
    matrix = np.load(path)
    return matrix if matrix.shape == shape else None


def _embed(
    embedder: Any, texts: Sequence[str], *, kind: str, log: Callable[[str], None] | None
) -> np.ndarray:
    """The texts embedded in groups of ``_EMBED_GROUP``, progress logged when there are several."""
    rows = []
    for start in range(0, len(texts), _EMBED_GROUP):
        group = texts[start : start + _EMBED_GROUP]
        rows.append(_embed_group(embedder, group, kind=kind))
        if log is not None and len(texts) > _EMBED_GROUP:
            log(f"embedded {min(start + _EMBED_GROUP, len(texts))}/{len(texts)} {kind} texts")
    return (
        np.concatenate(rows) if rows else np.zeros((0, int(embedder.dimensions)), dtype=np.float32)
    ).astype(np.float32)


def _embed_group(embedder: Any, group: Sequence[str], *, kind: str) -> np.ndarray:
    if kind == "passage":
        return np.asarray(embedder.embed_passages(group), dtype=np.float32)
    return np.stack([np.asarray(embedder.embed_query(text), dtype=np.float32) for text in group])


def stderr_log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)
