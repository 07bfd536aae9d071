"""openfable.display_text: the characters that hide what a name says go, the rest stays."""

from __future__ import annotations

import pytest

from openfable.display_text import displayable


@pytest.mark.parametrize(
    ("sent", "kept"),
    [
        ("invoice_\u202efdp.exe", "invoice_fdp.exe"),  # right-to-left override
        ("report\x00.pdf", "report.pdf"),  # NUL: PostgreSQL text cannot hold it
        ("a\u2066b\u2069c\u200fd", "abcd"),  # isolates and a right-to-left mark
        ("\ufeffnotes\u200b.md", "notes.md"),  # byte-order mark, zero-width space
        ("bell\x07 and \x1b[31mred", "bell and [31mred"),  # escapes do not reach a terminal
        ("two\tparts\nof it\r\n", "two parts of it"),  # whitespace controls read as a space
        ("  Quarterly report  ", "Quarterly report"),
    ],
)
def test_hiding_characters_go(sent: str, kept: str) -> None:
    assert displayable(sent) == kept


@pytest.mark.parametrize(
    "name",
    [
        "می\u200cخواهم.pdf",  # Persian with a zero-width non-joiner: the joiner shapes the word
        "family \U0001f468\u200d\U0001f469\u200d\U0001f467.txt",  # an emoji sequence held by ZWJ
        "عقد الإيجار.docx",  # right-to-left text itself is not a trick
        "Çà et là — 第1章.md",
    ],
)
def test_real_names_in_every_script_stay_whole(name: str) -> None:
    assert displayable(name) == name
