"""`python -m fable_benchmarks bench-merge`: one report from bench-retrieval runs over parts of one
sample.

A real model on a CPU answers a query in minutes, so the hundred queries of a sample take longer
than one sitting. ``bench-retrieval --time-limit`` stops after the queries it had time for, and
``--skip-queries N`` starts another run after the first N of the same sample; this joins such
reports into the report one run over all of their queries would have given: every mean is over
queries (recall, EIR, right document found, tokens) or over references (where the references
went), so the parts' means weighted by their counts are the whole's. Query latency is measured per
run and its percentiles do not add up: it is left out (each part's report keeps its own).

The parts must be runs of the same documents, queries file, budgets, methods and options, on
disjoint queries; each part's commit is listed, so a reader sees whether the code changed between
them.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from statistics import fmean
from typing import Any

from fable_benchmarks import BenchInputError
from fable_benchmarks.retrieval import llm_summary

# What every part must share to be one run's parts.
_SAME = ("docs", "queries_file", "documents", "budgets", "methods", "llm_configured", "matching", "scoped")


def merge_retrieval_reports(parts: Sequence[dict[str, Any]], names: Sequence[str]) -> dict[str, Any]:
    """The report of all of ``parts``' queries (``names``: where each part was read from)."""
    if len(parts) < 2:
        raise BenchInputError("bench-merge joins two reports or more")
    _check_same(parts, names)
    asked = [_queries_run(part) for part in parts]
    _check_disjoint(asked, names)
    first = parts[0]
    details = _details(parts, asked)
    per_query = _per_query(parts)
    return {
        **{key: first.get(key) for key in (*_SAME, "queries_without_references", "collection")},
        "queries": len(details),
        "query_types": dict(sorted(Counter(item["type"] for item in details.values()).items())),
        "merged": [
            _part_summary(name, part, ids) for name, part, ids in zip(names, parts, asked, strict=True)
        ],
        "results": {
            method: {
                budget: _merged_cell(parts, asked, method, budget, per_query.get(method, {}).get(budget))
                for budget in map(str, first["budgets"])
            }
            for method in first["methods"]
        },
        "latency_ms": {},
        "query_details": details,
        "per_query": per_query,
    }


def _details(parts: Sequence[dict[str, Any]], asked: Sequence[set[str]]) -> dict[str, Any]:
    """Type and documents of each query run, in sample order."""
    return {
        query_id: part["query_details"][query_id]
        for part, ids in zip(parts, asked, strict=True)
        for query_id in sorted(ids, key=_numeric)
    }


def _per_query(parts: Sequence[dict[str, Any]]) -> dict[str, dict[str, list[dict[str, Any]]]]:
    """Each method's per-query outcomes at each budget, the parts' one after the other."""
    return {
        method: {
            budget: [row for part in parts for row in part["per_query"][method][budget]]
            for budget in by_budget
        }
        for method, by_budget in parts[0]["per_query"].items()
    }


def _part_summary(name: str, part: dict[str, Any], ids: set[str]) -> dict[str, Any]:
    return {
        "file": name,
        "commit": part.get("commit", ""),
        "skipped_queries": part.get("skipped_queries", 0),
        "queries_run": len(ids),
    }


def _numeric(query_id: str) -> tuple[int, str]:
    return (int(query_id), "") if query_id.isdigit() else (0, query_id)


def _check_same(parts: Sequence[dict[str, Any]], names: Sequence[str]) -> None:
    for key in _SAME:
        values = {repr(part.get(key)) for part in parts}
        if len(values) > 1:
            listed = ", ".join(f"{name}: {part.get(key)!r}" for name, part in zip(names, parts, strict=True))
            raise BenchInputError(f"the reports differ in {key!r} ({listed}): they are not parts of one run")


def _queries_run(part: dict[str, Any]) -> set[str]:
    """The ids of the queries a part ran: a time-limited run lists every query it was to ask in
    ``query_details`` but has outcomes for those it ran only."""
    for by_budget in part["per_query"].values():
        for rows in by_budget.values():
            return {str(row["query_id"]) for row in rows}
    return set(part["query_details"])  # ceiling alone: outcomes are not kept per query


def _check_disjoint(asked: Sequence[set[str]], names: Sequence[str]) -> None:
    seen: dict[str, str] = {}
    for name, ids in zip(names, asked, strict=True):
        for query_id in sorted(ids):
            if query_id in seen:
                raise BenchInputError(f"query {query_id} is in both {seen[query_id]} and {name}")
            seen[query_id] = name


def _merged_cell(
    parts: Sequence[dict[str, Any]],
    asked: Sequence[set[str]],
    method: str,
    budget: str,
    rows: list[dict[str, Any]] | None,
) -> dict[str, Any]:
    """One method at one budget over every part's queries: from the per-query outcomes where the
    report keeps them (exact), else the parts' (rounded) means weighted by their counts."""
    cells = [part["results"][method][budget] for part in parts]
    means = {key: _weighted(cells, key, "queries") for key in ("recall", "eir", "mean_tokens")}
    if rows:
        means = {key: fmean(row[field] for row in rows) for key, field in _PER_QUERY_FIELDS.items()}
    return {
        "recall": round(means["recall"], 4),
        "eir": round(means["eir"], 4),
        "doc_found": round(_weighted(cells, "doc_found", "queries"), 4),
        "mean_tokens": round(means["mean_tokens"], 1),
        "queries": sum(cell["queries"] for cell in cells),
        "recall_by_type": _by_type(parts, asked, cells),
        "references": sum(cell["references"] for cell in cells),
        "reference_outcomes": {
            outcome: round(_weighted_share(cells, outcome), 4) for outcome in cells[0]["reference_outcomes"]
        },
        **_counts(cells),
    }


def _counts(cells: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """How the engine routed (a count per way), how many calls failed and its LLM usage: the parts' summed."""
    counts: dict[str, Any] = {}
    if routing := sum((Counter(cell.get("routing", {})) for cell in cells), Counter()):
        counts["routing"] = dict(routing)
    if errors := sum(cell.get("errors", 0) for cell in cells):
        counts["errors"] = errors
    if llm := _llm_usage(cells):
        counts["llm"] = llm
    return counts


def _llm_usage(cells: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The engine's LLM calls, tokens and fallbacks, the parts' summed (none: no part called one)."""
    used = [cell["llm"] for cell in cells if "llm" in cell]
    if not used:
        return {}
    usage = sum(
        (Counter({key: value for key, value in llm.items() if key != "fallbacks"}) for llm in used), Counter()
    )
    return llm_summary(usage, sum((Counter(llm["fallbacks"]) for llm in used), Counter()))


_PER_QUERY_FIELDS = {"recall": "recall", "eir": "eir", "mean_tokens": "tokens"}


def _weighted(cells: Sequence[dict[str, Any]], key: str, weight: str) -> float:
    total = sum(cell[weight] for cell in cells)
    return sum(cell[key] * cell[weight] for cell in cells) / total if total else 0.0


def _weighted_share(cells: Sequence[dict[str, Any]], outcome: str) -> float:
    total = sum(cell["references"] for cell in cells)
    shares = (cell["reference_outcomes"][outcome] * cell["references"] for cell in cells)
    return sum(shares) / total if total else 0.0


def _by_type(
    parts: Sequence[dict[str, Any]], asked: Sequence[set[str]], cells: Sequence[dict[str, Any]]
) -> dict[str, float]:
    """Recall per query type, each part's weighted by its queries of that type."""
    sums: Counter[str] = Counter()
    counts: Counter[str] = Counter()
    for part, ids, cell in zip(parts, asked, cells, strict=True):
        types = Counter(part["query_details"][query_id]["type"] for query_id in ids)
        for name, recall in cell["recall_by_type"].items():
            sums[name] += recall * types[name]
            counts[name] += types[name]
    return {name: round(sums[name] / counts[name], 4) for name in sorted(counts) if counts[name]}
