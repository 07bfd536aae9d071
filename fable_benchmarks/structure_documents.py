"""Documents made at run time whose headings are known: the structure benchmark's Markdown, HTML,
Word and bookmarked-PDF cases (pure, no Django; deterministic: the same bytes on every run).

Three outlines (a numbered services agreement, an unnumbered annual report, a handbook of
"Chapter" parts), each 12-18 headings on 2-3 levels with several paragraphs of body text under
every heading, written out in each format as a person's tool would: Markdown ``#`` lines, HTML
``h1``-``h4`` inside a page frame, Word's Title and Heading 1-3 styles, and a PDF with bold larger
heading lines whose outline (bookmarks) names every heading. Each document also has a title line
that is not a section, body sentences that open with a number or in capitals ("2.5 percent of
the fee...", "ALL FEES ARE EXCLUSIVE...") and bold sentences that are emphasis, not headings, so
a heading detector that reads any short line, number or bold run as a heading is caught.
"""

from __future__ import annotations

import datetime
import io
import random
from collections.abc import Iterator
from dataclasses import dataclass

from fable_benchmarks.structure import GoldHeading, GoldOutline


@dataclass(frozen=True)
class Section:
    heading: str
    level: int  # 1 = top
    paragraphs: tuple[str, ...]


@dataclass(frozen=True)
class GeneratedDocument:
    slug: str  # "services-agreement": the file name without its extension
    title: str
    sections: tuple[Section, ...]
    # How the title and the top headings are marked: "title-above" writes the title as a heading
    # one level above the sections (Markdown "#", HTML h1, Word's Title style); "title-plain" as
    # a plain (bold) first line, the sections starting at the top heading level.
    title_style: str

    @property
    def gold(self) -> GoldOutline:
        return GoldOutline(
            title=self.title,
            headings=tuple(GoldHeading(section.heading, section.level) for section in self.sections),
        )


_SERVICES_OUTLINE = (
    (1, "1. DEFINITIONS AND INTERPRETATION"),
    (2, "1.1 Defined Terms"),
    (2, "1.2 Interpretation"),
    (1, "2. SERVICES"),
    (2, "2.1 Scope of Services"),
    (2, "2.2 Service Levels"),
    (3, "2.2.1 Availability"),
    (3, "2.2.2 Service Credits"),
    (1, "3. FEES AND PAYMENT"),
    (2, "3.1 Fees"),
    (2, "3.2 Invoicing"),
    (2, "3.3 Late Payment"),
    (1, "4. TERM AND TERMINATION"),
    (2, "4.1 Term"),
    (2, "4.2 Termination for Cause"),
    (1, "5. GENERAL"),
    (2, "5.1 Notices"),
    (2, "5.2 Governing Law"),
)
_REPORT_OUTLINE = (
    (1, "Executive Summary"),
    (1, "Market Overview"),
    (2, "Demand Trends"),
    (2, "Competitive Landscape"),
    (1, "Financial Performance"),
    (2, "Revenue"),
    (3, "Product Sales"),
    (3, "Services Revenue"),
    (2, "Operating Costs"),
    (1, "Outlook"),
    (2, "Risks and Uncertainties"),
    (2, "Priorities for 2024"),
)
_HANDBOOK_OUTLINE = (
    (1, "Chapter 1 Introduction"),
    (2, "Purpose of This Handbook"),
    (2, "Who the Handbook Applies To"),
    (1, "Chapter 2 Working Hours"),
    (2, "Core Hours"),
    (2, "Overtime"),
    (3, "Approval of Overtime"),
    (3, "Compensation for Overtime"),
    (1, "Chapter 3 Leave"),
    (2, "Annual Leave"),
    (2, "Sick Leave"),
    (1, "Appendix A Request Forms"),
)

_CONTRACT_SENTENCES = (
    "The Supplier shall perform the Services with reasonable skill and care and in accordance with good industry practice.",
    "The Customer shall provide the Supplier with access to its premises and systems as reasonably required.",
    "Each party shall comply with all applicable laws and regulations in performing its obligations under this Agreement.",
    "Any change to the Services shall be agreed in writing by authorised representatives of both parties.",
    "The Supplier may subcontract any part of the Services with the prior written consent of the Customer.",
    "The Supplier remains responsible for the acts and omissions of its subcontractors as if they were its own.",
    "Nothing in this Agreement creates a partnership or joint venture between the parties.",
    "The Customer shall notify the Supplier promptly of any failure of the Services that comes to its attention.",
    "Where the Supplier fails to meet a service level, it shall investigate the cause and report on it within five working days.",
    "The parties shall meet each quarter to review the performance of the Services and the service levels.",
    "Any dispute shall first be referred to the project managers of the parties for resolution.",
    "The Supplier shall keep complete and accurate records of the time spent and the materials used.",
    "Confidential information disclosed under this Agreement shall be used only for the purpose of this Agreement.",
    "The obligations in this clause survive the termination or expiry of this Agreement.",
    "A waiver of any right under this Agreement is effective only if it is given in writing.",
    "The Customer may audit the records of the Supplier once a year on reasonable notice.",
    "The Supplier shall maintain insurance with a reputable insurer against the risks of providing the Services.",
    "Neither party shall be liable for a delay caused by events beyond its reasonable control.",
    "The rights and remedies provided in this Agreement are in addition to those provided by law.",
    "If any provision of this Agreement is held invalid, the other provisions remain in force.",
)
_REPORT_SENTENCES = (
    "Demand for our core products remained resilient despite a softer economic backdrop in several markets.",
    "The group continued to invest in its digital channels, which now account for a growing share of orders.",
    "Customer retention improved in every region, helped by the new loyalty programme launched in the spring.",
    "Input costs eased in the second half of the year as freight rates returned to historical levels.",
    "Our competitors responded with aggressive pricing, particularly in the entry-level segment.",
    "Management expects the investment programme to be completed by the end of the next financial year.",
    "The board regularly reviews the principal risks facing the business and the measures in place to manage them.",
    "Working capital was tightly managed, with inventory days falling for the third consecutive year.",
    "The services business benefited from longer contracts and a higher share of recurring revenue.",
    "Headcount grew modestly, with most new roles created in engineering and customer support.",
    "Currency movements reduced reported revenue slightly compared with the prior year.",
    "The new distribution network shortened delivery times for customers in smaller towns.",
    "We expect market growth to slow next year as higher interest rates weigh on household spending.",
    "Energy efficiency projects at our main sites reduced consumption and operating costs.",
    "Pricing actions taken early in the year protected gross margin against cost inflation.",
    "The product range was simplified, removing a number of low-volume lines with poor margins.",
    "Research and development spending focused on the next generation of connected devices.",
    "Supplier diversification reduced our dependence on any single source of critical components.",
)
_HANDBOOK_SENTENCES = (
    "This handbook explains the policies and procedures that apply to your employment with the company.",
    "Your line manager is the first point of contact for any question about the matters described here.",
    "The company may update these policies from time to time and will tell employees of any material change.",
    "Employees are expected to record their working time accurately in the time recording system.",
    "Flexible working arrangements may be agreed where they meet the needs of the business and the team.",
    "Requests should be made in writing and will be considered within a reasonable period.",
    "Time off in lieu may be offered instead of payment where the employee agrees.",
    "Managers should plan work so that overtime is the exception rather than the rule.",
    "Leave that is not taken by the end of the holiday year is normally lost unless the law provides otherwise.",
    "Employees who are unwell should tell their manager as early as possible on the first day of absence.",
    "A return to work meeting may be held after any period of sickness absence.",
    "The company respects the privacy of medical information and stores it securely.",
    "Part-time employees receive the same benefits on a pro rata basis.",
    "Breaks should be taken away from the workstation wherever possible.",
    "These rules are applied fairly and consistently to every member of staff.",
    "The forms in this handbook are also available on the staff intranet.",
)
# Body sentences that open with a number or in capitals: a detector that takes any numbered or
# upper-case line start for a heading opens a section at each of them.
_CONTRACT_TRAPS = (
    "30 days after the Effective Date the Supplier shall deliver the first service report.",
    "2.5 percent of the monthly fee is credited for each full hour of unavailability.",
    "ALL FEES ARE EXCLUSIVE OF VALUE ADDED TAX, WHICH SHALL BE PAID IN ADDITION.",
    "IN NO EVENT SHALL EITHER PARTY BE LIABLE FOR ANY INDIRECT OR CONSEQUENTIAL LOSS.",
    "Section 3 applies to every renewal term as well as to the initial term.",
)
_REPORT_TRAPS = (
    "2023 was the strongest year in the history of the company by revenue and by profit.",
    "12 new distribution centres opened during the year, most of them in the second half.",
    "1.5 million units were shipped in the fourth quarter alone.",
    "EBITDA margin rose by 1.4 points to 18.2 percent on the back of lower input costs.",
)
_HANDBOOK_TRAPS = (
    "40 hours is the standard working week for full-time employees.",
    "HR MUST RECEIVE EVERY LEAVE REQUEST AT LEAST TWO WEEKS IN ADVANCE.",
    "3 days of sick leave may be taken in a row without a medical certificate.",
)


def generated_documents() -> tuple[GeneratedDocument, ...]:
    """The three documents every format is written from (the same text in each format, so the
    formats' rows differ only by how a format's headings are read)."""
    return (
        _document(
            "services-agreement",
            "Master Services Agreement",
            _SERVICES_OUTLINE,
            _CONTRACT_SENTENCES,
            _CONTRACT_TRAPS,
            title_style="title-plain",
            seed=1,
        ),
        _document(
            "annual-report",
            "Annual Report 2023",
            _REPORT_OUTLINE,
            _REPORT_SENTENCES,
            _REPORT_TRAPS,
            title_style="title-above",
            seed=2,
        ),
        _document(
            "employee-handbook",
            "Employee Handbook",
            _HANDBOOK_OUTLINE,
            _HANDBOOK_SENTENCES,
            _HANDBOOK_TRAPS,
            title_style="title-plain",
            seed=3,
        ),
    )


def _document(
    slug: str,
    title: str,
    outline: tuple[tuple[int, str], ...],
    sentences: tuple[str, ...],
    traps: tuple[str, ...],
    *,
    title_style: str,
    seed: int,
) -> GeneratedDocument:
    chooser = random.Random(seed)  # a fixed seed: the same document on every run
    trap_sentences = iter(traps)
    sections = []
    for index, (level, heading) in enumerate(outline):
        paragraphs: list[str] = []
        for _ in range(chooser.randint(2, 3)):
            paragraph = chooser.sample(sentences, chooser.randint(3, 4))
            if index % 3 == 1 and not paragraphs:
                # Every third section opens a paragraph with a trap sentence, at a line start.
                trap = next(trap_sentences, None)
                if trap:
                    paragraph = [trap, *paragraph]
            paragraphs.append(" ".join(paragraph))
        sections.append(Section(heading, level, tuple(paragraphs)))
    return GeneratedDocument(slug, title, tuple(sections), title_style)


def _emphasis(document: GeneratedDocument) -> Iterator[tuple[int, str]]:
    """(section index, sentence): a bold sentence of emphasis after every fourth section's text."""
    for index, section in enumerate(document.sections):
        if index % 4 == 2:
            yield index, section.paragraphs[0].split(". ")[0].rstrip(".") + "."


# -- Markdown ---------------------------------------------------------------------------------


def markdown_bytes(document: GeneratedDocument) -> bytes:
    offset = 1 if document.title_style == "title-above" else 0
    lines = [f"# {document.title}" if offset else document.title, ""]
    emphasis = dict(_emphasis(document))
    for index, section in enumerate(document.sections):
        lines += [f"{'#' * (section.level + offset)} {section.heading}", ""]
        for paragraph in section.paragraphs:
            lines += [paragraph, ""]
        if index in emphasis:
            lines += [f"**{emphasis[index]}**", ""]
    return "\n".join(lines).encode("utf-8")


# -- HTML -------------------------------------------------------------------------------------


def html_bytes(document: GeneratedDocument) -> bytes:
    from html import escape

    offset = 1 if document.title_style == "title-above" else 0
    body = [f"<h1>{escape(document.title)}</h1>" if offset else f"<p><b>{escape(document.title)}</b></p>"]
    emphasis = dict(_emphasis(document))
    for index, section in enumerate(document.sections):
        tag = f"h{section.level + offset}"
        body.append(f"<{tag}>{escape(section.heading)}</{tag}>")
        for number, paragraph in enumerate(section.paragraphs):
            if number == 1 and index % 2 == 0:
                # A bold lead-in inside a paragraph: emphasis, not a heading.
                first, _, rest = paragraph.partition(" ")
                body.append(f"<p><strong>{escape(first)}</strong> {escape(rest)}</p>")
            else:
                body.append(f"<p>{escape(paragraph)}</p>")
        if index in emphasis:
            body.append(f"<p><b>{escape(emphasis[index])}</b></p>")
    page = (
        "<!DOCTYPE html>\n<html lang='en'><head><meta charset='utf-8'>"
        f"<title>{escape(document.title)} | Example Corp</title></head><body>"
        "<header><nav><a href='/'>Home</a> <a href='/documents'>Documents</a></nav></header>"
        f"<main>{''.join(body)}</main>"
        "<footer><p>Copyright Example Corp. All rights reserved.</p></footer></body></html>"
    )
    return page.encode("utf-8")


# -- Word -------------------------------------------------------------------------------------


def docx_bytes(document: GeneratedDocument) -> bytes:
    import docx

    word = docx.Document()
    if document.title_style == "title-above":
        word.add_paragraph(document.title, style="Title")
    else:
        word.add_paragraph().add_run(document.title).bold = True
    emphasis = dict(_emphasis(document))
    for index, section in enumerate(document.sections):
        word.add_heading(section.heading, level=section.level)
        for paragraph in section.paragraphs:
            word.add_paragraph(paragraph)
        if index in emphasis:
            word.add_paragraph().add_run(emphasis[index]).bold = True
    out = io.BytesIO()
    word.save(out)
    return out.getvalue()


# -- PDF with bookmarks -----------------------------------------------------------------------

_HEADING_POINTS = {1: 15.0, 2: 12.5, 3: 11.0}
_BODY_POINTS = 10.0
_FIXED_DATE = datetime.datetime(2024, 1, 1, tzinfo=datetime.UTC)  # the same bytes on every run


def pdf_bytes(document: GeneratedDocument) -> bytes:
    """Bold, larger heading lines, each also an outline entry (the gold); a running header and a
    page footer, as a word processor's "export as PDF" writes them."""
    from fpdf import FPDF

    class _Pdf(FPDF):
        def header(self) -> None:
            self.set_font("Helvetica", "", 8)
            self.cell(0, 10, f"{document.title} - Confidential", align="R")
            self.ln(20)

        def footer(self) -> None:
            self.set_y(-40)
            self.set_font("Helvetica", "", 8)
            self.cell(0, 10, f"Page {self.page_no()}", align="C")

    pdf = _Pdf(format="A4", unit="pt")
    pdf.set_creation_date(_FIXED_DATE)
    pdf.set_margins(72, 60, 72)
    pdf.set_auto_page_break(True, margin=72)
    pdf.add_page()
    pdf.set_font("Helvetica", "B", 18)
    pdf.multi_cell(0, 24, document.title, align="C")
    pdf.ln(12)
    emphasis = dict(_emphasis(document))
    for index, section in enumerate(document.sections):
        points = _HEADING_POINTS.get(section.level, _BODY_POINTS)
        if pdf.will_page_break(points * 4):
            pdf.add_page()  # a heading never sits alone at the foot of a page
        pdf.ln(6)
        pdf.start_section(section.heading, level=section.level - 1)
        pdf.set_font("Helvetica", "B", points)
        pdf.multi_cell(0, points * 1.3, section.heading, align="L")
        pdf.ln(4)
        pdf.set_font("Helvetica", "", _BODY_POINTS)
        for paragraph in section.paragraphs:
            pdf.multi_cell(0, _BODY_POINTS * 1.35, paragraph, align="L")
            pdf.ln(6)
        if index in emphasis:
            pdf.set_font("Helvetica", "B", _BODY_POINTS)
            pdf.multi_cell(0, _BODY_POINTS * 1.35, emphasis[index], align="L")
            pdf.ln(6)
    return bytes(pdf.output())


def outline_gold(data: bytes, *, title: str = "") -> GoldOutline:
    """A PDF's own bookmarks as the gold headings (level 1 = a top bookmark)."""
    import pypdfium2 as pdfium

    document = pdfium.PdfDocument(data)
    try:
        headings = tuple(
            GoldHeading(bookmark.get_title().strip(), bookmark.level + 1, _bookmark_page(bookmark))
            for bookmark in document.get_toc(max_depth=6)
            if (bookmark.get_title() or "").strip()
        )
    finally:
        document.close()
    return GoldOutline(title=title, headings=headings)


def _bookmark_page(bookmark: object) -> int:
    destination = bookmark.get_dest()  # type: ignore[attr-defined]
    index = destination.get_index() if destination is not None else None
    return index + 1 if index is not None else 0
