"""The HTTP client the retrievers share: one query call, sync and async, and the one error type."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import httpx

API_PREFIX = "/v1/api"
DEFAULT_TOP_K = 4  # passages a retriever returns when asked for neither a count nor a budget


class OpenFableError(Exception):
    """What the server refused, or why it could not be reached: ``code`` and ``message`` as the
    server's error body says them (``status`` its HTTP status; 0 when no answer came)."""

    def __init__(self, code: str, message: str, *, status: int = 0, details: Any = None) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message
        self.status = status
        self.details = details


@dataclass(frozen=True)
class QueryOptions:
    """How a query runs: ``top_k`` passages or a ``token_budget`` (not both; neither: ``top_k`` =
    DEFAULT_TOP_K), their ``order`` ("score": best first; "document": reading order), and the
    scope (a ``collection`` slug or id, ``documents`` ids, ``tags`` a document must all carry)."""

    top_k: int | None = None
    token_budget: int | None = None
    order: Literal["score", "document"] = "score"
    mode: Literal["vector", "llm", "bipath"] | None = None
    collection: str | int | None = None
    documents: Sequence[int] | None = None
    tags: Sequence[str] | None = None

    def body(self, query: str) -> dict[str, Any]:
        top_k = self.top_k if self.top_k is not None or self.token_budget is not None else DEFAULT_TOP_K
        fields = {
            "query": query,
            "top_k": top_k,
            "token_budget": self.token_budget,
            "order": self.order,
            "mode": self.mode,
            "collection": None if self.collection is None else str(self.collection),
            "documents": None if self.documents is None else list(self.documents),
            "tags": None if self.tags is None else list(self.tags),
        }
        return {name: value for name, value in fields.items() if value is not None}


@dataclass(frozen=True)
class Passage:
    """One chunk of an answer with what citing it needs: its document's title, file name, tags,
    metadata and ``original`` (the URL of the file as uploaded), its offsets into the document's
    text (``content == text[start_char:end_char]``) and the pages of the file it lies on."""

    content: str
    score: float
    position: int
    node_id: int | None
    document_id: int
    title: str
    toc_path: str
    kind: str
    start_char: int
    end_char: int
    pages: tuple[int, ...]
    source: str
    truncated: bool
    source_filename: str = ""
    format: str = ""
    tags: tuple[str, ...] = ()
    document_metadata: Mapping[str, Any] = field(default_factory=dict)
    original: str = ""

    def metadata(self) -> dict[str, Any]:
        """Everything but the text, as a framework's document metadata."""
        return {
            "node_id": self.node_id,
            "document_id": self.document_id,
            "title": self.title,
            "toc_path": self.toc_path,
            "kind": self.kind,
            "start_char": self.start_char,
            "end_char": self.end_char,
            "pages": list(self.pages),
            "score": self.score,
            "position": self.position,
            "source": self.source,
            "truncated": self.truncated,
            "source_filename": self.source_filename,
            "format": self.format,
            "tags": list(self.tags),
            "document_metadata": dict(self.document_metadata),
            "original": self.original,
        }


def passages_of(answer: Mapping[str, Any], *, base_url: str) -> list[Passage]:
    """The chunks of a query's answer as passages, in the answer's order, each with its document."""
    documents = {entry["document_id"]: entry for entry in answer.get("documents", [])}
    passages = []
    for chunk in answer["chunks"]:
        document = documents.get(chunk["document_id"], {})
        original = document.get("original", "")
        passages.append(
            Passage(
                content=chunk["content"],
                score=float(chunk["score"]),
                position=chunk["position"],
                node_id=chunk["node_id"],
                document_id=chunk["document_id"],
                title=chunk["document_title"],
                toc_path=chunk["toc_path"],
                kind=chunk["kind"],
                start_char=chunk["start_char"],
                end_char=chunk["end_char"],
                pages=tuple(chunk.get("pages", ())),
                source=chunk.get("source", ""),
                truncated=bool(chunk.get("truncated", False)),
                source_filename=document.get("source_filename", ""),
                format=document.get("format", ""),
                tags=tuple(document.get("tags", ())),
                document_metadata=dict(document.get("metadata", {})),
                original=str(httpx.URL(base_url).join(original)) if original else "",
            )
        )
    return passages


class OpenFableClient:
    """OpenFable's REST API at ``base_url`` (the server's address, e.g. http://127.0.0.1:8000),
    signed in with an API token (``of_…``)."""

    def __init__(self, base_url: str, token: str, *, timeout: float = 120.0) -> None:
        self.base_url = base_url.rstrip("/")
        self._headers = {"Authorization": f"Bearer {token}", "Accept": "application/json"}
        self._timeout = timeout

    def query(self, query: str, options: QueryOptions | None = None) -> dict[str, Any]:
        """``POST /v1/api/query``: the answer as the server sends it."""
        body = (options or QueryOptions()).body(query)
        try:
            with httpx.Client(headers=self._headers, timeout=self._timeout) as http:
                response = http.post(f"{self.base_url}{API_PREFIX}/query", json=body)
        except httpx.HTTPError as error:
            raise _unreachable(self.base_url, error) from error
        return _answer(response)

    async def aquery(self, query: str, options: QueryOptions | None = None) -> dict[str, Any]:
        body = (options or QueryOptions()).body(query)
        try:
            async with httpx.AsyncClient(headers=self._headers, timeout=self._timeout) as http:
                response = await http.post(f"{self.base_url}{API_PREFIX}/query", json=body)
        except httpx.HTTPError as error:
            raise _unreachable(self.base_url, error) from error
        return _answer(response)

    def passages(self, query: str, options: QueryOptions | None = None) -> list[Passage]:
        return passages_of(self.query(query, options), base_url=self.base_url)

    async def apassages(self, query: str, options: QueryOptions | None = None) -> list[Passage]:
        return passages_of(await self.aquery(query, options), base_url=self.base_url)


def _unreachable(base_url: str, error: httpx.HTTPError) -> OpenFableError:
    return OpenFableError(
        "unreachable", f"No answer from OpenFable at {base_url}: {error}. Is the server running there?"
    )


def _answer(response: httpx.Response) -> dict[str, Any]:
    """The JSON answer of a success; the server's error, as ``OpenFableError``, of anything else."""
    try:
        body = response.json()
    except ValueError:
        body = None
    if response.is_success and isinstance(body, dict):
        return body
    error = body.get("error") if isinstance(body, dict) else None
    if isinstance(error, dict) and "code" in error:
        raise OpenFableError(
            str(error["code"]),
            str(error.get("message", "")),
            status=response.status_code,
            details=error.get("details"),
        )
    raise OpenFableError(
        "unexpected_response",
        f"HTTP {response.status_code} without OpenFable's error body: {response.text[:200]!r}",
        status=response.status_code,
    )
