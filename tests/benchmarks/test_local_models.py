"""bench-local-models: the product's own prompts recorded against the scripted model, replayed to a
model server and judged (valid JSON, shape, ids offered, tokens, time): here against the scripted
model again (``--base-url``), and the judging against scripted bad answers."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from django.core.management import call_command

from documents.models import Collection, Document
from fable_benchmarks.command import BenchCommand
from fable_benchmarks.local_models import Probe, ask
from fable_benchmarks.report import LOCAL_MODELS_HEADER
from openfable.llm import LLMClient, LLMConfig
from openfable.llm_endpoints import forget_endpoints
from openfable.models import LLMCacheEntry
from retrieval.paths.llm import NAVIGATE_SCHEMA, SELECT_SCHEMA
from tests.benchmarks import run_bench
from tests.benchmarks.test_cost import _document
from tests.fakes.llm.model import FableModelServer
from tests.fakes.llm.server import ScriptedOpenAIServer


@pytest.mark.django_db(transaction=True)  # the client's worker threads write the LLM cache themselves
@pytest.mark.slow
def test_bench_local_models_replays_the_products_prompts_and_judges_the_answers(tmp_path: Path) -> None:
    docs, queries = tmp_path / "docs.jsonl", tmp_path / "queries.jsonl"
    rows = [
        {"doc_id": 1, "company_name": "Acme Mining", "content": _document("Acme", 9)},
        {"doc_id": 2, "company_name": "Borealis Shipping", "content": _document("Borealis", 15)},
    ]
    docs.write_text("\n".join(json.dumps(row) for row in rows))
    query = {
        "query": {"query_id": 7, "content": "Acme governance divisions"},
        "ground_truth": {"doc_ids": [1]},
    }
    queries.write_text(json.dumps(query))
    out, numbers = io.StringIO(), tmp_path / "models.json"
    with FableModelServer(model="scripted-local") as model:
        call_command(
            BenchCommand(), "bench-local-models", "--docs", str(docs), "--queries-file", str(queries),
            "--documents", "2", "--queries", "1", "--budget", "300", "--base-url", model.base_url,
            "--models", "scripted-local", "--json", str(numbers), stdout=out,
        )  # fmt: skip
        replayed = len(model.chat_requests)
    forget_endpoints()
    report = json.loads(numbers.read_text())
    assert report["probes"] == {"LLMselect": 1, "LLMnavigate": 1, "chunk markers": 1, "summary": 1}
    assert replayed == 4, "each probe sent once to the model measured"
    (measured,) = report["models"]
    assert measured["model"] == "scripted-local"
    shares = measured["all"]
    assert (shares["calls"], shares["valid_json"], shares["shaped"], shares["offered"]) == (4, 1.0, 1.0, 1.0)
    assert shares["named"] > 0 and shares["answer_tokens_mean"] > 0
    table = out.getvalue()
    assert "| " + " | ".join(LOCAL_MODELS_HEADER) + " |" in table
    for kind in ("LLMselect", "LLMnavigate", "chunk markers", "summary", "all"):
        assert f"| scripted-local | {kind} | " in table
    assert "| scripted-local | summary | 1 | 100.0 | 100.0 | - |" in table, "no ids in a summary"
    assert not Collection.objects.exists() and not Document.objects.exists(), "its collections are gone"
    assert not LLMCacheEntry.objects.exists(), "its cache rows are gone"


def _probe(schema_name: str, prompt: str) -> Probe:
    schema = {"document_selection": SELECT_SCHEMA, "node_selection": NAVIGATE_SCHEMA}.get(schema_name, {})
    return Probe(schema_name, [{"role": "user", "content": prompt}], schema or {"type": "object"}, 100)


def test_the_answers_are_judged_as_the_product_judges_them() -> None:
    select = _probe("document_selection", "<document id=3> Lease\n<document id=5> Loan")
    navigate = _probe("node_selection", "[node 10] (leaf, 9 tokens) A\n[node 11] (leaf, 4 tokens) B")
    markers = _probe(
        "chunk_markers",
        "Split.\n<untrusted_document>\nThe Parties agree. Section 2 Payment.\n</untrusted_document>",
    )
    summary = _probe("node_summary", "Summarise.")
    with ScriptedOpenAIServer(models=["bad"]) as server:
        server.script_chat(
            'Sure! {"documents": [',  # not JSON
            {"documents": [{"id": 3, "score": 0.9}, {"id": 4, "score": 0.5}]},  # one id invented
            {"nodes": "11"},  # JSON, wrong shape
            {"markers": ["The Parties agree.", "Section 3 Fees"]},  # one marker not in the text
            {"summary": "Payment terms between the parties."},
        )
        client = LLMClient(
            LLMConfig(model="bad", base_url=server.base_url, max_retries=0, breaker_threshold=0)
        )
        answers = [ask(client, probe) for probe in (select, select, navigate, markers, summary)]
    forget_endpoints()
    judged = [(a.kind, a.valid_json, a.shaped, a.named, a.offered, a.error) for a in answers]
    assert judged == [
        ("LLMselect", False, False, 0, 0, "not JSON"),
        ("LLMselect", True, True, 2, 1, ""),
        ("LLMnavigate", True, False, 0, 0, "wrong shape"),
        ("chunk markers", True, True, 2, 1, ""),
        ("summary", True, True, 0, 0, ""),
    ]
    assert all(a.seconds >= 0 and a.completion_tokens > 0 for a in answers[1:])


@pytest.mark.django_db
def test_bench_local_models_refuses_bad_input(tmp_path: Path) -> None:
    docs = tmp_path / "docs.jsonl"
    docs.write_text('{"doc_id": 1, "content": "text"}\n')
    code, result = run_bench(
        "bench-local-models", "--docs", str(docs), "--queries-file", str(tmp_path / "q.jsonl")
    )
    assert code == 1 and result["error"].endswith("q.jsonl: no such file")
    code, result = run_bench(
        "bench-local-models", "--docs", str(docs), "--queries-file", str(docs), "--models", "llama-70b"
    )
    assert code == 1 and "--models: no local model is called 'llama-70b'" in result["error"]
