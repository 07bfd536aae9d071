"""Word, HTML, Markdown and text extraction, and format detection from the content."""

from __future__ import annotations

import io
import zipfile

import pytest

from documents.ingestion.extraction import (
    DOCX,
    HTML,
    MARKDOWN,
    PDF,
    TEXT,
    Extracted,
    ExtractionError,
    ExtractionLimits,
    PageSpan,
    detect_format,
    extract,
)
from tests.documents.ingestion import document_files as files


def test_docx_heading_styles_become_headings_and_a_table_one_row_a_line() -> None:
    extracted = extract(files.heading_docx(), filename="service.docx")
    # No page break in it: a Word file that does not say where its pages end has no page map.
    assert extracted.format == DOCX and extracted.pages == 0 and extracted.page_spans == ()
    assert [(hint.level, hint.title, hint.source) for hint in extracted.headings] == [
        (1, "Service Agreement", "style"),
        (1, "Scope", "style"),
        (2, "Fees", "style"),
    ]
    assert extracted.text == (
        "# Service Agreement\n\nThis agreement sets out the service terms.\n\n# Scope\n\n"
        "The provider runs the service every day.\n\n## Fees\n\n"
        "Plan | Price | Term\nBasic | 10 EUR | 1 month\nPro | 90 EUR | 1 year\n\n"
        "Fees are paid in advance.\n"
    )


def test_a_word_file_has_the_pages_its_page_breaks_make() -> None:
    import docx
    from docx.enum.text import WD_BREAK

    document = docx.Document()
    document.add_paragraph("The first page.")
    document.add_paragraph("Still the first page.").add_run().add_break(WD_BREAK.PAGE)
    document.add_paragraph("The second page.")
    document.add_page_break()
    document.add_paragraph("The third page.")
    document.add_page_break()  # a break after the last text starts no page of its own
    out = io.BytesIO()
    document.save(out)
    extracted = extract(out.getvalue(), filename="three.docx")
    assert extracted.pages == 3
    assert [extracted.text[span.start : span.end].split(".")[0] for span in extracted.page_spans] == [
        "The first page",
        "The second page",
        "The third page",
    ]


def test_an_html_page_has_no_page_map() -> None:
    extracted = extract(files.ARTICLE_PAGE, filename="warranty.html")
    assert extracted.pages == 0 and extracted.page_spans == ()


def test_docx_text_after_an_entity_is_kept_and_the_entity_read_when_plain() -> None:
    # Before: python-docx's text stopped at the unresolved entity, and "after ..." was lost.
    data = files.entity_docx(
        "Before &company; and &amp; after the entity.", declarations='<!ENTITY company "Acme Ltd">'
    )
    assert (
        extract(data, filename="e.docx").text
        == "Before Acme Ltd and & after the entity.\n\nNext paragraph.\n"
    )


def test_docx_entities_that_could_grow_are_kept_as_written_never_expanded() -> None:
    # A billion-laughs chain and an external entity: neither is read, both are shown as written,
    # and the text around them stays.
    laughs = '<!ENTITY lol "lol"><!ENTITY lol2 "&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;">'
    data = files.entity_docx(
        "One &lol2; two &secret; three.",
        declarations=f'{laughs}<!ENTITY secret SYSTEM "file:///etc/passwd">',
    )
    assert extract(data, filename="e.docx").text == "One &lol2; two &secret; three.\n\nNext paragraph.\n"


def test_docx_zip_bomb_is_refused_before_decompressing() -> None:
    source = zipfile.ZipFile(io.BytesIO(files.heading_docx()))
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", compression=zipfile.ZIP_DEFLATED) as bomb:
        for item in source.infolist():
            bomb.writestr(item, source.read(item.filename))
        bomb.writestr("word/media/padding.bin", b"\0" * 5_000_000)  # ~5 KB packed
    with pytest.raises(ExtractionError, match="zip bomb") as error:
        extract(out.getvalue(), filename="bomb.docx")
    assert error.value.code == "too_large"
    with pytest.raises(ExtractionError, match="zip bomb"):
        extract(
            files.heading_docx(),
            filename="small.docx",
            limits=ExtractionLimits(max_uncompressed_bytes=1000),
        )


def test_damaged_docx_is_refused() -> None:
    data = files.heading_docx()
    with pytest.raises(ExtractionError, match="damaged or truncated") as error:
        extract(data[: len(data) // 2], filename="cut.docx")
    assert error.value.code == "corrupt"


def test_html_article_without_the_navigation_chrome() -> None:
    extracted = extract(files.ARTICLE_PAGE, filename="warranty.html")
    assert extracted.format == HTML
    assert [(hint.level, hint.title) for hint in extracted.headings] == [
        (1, "Warranty terms"),
        (2, "What is covered"),
        (3, "Claims"),
    ]
    text = extracted.text
    assert text.startswith("# Warranty terms\n\n")
    assert "Every product carries a two-year warranty from the day of delivery." in text
    assert "Defects in materials and workmanship.\nParts and labour." in text
    assert "Product | Years\nKettle | 2" in text
    for chrome in ("Sign in", "Home", "Products\n", "Returns policy", "Cookie", "tracking", "font-family"):
        assert chrome not in text, chrome


def test_html_without_h1_is_titled_by_its_title_element() -> None:
    page = b"<html><head><title>Release notes</title></head><body><p>Version 2 is out.</p></body></html>"
    extracted = extract(page, filename="notes.htm")
    assert extracted.text == "# Release notes\n\nVersion 2 is out.\n"


def test_html_in_a_legacy_encoding_is_decoded() -> None:
    page = '<html><head><meta charset="windows-1252"></head><body><p>Café – “quoted”</p></body></html>'
    extracted = extract(page.encode("cp1252"), filename="old.html")
    assert extracted.text == 'Café – "quoted"\n'


def test_markdown_and_text_pass_through_unchanged() -> None:
    markdown = "# Title\n\nSome  text with  double spaces.\n"
    extracted = extract(markdown.encode(), filename="notes.md")
    assert (extracted.format, extracted.text, extracted.headings) == (MARKDOWN, markdown, ())
    assert [(span.page, span.start, span.end) for span in extracted.page_spans] == [(1, 0, len(markdown))]
    assert extract(b"\xef\xbb\xbfplain", filename="a.txt").text == "plain"
    assert extract(b"plain", filename="no-extension").format == TEXT


def test_text_that_is_not_utf8_is_refused() -> None:
    with pytest.raises(ExtractionError, match=r"not UTF-8 text \(byte 3\)"):
        extract(b"abc\xff\xfe def", filename="latin.txt")


@pytest.mark.parametrize(
    ("data", "filename", "expected"),
    [
        (files.plain_pdf(["Hello"]), "report.pdf", PDF),
        (files.heading_docx(), "notes.docx", DOCX),
        (files.ARTICLE_PAGE, "page.html", HTML),
        (b"  <!-- saved -->\n<html><body><p>x</p></body></html>", "page.txt", HTML),
        (b"<p>Hello</p>", "page.md", HTML),
        (b"# Title\n\n<b>inline html</b> in markdown", "notes.md", MARKDOWN),
        (b"<not really a tag> but text", "page.html", HTML),
        (b"<not really a tag> but text", "notes.txt", TEXT),
    ],
)
def test_format_comes_from_the_content(data: bytes, filename: str, expected: str) -> None:
    assert detect_format(data, filename=filename).format == expected


def test_a_name_that_lies_is_read_by_content_and_reported() -> None:
    extracted = extract(files.heading_docx(), filename="report.pdf")
    assert extracted.format == DOCX
    assert extracted.mismatch == (
        "report.pdf is named as a PDF but its content is a Word (.docx) file; it was read as a Word (.docx) file"
    )
    assert extract(b"# Notes", filename="notes.txt").mismatch == ""  # markdown in a .txt is fine


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"", "is empty"),
        (b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + b"\0" * 100, "old Office file"),
        (b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR", "not a format OpenFable reads"),
        (b"PK\x03\x04 not really a zip", "damaged or truncated zip"),
    ],
)
def test_unreadable_formats_are_refused_in_words(data: bytes, message: str) -> None:
    with pytest.raises(ExtractionError, match=message):
        extract(data, filename="upload.bin")


def test_zip_that_is_not_a_docx_is_refused() -> None:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as archive:
        archive.writestr("xl/workbook.xml", "<workbook/>")
    with pytest.raises(ExtractionError, match=r"zip archive but not a Word \(.docx\) file"):
        extract(out.getvalue(), filename="sheet.docx")


def test_pages_of_a_range_skips_empty_pages() -> None:
    spans = (PageSpan(1, 0, 2), PageSpan(2, 2, 2), PageSpan(3, 2, 6))  # page 2 was blank
    extracted = Extracted(text="abcdef", format=PDF, pages=3, page_spans=spans)
    assert extracted.pages_of(0, 2) == (1,)
    assert extracted.pages_of(1, 3) == (1, 3)
    assert extracted.pages_of(2, 6) == (3,)
    assert extracted.pages_of(0, 6) == (1, 3)
