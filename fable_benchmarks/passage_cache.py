"""A passage-embedding cache for the retrieval benchmark's own ingestion.

bench-retrieval measures recall, not ingestion speed (bench-ingest does that, never cached), and
the same dataset is ingested again after every change to the tree builder. Most of the texts the
pipeline embeds (the builder's blocks, the leaves) are the same from one run to the next, so their
vectors are kept in one SQLite file under ``<DATA_DIR>/bench-cache/``, keyed by the model and the
exact text: a remembered vector is the one the model returns for that text.
"""

from __future__ import annotations

import hashlib
import sqlite3
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from openfable.embeddings import Embedder


class CachedPassageEmbedder:
    """Wraps an embedder: passages come from the cache file when known, queries always from the model."""

    def __init__(self, inner: Embedder, path: Path) -> None:
        self.inner = inner
        self.model_name = inner.model_name
        self.dimensions = inner.dimensions
        path.parent.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(path)
        self._db.execute("CREATE TABLE IF NOT EXISTS passage (key TEXT PRIMARY KEY, vector BLOB NOT NULL)")
        self.hits = 0
        self.misses = 0

    def _key(self, text: str) -> str:
        return hashlib.sha256(f"{self.model_name}\0{self.dimensions}\0{text}".encode()).hexdigest()

    def embed_passages(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dimensions), dtype=np.float32)
        keys = [self._key(text) for text in texts]
        known = self._stored(keys)
        missing = list(dict.fromkeys(key for key in keys if key not in known))
        self.hits += len(keys) - sum(1 for key in keys if key not in known)
        if missing:
            known.update(self._embed_and_store(missing, text_of=dict(zip(keys, texts, strict=True))))
        return np.stack([known[key] for key in keys])

    def _stored(self, keys: list[str]) -> dict[str, np.ndarray]:
        """The vectors cached under ``keys``, those that are."""
        known: dict[str, np.ndarray] = {}
        for start in range(0, len(keys), 500):  # SQLite's bound-parameter limit
            chunk = keys[start : start + 500]
            marks = ",".join("?" * len(chunk))
            for key, blob in self._db.execute(
                f"SELECT key, vector FROM passage WHERE key IN ({marks})", chunk
            ):
                known[key] = np.frombuffer(blob, dtype=np.float32)
        return known

    def _embed_and_store(self, missing: list[str], *, text_of: dict[str, str]) -> dict[str, np.ndarray]:
        """The texts under the ``missing`` keys embedded by the model, and cached."""
        vectors = np.asarray(self.inner.embed_passages([text_of[key] for key in missing]), dtype=np.float32)
        self.misses += len(missing)
        rows = [(key, vector.tobytes()) for key, vector in zip(missing, vectors, strict=True)]
        self._db.executemany("INSERT OR REPLACE INTO passage (key, vector) VALUES (?, ?)", rows)
        self._db.commit()
        return dict(zip(missing, vectors, strict=True))

    def embed_query(self, text: str) -> np.ndarray:
        return self.inner.embed_query(text)

    def close(self) -> None:
        self._db.close()
