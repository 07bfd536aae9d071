"""The JSON tree an LLM (or an outside agent) returns, its validation into a ``TreeNode``, and the depth cap.

Shape (``TREE_JSON_SCHEMA``)::

    {"title": str, "summary": str, "sections": [Section, ...]}
    Section = {"title": str, "summary": str, "chunks": [int, ...], "sections": [Section, ...]}

``chunks`` are indexes into the numbered chunk list the model was shown. A section holds chunks,
subsections or both; when both, its own chunks come first (the text before its first
subsection, such as an introduction). Reading the tree depth-first must list every chunk exactly
once in increasing order, so each section covers a contiguous run of the document.

Validation errors carry short, specific messages (paths like ``root.sections[2].sections[0]``) so
they can be sent back to the model as a retry turn or printed to an agent.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from itertools import pairwise
from typing import Any

from documents.ingestion.tree import LEAF, MAX_DEPTH, ROOT, TreeNode, check_tree, kind_for_depth
from openfable.errors import UserInputError
from openfable.llm.fallbacks import Fallback, count_fallback
from openfable.llm.model_text import has_template_tokens, strip_template_tokens

Span = tuple[int, int]

# Length bounds on what a model writes. A constrained decoder (llama.cpp turns the schema into a
# grammar) must end a string or a list at its bound, so a small model that rambles on (Gemma 3 270M
# at temperature 0 repeats itself until its token cap) writes a bounded answer in bounded time;
# strict structured output elsewhere gets the schema without them
# (``openfable.llm_endpoints.without_length_bounds``). Each is several times what a valid answer
# needs, and a cut string is still usable: a marker cut short is still the chunk's opening words.
# The lower bounds are what validation asks anyway (no empty title, summary, marker or list of
# markers, a root with a section): a grammar then never lets a model write what would be refused.
MARKER_MAX_CHARS = 100  # the first 5-8 words of a chunk
TITLE_MAX_CHARS = 120  # a table-of-contents entry of at most 10 words
SUMMARY_MAX_CHARS = 800  # 1-4 sentences

_TITLE_FIELD = {"type": "string", "minLength": 1, "maxLength": TITLE_MAX_CHARS}
SUMMARY_FIELD = {"type": "string", "minLength": 1, "maxLength": SUMMARY_MAX_CHARS}
_CHUNKS_FIELD = {
    "type": "array",
    "items": {"type": "integer"},
    "description": "Indexes of the chunks this section holds directly, in order, before its subsections.",
}
_SECTIONS_FIELD = {"type": "array", "items": {"$ref": "#/$defs/section"}}

# Strict structured output needs every property required and additionalProperties false.
TREE_JSON_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "title": {**_TITLE_FIELD, "description": "Title of the whole document (or part)."},
        "summary": {**SUMMARY_FIELD, "description": "Abstractive summary of everything beneath."},
        "sections": {**_SECTIONS_FIELD, "minItems": 1},
    },
    "required": ["title", "summary", "sections"],
    "additionalProperties": False,
    "$defs": {
        "section": {
            "type": "object",
            "properties": {
                "title": {**_TITLE_FIELD, "description": "Short table-of-contents title."},
                "summary": {**SUMMARY_FIELD, "description": "Abstractive summary of everything beneath."},
                "chunks": _CHUNKS_FIELD,
                "sections": _SECTIONS_FIELD,
            },
            "required": ["title", "summary", "chunks", "sections"],
            "additionalProperties": False,
        }
    },
}

MARKERS_JSON_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "markers": {
            "type": "array",
            "items": {"type": "string", "minLength": 1, "maxLength": MARKER_MAX_CHARS},
            "minItems": 1,
            "description": "Verbatim opening words of each chunk, in document order.",
        }
    },
    "required": ["markers"],
    "additionalProperties": False,
}

ROOT_JSON_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"title": _TITLE_FIELD, "summary": SUMMARY_FIELD},
    "required": ["title", "summary"],
    "additionalProperties": False,
}


def markers_schema(max_markers: int) -> dict[str, Any]:
    """``MARKERS_JSON_SCHEMA`` for a text that holds at most ``max_markers`` chunks: the list ends
    there (a model repeating a marker forever is the failure this bounds)."""
    markers = {**MARKERS_JSON_SCHEMA["properties"]["markers"], "maxItems": max(1, max_markers)}
    return {**MARKERS_JSON_SCHEMA, "properties": {"markers": markers}}


_ROOT_KEYS = ("title", "summary", "sections")
_SECTION_KEYS = ("title", "summary", "chunks", "sections")
_MAX_PROBLEMS_SHOWN = 8
# Far beyond any sensible tree; stops a hostile answer from exhausting the recursion limit.
_MAX_NESTING = 32
_MAX_RANGES_SHOWN = 12
_TITLE_PREVIEW_CHARS = 40
_CODE_FENCE = re.compile(r"^\s*```[a-zA-Z]*\s*\n(?P<body>.*?)\n?\s*```\s*$", re.DOTALL)


class AnswerError(UserInputError):
    """A JSON answer from a model or agent is invalid; the message is fit to send back to it."""

    subject = "answer"

    def __init__(self, problems: Sequence[str]) -> None:
        self.problems = list(problems)
        super().__init__(_format_problems(self.subject, self.problems), details={"problems": self.problems})


class TreeValidationError(AnswerError):
    subject = "tree"


class MarkerAnswerError(AnswerError):
    subject = "markers answer"


def parse_marker_answer(data: object) -> list[str]:
    """Validate ``{"markers": [str, ...]}`` (or its JSON text) and return the stripped markers.

    A bare JSON list of strings is accepted too: models without structured output often reply so.
    """
    markers = _marker_list(_load_json(data, MarkerAnswerError))
    problems = [
        f"markers[{index}] must be a non-empty string, got {_json_repr(marker)}"
        for index, marker in enumerate(markers)
        if not isinstance(marker, str) or not marker.strip()
    ]
    if problems:
        raise MarkerAnswerError(problems)
    return [marker.strip() for marker in markers]


def _marker_list(value: object) -> list[Any]:
    """The answer's list of markers, not yet checked one by one: the answer itself, or what its
    one key ``"markers"`` holds."""
    if isinstance(value, dict):
        value = _markers_of(value)
    if not isinstance(value, list):
        raise MarkerAnswerError([f'"markers" must be a list of strings, got {_json_type(value)}'])
    if not value:
        raise MarkerAnswerError(['"markers" is empty; give the opening words of at least one chunk'])
    return value


def _markers_of(answer: dict[Any, Any]) -> object:
    unexpected = sorted(set(answer) - {"markers"})
    if unexpected:
        raise MarkerAnswerError([f'unexpected key(s) {_quoted(unexpected)}; the only key is "markers"'])
    if "markers" not in answer:
        raise MarkerAnswerError(['missing "markers"'])
    return answer["markers"]


def parse_root_answer(data: object) -> tuple[str, str]:
    """Validate ``{"title": str, "summary": str}`` (or its JSON text); return both, stripped."""
    value = _load_json(data, TreeValidationError)
    if not isinstance(value, dict):
        problem = f"the answer must be an object with title and summary, got {_json_type(value)}"
        raise TreeValidationError([problem])
    problems = [f"root: {problem}" for problem in _unexpected_keys(value, ("title", "summary"))]
    title = _text_field(value, "title", "root", problems)
    summary = _text_field(value, "summary", "root", problems)
    if problems:
        raise TreeValidationError(problems)
    return title, summary


def tree_from_json(
    data: object, *, text: str, chunks: Sequence[Span], max_depth: int = MAX_DEPTH
) -> TreeNode:
    """Validate a tree answer (object or JSON text) over numbered ``chunks`` and build it.

    Raises ``TreeValidationError`` listing what is wrong. Trees deeper than ``max_depth`` are not
    rejected: ``apply_depth_cap`` flattens them, keeping every leaf. ``chunks`` may be a
    contiguous part of ``text`` (one part of a long document); when they cover the whole text
    the result is also checked with ``tree.check_tree``.
    """
    _check_chunks(chunks, text)
    problems: list[str] = []
    parsed = _parse_node(_load_json(data, TreeValidationError), "root", problems, is_root=True)
    if parsed is None or problems:
        raise TreeValidationError(problems)
    problems.extend(_coverage_problems(parsed, len(chunks)))
    if problems:
        raise TreeValidationError(problems)
    root = apply_depth_cap(_build(parsed, chunks), max_depth=max_depth)
    if chunks[0][0] == 0 and chunks[-1][1] == len(text):
        check_tree(root, text)
    return root


def tree_to_json(root: TreeNode, chunks: Sequence[Span]) -> dict[str, Any]:
    """Serialise a tree back to the JSON shape, leaves as chunk indexes (e.g. for an agent to edit)."""
    index_of = {span: index for index, span in enumerate(chunks)}
    return {
        "title": root.title,
        "summary": root.summary,
        "sections": [
            _section_to_json(child, index_of, f"root.sections[{n}]") for n, child in enumerate(root.children)
        ],
    }


def apply_depth_cap(root: TreeNode, max_depth: int = MAX_DEPTH) -> TreeNode:
    """Return a copy of ``root`` whose leaves sit at depth ≤ ``max_depth``; never drops a leaf.

    An internal node that would sit at depth ``max_depth`` or deeper is replaced, in place, by
    its leaves, which re-attach to the deepest allowed ancestor in document order. Kinds are
    reset from depth and internal spans recomputed from their children.
    """
    if not 1 <= max_depth <= MAX_DEPTH:
        raise ValueError(f"max_depth must be between 1 and {MAX_DEPTH}, got {max_depth}")
    return _capped(root, 0, max_depth)


def merge_part_trees(
    parts: Sequence[TreeNode], *, title: str, summary: str, text: str, max_depth: int = MAX_DEPTH
) -> TreeNode:
    """Put the trees built for consecutive parts of a long document under one root.

    Each part's root becomes a section (its sections become subsections), then the depth cap
    flattens what grew too deep. A single part simply gets the new title and summary.
    """
    if not parts:
        raise ValueError("there are no part trees to merge")
    for previous, following in pairwise(parts):
        if previous.end_char != following.start_char:
            raise ValueError(f"part trees are not consecutive: {previous.end_char} != {following.start_char}")
    if len(parts) == 1:
        merged = replace(parts[0], title=title, summary=summary)
    else:
        merged = TreeNode(
            kind=ROOT,
            start_char=parts[0].start_char,
            end_char=parts[-1].end_char,
            title=title,
            summary=summary,
            children=list(parts),
        )
    root = apply_depth_cap(merged, max_depth=max_depth)
    check_tree(root, text)
    return root


@dataclass
class _ParsedNode:
    path: str
    title: str
    summary: str
    chunks: list[int] = field(default_factory=list)
    sections: list[_ParsedNode] = field(default_factory=list)

    def chunk_sequence(self) -> list[tuple[int, str]]:
        """(chunk index, label of the node listing it), depth-first in the answer's order."""
        sequence = [(index, self.path) for index in self.chunks]
        for section in self.sections:
            sequence.extend(section.chunk_sequence())
        return sequence


def _parse_node(
    value: object, path: str, problems: list[str], *, is_root: bool, depth: int = 0
) -> _ParsedNode | None:
    keys = _ROOT_KEYS if is_root else _SECTION_KEYS
    if depth > _MAX_NESTING:
        problems.append(f"sections are nested more than {_MAX_NESTING} levels deep")
        return None
    if not isinstance(value, dict):
        problems.append(f"{path} must be an object with {', '.join(keys)}, got {_json_type(value)}")
        return None
    return _parse_fields(value, path, problems, is_root=is_root, keys=keys, depth=depth)


def _parse_fields(
    value: dict[str, Any],
    path: str,
    problems: list[str],
    *,
    is_root: bool,
    keys: Sequence[str],
    depth: int,
) -> _ParsedNode | None:
    """The node an object with the right shape describes; None when any of it (or of what it
    holds) is wrong, with each problem added to ``problems``."""
    count_before = len(problems)
    label = _label(path, value)
    problems.extend(f"{label}: {problem}" for problem in _unexpected_keys(value, keys))
    title = _text_field(value, "title", label, problems)
    summary = _text_field(value, "summary", label, problems)
    chunk_indexes = [] if is_root else _chunk_indexes(value.get("chunks", []), label, problems)
    raw_sections = _raw_sections(value, label, problems)
    sections = [
        _parse_node(item, f"{path}.sections[{index}]", problems, is_root=False, depth=depth + 1)
        for index, item in enumerate(raw_sections)
    ]
    if not raw_sections and len(problems) == count_before:
        # Only a node that is otherwise right is told it is empty: the other problems come first.
        problems.extend(_emptiness_problems(label, is_root=is_root, has_chunks=bool(chunk_indexes)))
    if len(problems) > count_before:
        return None
    return _ParsedNode(label, title, summary, chunk_indexes, [s for s in sections if s is not None])


def _raw_sections(value: dict[str, Any], label: str, problems: list[str]) -> list[Any]:
    raw_sections = value.get("sections", [])
    if not isinstance(raw_sections, list):
        problems.append(f'{label}: "sections" must be a list, got {_json_type(raw_sections)}')
        return []
    return raw_sections


def _emptiness_problems(label: str, *, is_root: bool, has_chunks: bool) -> list[str]:
    """What is wrong with a node without sections: the root must have some, a section must hold
    at least chunks."""
    if is_root:
        return [f"{label}: has no sections; group the chunks into sections"]
    if not has_chunks:
        return [f"{label}: has no chunks and no sections; every section must hold at least one chunk"]
    return []


def _text_field(value: dict[str, Any], key: str, label: str, problems: list[str]) -> str:
    if key not in value:
        problems.append(f'{label}: missing "{key}"')
        return ""
    field_value = value[key]
    if not isinstance(field_value, str):
        problems.append(f'{label}: "{key}" must be a string, got {_json_type(field_value)}')
        return ""
    if has_template_tokens(field_value):
        # A small model ran on past its answer into its chat template ("CONTRACTS [/INST] ..."):
        # what follows the marker is not the answer. Cut there; an answer left empty is re-asked.
        field_value = strip_template_tokens(field_value)
        count_fallback(Fallback.TEMPLATE_TOKENS)
    if not field_value.strip():
        problems.append(f'{label}: "{key}" is empty')
    return field_value.strip()


def _chunk_indexes(value: object, label: str, problems: list[str]) -> list[int]:
    if not isinstance(value, list):
        problems.append(f'{label}: "chunks" must be a list of chunk indexes, got {_json_type(value)}')
        return []
    indexes: list[int] = []
    for position, item in enumerate(value):
        if isinstance(item, bool) or not isinstance(item, int):
            problems.append(
                f"{label}: chunks[{position}] must be an integer chunk index, got {_json_repr(item)}"
            )
        else:
            indexes.append(item)
    return indexes


def _coverage_problems(root: _ParsedNode, chunk_count: int) -> list[str]:
    sequence = root.chunk_sequence()
    counts = Counter(index for index, _ in sequence)
    valid = f"there are {chunk_count} chunks, numbered 0-{chunk_count - 1}"
    problems = [
        *_unknown_chunk_problems(counts, chunk_count, valid),
        *_repeated_chunk_problems(sequence, counts, chunk_count),
        *_missing_chunk_problems(counts, chunk_count, valid),
    ]
    # The order is only worth checking once every chunk is there exactly once.
    return problems or _order_problems(sequence)


def _unknown_chunk_problems(counts: Counter[int], chunk_count: int, valid: str) -> list[str]:
    unknown = sorted(index for index in counts if not 0 <= index < chunk_count)
    if not unknown:
        return []
    return [f"unknown chunk index(es) {_ranges(unknown)} ({valid})"]


def _repeated_chunk_problems(
    sequence: list[tuple[int, str]], counts: Counter[int], chunk_count: int
) -> list[str]:
    repeated = sorted(index for index, count in counts.items() if count > 1 and 0 <= index < chunk_count)
    if not repeated:
        return []
    places = sorted({path for index, path in sequence if index == repeated[0]})
    return [
        f"chunk(s) {_ranges(repeated)} appear more than once (chunk {repeated[0]} is in "
        f"{' and '.join(places)}); each chunk must appear exactly once"
    ]


def _missing_chunk_problems(counts: Counter[int], chunk_count: int, valid: str) -> list[str]:
    missing = [index for index in range(chunk_count) if index not in counts]
    if not missing:
        return []
    return [f"chunk(s) {_ranges(missing)} are missing; every chunk must appear exactly once ({valid})"]


def _order_problems(sequence: list[tuple[int, str]]) -> list[str]:
    # Called only when the sequence is a permutation of 0..n-1, so position p should hold chunk p.
    where = {index: path for index, path in sequence}
    for position, (index, path) in enumerate(sequence):
        if index != position:
            return [
                f"chunks are out of document order: chunk {index} (in {path}) comes before chunk {position} "
                f"(in {where[position]}); list chunks in increasing order depth-first, a section's own "
                "chunks before its subsections, so each section covers a contiguous run of chunks"
            ]
    return []


def _build(parsed: _ParsedNode, chunks: Sequence[Span]) -> TreeNode:
    children = [TreeNode(kind=LEAF, start_char=chunks[i][0], end_char=chunks[i][1]) for i in parsed.chunks]
    children.extend(_build(section, chunks) for section in parsed.sections)
    return TreeNode(
        kind=kind_for_depth(1, is_leaf=False),  # provisional: the depth cap sets kinds from depth
        start_char=children[0].start_char,
        end_char=children[-1].end_char,
        title=parsed.title,
        summary=parsed.summary,
        children=children,
    )


def _capped(node: TreeNode, depth: int, max_depth: int) -> TreeNode:
    children: list[TreeNode] = []
    for child in node.children:
        if child.kind == LEAF:
            children.append(replace(child, children=[]))
        elif depth + 1 < max_depth:
            children.append(_capped(child, depth + 1, max_depth))
        else:
            # Too deep to stay internal: its leaves move up, in order, to this node.
            children.extend(replace(leaf, children=[]) for leaf in child.leaves())
    return replace(
        node,
        kind=kind_for_depth(depth, is_leaf=False),
        start_char=children[0].start_char if children else node.start_char,
        end_char=children[-1].end_char if children else node.end_char,
        children=children,
    )


def _section_to_json(node: TreeNode, index_of: dict[Span, int], path: str) -> dict[str, Any]:
    own: list[TreeNode] = []
    for child in node.children:
        if child.kind != LEAF:
            break
        own.append(child)
    subsections = node.children[len(own) :]
    if any(child.kind == LEAF for child in subsections):
        raise ValueError(f"{path} has chunks after a subsection, which the JSON shape cannot express")
    chunk_indexes: list[int] = []
    for leaf in own:
        span = (leaf.start_char, leaf.end_char)
        if span not in index_of:
            raise ValueError(f"{path} has a leaf {span} that is not one of the chunks")
        chunk_indexes.append(index_of[span])
    return {
        "title": node.title,
        "summary": node.summary,
        "chunks": chunk_indexes,
        "sections": [
            _section_to_json(child, index_of, f"{path}.sections[{n}]") for n, child in enumerate(subsections)
        ],
    }


def _check_chunks(chunks: Sequence[Span], text: str) -> None:
    if not chunks:
        raise ValueError("a tree needs at least one chunk")
    for index, (start, end) in enumerate(chunks):
        if not 0 <= start <= end <= len(text):
            raise ValueError(f"chunk {index} ({start}, {end}) lies outside the text")
        if index and start != chunks[index - 1][1]:
            raise ValueError(f"chunk {index} does not start where chunk {index - 1} ends")


def _load_json(data: object, error: type[AnswerError]) -> object:
    if not isinstance(data, str):
        return data
    fenced = _CODE_FENCE.match(data)  # models often wrap JSON in a markdown code fence
    try:
        return json.loads(fenced.group("body") if fenced else data)
    except RecursionError:
        raise error(["the answer is nested too deeply to parse"]) from None
    except json.JSONDecodeError as exc:
        where = f"line {exc.lineno} column {exc.colno} (char {exc.pos})"
        raise error([f"the answer is not valid JSON: {exc.msg} at {where}"]) from None


def _unexpected_keys(value: dict[str, Any], allowed: Sequence[str]) -> list[str]:
    unexpected = sorted(str(key) for key in value if key not in allowed)
    if not unexpected:
        return []
    return [f"unexpected key(s) {_quoted(unexpected)} (allowed: {', '.join(allowed)})"]


def _label(path: str, value: dict[str, Any]) -> str:
    title = value.get("title")
    if not isinstance(title, str) or not title.strip():
        return path
    title = " ".join(title.split())
    if len(title) > _TITLE_PREVIEW_CHARS:
        title = title[: _TITLE_PREVIEW_CHARS - 1] + "\u2026"
    return f'{path} ("{title}")'


def _ranges(indexes: Sequence[int]) -> str:
    """Compact ``[1, 2, 3, 7]`` as ``"1-3, 7"``, shortened when very long."""
    runs: list[list[int]] = []
    for index in sorted(set(indexes)):
        if runs and index == runs[-1][1] + 1:
            runs[-1][1] = index
        else:
            runs.append([index, index])
    shown = [str(low) if low == high else f"{low}-{high}" for low, high in runs[:_MAX_RANGES_SHOWN]]
    if len(runs) > _MAX_RANGES_SHOWN:
        shown.append(f"\u2026 ({len(set(indexes))} in all)")
    return ", ".join(shown)


def _format_problems(subject: str, problems: Sequence[str]) -> str:
    if not problems:
        return f"invalid {subject}"
    if len(problems) == 1:
        return f"invalid {subject}: {problems[0]}"
    shown = [f"{number}) {problem}" for number, problem in enumerate(problems[:_MAX_PROBLEMS_SHOWN], start=1)]
    more = len(problems) - _MAX_PROBLEMS_SHOWN
    if more > 0:
        shown.append(f"and {more} more")
    return f"invalid {subject} ({len(problems)} problems): " + "; ".join(shown)


def _quoted(names: Sequence[str]) -> str:
    return ", ".join(f'"{name}"' for name in names)


def _json_type(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__


def _json_repr(value: object) -> str:
    try:
        rendered = json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        rendered = repr(value)
    return rendered if len(rendered) <= 40 else rendered[:39] + "\u2026"
