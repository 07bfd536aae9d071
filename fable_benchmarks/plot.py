"""`bench-retrieval --plot` and `bench-plot`: recall against token budget as an SVG line chart.

Drawn from the report dict that ``bench-retrieval --json`` writes, so the chart shows exactly the
numbers the tables print (``report.format_retrieval``). pygal writes the SVG: a small pure-Python
library (matplotlib would bring numpy's friends and a font cache for five points a line), whose
output is plain SVG with its style inline, so it renders as an image in a README on GitHub (no
script is loaded). The budgets are spaced evenly, which for
the usual doubling budgets (500, 1K, 2K, 4K, 8K) is a log scale.

Line styles say what a line is: the engine (``vector``, ``bipath``, ``llm``) bold and solid, its
ablations thin and solid, the flat baselines dotted, the peers (hybrid, parent-child)
dash-dotted, the reference methods (ceiling, oracle) dashed.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fable_benchmarks import BenchInputError
from fable_benchmarks.report import budget_label


@dataclass(frozen=True)
class LineStyle:
    label: str
    colour: str
    width: float
    dasharray: str = ""  # "" draws a solid line


# Drawing order (later lines on top) and legend order: references, baselines, peers, ablations,
# engine.
LINE_STYLES: dict[str, LineStyle] = {
    "ceiling": LineStyle("ceiling (whole corpus)", "#6e7781", 2, "10, 6"),
    "oracle": LineStyle("oracle (best leaves)", "#24292f", 2, "10, 6"),
    "bm25": LineStyle("bm25 (flat chunks)", "#bc4c00", 2.5, "2, 6"),
    "dense": LineStyle("dense (flat chunks)", "#1a7f37", 2.5, "2, 6"),
    # The peers people would pick instead: dash-dot, each its own colour.
    "hybrid-256": LineStyle("hybrid-256 (BM25 + dense, RRF)", "#7cb518", 3, "12, 5, 2, 5"),
    "hybrid-512": LineStyle("hybrid-512 (BM25 + dense, RRF)", "#00a3bf", 3, "12, 5, 2, 5"),
    "parent-child": LineStyle("parent-child (auto-merging)", "#ff7b72", 3, "12, 5, 2, 5"),
    "vector-no-lexical": LineStyle("vector, no lexical path", "#8250df", 2),
    "vector-whole-query": LineStyle("vector, whole query", "#bf3989", 2),
    "vector-full-names": LineStyle("vector, names weigh fully", "#4d2d00", 2),
    "vector-unnamed": LineStyle("vector, no named routing", "#1b7c83", 2),
    "vector-source-words": LineStyle("vector, source words weigh", "#b08800", 2),
    "vector": LineStyle("vector (engine)", "#0969da", 5),
    "bipath": LineStyle("bipath (engine + LLM)", "#cf222e", 4),
    "llm": LineStyle("llm (engine, LLM paths)", "#9a6700", 4),
}
_OTHER_COLOURS = ("#57606a", "#0550ae", "#953800", "#116329")  # methods this module does not know

DATASET_NAMES = {"dragonball": "DragonBall", "cuad": "CUAD"}


def dataset_name(report: dict[str, Any]) -> str:
    """The dataset as a reader knows it, from the folder of the documents file."""
    folder = Path(str(report.get("docs", ""))).parent.name
    return DATASET_NAMES.get(folder.lower(), folder or "bench-retrieval")


def recall_series(report: dict[str, Any]) -> tuple[list[int], dict[str, list[float]]]:
    """The budgets and, per method in drawing order, its recall (%) at each: the same rounding
    as the tables (one decimal)."""
    budgets, series = _read_series(report)
    if not budgets or not series:
        raise BenchInputError("the bench-retrieval report has no budgets or no methods to draw")
    known = [method for method in LINE_STYLES if method in series]
    ordered = known + [method for method in series if method not in LINE_STYLES]
    return budgets, {method: series[method] for method in ordered}


def _read_series(report: dict[str, Any]) -> tuple[list[int], dict[str, list[float]]]:
    """The report's budgets and each method's recall (%) at them, in the report's order."""
    try:
        budgets = [int(budget) for budget in report["budgets"]]
        results = report["results"]
        series = {
            method: [round(100 * float(results[method][str(budget)]["recall"]), 1) for budget in budgets]
            for method in results
        }
    except (KeyError, TypeError, ValueError) as error:
        raise BenchInputError(
            f"not a bench-retrieval report (missing or malformed {error}); write one with "
            "bench-retrieval --json FILE"
        ) from None
    return budgets, series


def recall_chart_svg(report: dict[str, Any], *, title: str = "") -> str:
    import pygal
    from pygal.style import Style

    budgets, series = recall_series(report)
    styles = [_style_of(method, index) for index, method in enumerate(series)]
    queries = report.get("queries")
    subtitle = f" ({queries} queries)" if queries else ""
    chart = pygal.Line(
        title=title or f"{dataset_name(report)}: recall by token budget{subtitle}",
        x_title="token budget (cl100k tokens)",
        y_title="recall (%)",
        x_labels=[budget_label(budget) for budget in budgets],
        range=(0, 100),
        y_labels=list(range(0, 101, 10)),
        width=900,
        height=640,
        margin_bottom=40,  # pygal under-counts the legend rows at the bottom
        legend_at_bottom=True,
        legend_at_bottom_columns=3,
        legend_box_size=14,
        dots_size=3.5,
        show_y_guides=True,
        show_x_guides=True,
        truncate_legend=-1,
        js=[],  # no script: GitHub shows an SVG as an image, and the file stays self-contained
        style=Style(
            background="#ffffff",
            plot_background="#ffffff",
            foreground="#24292f",
            foreground_strong="#24292f",
            foreground_subtle="#d0d7de",
            # Light solid guides, so that only the methods' lines carry dashes.
            guide_stroke_color="#d8dee4",
            major_guide_stroke_color="#d8dee4",
            guide_stroke_dasharray="none",
            major_guide_stroke_dasharray="none",
            # pygal sets each line's width here, over the series' own stroke_style width: inherit it.
            stroke_width="inherit",
            colors=tuple(style.colour for style in styles),
            font_family="Helvetica, Arial, sans-serif",
            title_font_size=22,
            label_font_size=15,
            major_label_font_size=15,
            legend_font_size=15,
            value_font_size=13,
            tooltip_font_size=14,
        ),
    )
    # pygal names the chart (its CSS scope) with a random id; a fixed one makes the same report
    # give the same file (but for the date in pygal's comment), so a committed chart changes only
    # when its numbers do.
    chart.uuid = "recall-by-budget"
    for values, style in zip(series.values(), styles, strict=True):
        stroke = {"width": style.width, "linecap": "round", "linejoin": "round"}
        if style.dasharray:
            stroke["dasharray"] = style.dasharray
        chart.add(style.label, values, stroke_style=stroke)
    return str(chart.render(is_unicode=True))


def write_recall_chart(report: dict[str, Any], path: Path, *, title: str = "") -> None:
    svg = recall_chart_svg(report, title=title)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(svg, encoding="utf-8")
    except OSError as error:
        raise BenchInputError(f"--plot {path}: cannot write the chart ({error.strerror})") from None


def read_report(path: Path) -> dict[str, Any]:
    """A report written by ``bench-retrieval --json``."""
    try:
        report = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise BenchInputError(f"--json {path}: no such file") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise BenchInputError(f"--json {path}: not a readable JSON file ({error})") from None
    if not isinstance(report, dict):
        raise BenchInputError(f"--json {path}: expected a JSON object written by bench-retrieval --json")
    return report


def _style_of(method: str, index: int) -> LineStyle:
    return LINE_STYLES.get(method) or LineStyle(method, _OTHER_COLOURS[index % len(_OTHER_COLOURS)], 3)
