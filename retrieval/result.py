"""What ``retrieval.services.retrieve`` returns: plain frozen dataclasses with a JSON view.

Every surface renders these through ``to_dict()`` (the query page) or ``to_answer()`` (REST API,
MCP, CLI: ``to_dict()`` beside the original API's fields), so the shape below is the one contract
for "what did the query do and why".
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from openfable.errors import NotFoundError, UserInputError
from openfable.llm import LLMUsage

type Mode = Literal["bipath", "vector", "llm"]
type Routing = Literal["documents", "nodes"]

MODES: tuple[str, ...] = ("bipath", "vector", "llm")
# How the chunks of an answer are ordered: "document" (document rank, then offset: text to read
# in order) or "score" (best first: what a framework retriever expects).
ORDERS: tuple[str, ...] = ("document", "score")
# ``routing`` as the original OpenFable API names it (``to_answer``).
ROUTING_NAMES: dict[str, str] = {"documents": "document_level", "nodes": "node_level"}

# Path names, as they appear in ``paths``, ``found_by`` and per-path score maps.
VECTOR = "vector"  # document level: nearest nodes through the HNSW index, max per document
LEXICAL = "lexical"  # BM25 over full-text search: ranks documents; sharpens node similarity
LLM_SELECT = "llm_select"  # document level: the LLM scores documents from their shallow outline
LLM_NAVIGATE = "llm_navigate"  # node level: the LLM picks subtree roots from the outline
TREE_EXPANSION = "tree_expansion"  # node level: exact similarity + tree propagation
PATH_NAMES: tuple[str, ...] = (VECTOR, LEXICAL, LLM_SELECT, LLM_NAVIGATE, TREE_EXPANSION)


class RetrievalInputError(UserInputError):
    """Input a user can fix (budget, query, mode, filters); the message says what to do."""


class RetrievalNotFoundError(RetrievalInputError, NotFoundError):
    """A filter names what is not there, or not the user's to see (a collection, document ids,
    tags), or nothing matches them all: a 404, as for the same collection in a document list."""


@dataclass(frozen=True, slots=True)
class PathReport:
    """One retrieval path: did it run, and if not (or if it failed), why."""

    name: str
    ran: bool
    failed: bool = False
    reason: str = ""  # why it did not run, or why it failed
    candidates: int = 0  # documents or nodes it returned
    dropped_ids: int = 0  # LLM paths: ids in the answer that were not offered (invented)
    detail: Mapping[str, Any] = field(default_factory=dict)  # e.g. the vector search strategy

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "ran": self.ran,
            "failed": self.failed,
            "reason": self.reason,
            "candidates": self.candidates,
            "dropped_ids": self.dropped_ids,
            "detail": dict(self.detail),
        }


@dataclass(frozen=True, slots=True)
class DocumentHit:
    document_id: int
    title: str
    rank: int  # 0 = best fused score
    score: float  # fused, in [0, 1]
    path_scores: Mapping[str, float]  # raw score per path that found it
    found_by: tuple[str, ...]
    token_count: int
    selected: bool  # in the set the budget was routed on (see services.select_documents)
    vector_hits: int = 0  # how many of the vector path's top-K nodes fell in this document

    def to_dict(self) -> dict[str, Any]:
        return {
            "document_id": self.document_id,
            "title": self.title,
            "rank": self.rank,
            "score": self.score,
            "path_scores": dict(self.path_scores),
            "found_by": list(self.found_by),
            "token_count": self.token_count,
            "selected": self.selected,
            "vector_hits": self.vector_hits,
        }


@dataclass(frozen=True, slots=True)
class ChunkScores:
    """Scores behind one returned chunk; None where the path did not score it."""

    fused: float
    similarity: float | None = None  # cosine of the query to the node (document: best node)
    lexical: float | None = None  # BM25 of the node among its documents' nodes (document: in scope)
    inherited: float | None = None  # TreeExpansion S_inh
    child: float | None = None  # TreeExpansion S_child
    tree_expansion: float | None = None  # TreeExpansion total S
    llm: float | None = None  # LLMnavigate (node) or LLMselect (document) score

    def to_dict(self) -> dict[str, Any]:
        return {
            "fused": self.fused,
            "similarity": self.similarity,
            "lexical": self.lexical,
            "inherited": self.inherited,
            "child": self.child,
            "tree_expansion": self.tree_expansion,
            "llm": self.llm,
        }


@dataclass(frozen=True, slots=True)
class Chunk:
    node_id: int | None  # the node returned (a document's root when returned whole)
    document_id: int
    document_title: str
    document_rank: int
    toc_path: str
    kind: str  # root / section / subsection / leaf
    start_char: int  # offsets into the document's content; text == content[start:end]
    end_char: int
    token_count: int  # count_tokens(text)
    text: str
    scores: ChunkScores
    found_by: tuple[str, ...]
    truncated: bool = False  # cut to fit the budget (only ever the single chunk returned)
    pages: tuple[int, ...] = ()  # the pages of the document's file it lies on (none for text)

    @classmethod
    def whole_document(
        cls,
        *,
        document_id: int,
        title: str,
        rank: int,
        root_id: int | None,
        text: str,
        token_count: int,
        scores: ChunkScores,
        found_by: tuple[str, ...],
        pages: tuple[int, ...] = (),
    ) -> Chunk:
        """A document returned whole (budget routing chose documents)."""
        return cls(
            node_id=root_id,
            document_id=document_id,
            document_title=title,
            document_rank=rank,
            toc_path=title,
            kind="root",
            start_char=0,
            end_char=len(text),
            token_count=token_count,
            text=text,
            scores=scores,
            found_by=found_by,
            pages=pages,
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "node_id": self.node_id,
            "document_id": self.document_id,
            "document_title": self.document_title,
            "document_rank": self.document_rank,
            "toc_path": self.toc_path,
            "kind": self.kind,
            "start_char": self.start_char,
            "end_char": self.end_char,
            "token_count": self.token_count,
            "text": self.text,
            "scores": self.scores.to_dict(),
            "found_by": list(self.found_by),
            "truncated": self.truncated,
            "pages": list(self.pages),
        }


@dataclass(frozen=True, slots=True)
class RetrievalResult:
    query: str
    token_budget: int
    mode: str
    routing: Routing
    paths: tuple[PathReport, ...]
    documents: tuple[DocumentHit, ...]  # fused ranking, best first
    chunks: tuple[Chunk, ...]  # document rank, then start_char
    total_tokens: int  # sum of the chunks' count_tokens; never above token_budget
    timings_ms: Mapping[str, float]
    llm_usage: LLMUsage
    corpus_version: int
    filters: Mapping[str, Any]
    notes: tuple[str, ...] = ()
    cached: bool = False
    order: str = "document"  # of ``chunks``: see ORDERS
    top_k: int | None = None  # the most chunks asked for, in place of a budget (None: the budget alone)
    # Per document of the answer (``documents.selectors.document_sources``), cached with the rest:
    # title, source_filename, format, tags, metadata.
    sources: Mapping[int, Mapping[str, Any]] = field(default_factory=dict)

    @property
    def paths_run(self) -> list[str]:
        return [path.name for path in self.paths if path.ran and not path.failed]

    def path(self, name: str) -> PathReport | None:
        return next((path for path in self.paths if path.name == name), None)

    def to_dict(self) -> dict[str, Any]:
        return {
            "query": self.query,
            "token_budget": self.token_budget,
            "mode": self.mode,
            "routing": self.routing,
            "paths_run": self.paths_run,
            "paths": [path.to_dict() for path in self.paths],
            "documents": [document.to_dict() for document in self.documents],
            "chunks": [chunk.to_dict() for chunk in self.chunks],
            "total_tokens": self.total_tokens,
            "timings_ms": dict(self.timings_ms),
            "llm_usage": self.llm_usage.to_dict(),
            "corpus_version": self.corpus_version,
            "filters": dict(self.filters),
            "notes": list(self.notes),
            "cached": self.cached,
            "order": self.order,
            "top_k": self.top_k,
        }

    def to_answer(self) -> dict[str, Any]:
        """What every surface answers for a query (REST, MCP, the command line): the original
        OpenFable API's fields (``routing`` in its words, ``documents``, ``chunks`` with their
        ``content``) and ``to_dict()`` beside them as ``result``. Each text is sent once (a model
        pays for each token it reads): ``result``'s chunks and ``documents`` leave it to ``chunks``.
        """
        report = self.to_dict()
        report["chunks"] = [
            {key: value for key, value in chunk.items() if key != "text"} for chunk in report["chunks"]
        ]
        return {
            "query": self.query,
            "routing": ROUTING_NAMES[self.routing],
            "total_tokens": self.total_tokens,
            "token_budget": self.token_budget,
            "documents": [self._document_answer(hit) for hit in self.documents if hit.selected],
            "chunks": [
                {
                    "node_id": chunk.node_id,
                    "document_id": chunk.document_id,
                    "document_title": chunk.document_title,
                    "toc_path": chunk.toc_path,
                    "kind": chunk.kind,
                    "start_char": chunk.start_char,
                    "end_char": chunk.end_char,
                    "content": chunk.text,
                    "token_count": chunk.token_count,
                    "score": chunk.scores.fused,
                    "position": position,
                    "source": chunk.found_by[0] if chunk.found_by else "",
                    "truncated": chunk.truncated,
                    "pages": list(chunk.pages),
                }
                for position, chunk in enumerate(self.chunks)
            ],
            "notes": list(self.notes),
            "result": report,
        }

    def _document_answer(self, hit: DocumentHit) -> dict[str, Any]:
        """A document of the answer, once however many of its chunks come back: what a program
        needs to cite it (its file's name, tags, metadata) beside its score."""
        source = self.sources.get(hit.document_id, {})
        return {
            "document_id": hit.document_id,
            "title": hit.title,
            "score": hit.score,
            "token_count": hit.token_count,
            "source_filename": source.get("source_filename", ""),
            "format": source.get("format", ""),
            "tags": list(source.get("tags", ())),
            "metadata": dict(source.get("metadata", {})),
        }


def chunks_in_order(chunks: Sequence[Chunk], order: str) -> tuple[Chunk, ...]:
    """``chunks`` (in document order, as packing returns them) in ``order``: "score" puts the
    best fused score first (ties: document rank, then offset); "document" keeps them as they are."""
    if order == "score":
        return tuple(
            sorted(chunks, key=lambda chunk: (-chunk.scores.fused, chunk.document_rank, chunk.start_char))
        )
    return tuple(chunks)
