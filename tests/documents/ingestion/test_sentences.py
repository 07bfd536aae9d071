"""Sentence and paragraph spans: abbreviations, numbering, line breaks, and agreement with pysbd."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pysbd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from documents.ingestion.sentences import (
    BREAK_LINE,
    BREAK_PARAGRAPH,
    BREAK_SENTENCE,
    BREAK_WRAP,
    split_sentences,
)

REPO_ROOT = Path(__file__).resolve().parents[3]
SHARED_DIR = Path(os.environ.get("OPENFABLE_SHARED_DIR", REPO_ROOT.parent / "shared"))
DRAGONBALL_DOCS = SHARED_DIR / "datasets" / "dragonball" / "docs_en.jsonl"


def _sentences(text: str) -> list[str]:
    return [text[span.start : span.end] for span in split_sentences(text)]


def test_splits_at_sentence_ends_and_keeps_abbreviations_whole() -> None:
    text = (
        "Mr. Smith of Foo Inc. went to the U.S. on Jan. 5, 2020. He paid $5.00, i.e. 5.2% more. "
        "Dr. Q. Reyes agreed."
    )
    assert _sentences(text) == [
        "Mr. Smith of Foo Inc. went to the U.S. on Jan. 5, 2020.",
        "He paid $5.00, i.e. 5.2% more.",
        "Dr. Q. Reyes agreed.",
    ]


def test_section_numbers_and_list_markers_do_not_end_sentences() -> None:
    text = "See Section 2.3 of this Agreement. 4. Confidentiality. Each party shall keep it. No. 5 is late."
    assert _sentences(text) == [
        "See Section 2.3 of this Agreement. 4. Confidentiality.",
        "Each party shall keep it.",
        "No. 5 is late.",
    ]


def test_no_cut_before_lowercase_parenthesis_or_closing_quote() -> None:
    assert len(_sentences("It is approx. five metres. Foo Inc. (the Company) agrees.")) == 2
    # pysbd cuts these two differently depending on the quotes; keeping them together is safe.
    assert len(_sentences('It is the "Receiving Party." "Information" means data.')) == 1
    assert _sentences("Really? Yes! Fine...") == ["Really?", "Yes!", "Fine..."]


def test_every_line_break_is_a_boundary_with_a_strength() -> None:
    text = (
        "Name: Q. Reyes\nAge: 87\n\nChief Complaint:\nChest pain for 4 months.\n"
        "It began at home, and\nthen it got worse"
    )
    spans = split_sentences(text)
    assert [text[span.start : span.end] for span in spans] == [
        "Name: Q. Reyes",
        "Age: 87",
        "Chief Complaint:",
        "Chest pain for 4 months.",
        "It began at home, and",
        "then it got worse",
    ]
    assert [span.break_before for span in spans] == [
        BREAK_PARAGRAPH,  # the first sentence
        BREAK_LINE,  # form fields, one per line
        BREAK_PARAGRAPH,  # blank line
        BREAK_PARAGRAPH,  # after a colon
        BREAK_PARAGRAPH,  # after a finished sentence
        BREAK_WRAP,  # the line ends with a comma and the next starts in lowercase
    ]


def test_long_line_cut_without_punctuation_is_a_wrap() -> None:
    first = "Reseller agrees that any additional sales locations that are approved by the vendor in writing"
    text = f"{first} and\n\n\n\nMcDATA authorized sales locations will be governed by it."
    spans = split_sentences(text)
    assert len(spans) == 2
    assert spans[1].break_before == BREAK_WRAP
    assert split_sentences("Hello there. Next one.")[1].break_before == BREAK_SENTENCE


def test_paragraphs_start_at_blank_lines_and_line_ends_after_a_sentence() -> None:
    # The chunker (documents.ingestion.structural) keeps a paragraph's sentences together.
    text = "One. Two.\nThree is here.\n\n  Four,\nfive.  "
    assert [(text[span.start : span.end], span.break_before) for span in split_sentences(text)] == [
        ("One.", BREAK_PARAGRAPH),
        ("Two.", BREAK_SENTENCE),
        ("Three is here.", BREAK_PARAGRAPH),
        ("Four,", BREAK_PARAGRAPH),
        ("five.", BREAK_WRAP),  # after "Four," the line went on mid-sentence
    ]


def test_empty_and_blank_text_have_no_sentences() -> None:
    assert split_sentences("") == []
    assert split_sentences(" \n\t\r\n ") == []
    assert split_sentences("   ") == []


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from([*"ab A.?!:;,\"')(\n\r\t 5é—", "Mr.", "U.S.", "4. ", "\n\n"])).map("".join))
def test_spans_are_ordered_trimmed_and_cover_every_visible_character(text: str) -> None:
    spans = split_sentences(text)
    covered = [False] * len(text)
    previous_end = 0
    for span in spans:
        assert previous_end <= span.start < span.end <= len(text)
        assert not text[span.start].isspace() and not text[span.end - 1].isspace()
        for index in range(span.start, span.end):
            covered[index] = True
        previous_end = span.end
    assert all(covered[index] or char.isspace() for index, char in enumerate(text))


def _pysbd_starts(segmenter: pysbd.Segmenter, text: str) -> set[int]:
    starts = set()
    for sentence in segmenter.segment(text):
        start = sentence.start
        while start < len(text) and text[start].isspace():
            start += 1
        starts.add(start)
    return starts


def test_boundaries_are_pysbd_boundaries_on_dragonball() -> None:
    """The evaluation splits gold references with pysbd: a boundary pysbd does not have could cut a
    gold sentence in two, so on real documents every one of ours must be one of pysbd's."""
    if not DRAGONBALL_DOCS.exists():
        pytest.skip(f"DragonBall documents not found at {DRAGONBALL_DOCS} (set OPENFABLE_SHARED_DIR)")
    segmenter = pysbd.Segmenter(language="en", clean=False, char_span=True)
    documents = [json.loads(line)["content"] for line in DRAGONBALL_DOCS.open(encoding="utf-8")]
    checked = 0
    for text in documents[::9]:  # a dozen documents across the three domains
        ours = {span.start for span in split_sentences(text)}
        extra = sorted(ours - _pysbd_starts(segmenter, text))
        assert not extra, [text[max(0, start - 40) : start + 20] for start in extra[:5]]
        checked += len(ours)
    assert checked > 500
