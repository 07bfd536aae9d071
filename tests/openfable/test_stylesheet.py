"""The one stylesheet keeps its design in named tokens (issue 22 item 12): colours, type sizes and
the spacing scale are CSS custom properties set once in :root, and every rule uses them, so a
colour or a size is changed in one place and the pages cannot drift apart."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

CSS = (Path(__file__).resolve().parents[2] / "static" / "openfable" / "app.css").read_text(encoding="utf-8")
_ROOT = re.search(r":root\s*\{(.*?)\}", CSS, re.S)
assert _ROOT is not None
ROOT, RULES = _ROOT.group(1), CSS[_ROOT.end() :]
DECLARATIONS = re.findall(r"(?<![\w-])([a-z-]+)\s*:\s*([^;{}]+)", re.sub(r"/\*.*?\*/", "", RULES, flags=re.S))


@pytest.mark.parametrize(
    "token", ["--ink", "--muted", "--accent", "--danger", "--surface", "--ok", "--warn", "--bad"]
)
def test_the_colours_are_named_tokens(token: str) -> None:
    assert re.search(rf"{token}:\s*[^;]+;", ROOT)


def test_no_rule_writes_a_colour_of_its_own() -> None:
    literals = [
        f"{name}: {value}"
        for name, value in DECLARATIONS
        if re.search(r"#[0-9a-fA-F]{3,8}\b|\brgba?\(|\bhsla?\(", value)
    ]
    assert literals == [], "colours belong in :root as tokens"


def test_type_sizes_come_from_the_scale() -> None:
    for step in ("xs", "sm", "base", "lg", "xl", "2xl"):
        assert f"--text-{step}:" in ROOT
    sizes = {value.strip() for name, value in DECLARATIONS if name == "font-size"}
    assert sizes and all(size.startswith("var(--text-") for size in sizes), sizes


def test_spacing_comes_from_the_scale() -> None:
    for step in range(1, 7):
        assert f"--space-{step}:" in ROOT
    spacing = [value for name, value in DECLARATIONS if re.fullmatch(r"(padding|margin|gap)(-\w+)?", name)]
    # Off the scale: a length that is not 0 or auto nor a token (the outline's twisty geometry is).
    off = [
        value
        for value in spacing
        if re.search(r"(?<![\w(-])-?\d*\.?\d+(rem|em|px)\b", re.sub(r"var\([^)]*\)", "", value))
    ]
    assert len(off) <= 0.05 * len(spacing), f"off the spacing scale: {off}"


def test_three_kinds_of_button() -> None:
    for kind in ("primary", "secondary", "danger"):
        assert re.search(rf"button\.{kind}\b[^{{]*\{{", RULES), kind
