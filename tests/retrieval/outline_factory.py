"""Typed factories for hand-built document trees, as ``OutlineNode`` lists.

    tree = build(node("root", 0.5, node("intro", 0.4, leaf("a", 0.9)), leaf("b", 0.2)))
    tree["a"]  # the OutlineNode named "a"

Leaves get consecutive spans (4 characters per token), internal nodes span exactly their
children and count their children's tokens, as ``documents.ingestion.tree.check_tree`` demands.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from dataclasses import dataclass, field

from hypothesis import strategies as st

from documents.ingestion.tree import LEAF, ROOT, SECTION, SUBSECTION
from retrieval.outline import OutlineNode

CHARS_PER_TOKEN = 4


@dataclass(frozen=True)
class Spec:
    name: str
    sim: float
    children: tuple[Spec, ...] = ()
    tokens: int = 10  # leaves only; internal nodes sum their children


def leaf(name: str, sim: float, tokens: int = 10) -> Spec:
    return Spec(name, sim, (), tokens)


def node(name: str, sim: float, *children: Spec) -> Spec:
    return Spec(name, sim, children)


@dataclass
class Tree:
    nodes: list[OutlineNode] = field(default_factory=list)
    by_name: dict[str, OutlineNode] = field(default_factory=dict)

    def __getitem__(self, name: str) -> OutlineNode:
        return self.by_name[name]

    def __iter__(self) -> Iterator[OutlineNode]:
        return iter(self.nodes)


def build(root: Spec, *, document_id: int = 1, first_id: int = 1) -> Tree:
    """Turn a spec into the nodes of one document, ids counting up from ``first_id`` in pre-order."""
    tree = Tree()
    ids = itertools.count(first_id)
    _add(root, tree, ids, document_id=document_id, parent_id=None, depth=0, start=0)
    tree.nodes.sort(key=lambda outline: outline.order)
    return tree


def _add(
    spec: Spec,
    tree: Tree,
    ids: Iterator[int],
    *,
    document_id: int,
    parent_id: int | None,
    depth: int,
    start: int,
) -> OutlineNode:
    node_id = next(ids)
    order = len(tree.nodes)
    tree.nodes.append(_placeholder(order))  # keeps pre-order numbering while children are built
    end, tokens = start, 0
    for child_spec in spec.children:
        child = _add(
            child_spec, tree, ids, document_id=document_id, parent_id=node_id, depth=depth + 1, start=end
        )
        end, tokens = child.end_char, tokens + child.token_count
    if not spec.children:
        tokens = spec.tokens
        end = start + tokens * CHARS_PER_TOKEN
    outline = OutlineNode(
        id=node_id,
        document_id=document_id,
        parent_id=parent_id,
        depth=depth,
        kind=_kind(depth, is_leaf=not spec.children),
        order=order,
        start_char=start,
        end_char=end,
        token_count=tokens,
        similarity=spec.sim,
    )
    tree.nodes[order] = outline
    if spec.name:
        tree.by_name[spec.name] = outline
    return outline


def _placeholder(order: int) -> OutlineNode:
    return OutlineNode(-1, -1, None, 0, ROOT, order, 0, 0, 0, 0.0)


def _kind(depth: int, *, is_leaf: bool) -> str:
    if is_leaf and depth > 0:
        return LEAF
    if depth == 0:
        return ROOT
    return SECTION if depth == 1 else SUBSECTION


# Hypothesis: random trees with random similarities and token counts.
similarities = st.floats(min_value=-1.0, max_value=1.0, allow_nan=False)
_leaf_specs = st.builds(leaf, st.just(""), similarities, st.integers(min_value=0, max_value=60))
_specs = st.recursive(
    _leaf_specs,
    lambda children: st.builds(
        lambda sim, kids: Spec("", sim, tuple(kids)), similarities, st.lists(children, min_size=1, max_size=4)
    ),
    max_leaves=25,
)


@st.composite
def forests(draw: st.DrawFn, max_documents: int = 3) -> list[Tree]:
    """One to ``max_documents`` random trees, ids unique across them, documents numbered from 1."""
    trees: list[Tree] = []
    next_id = 1
    for document_id in range(1, draw(st.integers(min_value=1, max_value=max_documents)) + 1):
        spec = draw(_specs)
        root = spec if spec.children else Spec("", spec.sim, (spec,))  # a root is never a leaf
        tree = build(root, document_id=document_id, first_id=next_id)
        next_id += len(tree.nodes)
        trees.append(tree)
    return trees
