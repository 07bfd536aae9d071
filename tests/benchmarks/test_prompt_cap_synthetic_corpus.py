"""One query's LLM input stays under OPENFABLE_RETRIEVAL_LLM_QUERY_TOKENS on bench-latency's synthetic
corpus (``fable_benchmarks.latency.generate_corpus``, what ``bench-cost`` queries): LLMselect gets
its share, LLMnavigate what is left, each prompt counted as the server receives it (over real HTTP,
against the fake model). Here, not in tests/retrieval, because it builds its corpus with the
benchmarks; tests/retrieval/test_llm_prompt_cap.py holds the rest of the allowance's tests."""

from __future__ import annotations

import numpy as np
import pytest
from django.conf import settings as django_settings

from documents.ingestion.tree import LEAF
from documents.models import Collection, Node
from fable_benchmarks.latency import generate_corpus
from retrieval.paths.llm import select_prompt_cap
from retrieval.result import LLM_NAVIGATE, LLM_SELECT
from retrieval.services import retrieve
from tests.fakes.llm.model import FableModelServer
from tests.retrieval.test_llm_prompt_cap import scripted  # noqa: F401
from tests.retrieval.test_services import _fresh_query_cache  # noqa: F401


def _synthetic(documents: int) -> tuple[Collection, np.ndarray]:
    """Documents of 100 nodes written through the tree service with cheap clustered vectors."""
    collection, centres, _ = generate_corpus(
        nodes=100 * documents,
        per_document=100,
        dims=django_settings.EMBEDDING_DIMENSIONS,
        rng=np.random.default_rng(1),
        rebuild_index=False,
        say=lambda message: None,
    )
    return collection, centres


@pytest.mark.slow  # writes 24 documents of 100 nodes
def test_both_prompts_of_a_query_fit_its_allowance_and_navigate_gets_what_select_left(
    scripted: FableModelServer,  # noqa: F811
) -> None:
    # LLMselect's shortlist of 20 (~1000 outline tokens each) and the outline of one document
    # (~6000 tokens) are each larger than their share of the default allowance of 8000.
    collection, centres = _synthetic(24)
    leaf = Node.objects.filter(document__collection=collection, kind=LEAF).order_by("pk").first()
    assert leaf is not None
    query = " ".join(leaf.content.split()[:5])
    result = retrieve(
        query=query, token_budget=1000, mode="bipath", collection=collection.slug, query_embedding=centres[0]
    )

    select, navigate = result.path(LLM_SELECT), result.path(LLM_NAVIGATE)
    assert select and navigate and select.ran and navigate.ran and not select.failed and not navigate.failed
    served = {call.schema: call.prompt_tokens for call in scripted.calls}
    assert set(served) == {"document_selection", "node_selection"}
    allowance = django_settings.RETRIEVAL_LLM_QUERY_TOKENS
    assert served["document_selection"] == select.detail["prompt_tokens"] <= select_prompt_cap(allowance)
    assert served["node_selection"] == navigate.detail["prompt_tokens"]
    assert select.detail["outline_omitted"] > 0 and navigate.detail["outline_omitted"] > 0, "the caps bite"
    # Outline entries go in whole, so what select left is filled to within one entry: how many
    # tokens that leaves over depends on the entries' lengths (their ids' digits among them).
    assert allowance - 300 <= sum(served.values()) <= allowance, "navigate used what select left"
