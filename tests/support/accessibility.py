"""axe-core in the browser tests: its serious and critical violations on a page, on a desktop and a phone viewport.

axe-core comes bundled in the `axe-playwright-python` package (requirements/dev.txt): nothing is downloaded here."""

from __future__ import annotations

import pytest
from axe_playwright_python.sync_playwright import Axe
from playwright.sync_api import Page

from tests.support.browser import DESKTOP, PHONE

VIEWPORTS = [pytest.param(DESKTOP, id="desktop"), pytest.param(PHONE, id="phone")]
BLOCKING = ("serious", "critical")
AXE = Axe()
# axe-core's default rules, and two it leaves off by default: WCAG 2.2's target size (2.5.8), and an accessible name
# that does not contain the visible label (2.5.3, experimental in axe-core).
AXE_OPTIONS = {
    "resultTypes": ["violations"],
    "rules": {"target-size": {"enabled": True}, "label-content-name-mismatch": {"enabled": True}},
}


def axe_problems(page: Page) -> list[str]:
    """axe-core's serious and critical violations on the page as it is now, one readable line per element."""
    results = AXE.run(page, options=AXE_OPTIONS).response
    problems = []
    for violation in results["violations"]:
        if violation["impact"] not in BLOCKING:
            continue
        for node in violation["nodes"]:
            summary = node.get("failureSummary", "").replace("\n", " ")
            where = f"{node['target']}: {node['html'][:160]}"
            problems.append(f"{violation['id']} ({violation['impact']}) {where} | {summary}")
    return problems


def assert_accessible(page: Page) -> None:
    problems = axe_problems(page)
    assert not problems, "axe-core found:\n" + "\n".join(problems)
