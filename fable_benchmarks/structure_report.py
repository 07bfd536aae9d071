"""The structure benchmark's report: document scores added up per format (micro-averages: counts
add up, then the shares are taken), the markdown table, and ``--details``: per document what was
missed, buried, misplaced and invented (pure, no Django)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from fable_benchmarks.structure import BURIED, FORMATS, MATCHED, UNTITLED, DocumentScore, HeadingResult

TARGETS = "recall ≥ 95 %, level agreement ≥ 95 %, buried ≤ 1 %, invented ≤ 5 % of sections"


@dataclass(frozen=True)
class FormatRow:
    format: str
    documents: int
    gold: int
    located: int
    matched: int
    level_agreed: int
    buried: int
    internal_nodes: int
    invented: int
    titles: int  # title lines found
    titles_as_sections: int
    seconds: float

    def as_json(self) -> dict[str, Any]:
        return {
            **asdict(self),
            "recall": _share(self.matched, self.located),
            "level_agreement": _share(self.level_agreed, self.matched),
            "buried_share": _share(self.buried, self.located),
            "invented_share": _share(self.invented, self.internal_nodes),
        }


def _share(part: int, whole: int) -> float | None:
    return round(part / whole, 4) if whole else None


def format_rows(scores: Iterable[DocumentScore]) -> list[FormatRow]:
    """One row per format (in ``FORMATS`` order) and an "all" row: counts added up."""
    scores = list(scores)
    groups = [(name, [score for score in scores if score.format == name]) for name in FORMATS]
    groups = [(name, group) for name, group in groups if group]
    if len(groups) > 1:
        groups.append(("all", scores))
    return [_row(name, group) for name, group in groups]


def _row(name: str, scores: list[DocumentScore]) -> FormatRow:
    return FormatRow(
        format=name,
        documents=len(scores),
        gold=_total(scores, lambda score: len(score.headings)),
        located=_total(scores, lambda score: score.located),
        matched=_total(scores, lambda score: score.count(MATCHED)),
        level_agreed=_total(scores, lambda score: score.level_agreed),
        buried=_total(scores, lambda score: score.count(BURIED)),
        internal_nodes=_total(scores, lambda score: score.internal_nodes),
        invented=_total(scores, lambda score: len(score.invented)),
        titles=_total(scores, lambda score: score.title_opened_section is not None),
        titles_as_sections=_total(scores, lambda score: bool(score.title_opened_section)),
        seconds=round(sum(score.seconds for score in scores), 1),
    )


def _total(scores: list[DocumentScore], count: Callable[[DocumentScore], int]) -> int:
    return sum(count(score) for score in scores)


def _cell(part: int, whole: int) -> str:
    return f"{part / whole:.1%} ({part}/{whole})" if whole else "–"


def format_structure_table(rows: Sequence[FormatRow], *, total_seconds: float) -> str:
    lines = [
        "| format | documents | headings located | recall | level agreement | buried | invented "
        "| title opened a section | seconds |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for row in rows:
        lines.append(
            f"| {row.format} | {row.documents} | {row.located}/{row.gold} "
            f"| {_cell(row.matched, row.located)} | {_cell(row.level_agreed, row.matched)} "
            f"| {_cell(row.buried, row.located)} | {_cell(row.invented, row.internal_nodes)} "
            f"| {row.titles_as_sections}/{row.titles} | {row.seconds:.1f} |"
        )
    lines += [
        "",
        f"Targets on the dev set: {TARGETS}. Recall and buried are shares of the headings located "
        "in the text; level agreement of the matched ones; invented of all sections and subsections.",
        f"Total time: {total_seconds:.1f} s (extraction and tree building, embedding included).",
    ]
    return "\n".join(lines) + "\n"


def format_details(scores: Iterable[DocumentScore]) -> str:
    """Per document, what went wrong: headings not located, missed, buried or under the wrong
    parent; invented sections; a title line that opened a section."""
    out: list[str] = []
    for score in scores:
        out += _document_details(score)
    return "\n".join(out) + "\n"


def _document_details(score: DocumentScore) -> list[str]:
    matched = score.count(MATCHED)
    out = [
        "",
        f"### {score.format}: {score.name}",
        f"recall {matched}/{score.located}, level {score.level_agreed}/{matched}, "
        f"buried {score.count(BURIED)}, invented {len(score.invented)}/{score.internal_nodes}, "
        f"{score.seconds:.1f} s",
    ]
    out += [line for line in map(_heading_problem, score.headings) if line is not None]
    for section in score.invented:
        out.append(f"- invented {section.kind} {section.title!r} at {section.start}: {section.opening!r}")
    for section in score.front_matter:
        out.append(f"- front matter (not counted): {section.kind} {section.title!r}: {section.opening!r}")
    if score.title_opened_section:
        out.append(f"- the title line {score.title!r} opened a section")
    return out


def _heading_problem(result: HeadingResult) -> str | None:
    """What went wrong with one gold heading; None when nothing did."""
    label = f"{result.heading.text!r} (level {result.heading.level}"
    label += f", page {result.heading.page})" if result.heading.page else ")"
    if result.status == MATCHED and result.level_agrees is False:
        return f"- wrong level: {label} {result.note}"
    if result.status == UNTITLED:
        return f"- missed: {label}: {result.note}"
    if result.status != MATCHED:
        return f"- {result.status}: {label}"
    return None
