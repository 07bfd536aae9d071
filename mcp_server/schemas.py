"""What each MCP tool answers, declared: the tools' ``outputSchema`` (an agent builder reads it, and
the SDK's client checks every answer against it) and what the server checks each answer against
before it leaves.

The entities are ``documents.presenters``'s, field for field (the REST API's serializers declare
the same; ``tests/mcp_server/test_output_schemas.py`` holds the three together). They are closed
(``additionalProperties: false``): a presenter that grows a field grows it here too, or every call
fails its tests. A query's answer is ``RetrievalResult.to_answer``'s; it is declared open, as its
parts (``result``) report what each retrieval path did and grow with them.
"""

from __future__ import annotations

from typing import Any, Literal, NotRequired, TypedDict

from pydantic import ConfigDict, with_config

_CLOSED = ConfigDict(extra="forbid")

# -- the entities (documents.presenters) ----------------------------------------------------------


@with_config(_CLOSED)
class Collection(TypedDict):
    """A collection (collection_present): its slug is what the collection arguments take."""

    id: int
    name: str
    slug: str
    owner: str | None
    members: list[str]
    invited: list[str]
    document_count: int
    created: str | None


@with_config(_CLOSED)
class JobStep(TypedDict):
    """The job's stage in words, with the numbers behind them."""

    words: str
    done: int
    total: int
    queue_ahead: int | None
    queue: str
    seconds_left: int | None
    time_left: str


@with_config(_CLOSED)
class Job(TypedDict):
    """An ingestion job (job_present). ``finished`` is set once it succeeded or failed."""

    id: int
    document: int
    status: Literal["queued", "running", "succeeded", "failed"]
    stage: str
    progress: int
    step: JobStep
    builder_requested: str
    reindex: bool
    chunk_count: int
    node_count: int
    llm_calls: int
    llm_cached_calls: int
    llm_prompt_tokens: int
    llm_completion_tokens: int
    llm_cost_usd: float
    fallback_reason: str
    error: str
    timings: dict[str, Any]
    document_tokens: int
    embedded_tokens: int
    created: str | None
    started: str | None
    finished: str | None


class _DocumentFields(TypedDict):
    id: int
    document_id: int
    title: str
    collection: str
    status: Literal["queued", "indexing", "indexed", "failed"]
    builder: str
    token_count: int
    node_count: int
    tags: list[str]
    metadata: dict[str, Any]
    source_filename: str
    format: str
    format_note: str
    page_count: int
    recognised_pages: list[int]
    ocr_note: str
    content_hash: str
    embedding_model: str
    tree_version: int
    created: str | None
    updated: str | None


@with_config(_CLOSED)
class DocumentEntry(_DocumentFields):
    """A document in a list (document_present): without its text or jobs."""


@with_config(_CLOSED)
class Document(_DocumentFields):
    """One document (document_present): its latest ingestion job, and its text unless meta_only."""

    latest_job: Job | None
    content: NotRequired[str]


@with_config(_CLOSED)
class Node(TypedDict):
    """A node with its exact text (node_present): the document's characters start_char to end_char."""

    id: int
    document: int
    document_title: str
    parent: int | None
    kind: Literal["root", "section", "subsection", "leaf"]
    depth: int
    ordinal: int
    order: int
    title: str
    summary: str
    toc_path: str
    start_char: int
    end_char: int
    token_count: int
    edited: bool
    embedding_stale: bool
    excluded: bool
    pages: list[int]
    content: str


@with_config(_CLOSED)
class TreeNode(TypedDict):
    """A node of a tree, without its text (get_node has it); nested ones carry their ``children``."""

    id: int
    parent: int | None
    kind: Literal["root", "section", "subsection", "leaf"]
    depth: int
    title: str
    summary: str
    toc_path: str
    start_char: int
    end_char: int
    token_count: int
    edited: bool
    excluded: bool
    embedding_stale: bool
    pages: list[int]
    children: NotRequired[list[TreeNode]]


# -- what each tool answers -----------------------------------------------------------------------


@with_config(_CLOSED)
class Tree(TypedDict):
    """A document's tree (tree_present): the root with nested children, or (flat) every node in
    document order with its parent id. ``note`` says why there are no nodes yet."""

    document_id: int
    title: str
    status: str
    flat: bool
    nodes: list[TreeNode]
    note: NotRequired[str]


@with_config(_CLOSED)
class DocumentPage(TypedDict):
    """A page of documents, newest first (document_page_present); ``next_offset`` pages on (null
    on the last page)."""

    count: int
    offset: int
    limit: int
    next_offset: int | None
    documents: list[DocumentEntry]


@with_config(_CLOSED)
class Invitation(TypedDict):
    """A collection offered to you, not searched until you accept it (on the web or through REST)."""

    slug: str
    name: str
    invited_by: str | None


@with_config(_CLOSED)
class Collections(TypedDict):
    collections: list[Collection]
    invitations: list[Invitation]


@with_config(_CLOSED)
class Ingested(TypedDict):
    """The stored document and its ingestion job; ``created`` false: the same text was there."""

    document: DocumentEntry
    job: Job | None
    created: bool
    note: NotRequired[str]


@with_config(_CLOSED)
class Deleted(TypedDict):
    deleted: bool
    document_id: int
    title: str


class QueryAnswer(TypedDict):
    """The passages that fit the budget, in document order (RetrievalResult.to_answer): each chunk
    with its ``content``, document, ``toc_path``, offsets and score; ``result`` reports every
    retrieval path with its scores and timings."""

    query: str
    routing: str
    total_tokens: int
    token_budget: int
    documents: list[dict[str, Any]]
    chunks: list[dict[str, Any]]
    notes: list[str]
    result: dict[str, Any]


# The agent path (documents.agent_answers): what each step did and what the next one needs.


@with_config(_CLOSED)
class Planned(TypedDict):
    """The stored document and the instructions for apply_chunks (``instructions.next``); a text
    planned before also says its ``builder`` and how many chunks the agent gave it."""

    document_id: int
    created: bool
    title: str
    collection: str
    characters: int
    tokens: int
    status: str
    builder: NotRequired[str]
    agent_chunks: NotRequired[int]
    instructions: dict[str, Any]


@with_config(_CLOSED)
class Chunk(TypedDict):
    """A numbered chunk: its offsets, tokens and opening words."""

    index: int
    start_char: int
    end_char: int
    tokens: int
    opening: str


@with_config(_CLOSED)
class Chunked(TypedDict):
    """The numbered chunks and the instructions and tree_schema for apply_tree."""

    document_id: int
    markers: int
    chunk_count: int
    chunks: list[Chunk]
    instructions: dict[str, Any]


@with_config(_CLOSED)
class TreeSaved(TypedDict):
    """The saved tree: its nodes, leaves and sections; the document answers queries now."""

    document_id: int
    job_id: int
    status: str
    builder: str
    embedding_model: str
    nodes: int
    leaves: int
    sections: list[dict[str, Any]]
