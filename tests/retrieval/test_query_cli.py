"""The `query` subcommand: prints a retrieval result as JSON, and says what to fix in bad input.

(Moved out of the old tests/retrieval/test_bench_retrieval.py when the benchmarks became their own
package: these test the command line's `query`, not a benchmark.)
"""

from __future__ import annotations

import pytest

from documents.services.collections import collection_create
from documents.services.documents import document_create
from documents.services.jobs import job_run_now
from tests.cli import run_openfable

pytestmark = pytest.mark.django_db

ACME = (
    "Acme Mining was founded in 1998 in Perth.\n\n"
    "In March 2021, Acme Mining opened a copper mine in Chile. The mine employs 400 workers. "
    "Production started slowly because of heavy rain.\n\n"
    "In June 2021, the board appointed Maria Lopez as chief executive officer. "
    "She previously ran the company's logistics division."
)


@pytest.mark.slow
def test_query_prints_the_result_as_json() -> None:
    collection = collection_create(name="Query CLI")
    document = document_create(
        collection=collection, content=ACME, title="Acme", builder="structural", queue=False
    ).document
    run = job_run_now(document_id=document.pk)
    assert run is not None and run.succeeded, run

    code, result = run_openfable(
        "query",
        "Who runs Acme Mining?",
        "--budget",
        "200",
        "--mode",
        "vector",
        "--collection",
        collection.slug,
    )
    assert code == 0
    # The one query answer every surface gives (RetrievalResult.to_answer); the engine's report in "result".
    assert result["token_budget"] == 200 and result["result"]["mode"] == "vector"
    assert result["result"]["filters"] == {"collection": collection.slug}
    assert result["chunks"] and all(chunk["document_id"] == document.pk for chunk in result["chunks"])
    assert 0 < result["total_tokens"] <= 200

    code, result = run_openfable(
        "query", "Who runs Acme Mining?", "--budget", "200", "--document", str(document.pk), "--tag", "x"
    )
    assert code == 1 and "tag" in result["error"]


def test_query_explains_a_bad_budget_or_mode() -> None:
    code, result = run_openfable("query", "anything", "--budget", "5")
    assert code == 1 and "token budget 5 is outside the accepted range" in result["error"]
    code, result = run_openfable("query", "anything", "--budget", "lots")
    assert code == 1 and "whole number" in result["error"]
    code, result = run_openfable("query", "anything", "--mode", "psychic")
    assert code == 1 and "Unknown mode" in result["error"]
