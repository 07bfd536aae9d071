"""Names and titles people send, as they are stored and shown: without the characters that hide or
disguise what a name says.

A right-to-left override (U+202E) makes ``invoice_<RLO>fdp.exe`` read "invoice_exe.pdf" on the
page while a browser saves it as an .exe; a NUL cannot be stored in PostgreSQL text at all; other
control and formatting characters (bells, escapes, zero-width spaces, byte-order marks) show as
nothing or as boxes. Every surface's document names go through ``displayable`` once, in the
service that stores them (``documents.services.document_input``), and the download name of a file
stored before goes through it again (``documents.files``). Pure Python, no Django.
"""

from __future__ import annotations

import unicodedata

# Joiners keep their meaning: they shape Persian, Indic and emoji text (ZWNJ, ZWJ).
_KEPT_FORMAT_CHARACTERS = frozenset({"\u200c", "\u200d"})
_WHITESPACE_CONTROLS = frozenset("\t\n\r\x0b\x0c\x85")


def displayable(text: str) -> str:
    """``text`` without control characters (Unicode Cc: NUL, escapes; tabs and line breaks become
    a space) and formatting characters (Cf: bidirectional overrides and isolates, zero-width
    spaces, byte-order marks, but not the joiners); runs of spaces made by the removal kept as
    they were sent otherwise, and the ends stripped."""
    kept: list[str] = []
    for character in text:
        if character in _WHITESPACE_CONTROLS:
            kept.append(" ")
        elif unicodedata.category(character) in ("Cc", "Cf") and character not in _KEPT_FORMAT_CHARACTERS:
            continue
        else:
            kept.append(character)
    return "".join(kept).strip()
