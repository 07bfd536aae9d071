"""Heading detection: markdown, setext, numbered clauses (inline too), what is no heading, offsets."""

from __future__ import annotations

import re
from typing import SupportsIndex

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from documents.ingestion.heading_titles import TITLE_CHARS, Heading, clean_title, shorten, word_set
from documents.ingestion.headings import FRONT_MATTER, detect_headings, title_of_document

# A clause body long enough (in characters and lowercase words) to count as prose under a heading.
BODY = "The parties agree that the terms below apply to every order placed under this contract."


def _headings(text: str) -> list[Heading]:
    titles, headings = detect_headings(text)
    assert titles == [], [heading.title for heading in titles]
    return headings


def _slices(text: str, headings: list[Heading]) -> list[str]:
    return [text[heading.start : heading.title_end] for heading in headings]


# -- markdown


def test_markdown_headings_rank_by_level_and_span_their_own_line() -> None:
    text = f"Intro prose comes first.\n\n## Setup\n\n{BODY}\n\n### Wiring\n\n{BODY}\n\n## Use\n\n{BODY}\n"
    setup, wiring, use = _headings(text)
    assert _slices(text, [setup, wiring, use]) == ["## Setup", "### Wiring", "## Use"]
    assert [setup.title, wiring.title, use.title] == ["Setup", "Wiring", "Use"]
    assert setup.rank == use.rank < wiring.rank
    assert setup.path == () and setup.label == "" and setup.line_start


def test_atx_heading_rules_hashes_space_and_indent() -> None:
    text = (
        f"Intro prose.\n#hashtag\n{BODY}\n####### Seven\n{BODY}\n    # Code\n{BODY}\n#\n{BODY}\n"
        f"## Closed ##\n{BODY}\n   ### Indented three\n{BODY}\n###### Six\n{BODY}"
    )
    closed, indented, six = _headings(text)
    assert [closed.title, indented.title, six.title] == ["Closed", "Indented three", "Six"]
    # The indent is not part of the heading; the closing hashes are.
    assert _slices(text, [closed, indented, six]) == ["## Closed ##", "### Indented three", "###### Six"]
    assert text[indented.start - 3 : indented.start] == "   "
    assert closed.rank < indented.rank < six.rank


def test_a_unique_top_heading_at_the_start_titles_the_document() -> None:
    text = f"# Manual\n\nIntro text here.\n\n## Setup\n\n{BODY}\n\n## Use\n\n{BODY}\n"
    titles, headings = detect_headings(text)
    assert [text[h.start : h.title_end] for h in titles] == ["# Manual"]
    assert [heading.title for heading in headings] == ["Setup", "Use"]


def test_stacked_title_headings_with_nothing_between_all_title_the_document() -> None:
    text = f"# Bayside Court\n## Criminal Case Judgment\n### Facts\n{BODY}\n### Ruling\n{BODY}\n"
    titles, headings = detect_headings(text)
    assert [heading.title for heading in titles] == ["Bayside Court", "Criminal Case Judgment"]
    assert [heading.title for heading in headings] == ["Facts", "Ruling"]


def test_top_headings_that_repeat_are_sections_not_the_document_title() -> None:
    text = f"# One\n{BODY}\n# Two\n{BODY}\n"
    assert [heading.title for heading in _headings(text)] == ["One", "Two"]


def test_setext_headings_span_the_title_and_its_rule() -> None:
    text = (
        f"Preface prose.\n\nInstallation Guide\n==================\n\n{BODY}\n\n"
        f"Mounting Options\r\n----------------\r\n{BODY}\n"
    )
    guide, mounting = _headings(text)
    assert _slices(text, [guide, mounting]) == [
        "Installation Guide\n==================",
        "Mounting Options\r\n----------------",
    ]
    assert [guide.title, mounting.title] == ["Installation Guide", "Mounting Options"]
    assert guide.rank < mounting.rank  # "=" is level 1, "-" level 2


@pytest.mark.parametrize(
    "block",
    [
        "Title Here\n\n---",  # a blank line before the rule: a thematic break
        "the lower case line\n===",  # prose, not a title
        "This is a very long line that keeps going on and on far past fifteen words of text surely\n---",
        "---\n---",
    ],
)
def test_rules_that_do_not_underline_a_title_make_no_heading(block: str) -> None:
    assert _headings(f"Intro prose.\n\n{block}\n{BODY}\n") == []


# -- numbered clauses


def test_numbered_headings_on_their_own_lines_nest_by_depth() -> None:
    text = (
        f"1. Scope\n{BODY}\n2. Price\n{BODY}\n2.1 Discounts\n{BODY}\n2.2 Taxes\n{BODY}\n3. Delivery\n{BODY}\n"
    )
    headings = _headings(text)
    assert _slices(text, headings) == ["1. Scope", "2. Price", "2.1 Discounts", "2.2 Taxes", "3. Delivery"]
    assert [h.label for h in headings] == ["1.", "2.", "2.1", "2.2", "3."]
    assert [h.path for h in headings] == [(1,), (2,), (2, 1), (2, 2), (3,)]
    assert {h.family for h in headings} == {"number"}
    assert headings[1].rank < headings[2].rank == headings[3].rank
    assert all(h.line_start for h in headings)


def test_inline_numbered_headings_of_a_pdf_extracted_contract() -> None:
    text = (
        "This Agreement is made between the parties named below. 1. Definitions. In this Agreement "
        "the following terms have the meanings given. 2. Term. This Agreement starts on the date of "
        "signature and runs for two years. 3. Payment. The buyer pays the seller within thirty days."
    )
    headings = _headings(text)
    assert _slices(text, headings) == ["1. Definitions.", "2. Term.", "3. Payment."]
    assert [h.title for h in headings] == ["1. Definitions", "2. Term", "3. Payment"]
    assert not any(h.line_start for h in headings)


def test_an_inline_title_ends_where_the_clause_text_begins() -> None:
    text = (
        f"Recitals. 1. Definitions {BODY} 1.1 Products The goods. {BODY} "
        f"1.2 Services The work. {BODY} 2. Payment {BODY}"
    )
    headings = _headings(text)
    assert [h.title for h in headings] == ["1. Definitions", "1.1 Products", "1.2 Services", "2. Payment"]
    # The title runs up to the first word of the clause ("The"), the space before it included.
    assert text[headings[1].title_end :].startswith("The goods.")
    assert _slices(text, headings)[1] == "1.1 Products "


def test_a_heading_and_its_first_subclause_on_one_line_are_two_headings() -> None:
    """CUAD's supply agreement: "2. PRODUCT MANUFACTURE AND SUPPLY 2.1 Manufacture and Purchase."
    was one title, and 2.1 no heading at all."""
    text = (
        f"Recitals. {BODY}\n\n2. PRODUCT MANUFACTURE AND SUPPLY 2.1 Manufacture and Purchase. Supplier "
        f"shall make the Products. {BODY} 2.2 Forecasts. {BODY}\n\n3. PRICE AND PAYMENT 3.1 Prices. {BODY}"
    )
    headings = _headings(text)
    assert [h.title for h in headings] == [
        "2. PRODUCT MANUFACTURE AND SUPPLY",
        "2.1 Manufacture and Purchase",
        "2.2 Forecasts",
        "3. PRICE AND PAYMENT",
        "3.1 Prices",
    ]
    assert [h.path for h in headings] == [(2,), (2, 1), (2, 2), (3,), (3, 1)]
    # The section's heading is its line up to the subclause, which starts a heading of its own.
    assert _slices(text, headings)[0] == "2. PRODUCT MANUFACTURE AND SUPPLY"
    assert text[headings[1].start :].startswith("2.1 Manufacture and Purchase.")


def test_a_title_running_into_a_defined_term_keeps_its_heading() -> None:
    """ "1. DEFINITIONS 1.1 "Affiliate" means ...": the title was lost (the whole line is no title)
    and the section was named by a key phrase ("1. Manufacturing activities")."""
    text = (
        f'Recitals. {BODY}\n\n1. DEFINITIONS 1.1 "Affiliate" means any entity that controls a party. '
        f'1.2 "Products" means the goods listed in Exhibit A. {BODY}\n\n'
        f"2. TERM AND TERMINATION 2.1 This Agreement starts on the Effective Date. {BODY}"
    )
    headings = _headings(text)
    assert [h.title for h in headings] == ["1. DEFINITIONS", "", "", "2. TERM AND TERMINATION", ""]
    assert [h.path for h in headings] == [(1,), (1, 1), (1, 2), (2,), (2, 1)]
    assert [h.label for h in headings] == ["1.", "1.1", "1.2", "2.", "2.1"]


def test_a_title_in_capitals_that_runs_into_its_clause_is_kept() -> None:
    """CUAD's Philips supply agreement: "17. REGULATORY MATTERS Until execution of ..." lost its
    title and was named by a key phrase ("17. Governmental Authority")."""
    text = (
        f"16. EXPORT CONTROL. {BODY}\n\n17. REGULATORY MATTERS Until execution of the Quality Agreement, "
        f"the following provision shall govern. {BODY}\n\n18. FDA Approval Each party files. {BODY}"
    )
    headings = _headings(text)
    assert [h.title for h in headings] == ["16. EXPORT CONTROL", "17. REGULATORY MATTERS", "18. FDA Approval"]
    assert text[headings[1].title_end :].startswith(" Until execution")


def test_a_first_subclause_does_not_make_a_contents_list() -> None:
    """Four numbers within 80 characters read as a table of contents; a section's first subclause
    right after its title is no entry of such a list (CUAD: "6.5 [Redacted] 6.6 [Redacted]
    7. CONFORMITY OF PRODUCTS 7.1 Philips represents ..." lost section 7)."""
    text = (
        f"6. PRICE AND PAYMENT 6.1 Prices. {BODY} 6.5 [Redacted - Payment Details] 6.6 [Redacted]\n\n"
        f"7. CONFORMITY OF PRODUCTS 7.1 Philips represents that the goods conform. {BODY} 7.2 Repairs. {BODY}"
    )
    titles = [h.title for h in detect_headings(text)[1]]
    assert "7. CONFORMITY OF PRODUCTS" in titles
    assert [h.label for h in detect_headings(text)[1] if h.path[:1] == (7,)] == ["7.", "7.1", "7.2"]


def test_numbered_headings_after_a_wide_extraction_gap_or_without_their_space() -> None:
    gap = f"the buyer   1. Term {BODY}   2. Price {BODY}"
    assert [h.title for h in _headings(gap)] == ["1. Term", "2. Price"]
    squashed = f"Whereas the parties wish to trade. 1.DEFINITIONS {BODY} 2.PAYMENT {BODY} 3.TERM {BODY}"
    headings = _headings(squashed)
    assert [h.title for h in headings] == ["1. DEFINITIONS", "2. PAYMENT", "3. TERM"]
    assert [squashed[h.start : h.start + 5] for h in headings] == ["1.DEF", "2.PAY", "3.TER"]


def test_article_title_on_the_next_line_joins_the_heading() -> None:
    text = (
        "ARTICLE I\n\nINTERPRETATION\n\nThe words in this agreement have the meanings given in the "
        "schedule that follows.\n\nARTICLE II\n\nPAYMENT\n\nThe buyer pays the price within thirty days "
        "of the invoice date as agreed.\n"
    )
    first, second = _headings(text)
    assert _slices(text, [first, second]) == ["ARTICLE I\n\nINTERPRETATION", "ARTICLE II\n\nPAYMENT"]
    assert [first.title, second.title] == ["ARTICLE I INTERPRETATION", "ARTICLE II PAYMENT"]
    assert (first.family, first.path, second.path) == ("article", (1,), (2,))
    assert [first.label, second.label] == ["ARTICLE I", "ARTICLE II"]


def test_section_keyword_and_bold_roman_numerals() -> None:
    sections = f"Section 1. Scope\n{BODY}\nSection 2. Price\n{BODY}\n"
    assert [(h.label, h.title) for h in _headings(sections)] == [
        ("Section 1", "Section 1 Scope"),
        ("Section 2", "Section 2 Price"),
    ]
    roman = f"Intro prose.\n**I. Background**\n{BODY}\n**II. Charge**\n{BODY}\n"
    headings = _headings(roman)
    # The node starts with the line, its bold markup included.
    assert _slices(roman, headings) == ["**I. Background**", "**II. Charge**"]
    assert [(h.family, h.path, h.title) for h in headings] == [
        ("roman", (1,), "I. Background"),
        ("roman", (2,), "II. Charge"),
    ]


def test_markdown_heading_holding_a_number_is_one_heading() -> None:
    text = f"Intro prose.\n## 1. Setup\n{BODY}\n## 2. Use\n{BODY}\n"
    headings = _headings(text)
    assert _slices(text, headings) == ["## 1. Setup", "## 2. Use"]
    assert [(h.family, h.title) for h in headings] == [("", "1. Setup"), ("", "2. Use")]


def test_lowercase_numbered_list_in_prose_is_no_heading() -> None:
    text = (
        "The buyer must do three things before delivery.\n1. pay the deposit\n2. sign the form\n"
        "3. book a slot\nAfter that the seller ships the goods."
    )
    assert _headings(text) == []


@pytest.mark.parametrize(
    "text",
    [
        "The fee rose to 5. The tenant paid 10. Then the landlord asked for 12. Nothing else happened.",
        "The rate is 1.5 Percent of the total. It rose to 2.5 Percent in May. Then 3.5 Percent.",
        "Totals were 4) Three and 5) Four and 6) Five in the list, all of them late.",
    ],
)
def test_numbers_inside_sentences_are_no_headings(text: str) -> None:
    assert _headings(text) == []


def test_references_to_sections_are_no_headings() -> None:
    text = (
        "Intro prose.\nSection 2.3 of this Agreement applies to all orders.\nSection 4 (b) is void.\n"
        "Section 5(b) applies too. As stated in Section 2.3 the price is fixed.\n"
    )
    assert _headings(text) == []


def test_a_lone_numbered_candidate_or_one_out_of_order_is_dropped() -> None:
    assert _headings(f"Intro prose.\n1. Scope\n{BODY}\n") == []
    text = f"1. Scope\n{BODY}\n3. Price\n{BODY}\n2. Delivery\n{BODY}\n"
    assert _slices(text, _headings(text)) == ["1. Scope", "2. Delivery"]


def test_table_of_contents_lines_are_dropped_and_the_body_headings_kept() -> None:
    contents = "CONTENTS\n1. Scope 2\n2. Price 3\n3. Delivery 4\n4. Warranty 5\n"
    preamble = "This preamble, written by the parties before the clauses, explains why they made the deal.\n"
    body = "".join(f"{i}. {name}\n{BODY}\n" for i, name in enumerate(["Scope", "Price", "Delivery"], 1))
    text = contents + preamble + body
    headings = _headings(text)
    assert [h.title for h in headings] == ["1. Scope", "2. Price", "3. Delivery"]
    assert all(h.start > len(contents) for h in headings)


def test_the_first_heading_right_after_a_table_of_contents_is_kept() -> None:
    contents = "CONTENTS\n1. Scope 2\n2. Price 3\n3. Delivery 4\n4. Warranty 5\n\n"
    names = ["Scope", "Price", "Delivery", "Warranty"]
    text = contents + "".join(f"{i}. {name}\n{BODY}\n" for i, name in enumerate(names, 1))
    assert [h.title for h in _headings(text)] == ["1. Scope", "2. Price", "3. Delivery", "4. Warranty"]


# -- bold lines, "Label:" lines, attachments


def test_bold_lines_are_headings_only_when_there_are_two() -> None:
    two = (
        "Some intro prose first.\n\n**Chief Complaint**\nThe patient reports pain in the left knee.\n\n"
        "**Present Illness**\nThe pain started two weeks ago.\n"
    )
    headings = _headings(two)
    assert _slices(two, headings) == ["**Chief Complaint**", "**Present Illness**"]
    assert [(h.family, h.title) for h in headings] == [
        ("bold", "Chief Complaint"),
        ("bold", "Present Illness"),
    ]
    one = "Some intro prose first.\n\n**Important**\nThe patient reports pain in the left knee.\n"
    assert _headings(one) == []


def test_label_lines_are_the_last_resort() -> None:
    form = "Name:\nJohn Smith\nDate Of Birth:\n1 May 1970\nAddress:\n12 High Street\n"
    headings = _headings(form)
    assert _slices(form, headings) == ["Name:", "Date Of Birth:", "Address:"]
    assert [(h.family, h.title) for h in headings] == [
        ("label", "Name"),
        ("label", "Date Of Birth"),
        ("label", "Address"),
    ]
    assert _headings("Name:\nJohn Smith\nAddress:\n12 High Street\n") == []  # two are too few
    with_markdown = f"Name:\nJohn\nAge:\n40\nWard:\nB\n## Notes\n{BODY}\n## Plan\n{BODY}\n"
    assert [h.title for h in _headings(with_markdown)] == ["Notes", "Plan"]


def test_a_label_under_a_thematic_break_opens_a_part_above_the_numbered_lists_inside_it() -> None:
    # A judgment whose parts are set off by "---" rules and named by a "Label:" line; one part
    # lists its evidence "1. ..." to "3. ...". Before, the numbered items were the only headings
    # and the last one ran to the end, swallowing the sentence and the judgment.
    items = "\n".join(
        f"{n}. {name}: {BODY}" for n, name in enumerate(["Equipment", "Currency", "Footage"], 1)
    )
    text = (
        f"Court Information:\nPresiding Court: Riverton\n\n---\nEvidence Description:\n{BODY}\n\n"
        f"{items}\n\n---\nJudgment Result:\n{BODY}\n\n* * *\n\nAppeal Rights:\n{BODY}\n"
    )
    headings = _headings(text)
    assert [(h.family, h.title) for h in headings] == [
        ("part", "Evidence Description"),
        ("number", "1. Equipment"),
        ("number", "2. Currency"),
        ("number", "3. Footage"),
        ("part", "Judgment Result"),
        ("part", "Appeal Rights"),
    ]
    assert headings[0].rank < headings[1].rank, "the numbered items sit inside the part"
    # Without the rule, a label is still the last resort (no part above the numbered list).
    plain = text.replace("---\n", "").replace("* * *\n\n", "")
    assert "part" not in {h.family for h in _headings(plain)}


def test_attachments_after_the_body_are_sections() -> None:
    text = f"{BODY}\n" * 4 + f"EXHIBIT A\n{BODY}\nSchedule 2 Territory\n{BODY}"
    headings = _headings(text)
    assert _slices(text, headings) == ["EXHIBIT A", "Schedule 2 Territory"]
    assert {(h.family, h.rank) for h in headings} == {("appendix", 5.0)}


def test_filing_numbers_early_exhibits_and_running_headers_are_no_attachments() -> None:
    filing = f"{BODY}\n" * 4 + f"Exhibit 10.38\n{BODY}\nEXHIBIT A\n{BODY}"
    assert [h.title for h in _headings(filing)] == ["EXHIBIT A"]
    assert _headings(f"EXHIBIT A\n{BODY}") == []  # atop the text: the filing's own label
    running = f"{BODY}\n" * 4 + f"EXHIBIT B\n{BODY}\n" * 3
    assert _headings(running) == []


# -- headings without a body


def test_an_empty_heading_joins_its_following_sibling() -> None:
    text = f"Intro prose that opens it all.\n\n## Part One\n## Part Two\n{BODY}\n"
    (heading,) = _headings(text)
    assert _slices(text, [heading]) == ["## Part One\n## Part Two"]
    assert heading.title == "Part One"


def test_an_empty_heading_before_a_higher_one_is_no_heading() -> None:
    text = f"Intro prose that opens it all.\n\n### Minor\n## Major\n{BODY}\n"
    assert _slices(text, _headings(text)) == ["## Major"]


# -- titles


def test_clean_title_drops_markup_and_edge_punctuation() -> None:
    assert clean_title("**Payment Terms:**") == "Payment Terms"
    assert clean_title("  [Scope] - ") == "Scope"
    assert clean_title("Section 4 \u2014") == "Section 4"
    assert clean_title("Price\\") == "Price"
    assert clean_title("Net   30\tdays") == "Net 30 days"
    long = clean_title("Word " * 40)
    assert len(long) <= TITLE_CHARS and long.endswith("Word\u2026")


def test_a_hash_inside_a_word_is_no_markup() -> None:
    text = f"Intro prose.\n## C# Basics\n{BODY}\n## Using F#\n{BODY}\n"
    assert [h.title for h in _headings(text)] == ["C# Basics", "Using F#"]


def test_shorten_cuts_at_a_word_boundary_with_an_ellipsis() -> None:
    assert shorten("Payment terms", 13) == "Payment terms"
    assert shorten("Payment terms and conditions", 20) == "Payment terms and\u2026"
    assert shorten("Scope, price, delivery", 15) == "Scope, price\u2026"  # no comma before the ellipsis
    assert shorten("Supercalifragilistic", 6) == "Super\u2026"  # one long word: cut inside it


def test_word_set_splits_on_any_blank() -> None:
    assert word_set("a  b\nc\ta b") == frozenset({"a", "b", "c"})


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=200), st.integers(min_value=1, max_value=100))
def test_shorten_never_passes_the_limit_and_keeps_a_prefix(text: str, limit: int) -> None:
    short = shorten(text, limit)
    assert len(short) <= limit
    if len(text) <= limit:
        assert short == text
    else:
        assert short.endswith("\u2026") and text.startswith(short[:-1])


_PIECES = [
    *["# ", "## ", "1. ", "1.1 ", "2. ", "2.1 ", "3. ", "ARTICLE ", "I", "IV", "Section ", "**", "__"],
    *["EXHIBIT A", "Scope", "the price", "Payment Terms", "shall pay", "The", "Name:", "5", "x"],
    *[" ", "   ", "\n", "\n\n", "\r\n", ".", ":", "=====", "---", "\u00a0", "(", '"', BODY],
]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(_PIECES), max_size=40).map("".join))
# Found by a run: the number's marker joined to a title already at the limit ran past it.
@example("1. Payment Terms1. 2. Payment Terms1.1 1. Payment TermsPayment TermsPayment Terms")
def test_headings_lie_inside_the_text_in_order_with_short_titles(text: str) -> None:
    titles, headings = detect_headings(text)
    found = titles + headings
    starts = [heading.start for heading in found]
    assert starts == sorted(set(starts))
    for heading in found:
        assert 0 <= heading.start < heading.title_end <= len(text)
        assert len(heading.title) <= TITLE_CHARS and heading.title == heading.title.strip()


class _CountedText(str):
    """Text that counts the characters read through slices of it."""

    read = 0

    def __getitem__(self, key: SupportsIndex | slice) -> str:
        piece = str.__getitem__(self, key)
        type(self).read += len(piece)
        return piece


def test_a_long_single_line_is_read_a_bounded_number_of_times() -> None:
    """A numbered clause's title used to be looked for in the whole rest of its line: a 3 MB
    single-line text with 3,000 numbers took 145 s there (quadratic). Each number now reads a
    bounded stretch, so the work stays proportional to the text."""
    clauses = [
        f"{index % 90 + 1}. Payment Terms. The buyer pays within thirty days." for index in range(2000)
    ]
    text = _CountedText(" ".join(clauses))
    _CountedText.read = 0
    detect_headings(text)
    assert _CountedText.read < 10 * len(text), f"read {_CountedText.read / len(text):.0f} times the text"


# -- headings first: the numbering settles what the font guessed


def test_a_font_guessed_heading_takes_its_level_from_its_numbering() -> None:
    text = (
        f"Exhibit 10.1\n\n# SUPPLY AGREEMENT\n\n{BODY}\n\nARTICLE II EQUIPMENT\n\n"
        f"# Section 2.1 Equipment Purchase. {BODY}\n\nSection 2.2 Delivery. {BODY}\n\n"
        f"ARTICLE III SERVICE\n\n{BODY}\n\n# RECITALS AND NOTES\n\n{BODY}\n"
    )
    marks = frozenset(match.start() for match in re.finditer(r"(?m)^# ", text))
    titles, headings = detect_headings(text, font_heading_starts=marks)
    # The bold line atop the file, under its filing label, is the title, not section 1; the
    # label above it opens the title's lines, no part of what the title says.
    assert [(heading.title, heading.family) for heading in titles] == [
        ("Exhibit 10.1", FRONT_MATTER),
        ("SUPPLY AGREEMENT", "font"),
    ]
    assert title_of_document(titles) == "SUPPLY AGREEMENT"
    ranks = {heading.title: heading.rank for heading in headings}
    assert (
        ranks["ARTICLE II EQUIPMENT"]
        == ranks["ARTICLE III SERVICE"]
        < ranks["Section 2.1 Equipment Purchase"]
    )
    assert ranks["Section 2.1 Equipment Purchase"] == ranks["Section 2.2 Delivery"]
    # An unnumbered bold heading stands beside the top numbered level.
    assert ranks["RECITALS AND NOTES"] == ranks["ARTICLE II EQUIPMENT"]


def test_the_same_markdown_without_font_marks_keeps_the_authors_levels() -> None:
    text = f"# Guide\n\n{BODY}\n\n## 1. Setup\n\n{BODY}\n\n# Appendix notes\n\n{BODY}\n"
    _titles, headings = detect_headings(text)
    assert {heading.title: heading.rank for heading in headings}["Appendix notes"] < min(
        heading.rank for heading in headings if heading.title == "1. Setup"
    )


def test_titled_lettered_sub_clauses_are_headings_under_their_clause() -> None:
    text = (
        f"1. Fees.\n\n(a) Fee. {BODY}\n\n(b) The Sponsor shall pay on time.\n\n(c) Taxes. {BODY}\n\n"
        f"2. Term.\n\n(a) Renewal. {BODY}\n\n(b) Schedule A - Products;\n\n(c) Survival. {BODY}\n\n"
        "As set out in (b) above.\n"
    )
    headings = _headings(text)
    titles = [heading.title for heading in headings]
    # Untitled ones count for the run but are clauses; a list item ending in ";" is no heading.
    assert titles == ["1. Fees", "(a) Fee", "(c) Taxes", "2. Term", "(a) Renewal", "(c) Survival"]
    fees, fee = headings[0], headings[1]
    assert fees.rank < fee.rank


def test_a_lone_lettered_item_is_no_heading() -> None:
    text = f"1. Fees.\n\n(c) Taxes. {BODY}\n\n2. Term.\n\n{BODY}\n"
    assert [heading.title for heading in _headings(text)] == ["1. Fees", "2. Term"]


def test_an_article_number_alone_on_its_line_names_its_section() -> None:
    text = (
        f"CHAPTER 1 GENERAL\n\n{BODY}\n\nCHAPTER 2 PARTIES\n\n{BODY}\n\nArticle 1\n\n{BODY}\n\n"
        f"Article 2\n\n{BODY}\n"
    )
    titles = [heading.title for heading in _headings(text)]
    assert titles == ["CHAPTER 1 GENERAL", "CHAPTER 2 PARTIES", "Article 1", "Article 2"]


def test_a_short_line_in_capitals_is_a_top_level_part_but_not_a_running_header() -> None:
    text = (
        f"Preamble text of the parties.\n\nRECITALS\n\n{BODY}\n\n1. Scope\n\n{BODY}\n\n"
        f"EXECUTION COPY\n\n{BODY}\n\n2. Price\n\n{BODY}\n\nEXECUTION COPY\n\n{BODY}\n\n"
        f"EXECUTION COPY\n\n{BODY}\n\nACME CORPORATION\n\nBy: ________\n"
    )
    headings = _headings(text)
    assert [heading.title for heading in headings] == ["RECITALS", "1. Scope", "2. Price"]
    assert headings[0].rank == headings[1].rank


def test_an_exhibit_numbers_its_clauses_anew() -> None:
    body = "".join(f"{n}. {name}\n\n{BODY}\n\n" for n, name in enumerate(["Scope", "Price", "Term"], 1))
    exhibit = "".join(f"{n}. {name}\n\n{BODY}\n\n" for n, name in enumerate(["Signage", "Media"], 1))
    text = f"Intro.\n\n{body}EXHIBIT A SPONSORSHIP RIGHTS\n\n{BODY}\n\n{exhibit}"
    titles = [heading.title for heading in _headings(text)]
    assert titles[-3:] == ["EXHIBIT A SPONSORSHIP RIGHTS", "1. Signage", "2. Media"]


def test_an_attachment_label_whose_line_break_became_spaces_opens_its_section() -> None:
    # A plain-text contract converted from print: each printed line break is a run of spaces, so
    # the schedule's label shares its line with the text after it, and its clauses run inline.
    body = "   ".join(f"{n}. {name}. {BODY}" for n, name in enumerate(["Scope", "Price", "Term"], 1))
    terms = "   ".join(f"{n}. {name}: {BODY}" for n, name in enumerate(["Orders", "Delivery"], 1))
    text = f"Intro.\n\n{body}\n\nBy: /s/ A. Smith\n\nSchedule A   List of Products to be offered.   {terms}"
    headings = _headings(text)
    assert [heading.title for heading in headings][-3:] == ["Schedule A", "1. Orders", "2. Delivery"]
    assert _slices(text, headings)[-3] == "Schedule A", "the label alone, not the line it shares"
    assert headings[-3].rank < headings[-2].rank
    # Mentioned inside a sentence, or with a sentence where its spaces end, it is no label.
    for line in [
        "Schedule A   and Schedule B list the products.",
        "Schedule A sets out the products.   Next.",
    ]:
        assert "Schedule A" not in [h.title for h in _headings(f"{BODY}\n" * 4 + f"{line}\n{BODY}")]


def test_capital_lettered_clauses_sit_between_numbers_and_small_letters() -> None:
    text = (
        f"1. Payments.\n\nA. Cash Payment. {BODY}\n\n(a) Timing. {BODY}\n\n(b) Currency. {BODY}\n\n"
        f"B. Expenses. {BODY}\n\n2. Term.\n\n{BODY}\n\nJ. Smith signed below.\n"
    )
    headings = _headings(text)
    ranks = {heading.title: heading.rank for heading in headings}
    assert list(ranks) == [
        "1. Payments",
        "A. Cash Payment",
        "(a) Timing",
        "(b) Currency",
        "B. Expenses",
        "2. Term",
    ]
    assert ranks["1. Payments"] < ranks["A. Cash Payment"] == ranks["B. Expenses"] < ranks["(a) Timing"]


def test_smaller_font_headings_sit_under_larger_ones_and_above_the_numbers() -> None:
    text = (
        f"Chapter 1 Introduction\n\n{BODY}\n\n## Purpose\n\n{BODY}\n\n# Scope of the Handbook\n\n{BODY}\n\n"
        f"Chapter 2 Hours\n\n{BODY}\n\n## Core Hours\n\n{BODY}\n"
    )
    marks = frozenset(match.start() for match in re.finditer(r"(?m)^#+ ", text))
    _titles, headings = detect_headings(text, font_heading_starts=marks)
    ranks = {heading.title: heading.rank for heading in headings}
    assert ranks["Chapter 1 Introduction"] == ranks["Scope of the Handbook"] < ranks["Purpose"]
    assert ranks["Purpose"] == ranks["Core Hours"]


def test_paragraphs_that_open_with_their_own_title_are_headings_when_it_is_the_pattern() -> None:
    text = (
        f"ARTICLE I LICENSE\n\nGrant of License. {BODY}\n\nProprietary Markings. {BODY}\n\n"
        f"ARTICLE II SERVICES\n\nSupport Services. {BODY}\n\nThe Company. {BODY}\n\nB. Second point. {BODY}\n"
    )
    headings = _headings(text)
    ranks = {heading.title: heading.rank for heading in headings}
    assert list(ranks) == [
        "ARTICLE I LICENSE", "Grant of License", "Proprietary Markings", "ARTICLE II SERVICES", "Support Services"
    ]  # fmt: skip
    assert ranks["ARTICLE I LICENSE"] < ranks["Grant of License"]
    # Once is a sentence, not structure.
    once = f"1. Scope\n\n{BODY}\n\nGrant of License. {BODY}\n\n2. Price\n\n{BODY}\n"
    assert [heading.title for heading in _headings(once)] == ["1. Scope", "2. Price"]


def test_a_partys_name_in_bold_over_its_signature_is_no_heading() -> None:
    text = f"1. Scope\n\n{BODY}\n\n2. Price\n\n{BODY}\n\n# ACME CORPORATION\n\nBy: __________\n"
    marks = frozenset([text.index("# ACME")])
    _titles, headings = detect_headings(text, font_heading_starts=marks)
    assert [heading.title for heading in headings] == ["1. Scope", "2. Price"]


def test_a_numbering_that_starts_again_under_a_letter_sits_under_that_letter() -> None:
    inner = "".join(f"{n}. {name}. {BODY}\n\n" for n, name in enumerate(["Wire", "Deductions", "Taxes"], 1))
    inner += f"4. Union Fees. {BODY}\n\n5. Development. {BODY}\n\n"
    text = (
        f"1. Scope. {BODY}\n\n2. Payments. {BODY}\n\nA. Cash Payment.\n\n{inner}"
        f"B. Stock Award. {BODY}\n\n3. Warranties. {BODY}\n\n4. Termination. {BODY}\n\n5. Notices. {BODY}\n"
    )
    ranks = {heading.title: heading.rank for heading in _headings(text)}
    # The inner "4." and "5." are not taken for the outer ones: the letters A and B count on
    # around them, so they lie inside "A.".
    assert ranks["4. Termination"] == ranks["5. Notices"] == ranks["2. Payments"]
    assert ranks["A. Cash Payment"] < ranks["1. Wire"] == ranks["4. Union Fees"] == ranks["5. Development"]
    assert ranks["B. Stock Award"] == ranks["A. Cash Payment"]


def test_roman_items_inside_a_lettered_clause_do_not_end_its_run() -> None:
    text = (
        f"1. Warranties.\n\n(a) By the Team. The Team warrants the following:\n\n(i) {BODY}\n\n(ii) {BODY}\n\n"
        f"(b) By the Sponsor. The Sponsor warrants the following:\n\n(i) {BODY}\n\n2. Term. {BODY}\n"
    )
    titles = [heading.title for heading in _headings(text)]
    assert titles == ["1. Warranties", "(a) By the Team", "(b) By the Sponsor", "2. Term"]


def test_short_titles_in_sentence_case_and_small_letters_are_headings() -> None:
    text = (
        f"1. Services.\n\nA. Service Days. {BODY}\n\n1. Production days. Up to four days. {BODY}\n\n"
        f"2. Personal appearances. CELEBRITY shall appear. {BODY}\n\nB. Social media posts. {BODY}\n\n"
        f"2. Termination.\n\na. Termination by the Company. {BODY}\n\nb. Termination by ABG. {BODY}\n\n"
        f"3. Payment is due. The fee is paid monthly. {BODY}\n\n4. Notices. {BODY}\n"
    )
    titles = [heading.title for heading in _headings(text)]
    assert "1. Production days" in titles and "2. Personal appearances" in titles
    assert "B. Social media posts" in titles
    assert "a. Termination by the Company" in titles and "b. Termination by ABG" in titles
    # A short sentence of its own is no title.
    assert "3. Payment is due" not in titles


def test_a_blank_inside_a_sentence_is_no_signature_line() -> None:
    text = (
        f"1. Parties\n\n{BODY}\n\n# 2. Scope\n\nThis agreement is dated January ___, 2016 and {BODY}\n\n"
        f"3. Term\n\n{BODY}\n"
    )
    marks = frozenset([text.index("# 2. Scope")])
    _titles, headings = detect_headings(text, font_heading_starts=marks)
    assert [heading.title for heading in headings] == ["1. Parties", "2. Scope", "3. Term"]


def test_an_empty_attachment_before_the_next_one_keeps_both_titles() -> None:
    text = (
        f"1. Scope\n\n{BODY} {BODY}\n\n2. Price\n\n{BODY} {BODY}\n\nExhibit 3 Business Plan\n\n"
        f"Exhibit 4 QUALITY AGREEMENT\n\n{BODY}\n"
    )
    titles = [heading.title for heading in _headings(text)]
    assert titles[-2:] == ["Exhibit 3 Business Plan", "Exhibit 4 QUALITY AGREEMENT"]


def test_close_numbered_headings_that_never_recur_are_the_body_not_a_contents_list() -> None:
    text = (
        f"8. COOPERATION\n\n8.1 {BODY}\n\n8.2 [***]\n\n9. PRICES AND BILLING\n\n9.1 Costs\n\n9.1.1 {BODY}\n\n"
        f"9.1.2 {BODY}\n\n9.2 Charging\n\n9.2.1 {BODY}\n\n10. NOTICES\n\n{BODY}\n"
    )
    titles = [heading.title for heading in _headings(text)]
    assert "9. PRICES AND BILLING" in titles and "9.1 Costs" in titles


def test_a_numbered_heading_under_a_list_of_appendices_is_no_appendix_title() -> None:
    listed = "".join(f"Appendix {n} Schedule of item {n}\n" for n in range(1, 6))
    text = (
        f"1. Scope\n\n{BODY} {BODY}\n\n2. Appendices\n\nThe appendices form part of it:\n\n{listed}"
        f"Appendix 6 ** *\n\n3. HOSTING SERVICES\n\n{BODY}\n\n4. Term\n\n{BODY}\n"
    )
    titles = [heading.title for heading in _headings(text)]
    assert "3. HOSTING SERVICES" in titles


def test_lettered_sub_clauses_after_their_clause_number_and_a_part_name_over_an_untitled_clause() -> None:
    text = (
        f"1. Scope. {BODY}\n\n2. Term. {BODY}\n\n# CONFIDENTIALITY\n\n3. a. Confidentiality. {BODY}\n\n"
        f"3. b. Notification obligation. {BODY}\n\n3. c. Survival. {BODY}\n\n"
        f"# INDEMNIFICATION\n\n4. In connection with the offer, {BODY}\n\n5. Governing law. {BODY}\n"
    )
    marks = frozenset(match.start() for match in re.finditer(r"(?m)^# ", text))
    _titles, headings = detect_headings(text, font_heading_starts=marks)
    titles = [heading.title for heading in headings]
    assert "a. Confidentiality" in titles and "b. Notification obligation" in titles
    # The untitled "4." under the part's name: one section, named by the part.
    assert "INDEMNIFICATION" in titles


def test_a_title_may_end_on_a_number_but_not_on_a_small_word() -> None:
    from documents.ingestion.heading_titles import is_titleish

    assert is_titleish("Priorities for 2024", max_words=10)
    assert not is_titleish("Terms of", max_words=10)


def test_a_schedules_parts_numbered_by_a_code_are_headings_one_run_per_code() -> None:
    body = "".join(f"{n}. {name}\n\n{BODY}\n\n" for n, name in enumerate(["Scope", "Price", "Term"], 1))
    parts = "".join(
        f"Section G{n}: {name} Services\n\n{BODY}\n\n" for n, name in enumerate(["IT", "HR", "Tax"], 1)
    )
    reverse = "".join(f"Section GR{n}: {name}\n\n{BODY}\n\n" for n, name in enumerate(["IT", "Legal"], 1))
    text = (
        f"Intro.\n\n{body}EXHIBIT A TRANSITION SERVICES\n\n{parts}EXHIBIT B REVERSE SERVICES\n\n{reverse}"
        "As set out in Section G1 of Exhibit A.\n"
    )
    headings = _headings(text)
    ranks = {heading.title: heading.rank for heading in headings}
    assert "Section G2: HR Services" in ranks and "Section GR2: Legal" in ranks
    assert ranks["EXHIBIT A TRANSITION SERVICES"] < ranks["Section G1: IT Services"]
    # A mention in a sentence has no colon: no heading.
    assert sum(title.startswith("Section G1") for title in ranks) == 1


def test_a_bold_title_under_an_attachments_label_is_its_title_not_a_part_of_it() -> None:
    """ "SCHEDULE 3" in plain capitals, the title in bold under it: one attachment, titled by both."""
    text = (
        f"1. Scope\n\n{BODY} {BODY}\n\n2. Price\n\n{BODY} {BODY}\n\nSCHEDULE 3\n\n# JURISDICTIONS OF QUALIFICATION\n\n"
        "The company is qualified in Alabama, California and Florida.\n"
    )
    marks = frozenset([text.index("# JURISDICTIONS")])
    _titles, headings = detect_headings(text, font_heading_starts=marks)
    assert [heading.title for heading in headings] == [
        "1. Scope",
        "2. Price",
        "SCHEDULE 3 JURISDICTIONS OF QUALIFICATION",
    ]


def test_a_numbered_line_the_font_sets_apart_is_titled_by_the_whole_line() -> None:
    """ "9.1 Development costs & prices" does not read as a title by its words (few capitals), but
    the font set it apart as a heading line; a bold sentence ("9.4 Ongoing support of the team.")
    stays untitled."""
    text = (
        f"9. PRICES\n\n{BODY}\n\n## 9.1 Development costs & prices for Hosting Services\n\n{BODY}\n\n"
        f"## 9.2 Laboratory Controls-N/A\n\n## 9.3 Charging\n\n{BODY}\n\n"
        f"## 9.4 Ongoing support of the team.\n\n{BODY}\n\n10. NOTICES\n\n{BODY}\n"
    )
    marks = frozenset(match.start() for match in re.finditer("## ", text))
    _titles, headings = detect_headings(text, font_heading_starts=marks)
    titles = {heading.label: heading.title for heading in headings}
    assert titles["9.1"] == "9.1 Development costs & prices for Hosting Services"
    assert titles["9.2"] == "9.2 Laboratory Controls-N/A"
    assert titles["9.3"] == "9.3 Charging"
    assert titles.get("9.4", "") == ""


def test_run_in_titles_may_list_words_with_commas_and_stand_alone_on_their_line() -> None:
    """ "Binding Nature, Assignment, and Subcontracting." runs into its sentence; "Termination
    Assistance." stands alone above its text. A company's "ACME GROUP, INC." is no title."""
    text = (
        f"ARTICLE I LICENSE\n\nGrant of License. {BODY}\n\nProprietary Markings. {BODY}\n\n"
        f"ARTICLE II SERVICES\n\nTermination Assistance.\n\n{BODY}\n\n"
        f"Binding Nature, Assignment, and Subcontracting. {BODY}\n\n"
        f"ACME GROUP, INC. By: its manager\n\nAndrew B.\n\n{BODY}\n"
    )
    assert [heading.title for heading in _headings(text)] == [
        "ARTICLE I LICENSE",
        "Grant of License",
        "Proprietary Markings",
        "ARTICLE II SERVICES",
        "Termination Assistance",
        "Binding Nature, Assignment, and Subcontracting",
    ]


def test_a_font_heading_whose_code_extends_a_coded_part_is_a_part_of_it() -> None:
    """ "G1.1 IT Service Category" in bold under "Section G1: IT Services": a part of G1, and
    "Section G2" comes back up beside G1."""
    body = "".join(f"{n}. {name}\n\n{BODY}\n\n" for n, name in enumerate(["Scope", "Price", "Term"], 1))
    text = (
        f"Intro.\n\n{body}EXHIBIT A TRANSITION SERVICES\n\nSection G1: IT Services\n\n{BODY}\n\n"
        f"# G1.1 IT Service Category: Hosting\n\n{BODY}\n\n# G1.2 IT Service Category: Support\n\n{BODY}\n\n"
        f"Section G2: HR Services\n\n{BODY}\n"
    )
    marks = frozenset(match.start() for match in re.finditer("# ", text))
    _titles, headings = detect_headings(text, font_heading_starts=marks)
    ranks = {heading.title: heading.rank for heading in headings}
    assert ranks["Section G1: IT Services"] == ranks["Section G2: HR Services"]
    assert ranks["Section G1: IT Services"] < ranks["G1.1 IT Service Category: Hosting"]
    assert ranks["G1.1 IT Service Category: Hosting"] == ranks["G1.2 IT Service Category: Support"]


def test_a_capitalised_title_that_opens_with_the_is_still_a_title() -> None:
    """ "A. The Company's Business. The Company sells ..." is titled; "3.1 The Joint Venture will
    be managed ..." opens its sentence, and "3.2 The Buyer. pays" no capitalised one."""
    text = (
        f"Intro.\n\nRECITALS\n\nA. The Company's Business. The Company sells pumps. {BODY}\n\n"
        f"B. The Distributor's Objectives. The Distributor resells them. {BODY}\n\n"
        f"1. SCOPE\n\n{BODY}\n\n3. TERMS\n\n3.1 The Joint Venture will be managed by a board. {BODY}\n\n"
        f"3.2 The Buyer. pays the price in full. {BODY}\n"
    )
    titles = {heading.label: heading.title for heading in _headings(text)}
    assert titles["A."] == "A. The Company's Business"
    assert titles["B."] == "B. The Distributor's Objectives"
    assert titles.get("3.1", "") == titles.get("3.2", "") == ""


# -- the document's title line: never a section's opening


def _font_marks(text: str) -> frozenset[int]:
    return frozenset(match.start() for match in re.finditer(r"(?m)^#+ ", text))


@pytest.mark.parametrize(
    "above",
    [
        "Execution Version",
        "EXECUTION COPY",
        "## Exhibit 99.1 CONFIDENTIAL TREATMENT REQUESTED WITH RESPECT TO CERTAIN PORTIONS HEREOF",
        "Exhibit 10.4\n\nConformed Copy",
    ],
)
def test_legends_above_the_title_are_front_matter_not_the_title(above: str) -> None:
    text = (
        f"{above}\n\n# HOSTING AGREEMENT\n\n{BODY}\n\n# 1. DEFINITIONS\n\n{BODY}\n\n# 2. SERVICES\n\n{BODY}\n"
    )
    titles, headings = detect_headings(text, font_heading_starts=_font_marks(text))
    assert title_of_document(titles) == "HOSTING AGREEMENT"
    # What stands above the title opens the title's lines: no passage, no section of its own.
    assert titles[0].start == 0 and titles[-1].title == "HOSTING AGREEMENT"
    assert [heading.title for heading in headings] == ["1. DEFINITIONS", "2. SERVICES"]


def test_a_title_that_opens_with_confidential_is_a_title_not_a_legend() -> None:
    text = f"# CONFIDENTIAL INFORMATION AGREEMENT\n\n{BODY}\n\n# 1. DEFINITIONS\n\n{BODY}\n"
    titles, _headings = detect_headings(text, font_heading_starts=_font_marks(text))
    assert [(heading.title, heading.family) for heading in titles] == [
        ("CONFIDENTIAL INFORMATION AGREEMENT", "font")
    ]


def test_lines_in_the_titles_type_stacked_under_it_are_its_block() -> None:
    """A company over a trust over the agreement's name, in capitals, nothing between: one title."""
    text = (
        "ACME HOLDINGS, INC.\n\nACME CAPITAL TRUST\n\nREMARKETING AGREEMENT\n\nFebruary 15, 2011\n\n"
        f"{BODY}\n\nSection 1. Appointment. {BODY}\n\nSection 2. Fees. {BODY}\n"
    )
    titles, headings = detect_headings(text)
    assert [heading.title for heading in titles] == [
        "ACME HOLDINGS, INC",
        "ACME CAPITAL TRUST",
        "REMARKETING AGREEMENT",
    ]
    assert [heading.title for heading in headings] == ["Section 1 Appointment", "Section 2 Fees"]


def test_a_long_first_line_in_plain_capitals_is_the_title() -> None:
    title = "BROKER DEALER MARKETING AND SERVICING AGREEMENT FOR VARIABLE ANNUITY CONTRACTS"
    text = f"{title}\n\nThis Agreement is made by and among the parties below. {BODY}\n\nRECITALS\n\n{BODY}\n"
    titles, headings = detect_headings(text)
    assert [(heading.start, heading.title) for heading in titles] == [(0, title)]
    assert [heading.title for heading in headings] == ["RECITALS"]
    # A sentence in capitals is no title, nor is a line with text right under it.
    for opening in (f"THE PARTIES AGREE AS FOLLOWS ON THIS DAY\n{BODY}", f"{title.lower()}\n\n{BODY}"):
        assert detect_headings(f"{opening}\n\nRECITALS\n\n{BODY}\n")[0] == []
