"""Headings as a person reads them."""

from __future__ import annotations

from django.template import Context, Template

from documents.ingestion.heading_titles import without_heading_marks


def test_heading_marks_are_taken_off_heading_lines_only() -> None:
    text = "# Supply Agreement\n\n## 4. Term\nThe price is #4 on the list.\n   ### Notes\n####### seven"
    assert without_heading_marks(text) == (
        "Supply Agreement\n\n4. Term\nThe price is #4 on the list.\nNotes\n####### seven"
    )


def test_the_template_filter_shows_a_passage_without_marks_and_escaped() -> None:
    rendered = Template("{% load reading %}{{ text|unmarked }}").render(
        Context({"text": "## 4. <b>Term</b>\nBody"})
    )
    assert rendered == "4. &lt;b&gt;Term&lt;/b&gt;\nBody"
