"""Boundary markers → exact chunk spans.

An LLM names the verbatim opening words of each chunk ("markers"); this module finds them in the
source text and cuts there, so every chunk is an exact slice of the document with character
offsets. The model never echoes the text itself.

Search order for each marker, always FORWARD from just after the previous marker's offset:
1. exact substring;
2. whitespace-tolerant: any run of whitespace in the marker matches any run in the text;
3. last resort: also case-insensitive, with typographic quotes/dashes folded to ASCII and a
   trailing ellipsis dropped (models "tidy" what they copy).
Within that order a match at a word start is preferred over one inside a word, because chunks
start at words: the marker "he said" should not cut "The said" in two.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property
from itertools import pairwise

from openfable.errors import UserInputError

_MARKER_PREVIEW_CHARS = 80

# Typographic characters a model tends to replace (or that the text has and the model drops).
_FOLD_TABLE = str.maketrans(
    {
        "\u2018": "'",
        "\u2019": "'",
        "\u201a": "'",
        "\u201b": "'",
        "\u2032": "'",
        "`": "'",
        "\u201c": '"',
        "\u201d": '"',
        "\u201e": '"',
        "\u201f": '"',
        "\u2033": '"',
        "\u00ab": '"',
        "\u00bb": '"',
        "\u2010": "-",
        "\u2011": "-",
        "\u2012": "-",
        "\u2013": "-",
        "\u2014": "-",
        "\u2015": "-",
        "\u2212": "-",
    }
)
_TRAILING_ELLIPSIS = re.compile(r"(?:\s*(?:\.\.\.|\u2026))+$")


class MarkerNotFoundError(UserInputError):
    """A marker does not occur in the text after the previous one; the message names both."""

    def __init__(self, marker: str, after: int, *, index: int) -> None:
        self.marker = marker
        self.after = after
        self.index = index
        super().__init__(
            f"marker #{index + 1} {_preview(marker)!r} was not found in the text after character {after}; "
            "markers must be verbatim opening words of each chunk, in document order"
        )


def locate_markers(text: str, markers: Sequence[str], *, start: int = 0, end: int | None = None) -> list[int]:
    """Return the character offset of each marker in ``text``, searching forward.

    Each marker is searched from ``start`` (first marker) or one character after the previous
    marker's offset, so a phrase that legitimately repeats ("The Company") resolves to its next
    occurrence. ``end`` bounds the search: a match must lie entirely inside ``text[:end]`` (use it
    with a window's end). Offsets are absolute in ``text`` and strictly increasing.
    """
    stop = len(text) if end is None else end
    if not 0 <= start <= stop <= len(text):
        raise ValueError(f"invalid search range [{start}, {stop}) for a text of {len(text)} characters")
    folded = _FoldedText(text)
    offsets: list[int] = []
    cursor = start
    for index, marker in enumerate(markers):
        found = _find_marker(text, folded, marker, cursor, stop)
        if found is None:
            raise MarkerNotFoundError(marker, cursor, index=index)
        offsets.append(found)
        cursor = found + 1
    return offsets


def chunk_spans(text: str, offsets: Sequence[int]) -> list[tuple[int, int]]:
    """Cut ``text`` at ``offsets`` into ``(start, end)`` spans that partition it exactly.

    - Offsets are sorted and duplicates collapse; an offset at 0 or ``len(text)`` adds nothing.
    - Text before the first offset is its own chunk, unless it is whitespace-only: then it joins
      the first chunk (a leading blank line is not a chunk).
    - An offset that would start a whitespace-only chunk is dropped, so that whitespace joins
      the previous chunk.
    An empty text has no chunks.
    """
    for offset in offsets:
        if not 0 <= offset <= len(text):
            raise ValueError(f"offset {offset} lies outside the text (0-{len(text)})")
    if not text:
        return []
    cuts = sorted(set(offsets) - {0, len(text)})
    if cuts and not text[: cuts[0]].strip():
        cuts.pop(0)
    kept: list[int] = []
    for position, cut in enumerate(cuts):
        following = cuts[position + 1] if position + 1 < len(cuts) else len(text)
        if text[cut:following].strip():
            kept.append(cut)
    bounds = [0, *kept, len(text)]
    return list(pairwise(bounds))


def _find_marker(text: str, folded: _FoldedText, marker: str, cursor: int, stop: int) -> int | None:
    needle = marker.strip()
    if not needle:
        return None
    patterns = [_exact_pattern(needle), _whitespace_pattern(needle)]
    folded_needle = _TRAILING_ELLIPSIS.sub("", _fold(needle)).strip()
    # Word-start matches in every mode first, then matches anywhere: a mid-word exact hit must
    # not win over the real chunk start found by a more tolerant mode.
    for at_word_start in (True, False):
        # The earliest of the exact and whitespace-tolerant matches: a later exact hit must not
        # win over the real next chunk start whose words are separated by a line break.
        starts = [
            match.start()
            for pattern in patterns
            if (match := _compile(pattern, at_word_start).search(text, cursor, stop))
        ]
        if starts:
            return min(starts)
        if folded_needle:
            found = folded.search(_compile(_whitespace_pattern(folded_needle), at_word_start), cursor, stop)
            if found is not None:
                return found
    return None


def _exact_pattern(needle: str) -> str:
    return re.escape(needle)


def _whitespace_pattern(needle: str) -> str:
    return r"\s+".join(re.escape(word) for word in needle.split())


def _compile(pattern: str, at_word_start: bool) -> re.Pattern[str]:
    # The lookbehind only matters when the marker itself starts with a word character.
    prefix = r"(?:(?<!\w)(?=\w)|(?=\W))" if at_word_start else ""
    return re.compile(prefix + pattern)


def _fold(text: str) -> str:
    return text.translate(_FOLD_TABLE).casefold()


@dataclass
class _FoldedText:
    """Case/quote-folded copy of a text with a map back to original offsets (built lazily)."""

    text: str

    @cached_property
    def _mapped(self) -> tuple[str, list[int], list[int]]:
        pieces: list[str] = []
        origin: list[int] = []  # folded index -> original index
        position: list[int] = []  # original index -> folded index
        for index, char in enumerate(self.text):
            position.append(len(origin))
            piece = _fold(char)  # casefold may lengthen a character ("ß" -> "ss")
            pieces.append(piece)
            origin.extend([index] * len(piece))
        position.append(len(origin))
        origin.append(len(self.text))
        return "".join(pieces), origin, position

    def search(self, pattern: re.Pattern[str], cursor: int, stop: int) -> int | None:
        folded, origin, position = self._mapped
        match = pattern.search(folded, position[cursor], position[stop])
        return origin[match.start()] if match else None


def _preview(marker: str) -> str:
    marker = " ".join(marker.split())
    if len(marker) <= _MARKER_PREVIEW_CHARS:
        return marker
    return marker[: _MARKER_PREVIEW_CHARS - 1] + "\u2026"
