"""`openfable query`: retrieval from the command line.

``openfable query "text" --budget N [--mode vector|bipath|llm] [--collection SLUG]
[--document ID ...] [--tag T ...]`` prints the answer every surface gives (the result's
``to_answer()``: the REST API's ``POST /query`` body) as one JSON object; input the engine
refuses (budget, mode, filters) prints {"error": "..."} and exits with status 1.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings

from retrieval.services import retrieve


def register(subparsers: Any) -> None:
    query = subparsers.add_parser("query", help="retrieve the most relevant text within a token budget")
    query.add_argument("text", help="the query")
    # Strings, checked by the engine: a wrong value answers {"error": ...}, not an argparse usage.
    query.add_argument("--budget", default=None, help="token budget (default OPENFABLE_TOKEN_BUDGET_DEFAULT)")
    query.add_argument("--mode", default=None, help="vector, bipath or llm (default: bipath with an LLM)")
    query.add_argument("--collection", default=None, help="collection slug or id")
    query.add_argument("--document", action="append", default=None, help="document id (repeatable)")
    query.add_argument(
        "--tag", action="append", default=None, help="tag every document must carry (repeatable)"
    )
    query.set_defaults(handler=_handle_query)


def _handle_query(options: dict[str, Any]) -> dict[str, Any]:
    budget: Any = options.get("budget")
    if budget is None:
        budget = settings.TOKEN_BUDGET_DEFAULT
    elif isinstance(budget, str) and budget.strip().lstrip("-").isdecimal():
        budget = int(budget.strip())
    result = retrieve(
        query=options["text"],
        token_budget=budget,
        mode=options.get("mode") or None,
        collection=options.get("collection") or None,
        documents=options.get("document") or None,
        tags=options.get("tag") or None,
    )
    return result.to_answer()
