"""Document trees for tests, saved exactly as ingestion saves them.

Tests that need a tree in the database build a plain ``TreeNode`` and hand it to ``tree_save``,
which goes through the same pure ``flatten_tree`` and the same ``document_tree_replace`` as
``documents.services.jobs.document_index``. So the rows a test reads (order, ordinal, toc path,
leaf text, token counts, lexical index, the document's status, the corpus version) are the
ones ingestion writes, and a change to the write path shows up in these tests instead of
being hidden behind a hand-made copy of its inserts.

``Sec`` / ``sec`` describe a small tree by its titles, summaries and leaf texts; ``sec_text``
is the document content those leaves make and ``sec_tree`` the ``TreeNode`` over it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from django.conf import settings

from documents.ingestion.pipeline import flatten_tree
from documents.ingestion.tree import LEAF, TreeNode, check_tree, kind_for_depth
from documents.models import Document, Node
from documents.services.trees import document_tree_replace
from openfable.tokens import count_tokens
from tests.fakes.llm.server import hash_vector

Embed = Callable[[list[str]], np.ndarray]

TEST_BUILDER: str = Document.Builder.STRUCTURAL
TEST_EMBEDDING_MODEL = "test-hash-vectors"
PARAGRAPH_SEPARATOR = "\n\n"


def hash_embed(texts: list[str]) -> np.ndarray:
    """Deterministic unit pseudo-embeddings (same text, same vector): for tests that need none."""
    dimensions: int = settings.EMBEDDING_DIMENSIONS
    return np.array([hash_vector(text, dimensions) for text in texts], dtype=np.float32)


def tree_save(
    document: Document,
    root: TreeNode,
    *,
    vectors: np.ndarray | None = None,
    embed: Embed | None = None,
    embedding_model: str = TEST_EMBEDDING_MODEL,
) -> list[Node]:
    """Save ``root`` as the tree of ``document`` (over its ``content``) through the real write path.

    ``vectors`` give one embedding per node in pre-order; without them ``embed`` (default
    ``hash_embed``) embeds each node's embedding text, as ingestion does. Returns the saved
    nodes in pre-order; ``document`` is refreshed (now indexed).
    """
    if vectors is not None and embed is not None:
        raise TypeError("give vectors or embed, not both")
    check_tree(root, document.content)
    rows = flatten_tree(root, text=document.content, document_title=document.title, count_tokens=count_tokens)
    if vectors is None:
        vectors = (embed or hash_embed)([row.embed_text for row in rows])
    if len(vectors) != len(rows):
        raise ValueError(f"{len(vectors)} vectors for {len(rows)} nodes (one per node, in pre-order)")
    nodes = document_tree_replace(
        document=document,
        rows=rows,
        vectors=np.asarray(vectors),
        builder=TEST_BUILDER,
        embedding_model=embedding_model,
    )
    document.refresh_from_db()
    return nodes


# -- trees described by their titles, summaries and leaf texts ------------------------------------


@dataclass(frozen=True)
class Sec:
    """The root or a section: its title, summary and children (sections, or leaf texts)."""

    title: str
    summary: str
    children: tuple[Sec | str, ...]


def sec(title: str, summary: str, *children: Sec | str) -> Sec:
    return Sec(title, summary, children)


def sec_leaves(spec: Sec) -> list[str]:
    """The leaf texts of ``spec`` in pre-order."""
    return [
        text for child in spec.children for text in (sec_leaves(child) if isinstance(child, Sec) else [child])
    ]


def sec_text(spec: Sec, *, separator: str = PARAGRAPH_SEPARATOR) -> str:
    """The document content of ``spec``: its leaf texts joined by ``separator``."""
    return separator.join(sec_leaves(spec))


def sec_tree(spec: Sec, *, separator: str = PARAGRAPH_SEPARATOR) -> TreeNode:
    """The ``TreeNode`` of ``spec`` over ``sec_text(spec, separator=separator)``.

    Each leaf spans its text and the separator after it (the last leaf none), so the leaves
    partition the content; kinds follow the depth (root, section, subsection).
    """
    remaining = len(sec_leaves(spec))
    cursor = 0

    def build(node: Sec | str, depth: int) -> TreeNode:
        nonlocal cursor, remaining
        start = cursor
        if isinstance(node, str):
            remaining -= 1
            cursor += len(node) + (len(separator) if remaining else 0)
            return TreeNode(kind=LEAF, start_char=start, end_char=cursor)
        children = [build(child, depth + 1) for child in node.children]
        return TreeNode(
            kind=kind_for_depth(depth, is_leaf=False),
            start_char=start,
            end_char=cursor,
            title=node.title,
            summary=node.summary,
            children=children,
        )

    return build(spec, 0)
