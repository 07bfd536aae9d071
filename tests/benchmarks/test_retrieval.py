"""bench-retrieval end to end on a tiny DragonBall-format corpus, its sampling and its input errors.

Real database, real local embeddings; no timing is asserted.
"""

from __future__ import annotations

import io
import json
import textwrap
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command

from documents.models import Collection
from fable_benchmarks.command import BenchCommand
from fable_benchmarks.datasets import BenchQuery
from fable_benchmarks.plot import recall_chart_svg
from fable_benchmarks.retrieval import stratified_sample
from openfable.token_counting import count_tokens
from tests.benchmarks import run_bench
from tests.documents.ingestion import document_files
from tests.fakes.llm.server import ChatReply, ScriptedOpenAIServer

pytestmark = pytest.mark.django_db

DOCS: list[dict[str, Any]] = [
    {
        "doc_id": 1,
        "domain": "Finance",
        "company_name": "Acme Mining",
        "content": "Acme Mining was founded in 1998 in Perth.\n\n"
        "In March 2021, Acme Mining opened a copper mine in Chile. The mine employs 400 workers. "
        "Production started slowly because of heavy rain.\n\n"
        "In June 2021, the board appointed Maria Lopez as chief executive officer. "
        "She previously ran the company's logistics division.",
    },
    {
        "doc_id": 2,
        "company_name": "Blue River Hospital",
        "content": "Blue River Hospital treats patients from three counties.\n\n"
        "In 2020 the hospital added a cardiology ward with 40 beds. Waiting times for heart surgery "
        "fell by half within a year.\n\n"
        "The hospital trains nurses in a two-year programme run with the local university.",
    },
    {
        "doc_id": 3,
        "company_name": "Court case 17",
        "content": "The defendant, John Smith, was charged with fraud in Denver.\n\n"
        "The court found that he had forged invoices worth $2 million between 2017 and 2019. "
        "He was sentenced to five years in prison.\n\n"
        "His lawyer announced an appeal on the day of the verdict.",
    },
]
QUERIES: list[dict[str, Any]] = [
    {
        "query": {
            "query_id": 1,
            "query_type": "Factual Question",
            "content": "Who became CEO of Acme Mining?",
        },
        "ground_truth": {
            "doc_ids": [1],
            "references": [
                "In June 2021, the board appointed Maria Lopez as chief executive officer. "
                "She previously ran the company's logistics division."
            ],
        },
    },
    {
        "query": {
            "query_id": 2,
            "query_type": "Factual Question",
            "content": "What did the cardiology ward change?",
        },
        "ground_truth": {
            "doc_ids": [2],
            "references": ["Waiting times for heart surgery fell by half within a year."],
        },
    },
    {
        "query": {
            "query_id": 3,
            "query_type": "Multi-hop Reasoning Question",
            "content": "What was Smith's sentence?",
        },
        "ground_truth": {
            "doc_ids": [3],
            "references": [
                "He was sentenced to five years in prison.",
                "This sentence appears in no document.",
            ],
        },
    },
    {
        "query": {
            "query_id": 4,
            "query_type": "Irrelevant Unsolvable Question",
            "content": "Who won the cup?",
        },
        "ground_truth": {"doc_ids": [], "references": []},
    },
]
BUDGETS = ["100", "300"]


def _write(tmp_path: Path) -> tuple[Path, Path]:
    docs, queries = tmp_path / "docs.jsonl", tmp_path / "queries.jsonl"
    docs.write_text("".join(json.dumps(record) + "\n" for record in DOCS))
    queries.write_text("".join(json.dumps(record) + "\n" for record in QUERIES))
    return docs, queries


def _bench(*args: str) -> str:
    """The table bench-retrieval prints (``run_bench`` reads JSON; benchmarks print tables)."""
    out = io.StringIO()
    call_command(BenchCommand(), "bench-retrieval", *args, stdout=out)
    return out.getvalue()


def _merge(*args: str) -> str:
    out = io.StringIO()
    call_command(BenchCommand(), "bench-merge", *args, stdout=out)
    return out.getvalue()


@pytest.mark.slow
def test_bench_retrieval_prints_tables_and_writes_every_number(tmp_path: Path, settings: Any) -> None:
    settings.DATA_DIR = tmp_path / "data"  # the embedding cache goes here
    docs, queries = _write(tmp_path)
    json_path = tmp_path / "bench.json"
    table = _bench(
        "--docs", str(docs), "--queries", str(queries), "--budgets", ",".join(BUDGETS),
        "--json", str(json_path), "--keep",
    )  # fmt: skip
    for title in ("### Recall (%)", "### EIR (%)", "### Right document found", "### Recall by query type"):
        assert title in table
    assert "| method | 100 | 300 |" in table and "| vector |" in table and "### Query latency" in table
    assert "| vector-no-lexical |" in table and "| vector-whole-query |" in table
    assert "| vector-full-names |" in table and "| vector-unnamed |" in table
    assert "| vector-source-words |" in table
    assert "| hybrid-256 |" in table and "| hybrid-512 |" in table and "| parent-child |" in table
    assert "### The engine's margin over the best peer" in table

    report = json.loads(json_path.read_text())
    assert report["queries"] == 3 and report["queries_without_references"] == 1
    methods = [
        "ceiling", "oracle", "bm25", "dense", "hybrid-256", "hybrid-512", "parent-child", "vector-no-lexical",
        "vector-whole-query", "vector-full-names", "vector-unnamed", "vector-source-words", "vector",
    ]  # fmt: skip
    assert list(report["results"]) == methods
    for method in methods:
        assert set(report["results"][method]) == set(BUDGETS)
        for cell in report["results"][method].values():
            assert 0.0 <= cell["recall"] <= 1.0 and 0.0 <= cell["eir"] <= 1.0
            assert cell["queries"] == 3
    for budget in BUDGETS:
        ceiling = report["results"]["ceiling"][budget]["recall"]
        oracle = report["results"]["oracle"][budget]["recall"]
        assert ceiling >= oracle >= 0.0
        assert ceiling == pytest.approx((1 + 1 + 0.5) / 3, abs=1e-3), "one reference matches nowhere"
        for method in methods:
            assert report["results"][method][budget]["mean_tokens"] <= int(budget) or method == "ceiling"
    assert list((tmp_path / "data" / "bench-cache").glob("*.npy")), "dense embeddings are cached"

    # The kept collection is reused without ingesting again, and gives the same numbers.
    slug = report["collection"]
    assert Collection.objects.filter(slug=slug).exists()
    again_path = tmp_path / "again.json"
    _bench(
        "--docs", str(docs), "--queries", str(queries), "--budgets", "300", "--modes", "oracle,vector",
        "--collection", slug, "--json", str(again_path), "--plot", str(tmp_path / "recall.svg"),
    )  # fmt: skip
    again = json.loads(again_path.read_text())
    assert (tmp_path / "recall.svg").read_text() == recall_chart_svg(again), "--plot draws the report"
    assert again["ingestion"]["reused"] is True and again["ingestion"]["missing"] == 0
    assert list(again["results"]) == ["oracle", "vector"]
    for method in ("oracle", "vector"):
        assert again["results"][method]["300"]["recall"] == report["results"][method]["300"]["recall"]
    assert Collection.objects.filter(slug=slug).exists(), "a reused collection is never deleted"

    # Past the time limit no further query is asked: the numbers are those of the queries run.
    limited_path = tmp_path / "limited.json"
    limited_table = _bench(
        "--docs", str(docs), "--queries", str(queries), "--budgets", "300", "--modes", "vector",
        "--collection", slug, "--json", str(limited_path), "--time-limit", "0.001",
    )  # fmt: skip
    limited = json.loads(limited_path.read_text())
    assert limited["time_limit"] == {"seconds": 0.001, "queries_run": 1, "of": 3}
    assert limited["results"]["vector"]["300"]["queries"] == 1
    assert "the first 1 of the 3 sampled queries were run" in limited_table

    # The rest of the sample in a second run, joined: the numbers of one run over all three.
    rest_path, merged_path = tmp_path / "rest.json", tmp_path / "merged.json"
    rest_table = _bench(
        "--docs", str(docs), "--queries", str(queries), "--budgets", "300", "--modes", "vector",
        "--collection", slug, "--json", str(rest_path), "--skip-queries", "1",
    )  # fmt: skip
    assert "The first 1 queries of the sample were skipped" in rest_table
    rest = json.loads(rest_path.read_text())
    assert rest["skipped_queries"] == 1 and rest["results"]["vector"]["300"]["queries"] == 2
    merged_table = _merge(str(limited_path), str(rest_path), "--json", str(merged_path))
    merged = json.loads(merged_path.read_text())
    whole, joined = again["results"]["vector"]["300"], merged["results"]["vector"]["300"]
    assert joined["queries"] == 3 and merged["queries"] == 3
    for key in ("recall", "eir", "doc_found", "mean_tokens"):
        assert joined[key] == pytest.approx(whole[key], abs=1e-4), key
    assert joined["recall_by_type"] == pytest.approx(whole["recall_by_type"], abs=1e-4)
    assert joined["reference_outcomes"] == pytest.approx(whole["reference_outcomes"], abs=1e-4)
    assert sorted(row["query_id"] for row in merged["per_query"]["vector"]["300"]) == [1, 2, 3]
    assert (
        "Joined from 2 runs over parts of one sample (bench-merge): queries 1-1 (limited.json" in merged_table
    )
    assert "2-3 (rest.json" in merged_table
    for paths, message in (
        ([limited_path, limited_path], "query 1 is in both limited.json and limited.json"),
        ([limited_path, again_path], "the reports differ in 'methods'"),
        ([limited_path], "bench-merge joins two reports or more"),
        ([limited_path, tmp_path / "nowhere.json"], "no such file"),
        ([limited_path, docs], "is not a bench-retrieval --json report"),
    ):
        code, result = run_bench("bench-merge", *map(str, paths))
        assert code == 1 and message in result["error"], (paths, result)


@pytest.mark.slow
def test_bench_retrieval_counts_the_engines_llm_calls(
    tmp_path: Path, settings: Any, scripted_llm: ScriptedOpenAIServer
) -> None:
    """bipath's LLM calls in the report and the printed table, per budget, with the fallbacks
    they caused; bench-merge adds the parts' up."""
    settings.DATA_DIR = tmp_path / "data"
    scripted_llm.chat_default = ChatReply("Sure! Here are the documents: 1, 2.")  # no JSON at all
    docs, queries = _write(tmp_path)
    first_path, rest_path, merged_path = (
        tmp_path / "first.json",
        tmp_path / "rest.json",
        tmp_path / "merged.json",
    )
    common = ["--docs", str(docs), "--queries", str(queries), "--budgets", "300", "--modes", "vector,bipath"]
    table = _bench(*common, "--json", str(first_path), "--keep", "--time-limit", "0.001")
    first = json.loads(first_path.read_text())
    llm = first["results"]["bipath"]["300"]["llm"]
    asked = len(scripted_llm.chat_requests)
    assert asked >= 1 and llm["calls"] == asked and llm["cached_calls"] == 0  # invalid answers are not cached
    assert llm["prompt_tokens"] > 0 and llm["fallbacks"]["invalid_json"] == asked
    assert "llm" not in first["results"]["vector"]["300"]  # vector mode never calls a model
    assert "### LLM calls" in table and f"| bipath | 300 | {asked:.2f} | {asked} |" in table

    _bench(*common, "--json", str(rest_path), "--collection", first["collection"], "--skip-queries", "1")
    rest = json.loads(rest_path.read_text())["results"]["bipath"]["300"]["llm"]
    _merge(str(first_path), str(rest_path), "--json", str(merged_path))
    merged = json.loads(merged_path.read_text())["results"]["bipath"]["300"]["llm"]
    assert merged["calls"] == llm["calls"] + rest["calls"] == len(scripted_llm.chat_requests)
    assert merged["fallbacks"]["invalid_json"] == merged["calls"]


@pytest.mark.slow
def test_bench_retrieval_scoped_asks_inside_the_gold_document(tmp_path: Path, settings: Any) -> None:
    settings.DATA_DIR = tmp_path / "data"
    docs, queries = _write(tmp_path)
    both = {
        "query": {
            "query_id": 5,
            "query_type": "Multi-document Comparison Question",
            "content": "Which is older?",
        },
        "ground_truth": {"doc_ids": [1, 2], "references": ["Acme Mining was founded in 1998 in Perth."]},
    }
    with queries.open("a") as out:
        out.write(json.dumps(both) + "\n")
    json_path = tmp_path / "scoped.json"
    table = _bench(
        "--docs", str(docs), "--queries", str(queries), "--budgets", "100,300", "--scoped",
        "--json", str(json_path),
    )  # fmt: skip
    assert "Scoped: each single-document query without its document's name" in table
    report = json.loads(json_path.read_text())
    assert report["scoped"] == {"sampled": 4, "queries": 3, "multi_document_left_out": 1, "rewritten": 1}
    assert list(report["results"]) == [
        "ceiling", "oracle", "bm25", "dense", "hybrid-256", "hybrid-512", "parent-child", "vector",
    ]  # fmt: skip
    assert report["query_details"]["1"]["asked"] == "Who became CEO of the company?"
    assert "asked" not in report["query_details"]["2"], "nothing names the hospital's record"
    for method, by_budget in report["results"].items():
        for budget, cell in by_budget.items():
            assert cell["queries"] == 3
            assert cell["mean_tokens"] <= int(budget) or method == "ceiling"
    # the ceiling is each query's own document whole, not the corpus
    assert report["results"]["ceiling"]["300"]["mean_tokens"] == pytest.approx(
        sum(count_tokens(doc["content"]) for doc in DOCS) / 3, abs=0.1
    )
    assert report["results"]["vector"]["300"]["doc_found"] == 1.0
    # every method recalls the CEO passage of Acme's report, asked without Acme's name, at 300 tokens
    for method in ("oracle", "hybrid-256", "parent-child", "vector"):
        recalled = {row["query_id"]: row["recall"] for row in report["per_query"][method]["300"]}
        assert recalled[1] == 1.0, method


def test_bench_retrieval_refuses_bad_input(tmp_path: Path) -> None:
    docs, queries = _write(tmp_path)
    broken = tmp_path / "broken.jsonl"
    broken.write_text(json.dumps({"doc_id": 1, "content": "fine"}) + "\n{oops\n")
    for args, message in (
        (["--docs", str(docs), "--queries", str(queries), "--budgets", "50"], "outside the accepted range"),
        (["--docs", str(docs), "--queries", str(queries), "--budgets", "lots"], "not a number of tokens"),
        (["--docs", str(docs), "--queries", str(queries), "--modes", "vector,magic"], "unknown magic"),
        (["--docs", str(docs), "--queries", str(queries), "--max-queries", "-1"], "--max-queries"),
        (["--docs", str(docs), "--queries", str(queries), "--skip-queries", "-1"], "--skip-queries"),
        (["--docs", str(docs), "--queries", str(queries), "--skip-queries", "3"], "leaves none of the 3"),
        (["--docs", str(docs), "--queries", str(queries), "--collection", "nope"], "no such collection"),
        (["--docs", str(tmp_path / "missing.jsonl"), "--queries", str(queries)], "no such file"),
        (
            ["--docs", str(broken), "--queries", str(queries), "--modes", "ceiling"],
            "broken.jsonl:2: not a JSON line",
        ),
    ):
        code, result = run_bench("bench-retrieval", *args)
        assert code == 1, args
        assert message in result["error"], (args, result)
    assert not Collection.objects.exists(), "nothing is left behind"


def test_stratified_sample_is_proportional_and_deterministic() -> None:
    queries = [BenchQuery(n, "A" if n % 4 else "B", f"q{n}", (), ("r",)) for n in range(100)]
    sample = stratified_sample(queries, 20)
    assert len(sample) == 20 and sample == stratified_sample(queries, 20)
    assert sum(query.query_type == "B" for query in sample) == 5
    assert stratified_sample(queries, 0) == queries


def _write_pdfs(tmp_path: Path) -> Path:
    """The documents as PDFs beside a files list (as shared/datasets/cuad lays them out): each
    paragraph wrapped over lines of about 60 characters, as a page wraps it."""
    folder = tmp_path / "pdf"
    folder.mkdir()
    listed = []
    for record in DOCS:
        lines = [
            line for paragraph in record["content"].split("\n\n") for line in textwrap.wrap(paragraph, 60)
        ]
        name = f"{record['doc_id']}.pdf"
        (folder / name).write_bytes(document_files.plain_pdf(lines))
        listed.append({"doc_id": record["doc_id"], "file": name})
    files = tmp_path / "pdfs.jsonl"
    files.write_text("".join(json.dumps(entry) + "\n" for entry in listed))
    return files


@pytest.mark.slow
def test_bench_retrieval_from_files_compares_them_with_the_text(
    tmp_path: Path, settings: Any, file_storage: Path
) -> None:
    settings.DATA_DIR = tmp_path / "data"
    docs, queries = _write(tmp_path)
    files = _write_pdfs(tmp_path)
    json_path = tmp_path / "bench.json"
    table = _bench(
        "--docs", str(docs), "--queries", str(queries), "--files", str(files), "--budgets", "300",
        "--modes", "ceiling,oracle,vector", "--json", str(json_path),
    )  # fmt: skip
    report = json.loads(json_path.read_text())
    assert report["matching"] == "normalised"
    from_files = report["files"]
    # Uploaded through the one write path: every file read by its job, page by page.
    assert from_files["ingestion"]["failed"] == 0 and from_files["ingestion"]["pages"] == 3
    assert from_files["extractor"]["pages"] == 3 and from_files["extractor"]["peak_rss_mb"] > 0
    # Every reference but the one in no document is in the extracted text (4 references).
    assert (
        from_files["extraction_ceiling"]["found"] == 3 and from_files["extraction_ceiling"]["references"] == 4
    )
    assert [miss["absent"] for miss in from_files["extraction_ceiling"]["missed"]] == [
        ["This sentence appears in no document."]
    ]
    for method in ("ceiling", "oracle", "vector"):
        assert from_files["results"][method]["300"]["recall"] == report["results"][method]["300"]["recall"]
    assert "### From the files" in table and "| vector (files − text) | +0.0 |" in table
    assert not Collection.objects.exists(), "both throw-away collections are deleted"
