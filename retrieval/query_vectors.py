"""The query's vectors: its own embedding, and the one that ranks passages when it names documents.

A query often names the documents it is about ("… (Reseller Agreement between McDATA and
RESELLER)", "… did Acme Government Solutions pay"). The name routes it to the right document;
inside that document the name only pulls towards the passages that repeat it. So the node level
ranks by the query with the named titles' direction partly taken out of its vector:

    passage vector = normalise(query vector - PASSAGE_TITLE_SHARE x normalise(sum of title vectors))

This replaced embedding the query's text without the titles as a second text. That cost as much
as the query itself again (the local model's time grows with the tokens) and ranked no better:
docs/benchmarks.md's "Latency on real corpora" and "Recall" sections hold the measurements. A title is embedded once (as a query, like the query it sits
in) and kept in the retrieval cache, keyed by the embedding model and the title's text, so a
renamed document or a new model never reuses a stale vector.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from django.conf import settings

from openfable.embeddings import Embedder, embed_queries
from retrieval.cache import query_cache

logger = logging.getLogger(__name__)

# Measured 0.4 and 0.5 (see the module docstring); 0.5 kept both datasets within noise.
PASSAGE_TITLE_SHARE = 0.5
TITLE_KEY_PREFIX = "openfable:title-vector:v1:"
TITLE_TIMEOUT_S = 24 * 3600


@dataclass(frozen=True)
class QueryVectors:
    query: np.ndarray  # the query's own embedding: routes it to documents
    passage: np.ndarray | None  # the query without its named titles' direction, when it names any
    titles_embedded: int  # titles that were not cached and were embedded with the query


def embed_query_vectors(embedder: Embedder, query: str, titles: Sequence[str] = ()) -> QueryVectors:
    """Embed ``query`` and, when it names ``titles``, derive its passage vector (one batch:
    the query and whichever titles the cache lacks)."""
    titles = sorted(set(titles))
    cached = _cached_title_vectors(embedder, titles)
    missing = [title for title in titles if title not in cached]
    vectors = embed_queries(embedder, [query, *missing])
    if missing:
        fresh = dict(zip(missing, vectors[1:], strict=True))
        _cache_title_vectors(embedder, fresh)
        cached.update(fresh)
    query_vector = vectors[0]
    passage = without_titles(query_vector, [cached[title] for title in titles]) if titles else None
    return QueryVectors(query=query_vector, passage=passage, titles_embedded=len(missing))


def without_titles(query_vector: np.ndarray, title_vectors: Sequence[np.ndarray]) -> np.ndarray:
    """The query's vector with ``PASSAGE_TITLE_SHARE`` of its titles' joint direction taken out,
    unit length."""
    titles = _unit(np.sum(np.asarray(title_vectors, dtype=np.float32), axis=0))
    return _unit(query_vector - PASSAGE_TITLE_SHARE * titles)


def _unit(vector: np.ndarray) -> np.ndarray:
    norm = float(np.linalg.norm(vector))
    return vector / norm if norm > 0 else vector


def _title_key(embedder: Embedder, title: str) -> str:
    where = getattr(settings, "EMBEDDING_URL", "") or "local"
    identity = f"{where}\n{embedder.model_name}\n{embedder.dimensions}\n{title}"
    return TITLE_KEY_PREFIX + hashlib.sha256(identity.encode()).hexdigest()


def _cached_title_vectors(embedder: Embedder, titles: Sequence[str]) -> dict[str, np.ndarray]:
    if not titles:
        return {}
    keys = {_title_key(embedder, title): title for title in titles}
    try:
        found = query_cache().get_many(list(keys))
    except Exception:  # a broken cache never breaks a query: the titles are embedded instead
        logger.warning("title vectors: cache read failed", exc_info=True)
        return {}
    vectors = {}
    for key, raw in found.items():
        vector = np.frombuffer(raw, dtype=np.float32) if isinstance(raw, bytes) else None
        if vector is not None and vector.shape == (embedder.dimensions,):
            vectors[keys[key]] = vector
    return vectors


def _cache_title_vectors(embedder: Embedder, vectors: dict[str, np.ndarray]) -> None:
    entries = {
        _title_key(embedder, title): np.asarray(vector, dtype=np.float32).tobytes()
        for title, vector in vectors.items()
    }
    try:
        query_cache().set_many(entries, timeout=TITLE_TIMEOUT_S)
    except Exception:
        logger.warning("title vectors: cache write failed", exc_info=True)
