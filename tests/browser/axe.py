"""axe-core in the browser tests (issue 22 item 11): the axe.min.js that the dev extra
``axe-playwright-python`` bundles, read from the installed package and evaluated in the page under
test. The app never serves it."""

from __future__ import annotations

from functools import cache
from importlib.resources import files
from typing import Any

from tests.browser.conftest import WIDTHS

# The levels that fail a check: axe's "serious" and "critical" (not "moderate" or "minor").
FAILING = ("serious", "critical")


@cache
def axe_source() -> str:
    return files("axe_playwright_python").joinpath("axe.min.js").read_text(encoding="utf-8")


def axe_violations(page: Any) -> list[dict[str, Any]]:
    """The serious and critical violations axe finds in the page as it is now."""
    if not page.evaluate("() => typeof window.axe === 'object'"):
        page.evaluate(axe_source())  # evaluated, not a <script> tag: no CSP or served file involved
    results = page.evaluate("() => axe.run(document, { resultTypes: ['violations'] })")
    return [violation for violation in results["violations"] if violation["impact"] in FAILING]


def axe_check(page: Any, state: str, found: list[str]) -> None:
    """Run axe on the page at every test width; each serious or critical violation goes into
    ``found`` in words (state, width, rule, what it says, where)."""
    for label, (width, height) in WIDTHS.items():
        page.set_viewport_size({"width": width, "height": height})
        for violation in axe_violations(page):
            where = "; ".join(" ".join(node["target"]) for node in violation["nodes"][:5])
            found.append(
                f"{state} @ {label}: {violation['id']} ({violation['impact']}) {violation['help']} — {where}"
            )
    page.set_viewport_size({"width": 1440, "height": 900})
