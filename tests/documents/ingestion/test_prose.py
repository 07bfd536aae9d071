"""What titles and summaries may quote: addresses, price rows and bracket debris are not prose."""

from __future__ import annotations

import pytest

from documents.ingestion.prose import before_address, is_address_phrase, not_prose, without_addresses


@pytest.mark.parametrize(
    "sentence",
    [
        "If to Supplier: Ferndale Contract Labs, LLC 1000 Valley Drive Suite 200 Wayne, NJ 07470 "
        "Attention: General Manager",
        "Medimetriks Pharmaceuticals, Inc. 383 Route 46 West Fairfield, NJ 07004",
        "430 Park Avenue, 5th Floor New York, NY 10022",
        "Sumadan Wash 15 [ ] = [ ] per unit [ ]",
        "NanoTek Aluminum Oxide 0115 [***] $[***] NanoDur Aluminum Oxide 0119 [***] $[***]",
        "1/1/98 [ ] 4/1/98 [ ] 7/1/98 [ ]",
        "[***] Certain information in this document has been excluded pursuant to Regulation S-K, "
        "Item 601(b)(10), because it would likely cause competitive harm.",
    ],
)
def test_addresses_price_rows_and_debris_are_not_prose(sentence: str) -> None:
    assert not_prose([sentence]) == [True]


@pytest.mark.parametrize(
    "sentence",
    [
        "Supplier shall deliver the Products to the Facility within thirty days of each order.",
        # An address mentioned in passing inside a sentence, a fine, a form line, a redacted word.
        "The defendant was apprehended at his residence located at 14, Seaside Street, Springfield.",
        "A fine of $100,000.",
        "Pulse: 88 bpm",
        "The Committee shall have a total of at least [ ] ([ ]) members.",
        "Revenue was $12.3 million in 2021, up from $10.7 million in 2020.",
    ],
)
def test_sentences_are_prose(sentence: str) -> None:
    assert not_prose([sentence]) == [False]


def test_a_short_address_line_is_no_prose_inside_an_address_block_only() -> None:
    block = ["Ferndale Contract Labs, LLC", "1000 Valley Drive", "Wayne, NJ 07470"]
    assert not_prose(block) == [False, True, True]
    # A lone labelled line among a person's facts is what the passage says about them.
    facts = ["Gender: Male", "Date of Birth: 24th August, 1988", "Residence: 47 Charleston Street, Yorktown"]
    assert not_prose(facts) == [False, False, False]
    assert "Charleston Street" not in without_addresses(facts[2])


def test_the_header_line_of_a_price_table_is_not_prose() -> None:
    sentences = [
        "EXHIBIT A PRODUCTS AND PRICES",
        "Product Unit Price Minimum Order",
        "Sumadan Wash 15 [ ] = [ ] per unit [ ]",
        "Sumadan Kit 15 [ ] = [ ] per unit [ ]",
        "Unit Price is per unit, FOB the Facility.",
    ]
    assert not_prose(sentences) == [False, True, True, True, False]


def test_without_addresses_leaves_no_street_suite_or_postcode_to_build_a_phrase_from() -> None:
    sentence = "with its registered office at 46 Albemarle Street, London, England W1S 4JL, and Suite 200"
    kept = without_addresses(sentence)
    assert "Albemarle Street" not in kept and "W1S" not in kept and "Suite" not in kept
    assert kept.startswith("with its registered office at")


def test_phrases_that_lead_up_to_an_address_are_address_phrases() -> None:
    assert is_address_phrase("place of business")
    assert is_address_phrase("principal office")
    assert not is_address_phrase("business days")
    assert not is_address_phrase("place of delivery")


def test_a_long_sentence_ending_in_an_address_is_quoted_up_to_it() -> None:
    notice = (
        "Each notice required by this Agreement shall be given in writing and delivered personally "
        "or mailed by certified mail or courier service to the other party at the following address "
        "or such address as each party may give notice to the other: If to the Trust: Address: The "
        "Victory Portfolios 3435 Stelzer Road Columbus OH 43219 Attention: President"
    )
    assert not_prose([notice]) == [True]  # no phrase is built from it
    assert before_address(notice) == notice[: notice.index(" 3435")] + "\u2026"
    # Short, with no whole address, or the address within its first words: nothing to quote.
    assert before_address("If to Supplier: 1000 Valley Drive Suite 200 Wayne, NJ 07470") == ""
    assert before_address("Supplier shall deliver the Products to the Facility within thirty days.") == ""
