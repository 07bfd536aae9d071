"""A section's summary written again by the configured LLM, on a person's request.

``node_summary_regenerate`` asks the model for a new summary of one internal node and saves it
through ``node_update``, like a person's edit: recorded in the history (undo puts the old
one back), marked edited (it survives a re-index), re-embedded in the background, versions moved.

What the model reads is bounded by the node, never the corpus: the node's title and toc path,
and the text beneath it when that fits ``SUMMARY_SOURCE_MAX_TOKENS`` (and half the model's
context window); otherwise an outline of its children -- each subsection's title and summary,
each passage's opening words -- shortened to the same bound. All of it is document text, so the
prompt fences it as untrusted data (``documents.ingestion.prompts.summary_messages``).

No database transaction is held while the model answers; ``expected_version`` is checked before
the call (so a stale page does not pay for one) and again, under the lock, by ``node_update``.
"""

from __future__ import annotations

from typing import Any

from django.db.models.functions import Left, Substr

from documents.ingestion.prompts import SUMMARY_JSON_SCHEMA, summary_messages, summary_outline
from documents.ingestion.tree import LEAF
from documents.models import Document, Node
from documents.services.nodes.texts import NodeEditResult, node_update
from documents.tree_edits import NodeEditError
from openfable.errors import ConflictError, NotFoundError, ServiceUnavailableError, UserInputError
from openfable.llm import (
    LLMClient,
    LLMError,
    LLMOutputError,
    LLMRequestError,
    LLMUnavailableError,
    llm_configured,
)
from openfable.llm.fallbacks import Fallback, count_fallback
from openfable.llm.model_text import has_template_tokens, strip_template_tokens

SUMMARY_PROMPT_WORDS = 80  # what the prompt asks for: 1-3 sentences
SUMMARY_MAX_WORDS = 150  # what is accepted: room for a wordy model, refusal of a runaway one
SUMMARY_SOURCE_MAX_TOKENS = 3000  # text beneath a node sent whole up to this; else its children's outline
SUMMARY_ANSWER_MAX_TOKENS = 600  # the completion: JSON around SUMMARY_MAX_WORDS, with room to spare
_CHARS_PER_TOKEN = 4  # to turn the token bound into a character bound for the outline
_CHILD_EXCERPT_CHARS = 300  # characters of a child passage read for the outline

NO_LLM_MESSAGE = "No LLM is configured (OPENFABLE_LLM_MODEL); write the summary by hand."


class LLMNotConfiguredError(ConflictError):
    """Regenerating needs an LLM and none is configured."""

    code = "llm_not_configured"


class SummaryModelError(ServiceUnavailableError):
    """The model failed or answered with no usable summary; nothing was changed."""

    code = "llm_failed"


def node_summary_regenerate(
    *, node: Node, user: Any = None, expected_version: int | None = None
) -> NodeEditResult:
    """Ask the configured LLM for a new summary of ``node`` (a section or the root) and save it
    through ``node_update`` (see the module docstring).

    Raises ``LLMNotConfiguredError`` without an LLM, ``SummaryModelError`` when the model fails
    or its answer is unusable (nothing changes), ``NodeEditError`` for a leaf, ``ConflictError``
    when ``expected_version`` is not the document's tree version.
    """
    if not llm_configured():
        raise LLMNotConfiguredError(NO_LLM_MESSAGE)
    current = (
        Node.objects.filter(pk=node.pk)
        .only("pk", "document_id", "kind", "title", "toc_path", "start_char", "end_char", "token_count")
        .first()
    )
    if current is None:
        raise NotFoundError(f"There is no node {node.pk!r}; it may have been deleted.")
    if current.kind == LEAF:
        raise NodeEditError(
            "A passage has no summary of its own (it is retrieved by its text); regenerate the summary "
            "of the section it belongs to instead."
        )
    _check_version(current.document_id, expected_version)

    # No response cache: asking again must give a fresh answer, not the one just replaced.
    client = LLMClient(LLMClient.from_settings().config)
    max_tokens = min(SUMMARY_SOURCE_MAX_TOKENS, client.context_window() // 2)
    messages = summary_messages(
        title=current.title,
        toc_path=current.toc_path,
        max_words=SUMMARY_PROMPT_WORDS,
        **_source(current, max_tokens=max_tokens),
    )
    try:
        result = client.complete_json(
            messages,
            schema=SUMMARY_JSON_SCHEMA,
            schema_name="node_summary",
            purpose="node summary",
            max_tokens=SUMMARY_ANSWER_MAX_TOKENS,
        )
    except LLMError as error:
        raise SummaryModelError(
            f"The model failed to write a summary ({_why(error)}); nothing was changed. Try again later, "
            "or write the summary by hand.",
            details={"model_error": str(error)},
        ) from error
    summary = summary_from_answer(result.data)
    return node_update(node=current, summary=summary, user=user, expected_version=expected_version)


def summary_from_answer(data: Any) -> str:
    """The summary in a model's parsed answer, whitespace tidied; ``SummaryModelError`` says what was wrong."""
    summary = data.get("summary") if isinstance(data, dict) else None
    if not isinstance(summary, str):
        raise _unusable('it held no "summary" text')
    if has_template_tokens(summary):  # a small model ran on into its chat template: cut it there
        summary = strip_template_tokens(summary)
        count_fallback(Fallback.TEMPLATE_TOKENS)
    text = " ".join(summary.replace("\x00", "").split())
    if not text:
        raise _unusable("the summary was empty")
    if (words := len(text.split())) > SUMMARY_MAX_WORDS:
        raise _unusable(f"the summary ran to {words} words; a summary holds at most {SUMMARY_MAX_WORDS}")
    return text


def _unusable(problem: str) -> SummaryModelError:
    return SummaryModelError(
        f"The model's answer was not a usable summary ({problem}); nothing was changed. Try again, "
        "or write the summary by hand.",
        code="llm_answer_unusable",
    )


def _source(node: Node, *, max_tokens: int) -> dict[str, Any]:
    """The text beneath ``node`` when it fits ``max_tokens``, else the outline of its children."""
    if node.token_count <= max_tokens:
        length = node.end_char - node.start_char
        text = (
            Document.objects.filter(pk=node.document_id)
            .annotate(span=Substr("content", node.start_char + 1, length))
            .values_list("span", flat=True)
            .get()
        )
        return {"source": text.strip(), "outline": False}
    children = (
        Node.objects.filter(parent_id=node.pk)
        .order_by("ordinal")
        .annotate(opening=Left("content", _CHILD_EXCERPT_CHARS))
        .values_list("kind", "title", "summary", "opening")
    )
    parts = [
        ("", opening) if kind == LEAF else (title or f"(untitled {kind})", summary)
        for kind, title, summary, opening in children
    ]
    return {"source": summary_outline(parts, max_chars=max_tokens * _CHARS_PER_TOKEN), "outline": True}


def _check_version(document_id: int, expected_version: object) -> None:
    if expected_version is None:
        return
    if isinstance(expected_version, bool) or not isinstance(expected_version, int):
        raise UserInputError(
            f"The expected tree version must be a whole number, got {expected_version!r}.",
            code="invalid_version",
        )
    version = Document.objects.filter(pk=document_id).values_list("tree_version", flat=True).first()
    if version is not None and version != expected_version:
        raise ConflictError(
            f"Someone else changed this document's tree since you loaded it (it is at version {version}, "
            f"you asked at version {expected_version}). Reload the tree and try again.",
            details={"tree_version": version, "expected_version": expected_version},
        )


def _why(error: LLMError) -> str:
    if isinstance(error, LLMUnavailableError):
        return f"no usable answer after {error.attempts} attempts: it is unreachable or overloaded"
    if isinstance(error, LLMRequestError):
        code = f" (HTTP {error.status_code})" if error.status_code else ""
        return f"it rejected the request{code}"
    if isinstance(error, LLMOutputError):
        return "its answer was not the JSON asked for"
    return "the call failed"
