"""A model's JSON answer, parsed: what the client returns, or ValueError saying what was wrong."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any


def parse_json_output(text: str, schema: Mapping[str, Any] | None = None) -> Any:
    """Parse a model's JSON answer; ValueError says what was wrong.

    Tolerates a Markdown code fence around the JSON: providers without native structured output
    (or with drop_params removing response_format) often add one. Refuses NaN and Infinity,
    which Python's json would read but JSON does not have.
    """
    stripped = text.strip()
    if stripped.startswith("```"):
        stripped = stripped.split("\n", 1)[1] if "\n" in stripped else ""
        if stripped.rstrip().endswith("```"):
            stripped = stripped.rstrip()[:-3]
        stripped = stripped.strip()
    if not stripped:
        raise ValueError("empty answer")
    try:
        # strict=False: a raw line break inside a string (small models write the text they
        # quote as it stands) is read as the line break it is, not refused.
        data = json.loads(stripped, parse_constant=_refuse_constant, parse_float=_finite_float, strict=False)
    except json.JSONDecodeError as exc:
        raise ValueError(f"{exc.msg} at line {exc.lineno} column {exc.colno}") from exc
    expected = (schema or {}).get("type")
    if expected == "object" and not isinstance(data, dict):
        raise ValueError(f"expected a JSON object, got {type(data).__name__}")
    if expected == "array" and not isinstance(data, list):
        raise ValueError(f"expected a JSON array, got {type(data).__name__}")
    return data


def _refuse_constant(name: str) -> Any:
    # Python's json reads NaN and Infinity, JSON has neither: Gemma 3 270M scored a document
    # "Infinity", which no score check expects and PostgreSQL's jsonb (the answer cache) refuses.
    raise ValueError(f"{name} is not a JSON value")


def _finite_float(text: str) -> float:
    # A number too large for a float (Gemma 3 270M wrote one as a score) reads as infinity.
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"{text[:40]} is too large a number")
    return value
