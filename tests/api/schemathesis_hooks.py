"""schemathesis hooks for tests/api/test_schema.py (loaded by the CLI from SCHEMATHESIS_HOOKS).

Each drops one kind of failure that is the API keeping a documented rule OpenAPI 3.0 cannot
state, matched narrowly (the operation, the status and the server's own words); any other
failure of the same check still fails the run."""

from __future__ import annotations

from typing import Any

import schemathesis
from schemathesis.core.failures import ServerError
from schemathesis.openapi.checks import RejectedPositiveData

# What documents.services.document_input says of an uploaded file that is not text (a PNG, a Latin-1
# file) or holds none: tests/api/test_documents.py and tests/reliability check these refusals.
NOT_TEXT = (
    "is not UTF-8 text",
    "The document is empty",
    "contains NUL characters",
    # ... or not a format it reads, told from the content (documents.ingestion.extraction.detect).
    "is not a format OpenFable reads",
    "is an old Office file",
    "is a damaged or truncated zip archive",
    "is a zip archive but not a Word",
)
# And of metadata that PostgreSQL's jsonb cannot hold (NUL in any key or string) or that is nested
# too deep, at any depth: OpenAPI 3.0 cannot constrain the keys of a free-form object.
METADATA = ("The metadata holds a NUL character", "The metadata is nested more than")
# The tree edits that a run sends real node and document ids (test_schema.py's schemathesis.toml).
# Which ids are siblings, which one is the root, where a split may fall: rules of the tree the
# request meets, which no schema can state. A refusal of one is a 400 in words (NodeEditError,
# checked one by one in tests/documents/test_tree_edits.py and tests/api/test_edits.py).
TREE_EDITS = {
    ("POST", "/v1/api/documents/{id}/group"),
    ("POST", "/v1/api/nodes/{id}/split"),
    ("POST", "/v1/api/nodes/{id}/merge"),
    ("POST", "/v1/api/nodes/{id}/dissolve"),
    ("POST", "/v1/api/nodes/{id}/move"),
    ("PATCH", "/v1/api/nodes/{id}"),
}


def _is(case: Any, method: str, path: str) -> bool:
    operation = getattr(case, "operation", None)
    return operation is not None and (operation.method.upper(), operation.path) == (method, path)


def _message(response: Any) -> str:
    try:
        return str(response.json()["error"]["message"])
    except Exception:
        return ""


@schemathesis.hook
def filter_failure(context: Any, failure: Any, case: Any, response: Any) -> bool:
    # The health check answers 503, as documented, when a part is down; here no worker runs, so
    # it always does. That is the answer working, not a server error (a 500 still fails).
    if isinstance(failure, ServerError) and failure.status_code == 503:
        return not _is(case, "GET", "/v1/api/health")
    if isinstance(failure, RejectedPositiveData) and response.status_code in (400, 415):
        message = _message(response)
        # A multipart `file` (format: binary) cannot be declared "UTF-8 text, not blank": the
        # generator sends a PNG or random bytes as a valid file; the server refuses it in words.
        if _is(case, "POST", "/v1/api/documents") and any(words in message for words in NOT_TEXT):
            return False
        # Free-form metadata holding a NUL character, or nested too deep, is refused in words.
        writes_metadata = _is(case, "POST", "/v1/api/documents") or _is(
            case, "PATCH", "/v1/api/documents/{id}"
        )
        if writes_metadata and any(words in message for words in METADATA):
            return False
        if response.status_code == 400 and message and any(_is(case, *edit) for edit in TREE_EDITS):
            return False
        # A query takes a token budget or top_k, not both (retrieval.query_input.check_limits).
        if _is(case, "POST", "/v1/api/query") and "Send token_budget or top_k, not both" in message:
            return False
    return True
