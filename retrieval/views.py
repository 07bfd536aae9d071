"""The query page: a budgeted query over the collections the user can see, the evidence shown in
place (each chunk inside its document's text, the rest collapsed), with what the engine did."""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.http import HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.http import urlencode

from documents import selectors
from openfable.errors import TooManyAttemptsError, UserInputError
from openfable.http import HtmxHttpRequest, with_retry_after
from openfable.rate_limit import rate_limit_check
from retrieval.result import (
    LEXICAL,
    LLM_NAVIGATE,
    LLM_SELECT,
    MODES,
    TREE_EXPANSION,
    VECTOR,
    RetrievalResult,
)
from retrieval.services import retrieve

RECENT_QUERIES = 10
DOCUMENT_CHOICES = 500
CONTEXT_CHARS = 160  # text shown before and after a chunk; the rest is collapsed
_SESSION_KEY = "query_page"
# The retrieval paths in words, for people; the API and MCP keep the names.
PATH_WORDS = {
    VECTOR: "vector search",
    LEXICAL: "keyword search",
    LLM_SELECT: "the LLM's pick of documents",
    LLM_NAVIGATE: "the LLM reading the outline",
    TREE_EXPANSION: "tree expansion",
}


def _path_words(name: str) -> str:
    return PATH_WORDS.get(name, name.replace("_", " "))


def _count(number: int, noun: str) -> str:
    return f"{number} {noun}{'' if number == 1 else 's'}"


@login_required
def query_page(request: HtmxHttpRequest) -> HttpResponse:
    remembered: dict[str, Any] = request.session.get(_SESSION_KEY, {})
    asked = "query" in request.GET
    values = _values(request.GET if asked else remembered.get("last", {}))
    context: dict[str, Any] = {
        "values": values,
        "modes": MODES,
        "budget_min": settings.TOKEN_BUDGET_MIN,
        "budget_max": settings.TOKEN_BUDGET_MAX,
        "collections": selectors.collection_list(user=request.user),
        # The documents filter offers the first DOCUMENT_CHOICES by title; the collection filter narrows more.
        "document_choices": selectors.document_list(user=request.user)
        .order_by("title")
        .values_list("pk", "title")[:DOCUMENT_CHOICES],
        "recent": remembered.get("recent", []),
    }
    status = 200
    if asked:
        try:
            # A query costs the same here as through the API: it counts in the one per-user rate.
            rate_limit_check(user=request.user)
            result = _retrieve(values, user=request.user)
        except TooManyAttemptsError as error:
            # 429 for htmx too: app.js swaps a 429's fragment in, so the message shows in place.
            context["error"] = error
            status = error.status
        except UserInputError as error:
            context["error"] = error
            status = 200 if request.htmx else 400
        else:
            context.update(_result_context(result, user=request.user))
            _remember(request, values)
            context["recent"] = request.session[_SESSION_KEY]["recent"]
    template = "retrieval/query.html#results" if request.htmx else "retrieval/query.html"
    return _with_retry_after(render(request, template, context, status=status), context)


def _with_retry_after(response: HttpResponse, context: dict[str, Any]) -> HttpResponse:
    error = context.get("error")
    return with_retry_after(response, error) if isinstance(error, TooManyAttemptsError) else response


def _retrieve(values: dict[str, Any], *, user: Any) -> RetrievalResult:
    """The query page's form values, as ``retrieve()`` takes them (a blank filter is none)."""
    return retrieve(
        query=values["query"],
        token_budget=_budget(values["budget"]),
        mode=values["mode"] or None,
        collection=values["collection"] or None,
        tags=[tag.strip() for tag in values["tags"].split(",") if tag.strip()] or None,
        documents=values["documents"] or None,
        user=user,
    )


@login_required
def document_ask(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    """A question about one document, asked on its page (issue 22 item 8): the same retrieve()
    as the query page, its ``documents`` filter set to this document alone. The answer is a
    fragment for the page's #answer; ask.js marks its spans in the outline and the text."""
    document = selectors.document_get(user=request.user, pk=pk)  # NotFoundError: a 404 page
    values = _values(request.GET)
    if not request.htmx:
        # Without JavaScript the query page answers the same question, filtered to this document.
        query = {"query": values["query"], "budget": values["budget"], "mode": values["mode"]}
        return redirect(f"{reverse('retrieval:query')}?{urlencode({**query, 'documents': document.pk})}")
    context: dict[str, Any] = {"document": document, "spans": []}
    status = 200
    try:
        rate_limit_check(user=request.user)  # the same per-user rate as the query page and the API
        result = retrieve(
            query=values["query"],
            token_budget=_budget(values["budget"]),
            mode=values["mode"] or None,
            documents=[document.pk],
            user=request.user,
        )
    except TooManyAttemptsError as error:
        context["error"] = error
        status = error.status  # swapped into #answer all the same (app.js)
    except UserInputError as error:
        context["error"] = error
    else:
        context["result"] = result
        context["spans"] = [
            {"node": chunk.node_id, "start": chunk.start_char, "end": chunk.end_char}
            for chunk in result.chunks
        ]
    return _with_retry_after(render(request, "retrieval/_ask_answer.html", context, status=status), context)


def _values(source: Any) -> dict[str, Any]:
    documents = source.getlist("documents") if hasattr(source, "getlist") else source.get("documents", [])
    return {
        "documents": [value for value in documents if value],
        "query": str(source.get("query", "")),
        "budget": str(source.get("budget", settings.TOKEN_BUDGET_DEFAULT)),
        "mode": str(source.get("mode", "")),
        "collection": str(source.get("collection", "")),
        "tags": str(source.get("tags", "")),
    }


def _budget(raw: str) -> Any:
    """A whole number when the text is one; otherwise the text, for retrieve() to refuse in words."""
    return int(raw) if raw.strip().lstrip("-").isdecimal() else raw


def _remember(request: HtmxHttpRequest, values: dict[str, Any]) -> None:
    state = request.session.get(_SESSION_KEY, {})
    recent = [item for item in state.get("recent", []) if item != values]
    state["last"] = values
    state["recent"] = [values, *recent][:RECENT_QUERIES]
    request.session[_SESSION_KEY] = state


def _context_bounds(start: int, end: int, length: int, excluded: list[tuple[int, int]]) -> tuple[int, int]:
    """Where the context shown around the chunk [start, end) begins and ends: CONTEXT_CHARS each
    side, stopping short of excluded text (a person took it out of every answer; collapsed as …)."""
    before_start = max(
        [0, start - CONTEXT_CHARS, *(span_end for _, span_end in excluded if span_end <= start)]
    )
    after_end = min(
        [length, end + CONTEXT_CHARS, *(span_start for span_start, _ in excluded if span_start >= end)]
    )
    return min(before_start, start), max(after_end, end)


def _result_context(result: RetrievalResult, *, user: Any) -> dict[str, Any]:
    """Chunks grouped by document (document rank, then offset), each inside its document's text."""
    contents = dict(
        selectors.documents_visible(user=user)
        .filter(pk__in={chunk.document_id for chunk in result.chunks})
        .values_list("pk", "content")
    )
    excluded = selectors.excluded_spans(document_ids=list(contents))
    groups: OrderedDict[int, dict[str, Any]] = OrderedDict()
    for chunk in result.chunks:
        text = contents.get(chunk.document_id, "")
        group = groups.setdefault(
            chunk.document_id, {"document_id": chunk.document_id, "title": chunk.document_title, "chunks": []}
        )
        before_start, after_end = _context_bounds(
            chunk.start_char, chunk.end_char, len(text), excluded.get(chunk.document_id, [])
        )
        group["chunks"].append(
            {
                "chunk": chunk,
                "before": text[before_start : chunk.start_char],
                "after": text[chunk.end_char : after_end],
                "cut_before": before_start > 0,
                "cut_after": after_end < len(text),
                "scores": chunk.scores.to_dict(),
                "found_by": " and ".join(_path_words(name) for name in chunk.found_by),
            }
        )
    return {
        "result": result,
        "paths": [
            {
                "words": _path_words(path.name),
                "ran": path.ran,
                "failed": path.failed,
                "reason": path.reason,
                "candidates": _count(path.candidates, "candidate"),
            }
            for path in result.paths
        ],
        "groups": list(groups.values()),
        "budget_share": round(100 * result.total_tokens / result.token_budget) if result.token_budget else 0,
        "context_text": "\n\n".join(chunk.text for chunk in result.chunks),
    }
