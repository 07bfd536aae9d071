"""PDF extraction on real PDFs made in the test: headings, running headers and footers, page
numbers, hyphenation, pages, outline, two columns, and the files it refuses."""

from __future__ import annotations

import itertools

import pytest

from documents.ingestion.extraction import (
    PDF,
    Extracted,
    ExtractionError,
    ExtractionLimits,
    clean_line,
    extract,
)
from documents.ingestion.headings import detect_headings
from tests.documents.ingestion import document_files as files


@pytest.fixture(scope="module")
def report() -> Extracted:
    return extract(files.report_pdf(pages=3), filename="report.pdf")


def test_report_pages_partition_the_text_and_hold_their_own_content(report: Extracted) -> None:
    assert report.format == PDF and report.pages == 3
    spans = report.page_spans
    assert [span.page for span in spans] == [1, 2, 3]
    assert spans[0].start == 0 and spans[-1].end == len(report.text)
    assert all(a.end == b.start for a, b in itertools.pairwise(spans))
    for span, section, clause in zip(spans, files.SECTIONS, files.CLAUSES, strict=False):
        page = report.text[span.start : span.end]
        assert section in page and clause in page
        assert all(other not in page for other in files.CLAUSES if other != clause)
    two = report.text.index(files.CLAUSES[1])
    assert report.pages_of(two, two + 10) == (2,)
    assert report.pages_of(0, len(report.text)) == (1, 2, 3)


def test_running_header_footer_and_page_numbers_are_removed(report: Extracted) -> None:
    assert "ACME Supply Agreement" not in report.text
    assert "Confidential" not in report.text
    assert "Page 1 of 3" not in report.text and "of 3" not in report.text
    assert not any(line.strip().isdigit() for line in report.text.splitlines())


def test_words_hyphenated_at_a_line_end_are_joined(report: Extracted) -> None:
    assert "this agreement binds their successors" in report.text
    assert "ready for delivery on the first working day" in report.text
    assert "states the payment due" in report.text
    assert "agree-" not in report.text and "deliv-" not in report.text


def test_font_headings_are_markdown_the_structural_builder_reads(report: Extracted) -> None:
    hints = [(hint.level, hint.title, hint.source) for hint in report.headings]
    assert hints == [
        (1, "Supply Agreement", "font"),
        (2, "1. Definitions", "font"),
        (2, "2. Delivery of Goods", "font"),
        (2, "3. Payment", "font"),
    ]
    for hint in report.headings:
        assert report.text[hint.start : hint.end] == f"{'#' * hint.level} {hint.title}"
    titles, headings = detect_headings(report.text)
    found = {heading.start for heading in [*titles, *headings]}
    assert {hint.start for hint in report.headings[1:]} <= found
    # Paragraphs follow the line spacing: the wider gap opens a new one.
    assert f"successors.\n\n{files.SECOND[0]}" in report.text


def test_outline_bookmarks_title_their_lines() -> None:
    extracted = extract(files.outline_pdf(), filename="outline.pdf")
    assert [(hint.level, hint.title, hint.source) for hint in extracted.headings] == [
        (1, "Introduction", "outline"),
        (1, "Payment Terms", "outline"),
    ]
    assert extracted.text.startswith("# Introduction\n\nBody of introduction")
    payment = extracted.text.index("# Payment Terms")
    assert extracted.pages_of(payment, payment + 5) == (2,)


def test_two_columns_drawn_row_by_row_are_read_column_by_column() -> None:
    text = extract(files.two_column_pdf(), filename="columns.pdf").text
    lines = [line for line in text.splitlines() if line]
    assert lines[0].startswith("A full width title line")
    # Each column is one paragraph: its wrapped lines are one line of text.
    assert lines[1:] == [" ".join(files.LEFT_COLUMN), " ".join(files.RIGHT_COLUMN)]


def test_wrapped_lines_are_one_line_and_table_rows_stay_apart() -> None:
    """A paragraph the page wrapped is one line, as a text file writes it (the structural builder
    may cut a long sentence at a line break, never inside a line: CUAD's clauses were cut across
    two leaves); a table's rows, whose cells stand apart, stay one a line."""
    pdf = files.pdf_document()
    pdf.add_page()
    pdf.set_font("Helvetica", "", 11)
    wrapped = (
        "EXCEPT FOR A BREACH OF SECTION 8 (CONFIDENTIALITY), IN NO EVENT WILL EITHER",
        "PARTY BE LIABLE FOR ANY INDIRECT, PUNITIVE, SPECIAL, INCIDENTAL, EXEMPLARY OR",
        "CONSEQUENTIAL DAMAGES, HOWSOEVER ARISING.",
    )
    y = files.draw_lines(pdf, wrapped)
    rows = (("Product", "Years", "Price"), ("Kettle", "2", "40"), ("Toaster", "3", "55"))
    y += 30
    for row in rows:
        for column, cell in enumerate(row):
            pdf.text(72 + 150 * column, y, cell)
        y += 15
    text = extract(bytes(pdf.output()), filename="wrapped.pdf").text
    lines = [line for line in text.splitlines() if line]
    assert lines[0] == " ".join(wrapped)
    assert lines[1:] == [" ".join(row) for row in rows]


def test_compound_words_keep_their_hyphen_across_a_line_end() -> None:
    pdf = files.plain_pdf(
        [
            "The licence is royalty-free and non-",
            "exclusive for the whole term, and the",
            "then-current price list applies; then-",
            "current means in force at the time.",
        ]
    )
    text = extract(pdf, filename="compound.pdf").text
    assert "non-exclusive for the whole term" in text
    assert "applies; then-current means" in text


def test_curly_quotes_are_straightened_and_ligatures_unfolded() -> None:
    pdf = files.plain_pdf(
        ["The \u201coffice\u201d is the buyer\u2019s main office \u2013 in \u2018Paris\u2019."]
    )
    text = extract(pdf, filename="quotes.pdf").text
    assert text == "The \"office\" is the buyer's main office \u2013 in 'Paris'.\n"
    # The core PDF fonts have no ligature glyph; NFKC is the same function for every format.
    assert clean_line("\ufb01ve of\ufb01ces\u00a0and\u200b a\ufb02ag") == "five offices and aflag"


def test_encrypted_pdf_is_refused_in_words() -> None:
    with pytest.raises(
        ExtractionError, match="password-protected: remove the password and upload again"
    ) as error:
        extract(files.encrypted_pdf(), filename="secret.pdf")
    assert error.value.code == "encrypted"


def test_image_only_pdf_has_no_text_layer() -> None:
    with pytest.raises(ExtractionError, match=r"scan\.pdf has no text layer \(a scanned PDF\?\)") as error:
        extract(files.image_only_pdf(), filename="scan.pdf")
    assert error.value.code == "no_text_layer"


@pytest.mark.parametrize("keep", [0.25, 0.5, 0.9])
def test_truncated_pdf_is_refused_as_damaged(keep: float) -> None:
    data = files.report_pdf()
    with pytest.raises(ExtractionError, match="damaged or truncated PDF") as error:
        extract(data[: int(len(data) * keep)], filename="cut.pdf")
    assert error.value.code == "corrupt"


def test_garbage_after_a_pdf_header_is_refused_as_damaged() -> None:
    with pytest.raises(ExtractionError, match="damaged or truncated PDF"):
        extract(b"%PDF-1.7\n" + b"\x00garbage" * 200, filename="junk.pdf")


def test_page_limit() -> None:
    with pytest.raises(ExtractionError, match="has 3 pages; the limit is 2") as error:
        extract(files.report_pdf(pages=3), filename="long.pdf", limits=ExtractionLimits(max_pages=2))
    assert error.value.code == "too_many_pages"


def test_time_limit() -> None:
    with pytest.raises(ExtractionError, match="took longer than") as error:
        extract(files.report_pdf(), filename="slow.pdf", limits=ExtractionLimits(max_seconds=-1))
    assert error.value.code == "too_slow"


def test_text_limit_stops_a_file_that_expands_too_far() -> None:
    with pytest.raises(ExtractionError, match="expands to more than 100 characters") as error:
        extract(files.report_pdf(), filename="big.pdf", limits=ExtractionLimits(max_text_chars=100))
    assert error.value.code == "too_large"


def test_progress_is_told_page_by_page() -> None:
    seen: list[tuple[int, int]] = []
    extract(files.report_pdf(pages=3), filename="report.pdf", on_progress=lambda *step: seen.append(step))
    assert seen == [(1, 3), (2, 3), (3, 3)]
    seen.clear()
    extract(files.heading_docx(), filename="notes.docx", on_progress=lambda *step: seen.append(step))
    assert seen == [(1, 1)]


def test_a_bold_heading_a_little_larger_than_the_body_is_a_heading() -> None:
    """13 pt bold over an 11.5 pt body: under the sizes that rank as levels of their own (15 %
    larger), still a bold heading, one level below the larger ones. It used to run into the
    paragraph under it."""
    pdf = files.pdf_document()
    pdf.add_page()
    y = 80.0
    body = ("sales rose by a tenth in the year, led by the new range of pumps,", "and the margin held.")
    for size, bold, text in (
        (18, True, "Annual Report"),
        (15, True, "Revenue"),
        (11.5, False, "Revenue"),
        (13, True, "Product Sales"),
        (11.5, False, "Product"),
        (13, True, "Services Revenue"),
        (11.5, False, "Services"),
    ):
        pdf.set_font("Helvetica", "B" if bold else "", size)
        if bold:
            y += 34
            pdf.text(72, y, text)
            y += 6
            continue
        for line in (f"{text} {body[0]}", body[1]):
            y += 15
            pdf.text(72, y, line)
    extracted = extract(bytes(pdf.output()), filename="report.pdf")
    hints = [(hint.level, hint.title) for hint in extracted.headings]
    assert hints == [(1, "Annual Report"), (2, "Revenue"), (3, "Product Sales"), (3, "Services Revenue")]
    assert "### Product Sales\n\nProduct sales rose" in extracted.text


_FULL_LINE = "the supplier shall deliver the goods to the buyer at the agreed place and the agreed"


def _prose_page(pdf: files.FPDF, *, last: str) -> None:
    """A page of 11 pt prose at a 13 pt pitch, full lines, the last of them ``last``."""
    pdf.add_page()
    pdf.set_font("Helvetica", "", 11)
    files.draw_lines(pdf, [_FULL_LINE] * 30 + [last], pitch=13)


def _centred(pdf: files.FPDF, y: float, text: str) -> None:
    """``text`` centred on the prose's lines (11 pt, from x = 72)."""
    pdf.text(72 + (pdf.get_string_width(_FULL_LINE) - pdf.get_string_width(text)) / 2, y, text)


def test_a_page_of_few_widely_spaced_lines_keeps_its_titles_apart_from_its_text() -> None:
    """An attachment's page of a few lines set 20 pt apart has no usual pitch of its own (every
    step is as wide): against the document's usual 13 pt, its title lines and its sentence are
    paragraphs apart. The two centred bold title lines stay one title."""
    pdf = files.pdf_document()
    _prose_page(pdf, last="time.")
    pdf.add_page()
    pdf.set_font("Helvetica", "B", 11)
    _centred(pdf, 100, "SCHEDULE 4")
    _centred(pdf, 120, "RENDERINGS OF RIGHTS")
    pdf.set_font("Helvetica", "", 11)
    pdf.text(72, 140, "The attached renderings show the branded areas.")
    pdf.text(72, 160, "Short list item")
    pdf.text(72, 180, "Another list item")
    text = extract(bytes(pdf.output()), filename="schedule.pdf").text
    assert "SCHEDULE 4 RENDERINGS OF RIGHTS\n\nThe attached renderings" in text
    assert "branded areas.\n\nShort list item\n\nAnother list item" in text


def test_a_page_that_opens_on_a_centred_line_starts_a_paragraph() -> None:
    """The last page's last line runs on (no period, a full line), but the next page opens on a
    centred title: an attachment's, not the rest of that sentence."""
    pdf = files.pdf_document()
    _prose_page(pdf, last="the supplier shall deliver the goods to the buyer at the agreed place and the")
    pdf.add_page()
    pdf.set_font("Helvetica", "", 11)
    _centred(pdf, 100, "Exhibit B")
    _centred(pdf, 113, "Product Prices")
    files.draw_lines(pdf, ["The prices of the products are those of the list below, in dollars."], top=126)
    text = extract(bytes(pdf.output()), filename="exhibit.pdf").text
    assert "agreed place and the\n\nExhibit B Product Prices" in text


def test_a_bold_run_in_title_drawn_against_its_sentence_ends_with_a_space() -> None:
    """ "Market Purchases." in bold, then "Subject to ..." in the body's font with no space drawn
    between them: the change of weight after the period is a word space. Within one weight,
    "No.5" stays as drawn."""
    pdf = files.pdf_document()
    pdf.add_page()
    pdf.set_font("Helvetica", "B", 11)
    title = "3.1 Market Purchases."
    pdf.text(72, 100, title)
    width = pdf.get_string_width(title)
    pdf.set_font("Helvetica", "", 11)
    pdf.text(72 + width, 100, "Subject to the law, the buyer may purchase shares. See Form No.5 attached.")
    text = extract(bytes(pdf.output()), filename="runin.pdf").text
    assert "3.1 Market Purchases. Subject to the law" in text
    assert "Form No.5" in text


def test_a_line_in_another_size_starts_a_paragraph() -> None:
    """A table's header row in 8 pt, then a bold category row in the body's 11 pt at the same
    pitch: a paragraph is set in one size, so the bold row stands apart (a heading)."""
    pdf = files.pdf_document()
    pdf.add_page()
    pdf.set_font("Helvetica", "", 11)
    y = files.draw_lines(pdf, [files.BODY[:80], files.BODY[80:]], pitch=13)
    pdf.set_font("Helvetica", "B", 8)
    pdf.text(72, y, "Service Name")
    pdf.text(300, y, "Monthly Fee")
    pdf.set_font("Helvetica", "B", 11)
    pdf.text(72, y + 12, "Service Category: Hosting")
    pdf.set_font("Helvetica", "", 11)
    files.draw_lines(pdf, ["Hosting of the shared systems in the data centre."], top=y + 40)
    extracted = extract(bytes(pdf.output()), filename="table.pdf")
    assert "Service Name Monthly Fee\n\n" in extracted.text
    assert [hint.title for hint in extracted.headings] == ["Service Category: Hosting"]


def test_a_bold_title_wrapped_over_two_lines_is_a_heading_but_not_with_the_next_number() -> None:
    """ "Term Sheet" / "Remarketing Preferred Securities" in bold, then plain text at the same
    pitch: one heading over two lines. A bold "3.1 Upfront Payment" under a bold "3. License
    Fees" (numbers set apart from their titles) is a heading of its own, never the rest of the
    title above it."""
    pdf = files.pdf_document()
    pdf.add_page()
    pdf.set_font("Helvetica", "", 11)
    y = files.draw_lines(pdf, [files.BODY[:80], files.BODY[80:]], pitch=13) + 13
    for bold, number, line in (
        (True, "", "Term Sheet"),
        (True, "", "Remarketing Preferred Securities"),
        (False, "", "Issuer: the trust named in the prospectus, for all the securities."),
        (True, "3.", "License Fees"),
        (True, "3.1", "Upfront Payment"),
        (False, "", "The licensee pays the fee within twenty days of signature."),
    ):
        pdf.set_font("Helvetica", "B" if bold else "", 11)
        y += 13 if number != "3." else 26
        pdf.text(72, y, number)
        pdf.text(110 if number else 72, y, line)
    extracted = extract(bytes(pdf.output()), filename="terms.pdf")
    titles = [hint.title for hint in extracted.headings]
    assert titles[0] == "Term Sheet Remarketing Preferred Securities"
    assert not any("License" in title and "3.1" in title for title in titles)


def test_a_page_that_opens_in_lower_case_goes_on_with_the_sentence_wherever_it_stands() -> None:
    """A short indented line that happens to fall in the middle of a narrow column, but opens in
    lower case: the rest of the last page's sentence, not a title."""
    pdf = files.pdf_document()
    _prose_page(pdf, last="the supplier shall deliver the goods to the buyer at the agreed place and the")
    pdf.add_page()
    pdf.set_font("Helvetica", "", 11)
    _centred(pdf, 100, "written consent of the buyer.")
    text = extract(bytes(pdf.output()), filename="continued.pdf").text
    assert "agreed place and the written consent of the buyer." in text
