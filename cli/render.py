"""`--format table`: a command's JSON answer as text a person reads in a terminal. Pure: plain data in,
text out.

The answer's first list of entities (documents, collections, jobs, chunks, a tree's nodes) is a
table with the columns that say what each one is; the answer's other plain values are lines of
``name: value`` above it. An answer with no such list is all ``name: value`` lines. A nested tree
is flattened in document order, each title indented by its depth.
"""

from __future__ import annotations

from typing import Any

# Columns in the order a person reads them; a table shows those its rows have, up to _MAX_COLUMNS.
_COLUMNS = (
    "id",
    "document_id",
    "slug",
    "name",
    "kind",
    "title",
    "toc_path",
    "collection",
    "status",
    "stage",
    "progress",
    "score",
    "token_count",
    "node_count",
    "document_count",
    "start_char",
    "end_char",
    "created",
)
_MAX_COLUMNS = 7
_MAX_WIDTH = 48


def render_table(answer: dict[str, Any]) -> str:
    """``answer`` (a command's JSON object) as lines of text and one table."""
    rows_key = next(
        (key for key, value in answer.items() if isinstance(value, list) and value and _all_dicts(value)),
        None,
    )
    lines = [
        f"{key}: {_cell(value)}"
        for key, value in answer.items()
        if key != rows_key and not isinstance(value, (dict, list))
    ]
    if rows_key is None:
        nested = [f"{key}: {_cell(value)}" for key, value in answer.items() if isinstance(value, dict)]
        return "\n".join(lines + nested)
    rows = _flattened(answer[rows_key])
    columns = [column for column in _COLUMNS if any(column in row for row in rows)]
    if (
        "id" in columns
        and "document_id" in columns
        and all(row.get("id") == row.get("document_id") for row in rows)
    ):
        columns.remove("document_id")  # a document's two names for one id
    columns = columns[:_MAX_COLUMNS] or list(rows[0])[:_MAX_COLUMNS]
    table = [[column.upper() for column in columns]]
    table += [[_cell(row.get(column)) for column in columns] for row in rows]
    widths = [max(len(line[index]) for line in table) for index in range(len(columns))]
    rendered = [
        "  ".join(cell.ljust(width) for cell, width in zip(line, widths, strict=True)).rstrip()
        for line in table
    ]
    return "\n".join([*lines, *([""] if lines else []), *rendered])


def _all_dicts(values: list[Any]) -> bool:
    return all(isinstance(value, dict) for value in values)


def _flattened(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A nested tree's nodes in document order, each title indented by its depth; other rows as they are."""
    if not any("children" in row for row in rows):
        return rows
    flat: list[dict[str, Any]] = []

    def walk(node: dict[str, Any]) -> None:
        depth = int(node.get("depth") or 0)
        flat.append(node | {"title": "  " * depth + str(node.get("title") or "")})
        for child in node.get("children") or []:
            walk(child)

    for row in rows:
        walk(row)
    return flat


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.3f}"
    if isinstance(value, list):
        value = ", ".join(str(item) for item in value)
    text = " ".join(str(value).split())
    return text if len(text) <= _MAX_WIDTH else text[: _MAX_WIDTH - 1] + "…"
