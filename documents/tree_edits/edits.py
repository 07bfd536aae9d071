"""The edits a person makes to a document's tree in memory: retitle, split, merge, move, group,
dissolve, exclude. Each refuses, with a ``NodeEditError`` that says what to do instead, an edit
that would break the tree (see the package docstring)."""

from __future__ import annotations

from documents.ingestion.sentences import split_sentences
from documents.ingestion.tree import LEAF, kind_for_depth
from documents.tree_edits.shape import TreeShape
from documents.tree_edits.state import MovePlace, NodeEditError, NodeState


class EditTree(TreeShape):
    """The nodes of one document, their children in order, and the edits a person can make."""

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
        """Move a node with its subtree to ``position`` among the other children of ``parent_id``
        (None: the place under that parent where the text stays in order, else last).

        Refused with the message of ``move_refusal``: the one rule that ``move_places`` (the
        places a person is offered) applies too, so the two cannot disagree.
        """
        if position is None:
            position = self.move_default_position(node_id, parent_id)
        problem = self.move_refusal(node_id, parent_id, position)
        if problem is not None:
            raise NodeEditError(problem)
        node = self.nodes[node_id]
        assert node.parent_id is not None
        self.children[node.parent_id].remove(node_id)
        self._insert(node, parent_id=parent_id, index=position)

    def move_places(self, node_id: int) -> list[MovePlace]:
        """Every place ``move`` takes this node to, in outline order, besides where it is now.

        The candidates are the places where its text stays in order (``_in_order_places``); each
        is kept only when ``move_refusal`` accepts it, the same check ``move`` makes.
        """
        node = self.require(node_id)
        if node.id == self.root_id:
            return []
        assert node.parent_id is not None
        here = (node.parent_id, self._index(node_id))
        return [
            place
            for place in self._in_order_places(node_id)
            if (place.parent_id, place.position) != here
            and self.move_refusal(node_id, place.parent_id, place.position) is None
        ]

    def move_default_position(self, node_id: int, parent_id: int) -> int:
        """Where under ``parent_id`` the node keeps the text in order, else the last place."""
        for place in self._in_order_places(node_id):
            if place.parent_id == parent_id:
                return place.position
        return len([key for key in self.children.get(parent_id, []) if key != node_id])

    def move_refusal(self, node_id: int, parent_id: int, position: object) -> str | None:
        """Why ``move`` refuses this move (what to do instead), or None when it takes it."""
        node = self.require(node_id)
        target = self.require(parent_id)
        if node.id == self.root_id:
            return "The root cannot move: it is the whole document."
        if target.kind == LEAF:
            return (
                f"{self.label(target)} is a leaf and cannot hold other nodes; choose a section or the root."
            )
        if target.id in self.subtree(node.id):
            return f"{self.label(node)} cannot move into itself or a node beneath it."
        old_parent = node.parent_id
        assert old_parent is not None
        others = len([key for key in self.children[target.id] if key != node.id])
        if isinstance(position, bool) or not isinstance(position, int) or not 0 <= position <= others:
            return (
                f"Position {position!r} is not a place among the {others} other children of "
                f"{self.label(target)}; give a whole number from 0 (first) to {others} (last)."
            )
        if old_parent != target.id and len(self.children[old_parent]) == 1:
            return (
                f"Moving {self.label(node)} would leave {self.label(self.nodes[old_parent])} empty; "
                "dissolve that section instead (its children move up into its parent)."
            )
        too_deep = self._depth_problem(node.id, shift=target.depth + 1 - node.depth, doing="Moving it there")
        if too_deep is not None:
            return too_deep
        in_order = {(place.parent_id, place.position) for place in self._in_order_places(node_id)}
        if (target.id, position) not in in_order:
            return (
                f"Moving {self.label(node)} there would put the text out of order: read top to bottom, the "
                "leaves must follow the document text. A node can only move where its text already "
                "sits: to the end of the section just before it, to the start of the section just "
                "after it, or up to its parent's level at its own place."
            )
        return None

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

    def _in_order_places(self, node_id: int) -> list[MovePlace]:
        """The places where this node's leaves would still follow the document text.

        The tree is valid before the move, so without the node its leaves read in text order
        with one gap: the node's own span. A place fits exactly when the last leaf before it,
        in pre-order without the node, ends where the node starts (the leaf after it then
        starts where the node ends). One walk of the tree finds them all.
        """
        node = self.nodes[node_id]
        places: list[MovePlace] = []
        last_end = 0
        stack: list[tuple[int, int]] = [(self.root_id, 0)]  # (node, its next child to visit)
        while stack:
            key, index = stack.pop()
            if self.nodes[key].kind == LEAF:
                last_end = self.nodes[key].end_char
                continue
            others = [child for child in self.children[key] if child != node_id]
            if last_end == node.start_char:
                places.append(
                    MovePlace(key, index, others[index - 1] if index else None, index == len(others))
                )
            if index < len(others):
                stack.append((key, index + 1))
                stack.append((others[index], 0))
        return places
