"""The error answers every operation can give, added to the OpenAPI schema in one place (a
drf-spectacular postprocessing hook), so the schema names every status the server returns."""

from __future__ import annotations

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
_NODE_OPERATIONS = (
    "v1_api_nodes_retrieve",
    "v1_api_nodes_partial_update",
    "v1_api_nodes_move_places_retrieve",
    "v1_api_nodes_dissolve_create",
    "v1_api_nodes_merge_create",
    "v1_api_nodes_move_create",
    "v1_api_nodes_split_create",
)
# In a nested tree (GET /documents/{id}/tree): the root's first section, and that section's
# first child (a leaf or a subsection): the nodes each kind of edit takes.
_SECTION, _LEAF = "#/0/children/0/id", "#/0/children/0/children/0/id"
_TREE_NODES = {
    "v1_api_nodes_retrieve": _LEAF,
    "v1_api_nodes_partial_update": _SECTION,
    "v1_api_nodes_move_places_retrieve": _SECTION,
    "v1_api_nodes_dissolve_create": _SECTION,
    "v1_api_nodes_merge_create": _LEAF,
    "v1_api_nodes_move_create": _LEAF,
    "v1_api_nodes_split_create": _LEAF,
}


def _to(operations: tuple[str, ...] | dict[str, str], pointer: str | None = None) -> dict[str, str]:
    """Operation id -> the JSON pointer, into the answer, of the id it takes."""
    if isinstance(operations, dict):
        return dict(operations)
    return dict.fromkeys(operations, pointer or "")


# (operation id, status) -> {operation id it leads to: pointer to the id in the answer's body}.
LINKS: dict[tuple[str, str], dict[str, str]] = {
    **{
        ("v1_api_documents_create", status): _to(_DOCUMENT_OPERATIONS, "#/document_id")
        | {"v1_api_jobs_retrieve": "#/job/id"}
        for status in ("200", "201", "202")
    },
    ("v1_api_documents_list", "200"): _to(_DOCUMENT_OPERATIONS, "#/results/0/id"),
    ("v1_api_documents_retrieve", "200"): _to(_DOCUMENT_OPERATIONS, "#/id")
    | {"v1_api_jobs_retrieve": "#/latest_job/id"},
    ("v1_api_documents_tree_list", "200"): _to(_TREE_NODES),
    ("v1_api_nodes_retrieve", "200"): _to(_NODE_OPERATIONS, "#/id")
    | _to(("v1_api_documents_tree_list", "v1_api_documents_undo_create"), "#/document"),
    **{
        (edit, "200"): _to(_NODE_OPERATIONS, "#/node/id")
        | _to(("v1_api_documents_tree_list",), "#/node/document")
        for edit in (*_NODE_OPERATIONS[3:], "v1_api_documents_group_create", "v1_api_documents_undo_create")
    },
    ("v1_api_collections_create", "201"): _to(
        ("v1_api_collections_retrieve", "v1_api_collections_partial_update", "v1_api_collections_destroy"),
        "#/id",
    ),
    ("v1_api_tokens_create", "201"): _to(("v1_api_tokens_destroy",), "#/id"),
}


def add_links(result: dict[str, Any], generator: Any, request: Any, public: bool) -> dict[str, Any]:
    """Each answer's ``links`` (``LINKS``): the operations its ids lead to, with the id's place in
    the body. A link to an operation this schema lacks is left out."""
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
        for target, pointer in targets.items():
            if target in operations:
                name = target.removeprefix("v1_api_")
                links[name] = {"operationId": target, "parameters": {"id": f"$response.body{pointer}"}}
    return result
