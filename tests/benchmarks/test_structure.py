"""`python -m fable_benchmarks bench-structure`: the measures on hand-made trees, each fault moving
its own measure; the documents made with known headings; one real run through the builder."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from django.core.management import call_command

from documents.ingestion.extraction import extract
from documents.ingestion.tree import LEAF, ROOT, SECTION, SUBSECTION, TreeNode, check_tree
from fable_benchmarks import BenchInputError, structure_documents
from fable_benchmarks.cli import STRUCTURE_FORMATS
from fable_benchmarks.command import BenchCommand
from fable_benchmarks.structure import (
    BURIED,
    FORMATS,
    LEAF_ONLY,
    MATCHED,
    NOT_LOCATED,
    UNTITLED,
    DocumentScore,
    GoldHeading,
    GoldOutline,
    locate_headings,
    nodes_from_tree,
    score_document,
    title_matches,
)
from fable_benchmarks.structure_report import format_details, format_rows, format_structure_table
from fable_benchmarks.structure_run import StructureCase, read_gold_file, select_cases
from tests.benchmarks import run_bench
from tests.documents.ingestion import document_files as files

TEXT = (
    "Supply Agreement\n\n"
    "# 1. Definitions\n\nWords in capitals have the meaning given to them here.\n\n"
    "## 1.1 Goods\n\nThe goods are the products listed in the schedule.\n\n"
    "## 1.2 Price\n\nThe price is stated in each order. The buyer pays within thirty days.\n\n"
    "# 2. Delivery\n\nThe supplier delivers to the warehouse. Risk passes on delivery.\n"
)
GOLD = GoldOutline(
    title="Supply Agreement",
    headings=(
        GoldHeading("1. Definitions", 1),
        GoldHeading("1.1 Goods", 2),
        GoldHeading("1.2 Price", 2),
        GoldHeading("2. Delivery", 1),
    ),
)


def _at(needle: str) -> int:
    return TEXT.index(needle)


def _leaf(start: str | int, end: str | int) -> TreeNode:
    low = start if isinstance(start, int) else _at(start)
    high = end if isinstance(end, int) else _at(end)
    return TreeNode(LEAF, low, high)


def _node(kind: str, title: str, *children: TreeNode) -> TreeNode:
    return TreeNode(kind, children[0].start_char, children[-1].end_char, title, children=list(children))


def _definitions(*subsections: TreeNode) -> TreeNode:
    return _node(SECTION, "1. Definitions", _leaf("# 1.", "## 1.1"), *subsections)


def _score(root: TreeNode) -> DocumentScore:
    check_tree(root, TEXT)  # every hand-made tree is one the builder could have made
    return score_document(
        name="supply.md", format="markdown", text=TEXT, nodes=nodes_from_tree(root), gold=GOLD
    )


def _measures(score: DocumentScore) -> tuple[tuple[int, int], tuple[int, int], int, tuple[int, int]]:
    """(recall, level agreement, buried, invented) as counts."""
    matched = score.count(MATCHED)
    return (
        (matched, score.located),
        (score.level_agreed, matched),
        score.count(BURIED),
        (len(score.invented), score.internal_nodes),
    )


GOODS = _node(SUBSECTION, "1.1 Goods", _leaf("## 1.1", "## 1.2"))
PRICE = _node(SUBSECTION, "1.2 Price", _leaf("## 1.2", "# 2."))
DELIVERY = _node(SECTION, "2. Delivery", _leaf("# 2.", len(TEXT)))
PREAMBLE = _leaf(0, "# 1.")


def test_a_tree_that_follows_every_heading_scores_perfectly() -> None:
    root = _node(ROOT, "Supply Agreement", PREAMBLE, _definitions(GOODS, PRICE), DELIVERY)
    score = _score(root)
    assert _measures(score) == ((4, 4), (4, 4), 0, (0, 4))
    assert score.title_opened_section is False
    row = format_rows([score])[0]
    assert (row.format, row.documents, row.gold, row.located, row.titles, row.titles_as_sections) == (
        "markdown",
        1,
        4,
        4,
        1,
        0,
    )
    assert "| markdown | 1 | 4/4 | 100.0% (4/4) | 100.0% (4/4) | 0.0% (0/4) | 0.0% (0/4) | 0/1 |" in (
        format_structure_table(format_rows([score]), total_seconds=1.0)
    )


def test_a_heading_inside_a_leaf_is_buried_and_not_recalled() -> None:
    goods_and_price = _node(SUBSECTION, "1.1 Goods", _leaf("## 1.1", "# 2."))
    score = _score(_node(ROOT, "Supply Agreement", PREAMBLE, _definitions(goods_and_price), DELIVERY))
    # Recall falls with it: a heading the tree cannot see is not followed. Levels and sections hold.
    assert _measures(score) == ((3, 4), (3, 3), 1, (0, 3))
    assert [result.status for result in score.headings] == [MATCHED, MATCHED, BURIED, MATCHED]
    assert "- buried: '1.2 Price' (level 2)" in format_details([score])


def test_a_heading_at_the_wrong_level_moves_only_level_agreement() -> None:
    price_as_section = _node(SECTION, "1.2 Price", _leaf("## 1.2", "# 2."))
    score = _score(_node(ROOT, "Supply Agreement", PREAMBLE, _definitions(GOODS), price_as_section, DELIVERY))
    assert _measures(score) == ((4, 4), (3, 4), 0, (0, 4))
    assert (
        "- wrong level: '1.2 Price' (level 2) hangs under the root, not under section '1. Definitions'"
    ) in format_details([score])


def test_a_section_made_from_body_text_is_invented() -> None:
    risk = _node(SUBSECTION, "Risk and delivery", _leaf("Risk passes", len(TEXT)))
    delivery = _node(SECTION, "2. Delivery", _leaf("# 2.", "Risk passes"), risk)
    score = _score(_node(ROOT, "Supply Agreement", PREAMBLE, _definitions(GOODS, PRICE), delivery))
    assert _measures(score) == ((4, 4), (4, 4), 0, (1, 5))
    assert [section.title for section in score.invented] == ["Risk and delivery"]


def test_a_section_under_another_title_or_a_bare_leaf_is_missed_not_buried() -> None:
    price_leaf = _leaf("## 1.2", "# 2.")  # the heading opens a leaf, but no section
    renamed = _node(SECTION, "Shipping", _leaf("# 2.", len(TEXT)))
    score = _score(_node(ROOT, "Supply Agreement", PREAMBLE, _definitions(GOODS, price_leaf), renamed))
    assert [result.status for result in score.headings] == [MATCHED, MATCHED, LEAF_ONLY, UNTITLED]
    assert _measures(score) == ((2, 4), (2, 2), 0, (0, 3))
    assert "the section there is titled 'Shipping'" in format_details([score])


def test_a_title_line_that_opens_a_section_is_reported_as_front_matter() -> None:
    title_section = _node(SECTION, "Supply Agreement", _leaf(0, "# 1."))
    score = _score(_node(ROOT, "Supply Agreement", title_section, _definitions(GOODS, PRICE), DELIVERY))
    assert score.title_opened_section is True
    # Before the first heading: front matter, listed but not counted as invented.
    assert _measures(score) == ((4, 4), (4, 4), 0, (0, 5))
    assert [section.title for section in score.front_matter] == ["Supply Agreement"]
    assert "opened a section" in format_details([score])


def test_a_child_of_an_unmatched_parent_disagrees() -> None:
    renamed = _node(SECTION, "Meanings", _leaf("# 1.", "## 1.1"), GOODS, PRICE)
    score = _score(_node(ROOT, "Supply Agreement", PREAMBLE, renamed, DELIVERY))
    assert _measures(score) == ((3, 4), (1, 3), 0, (0, 4))
    assert (
        "- wrong level: '1.1 Goods' (level 2) hangs under section 'Meanings'; its parent heading "
        "'1. Definitions' has no node of its own"
    ) in format_details([score])


def test_headings_are_located_in_order_at_line_starts_whatever_the_typography() -> None:
    text = (
        "W I T N E S S E T H\n\n# 1. \u201cDEFINITIONS\u201d \u2014 Terms\n\n"
        "As set out in 2. Delivery below, the parties agree.\n\n**2. Delivery.** The supplier delivers.\n"
    )
    headings = [
        GoldHeading("WITNESSETH", 1),
        GoldHeading('1. "Definitions" - Terms', 1),
        GoldHeading("Not in the text", 1),
        GoldHeading("2. Delivery", 1),
    ]
    found = locate_headings(text, headings)
    assert found == [0, text.index("1. \u201c"), None, text.index("2. Delivery.")]


def test_a_page_hint_picks_the_heading_on_its_page() -> None:
    text = "Term\n\nThe term of the loan.\n\nTerm\n\nThis agreement runs for a year.\n"
    second = text.index("Term", 5)
    spans = [(1, 0, second), (2, second, len(text))]
    assert locate_headings(text, [GoldHeading("Term", 1, page=2)], page_spans=spans) == [second]
    assert locate_headings(text, [GoldHeading("Term", 1)], page_spans=spans) == [0]


@pytest.mark.parametrize(
    ("title", "heading", "carries"),
    [
        ("1.DEFINITIONS", "1. Definitions", True),
        ("2.1 Equipment", "2.1 Equipment Purchase", True),  # the number and the first title word
        ("ARTICLE II", "ARTICLE II EQUIPMENT", False),  # the number alone
        ("EXHIBIT A Payments and Exclusivity", "EXHIBIT A", True),  # a heading that is only a number
        ("4.1 Termination Without Cause. Either party may end\u2026", "4.1 TERMINATION WITHOUT CAUSE", True),
        ("Representation and Warranties", "Representations and Warranties", True),  # alike
        ("Shipping", "2. Delivery", False),
        ("", "2. Delivery", False),
    ],
)
def test_a_title_carries_a_heading(title: str, heading: str, carries: bool) -> None:
    assert title_matches(title, heading) is carries


def test_formats_add_up_counts_not_shares() -> None:
    good = _score(_node(ROOT, "Supply Agreement", PREAMBLE, _definitions(GOODS, PRICE), DELIVERY))
    goods_and_price = _node(SUBSECTION, "1.1 Goods", _leaf("## 1.1", "# 2."))
    bad = _score(_node(ROOT, "Supply Agreement", PREAMBLE, _definitions(goods_and_price), DELIVERY))
    html = DocumentScore("x.html", "html", good.headings, 4, (), (), "", None)
    rows = {row.format: row for row in format_rows([good, bad, html])}
    assert list(rows) == ["html", "markdown", "all"]
    assert (rows["markdown"].matched, rows["markdown"].located, rows["markdown"].buried) == (7, 8, 1)
    assert (rows["all"].matched, rows["all"].located, rows["all"].internal_nodes) == (11, 12, 11)
    assert rows["all"].as_json()["recall"] == round(11 / 12, 4)


def test_gold_file_is_read_and_its_mistakes_are_named(tmp_path: Path) -> None:
    path = tmp_path / "gold.json"
    path.write_text(
        json.dumps(
            [
                {
                    "file": "a.pdf",
                    "doc_id": 3,
                    "title": "",
                    "headings": [{"text": "1. Scope", "level": 1, "page": 2}],
                }
            ]
        )
    )
    [gold] = read_gold_file(path)
    assert (gold.file, gold.doc_id, gold.outline.headings) == ("a.pdf", 3, (GoldHeading("1. Scope", 1, 2),))
    path.write_text(json.dumps([{"file": "a.pdf", "headings": [{"text": "1. Scope"}]}]))
    with pytest.raises(BenchInputError, match="document 1 needs"):
        read_gold_file(path)


def test_generated_documents_are_the_same_on_every_run_and_their_bookmarks_are_their_headings() -> None:
    first, second = structure_documents.generated_documents(), structure_documents.generated_documents()
    assert first == second
    for document in first:
        assert 8 <= len(document.sections) <= 20
        assert {section.level for section in document.sections} >= {1, 2}
        assert all(len(section.paragraphs) >= 2 for section in document.sections)
        pdf = structure_documents.pdf_bytes(document)
        assert pdf == structure_documents.pdf_bytes(document)
        outline = structure_documents.outline_gold(pdf, title=document.title)
        assert [(h.text, h.level) for h in outline.headings] == [
            (h.text, h.level) for h in document.gold.headings
        ]
        assert all(heading.page >= 1 for heading in outline.headings)
    assert structure_documents.docx_bytes(first[0])[:2] == b"PK"


def test_a_pdf_read_without_its_outline_has_no_bookmark_headings() -> None:
    data = files.outline_pdf()  # headings that are plain body text, named only by the bookmarks
    assert [hint.source for hint in extract(data, filename="o.pdf").headings] == ["outline", "outline"]
    without = extract(data, filename="o.pdf", use_outline=False)
    assert without.headings == ()
    assert "# Introduction" not in without.text and "Introduction" in without.text


def test_cases_are_chosen_by_format_name_and_limit() -> None:
    cases = [
        StructureCase(name, fmt, GOLD, data=b"x")
        for name, fmt in [("a.md", "markdown"), ("b.md", "markdown"), ("a.html", "html"), ("c.pdf", "pdf")]
    ]
    assert [c.name for c in select_cases(cases, formats=["markdown", "html"], limit=1)] == ["a.md", "a.html"]
    assert [c.name for c in select_cases(cases, formats=FORMATS, only="A.")] == ["a.md", "a.html"]
    assert STRUCTURE_FORMATS == FORMATS  # the command line's list is the module's


@pytest.mark.django_db  # the command line checks the database before any subcommand
def test_bench_structure_refuses_an_unknown_format_and_a_missing_gold(tmp_path: Path) -> None:
    status, answer = run_bench("bench-structure", "--formats", "pdf,latex")
    assert status == 1 and "latex" in answer["error"]
    status, answer = run_bench("bench-structure", "--cuad-gold", str(tmp_path / "none.json"))
    assert status == 1 and "no such file" in answer["error"]


@pytest.mark.django_db  # about 4 s: one small document through the real embedding model
@pytest.mark.slow
def test_bench_structure_runs_a_generated_markdown_document_through_the_builder(tmp_path: Path) -> None:
    out = io.StringIO()
    call_command(
        BenchCommand(),
        "bench-structure",
        "--formats",
        "markdown",
        "--only",
        "employee-handbook",
        "--details",
        "--json",
        str(tmp_path / "structure.json"),
        stdout=out,
    )
    table = out.getvalue()
    assert "| markdown | 1 | 12/12 |" in table
    assert "### markdown: employee-handbook.md" in table
    saved = json.loads((tmp_path / "structure.json").read_text())
    [document] = saved["documents"]
    assert (document["gold"], document["located"]) == (12, 12)
    assert document["title_opened_section"] is not None  # the title line was found
    # The real builder on Markdown headings: most are followed (the exact score is the benchmark's).
    assert document["matched"] >= 10
    assert saved["rows"][0]["format"] == "markdown"
    assert not [h for h in document["headings"] if h["status"] == NOT_LOCATED]
