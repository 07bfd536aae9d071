"""The recall chart (``fable_benchmarks.plot``) and ``python -m fable_benchmarks bench-plot``: an SVG drawn from the
report dict that ``bench-retrieval --json`` writes."""

from __future__ import annotations

import io
import json
import re
import xml.etree.ElementTree as ET
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command

from fable_benchmarks import BenchInputError
from fable_benchmarks.command import BenchCommand
from fable_benchmarks.plot import LINE_STYLES, recall_chart_svg
from tests.benchmarks import run_bench

SVG = "{http://www.w3.org/2000/svg}"
BUDGETS = (500, 1000, 2000, 4000)
RECALL = {  # per method, recall (share) at each budget
    "ceiling": (0.97, 0.97, 0.97, 0.97),
    "oracle": (0.90, 0.95, 0.97, 0.97),
    "bm25": (0.40, 0.50, 0.60, 0.65),
    "dense": (0.45, 0.48, 0.62, 0.70),
    "hybrid-256": (0.42, 0.63, 0.77, 0.86),
    "parent-child": (0.56, 0.67, 0.75, 0.81),
    "vector-no-lexical": (0.60, 0.75, 0.85, 0.90),
    "vector": (0.75, 0.86, 0.94, 0.96),
}


def _report(recall: Mapping[str, tuple[float, ...]] = RECALL) -> dict[str, Any]:
    """The part of a bench-retrieval report the chart reads, with other numbers beside it."""
    return {
        "docs": "../shared/datasets/dragonball/docs_en.jsonl",
        "queries": 40,
        "budgets": list(BUDGETS),
        "results": {
            method: {
                str(budget): {"recall": value, "eir": 0.1, "mean_tokens": budget * 0.9}
                for budget, value in zip(BUDGETS, values, strict=True)
            }
            for method, values in recall.items()
        },
    }


def _points(line: ET.Element) -> list[tuple[float, float]]:
    numbers = [float(n) for n in re.findall(r"-?\d+(?:\.\d+)?", line.get("d", ""))]
    return list(zip(numbers[::2], numbers[1::2], strict=True))


def _lines_by_legend(svg: str) -> dict[str, list[tuple[float, float]]]:
    """Each method's legend label and the points of its one line."""
    root = ET.fromstring(svg)
    legends = [
        "".join(group.itertext()).strip()
        for group in root.iter(f"{SVG}g")
        if "legend" in group.get("class", "").split()
    ]
    lines: dict[int, list[ET.Element]] = {}
    for group in root.iter(f"{SVG}g"):
        serie = re.search(r"\bserie-(\d+)\b", group.get("class", ""))
        if serie and "series" in group.get("class", "").split():
            paths = [p for p in group.iter(f"{SVG}path") if "line" in p.get("class", "").split()]
            lines.setdefault(int(serie.group(1)), []).extend(paths)
    assert all(len(paths) == 1 for paths in lines.values()), "one line per method"
    assert len(legends) == len(lines)
    return {legend: _points(lines[index][0]) for index, legend in enumerate(legends)}


def _y_guides(svg: str) -> dict[float, float]:
    """Each labelled value of the y axis and the height of its guide line."""
    guides = {}
    for group in ET.fromstring(svg).iter(f"{SVG}g"):
        if group.get("class") != "guides":
            continue
        path, text = group.find(f"{SVG}path"), group.find(f"{SVG}text")
        horizontal = re.fullmatch(r"M[\d.]+ ([\d.]+) h[\d.]+", path.get("d", "") if path is not None else "")
        if horizontal and text is not None and (text.text or "").isdigit():
            guides[float(text.text or 0)] = float(horizontal.group(1))
    return guides


def test_chart_has_one_line_per_method_that_follows_the_numbers() -> None:
    svg = recall_chart_svg(_report())
    root = ET.fromstring(svg)
    assert root.tag == f"{SVG}svg"
    assert not list(root.iter(f"{SVG}script")) or all(
        not script.get("{http://www.w3.org/1999/xlink}href") for script in root.iter(f"{SVG}script")
    ), "no external script: the file stands alone"
    title = "".join(next(t for t in root.iter(f"{SVG}text") if "title" in t.get("class", "")).itertext())
    assert "DragonBall" in title and "40 queries" in title
    texts = {"".join(t.itertext()).strip() for t in root.iter(f"{SVG}text")}
    assert {"recall (%)", "token budget (cl100k tokens)", "500", "1K", "2K", "4K"} <= texts

    lines = _lines_by_legend(svg)
    assert list(lines) == [LINE_STYLES[method].label for method in RECALL]
    for points in lines.values():
        assert len(points) == len(BUDGETS)
        xs = [x for x, _ in points]
        assert xs == sorted(xs) and len(set(xs)) == len(xs), "budgets left to right"
    # The same x for every method at one budget, and SVG's y grows downwards: a higher recall
    # is drawn higher, equal recalls at the same height.
    vector, bm25, dense = (lines[LINE_STYLES[m].label] for m in ("vector", "bm25", "dense"))
    assert [x for x, _ in vector] == [x for x, _ in bm25]
    for budget_index in range(len(BUDGETS)):
        heights = sorted(RECALL, key=lambda m: lines[LINE_STYLES[m].label][budget_index][1])
        recalls = [RECALL[m][budget_index] for m in heights]
        assert recalls == sorted(recalls, reverse=True), f"order of heights at {BUDGETS[budget_index]}"
    assert bm25[0][1] > dense[0][1] and bm25[1][1] < dense[1][1], "bm25 and dense cross between 500 and 1K"
    ceiling = lines[LINE_STYLES["ceiling"].label]
    assert len({y for _, y in ceiling}) == 1, "a flat ceiling is a level line"
    # Every point sits where the y axis puts its recall (%), on a 0-100 scale.
    guides = _y_guides(svg)
    assert {0.0, 100.0} <= set(guides)
    for method, values in RECALL.items():
        for (_, y), value in zip(lines[LINE_STYLES[method].label], values, strict=True):
            expected = guides[0.0] + (guides[100.0] - guides[0.0]) * value
            assert y == pytest.approx(expected, abs=0.01), f"{method} at {value:.0%}"


def test_line_styles_tell_engine_baselines_peers_and_references_apart() -> None:
    svg = recall_chart_svg(_report())
    css = "".join("".join(style.itertext()) for style in ET.fromstring(svg).iter(f"{SVG}style"))

    def stroke(method: str) -> str:
        index = list(RECALL).index(method)
        match = re.search(rf"\.series\.serie-{index}\s*\{{([^}}]*)\}}", css)
        assert match, f"a stroke rule for {method}"
        return match.group(1)

    def value(method: str, prop: str) -> str:
        found = re.search(rf"stroke-{prop}:\s*([^;]+)", stroke(method))
        return found.group(1).strip() if found else ""

    widths = {method: float(value(method, "width")) for method in RECALL}
    assert widths["vector"] > max(w for m, w in widths.items() if m != "vector"), "the engine is bold"
    assert value("vector", "dasharray") == value("vector-no-lexical", "dasharray") == "", "solid"
    dashes = {method: value(method, "dasharray") for method in ("ceiling", "oracle", "bm25", "dense")}
    assert all(dashes.values()), "references and baselines are not solid"
    assert dashes["ceiling"] == dashes["oracle"] != dashes["bm25"] == dashes["dense"], (
        "references dashed one way, baselines dotted another"
    )
    peers = {value(method, "dasharray") for method in ("hybrid-256", "parent-child")}
    assert len(peers) == 1 and peers.isdisjoint({dashes["oracle"], dashes["bm25"], ""}), (
        "the peers dash-dotted, unlike the references, the baselines and the engine"
    )


def test_unknown_method_still_gets_a_line_and_a_legend() -> None:
    lines = _lines_by_legend(recall_chart_svg(_report({**RECALL, "rerank-x": (0.1, 0.2, 0.3, 0.4)})))
    assert "rerank-x" in lines and len(lines) == len(RECALL) + 1


def test_report_without_results_is_refused() -> None:
    with pytest.raises(BenchInputError, match="not a bench-retrieval report"):
        recall_chart_svg({"budgets": [500]})
    with pytest.raises(BenchInputError, match="not a bench-retrieval report"):
        recall_chart_svg({"budgets": [500, 1000], "results": {"vector": {"500": {"recall": 0.5}}}})


@pytest.mark.django_db  # the command line checks the database before any subcommand
def test_bench_plot_draws_from_a_json_file(tmp_path: Path) -> None:
    report_path = tmp_path / "run.json"
    report_path.write_text(json.dumps(_report()))
    out_path = tmp_path / "charts" / "recall.svg"
    out = io.StringIO()
    call_command(BenchCommand(), "bench-plot", "--json", str(report_path), "--out", str(out_path), stdout=out)
    assert f"Wrote {out_path}" in out.getvalue()
    assert _lines_by_legend(out_path.read_text()) == _lines_by_legend(recall_chart_svg(_report()))

    code, result = run_bench("bench-plot", "--json", str(tmp_path / "missing.json"), "--out", str(out_path))
    assert code == 1 and "no such file" in result["error"]
    report_path.write_text("[1, 2]")
    code, result = run_bench("bench-plot", "--json", str(report_path), "--out", str(out_path))
    assert code == 1 and "expected a JSON object" in result["error"]
