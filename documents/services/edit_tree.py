"""A document's tree in memory while a person edits it: plain data, no Django.

Every tree edit (``documents.services.edits`` and ``trees.node_update``) loads the document's
nodes into an ``EditTree``, changes its shape (split, merge, move, group, dissolve, exclude,
retitle), lets ``settle`` recompute everything that follows from the shape (depth, kind, ordinal,
pre-order, spans, toc paths, token counts, which embeddings went stale), checks the result with
``documents.ingestion.tree.check_tree`` and hands ``diff`` to the writer, so only the nodes that
changed are written. ``restore`` puts back the nodes an earlier edit touched (undo).

Each operation refuses, with a ``NodeEditError`` that says what to do instead, an edit that
would break the tree: the leaves in pre-order must stay exact, contiguous slices covering the
document text; depth at most 4; kinds follow depth (1: section, 2-3: subsection).

Exclusion is stored on every node it covers: a node is excluded when a person excluded it or a
node above it, so retrieval filters on one column. ``settle`` keeps that true (a node moved into
an excluded section is excluded too).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from documents.ingestion.pipeline import TOC_SEPARATOR, embedding_text
from documents.ingestion.sentences import split_sentences
from documents.ingestion.tree import (
    DEPTHS_BY_KIND,
    LEAF,
    MAX_DEPTH,
    SUBSECTION,
    TreeNode,
    TreeShapeError,
    check_tree,
    kind_for_depth,
)
from openfable.errors import ConflictError, NotFoundError, UserInputError

# The deepest an internal node may sit: subsections end at depth 3, only leaves reach MAX_DEPTH.
MAX_INTERNAL_DEPTH = max(DEPTHS_BY_KIND[SUBSECTION])


class NodeEditError(UserInputError):
    """A node edit that would break the tree or its text; the message says what to change."""


@dataclass
class NodeState:
    """A node's stored fields as the editor sees them (a leaf's text is ``text[start:end]``).

    ``id`` is the database id, or a negative key for a node this edit creates.
    """

    id: int
    parent_id: int | None
    kind: str
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
    excluded: bool
    embedding_stale: bool


# The fields of NodeState besides the id, in the order of its constructor: what a snapshot holds.
STATE_FIELDS: tuple[str, ...] = tuple(field.name for field in dataclasses.fields(NodeState))[1:]


@dataclass(frozen=True)
class TreeDiff:
    created: list[NodeState]  # parents before children
    deleted: list[NodeState]
    updated: list[tuple[NodeState, NodeState]]  # (before, after), only nodes with a change

    @property
    def empty(self) -> bool:
        return not (self.created or self.deleted or self.updated)


def changed_fields(before: NodeState, after: NodeState) -> list[str]:
    return [name for name in STATE_FIELDS if getattr(before, name) != getattr(after, name)]


class EditTree:
    """The nodes of one document, their children in order, and the state they were loaded in."""

    def __init__(self, nodes: Iterable[NodeState], *, text: str, count_tokens: Callable[[str], int]):
        self.text = text
        self._count_tokens = count_tokens
        self.before: dict[int, NodeState] = {node.id: node for node in nodes}
        self.nodes: dict[int, NodeState] = {
            key: dataclasses.replace(node) for key, node in self.before.items()
        }
        roots = [node.id for node in self.nodes.values() if node.parent_id is None]
        if len(roots) != 1:
            raise ConflictError("This document has no tree yet; wait until it is indexed, then edit it.")
        self.root_id = roots[0]
        self.children: dict[int, list[int]] = {}
        self._link()
        # New node -> the node whose stored vector it starts with until it is re-embedded.
        self.vector_from: dict[int, int] = {}
        self._next_key = -1

    # -- reading ---------------------------------------------------------------------------------

    def require(self, node_id: int) -> NodeState:
        node = self.nodes.get(node_id)
        if node is None:
            raise NotFoundError(
                f"Node {node_id} is not in this document's tree (an edit or a re-index replaced it). "
                "Reload the tree and choose again."
            )
        return node

    def label(self, node: NodeState) -> str:
        """How a message names a node: 'the section "Formation"', 'leaf 12 ("Volcanoes form…")'."""
        if node.kind == LEAF:
            words = " ".join(self.text[node.start_char : node.end_char].split()[:6])
            return f'leaf {node.id} ("{words}…")'
        return f'the {node.kind} "{node.title}"'

    def subtree(self, node_id: int) -> list[int]:
        """``node_id`` and everything beneath it, in pre-order."""
        found = [node_id]
        for child in self.children[node_id]:
            found.extend(self.subtree(child))
        return found

    def ancestors(self, node_id: int) -> list[int]:
        """The parent, its parent, ... up to the root."""
        found = []
        parent = self.nodes[node_id].parent_id
        while parent is not None:
            found.append(parent)
            parent = self.nodes[parent].parent_id
        return found

    def leaves_in_order(self) -> list[NodeState]:
        return [self.nodes[key] for key in self.subtree(self.root_id) if self.nodes[key].kind == LEAF]

    # -- edits -------------------------------------------------------------------------------------

    def set_texts(self, node_id: int, *, title: str, summary: str) -> None:
        node = self.require(node_id)
        node.title, node.summary, node.edited = title, summary, True

    def split(self, leaf_id: int, position: int) -> int:
        """Cut a leaf in two at ``position`` (a document offset strictly inside it); the new second half's key."""
        leaf = self._leaf(leaf_id, "split")
        self._check_inside(leaf, position)
        second = self._new_node(
            leaf, kind=LEAF, start_char=position, end_char=leaf.end_char, title="", summary=""
        )
        second.excluded = leaf.excluded
        leaf.end_char = position
        self._insert(second, parent_id=leaf.parent_id, index=self._index(leaf_id) + 1)
        self.vector_from[second.id] = leaf_id
        return second.id

    def sentence_cut(self, leaf_id: int, position: int) -> int:
        """The sentence boundary inside the leaf nearest ``position`` (the start of the sentence
        after it, so the space between stays with the first half); ties go to the earlier one."""
        leaf = self._leaf(leaf_id, "split")
        self._check_inside(leaf, position)
        sentences = split_sentences(self.text[leaf.start_char : leaf.end_char])
        cuts = [leaf.start_char + sentence.start for sentence in sentences[1:]]
        if not cuts:
            raise NodeEditError(
                f"{self.label(leaf)} is one sentence, so there is no sentence end to cut at; split it "
                f"without snapping (snap=False) to cut at exactly character {position}."
            )
        return min(cuts, key=lambda cut: (abs(cut - position), cut))

    def merge(self, leaf_id: int) -> int:
        """Join a leaf with the leaf after it in the same section; the id of the removed one."""
        leaf = self._leaf(leaf_id, "merged")
        assert leaf.parent_id is not None  # a leaf is never the root
        siblings = self.children[leaf.parent_id]
        index = siblings.index(leaf_id)
        if index + 1 >= len(siblings):
            raise NodeEditError(
                f"{self.label(leaf)} is the last child of {self.label(self.nodes[leaf.parent_id])}: "
                "there is no next leaf beside it to merge with. Merge the leaf before it instead, or move "
                "the next leaf into this section first."
            )
        following = self.nodes[siblings[index + 1]]
        if following.kind != LEAF:
            raise NodeEditError(
                f"The node after {self.label(leaf)} is {self.label(following)}, not a leaf; only two "
                "leaves side by side can merge. Dissolve that section first if its text belongs here."
            )
        if following.excluded != leaf.excluded:
            raise NodeEditError(
                "One of the two leaves is excluded from retrieval and the other is not; exclude or "
                "include both first, then merge them."
            )
        leaf.end_char = following.end_char
        self._remove(following.id)
        return following.id

    def move(self, node_id: int, parent_id: int, position: int | None) -> None:
        """Move a node with its subtree to ``position`` among the children of ``parent_id`` (None: last)."""
        node = self.require(node_id)
        target = self.require(parent_id)
        if node.id == self.root_id:
            raise NodeEditError("The root cannot move: it is the whole document.")
        if target.kind == LEAF:
            raise NodeEditError(
                f"{self.label(target)} is a leaf and cannot hold other nodes; choose a section or the root."
            )
        if target.id in self.subtree(node.id):
            raise NodeEditError(f"{self.label(node)} cannot move into itself or a node beneath it.")
        old_parent = node.parent_id
        assert old_parent is not None
        siblings = [key for key in self.children[target.id] if key != node.id]
        if position is None:
            position = len(siblings)
        if isinstance(position, bool) or not isinstance(position, int) or not 0 <= position <= len(siblings):
            raise NodeEditError(
                f"Position {position!r} is not a place among the {len(siblings)} other children of "
                f"{self.label(target)}; give a whole number from 0 (first) to {len(siblings)} (last)."
            )
        if old_parent != target.id and len(self.children[old_parent]) == 1:
            raise NodeEditError(
                f"Moving {self.label(node)} would leave {self.label(self.nodes[old_parent])} empty; "
                "dissolve that section instead (its children move up into its parent)."
            )
        self._check_depths(node.id, shift=target.depth + 1 - node.depth, doing="Moving it there")
        self.children[old_parent].remove(node.id)
        self._insert(node, parent_id=target.id, index=position)
        if not self._leaves_follow_text():
            raise NodeEditError(
                f"Moving {self.label(node)} there would put the text out of order: read top to bottom, the "
                "leaves must follow the document text. A node can only move where its text already "
                "sits: to the end of the section just before it, to the start of the section just "
                "after it, or up to its parent's level at its own place."
            )

    def group(self, first_id: int, last_id: int, *, title: str, summary: str) -> int:
        """Put the siblings from ``first_id`` to ``last_id`` into a new section; its key."""
        first, last = self.require(first_id), self.require(last_id)
        if first.id == self.root_id or last.id == self.root_id:
            raise NodeEditError("The root cannot be grouped: it is the whole document.")
        if first.parent_id != last.parent_id:
            raise NodeEditError(
                f"{self.label(first)} and {self.label(last)} are not siblings; the first and the last "
                "node of a group must be children of the same section."
            )
        assert first.parent_id is not None
        siblings = self.children[first.parent_id]
        start, end = siblings.index(first.id), siblings.index(last.id)
        if start > end:
            raise NodeEditError(
                f"{self.label(first)} comes after {self.label(last)}; give the first node of the group "
                "first and the last one last."
            )
        members = siblings[start : end + 1]
        for member in members:
            self._check_depths(member, shift=1, doing="Grouping them")
        parent = self.nodes[first.parent_id]
        section = self._new_node(
            first,
            kind=kind_for_depth(parent.depth + 1, is_leaf=False),
            start_char=first.start_char,
            end_char=last.end_char,
            title=title,
            summary=summary,
        )
        section.edited = True  # a person wrote its title
        section.excluded = all(self.nodes[member].excluded for member in members)
        siblings[start : end + 1] = [section.id]
        self.nodes[section.id] = section
        self.children[section.id] = members
        for member in members:
            self.nodes[member].parent_id = section.id
        return section.id

    def dissolve(self, node_id: int) -> None:
        """Remove a section; its children take its place in its parent."""
        node = self.require(node_id)
        if node.id == self.root_id:
            raise NodeEditError("The root cannot be dissolved: it is the whole document.")
        if node.kind == LEAF:
            raise NodeEditError(
                f"{self.label(node)} is a leaf: it has no children to move up. Merge it with the next "
                "leaf instead."
            )
        assert node.parent_id is not None
        siblings = self.children[node.parent_id]
        index = siblings.index(node.id)
        moved = self.children.pop(node.id)
        siblings[index : index + 1] = moved
        for child in moved:
            self.nodes[child].parent_id = node.parent_id
        del self.nodes[node.id]

    def set_excluded(self, node_id: int, excluded: bool) -> None:
        """Exclude a node and its subtree from retrieval, or include them again."""
        node = self.require(node_id)
        if not excluded:
            for ancestor in self.ancestors(node.id):
                if self.nodes[ancestor].excluded:
                    holder = self.label(self.nodes[ancestor])
                    raise NodeEditError(
                        f"{self.label(node)} sits inside {holder}, which is excluded from retrieval; "
                        f"include {holder} instead (that includes everything beneath it)."
                    )
        for key in self.subtree(node.id):
            self.nodes[key].excluded = excluded

    # -- after an edit -----------------------------------------------------------------------------

    def settle(self) -> None:
        """Recompute what follows from the shape: depth, kind, ordinal, order, spans, exclusion, toc
        paths, token counts, and ``embedding_stale`` where the embedded text changed.

        A stored value is kept where nothing it depends on changed, so an edit touches only
        the nodes it changes.
        """
        self._settle_spans(self.root_id)
        order = 0
        stack: list[tuple[int, int, int]] = [(self.root_id, 0, 0)]  # (key, depth, ordinal)
        while stack:
            key, depth, ordinal = stack.pop()
            node = self.nodes[key]
            parent = self.nodes[node.parent_id] if node.parent_id is not None else None
            node.depth, node.ordinal, node.order = depth, ordinal, order
            order += 1
            if node.kind != LEAF:
                node.kind = kind_for_depth(depth, is_leaf=False)
            if parent is not None:
                node.excluded = node.excluded or parent.excluded
                node.toc_path = self._toc_path(node, parent)
            was = self.before.get(key)
            span_changed = was is None or (was.start_char, was.end_char) != (node.start_char, node.end_char)
            if span_changed:
                node.token_count = self._count_tokens(self.text[node.start_char : node.end_char])
            if was is None or self.embedded_text(node) != self.embedded_text(was):
                node.embedding_stale = True
            stack.extend(
                (child, depth + 1, index) for index, child in reversed(list(enumerate(self.children[key])))
            )

    def validate(self) -> None:
        """Raise ``NodeEditError`` unless the tree is well formed over the text (``check_tree``)."""
        try:
            check_tree(self._tree_node(self.root_id), self.text)
        except TreeShapeError as error:
            raise NodeEditError(f"The edit would break the tree ({error}); nothing was changed.") from None

    def diff(self) -> TreeDiff:
        created = sorted(
            (node for key, node in self.nodes.items() if key not in self.before), key=lambda n: n.depth
        )
        deleted = [node for key, node in self.before.items() if key not in self.nodes]
        updated = [
            (self.before[key], node)
            for key, node in self.nodes.items()
            if key in self.before and node != self.before[key]
        ]
        return TreeDiff(created=created, deleted=deleted, updated=updated)

    def restore(self, *, before: list[Mapping[str, Any]], after: list[Mapping[str, Any]]) -> None:
        """Undo an edit recorded as ``before`` / ``after`` rows (``id`` plus the fields it changed;
        whole rows for the nodes it created or deleted): the touched nodes get their old values,
        the nodes it created go, the nodes it deleted come back with their ids.

        ``ConflictError`` when the tree is no longer as that edit left it (then undo cannot be exact).
        """
        after_ids = {row["id"] for row in after}
        before_ids = {row["id"] for row in before}
        for row in after:
            node = self.nodes.get(row["id"])
            differs = node is None or any(
                getattr(node, name) != value
                for name, value in row.items()
                if name in STATE_FIELDS and name != "embedding_stale"  # re-embedding moves it freely
            )
            if differs:
                raise ConflictError(
                    "The tree changed since this edit in a way undo cannot follow; reload the tree and "
                    "make the change by hand."
                )
        for key in after_ids - before_ids:
            del self.nodes[key]
        for row in before:
            values = {name: value for name, value in row.items() if name in STATE_FIELDS}
            if row["id"] in self.nodes:
                for name, value in values.items():
                    setattr(self.nodes[row["id"]], name, value)
            else:
                self.nodes[row["id"]] = NodeState(id=row["id"], **values)
        self._link()
        self.validate()
        if not self._numbered_by_shape():
            raise ConflictError(
                "The restored tree does not number its nodes by its shape; reload the tree and make the "
                "change by hand."
            )

    @staticmethod
    def embedded_text_of(node: NodeState, text: str) -> str:
        return embedding_text(
            kind=node.kind,
            toc_path=node.toc_path,
            summary=node.summary,
            content=text[node.start_char : node.end_char] if node.kind == LEAF else "",
        )

    def embedded_text(self, node: NodeState) -> str:
        """What the node is embedded from (``documents.ingestion.pipeline.embedding_text``)."""
        return self.embedded_text_of(node, self.text)

    # -- helpers -----------------------------------------------------------------------------------

    def _link(self) -> None:
        self.children = {key: [] for key in self.nodes}
        for node in sorted(self.nodes.values(), key=lambda n: (n.ordinal, n.order)):
            if node.parent_id is not None:
                self.children[node.parent_id].append(node.id)

    def _leaf(self, node_id: int, action: str) -> NodeState:
        node = self.require(node_id)
        if node.kind != LEAF:
            raise NodeEditError(
                f"Only leaves can be {action}, and {self.label(node)} is not one; choose one of its leaves."
            )
        return node

    def _check_inside(self, leaf: NodeState, position: object) -> None:
        if isinstance(position, bool) or not isinstance(position, int):
            raise NodeEditError(f"A split position is a character offset (a whole number), not {position!r}.")
        if not leaf.start_char < position < leaf.end_char:
            raise NodeEditError(
                f"Position {position} is not inside {self.label(leaf)}, which spans characters "
                f"{leaf.start_char}–{leaf.end_char}; choose an offset strictly between them."
            )

    def _index(self, node_id: int) -> int:
        parent = self.nodes[node_id].parent_id
        assert parent is not None
        return self.children[parent].index(node_id)

    def _new_node(self, like: NodeState, **fields: Any) -> NodeState:
        key, self._next_key = self._next_key, self._next_key - 1
        node = dataclasses.replace(
            like, id=key, edited=False, excluded=False, embedding_stale=True, token_count=0, **fields
        )
        self.nodes[key] = node
        self.children[key] = []
        return node

    def _insert(self, node: NodeState, *, parent_id: int | None, index: int) -> None:
        assert parent_id is not None
        node.parent_id = parent_id
        self.nodes[node.id] = node
        self.children.setdefault(node.id, [])
        self.children[parent_id].insert(index, node.id)

    def _remove(self, node_id: int) -> None:
        parent = self.nodes[node_id].parent_id
        assert parent is not None
        self.children[parent].remove(node_id)
        for key in self.subtree(node_id):
            del self.nodes[key]
            self.children.pop(key, None)

    def _check_depths(self, node_id: int, *, shift: int, doing: str) -> None:
        """Refuse when shifting this subtree by ``shift`` levels puts a node deeper than allowed."""
        for key in self.subtree(node_id):
            node = self.nodes[key]
            depth = node.depth + shift
            limit = MAX_DEPTH if node.kind == LEAF else MAX_INTERNAL_DEPTH
            if depth > limit:
                what = "a leaf" if node.kind == LEAF else "a section"
                raise NodeEditError(
                    f"{doing} would put {what} ({self.label(node)}) at depth {depth}; a tree holds at "
                    f"most {MAX_DEPTH} levels below the root, sections at most {MAX_INTERNAL_DEPTH}. "
                    "Choose a place higher up, or dissolve a section inside it first."
                )

    def _leaves_follow_text(self) -> bool:
        cursor = 0
        for node in self._leaves_by_links():
            if node.start_char != cursor:
                return False
            cursor = node.end_char
        return cursor == len(self.text)

    def _leaves_by_links(self) -> list[NodeState]:
        found: list[NodeState] = []
        stack = [self.root_id]
        while stack:
            key = stack.pop()
            if self.nodes[key].kind == LEAF:
                found.append(self.nodes[key])
            stack.extend(reversed(self.children[key]))
        return found

    def _numbered_by_shape(self) -> bool:
        """Whether every node's depth, ordinal and order are those of its place in the tree."""
        order = 0
        stack: list[tuple[int, int, int]] = [(self.root_id, 0, 0)]
        while stack:
            key, depth, ordinal = stack.pop()
            node = self.nodes[key]
            if (node.depth, node.ordinal, node.order) != (depth, ordinal, order):
                return False
            order += 1
            stack.extend(
                (child, depth + 1, index) for index, child in reversed(list(enumerate(self.children[key])))
            )
        return order == len(self.nodes)

    def _settle_spans(self, key: int) -> None:
        children = self.children[key]
        for child in children:
            self._settle_spans(child)
        node = self.nodes[key]
        if node.kind != LEAF and children:
            node.start_char = self.nodes[children[0]].start_char
            node.end_char = self.nodes[children[-1]].end_char

    def _toc_path(self, node: NodeState, parent: NodeState) -> str:
        was = self.before.get(node.id)
        old_parent = self.before.get(parent.id)
        unchanged = (
            was is not None
            and old_parent is not None
            and was.parent_id == parent.id
            and was.title == node.title
            and (was.kind == LEAF) == (node.kind == LEAF)
            and old_parent.toc_path == parent.toc_path
        )
        if unchanged:
            assert was is not None
            return was.toc_path  # as stored: an edit elsewhere never rewrites it
        return parent.toc_path if node.kind == LEAF else f"{parent.toc_path}{TOC_SEPARATOR}{node.title}"

    def _tree_node(self, key: int) -> TreeNode:
        node = self.nodes[key]
        return TreeNode(
            kind=node.kind,
            start_char=node.start_char,
            end_char=node.end_char,
            title=node.title,
            summary=node.summary,
            children=[self._tree_node(child) for child in self.children[key]],
        )
