from __future__ import annotations

import json
from itertools import pairwise
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from documents.ingestion.prompts import SUMMARY_JSON_SCHEMA
from documents.ingestion.tree import LEAF, ROOT, SECTION, SUBSECTION, TreeNode, check_tree
from documents.ingestion.tree_schema import (
    MARKER_MAX_CHARS,
    MARKERS_JSON_SCHEMA,
    ROOT_JSON_SCHEMA,
    SUMMARY_MAX_CHARS,
    TREE_JSON_SCHEMA,
    MarkerAnswerError,
    TreeValidationError,
    apply_depth_cap,
    merge_part_trees,
    parse_marker_answer,
    parse_root_answer,
    tree_from_json,
    tree_to_json,
)

Span = tuple[int, int]


def _document(count: int) -> tuple[str, list[Span]]:
    pieces = [f"Chunk number {index} text. " for index in range(count)]
    spans, position = [], 0
    for piece in pieces:
        spans.append((position, position + len(piece)))
        position += len(piece)
    return "".join(pieces), spans


def _section(title: str, chunks: Any, sections: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    return {"title": title, "summary": f"About {title}.", "chunks": chunks, "sections": sections or []}


def _tree(*sections: Any) -> dict[str, Any]:
    return {"title": "Doc", "summary": "The whole document.", "sections": list(sections)}


def _error(data: object, count: int = 6, **kwargs: Any) -> str:
    text, spans = _document(count)
    with pytest.raises(TreeValidationError) as caught:
        tree_from_json(data, text=text, chunks=spans, **kwargs)
    return str(caught.value)


def _leaf_spans(root: TreeNode) -> list[Span]:
    return [(leaf.start_char, leaf.end_char) for leaf in root.leaves()]


def _max_depth(root: TreeNode) -> int:
    return max(depth for _, depth in root.walk())


# --- building valid trees ---------------------------------------------------------------------


def test_valid_tree_builds_with_kinds_spans_and_titles() -> None:
    text, spans = _document(6)
    data = _tree(
        _section("Intro", [0, 1]), _section("Body", [2], [_section("Part A", [3, 4]), _section("B", [5])])
    )
    root = tree_from_json(data, text=text, chunks=spans)
    check_tree(root, text)
    assert root.kind == ROOT and root.title == "Doc" and root.summary == "The whole document."
    intro, body = root.children
    assert (intro.kind, intro.start_char, intro.end_char) == (SECTION, 0, spans[1][1])
    assert [child.kind for child in body.children] == [LEAF, SUBSECTION, SUBSECTION]
    assert body.children[1].title == "Part A"
    assert _leaf_spans(root) == spans


def test_json_text_and_code_fenced_json_are_accepted() -> None:
    text, spans = _document(2)
    data = _tree(_section("All", [0, 1]))
    assert _leaf_spans(tree_from_json(json.dumps(data), text=text, chunks=spans)) == spans
    fenced = "```json\n" + json.dumps(data, indent=2) + "\n```"
    assert _leaf_spans(tree_from_json(fenced, text=text, chunks=spans)) == spans


def test_titles_and_summaries_are_stripped() -> None:
    text, spans = _document(1)
    data = {
        "title": " Doc ",
        "summary": " S. ",
        "sections": [{"title": "\tA\n", "summary": " s ", "chunks": [0]}],
    }
    root = tree_from_json(data, text=text, chunks=spans)
    assert (root.title, root.summary, root.children[0].title, root.children[0].summary) == (
        "Doc",
        "S.",
        "A",
        "s",
    )


def test_missing_chunks_or_sections_keys_default_to_empty() -> None:
    text, spans = _document(2)
    data = {"title": "D", "summary": "S", "sections": [{"title": "A", "summary": "a", "chunks": [0, 1]}]}
    assert _leaf_spans(tree_from_json(data, text=text, chunks=spans)) == spans


def test_part_of_a_document_builds_without_covering_whole_text() -> None:
    text, spans = _document(5)
    root = tree_from_json(_tree(_section("Middle", [0, 1])), text=text, chunks=spans[2:4])
    assert _leaf_spans(root) == spans[2:4]
    assert (root.start_char, root.end_char) == (spans[2][0], spans[3][1])


# --- validation branches ----------------------------------------------------------------------


def test_malformed_json_names_the_parser_position() -> None:
    message = _error('{"title": "Doc", "summary": ')
    assert message.startswith("invalid tree: the answer is not valid JSON:")
    assert "line 1 column 29" in message


def test_root_must_be_an_object() -> None:
    assert _error([1, 2]) == "invalid tree: root must be an object with title, summary, sections, got a list"


def test_missing_title_and_empty_summary_are_both_reported() -> None:
    message = _error({"summary": " ", "sections": [_section("A", [0, 1, 2, 3, 4, 5])]})
    assert "(2 problems)" in message
    assert '1) root: missing "title"' in message
    assert '2) root: "summary" is empty' in message


def test_title_of_wrong_type() -> None:
    data = _tree(_section("A", [0, 1, 2]), {**_section("B", [3, 4, 5]), "title": 7})
    assert _error(data) == 'invalid tree: root.sections[1]: "title" must be a string, got a number'


def test_empty_summary_names_the_nested_path_and_title() -> None:
    inner = {**_section("Fees", [1, 2]), "summary": ""}
    data = _tree(_section("A", [0], [inner]), _section("B", [3, 4, 5]))
    assert _error(data) == 'invalid tree: root.sections[0].sections[0] ("Fees"): "summary" is empty'


def test_unexpected_keys_are_named_with_the_allowed_ones() -> None:
    data = _tree({**_section("A", list(range(6))), "subsections": []})
    message = _error(data)
    assert 'root.sections[0] ("A"): unexpected key(s) "subsections"' in message
    assert "(allowed: title, summary, chunks, sections)" in message


def test_root_cannot_hold_chunks() -> None:
    data = {**_tree(_section("A", list(range(6)))), "chunks": [0]}
    assert 'root ("Doc"): unexpected key(s) "chunks" (allowed: title, summary, sections)' in _error(data)


def test_root_without_sections() -> None:
    assert _error(_tree()) == 'invalid tree: root ("Doc"): has no sections; group the chunks into sections'


def test_sections_must_be_a_list() -> None:
    data = {"title": "Doc", "summary": "S", "sections": {"title": "A"}}
    assert 'root ("Doc"): "sections" must be a list, got an object' in _error(data)


def test_section_must_be_an_object() -> None:
    message = _error(_tree(_section("A", list(range(6))), "B"))
    assert "root.sections[1] must be an object with title, summary, chunks, sections, got a string" in message


def test_empty_section_is_rejected() -> None:
    message = _error(_tree(_section("A", list(range(6))), _section("Empty", [])))
    assert 'root.sections[1] ("Empty"): has no chunks and no sections' in message


def test_chunks_must_be_a_list_of_integers() -> None:
    assert '"chunks" must be a list of chunk indexes, got a number' in _error(_tree(_section("A", 3)))
    message = _error(_tree(_section("A", [0, "1", True, 2.0, 3, 4, 5])))
    assert 'root.sections[0] ("A"): chunks[1] must be an integer chunk index, got "1"' in message
    assert "chunks[2] must be an integer chunk index, got true" in message
    assert "chunks[3] must be an integer chunk index, got 2.0" in message


def test_unknown_chunk_indexes_are_named() -> None:
    message = _error(_tree(_section("A", [0, 1, 2, 3, 4, 5, 6, 9, -1])))
    assert message == "invalid tree: unknown chunk index(es) -1, 6, 9 (there are 6 chunks, numbered 0-5)"


def test_repeated_chunks_name_where_they_are() -> None:
    message = _error(_tree(_section("A", [0, 1, 2]), _section("B", [2, 3, 4, 5, 5])))
    assert "chunk(s) 2, 5 appear more than once" in message
    assert 'chunk 2 is in root.sections[0] ("A") and root.sections[1] ("B")' in message


def test_missing_chunks_are_listed_as_ranges() -> None:
    message = _error(_tree(_section("A", [0, 1, 5])), count=9)
    assert message.startswith("invalid tree: chunk(s) 2-4, 6-8 are missing")
    assert "(there are 9 chunks, numbered 0-8)" in message


def test_very_long_lists_of_ranges_are_shortened() -> None:
    message = _error(_tree(_section("A", list(range(0, 60, 2)))), count=60)
    assert "\u2026 (30 in all)" in message
    assert len(message) < 300


def test_out_of_order_chunks_name_both_places() -> None:
    message = _error(_tree(_section("A", [0, 1, 3]), _section("B", [2, 4, 5])))
    assert message.startswith(
        "invalid tree: chunks are out of document order: "
        'chunk 3 (in root.sections[0] ("A")) comes before chunk 2 (in root.sections[1] ("B"))'
    )
    assert "contiguous" in message


def test_own_chunks_after_subsections_are_out_of_order() -> None:
    # A section's own chunks come before its subsections.
    message = _error(_tree(_section("A", [2], [_section("A.1", [0, 1])]), _section("B", [3, 4, 5])))
    assert 'chunk 2 (in root.sections[0] ("A")) comes before chunk 0' in message


def test_many_problems_are_numbered_and_capped() -> None:
    data = _tree(*[{"title": "", "summary": ""} for _ in range(6)])
    message = _error(data)
    assert message.startswith('invalid tree (12 problems): 1) root.sections[0]: "title" is empty')
    assert message.endswith("and 4 more")


def test_absurdly_deep_nesting_is_rejected_not_crashing() -> None:
    assert _error(_tree(_chain(60, [0] * 60))) == "invalid tree: sections are nested more than 32 levels deep"
    assert "nested too deeply to parse" in _error('{"sections": ' * 100_000)


def test_bad_chunk_list_argument_is_a_programming_error() -> None:
    text, _ = _document(2)
    with pytest.raises(ValueError, match="at least one chunk"):
        tree_from_json(_tree(), text=text, chunks=[])
    with pytest.raises(ValueError, match="does not start where chunk 0 ends"):
        tree_from_json(_tree(), text=text, chunks=[(0, 5), (6, 10)])
    with pytest.raises(ValueError, match="outside the text"):
        tree_from_json(_tree(), text=text, chunks=[(0, 500)])


# --- depth cap --------------------------------------------------------------------------------


def _chain(depth: int, chunks: list[int]) -> dict[str, Any]:
    """A section nested ``depth`` levels deep, each level holding one chunk then the next level."""
    node = _section(f"L{depth}", chunks[-1:])
    for level in range(depth - 1, 0, -1):
        node = _section(f"L{level}", [chunks[level - 1]], [node])
    return node


def test_depth_cap_on_depth_seven_tree_keeps_every_leaf() -> None:
    text, spans = _document(8)
    data = _tree(_chain(6, [0, 1, 2, 3, 4, 5]), _section("Tail", [6, 7]))  # leaves down to depth 7
    root = tree_from_json(data, text=text, chunks=spans)
    check_tree(root, text)
    assert _leaf_spans(root) == spans
    assert _max_depth(root) == 4
    deepest = root.children[0].children[1].children[1]
    assert deepest.title == "L3"
    assert [child.kind for child in deepest.children] == [LEAF, LEAF, LEAF, LEAF]


@pytest.mark.parametrize("max_depth", [1, 2, 3, 4])
def test_depth_cap_limits(max_depth: int) -> None:
    text, spans = _document(8)
    data = _tree(_chain(6, [0, 1, 2, 3, 4, 5]), _section("Tail", [6, 7]))
    root = tree_from_json(data, text=text, chunks=spans, max_depth=max_depth)
    check_tree(root, text)
    assert _leaf_spans(root) == spans
    assert _max_depth(root) == max_depth


def test_apply_depth_cap_rejects_impossible_depths() -> None:
    root = TreeNode(kind=ROOT, start_char=0, end_char=0)
    with pytest.raises(ValueError, match="between 1 and 4"):
        apply_depth_cap(root, max_depth=5)
    with pytest.raises(ValueError, match="between 1 and 4"):
        apply_depth_cap(root, max_depth=0)


def test_apply_depth_cap_does_not_modify_its_input() -> None:
    leaves = [TreeNode(kind=LEAF, start_char=i, end_char=i + 1) for i in range(3)]
    deep = TreeNode(kind=SUBSECTION, start_char=1, end_char=3, title="deep", children=leaves[1:])
    section = TreeNode(kind=SECTION, start_char=0, end_char=3, title="s", children=[leaves[0], deep])
    root = TreeNode(kind=ROOT, start_char=0, end_char=3, title="r", children=[section])
    capped = apply_depth_cap(root, max_depth=2)
    assert [child.kind for child in capped.children[0].children] == [LEAF, LEAF, LEAF]
    assert root.children[0].children[1] is deep


# --- serialising, merging parts ---------------------------------------------------------------


def test_tree_to_json_round_trips() -> None:
    text, spans = _document(6)
    data = _tree(
        _section("Intro", [0, 1]), _section("Body", [2], [_section("Part A", [3, 4]), _section("B", [5])])
    )
    assert tree_to_json(tree_from_json(data, text=text, chunks=spans), spans) == data


def test_tree_to_json_rejects_shapes_it_cannot_express() -> None:
    leaves = [TreeNode(kind=LEAF, start_char=i, end_char=i + 1) for i in range(3)]
    sub = TreeNode(kind=SUBSECTION, start_char=0, end_char=1, children=[leaves[0]])
    section = TreeNode(kind=SECTION, start_char=0, end_char=3, children=[sub, leaves[1], leaves[2]])
    root = TreeNode(kind=ROOT, start_char=0, end_char=3, children=[section])
    with pytest.raises(ValueError, match=r"root.sections\[0\] has chunks after a subsection"):
        tree_to_json(root, [(0, 1), (1, 2), (2, 3)])
    section.children = [leaves[0], leaves[1], leaves[2]]
    with pytest.raises(ValueError, match="not one of the chunks"):
        tree_to_json(root, [(0, 1)])


def test_merge_part_trees_puts_parts_under_one_root() -> None:
    text, spans = _document(6)
    first = tree_from_json(_tree(_section("A", [0, 1], [_section("A1", [2])])), text=text, chunks=spans[:3])
    second = tree_from_json(_tree(_section("B", [0]), _section("C", [1, 2])), text=text, chunks=spans[3:])
    root = merge_part_trees([first, second], title="Whole", summary="Everything.", text=text)
    check_tree(root, text)
    assert (root.title, root.summary) == ("Whole", "Everything.")
    assert [child.kind for child in root.children] == [SECTION, SECTION]
    assert _leaf_spans(root) == spans
    assert _max_depth(root) == 4


def test_merge_single_part_and_errors() -> None:
    text, spans = _document(2)
    only = tree_from_json(_tree(_section("A", [0, 1])), text=text, chunks=spans)
    merged = merge_part_trees([only], title="T", summary="S", text=text)
    assert (merged.title, merged.children[0].title) == ("T", "A")
    with pytest.raises(ValueError, match="no part trees"):
        merge_part_trees([], title="T", summary="S", text=text)
    with pytest.raises(ValueError, match="not consecutive"):
        merge_part_trees([only, only], title="T", summary="S", text=text)


# --- marker and root answers ------------------------------------------------------------------


def test_parse_marker_answer_accepts_object_text_and_bare_list() -> None:
    assert parse_marker_answer({"markers": [" One two ", "Three"]}) == ["One two", "Three"]
    assert parse_marker_answer('{"markers": ["a b"]}') == ["a b"]
    assert parse_marker_answer('```\n["a b", "c"]\n```') == ["a b", "c"]


@pytest.mark.parametrize(
    ("answer", "expected"),
    [
        ("{markers: []}", "invalid markers answer: the answer is not valid JSON: Expecting property name"),
        ({}, 'invalid markers answer: missing "markers"'),
        ({"markers": ["a"], "notes": 1}, 'unexpected key(s) "notes"; the only key is "markers"'),
        ({"markers": "a b"}, '"markers" must be a list of strings, got a string'),
        (7, '"markers" must be a list of strings, got a number'),
        ({"markers": []}, '"markers" is empty'),
        ({"markers": ["a", 3, " "]}, "1) markers[1] must be a non-empty string, got 3; 2) markers[2]"),
    ],
)
def test_parse_marker_answer_errors(answer: object, expected: str) -> None:
    with pytest.raises(MarkerAnswerError) as caught:
        parse_marker_answer(answer)
    assert expected in str(caught.value)


def test_parse_root_answer() -> None:
    assert parse_root_answer('{"title": " T ", "summary": "S"}') == ("T", "S")
    with pytest.raises(TreeValidationError, match='root: "summary" is empty'):
        parse_root_answer({"title": "T", "summary": ""})
    with pytest.raises(TreeValidationError, match="must be an object with title and summary, got a list"):
        parse_root_answer([])
    with pytest.raises(TreeValidationError, match="unexpected key"):
        parse_root_answer({"title": "T", "summary": "S", "x": 1})


# --- schemas ----------------------------------------------------------------------------------


def _objects(schema: object) -> list[dict[str, Any]]:
    if isinstance(schema, dict):
        found = [schema] if schema.get("type") == "object" else []
        return found + [item for value in schema.values() for item in _objects(value)]
    if isinstance(schema, list):
        return [item for value in schema for item in _objects(value)]
    return []


@pytest.mark.parametrize("schema", [TREE_JSON_SCHEMA, MARKERS_JSON_SCHEMA, ROOT_JSON_SCHEMA])
def test_schemas_are_strict(schema: dict[str, Any]) -> None:
    for node in _objects(schema):
        assert node["additionalProperties"] is False
        assert sorted(node["required"]) == sorted(node["properties"])


@pytest.mark.parametrize(
    ("schema", "refused"),
    [
        (MARKERS_JSON_SCHEMA, {"markers": []}),
        (MARKERS_JSON_SCHEMA, {"markers": ["Section 1", ""]}),
        (MARKERS_JSON_SCHEMA, {"markers": ["x" * (MARKER_MAX_CHARS + 1)]}),
        (ROOT_JSON_SCHEMA, {"title": "", "summary": "s"}),
        (ROOT_JSON_SCHEMA, {"title": "t", "summary": "s" * (SUMMARY_MAX_CHARS + 1)}),
        (TREE_JSON_SCHEMA, {"title": "t", "summary": "s", "sections": []}),
        (SUMMARY_JSON_SCHEMA, {"summary": ""}),
    ],
)
def test_the_schemas_bounds_refuse_what_validation_refuses(schema: dict[str, Any], refused: Any) -> None:
    """The length bounds a grammar enforces as the model writes (llama.cpp) hold the empty answers
    the validators refuse, and bound the rambling ones."""
    import jsonschema

    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(refused, schema)


def test_tree_schema_validates_a_valid_answer() -> None:
    import jsonschema

    data = _tree(_section("A", [0], [_section("B", [1])]))
    jsonschema.validate(data, TREE_JSON_SCHEMA)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(_tree({"title": "A", "summary": "s", "chunks": [0]}), TREE_JSON_SCHEMA)


# --- property: any nested structure round-trips -----------------------------------------------


@st.composite
def _structure(draw: st.DrawFn) -> tuple[int, dict[str, Any]]:
    count = draw(st.integers(1, 40))
    counter = iter(range(10_000))

    def build(low: int, high: int, depth: int) -> dict[str, Any]:
        # Own chunks first, then the rest split into contiguous subsections.
        title = f"S{next(counter)}"
        if depth >= 7:
            own = high - low
        elif high - low == 1 or draw(st.booleans()):
            own = draw(st.integers(1, high - low))
        else:
            own = draw(st.integers(0, high - low - 1))
        cuts = (
            sorted(draw(st.sets(st.integers(low + own + 1, high - 1), max_size=3)))
            if high - low - own > 1
            else []
        )
        bounds = [low + own, *cuts, high] if low + own < high else []
        subsections = [build(a, b, depth + 1) for a, b in pairwise(bounds)]
        return _section(title, list(range(low, low + own)), subsections)

    top_cuts = sorted(draw(st.sets(st.integers(1, count - 1), max_size=4))) if count > 1 else []
    bounds = [0, *top_cuts, count]
    return count, _tree(*[build(a, b, 1) for a, b in pairwise(bounds)])


@settings(max_examples=200, deadline=None)
@given(_structure(), st.integers(1, 4))
def test_property_leaves_are_the_chunks_in_order(case: tuple[int, dict[str, Any]], max_depth: int) -> None:
    count, data = case
    text, spans = _document(count)
    root = tree_from_json(json.dumps(data), text=text, chunks=spans, max_depth=max_depth)
    check_tree(root, text)
    assert _leaf_spans(root) == spans
    assert _max_depth(root) <= max_depth
    if max_depth == 4 and _depth_of(data) <= 4:
        assert tree_to_json(root, spans) == data


def _depth_of(node: dict[str, Any]) -> int:
    """Depth of the deepest leaf in a JSON tree (root = 0)."""
    depths = [1] if node.get("chunks") else []
    depths += [1 + _depth_of(section) for section in node["sections"]]
    return max(depths)
