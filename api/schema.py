"""The error answers every operation can give, added to the OpenAPI schema in one place (a
drf-spectacular postprocessing hook), so the schema names every status the server returns."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

_ERROR = {"$ref": "#/components/schemas/Error"}
_WRITES = {"post", "put", "patch", "delete"}
# Status -> what it means, and which operations can answer it.
_ALWAYS = {
    400: "input to fix (a field, a query parameter); the message says what",
    401: "no or unknown token",
    404: "no such thing, or not yours to see",
    429: "too many requests: wait (Retry-After) and try again",
    503: "a part the request needs (the database) is not answering: try again shortly",
}
_ON_WRITES = {
    403: "signed in, but not allowed to do this (not the owner; a session without its CSRF token)",
    409: "conflicts with the current state (the tree moved on since expected_version; the slug is taken)",
}
_WITH_BODY = {
    413: "the body is larger than the server takes (OPENFABLE_MAX_DOCUMENT_BYTES)",
    415: "the body is not in a media type this operation reads (JSON; multipart for an upload)",
}


# Response fields an answer may leave out (drf-spectacular marks every read-only field required).
_LEFT_OUT = {"Document": {"content"}}  # GET /documents/{id}?meta_only=true


def add_error_responses(result: dict[str, Any], generator: Any, request: Any, public: bool) -> dict[str, Any]:
    components = result.get("components", {}).get("schemas", {})
    for name, fields in _LEFT_OUT.items():
        if name in components:
            components[name]["required"] = [
                f for f in components[name].get("required", []) if f not in fields
            ]
    for operations in result.get("paths", {}).values():
        for method, operation in operations.items():
            if not isinstance(operation, dict) or "responses" not in operation:
                continue
            if not any("bearerAuth" in requirement for requirement in operation.get("security", [])):
                continue  # the health check: no token, no throttle; its 503 is its own
            codes = dict(_ALWAYS)
            if method in _WRITES:
                codes.update(_ON_WRITES)
            if "requestBody" in operation:
                codes.update(_WITH_BODY)
            for code, description in sorted(codes.items()):
                operation["responses"].setdefault(
                    str(code),
                    {"content": {"application/json": {"schema": _ERROR}}, "description": description},
                )
    return result


# -- links: where an answer's ids lead (OpenAPI 3 `links`) -------------------------------------------
#
# A client (and schemathesis's stateful phase) follows them: an added document to its tree, the tree
# to its nodes and their edits, an edit's node on to the next. drf-spectacular 0.30 has no link
# declaration of its own, so they are added here, by operation id, once the schema is generated.

_DOCUMENT_OPERATIONS = (
    "v1_api_documents_retrieve",
    "v1_api_documents_partial_update",
    "v1_api_documents_destroy",
    "v1_api_documents_tree_list",
    "v1_api_documents_history_list",
    "v1_api_documents_original_retrieve",
    "v1_api_documents_reindex_create",
    "v1_api_documents_group_create",
    "v1_api_documents_undo_create",
)
_DOCUMENT_READS_AND_EDITS = tuple(
    operation
    for operation in _DOCUMENT_OPERATIONS
    if operation not in {"v1_api_documents_destroy", "v1_api_documents_reindex_create"}
)
_NODE_READS = ("v1_api_nodes_retrieve", "v1_api_nodes_move_places_retrieve")
_NODE_EDITS = (
    "v1_api_nodes_partial_update",
    "v1_api_nodes_dissolve_create",
    "v1_api_nodes_merge_create",
    "v1_api_nodes_move_create",
    "v1_api_nodes_split_create",
)
# The edits whose answer has the node (a dissolve's and an undo's has none).
_EDITS = (
    "v1_api_nodes_merge_create",
    "v1_api_nodes_move_create",
    "v1_api_nodes_split_create",
    "v1_api_documents_group_create",
)


@dataclass(frozen=True)
class Link:
    """Where one answer leads: the target's path ``id`` and request body fields, each a runtime
    expression (``$response.body#/…``, ``$request.path.id``) or a constant."""

    id: str
    body: dict[str, Any] = field(default_factory=dict)
    query: dict[str, Any] = field(default_factory=dict)


def _body(pointer: str) -> str:
    return f"$response.body{pointer}"


def _to(operations: tuple[str, ...], pointer: str, **body: str) -> dict[str, Link]:
    """Each operation, its id at ``pointer`` in the answer (and body fields at theirs)."""
    return {
        operation: Link(_body(pointer), {k: _body(v) for k, v in body.items()}) for operation in operations
    }


# The tree of a document (GET /documents/{id}/tree, nested) as Markdown makes it: the root, its
# title and opening paragraph as two leaves, then its sections. Each edit gets the node it takes.
_TITLE = "#/0/children/0/id"
_SECTION, _NEXT_SECTION = "#/0/children/2/id", "#/0/children/3/id"
_SECTION_LEAF = "#/0/children/2/children/0/id"
_THIS_DOCUMENT = "$request.path.id"
# A tree link asks for the nested tree: the pointers above read it.
_NESTED = {"flat": "false"}
_FROM_TREE: dict[str, Link] = {
    "v1_api_nodes_retrieve": Link(_body(_SECTION_LEAF)),
    "v1_api_nodes_partial_update": Link(_body(_SECTION)),
    # A section can move to the end of the section before it (it becomes a subsection there).
    "v1_api_nodes_move_places_retrieve": Link(_body(_NEXT_SECTION)),
    "v1_api_nodes_move_create": Link(_body(_NEXT_SECTION), {"parent": _body(_SECTION)}),
    "v1_api_nodes_dissolve_create": Link(_body(_SECTION)),
    "v1_api_nodes_merge_create": Link(_body(_TITLE)),  # with the opening paragraph after it
    # The title's leaf starts the text at 0 and is one line: a cut exactly at character 2 (after
    # "# ") falls inside it; its answer's leaf leads on to the next edits.
    "v1_api_nodes_split_create": Link(_body(_TITLE), {"position": 2, "snap": False}),
    "v1_api_documents_group_create": Link(
        _THIS_DOCUMENT, {"first": _body(_SECTION), "last": _body(_NEXT_SECTION)}
    ),
    "v1_api_documents_undo_create": Link(_THIS_DOCUMENT),
    "v1_api_documents_history_list": Link(_THIS_DOCUMENT),
}
# An edit's answer: its node, on to the next edit from the version it made; its document's tree.
_FROM_EDIT: dict[str, Link] = {
    **_to(_NODE_READS, "#/node/id"),
    **_to(_NODE_EDITS, "#/node/id", expected_version="#/tree_version"),
    "v1_api_documents_tree_list": Link(_body("#/node/document"), query=_NESTED),
    "v1_api_documents_undo_create": Link(
        _body("#/node/document"), {"expected_version": _body("#/tree_version")}
    ),
}

# (operation id, status) -> {operation id it leads to: the link}.
LINKS: dict[tuple[str, str], dict[str, Link]] = {
    **{
        ("v1_api_documents_create", status): _to(_DOCUMENT_OPERATIONS, "#/document_id")
        | _to(("v1_api_jobs_retrieve",), "#/job/id")
        for status in ("200", "201", "202")
    },
    # A list or a read leads on to reads and edits; a delete or a re-index follows the create it
    # undoes: the document whose id came back from it.
    ("v1_api_documents_list", "200"): _to(_DOCUMENT_READS_AND_EDITS, "#/results/0/id"),
    ("v1_api_documents_retrieve", "200"): _to(_DOCUMENT_READS_AND_EDITS, "#/id")
    | _to(("v1_api_jobs_retrieve",), "#/latest_job/id"),
    ("v1_api_documents_tree_list", "200"): _FROM_TREE,
    ("v1_api_nodes_retrieve", "200"): _to((*_NODE_READS, *_NODE_EDITS), "#/id")
    | _to(("v1_api_documents_tree_list", "v1_api_documents_undo_create"), "#/document"),
    # Every place listed is one the move takes: the first of them, from the version they hold for.
    ("v1_api_nodes_move_places_retrieve", "200"): {
        "v1_api_nodes_move_create": Link(
            "$request.path.id",
            {
                "parent": _body("#/places/0/parent"),
                "position": _body("#/places/0/position"),
                "expected_version": _body("#/tree_version"),
            },
        )
    },
    **{(edit, "200"): _FROM_EDIT for edit in _EDITS},
    ("v1_api_collections_create", "201"): _to(
        ("v1_api_collections_retrieve", "v1_api_collections_partial_update", "v1_api_collections_destroy"),
        "#/id",
    ),
    # An invitation is accepted or declined once: the list offers the next.
    ("v1_api_invitations_list", "200"): _to(
        ("v1_api_invitations_create", "v1_api_invitations_destroy"), "#/0/id"
    ),
    ("v1_api_collections_list", "200"): _to(
        ("v1_api_collections_retrieve", "v1_api_collections_partial_update"), "#/results/0/id"
    ),
    ("v1_api_tokens_create", "201"): _to(("v1_api_tokens_destroy",), "#/id"),
}
# Every link to a document's tree asks for it nested.
for _targets in LINKS.values():
    if (tree := _targets.get("v1_api_documents_tree_list")) is not None:
        _targets["v1_api_documents_tree_list"] = Link(tree.id, tree.body, _NESTED)


def add_links(result: dict[str, Any], generator: Any, request: Any, public: bool) -> dict[str, Any]:
    """Each answer's ``links`` (``LINKS``): the operations its ids lead to, with where the target's
    path id and body fields come from. A link to an operation this schema lacks is left out."""
    operations = {
        operation["operationId"]: operation
        for path_item in result.get("paths", {}).values()
        for operation in path_item.values()
        if isinstance(operation, dict) and "operationId" in operation
    }
    for (source, status), targets in LINKS.items():
        response = operations.get(source, {}).get("responses", {}).get(status)
        if response is None:
            continue
        links = response.setdefault("links", {})
        for target, link in targets.items():
            if target not in operations:
                continue
            parameters = {"path.id": link.id} | {f"query.{name}": value for name, value in link.query.items()}
            declared: dict[str, Any] = {"operationId": target, "parameters": parameters}
            if link.body:
                declared["requestBody"] = dict(link.body)
            links[target.removeprefix("v1_api_")] = declared
    return result
