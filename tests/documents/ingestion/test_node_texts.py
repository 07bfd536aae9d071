"""Extractive titles and summaries of tree nodes, and the document title from its first lines."""

from __future__ import annotations

import itertools
import zlib
from collections.abc import Mapping, Sequence

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from documents.ingestion.heading_titles import TITLE_CHARS, Heading
from documents.ingestion.node_texts import NodeTexts, first_line_title
from documents.ingestion.structural import Draft, StructuralTreeBuilder
from documents.ingestion.units import LeafParams, TextUnit


def fake_embed(texts: Sequence[str]) -> np.ndarray:
    """Deterministic bag-of-words vectors over 16 dimensions (crc32, not the salted hash())."""
    vectors = np.zeros((len(texts), 16), dtype=np.float32)
    for row, text in enumerate(texts):
        for word in text.lower().split():
            vectors[row, zlib.crc32(word.encode()) % 16] += 1.0
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    return vectors / norms


def _builder(
    pieces: Sequence[str],
    vectors: Sequence[Sequence[float]] | None = None,
    headings: Mapping[int, Heading] | None = None,
    sep: str = " ",
) -> StructuralTreeBuilder:
    """One unit, and one block (with its own vector, unit length as an embedder's), per piece."""
    text = ""
    units: list[TextUnit] = []
    for index, piece in enumerate(pieces):
        text += sep if text else ""
        units.append(TextUnit(len(text), len(text) + len(piece), 0, heading=(headings or {}).get(index)))
        text += piece
    if vectors is None:
        block_vectors = fake_embed(pieces)
    else:
        block_vectors = np.asarray(vectors, dtype=np.float32)
        block_vectors /= np.linalg.norm(block_vectors, axis=1, keepdims=True)
    return StructuralTreeBuilder(
        text, units, list(range(len(pieces))), block_vectors, LeafParams(200, 120, 40, 8)
    )


def _at(*degrees: float) -> list[list[float]]:
    """Unit vectors in the plane at these angles: how close sentences are, at a glance."""
    return [[float(np.cos(np.radians(angle))), float(np.sin(np.radians(angle)))] for angle in degrees]


def _leaves(*bounds: int) -> list[Draft]:
    return [Draft(first, last) for first, last in itertools.pairwise(bounds)]


def _heading(title: str) -> Heading:
    """A bold-line heading; NodeTexts reads only its title (and whether it is the inherited one)."""
    return Heading(0, 1, 50.0, title, family="bold")


def _filled(builder: StructuralTreeBuilder, root: Draft) -> Draft:
    NodeTexts(builder).fill(root, depth=0)
    return root


# -- titles


def test_a_titled_heading_names_its_node() -> None:
    payment = _heading("Payment Terms")
    builder = _builder(
        ["Payment Terms", "The buyer pays within thirty days.", "Goods ship by sea freight at once."],
        headings={0: payment},
    )
    section = Draft(0, 2, heading=payment, children=_leaves(0, 1, 2))
    root = _filled(builder, Draft(0, 3, children=[section, *_leaves(2, 3)]))
    assert section.title == "Payment Terms"
    assert root.title != "Payment Terms"
    assert root.children[1].title == ""  # leaves are not filled


def test_section_key_phrases_are_distinctive_while_the_roots_are_frequent() -> None:
    pieces = [
        "The tenant's guest and the tenant pay the security deposit before moving in.",
        "The tenant and the tenant's agent get the security deposit back after leaving.",
        "The tenant keeps the garden tidy all year.",
        "The tenant mows the garden lawn every week.",
    ]
    builder = _builder(pieces)
    deposit = Draft(0, 2, children=_leaves(0, 1, 2))
    garden = Draft(2, 4, children=_leaves(2, 3, 4))
    root = _filled(builder, Draft(0, 4, children=[deposit, garden]))
    # "tenant" is in every leaf: the most frequent word of the document, and of no section's own.
    assert root.title.startswith("Tenant")
    assert deposit.title.startswith("Security deposit")
    assert garden.title.lower().startswith("garden")
    assert "garden" not in deposit.title.lower() and "deposit" not in garden.title.lower()


def test_a_section_without_heading_gets_one_phrase_not_a_keyword_list() -> None:
    pieces = [
        "The security deposit covers damage to the flat and the furniture.",
        "The security deposit comes back within a month of the keys coming back.",
        "The garden lawn is mown by the tenant every week.",
        "Garden hedges are trimmed by the landlord in spring.",
    ]
    deposit = Draft(0, 2, children=_leaves(0, 1, 2))
    garden = Draft(2, 4, children=_leaves(2, 3, 4))
    _filled(_builder(pieces), Draft(0, 4, children=[deposit, garden]))
    assert deposit.title == "Security deposit"
    assert "," not in garden.title and ";" not in garden.title, garden.title


def test_siblings_that_share_their_best_phrase_are_told_apart() -> None:
    # Three sections about the same prospectus: the phrase most frequent in each is the same.
    pieces = [
        "The free writing prospectus is filed under the Securities Act. The free writing prospectus names the underwriters.",
        "Underwriters receive the free writing prospectus before pricing.",
        "The free writing prospectus states the offering price. The offering price is final.",
        "Pricing follows the free writing prospectus and the offering price notice.",
        "The free writing prospectus lists the risk factors. Risk factors include market risk.",
        "Market risk and risk factors are in the free writing prospectus.",
    ]
    sections = [Draft(0, 2, children=_leaves(0, 1, 2)), Draft(2, 4, children=_leaves(2, 3, 4))]
    sections.append(Draft(4, 6, children=_leaves(4, 5, 6)))
    _filled(_builder(pieces), Draft(0, 6, children=sections))
    titles = [section.title.casefold() for section in sections]
    assert len(set(titles)) == 3, titles
    assert "offering price" in titles[1] and "risk factors" in titles[2], titles


def test_an_adjective_does_not_end_a_title() -> None:
    pieces = [
        "Operational efficiency and operational costs improved across the structure.",
        "The structure and operational model changed twice.",
        "Other words elsewhere about the harbour and its cranes.",
        "The harbour cranes were renewed.",
    ]
    first = Draft(0, 2, children=_leaves(0, 1, 2))
    _filled(_builder(pieces), Draft(0, 4, children=[first, Draft(2, 4, children=_leaves(2, 3, 4))]))
    assert not first.title.lower().endswith("operational"), first.title


def test_stopwords_short_words_and_verbs_make_no_key_phrases() -> None:
    pieces = [
        "The Company and the Party shall sign this Agreement within the Section period.",
        "The Company and the Party shall sign this Agreement within the Section period quickly.",
        "Each Party signed it and the Company allowed it by law.",
    ]
    root = _filled(_builder(pieces), Draft(0, 3, children=_leaves(0, 1, 2, 3)))
    words = set(root.title.lower().replace(",", " ").split())
    assert words, root.title
    assert not words & {"company", "party", "shall", "agreement", "section", "the", "law", "by"}
    assert not words & {"quickly", "signed", "allowed"}


def test_a_numbered_heading_without_title_lends_its_label() -> None:
    label = Heading(0, 3, 12.0, "", family="number", path=(4,), label="4.")
    pieces = [
        "4. The buyer pays the purchase price by wire transfer.",
        "The purchase price excludes value added tax.",
        "The seller ships the goods by sea freight.",
        "Sea freight costs are borne by the seller.",
    ]
    builder = _builder(pieces, [[1, 0], [1, 0], [0, 1], [0, 1]], headings={0: label})
    section = Draft(0, 2, heading=label, children=_leaves(0, 1, 2))
    _filled(builder, Draft(0, 4, children=[section, Draft(2, 4, children=_leaves(2, 3, 4))]))
    assert section.title.startswith("4. ")
    assert "price" in section.title.lower()


def test_a_group_without_heading_is_named_by_the_headed_parts_inside() -> None:
    titles = ["Chief Complaint", "Present Illness", "Allergies", "Medication"]
    pieces = [
        "Chief Complaint",
        "Pain in the left knee since Monday.",
        "Present Illness",
        "The pain started two weeks ago.",
        "Allergies",
        "None known to the patient at all.",
        "Medication",
        "Ibuprofen twice a day with food.",
    ]
    headings = {index * 2: _heading(title) for index, title in enumerate(titles)}
    builder = _builder(pieces, headings=headings)
    for index in headings:
        builder.units[index].heading_only = True
    first, second = Draft(0, 4, children=_leaves(0, 2, 4)), Draft(4, 8, children=_leaves(4, 6, 8))
    _filled(builder, Draft(0, 8, children=[first, second]))
    assert (first.title, second.title) == ("Chief Complaint; Present Illness", "Allergies; Medication")
    everything = Draft(0, 8, children=_leaves(0, 2, 4, 6, 8))
    _filled(builder, Draft(0, 8, children=[everything]))
    assert everything.title == "Chief Complaint; Present Illness; Allergies; \u2026"


def test_the_heading_of_a_section_does_not_name_the_groups_below_it() -> None:
    payment = _heading("Payment Terms")
    pieces = [
        "Payment Terms",
        "The buyer pays the invoice within thirty days by wire.",
        "Invoice disputes go to the finance team first.",
        "Late interest accrues at two percent monthly.",
        "Interest compounds after the second reminder letter.",
    ]
    builder = _builder(pieces, headings={0: payment})
    builder.units[0].heading_only = True
    invoices, interest = Draft(0, 3, children=_leaves(0, 2, 3)), Draft(3, 5, children=_leaves(3, 4, 5))
    section = Draft(0, 5, heading=payment, children=[invoices, interest])
    _filled(builder, Draft(0, 5, children=[section]))
    assert section.title == "Payment Terms"
    assert invoices.title and "Payment Terms" not in invoices.title
    assert "invoice" in invoices.title.lower()


NOTICES = [
    "All notices under this Agreement shall be in writing and sent by courier.",
    "Notices take effect on receipt by the party they are sent to.",
    "If to Medimetriks: Medimetriks Pharmaceuticals, Inc. 383 Route 46 West Fairfield, NJ 07004 "
    "Attention: President",
    "If to Supplier: Ferndale Contract Labs, LLC 1000 Valley Drive Suite 200 Wayne, NJ 07470 "
    "Attention: General Manager",
    "If to Supplier, with a copy to: Ferndale Contract Labs, LLC 1000 Valley Drive Suite 200 Wayne, "
    "NJ 07470 Attention: Legal Department",
]
GOVERNING_LAW = [
    "This Agreement is governed by the laws of the State of New Jersey.",
    "The courts of New Jersey alone hear any dispute under this Agreement.",
]


def test_no_key_phrase_is_built_from_an_address() -> None:
    """Section 12 of CUAD's supply agreement had a part titled "Notices and Drive Suite Wayne"."""
    builder = _builder(NOTICES + GOVERNING_LAW)
    notices, law = Draft(0, 5, children=_leaves(0, 2, 3, 4, 5)), Draft(5, 7, children=_leaves(5, 6, 7))
    _filled(builder, Draft(0, 7, children=[notices, law]))
    address_words = {"Drive", "Suite", "Wayne", "Route", "West", "Fairfield", "Attention", "NJ"}
    assert notices.title.startswith("Notices") and not set(notices.title.split()) & address_words, (
        notices.title
    )
    assert not set(notices.summary.split()) & {"Drive", "Suite", "Route", "07004", "07470"}, notices.summary


def test_numbers_break_a_key_phrase() -> None:
    pieces = [
        "Deliveries go to Dock 4 Warehouse and Dock 4 Warehouse only.",
        "The Dock 7 Warehouse takes returns from the Dock 7 Warehouse team.",
    ]
    root = _filled(_builder(pieces), Draft(0, 2, children=_leaves(0, 1, 2)))
    assert root.title == "Warehouse" or "Dock Warehouse" not in root.title, root.title


def test_place_of_business_names_nothing() -> None:
    pieces = [
        "Acme Labs moves its place of business to the harbour district next year.",
        "The new place of business opens after the lease is signed.",
        "Its old place of business closes in the spring.",
    ]
    root = _filled(_builder(pieces), Draft(0, 3, children=_leaves(0, 1, 2, 3)))
    assert "place of business" not in root.title.lower(), root.title


def test_the_opening_of_a_contract_that_names_its_parties_is_the_preamble() -> None:
    """It was named by a phrase of a party and its address: "Medimetriks and place of business"."""
    definitions = Heading(0, 1, 12.0, "1. DEFINITIONS", family="number", path=(1,), label="1.")
    pieces = [
        "This Supply Agreement is made by and between Medimetriks Pharmaceuticals, Inc., with its "
        "principal place of business at 383 Route 46 West, Fairfield, NJ 07004, and Ferndale Labs.",
        "WHEREAS, Medimetriks markets topical products and wishes to buy them from Ferndale.",
        "1. DEFINITIONS",
        "Products means the goods listed in Exhibit A.",
    ]
    builder = _builder(pieces, headings={2: definitions})
    preamble = Draft(0, 2, children=_leaves(0, 1, 2))
    section = Draft(2, 4, heading=definitions, children=_leaves(2, 4))
    _filled(builder, Draft(0, 4, children=[preamble, section]))
    assert (preamble.title, section.title) == ("Preamble", "1. DEFINITIONS")


def test_an_opening_that_names_no_parties_keeps_its_key_phrase() -> None:
    pieces = [
        "The weather station measures wind speed every minute.",
        "Wind speed readings are shown on the weather station display.",
        "Batteries last a year in the outdoor sensor.",
        "Outdoor sensor batteries are changed in spring.",
    ]
    opening = Draft(0, 2, children=_leaves(0, 1, 2))
    rest = Draft(2, 4, children=_leaves(2, 3, 4))
    _filled(_builder(pieces), Draft(0, 4, children=[opening, rest]))
    assert opening.title == "Weather station"


# -- summaries


def test_the_summary_takes_the_central_sentences_in_document_order() -> None:
    pieces = [
        "Cats chase mice in the old barn.",  # far from the rest
        "The buyer pays the price in full.",
        "The price includes all shipping costs.",
        "Payment of the price is due on delivery.",
    ]
    vectors = _at(90, 11, 6, 0)
    root = _filled(_builder(pieces, vectors), Draft(0, 4, children=_leaves(0, 1, 2, 3, 4)))
    assert root.summary == " ".join(pieces[1:])


def test_the_summary_holds_at_most_three_sentences() -> None:
    pieces = [f"Clause {name} covers a separate topic here." for name in "ABCDE"]
    # The centroid lies near 38 degrees: E, D and B are closest (chosen in that order), then A.
    vectors = _at(10, 20, 90, 30, 40)
    root = _filled(_builder(pieces, vectors), Draft(0, 5, children=_leaves(0, 1, 2, 3, 4, 5)))
    assert root.summary == " ".join([pieces[1], pieces[3], pieces[4]])


def test_the_summary_skips_a_sentence_that_would_pass_sixty_words() -> None:
    short = "Gamma one two three four."
    thirty_five = "Beta " + " ".join(["thing"] * 34) + "."
    thirty = "Alpha " + " ".join(["word"] * 29) + "."
    # Most central first: thirty, then thirty_five (65 words together: skipped), then short.
    vectors = _at(60, 0, 20)
    root = _filled(_builder([short, thirty_five, thirty], vectors), Draft(0, 3, children=_leaves(0, 1, 2, 3)))
    assert root.summary == f"{short} {thirty}"


def test_a_long_central_sentence_is_cut_to_sixty_words() -> None:
    long = "Alpha " + " ".join(["word"] * 79) + "."
    root = _filled(
        _builder([long, "Beta sentence that is short here."], [[1, 0], [0, 1]]),
        Draft(0, 2, children=_leaves(0, 1, 2)),
    )
    assert len(root.summary.split()) == 60
    assert root.summary.startswith("Alpha word") and root.summary.endswith("word\u2026")


def test_the_summary_ignores_page_headers_short_lines_and_heading_lines() -> None:
    heading = _heading("Insurance Cover")
    pieces = [
        "Page 1 of 9 of the lease",
        "Insurance Cover For The Whole Building",
        "Signed by both.",
        "The tenant pays rent monthly in advance.",
        "Page 2 of 9 of the lease",
        "The landlord insures the building against fire.",
    ]
    builder = _builder(pieces, [[1, 0], [1, 0], [1, 0], [0, 1], [1, 0], [0.6, 0.8]], headings={1: heading})
    builder.units[1].heading_only = True
    root = _filled(builder, Draft(0, 6, children=_leaves(0, 3, 6)))
    assert root.summary == f"{pieces[3]} {pieces[5]}"


def test_the_summary_skips_price_rows_and_bracket_debris() -> None:
    """The root's summary of CUAD's supply agreement ended with "...15 [ ] =..." from a price list."""
    pieces = [
        "Sumadan Wash 15 [ ] = [ ] per unit [ ] Sumadan Kit 15 [ ] = [ ] per unit [ ]",
        "Sumaxin TS 10 [ ] = [ ] per tube [ ] Sumaxin Pads 60 [ ] = [ ] per box [ ]",
        "The unit price of each Sumadan product is fixed for the first contract year.",
    ]
    root = _filled(_builder(pieces, _at(0, 0, 0)), Draft(0, 3, children=_leaves(0, 1, 2, 3)))
    assert "[ ]" not in root.summary and "=" not in root.summary, root.summary
    assert root.summary == pieces[2]


def test_markup_is_stripped_from_titles_and_summaries() -> None:
    pieces = ["**Rent** is due | on the `first` day\\", "=====", "Some __other__ words here now."]
    root = _filled(_builder(pieces, sep="\n"), Draft(0, 3, children=_leaves(0, 1, 3)))
    assert root.summary == "Rent is due on the first day Some other words here now."
    assert root.title and not set(root.title) & set("*_`|\\=")


def test_a_one_sentence_document() -> None:
    sentence = "The tenant pays all utility bills promptly."
    root = _filled(_builder([sentence]), Draft(0, 1, children=_leaves(0, 1)))
    assert root.summary == sentence
    assert root.title == "Tenant pays"  # one phrase, never a list of them


def test_short_units_are_their_own_title_and_summary() -> None:
    root = _filled(_builder(["Yes.", "No."], [[1, 0], [0, 1]]), Draft(0, 2, children=_leaves(0, 1, 2)))
    assert (root.title, root.summary) == ("Yes. No.", "Yes. No.")


def test_a_node_without_words_is_a_part() -> None:
    root = _filled(_builder(["***", "---"], sep="\n"), Draft(0, 2, children=_leaves(0, 1, 2)))
    assert (root.title, root.summary) == ("Part", "Part")


def test_a_label_and_key_phrases_stay_within_the_title_limit() -> None:
    label = Heading(0, 10, 10.0, "", family="article", path=(4,), label="ARTICLE IV")
    pieces = [
        "ARTICLE IV Interoperability Interoperability Interoperability Interoperability "
        "Telecommunications Telecommunications Telecommunications.",
        "Decommissioning Reconfiguration Synchronisation applies.",
        "Other words elsewhere in the text of another section here.",
        "More words elsewhere in another section here too.",
    ]
    builder = _builder(pieces, _at(0, 30, 60, 90), headings={0: label})
    section = Draft(0, 2, heading=label, children=_leaves(0, 1, 2))
    _filled(builder, Draft(0, 4, children=[section, Draft(2, 4, children=_leaves(2, 3, 4))]))
    assert section.title.startswith("ARTICLE IV ")
    assert len(section.title) <= TITLE_CHARS


_WORDS = ["tenant", "landlord", "rent", "deposit", "garden", "repairs", "roof", "the", "pays", "and", "of"]


@settings(max_examples=100, deadline=None)
@given(
    st.lists(
        st.lists(st.sampled_from(_WORDS), min_size=1, max_size=30).map(lambda words: " ".join(words) + "."),
        min_size=1,
        max_size=8,
    ),
    st.integers(min_value=1, max_value=7),
)
def test_every_internal_node_gets_a_short_title_and_summary(pieces: list[str], cut: int) -> None:
    count = len(pieces)
    cut = min(cut, count)
    sections = [Draft(0, cut, children=_leaves(*range(cut + 1)))]
    if cut < count:
        sections.append(Draft(cut, count, children=_leaves(*range(cut, count + 1))))
    root = _filled(_builder(pieces), Draft(0, count, children=sections))
    for draft in [root, *sections]:
        assert draft.title and len(draft.title) <= TITLE_CHARS
        assert draft.summary and len(draft.summary.split()) <= 60
        node_words = set(" ".join(pieces[draft.first : draft.last]).split())
        assert set(draft.summary.removesuffix("\u2026").split()) <= node_words


# -- the document title from its first lines


def test_first_line_title_takes_the_line_naming_the_kind_of_document() -> None:
    assert (
        first_line_title("RESELLER AGREEMENT\n\nThis Agreement is made on 1 May 2020.")
        == "RESELLER AGREEMENT"
    )
    assert first_line_title("Acme Widgets Inc\nSupply Agreement\nThe parties agree.") == "Supply Agreement"
    assert first_line_title("[Company Logo]\nAnnual Report") == "Annual Report"


def test_first_line_title_skips_filing_notices_exhibit_numbers_dates_and_pages() -> None:
    text = (
        "EX-10.2 3 dex102.htm\nExhibit 10.38\nCONFIDENTIAL\nPage 1\nJanuary 5, 2020\n"
        "Table of Contents\nAcme Widgets Inc\nThe parties agree."
    )
    assert first_line_title(text) == "Acme Widgets Inc"


def test_first_line_title_takes_the_capitalised_kind_opening_a_run_on_line() -> None:
    run_on = (
        "SERVICE AGREEMENT This Agreement is entered into as of the date below by and between Acme "
        "Corporation and the customer named below."
    )
    assert first_line_title(run_on) == "SERVICE AGREEMENT"
    assert first_line_title("MASTER SUPPLY AGREEMENT     between Acme Inc and Beta LLC") == (
        "MASTER SUPPLY AGREEMENT"
    )


def test_first_line_title_strips_markup() -> None:
    assert first_line_title("**Hospitalization Record**\n\nName: John") == "Hospitalization Record"
    assert first_line_title("## Welcome Guide ##\nRead this first.") == "Welcome Guide"


@pytest.mark.parametrize(
    "text",
    [
        "",
        "This document is a very long first paragraph that simply goes on and on without any title "
        "line at the start of it.",
        "Executive Summary of the quarterly results, prepared by the finance team for the board of "
        "directors and shareholders of the company",
        "1\n2\n3\n4\n5\n6\n7\n8\n9\n10\n11\n12\nLate Title",  # only the first twelve lines count
    ],
)
def test_first_line_title_is_empty_without_a_title_line(text: str) -> None:
    assert first_line_title(text) == ""


def test_first_line_title_stays_within_the_title_limit() -> None:
    text = (
        "INTERNATIONAL TELECOMMUNICATIONS INFRASTRUCTURE INTERCONNECTION AND INTEROPERABILITY "
        "SERVICES AGREEMENT This Agreement is made between the parties."
    )
    title = first_line_title(text)
    assert title.startswith("INTERNATIONAL TELECOMMUNICATIONS")
    assert len(title) <= TITLE_CHARS
