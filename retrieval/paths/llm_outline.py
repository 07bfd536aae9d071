"""The outlines LLMselect and LLMnavigate read: document trees rendered within a token cap.

``build_outline`` fills the cap level by level (every document's header, then every depth-1
node, ...), so each document is represented before any gets more detail, and an entry is shown
only with its parent, so the outline always reads as a tree (``retrieval.paths.llm``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from django.db.models import Q

from documents.models import Node
from openfable.token_counting import count_tokens, truncate_to_tokens

_MIN_LINE_TOKENS = 12  # no outline line is shorter than this: below it the outline is full


@dataclass(frozen=True, slots=True)
class OutlineEntry:
    id: int
    document_id: int
    parent_id: int | None
    depth: int
    order: int
    kind: str
    title: str
    text: str  # an internal node's summary, or a leaf's opening words
    token_count: int


@dataclass(frozen=True, slots=True)
class Outline:
    text: str
    document_ids: tuple[int, ...]  # documents shown, in the order given
    node_ids: frozenset[int]  # nodes shown
    omitted: int  # entries left out to stay within the cap
    tokens: int


def internal_outline_entries(*, document_ids: Sequence[int], max_depth: int) -> list[OutlineEntry]:
    """Internal nodes of depth <= ``max_depth`` of these documents (for LLMselect), one query."""
    rows = (
        Node.objects.filter(document_id__in=list(document_ids), depth__lte=max_depth, excluded=False)
        .filter(~Q(kind=Node.Kind.LEAF))
        .order_by("document_id", "order")
        .values_list(
            "id", "document_id", "parent_id", "depth", "order", "kind", "title", "summary", "token_count"
        )
    )
    return [OutlineEntry(*row) for row in rows]


def build_outline(
    *,
    documents: Sequence[tuple[int, str]],
    entries: Sequence[OutlineEntry],
    max_tokens: int,
    line_tokens: int,
    show_node_ids: bool,
) -> Outline:
    """Render documents (id, title, in rank order) and their entries within ``max_tokens``.

    Documents are added in the given order, then entries level by level across all documents;
    an entry is shown only with its parent, so the outline always reads as a tree.
    """
    rank = {document_id: index for index, (document_id, _) in enumerate(documents)}
    headers, used = _document_headers(documents, max_tokens=max_tokens, line_tokens=line_tokens)
    by_depth = sorted(
        (entry for entry in entries if entry.document_id in headers),
        key=lambda entry: (entry.depth, rank[entry.document_id], entry.order),
    )
    lines, used, omitted = _entry_lines(
        by_depth, used=used, max_tokens=max_tokens, line_tokens=line_tokens, show_node_ids=show_node_ids
    )
    omitted += sum(1 for entry in entries if entry.document_id not in headers)
    shown = [entry for entry in entries if entry.id in lines]
    shown.sort(key=lambda entry: (rank[entry.document_id], entry.order))
    return Outline(
        text=_outline_text(headers, lines, shown),
        document_ids=tuple(headers),
        node_ids=frozenset(lines),
        omitted=omitted,
        tokens=used,
    )


def _outline_text(headers: dict[int, str], lines: dict[int, str], shown: Sequence[OutlineEntry]) -> str:
    """Each document's header, then its shown entries (``shown`` is grouped by document, in the
    same order as ``headers``)."""
    out: list[str] = []
    position = 0
    for document_id in headers:
        out.append(headers[document_id])
        while position < len(shown) and shown[position].document_id == document_id:
            out.append(lines[shown[position].id])
            position += 1
    return "\n".join(out)


def _document_headers(
    documents: Sequence[tuple[int, str]], *, max_tokens: int, line_tokens: int
) -> tuple[dict[int, str], int]:
    """The documents' header lines, in the given order, as many as fit ``max_tokens``, and the
    tokens they take."""
    headers: dict[int, str] = {}
    used = 0
    for document_id, title in documents:
        line = f"<document id={document_id}> {_one_line(title, line_tokens) or '(untitled)'}"
        cost = count_tokens(line) + 1
        if used + cost > max_tokens:
            break
        headers[document_id] = line
        used += cost
    return headers, used


def _entry_lines(
    by_depth: Sequence[OutlineEntry], *, used: int, max_tokens: int, line_tokens: int, show_node_ids: bool
) -> tuple[dict[int, str], int, int]:
    """The entries' lines (level by level, each only with its parent) that fit in what ``used``
    leaves of ``max_tokens``; the tokens used then, and how many entries were left out."""
    lines: dict[int, str] = {}
    omitted = 0
    for index, entry in enumerate(by_depth):
        if max_tokens - used < _MIN_LINE_TOKENS:  # full: skip rendering (and tokenising) the rest
            omitted += len(by_depth) - index
            break
        if entry.parent_id is not None and entry.parent_id not in lines:
            omitted += 1
            continue
        line = _entry_line(entry, line_tokens, show_node_ids)
        cost = count_tokens(line) + 1
        if used + cost > max_tokens:
            omitted += 1
            continue
        lines[entry.id] = line
        used += cost
    return lines, used, omitted


def _one_line(text: str, max_tokens: int) -> str:
    flat = " ".join(text.split())
    cut = truncate_to_tokens(flat, max_tokens)
    return cut if cut == flat else cut + " …"


def _entry_line(entry: OutlineEntry, line_tokens: int, show_node_ids: bool) -> str:
    indent = "  " * (entry.depth + 1)
    label = f"[node {entry.id}] ({entry.kind}, {entry.token_count} tokens) " if show_node_ids else "- "
    title = _one_line(entry.title, 20)
    text = _one_line(entry.text, max(8, line_tokens - count_tokens(title) - 12))
    body = f"{title}: {text}" if title and text else title or text
    return f"{indent}{label}{body}"
