"""The MCP tools: each parses its arguments, calls a service or selector as the token's user, and
answers a JSON object in the shape every surface returns (``documents.presenters``).

What a tool does is synchronous ORM code (``mcp_server.actions``) run through
``mcp_server.sync.run_sync``; the async function registered with the SDK declares the arguments
(their JSON schema is what an agent reads) and maps errors once: an ``OpenFableError`` (a user's
mistake, or a service not answering; a lost database reads as the REST API's 503 error) becomes
an ``isError`` result carrying the service's message and ``{"error": {"code", "message",
"details"}}`` as structured content, like the other surfaces' error body. Anything else the SDK
logs with its traceback and reports to the client as a bare "Error executing tool <name>": never
the traceback, never the exception's text.
"""

from __future__ import annotations

import inspect
import json
import logging
from collections.abc import Callable
from typing import Annotated, Any, Literal

from django.db import OperationalError
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError, UnexpectedToolError
from mcp_types import CallToolResult, InputRequiredResult, TextContent, ToolAnnotations
from pydantic import Field, ValidationError

from mcp_server import actions, schemas
from mcp_server.security import TokenUser
from mcp_server.sync import run_sync
from openfable.errors import OpenFableError, UserInputError
from openfable.http import DATABASE_UNAVAILABLE
from openfable.rate_limit import rate_limit_check

logger = logging.getLogger(__name__)

# Each tool returns a CallToolResult whose structured content is the JSON object its return
# annotation's second part (mcp_server.schemas) declares: the SDK publishes that as the tool's
# outputSchema and checks each answer against it (an error's structured content is {"error": ...},
# which it leaves alone).

INSTRUCTIONS = """\
OpenFable stores documents as trees (root, sections, subsections, leaf chunks; every internal node
has a title and a summary) and answers a query with the most relevant passages that fit a token
budget, in document order, each with its document, section path and character offsets. It returns
evidence, not answers: read the passages and cite them.

To find evidence: `query`. To look around: `list_collections`, `list_documents`, `get_document`,
`get_tree` (a document's table of contents with summaries), `get_node` (one node's exact text).
To add a document: `ingest_document` (the server chunks and builds the tree; `wait` to get it back
indexed, otherwise poll `job_status`). To build the tree yourself instead, with no model call on
the server: `plan_document`, then `apply_chunks` with the opening words of each chunk, then
`apply_tree` with a table of contents over the numbered chunks; each step's answer says exactly
what the next one needs.
"""

_READ = ToolAnnotations(read_only_hint=True, open_world_hint=False)

# -- argument types (their descriptions are the input schema an agent reads) ---------------------

DocumentId = Annotated[
    int, Field(description="A document id, as list_documents or ingest_document return it.")
]
CollectionSlug = Annotated[
    str,
    Field(description="A collection slug or id (see list_collections). Empty: your default collection."),
]
Tags = Annotated[list[str] | None, Field(description="Tags to attach, e.g. ['contracts', '2024'].")]
Title = Annotated[str, Field(description="Title. Empty: taken from the first line of the text.")]
DocumentText = Annotated[
    str,
    Field(
        description="The whole document as plain text or Markdown (UTF-8). Headings help the "
        "structure; the same text sent again to the same collection is the same document."
    ),
]


# -- tools ----------------------------------------------------------------------------------------


async def ingest_document(
    ctx: Context,
    text: Annotated[
        str,
        Field(
            description="The whole document as plain text or Markdown (UTF-8). Headings help the "
            "structure; the same text sent again to the same collection is the same document. "
            "Leave it empty to send a file as content_base64 instead."
        ),
    ] = "",
    content_base64: Annotated[
        str,
        Field(
            description="A file instead of text: its bytes in base64. PDF, Word (.docx), HTML, "
            "Markdown or text; the format is read from the content. Give its filename too."
        ),
    ] = "",
    filename: Annotated[
        str, Field(description="The file's name, e.g. 'report.pdf' (with content_base64).")
    ] = "",
    title: Title = "",
    collection: CollectionSlug = "",
    tags: Tags = None,
    builder: Annotated[
        Literal["", "llm", "structural"],
        Field(
            description="Who builds the tree: 'llm' (the server's model), 'structural' (headings and "
            "paragraphs, no model) or '' (llm when the server has a model, else structural)."
        ),
    ] = "",
    wait: Annotated[
        bool,
        Field(
            description="Wait until the document is indexed (bounded by the server's wait limit) and "
            "return it with its node count. Otherwise return at once and poll job_status."
        ),
    ] = False,
) -> Annotated[CallToolResult, schemas.Ingested]:
    """Add a document: store the text, or a file (content_base64 + filename: PDF, Word, HTML,
    Markdown, text), and index it (read the file's text and pages, chunk, build the tree of sections
    with titles and summaries, embed every node). Returns the document and its ingestion job; with
    wait=true, once indexed. Sending a text or file already in the collection returns that document
    (created=false) and queues nothing. To build the tree yourself without a model call on the
    server, use plan_document instead."""
    return await _answer(
        ctx,
        actions.ingest_document,
        text=text,
        content_base64=content_base64,
        filename=filename,
        title=title,
        collection=collection,
        tags=tags,
        builder=builder,
        wait=wait,
    )


async def list_collections(ctx: Context) -> Annotated[CallToolResult, schemas.Collections]:
    """The collections you can read, with their slugs (what the collection arguments take) and
    document counts; and under "invitations" the collections offered to you that you have not
    accepted (not searched until the person accepts them on the web app's Collections page)."""
    return await _answer(ctx, actions.list_collections)


async def list_documents(
    ctx: Context,
    collection: Annotated[
        str, Field(description="Only this collection (slug or id). Empty: all you can read.")
    ] = "",
    tag: Annotated[str, Field(description="Only documents carrying this tag.")] = "",
    status: Annotated[
        Literal["queued", "indexing", "indexed", "failed"] | None,
        Field(description="Only documents in this state; only 'indexed' ones answer queries."),
    ] = None,
    search: Annotated[str, Field(description="Words in the title or file name.")] = "",
    limit: Annotated[int, Field(ge=1, le=200, description="At most this many (1-200).")] = 50,
    offset: Annotated[int, Field(ge=0, description="Skip this many (for the next page).")] = 0,
) -> Annotated[CallToolResult, schemas.DocumentPage]:
    """Documents you can read, newest first, without their text: id, title, collection, status,
    builder, tokens, node count, tags. `count` is the total matching; `next_offset` pages on."""
    return await _answer(
        ctx,
        actions.list_documents,
        collection=collection,
        tag=tag,
        status=status,
        search=search,
        limit=limit,
        offset=offset,
    )


async def get_document(
    ctx: Context,
    document_id: DocumentId,
    meta_only: Annotated[
        bool, Field(description="Leave out the text (it can be long); just the description and the last job.")
    ] = False,
) -> Annotated[CallToolResult, schemas.Document]:
    """One document: its description, its latest ingestion job, and (unless meta_only) its whole
    text. For the structure, use get_tree; for evidence about a question, query is cheaper."""
    return await _answer(ctx, actions.get_document, document_id=document_id, meta_only=meta_only)


async def get_tree(
    ctx: Context,
    document_id: DocumentId,
    flat: Annotated[
        bool,
        Field(
            description="A flat list in document order with parent ids, instead of the root with nested children."
        ),
    ] = False,
) -> Annotated[CallToolResult, schemas.Tree]:
    """A document's tree: every node's id, kind (root/section/subsection/leaf), title, summary,
    section path, character offsets and pages (of a PDF), without the text. Read it as a table of contents; get_node
    returns any node's exact text."""
    return await _answer(ctx, actions.get_tree, document_id=document_id, flat=flat)


async def get_node(
    ctx: Context,
    node_id: Annotated[int, Field(description="A node id, from get_tree or a query's chunks.")],
) -> Annotated[CallToolResult, schemas.Node]:
    """One node of a tree with its exact text (the document's characters start_char to end_char),
    title, summary, section path, parent and pages (of a PDF: cite them)."""
    return await _answer(ctx, actions.get_node, node_id=node_id)


async def query(
    ctx: Context,
    query: Annotated[str, Field(description="The question or topic, in natural language.")],
    token_budget: Annotated[
        int | None,
        Field(description="Most tokens of text to return (the server accepts 100-32000; default 2000)."),
    ] = None,
    mode: Annotated[
        Literal["bipath", "vector", "llm"] | None,
        Field(
            description="'vector': embeddings and the tree only, fastest; 'llm': the server's model "
            "also picks documents and sections; 'bipath': both. Default: the server's."
        ),
    ] = None,
    collection: Annotated[str, Field(description="Search only this collection (slug or id).")] = "",
    documents: Annotated[list[int] | None, Field(description="Search only these document ids.")] = None,
    tags: Annotated[
        list[str] | None, Field(description="Search only documents carrying all these tags.")
    ] = None,
    top_k: Annotated[
        int | None,
        Field(description="Instead of token_budget: at most this many passages, the best (1-100)."),
    ] = None,
    order: Annotated[
        Literal["document", "score"] | None,
        Field(
            description="Order of the chunks: 'document' (reading order, the default) or 'score' (best first)."
        ),
    ] = None,
) -> Annotated[CallToolResult, schemas.QueryAnswer]:
    """Find evidence: the passages most relevant to the query that fit the token budget, in
    document order. Each chunk has its text (`content`), document, section path (`toc_path`),
    character offsets and score; whole documents come back when they fit. `routing` says whether
    documents or nodes were returned, `result` reports every retrieval path with its scores and
    timings. Only indexed documents you can read are searched."""
    return await _answer(
        ctx,
        actions.query,
        query=query,
        token_budget=token_budget,
        mode=mode,
        collection=collection,
        documents=documents,
        tags=tags,
        top_k=top_k,
        order=order,
    )


async def job_status(
    ctx: Context,
    job_id: Annotated[int, Field(description="An ingestion job id, from ingest_document or get_document.")],
) -> Annotated[CallToolResult, schemas.Job]:
    """An ingestion job: status (queued, running, succeeded, failed), stage, progress in percent,
    `step` (the stage in words with its counts, the place in the queue and the time left), nodes
    made, and the error when it failed. `finished` is the time it succeeded or failed (null until
    then)."""
    return await _answer(ctx, actions.job_status, job_id=job_id)


async def delete_document(
    ctx: Context, document_id: DocumentId
) -> Annotated[CallToolResult, schemas.Deleted]:
    """Delete a document with its tree and jobs. It cannot be undone."""
    return await _answer(ctx, actions.delete_document, document_id=document_id)


async def plan_document(
    ctx: Context,
    text: DocumentText,
    title: Title = "",
    collection: CollectionSlug = "",
    tags: Tags = None,
) -> Annotated[CallToolResult, schemas.Planned]:
    """Agent path, step 1 of 3: store a document whose tree you will build yourself (no model call
    on the server). Returns its document_id and the instructions for step 2: read the text and call
    apply_chunks with the verbatim opening words of each chunk. The same text again returns the same
    document."""
    return await _answer(ctx, actions.plan_document, text=text, title=title, collection=collection, tags=tags)


async def apply_chunks(
    ctx: Context,
    document_id: Annotated[int, Field(description="The document_id plan_document returned.")],
    markers: Annotated[
        list[str],
        Field(
            description="The opening words (5-8) of each chunk, copied exactly from the text, in "
            "document order. Each one starts a chunk; the text before the first is chunk 0."
        ),
    ],
) -> Annotated[CallToolResult, schemas.Chunked]:
    """Agent path, step 2 of 3: cut the document at your markers. Returns the numbered chunks
    (index, offsets, tokens, opening words) and the instructions and JSON schema for step 3,
    apply_tree. Calling it again replaces the chunks."""
    return await _answer(ctx, actions.apply_chunks, document_id=document_id, markers=markers)


async def apply_tree(
    ctx: Context,
    document_id: Annotated[int, Field(description="The document_id plan_document returned.")],
    tree: Annotated[
        dict[str, Any],
        Field(
            description="The table of contents over the chunk indexes, matching the tree_schema that "
            'apply_chunks returned: {"title", "summary", "sections": [{"title", "summary", "chunks": '
            '[indexes], "sections": [...]}]}. Every chunk index appears exactly once, in order.'
        ),
    ],
) -> Annotated[CallToolResult, schemas.TreeSaved]:
    """Agent path, step 3 of 3: check your tree over the chunks, embed every node and save it; the
    document is then indexed and answers queries. A tree that does not fit the chunks is refused
    with what to fix. Calling it again replaces the tree."""
    return await _answer(ctx, actions.apply_tree, document_id=document_id, tree=tree)


_TOOLS: list[tuple[Callable[..., Any], dict[str, Any]]] = [
    (query, {"title": "Find evidence", "annotations": _READ}),
    (list_collections, {"title": "List collections", "annotations": _READ}),
    (list_documents, {"title": "List documents", "annotations": _READ}),
    (get_document, {"title": "Get a document", "annotations": _READ}),
    (get_tree, {"title": "Get a document's tree", "annotations": _READ}),
    (get_node, {"title": "Get a node's text", "annotations": _READ}),
    (job_status, {"title": "Ingestion job status", "annotations": _READ}),
    (
        ingest_document,
        {
            "title": "Add a document",
            "annotations": ToolAnnotations(destructive_hint=False, open_world_hint=False),
        },
    ),
    (
        delete_document,
        {
            "title": "Delete a document",
            "annotations": ToolAnnotations(
                destructive_hint=True, idempotent_hint=True, open_world_hint=False
            ),
        },
    ),
    (
        plan_document,
        {
            "title": "Agent path 1: store a document",
            "annotations": ToolAnnotations(destructive_hint=False, open_world_hint=False),
        },
    ),
    (
        apply_chunks,
        {
            "title": "Agent path 2: cut it into chunks",
            "annotations": ToolAnnotations(idempotent_hint=True, open_world_hint=False),
        },
    ),
    (
        apply_tree,
        {
            "title": "Agent path 3: save the tree",
            "annotations": ToolAnnotations(idempotent_hint=True, open_world_hint=False),
        },
    ),
]
TOOL_NAMES = [tool.__name__ for tool, _ in _TOOLS]


class _Server(MCPServer):
    """The SDK's server, with arguments that do not fit a tool's input schema answered as every
    other mistake is: a tool error whose structured content is ``{"error": {"code", "message",
    "details"}}`` (code ``invalid``, each field's complaint under its name, as the REST API's 400
    has them), rather than the SDK's bare text."""

    async def call_tool(
        self, name: str, arguments: dict[str, Any], context: Context[Any, Any] | None = None
    ) -> CallToolResult | InputRequiredResult:
        try:
            return await super().call_tool(name, arguments, context)
        except ToolError as refused:
            if isinstance(refused, UnexpectedToolError) or not isinstance(refused.__cause__, ValidationError):
                raise
            return _arguments_refused(name, refused.__cause__)


def _arguments_refused(tool: str, invalid: ValidationError) -> CallToolResult:
    fields: dict[str, list[str]] = {}
    for problem in invalid.errors(include_url=False, include_input=False):
        # The field's name; a nested place (an item of a list) after it, as "documents.2".
        where = ".".join(str(part) for part in problem["loc"]) or "arguments"
        fields.setdefault(where, []).append(str(problem["msg"]))
    # Field names only in the log: the values are the caller's data.
    logger.info("MCP tool %r refused arguments: %r", tool, sorted(fields))
    said = "; ".join(f"{where}: {' / '.join(messages)}" for where, messages in fields.items())
    error = UserInputError(
        f"The arguments of {tool} are not valid ({said}). Send them as the tool's input schema "
        "says and call it again.",
        code="invalid",
        details=fields,
    )
    return CallToolResult(
        content=[TextContent(type="text", text=error.message)],
        structured_content=error.to_dict(),
        is_error=True,
    )


def build_server() -> MCPServer:
    """A new MCP server with every tool. One per ASGI app: its session manager runs once."""
    server: MCPServer = _Server("openfable", title="OpenFable", instructions=INSTRUCTIONS)
    for tool, options in _TOOLS:
        server.add_tool(tool, description=inspect.cleandoc(tool.__doc__ or ""), **options)
    return server


# -- the one error mapping ----------------------------------------------------------------------


async def _answer(ctx: Context, work: Callable[..., dict[str, Any]], /, **arguments: Any) -> CallToolResult:
    user = _user(ctx)
    try:
        # Each call counts against the user's request rate, the same count as the REST API's.
        await run_sync(rate_limit_check, user=user)
        data = await run_sync(work, user=user, **arguments)
    except OperationalError as lost:
        # The database is down or restarting: the same answer as the REST API's 503, not a crash.
        logger.warning("database unavailable for the MCP tool %s: %s", work.__name__, lost)
        error: OpenFableError = DATABASE_UNAVAILABLE
    except OpenFableError as caught:
        error = caught
    else:
        return CallToolResult(
            content=[TextContent(type="text", text=json.dumps(data, ensure_ascii=False))],
            structured_content=data,
        )
    return CallToolResult(
        content=[TextContent(type="text", text=error.message)],
        structured_content=error.to_dict(),
        is_error=True,
    )


def _user(ctx: Context) -> Any:
    """The Django user of the request's API token (``security.BearerTokenMiddleware`` put it there)."""
    request = ctx.request_context.request
    found = request.scope.get("user") if request is not None else None
    if not isinstance(found, TokenUser):
        # Only reachable when the server is used without the ASGI app's token check.
        raise ToolError("Not authenticated: this server needs an API token.")
    return found.user
