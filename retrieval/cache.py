"""The query cache: whole ``RetrievalResult`` values keyed on everything that shapes them.

The key holds the query, budget, mode, resolved filters, the caller's visibility scope, the
corpus version and the retrieval settings (TOP_K, TreeExpansion weights, the LLM and embedding
models). Every write to the corpus moves the corpus version (``documents.services.
corpus_version_bump``), so an entry can never be served for a corpus it was not computed on;
old entries simply stop being asked for and age out.

The cache is Django's ``default`` alias unless ``RETRIEVAL_CACHE_ALIAS`` names another (a shared
cache such as Redis or the database lets web workers share hits). A broken cache never breaks a
query: reads and writes that fail are logged and skipped.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
from collections.abc import Mapping
from typing import Any

from django.conf import settings
from django.core.cache import caches

from retrieval.query_settings import QuerySettings
from retrieval.result import RetrievalResult

logger = logging.getLogger(__name__)

# v2: chunks carry their pages (a result cached before has no such field).
KEY_PREFIX = "openfable:retrieve:v2:"
DEFAULT_TIMEOUT_S = 3600


def query_cache() -> Any:
    """The Django cache the retrieval results (and ``retrieval.query_vectors``' title vectors) live in."""
    return caches[getattr(settings, "RETRIEVAL_CACHE_ALIAS", "default")]


def settings_fingerprint(*, uses_llm: bool, query_settings: QuerySettings) -> dict[str, Any]:
    """The settings a result depends on; changing any of them must miss the cache. The query's
    own settings appear under the names they are configured by (``RETRIEVAL_TOP_K``, ...)."""
    fingerprint: dict[str, Any] = {
        f"RETRIEVAL_{name.upper()}": value for name, value in dataclasses.asdict(query_settings).items()
    }
    for name in ("EMBEDDING_URL", "EMBEDDING_MODEL", "EMBEDDING_DIMENSIONS"):
        fingerprint[name] = getattr(settings, name, None)
    if uses_llm:
        fingerprint["LLM_MODEL"] = getattr(settings, "LLM_MODEL", "")
        fingerprint["LLM_BASE_URL"] = getattr(settings, "LLM_BASE_URL", "")
    return fingerprint


def cache_key(
    *,
    query: str,
    token_budget: int,
    mode: str,
    filters: Mapping[str, Any],
    scope: str,
    corpus_version: int,
    fingerprint: Mapping[str, Any],
    top_k: int | None = None,
) -> str:
    payload = json.dumps(
        {
            "query": query,
            "budget": token_budget,
            "top_k": top_k,
            "mode": mode,
            "filters": dict(filters),
            "scope": scope,
            "corpus": corpus_version,
            "settings": dict(fingerprint),
        },
        sort_keys=True,
        ensure_ascii=False,
        separators=(",", ":"),
        default=str,
    )
    return KEY_PREFIX + hashlib.sha256(payload.encode()).hexdigest()


def cache_get(key: str) -> RetrievalResult | None:
    try:
        value = query_cache().get(key)
    except Exception:
        logger.warning("query cache read failed", exc_info=True)
        return None
    return value if isinstance(value, RetrievalResult) else None


def cache_set(key: str, result: RetrievalResult) -> None:
    timeout = getattr(settings, "RETRIEVAL_CACHE_TIMEOUT", DEFAULT_TIMEOUT_S)
    try:
        query_cache().set(key, result, timeout=timeout)
    except Exception:
        logger.warning("query cache write failed", exc_info=True)
